//! What one listener's connections show of its settings and its clients', gathered as each
//! connection finishes (`Shown::add`): when each was established on the server and when it
//! stopped holding a place in the accept queue or a worker, the moments the listener dropped a
//! handshake ACK or a SYN, the requests it held half-open, its SYN-ACK series, the clients' SYN
//! series and when the clients gave up. `super::infer` reads it.

use crate::detect::schedule::Schedule;
use crate::detect::timeouts::GiveUps;
use crate::detect::{Outcome, Symptom, Symptoms};
use crate::flow::connection::Send;
use crate::flow::Connection;

/// Spans (and drops) kept per listener, at most, 24 bytes each: past it a connection is counted
/// in `unkept` only, and the estimates that rest on spans say so.
pub const MAX_SPANS: usize = 1 << 17;
/// Series that ran out kept per listener, at most.
const MAX_RAN_OUT: usize = 4096;
/// A send is on a schedule's interval when within this share of it...
const ON_SCHEDULE_SHARE: f64 = 0.2;
/// ...or this close to it (a timer fires a few jiffies late, a capture point adds a round trip).
const ON_SCHEDULE_NS: i64 = 60_000_000;

/// When a connection held a place on the server: established there between `from_ns` and
/// `settled_ns` (the same moment unless its handshake ACK was dropped), until its answer
/// (`served`) or its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Span {
    pub from_ns: i64,
    pub settled_ns: i64,
    pub until_ns: i64,
    pub served: bool,
}

/// What the listener dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Dropped {
    /// A handshake ACK: the accept queue was full (Linux v6.6 net/ipv4/tcp_minisocks.c:
    /// tcp_check_req() -> inet_csk_complete_hashdance() fails when tcp_v4_syn_recv_sock() finds
    /// sk_acceptq_is_full()).
    HandshakeAck,
    /// A SYN never answered before the client sent it again: a full accept queue drops it
    /// (net/ipv4/tcp_input.c: tcp_conn_request(): sk_acceptq_is_full()), so does a full SYN
    /// queue without SYN cookies, and so does the path.
    Syn,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListenDrop {
    pub time_ns: i64,
    pub what: Dropped,
}

/// A SYN-ACK series that stopped with the request still half-open, no RST from either side:
/// the server ran out of retries if the capture went on past the next send due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stopped {
    /// Timer re-sends in the series.
    pub resends: u32,
    /// When the next re-send was due.
    pub next_due_ns: i64,
}

/// The shape of a client's SYN series: its leading intervals of about 1 s, and whether the
/// interval after them doubled (about 2 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SynShape {
    pub one_second: u32,
    pub doubled: bool,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Shown {
    /// Connections established on the server, in the order they finished.
    pub spans: Vec<Span>,
    /// Requests the server held half-open: from its first SYN-ACK to the connection's
    /// establishment there, or to its last SYN-ACK's next due send.
    pub half_open: Vec<Span>,
    pub drops: Vec<ListenDrop>,
    /// Connections not kept in `spans`, `half_open` or `drops` past `MAX_SPANS`.
    pub unkept: u64,
    /// SYN-ACK series (a SYN-ACK re-sent), and the most timer re-sends in one.
    pub synack_series: u64,
    pub synack_resends: u32,
    pub stopped: Vec<Stopped>,
    /// Client SYN series of three sends or more, by shape; the most SYN re-sends in one series.
    pub syn_shapes: Vec<(SynShape, u64)>,
    pub syn_series: u64,
    pub syn_resends: u32,
    /// Connections whose request stalled after a SYN-ACK no timer re-sent (symptom
    /// syncookie_suspected).
    pub cookies: u64,
    /// When the clients gave up: a request's delay after it was sent, and after the first SYN.
    pub give_ups_after_request: GiveUps,
    pub give_ups_after_syn: GiveUps,
}

/// Is `seen` the interval `expected`, give or take timer slack?
pub fn on_interval(seen: i64, expected: i64) -> bool {
    (seen - expected).abs() <= ((expected as f64 * ON_SCHEDULE_SHARE) as i64).max(ON_SCHEDULE_NS)
}

/// When the server took `c` as established, at the earliest and at the latest: its handshake
/// ACK, unless that was dropped (a SYN-ACK re-sent after it, the request re-sent into a
/// half-open connection, or a cookie's stall). Then at the latest the server's first
/// acknowledgement of the request, or its answer; at the earliest the client's answer to the
/// last SYN-ACK re-sent before that (a bare ACK can create the connection, the request arriving
/// with its next re-send: net/ipv4/tcp_minisocks.c: tcp_check_req()), else its handshake ACK.
pub fn established_on_server(c: &Connection, symptoms: Symptoms) -> Option<(i64, i64)> {
    let taken_late = [Symptom::FinalAckDropped, Symptom::RequestUnacked, Symptom::SyncookieSuspected]
        .into_iter()
        .any(|s| symptoms.contains(s));
    if !taken_late {
        let ack = c.handshake_ack_time_ns.get()?;
        return Some((ack, ack));
    }
    let m = &c.milestones;
    let latest = [m.client_data_acked_ns.get(), m.server_data_ns.get()].into_iter().flatten().min()?;
    let synacks = c.retransmits.as_ref().map(|log| log.synack.as_slice()).unwrap_or_default();
    let resent_before = synacks.iter().skip(1).map(|s| s.time_ns).filter(|&t| t < latest).max();
    let earliest = resent_before.or(c.handshake_ack_time_ns.get()).unwrap_or(latest).min(latest);
    Some((earliest, latest))
}

/// From `c`'s establishment on the server to its answer, or the server's close, or an RST, or
/// its last packet; None when it was never established there.
pub fn span(c: &Connection, symptoms: Symptoms) -> Option<Span> {
    let (from_ns, settled_ns) = established_on_server(c, symptoms)?;
    let m = &c.milestones;
    let served = m.server_data_ns.get();
    let until = served
        .or(m.server_closed_ns.get())
        .or(m.first_rst().map(|r| r.time_ns))
        .unwrap_or(c.last_time_ns);
    Some(Span { from_ns, settled_ns, until_ns: until.max(settled_ns), served: served.is_some() })
}

/// The SYNs of `c` that no SYN-ACK answered before the client sent the next one, or at all.
fn dropped_syns(c: &Connection, syns: &[Send]) -> Vec<i64> {
    let first_synack = c.synack_time_ns.get();
    let mut out = Vec::new();
    for (i, syn) in syns.iter().enumerate() {
        let next = syns.get(i + 1).map(|s| s.time_ns);
        let answered_before_next = match (first_synack, next) {
            (Some(synack), Some(next)) => synack < next,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !answered_before_next {
            out.push(syn.time_ns);
        }
    }
    out
}

/// The shape of a SYN series' intervals; None for fewer than two intervals, or a first interval
/// that is not the 1 s initial RTO.
pub fn syn_shape(intervals: &[i64]) -> Option<SynShape> {
    const SECOND: i64 = 1_000_000_000;
    if intervals.len() < 2 || !on_interval(intervals[0], SECOND) {
        return None;
    }
    let one_second = intervals.iter().take_while(|&&i| on_interval(i, SECOND)).count() as u32;
    let doubled = intervals.get(one_second as usize).is_some_and(|&i| on_interval(i, 2 * SECOND));
    Some(SynShape { one_second, doubled })
}

impl Shown {
    pub fn add(&mut self, c: &Connection, outcome: Outcome, symptoms: Symptoms) {
        if c.partial {
            return;
        }
        self.give_ups_after_request.add(c, outcome);
        self.give_ups_after_syn.add_after_first_syn(c, outcome);
        if symptoms.contains(Symptom::SyncookieSuspected) {
            self.cookies += 1;
        }
        let full = self.spans.len() + self.half_open.len() + self.drops.len() >= 3 * MAX_SPANS;
        if full {
            self.unkept += 1;
        } else {
            self.add_places(c, symptoms);
        }
        if let Some(log) = &c.retransmits {
            self.add_synacks(c, symptoms, &log.synack);
            self.add_syns(&log.syn);
        }
    }

    fn add_places(&mut self, c: &Connection, symptoms: Symptoms) {
        let span = span(c, symptoms);
        if let Some(span) = span {
            self.spans.push(span);
        }
        if symptoms.contains(Symptom::FinalAckDropped) {
            if let Some(ack) = c.handshake_ack_time_ns.get() {
                self.drops.push(ListenDrop { time_ns: ack, what: Dropped::HandshakeAck });
            }
        }
        let refused = symptoms.contains(Symptom::Rejected) || c.milestones.syns_after_rst > 0;
        if let (Some(log), false) = (&c.retransmits, refused) {
            for time_ns in dropped_syns(c, &log.syn) {
                self.drops.push(ListenDrop { time_ns, what: Dropped::Syn });
            }
        }
        // A cookie SYN-ACK leaves no request behind (net/ipv4/syncookies.c).
        if let (Some(synack), false) = (c.synack_time_ns.get(), symptoms.contains(Symptom::SyncookieSuspected)) {
            let until = span.map(|s| s.from_ns).or_else(|| self.request_end(c)).unwrap_or(c.last_time_ns).max(synack);
            self.half_open.push(Span { from_ns: synack, settled_ns: synack, until_ns: until, served: false });
        }
    }

    /// When a request never established ended: an RST, or its SYN-ACK timer's next due send.
    fn request_end(&self, c: &Connection) -> Option<i64> {
        if let Some(r) = c.milestones.first_rst() {
            return Some(r.time_ns);
        }
        let synacks = c.retransmits.as_ref().map(|log| log.synack.as_slice()).unwrap_or_default();
        let resends = synacks.iter().skip(1).filter(|s| !s.triggered).count() as u32;
        let last = synacks.last().map(|s| s.time_ns).or(c.synack_time_ns.get())?;
        Some(last + Schedule::Synack.interval_ns(resends + 1))
    }

    fn add_synacks(&mut self, c: &Connection, symptoms: Symptoms, synacks: &[Send]) {
        if synacks.len() < 2 {
            return;
        }
        let resends = synacks.iter().skip(1).filter(|s| !s.triggered).count() as u32;
        self.synack_series += 1;
        self.synack_resends = self.synack_resends.max(resends);
        let half_open = established_on_server(c, symptoms).is_none();
        let last_by_timer = synacks.last().is_some_and(|s| !s.triggered);
        if let (true, true, None, Some(last)) = (half_open, last_by_timer, c.milestones.first_rst(), synacks.last()) {
            if self.stopped.len() < MAX_RAN_OUT {
                self.stopped.push(Stopped { resends, next_due_ns: last.time_ns + Schedule::Synack.interval_ns(resends + 1) });
            }
        }
    }

    fn add_syns(&mut self, syns: &[Send]) {
        if syns.len() < 2 {
            return;
        }
        self.syn_series += 1;
        self.syn_resends = self.syn_resends.max(syns.len() as u32 - 1);
        let intervals: Vec<i64> = syns.windows(2).map(|w| w[1].time_ns - w[0].time_ns).collect();
        if let Some(shape) = syn_shape(&intervals) {
            self.count_shape(shape, 1);
        }
    }

    fn count_shape(&mut self, shape: SynShape, n: u64) {
        match self.syn_shapes.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, count)) => *count += n,
            None => self.syn_shapes.push((shape, n)),
        }
    }

    /// Adds what another part of the capture showed (a merge of two analyses).
    pub fn merge(&mut self, other: Shown) {
        let room = (3 * MAX_SPANS).saturating_sub(self.spans.len() + self.half_open.len() + self.drops.len());
        let theirs = other.spans.len() + other.half_open.len() + other.drops.len();
        if theirs <= room {
            self.spans.extend(other.spans);
            self.half_open.extend(other.half_open);
            self.drops.extend(other.drops);
        } else {
            self.unkept += other.spans.len() as u64;
        }
        self.unkept += other.unkept;
        self.synack_series += other.synack_series;
        self.synack_resends = self.synack_resends.max(other.synack_resends);
        let room = MAX_RAN_OUT.saturating_sub(self.stopped.len());
        self.stopped.extend(other.stopped.into_iter().take(room));
        for (shape, n) in other.syn_shapes {
            self.count_shape(shape, n);
        }
        self.syn_series += other.syn_series;
        self.syn_resends = self.syn_resends.max(other.syn_resends);
        self.cookies += other.cookies;
        self.give_ups_after_request.merge(&other.give_ups_after_request);
        self.give_ups_after_syn.merge(&other.give_ups_after_syn);
    }
}
