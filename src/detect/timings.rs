//! What the retransmission series of a capture's problem connections show of the kernels'
//! settings (SYN schedules, SYN-ACK retries, first RTOs, path MTUs): counted as connections
//! finish (`digest`) or from the records kept (`episodes::Book::build`), merged across captures.

use super::Symptom;
use crate::flow::Connection;

/// Waits kept for a median, at most (the first ones).
const MAX_WAITS: usize = 262_144;

/// What the retransmission series of the problem connections show of the kernels' settings.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Timings {
    /// Per SYN schedule, the series long enough to tell it (three sends or more).
    pub syn_schedules: Vec<(String, u64)>,
    pub syn_series: u64,
    /// Waits before the first SYN re-send.
    pub first_syn_retry_ns: Vec<i64>,
    pub synack_series: u64,
    /// The most SYN-ACK re-sends a timer made in one series.
    pub synack_retries: u64,
    /// Series cut short at two timer re-sends while the request was still unanswered
    /// (inet_connection_sock.c: reqsk_timer_handler() lowers the retries when the queue is
    /// more than half full of old requests).
    pub synack_cut_short: u64,
    /// Waits before each data series' first re-send, when a timer (or duplicate ACKs) made it.
    pub first_rto_ns: Vec<i64>,
    /// Connections where path MTU discovery worked, and the smallest MTU a too-big error gave.
    pub pmtu_discovered: u64,
    pub pmtu_mtu: Option<u32>,
}

impl Timings {
    /// Adds the retransmission series of `c` (judged at `end_ns`), if it re-sent anything.
    pub fn add(&mut self, c: &Connection, end_ns: i64) {
        use super::SeriesKind;
        if c.retransmits.is_none() {
            return;
        }
        let v = super::judge(c, end_ns);
        for s in &v.series {
            let second = s.sends.get(1).and_then(|t| t.interval_ns);
            match s.kind {
                SeriesKind::Syn => {
                    self.syn_series += 1;
                    if s.sends.len() >= 3 {
                        self.count_schedule(s.schedule.slug(), 1);
                    }
                    if self.first_syn_retry_ns.len() < MAX_WAITS {
                        self.first_syn_retry_ns.extend(second);
                    }
                }
                SeriesKind::Synack => {
                    self.synack_series += 1;
                    let timed = s.sends.iter().skip(1).filter(|t| !t.triggered).count() as u64;
                    self.synack_retries = self.synack_retries.max(timed);
                    let first = s.sends.first().map_or(c.first_time_ns, |t| t.time_ns);
                    let waited = !c.handshake_completed() && c.last_time_ns - first > 7_500_000_000;
                    if timed == 2 && (waited || v.symptoms.contains(Symptom::ResetAfterExpiry)) {
                        self.synack_cut_short += 1;
                    }
                }
                // A re-send a too-big error triggered is no timer's (tcp_v4_mtu_reduced()).
                SeriesKind::Data if self.first_rto_ns.len() < MAX_WAITS => {
                    self.first_rto_ns.extend(s.sends.get(1).filter(|t| !t.triggered).and_then(|t| t.interval_ns))
                }
                SeriesKind::Data => {}
            }
        }
        if let Some(mtu) = super::icmp::pmtu_discovered(c, v.symptoms) {
            self.pmtu_discovered += 1;
            self.smallest_mtu(mtu);
        }
    }

    fn count_schedule(&mut self, slug: &str, n: u64) {
        match self.syn_schedules.iter_mut().find(|(s, _)| s == slug) {
            Some((_, count)) => *count += n,
            None => self.syn_schedules.push((slug.to_string(), n)),
        }
    }

    fn smallest_mtu(&mut self, mtu: Option<u32>) {
        self.pmtu_mtu = match (self.pmtu_mtu, mtu) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// Adds what other series showed (the digest's, another run's).
    pub fn merge(&mut self, other: Timings) {
        for (schedule, n) in other.syn_schedules {
            self.count_schedule(&schedule, n);
        }
        self.syn_series += other.syn_series;
        let room = MAX_WAITS.saturating_sub(self.first_syn_retry_ns.len());
        self.first_syn_retry_ns.extend(other.first_syn_retry_ns.into_iter().take(room));
        self.synack_series += other.synack_series;
        self.synack_retries = self.synack_retries.max(other.synack_retries);
        self.synack_cut_short += other.synack_cut_short;
        let room = MAX_WAITS.saturating_sub(self.first_rto_ns.len());
        self.first_rto_ns.extend(other.first_rto_ns.into_iter().take(room));
        self.pmtu_discovered += other.pmtu_discovered;
        self.smallest_mtu(other.pmtu_mtu);
    }
}
