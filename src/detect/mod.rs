//! Verdicts: what happened to each connection (its outcome), what went wrong on the way (its
//! symptoms), and each retransmission series timed against the kernel's schedule. The rules
//! are in docs/diagnosis.md; they read only the connection's record.

pub mod schedule;
pub mod servers;

use crate::flow::connection::{Connection, Send};
use crate::flow::{FrameRef, PacketRole, Side};
use schedule::Schedule;

/// Linux net.ipv4.tcp_syn_retries = 6 (include/net/tcp.h: TCP_SYN_RETRIES): seven SYNs in all.
const SYN_SENDS: u32 = 7;
/// How late a retransmission may be and still be the one the schedule predicts.
const SLACK_NS: i64 = 1_000_000_000;
/// A request unacknowledged this long, with no SYN-ACK re-sent, had no request socket behind it.
const COOKIE_STALL_NS: i64 = 1_000_000_000;
/// MSS values a SYN cookie can carry: net/ipv4/syncookies.c and net/ipv6/syncookies.c: msstab.
const COOKIE_MSS_V4: [u16; 4] = [536, 1300, 1440, 1460];
const COOKIE_MSS_V6: [u16; 4] = [1220, 1420, 1440, 8940];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    Completed,
    Open,
    Refused,
    TimedOut,
    Abandoned,
    ResetByServer,
    ResetByClient,
    Partial,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Completed,
        Outcome::Open,
        Outcome::Refused,
        Outcome::TimedOut,
        Outcome::Abandoned,
        Outcome::ResetByServer,
        Outcome::ResetByClient,
        Outcome::Partial,
    ];

    pub fn slug(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Open => "open",
            Outcome::Refused => "refused",
            Outcome::TimedOut => "timed_out",
            Outcome::Abandoned => "abandoned",
            Outcome::ResetByServer => "reset_by_server",
            Outcome::ResetByClient => "reset_by_client",
            Outcome::Partial => "partial",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Symptom {
    SynRetransmitted,
    SynackRetransmitted,
    FinalAckDropped,
    RequestUnacked,
    DataRetransmitted,
    SyncookieSuspected,
    ResetAfterAck,
    ResetAfterExpiry,
    Rejected,
}

impl Symptom {
    pub const ALL: [Symptom; 9] = [
        Symptom::SynRetransmitted,
        Symptom::SynackRetransmitted,
        Symptom::FinalAckDropped,
        Symptom::RequestUnacked,
        Symptom::DataRetransmitted,
        Symptom::SyncookieSuspected,
        Symptom::ResetAfterAck,
        Symptom::ResetAfterExpiry,
        Symptom::Rejected,
    ];

    pub fn slug(self) -> &'static str {
        match self {
            Symptom::SynRetransmitted => "syn_retransmitted",
            Symptom::SynackRetransmitted => "synack_retransmitted",
            Symptom::FinalAckDropped => "final_ack_dropped",
            Symptom::RequestUnacked => "request_unacked",
            Symptom::DataRetransmitted => "data_retransmitted",
            Symptom::SyncookieSuspected => "syncookie_suspected",
            Symptom::ResetAfterAck => "reset_after_ack",
            Symptom::ResetAfterExpiry => "reset_after_expiry",
            Symptom::Rejected => "rejected",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// A set of symptoms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Symptoms(u16);

impl Symptoms {
    pub fn insert(&mut self, s: Symptom) {
        self.0 |= 1 << s.index();
    }

    pub fn contains(self, s: Symptom) -> bool {
        self.0 & (1 << s.index()) != 0
    }

    pub fn iter(self) -> impl Iterator<Item = Symptom> {
        Symptom::ALL.into_iter().filter(move |&s| self.contains(s))
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeriesKind {
    Syn,
    Synack,
    Data,
}

impl SeriesKind {
    pub fn slug(self) -> &'static str {
        match self {
            SeriesKind::Syn => "syn",
            SeriesKind::Synack => "synack",
            SeriesKind::Data => "data",
        }
    }
}

/// One send of a series, timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedSend {
    pub at: FrameRef,
    pub time_ns: i64,
    /// Since the previous send (none for the first).
    pub interval_ns: Option<i64>,
    /// What the schedule predicts for that interval (none for the first, or a triggered send).
    pub expected_ns: Option<i64>,
    pub triggered: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    pub kind: SeriesKind,
    pub from: Side,
    /// For data: the absolute sequence number re-sent.
    pub seq: Option<u32>,
    pub schedule: Schedule,
    pub sends: Vec<TimedSend>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: Outcome,
    pub symptoms: Symptoms,
    pub series: Vec<Series>,
    /// What retransmissions cost the connection.
    pub added_latency_ns: i64,
}

/// The verdict on `c`, for a capture that ends at `end_ns`.
pub fn judge(c: &Connection, end_ns: i64) -> Verdict {
    let series = timed_series(c);
    Verdict { outcome: outcome(c, end_ns), symptoms: symptoms(c), added_latency_ns: added_latency_ns(c), series }
}

/// Only the outcome and symptoms (what the summary counts), without timing the series.
pub fn classify(c: &Connection, end_ns: i64) -> (Outcome, Symptoms) {
    (outcome(c, end_ns), symptoms(c))
}

fn syn_sends(c: &Connection) -> Vec<Send> {
    match &c.retransmits {
        Some(log) if !log.syn.is_empty() => log.syn.clone(),
        _ => c.syn_time_ns.map(|time_ns| Send { at: c.first, time_ns, triggered: false }).into_iter().collect(),
    }
}

fn intervals(sends: &[Send]) -> Vec<i64> {
    sends.windows(2).map(|w| w[1].time_ns - w[0].time_ns).collect()
}

fn outcome(c: &Connection, end_ns: i64) -> Outcome {
    if c.partial {
        return Outcome::Partial;
    }
    if let Some(rst) = c.milestones.first_rst {
        return match (rst.from, rst.answers) {
            (Side::Server, Some(PacketRole::Syn)) => Outcome::Refused,
            (Side::Server, _) => Outcome::ResetByServer,
            (Side::Client, _) => Outcome::ResetByClient,
        };
    }
    let fin = c.counts.iter().any(|d| d.fin);
    if c.handshake_completed() {
        let client_sent = c.milestones.client_data_ns.is_some();
        let server_sent = c.milestones.server_data_ns.is_some();
        return match (client_sent, server_sent, fin) {
            (true, true, _) => Outcome::Completed,
            (true, false, true) => Outcome::Abandoned,
            (_, _, true) => Outcome::Completed,
            _ => Outcome::Open,
        };
    }
    if c.syn_count >= SYN_SENDS {
        return Outcome::TimedOut;
    }
    // Still within its SYN retries when the capture ended, or stopped early?
    let sends = syn_sends(c);
    let Some(last) = sends.last() else { return Outcome::Open };
    let schedule = schedule::fit_syn(&intervals(&sends));
    let next_due = last.time_ns + schedule.interval_ns(c.syn_count.max(1), 0) + SLACK_NS;
    if end_ns > next_due {
        Outcome::Abandoned
    } else {
        Outcome::Open
    }
}

fn symptoms(c: &Connection) -> Symptoms {
    let mut s = Symptoms::default();
    if c.syn_count > 1 {
        s.insert(Symptom::SynRetransmitted);
    }
    if c.synack_count > 1 {
        s.insert(Symptom::SynackRetransmitted);
    }
    if let Some(log) = &c.retransmits {
        let acked_at = c.handshake_ack_time_ns;
        if log.synack.iter().skip(1).any(|send| !send.triggered && acked_at.is_some_and(|t| send.time_ns > t)) {
            s.insert(Symptom::FinalAckDropped);
        }
        if log.data.iter().any(|d| d.into_half_open) {
            s.insert(Symptom::RequestUnacked);
        }
        if log.data.iter().any(|d| !d.into_half_open) {
            s.insert(Symptom::DataRetransmitted);
        }
    }
    let total_data_retransmits: u32 = c.counts.iter().map(|d| d.data_retransmits).sum();
    let logged: usize = c.retransmits.as_ref().map_or(0, |l| l.data.iter().map(|d| d.sends.len().saturating_sub(1)).sum());
    if total_data_retransmits as usize > logged && !s.contains(Symptom::RequestUnacked) {
        s.insert(Symptom::DataRetransmitted);
    }
    if syncookie_suspected(c, s) {
        s.insert(Symptom::SyncookieSuspected);
    }
    if let Some(rst) = c.milestones.first_rst {
        match (rst.from, rst.answers) {
            (_, Some(PacketRole::Syn)) => s.insert(Symptom::Rejected),
            (Side::Server, Some(PacketRole::HandshakeAck)) => s.insert(Symptom::ResetAfterAck),
            (Side::Server, Some(PacketRole::Data)) if rst.answers_first_data => s.insert(Symptom::ResetAfterAck),
            (Side::Server, Some(PacketRole::Retransmit)) => s.insert(Symptom::ResetAfterExpiry),
            _ => {}
        }
    }
    s
}

/// The handshake completed, the client's request then went unacknowledged for over a second,
/// and the server never re-sent its SYN-ACK: no request socket was waiting for that ACK, as
/// when the SYN-ACK was a cookie. A SYN-ACK whose MSS no cookie can carry was not one.
fn syncookie_suspected(c: &Connection, s: Symptoms) -> bool {
    let (Some(ack_ns), Some(data_ns)) = (c.handshake_ack_time_ns, c.milestones.client_data_ns) else { return false };
    let stalled_until = c.milestones.client_data_acked_ns.unwrap_or(c.last_time_ns);
    let stalled = s.contains(Symptom::RequestUnacked) && stalled_until - data_ns.max(ack_ns) > COOKIE_STALL_NS;
    let table = if c.client.ip.is_ipv4() { COOKIE_MSS_V4 } else { COOKIE_MSS_V6 };
    let mss_fits = c.options[Side::Server.index()].and_then(|o| o.mss).is_none_or(|mss| table.contains(&mss));
    stalled && c.synack_count == 1 && mss_fits
}

fn timed_series(c: &Connection) -> Vec<Series> {
    let Some(log) = &c.retransmits else { return Vec::new() };
    let mut out = Vec::new();
    if log.syn.len() > 1 {
        let schedule = schedule::fit_syn(&intervals(&log.syn));
        out.push(time(SeriesKind::Syn, Side::Client, None, schedule, &log.syn, 0));
    }
    if log.synack.len() > 1 {
        out.push(time(SeriesKind::Synack, Side::Server, None, Schedule::Synack, &log.synack, 0));
    }
    let handshake_retransmitted = c.syn_count > 1 || c.synack_count > 1;
    let timestamps = c.options.iter().all(|o| o.is_some_and(|o| o.timestamps));
    let first_rto = schedule::first_data_rto_ns(round_trip_ns(c), handshake_retransmitted, timestamps);
    for d in &log.data {
        out.push(time(SeriesKind::Data, d.from, Some(d.seq), Schedule::DataRto, &d.sends, first_rto));
    }
    out
}

/// Each send's interval, and the schedule's for timer-driven ones (triggered sends do not count).
fn time(kind: SeriesKind, from: Side, seq: Option<u32>, schedule: Schedule, sends: &[Send], first_rto_ns: i64) -> Series {
    let mut timed = Vec::with_capacity(sends.len());
    let mut retries = 0u32;
    let mut previous: Option<i64> = None;
    for send in sends {
        let interval_ns = previous.map(|p| send.time_ns - p);
        let expected_ns = match (previous, send.triggered) {
            (Some(_), false) => {
                retries += 1;
                Some(schedule.interval_ns(retries, first_rto_ns))
            }
            _ => None,
        };
        timed.push(TimedSend { at: send.at, time_ns: send.time_ns, interval_ns, expected_ns, triggered: send.triggered });
        previous = Some(send.time_ns);
    }
    Series { kind, from, seq, schedule, sends: timed }
}

/// The handshake's round trip: from the SYN that was answered to the client's ACK.
fn round_trip_ns(c: &Connection) -> Option<i64> {
    let ack = c.handshake_ack_time_ns?;
    let last_syn = syn_sends(c).iter().filter(|s| s.time_ns <= ack).map(|s| s.time_ns).max()?;
    Some(ack - last_syn)
}

/// From the first to the last SYN, plus from the client's first data to its last re-send into
/// a half-open connection.
fn added_latency_ns(c: &Connection) -> i64 {
    let span = |sends: &[Send]| match (sends.first(), sends.last()) {
        (Some(a), Some(b)) => b.time_ns - a.time_ns,
        _ => 0,
    };
    let Some(log) = &c.retransmits else { return 0 };
    let request = log.data.iter().filter(|d| d.into_half_open).map(|d| span(&d.sends)).max().unwrap_or(0);
    span(&log.syn) + request
}
