//! Episodes: per server endpoint (a listener), its problem connections in time order, split where
//! nothing failed for a while, each reduced to its marks: its outcome, its symptoms and its facts.
//! The diagnosis's rules count, select and claim over marks here; they never loop over
//! connections. The rules are in docs/diagnosis.md.

use std::net::IpAddr;

use rustc_hash::{FxHashMap, FxHashSet};

use super::facts::{self, Fact, Facts};
use super::scans::ScanBook;
use super::servers::ServerStats;
use super::{Outcome, Symptom};
use crate::flow::{Connection, Endpoint};

/// Problem connections further apart than this are separate episodes.
pub const EPISODE_GAP_NS: i64 = 30 * 1_000_000_000;
/// A SYN or request this close to a span in which its listener's accept queue was full belongs
/// to that queue: a full accept queue drops SYNs too (Linux v6.6 net/ipv4/tcp_input.c:
/// tcp_conn_request(): sk_acceptq_is_full()), and a client's first SYN re-send comes 1 s later.
pub const QUEUE_WINDOW_PAD_NS: i64 = 1_000_000_000;

/// Every mark's name: outcomes, then symptoms, then facts. A mark is a bit of `Member::marks`.
pub fn mark_names() -> Vec<&'static str> {
    let outcomes = Outcome::ALL.iter().map(|o| o.slug());
    let symptoms = Symptom::ALL.iter().map(|s| s.slug());
    let facts = Fact::ALL.iter().map(|f| f.slug());
    outcomes.chain(symptoms).chain(facts).collect()
}

fn outcome_bit(o: Outcome) -> u64 {
    1 << o.index()
}

fn symptom_bit(s: Symptom) -> u64 {
    1 << (Outcome::ALL.len() + s.index())
}

fn fact_bit(f: Fact) -> u64 {
    1 << (Outcome::ALL.len() + Symptom::ALL.len() + f.index())
}

/// The bit of a mark, by name.
pub fn mark_bit(name: &str) -> Option<u64> {
    mark_names().iter().position(|&n| n == name).map(|i| 1 << i)
}

/// One problem connection, as the rules see it.
#[derive(Clone, Copy, Debug)]
pub struct Member {
    /// Where its record is in `Analysis::connections`.
    pub index: u32,
    pub id: u64,
    pub first_ns: i64,
    pub last_ns: i64,
    pub marks: u64,
    /// Claimed by a rule that explains it: later rules leave it alone unless they ask for it.
    pub claimed: bool,
}

impl Member {
    pub fn has(&self, fact: Fact) -> bool {
        self.marks & fact_bit(fact) != 0
    }
}

/// Which members a rule asks for: all of `all`, at least one of `any` (when not empty), none
/// of `none`, and unclaimed ones only unless `claimed` is set.
#[derive(Clone, Copy, Debug, Default)]
pub struct Filter {
    pub all: u64,
    pub any: u64,
    pub none: u64,
    pub claimed: bool,
}

impl Filter {
    pub fn matches(&self, m: &Member) -> bool {
        (self.claimed || !m.claimed)
            && m.marks & self.all == self.all
            && (self.any == 0 || m.marks & self.any != 0)
            && m.marks & self.none == 0
    }
}

#[derive(Clone, Debug)]
pub struct Episode {
    pub server: Endpoint,
    /// In order of first packet.
    pub members: Vec<Member>,
}

impl Episode {
    pub fn first_ns(&self) -> i64 {
        self.members.iter().map(|m| m.first_ns).min().unwrap_or(0)
    }

    pub fn last_ns(&self) -> i64 {
        self.members.iter().map(|m| m.last_ns).max().unwrap_or(0)
    }

    /// Positions of the members that match.
    pub fn select(&self, filter: &Filter) -> Vec<u32> {
        (0..self.members.len() as u32).filter(|&i| self.members.get(i as usize).is_some_and(|m| filter.matches(m))).collect()
    }

    pub fn claim(&mut self, positions: &[u32]) {
        for &i in positions {
            if let Some(m) = self.members.get_mut(i as usize) {
                m.claimed = true;
            }
        }
    }
}

/// The problem connections of a whole capture, per listener, with the facts that need more than
/// one connection (scans, queue windows, silent hosts) decided.
#[derive(Default)]
pub struct Book {
    pub scans: ScanBook,
    pub timings: Timings,
    by_server: FxHashMap<Endpoint, Vec<Member>>,
}

/// What the retransmission series of the problem connections show of the kernels' settings.
#[derive(Clone, Debug, Default)]
pub struct Timings {
    /// Per SYN schedule, the series long enough to tell it (three sends or more).
    pub syn_schedules: Vec<(&'static str, u64)>,
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
    fn add(&mut self, c: &Connection, v: &super::Verdict) {
        use super::SeriesKind;
        for s in &v.series {
            let second = s.sends.get(1).and_then(|t| t.interval_ns);
            match s.kind {
                SeriesKind::Syn => {
                    self.syn_series += 1;
                    if s.sends.len() >= 3 {
                        let slug = s.schedule.slug();
                        match self.syn_schedules.iter_mut().find(|(name, _)| *name == slug) {
                            Some((_, n)) => *n += 1,
                            None => self.syn_schedules.push((slug, 1)),
                        }
                    }
                    self.first_syn_retry_ns.extend(second);
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
                SeriesKind::Data => self.first_rto_ns.extend(s.sends.get(1).filter(|t| !t.triggered).and_then(|t| t.interval_ns)),
            }
        }
        if let Some(mtu) = super::icmp::pmtu_discovered(c, v.symptoms) {
            self.pmtu_discovered += 1;
            self.pmtu_mtu = match (self.pmtu_mtu, mtu) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
    }
}

impl Book {
    /// Reads every kept record once; `servers` are the statistics of every connection (also the
    /// ones not kept), which say whether a host ever sent a packet.
    pub fn build(connections: &[Connection], end_ns: i64, servers: &[&ServerStats]) -> Book {
        let mut book = Book::default();
        let mut spoke: FxHashMap<IpAddr, u64> = FxHashMap::default();
        for s in servers {
            *spoke.entry(s.server.ip).or_default() += s.spoke;
        }
        let mut silent: FxHashSet<IpAddr> = spoke.into_iter().filter(|&(_, n)| n == 0).map(|(ip, _)| ip).collect();
        // A client that sent more than SYNs (an ACK, data) had heard from the server: the capture
        // misses that direction, the host was not silent.
        for c in connections {
            if silent.contains(&c.server.ip) && c.counts[crate::flow::Side::Client.index()].packets > u64::from(c.syn_count) {
                silent.remove(&c.server.ip);
            }
        }
        let mut troubles: FxHashMap<Endpoint, Vec<((i64, i64), usize)>> = FxHashMap::default();
        let mut spans: FxHashMap<Endpoint, Vec<(i64, i64)>> = FxHashMap::default();
        for (index, c) in connections.iter().enumerate() {
            let (outcome, symptoms) = super::classify(c, end_ns);
            if !super::servers::has_problem(outcome, symptoms) {
                continue;
            }
            if c.retransmits.is_some() {
                book.timings.add(c, &super::judge(c, end_ns));
            }
            let mut f: Facts = facts::of(c, outcome, symptoms);
            if silent.contains(&c.server.ip) {
                f.insert(Fact::SilentHost);
            }
            if f.contains(Fact::Probe) {
                let open = c.synack_count > 0;
                let refused = outcome == Outcome::Refused;
                book.scans.add(c.client.ip, c.server, c.first, c.first_time_ns, open, refused, f.contains(Fact::OneSyn));
            }
            let marks = outcome_bit(outcome)
                | symptoms.iter().fold(0, |bits, s| bits | symptom_bit(s))
                | Fact::ALL.iter().filter(|&&x| f.contains(x)).fold(0, |bits, &x| bits | fact_bit(x));
            let members = book.by_server.entry(c.server).or_default();
            if f.contains(Fact::QueueSign) {
                spans.entry(c.server).or_default().push(facts::queue_full_span(c));
            } else if troubled(symptoms, f) {
                troubles.entry(c.server).or_default().push((facts::trouble_span(c, f), members.len()));
            }
            members.push(Member { index: index as u32, id: c.id, first_ns: c.first_time_ns, last_ns: c.last_time_ns, marks, claimed: false });
        }
        for (server, members) in book.by_server.iter_mut() {
            if let Some(spans) = spans.get(server) {
                let mut troubles = troubles.remove(server).unwrap_or_default();
                for i in in_queue_windows(spans, &mut troubles) {
                    if let Some(m) = members.get_mut(i) {
                        m.marks |= fact_bit(Fact::InQueueWindow);
                    }
                }
            }
            for m in members.iter_mut() {
                let c = &connections[m.index as usize];
                if m.has(Fact::Probe) && book.scans.is_scan(c.client.ip, c.server.ip) {
                    m.marks |= fact_bit(Fact::ScanProbe);
                }
            }
            members.sort_by_key(|m| (m.first_ns, m.id));
        }
        book
    }

    /// The servers with problem connections, in order.
    pub fn servers(&self) -> Vec<Endpoint> {
        let mut out: Vec<Endpoint> = self.by_server.keys().copied().collect();
        out.sort();
        out
    }

    /// `server`'s episodes, in time order.
    pub fn episodes(&self, server: Endpoint) -> Vec<Episode> {
        let Some(members) = self.by_server.get(&server) else { return Vec::new() };
        let mut out = Vec::new();
        let mut current: Vec<Member> = Vec::new();
        let mut end = i64::MIN;
        for m in members {
            if !current.is_empty() && m.first_ns.saturating_sub(end) > EPISODE_GAP_NS {
                out.push(Episode { server, members: std::mem::take(&mut current) });
                end = i64::MIN;
            }
            end = end.max(m.last_ns);
            current.push(*m);
        }
        if !current.is_empty() {
            out.push(Episode { server, members: current });
        }
        out
    }
}

/// Something a full accept queue does to a connection: its SYN or request re-sent, a connect
/// that never got a SYN-ACK, or a request left half-open.
fn troubled(symptoms: super::Symptoms, f: Facts) -> bool {
    let resent = [Symptom::SynRetransmitted, Symptom::RequestUnacked, Symptom::DataRetransmitted];
    resent.iter().any(|&s| symptoms.contains(s)) || f.contains(Fact::NeverConnected) || f.contains(Fact::HalfOpen)
}

/// The spans in which a listener showed a full accept queue, padded and joined.
fn queue_windows(spans: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut padded: Vec<(i64, i64)> =
        spans.iter().map(|&(a, b)| (a.saturating_sub(QUEUE_WINDOW_PAD_NS), b.saturating_add(QUEUE_WINDOW_PAD_NS))).collect();
    padded.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(padded.len());
    for (a, b) in padded {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Which troubles (span, member) overlap a queue-full window. A trouble that overlaps one widens
/// it to cover the trouble, padded: SYNs dropped back to back, before the first ACK could be
/// dropped and show the queue, are the same full queue.
fn in_queue_windows(spans: &[(i64, i64)], troubles: &mut [((i64, i64), usize)]) -> Vec<usize> {
    let mut windows = queue_windows(spans);
    troubles.sort_unstable();
    let mut inside = vec![false; troubles.len()];
    let overlaps = |w: &(i64, i64), (a, b): (i64, i64)| a <= w.1 && b >= w.0;
    // Forward, widening ends; then backward, widening starts.
    for (k, &(span, _)) in troubles.iter().enumerate() {
        if let Some(w) = windows.iter_mut().find(|w| overlaps(w, span)) {
            w.1 = w.1.max(span.1.saturating_add(QUEUE_WINDOW_PAD_NS));
            inside[k] = true;
        }
    }
    for (k, &(span, _)) in troubles.iter().enumerate().rev() {
        if let Some(w) = windows.iter_mut().find(|w| overlaps(w, span)) {
            w.0 = w.0.min(span.0.saturating_sub(QUEUE_WINDOW_PAD_NS));
            inside[k] = true;
        }
    }
    troubles.iter().zip(inside).filter(|(_, yes)| *yes).map(|(&(_, i), _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn test_queue_windows_pad_and_join_overlapping_spans() {
        let w = queue_windows(&[(10 * S, 12 * S), (13 * S, 14 * S), (30 * S, 31 * S)]);
        assert_eq!(w, vec![(9 * S, 15 * S), (29 * S, 32 * S)]);
    }

    #[test]
    fn test_troubles_back_to_back_before_the_first_sign_belong_to_the_window() {
        // A sign from 3 s on; SYNs dropped from 1.8 to 2.8 s, 0.9 to 1.9 s and 0 to 1 s chain back
        // to it; one at -5 s is too far, one at 20 s too late.
        let at = |a: i64, b: i64| (a * S / 10, b * S / 10);
        let mut troubles = vec![(at(-50, -49), 0), (at(0, 10), 1), (at(9, 19), 2), (at(18, 28), 3), (at(200, 210), 4)];
        let mut inside = in_queue_windows(&[(3 * S, 4 * S)], &mut troubles);
        inside.sort_unstable();
        assert_eq!(inside, vec![1, 2, 3]);
    }

    #[test]
    fn test_mark_names_are_unique_and_fit_the_bits() {
        let names = mark_names();
        let unique: FxHashSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len());
        assert!(names.len() <= 64);
        assert_eq!(mark_bit("completed"), Some(1));
        assert_eq!(mark_bit("syn_unanswered"), Some(fact_bit(Fact::SynUnanswered)));
        assert_eq!(mark_bit("no_such_mark"), None);
    }

    #[test]
    fn test_filter_skips_claimed_members_unless_asked() {
        let m = Member { index: 0, id: 0, first_ns: 0, last_ns: 0, marks: fact_bit(Fact::HalfOpen), claimed: true };
        let f = Filter { all: fact_bit(Fact::HalfOpen), ..Filter::default() };
        assert!(!f.matches(&m));
        assert!(Filter { claimed: true, ..f }.matches(&m));
        assert!(!Filter { claimed: true, none: fact_bit(Fact::HalfOpen), ..f }.matches(&m));
    }
}
