//! Prometheus metrics of a watched capture (`pcapq watch --metrics HOST:PORT -`): per listener,
//! counts since the start of the capture, kept up to date as segments arrive so that a scrape
//! (`Metrics::snapshot`) costs what the listeners do, not what the connections do.
//!
//! A connection is followed from its first segment (`flow::stage::Change`) until it leaves the
//! tracker's hot table (`flow::store::ConnectionStore::take_ends`: retired, expired, evicted or
//! replaced on its 4-tuple) or the input ends; then its outcome is counted and its state
//! dropped, so memory follows the connections live at once.
//!
//! Series are bounded: at most `max_listeners` listeners are named, the others are summed
//! into one `other` row (`Metrics::rebalance` says how a slot changes hands).

use rustc_hash::{FxHashMap, FxHashSet};

use super::SIGNS;
use crate::decode::icmp::{IcmpKind, IcmpMessage, Quote};
use crate::detect::{Outcome, Symptoms};
use crate::flow::stage::Change;
use crate::flow::{Connection, Endpoint, PacketRole, Side};

/// Histogram upper bounds, in seconds (+Inf is implied). A SYN lost once and re-sent by its
/// timer adds the timeout: 1, 3, 7, 15, 31, 63 s after the first SYN with the initial RTO of
/// 1 s doubling (Linux v6.6 include/net/tcp.h: TCP_TIMEOUT_INIT; net/ipv4/tcp_timer.c:
/// tcp_retransmit_timer()), or 1, 2, 3, 4 s with net.ipv4.tcp_syn_linear_timeouts (Linux 6.5+).
/// Each of those, plus a round trip under half a second, lands in a bucket of its own (the
/// fifth linear step, 5 s, shares (5, 7.5] with 7 s).
pub const BUCKETS: [f64; 18] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.5, 3.5, 5.0, 7.5, 15.5, 31.5, 63.5];

/// Listeners named unless `analyze_stdin(metrics_listeners=...)` says otherwise.
pub const DEFAULT_MAX_LISTENERS: usize = 20;
/// Capture time between two chances for a busy unnamed listener to take the slot of a named
/// one that had no connection since the last.
pub const REBALANCE_NS: i64 = 60 * 1_000_000_000;
/// Unnamed listeners whose connections are counted per period, per named slot.
const CANDIDATES_PER_SLOT: usize = 16;

/// What a connection's first RST answered (`resets`): a packet role, or "other" when the
/// tracker could not tell.
pub const RESET_ANSWERS: [&str; PacketRole::COUNT + 1] = {
    let mut answers = ["other"; PacketRole::COUNT + 1];
    let mut i = 0;
    while i < PacketRole::COUNT {
        answers[i] = PacketRole::ALL[i].slug();
        i += 1;
    }
    answers
};

fn reset_answer_index(answered: Option<PacketRole>) -> usize {
    answered.map_or(PacketRole::COUNT, PacketRole::index)
}

/// A Prometheus histogram: counts per bucket (`BUCKETS`, then +Inf), not cumulative.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    pub counts: [u64; BUCKETS.len() + 1],
    pub sum_ns: i128,
    pub count: u64,
}

impl Histogram {
    pub fn observe(&mut self, ns: i64) {
        let seconds = ns as f64 / 1e9;
        // A bound is inclusive (Prometheus `le`).
        let bucket = BUCKETS.iter().position(|&le| seconds <= le).unwrap_or(BUCKETS.len());
        self.counts[bucket] += 1;
        self.sum_ns += i128::from(ns);
        self.count += 1;
    }

    pub fn sum_seconds(&self) -> f64 {
        self.sum_ns as f64 / 1e9
    }
}

/// One listener's counts since it was named (or, for `other`, since the start).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// Connections whose first SYN arrived (not partial: `Interval::connections`' rule).
    pub connections: u64,
    /// Connections the server answered for the first time (its first data).
    pub answered: u64,
    /// Connections that ended, by `Outcome::index`.
    pub ended: [u64; Outcome::COUNT],
    /// Segments showing each sign, by `SIGNS` position (the intervals' reading).
    pub signs: [u64; SIGNS.len()],
    /// Connections reset, by the side of their first RST and what it answered (`RESET_ANSWERS`).
    pub resets: [[u64; RESET_ANSWERS.len()]; 2],
    /// ICMP errors tied to its connections, by `IcmpKind::ALL` position.
    pub icmp: [u64; IcmpKind::COUNT],
    /// First SYN to the client's handshake ACK.
    pub handshake: Histogram,
    /// First SYN to the server's first data.
    pub first_byte: Histogram,
    /// Per connection, what its retransmissions added (`Live::delay_ns`), when not nothing.
    pub retransmission_delay: Histogram,
    /// A gauge: connections established for the client, neither answered nor closed or reset
    /// yet. An estimate of the accept queue (Linux v6.6 net/ipv4/tcp_minisocks.c:
    /// tcp_check_req() queues the child on the handshake ACK; accept() takes it), plus the
    /// accepted ones still unanswered.
    pub waiting: u64,
}

impl Row {
    fn any(&self) -> bool {
        let counts = [self.connections, self.answered, self.waiting, self.handshake.count, self.first_byte.count, self.retransmission_delay.count];
        counts.iter().chain(&self.ended).chain(&self.signs).chain(self.resets.iter().flatten()).chain(&self.icmp).any(|&n| n > 0)
    }
}

/// What the metrics keep of a connection while it is live.
#[derive(Clone, Copy, Debug)]
struct Live {
    server: Endpoint,
    /// Its first SYN (none for a partial connection).
    first_syn_ns: Option<i64>,
    /// Its last SYN before the handshake ACK: the copy that was answered.
    last_syn_ns: i64,
    /// The first copy of the client's request, and the last one sent before the server
    /// acknowledged it.
    request_ns: Option<(i64, i64)>,
    /// Counted in its listener's `waiting`.
    waiting: bool,
    /// Its retransmission delay was observed (once answered, or at its end).
    delay_seen: bool,
}

impl Live {
    /// From the first SYN to the SYN copy that was answered, plus from the first copy of the
    /// request to the copy that was acknowledged (`detect::added_latency_ns` reads the same
    /// from the whole record).
    fn delay_ns(&self) -> i64 {
        let syn = self.first_syn_ns.map_or(0, |first| self.last_syn_ns - first);
        let request = self.request_ns.map_or(0, |(first, last)| last - first);
        syn.max(0) + request.max(0)
    }
}

#[derive(Clone, Debug)]
struct Slot {
    listener: Endpoint,
    row: Row,
    /// Connections since the last rebalance.
    recent: u64,
}

/// One listener's row as a scrape reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerMetrics {
    /// None: `other`.
    pub listener: Option<Endpoint>,
    pub row: Row,
    /// The signs of its open episode (of any unnamed listener's, for `other`), if one is open.
    pub episode: Option<Symptoms>,
}

/// Everything a scrape reads: O(listeners) to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub segments: u64,
    pub latest_ns: Option<i64>,
    pub dropped: Option<u64>,
    /// Distinct unnamed listeners with a connection in this period or the last (as far as the
    /// bounded candidate map holds them: at most `CANDIDATES_PER_SLOT` per slot).
    pub listeners_other: u64,
    /// Named listeners by endpoint, then `other` if it has any count.
    pub listeners: Vec<ListenerMetrics>,
}

#[derive(Debug)]
pub struct Metrics {
    max_listeners: usize,
    slots: Vec<Slot>,
    named: FxHashMap<Endpoint, usize>,
    other: Row,
    /// Connections of unnamed listeners in this period, approximately: at most
    /// `CANDIDATES_PER_SLOT * max_listeners` listeners, the smallest count making room
    /// (space-saving: a newcomer starts from the count it replaced, plus one).
    candidates: FxHashMap<Endpoint, u64>,
    /// The unnamed listeners of the last period, for `listeners_other`.
    previous: FxHashSet<Endpoint>,
    period_start_ns: Option<i64>,
    live: FxHashMap<u64, Live>,
    dropped: Option<u64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(DEFAULT_MAX_LISTENERS)
    }
}

/// The listener an ICMP error tied to a connection (`IcmpMatch::Tied(side)`) concerns: the
/// quoted packet's destination when the client sent it, its source when the server did.
pub fn icmp_listener(message: &IcmpMessage, answers: Side) -> Option<Endpoint> {
    let Quote::Tcp(q) = message.quote else { return None };
    Some(match answers {
        Side::Client => Endpoint { ip: q.dst, port: q.dst_port },
        Side::Server => Endpoint { ip: q.src, port: q.src_port },
    })
}

impl Metrics {
    pub fn new(max_listeners: usize) -> Metrics {
        Metrics {
            max_listeners,
            slots: Vec::new(),
            named: FxHashMap::default(),
            other: Row::default(),
            candidates: FxHashMap::default(),
            previous: FxHashSet::default(),
            period_start_ns: None,
            live: FxHashMap::default(),
            dropped: None,
        }
    }

    /// The slot of `server`: its own, or a free one (named from now on); none: `other`.
    fn slot(&mut self, server: Endpoint) -> Option<usize> {
        if let Some(&slot) = self.named.get(&server) {
            return Some(slot);
        }
        if self.slots.len() >= self.max_listeners {
            return None;
        }
        self.named.insert(server, self.slots.len());
        self.slots.push(Slot { listener: server, row: Row::default(), recent: 0 });
        Some(self.slots.len() - 1)
    }

    /// The row `server`'s counts go to.
    fn row(&mut self, server: Endpoint) -> &mut Row {
        match self.slot(server) {
            Some(slot) => &mut self.slots[slot].row,
            None => &mut self.other,
        }
    }

    /// A connection of `server` (in `slot`) began: counted toward keeping (or taking) a slot.
    fn note_connection(&mut self, server: Endpoint, slot: Option<usize>) {
        if let Some(slot) = slot {
            self.slots[slot].recent += 1;
            return;
        }
        if let Some(n) = self.candidates.get_mut(&server) {
            *n += 1;
            return;
        }
        let capacity = CANDIDATES_PER_SLOT * self.max_listeners.max(1);
        let mut start = 0;
        if self.candidates.len() >= capacity {
            let smallest = self.candidates.iter().min_by_key(|&(e, n)| (*n, *e)).map(|(e, n)| (*e, *n));
            if let Some((e, n)) = smallest {
                self.candidates.remove(&e);
                start = n;
            }
        }
        self.candidates.insert(server, start + 1);
    }

    /// A segment was tracked at `time_ns`: every `REBALANCE_NS`, slots may change hands.
    pub fn seen(&mut self, time_ns: i64) {
        let start = *self.period_start_ns.get_or_insert(time_ns);
        if time_ns - start >= REBALANCE_NS {
            self.rebalance();
            self.period_start_ns = Some(time_ns);
        }
    }

    /// Gives the slot of each named listener that had no connection this period to one of
    /// the busiest unnamed ones, busiest first. A Prometheus counter must never go down, so a
    /// slot's new listener starts from zero (its counts before stay in `other`), and the
    /// evicted listener's series disappears: its later counts go to `other`, and should it
    /// be named again, its series starts from zero, which Prometheus reads as a counter
    /// reset. `other` only ever accumulates.
    fn rebalance(&mut self) {
        let mut quiet: Vec<usize> = (0..self.slots.len()).filter(|&s| self.slots[s].recent == 0).collect();
        quiet.sort_by_key(|&s| self.slots[s].listener);
        let mut busy: Vec<(Endpoint, u64)> = self.candidates.iter().map(|(e, n)| (*e, *n)).filter(|(_, n)| *n > 0).collect();
        busy.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut moved = false;
        for (&slot, &(listener, _)) in quiet.iter().zip(&busy) {
            self.named.remove(&self.slots[slot].listener);
            self.named.insert(listener, slot);
            self.candidates.remove(&listener);
            self.slots[slot] = Slot { listener, row: Row::default(), recent: 0 };
            moved = true;
        }
        if moved {
            self.recount_waiting();
        }
        for slot in &mut self.slots {
            slot.recent = 0;
        }
        self.previous = self.candidates.drain().map(|(e, _)| e).collect();
    }

    /// The gauge again from the live connections, after listeners changed rows.
    fn recount_waiting(&mut self) {
        self.other.waiting = 0;
        for slot in &mut self.slots {
            slot.row.waiting = 0;
        }
        let waiting: Vec<Endpoint> = self.live.values().filter(|l| l.waiting).map(|l| l.server).collect();
        for server in waiting {
            self.row(server).waiting += 1;
        }
    }

    /// Reads one change: the connection's counts, times and gauge, and the segment's signs
    /// (`signs`, read by `super::signs_of`).
    pub fn note(&mut self, c: &Change, signs: Symptoms) {
        let (before, after) = (&c.before, &c.after);
        let counted = c.opened && !c.partial && after.syn_count > 0;
        if c.opened {
            let first_syn_ns = counted.then_some(c.time_ns);
            let live = Live { server: c.server, first_syn_ns, last_syn_ns: c.time_ns, request_ns: None, waiting: false, delay_seen: false };
            self.live.insert(c.id, live);
        }
        let slot = self.slot(c.server);
        if counted {
            self.note_connection(c.server, slot);
        }
        let mut observed = Observed::default();
        // A connection not followed (revived after it ended) has its counts already.
        if let Some(live) = self.live.get_mut(&c.id) {
            let client = Side::Client.index();
            if after.syn_count > before.syn_count && !before.handshake_acked && !c.opened {
                live.last_syn_ns = c.time_ns;
            }
            if after.requested && !before.requested {
                live.request_ns = Some((c.time_ns, c.time_ns));
            } else if after.data_retransmits[client] > before.data_retransmits[client] && !before.request_acked {
                if let Some((_, last)) = &mut live.request_ns {
                    *last = c.time_ns;
                }
            }
            if after.handshake_acked && !before.handshake_acked {
                observed.handshake_ns = live.first_syn_ns.map(|first| c.time_ns - first);
                if !(after.answered || after.rst.is_some() || after.client_fin || after.server_fin) {
                    live.waiting = true;
                    observed.waiting = 1;
                }
            } else if live.waiting && (after.answered || after.rst.is_some() || after.client_fin || after.server_fin) {
                live.waiting = false;
                observed.waiting = -1;
            }
            if after.answered && !before.answered {
                observed.answered = true;
                observed.first_byte_ns = live.first_syn_ns.map(|first| c.time_ns - first);
                live.delay_seen = true;
                observed.delay_ns = Some(live.delay_ns()).filter(|&d| d > 0);
            }
            if let (None, Some((side, answered))) = (before.rst, after.rst) {
                observed.reset = Some((side.index(), reset_answer_index(answered)));
            }
        }
        let row = match slot {
            Some(slot) => &mut self.slots[slot].row,
            None => &mut self.other,
        };
        row.connections += u64::from(counted);
        for s in signs.iter() {
            if let Some(i) = SIGNS.iter().position(|&x| x == s) {
                row.signs[i] += 1;
            }
        }
        observed.apply(row);
    }

    /// A connection left the hot table at `now_ns` (a copy of its record, `outcome` its
    /// verdict then): counted as ended, and forgotten.
    pub fn ended(&mut self, conn: &Connection, outcome: Outcome) {
        let Some(live) = self.live.remove(&conn.id) else { return };
        let mut observed = Observed { ended: Some(outcome), waiting: -i8::from(live.waiting), ..Observed::default() };
        if !live.delay_seen {
            observed.delay_ns = Some(live.delay_ns()).filter(|&d| d > 0);
        }
        observed.apply(self.row(live.server));
    }

    /// Whether `id` is a connection followed until it ends.
    pub fn follows(&self, id: u64) -> bool {
        self.live.contains_key(&id)
    }

    /// An ICMP error tied to a connection of `server`.
    pub fn icmp(&mut self, server: Endpoint, kind: IcmpKind) {
        self.row(server).icmp[kind.index()] += 1;
    }

    /// The capture said `n` more packets were dropped (a file's Interface Statistics Blocks).
    pub fn add_dropped(&mut self, n: u64) {
        self.dropped = Some(self.dropped.unwrap_or(0) + n);
    }

    /// What a scrape reads; `segments` and `latest_ns` are the watch's, `open` tells the open
    /// episode of a listener.
    pub fn snapshot(&self, segments: u64, latest_ns: Option<i64>, open: &FxHashMap<Endpoint, Symptoms>) -> Snapshot {
        let mut listeners: Vec<ListenerMetrics> =
            self.slots.iter().map(|s| ListenerMetrics { listener: Some(s.listener), row: s.row.clone(), episode: open.get(&s.listener).copied() }).collect();
        listeners.sort_by_key(|l| l.listener);
        if self.other.any() {
            let mut episode: Option<Symptoms> = None;
            for (_, signs) in open.iter().filter(|(s, _)| !self.named.contains_key(*s)) {
                let mut all = episode.unwrap_or_default();
                for s in signs.iter() {
                    all.insert(s);
                }
                episode = Some(all);
            }
            listeners.push(ListenerMetrics { listener: None, row: self.other.clone(), episode });
        }
        let unnamed_now = self.candidates.keys().filter(|e| !self.previous.contains(*e)).count();
        let previous = self.previous.iter().filter(|e| !self.named.contains_key(*e)).count();
        Snapshot { segments, latest_ns, dropped: self.dropped, listeners_other: (previous + unnamed_now) as u64, listeners }
    }
}

/// What one change or end adds to its listener's row.
#[derive(Default)]
struct Observed {
    answered: bool,
    ended: Option<Outcome>,
    reset: Option<(usize, usize)>,
    handshake_ns: Option<i64>,
    first_byte_ns: Option<i64>,
    delay_ns: Option<i64>,
    waiting: i8,
}

impl Observed {
    fn apply(self, row: &mut Row) {
        row.answered += u64::from(self.answered);
        if let Some(outcome) = self.ended {
            row.ended[outcome.index()] += 1;
        }
        if let Some((side, answered)) = self.reset {
            row.resets[side][answered] += 1;
        }
        for (ns, histogram) in [(self.handshake_ns, &mut row.handshake), (self.first_byte_ns, &mut row.first_byte), (self.delay_ns, &mut row.retransmission_delay)] {
            if let Some(ns) = ns {
                histogram.observe(ns);
            }
        }
        match self.waiting {
            1 => row.waiting += 1,
            // Decremented in the row it was counted in (`recount_waiting` keeps them together).
            -1 => row.waiting = row.waiting.saturating_sub(1),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::Symptom;
    use crate::flow::stage::Stage;
    use crate::flow::wire::{Wire, ACK, C, CISN, FIN, MS, PSH, RST, S, SISN, SYN};
    use crate::flow::TrackerOptions;
    use crate::watch::Watch;

    const SECOND: i64 = 1_000_000_000;

    fn listener(port: u16) -> Endpoint {
        Endpoint { ip: "10.0.0.2".parse().unwrap(), port }
    }

    fn row_of(snapshot: &Snapshot, port: Option<u16>) -> Option<Row> {
        snapshot.listeners.iter().find(|l| l.listener.map(|e| e.port) == port).map(|l| l.row.clone())
    }

    /// A tracker watched as `analysis::track_segments` watches it, one segment at a time.
    struct Run {
        w: Wire,
        watch: Watch,
    }

    impl Run {
        fn new(options: TrackerOptions) -> Run {
            let mut w = Wire::with_options(40000, 9000, options);
            w.tracker.note_changes();
            let mut watch = Watch::default();
            watch.enable_metrics(DEFAULT_MAX_LISTENERS);
            Run { w, watch }
        }

        #[allow(clippy::too_many_arguments)]
        fn send(&mut self, port: u16, server: u16, ms: i64, from: Side, flags: u8, seq: u32, ack: u32, len: u32) {
            self.w.client.port = port;
            self.w.server.port = server;
            self.w.send(ms, from, flags, seq, ack, len);
            self.watch.seen(ms * MS);
            for change in self.w.tracker.take_changes() {
                self.watch.note(&change);
            }
            for (conn, at_ns) in self.w.tracker.store.take_ends() {
                self.watch.ended(&conn, at_ns);
            }
        }

        /// SYN at `t` ms, SYN-ACK, the client's ACK at `t` + 2 ms.
        fn handshake(&mut self, port: u16, server: u16, t: i64) {
            self.send(port, server, t, C, SYN, CISN, 0, 0);
            self.send(port, server, t + 1, S, SYN | ACK, SISN, CISN + 1, 0);
            self.send(port, server, t + 2, C, ACK, CISN + 1, SISN + 1, 0);
        }

        /// A request at `t` + 3 ms answered at `t` + 50 ms, then both close.
        fn healthy(&mut self, port: u16, server: u16, t: i64) {
            self.handshake(port, server, t);
            self.send(port, server, t + 3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
            self.send(port, server, t + 50, S, PSH | ACK, SISN + 1, CISN + 101, 50);
            self.send(port, server, t + 60, C, FIN | ACK, CISN + 101, SISN + 51, 0);
            self.send(port, server, t + 61, S, FIN | ACK, SISN + 51, CISN + 102, 0);
            self.send(port, server, t + 62, C, ACK, CISN + 102, SISN + 52, 0);
        }

        /// The server's kernel drops the handshake's final ACK (accept queue full): the request
        /// goes unacknowledged and is re-sent, the SYN-ACK comes again by its timer, the client
        /// gives up with an RST.
        fn overflow(&mut self, port: u16, server: u16, t: i64) {
            self.handshake(port, server, t);
            for at in [3, 205, 409] {
                self.send(port, server, t + at, C, PSH | ACK, CISN + 1, SISN + 1, 100);
            }
            self.send(port, server, t + 1001, S, SYN | ACK, SISN, CISN + 1, 0);
            self.send(port, server, t + 1633, C, PSH | ACK, CISN + 1, SISN + 1, 100);
            self.send(port, server, t + 2500, C, RST | ACK, CISN + 101, SISN + 1, 0);
        }

        fn row(&self, server: u16) -> Row {
            row_of(&self.watch.metrics(), Some(server)).expect("a named listener")
        }
    }

    fn opened(id: u64, port: u16, time_ns: i64) -> Change {
        let after = Stage { syn_count: 1, ..Stage::default() };
        Change { id, server: listener(port), time_ns, opened: true, partial: false, before: Stage::default(), after }
    }

    // ---- histograms ----

    #[test]
    fn test_histogram_bucket_bounds_are_inclusive() {
        let mut h = Histogram::default();
        for ns in [1_000_000, 1_000_001, 63_500_000_000, 63_500_000_001, 0] {
            h.observe(ns);
        }
        let mut want = [0u64; BUCKETS.len() + 1];
        want[0] = 2;
        want[1] = 1;
        want[BUCKETS.len() - 1] = 1;
        want[BUCKETS.len()] = 1;
        assert_eq!(h.counts, want);
        assert_eq!((h.count, h.sum_ns), (5, 127_002_000_002));
        assert!((h.sum_seconds() - 127.002000002).abs() < 1e-9);
    }

    #[test]
    fn test_histogram_syn_timeouts_land_in_buckets_of_their_own() {
        let bucket = |seconds: f64| {
            let mut h = Histogram::default();
            h.observe((seconds * 1e9) as i64);
            h.counts.iter().position(|&n| n == 1).unwrap()
        };
        for steps in [&[1.0, 3.0, 7.0, 15.0, 31.0, 63.0][..], &[1.0, 2.0, 3.0, 4.0]] {
            for rtt in [0.0, 0.001, 0.2, 0.45] {
                let buckets: Vec<usize> = steps.iter().map(|s| bucket(s + rtt)).collect();
                let mut distinct = buckets.clone();
                distinct.dedup();
                assert_eq!(buckets, distinct, "{steps:?} + {rtt}");
            }
        }
        assert!(BUCKETS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn test_reset_answers_are_the_packet_roles_then_other() {
        let roles: Vec<&str> = PacketRole::ALL.iter().map(|r| r.slug()).collect();
        assert_eq!(RESET_ANSWERS[..roles.len()], roles[..]);
        assert_eq!(RESET_ANSWERS[roles.len()], "other");
        assert_eq!(reset_answer_index(None), roles.len());
        assert_eq!(RESET_ANSWERS[reset_answer_index(Some(PacketRole::HandshakeAck))], "handshake_ack");
    }

    // ---- one connection's counts ----

    #[test]
    fn test_healthy_connection_counts_times_and_completed() {
        let mut run = Run::new(TrackerOptions::default());
        run.healthy(40001, 9000, 0);
        let row = run.row(9000);
        assert_eq!((row.connections, row.answered, row.waiting), (1, 1, 0));
        assert_eq!((row.handshake.count, row.handshake.sum_ns), (1, i128::from(2 * MS)));
        assert_eq!((row.first_byte.count, row.first_byte.sum_ns), (1, i128::from(50 * MS)));
        assert_eq!(row.retransmission_delay.count, 0);
        run.watch.end_input(run.w.tracker.connections());
        let row = run.row(9000);
        assert_eq!(row.ended[Outcome::Completed.index()], 1);
        assert_eq!(row.ended.iter().sum::<u64>(), 1);
        // Ended once: the end of the input finds nothing more to count.
        run.watch.end_input(run.w.tracker.connections());
        assert_eq!(run.row(9000).ended.iter().sum::<u64>(), 1);
    }

    #[test]
    fn test_retransmission_delay_adds_the_syn_and_request_resends() {
        let mut run = Run::new(TrackerOptions::default());
        run.send(40001, 9000, 0, C, SYN, CISN, 0, 0);
        run.send(40001, 9000, 1000, C, SYN, CISN, 0, 0);
        run.send(40001, 9000, 1001, S, SYN | ACK, SISN, CISN + 1, 0);
        run.send(40001, 9000, 1002, C, ACK, CISN + 1, SISN + 1, 0);
        run.send(40001, 9000, 1003, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        run.send(40001, 9000, 1205, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        run.send(40001, 9000, 1206, S, ACK, SISN + 1, CISN + 101, 0);
        run.send(40001, 9000, 1300, S, PSH | ACK, SISN + 1, CISN + 101, 50);
        let row = run.row(9000);
        assert_eq!((row.retransmission_delay.count, row.retransmission_delay.sum_ns), (1, i128::from(1202 * MS)));
        assert_eq!(row.signs[SIGNS.iter().position(|&s| s == Symptom::SynRetransmitted).unwrap()], 1);
        // Observed once: its end adds nothing.
        run.watch.end_input(run.w.tracker.connections());
        assert_eq!(run.row(9000).retransmission_delay.count, 1);
    }

    // ---- the waiting gauge ----

    #[test]
    fn test_waiting_up_on_the_handshake_ack_down_on_answer_reset_or_close() {
        let mut run = Run::new(TrackerOptions::default());
        run.handshake(40001, 9000, 0);
        run.handshake(40002, 9000, 0);
        run.handshake(40003, 9000, 0);
        assert_eq!(run.row(9000).waiting, 3);
        run.send(40001, 9000, 10, S, PSH | ACK, SISN + 1, CISN + 1, 50);
        assert_eq!(run.row(9000).waiting, 2);
        run.send(40002, 9000, 10, C, RST | ACK, CISN + 1, SISN + 1, 0);
        assert_eq!(run.row(9000).waiting, 1);
        run.send(40003, 9000, 10, C, FIN | ACK, CISN + 1, SISN + 1, 0);
        let row = run.row(9000);
        assert_eq!(row.waiting, 0);
        assert_eq!((row.resets[Side::Client.index()].iter().sum::<u64>(), row.resets[Side::Server.index()].iter().sum::<u64>()), (1, 0));
    }

    #[test]
    fn test_waiting_down_when_the_tracker_evicts_the_connection() {
        // At most one connection live: the next one's SYN finalises the idle one.
        let mut run = Run::new(TrackerOptions { max_live: 1, ..TrackerOptions::default() });
        run.handshake(40001, 9000, 0);
        assert_eq!(run.row(9000).waiting, 1);
        run.send(40002, 9000, 5000, C, SYN, CISN, 0, 0);
        let row = run.row(9000);
        assert_eq!(row.waiting, 0);
        assert_eq!(row.ended[Outcome::Open.index()], 1);
    }

    #[test]
    fn test_waiting_down_when_the_tracker_forgets_the_connection() {
        let mut run = Run::new(TrackerOptions::default());
        run.handshake(40001, 9000, 0);
        assert_eq!(run.row(9000).waiting, 1);
        // The periodic sweep, days later, with no segment of its own.
        let later = 3 * 24 * 3600 * SECOND;
        let Run { w, watch } = &mut run;
        w.tracker.table.sweep_forgotten_flows(&mut w.tracker.store, later);
        for (conn, at_ns) in w.tracker.store.take_ends() {
            watch.ended(&conn, at_ns);
        }
        assert_eq!(run.row(9000).waiting, 0);
        assert_eq!(run.row(9000).ended.iter().sum::<u64>(), 1);
        assert!(run.watch.metrics.as_ref().unwrap().live.is_empty());
    }

    #[test]
    fn test_waiting_down_when_a_new_connection_takes_the_four_tuple() {
        let mut run = Run::new(TrackerOptions::default());
        run.handshake(40001, 9000, 0);
        // The same client port, a new ISN: a new connection replaces the old one's flow.
        run.send(40001, 9000, 3000, C, SYN, CISN + 50_000, 0, 0);
        let row = run.row(9000);
        assert_eq!((row.waiting, row.connections), (0, 2));
        assert_eq!(row.ended.iter().sum::<u64>(), 1);
    }

    #[test]
    fn test_waiting_down_at_the_end_of_the_input() {
        let mut run = Run::new(TrackerOptions { keep_connections: false, ..TrackerOptions::default() });
        run.handshake(40001, 9000, 0);
        run.watch.end_input(run.w.tracker.connections());
        let row = run.row(9000);
        assert_eq!((row.waiting, row.ended[Outcome::Open.index()]), (0, 1));
    }

    // ---- an accept queue overflow ----

    #[test]
    fn test_accept_queue_overflow_counts_final_ack_dropped_for_its_listener_only() {
        let mut run = Run::new(TrackerOptions::default());
        let sign = |s: Symptom| SIGNS.iter().position(|&x| x == s).unwrap();
        for i in 0..4 {
            run.healthy(41000 + i, 8080, i64::from(i) * 100);
            run.overflow(42000 + i, 9000, i64::from(i) * 100);
        }
        let (overflowed, healthy) = (run.row(9000), run.row(8080));
        assert_eq!(overflowed.signs[sign(Symptom::FinalAckDropped)], 4);
        assert_eq!(overflowed.signs[sign(Symptom::RequestUnacked)], 4 * 3);
        assert_eq!(healthy.signs, [0; SIGNS.len()]);
        assert_eq!((overflowed.answered, overflowed.waiting, overflowed.first_byte.count), (0, 0, 0));
        assert_eq!(overflowed.resets[Side::Client.index()].iter().sum::<u64>(), 4);
        // Each waited from its ACK to its RST, and its re-sent request is its delay.
        assert_eq!(overflowed.handshake.count, 4);
        run.watch.end_input(run.w.tracker.connections());
        let (overflowed, healthy) = (run.row(9000), run.row(8080));
        assert_eq!(overflowed.ended[Outcome::ResetByClient.index()], 4);
        assert_eq!((overflowed.retransmission_delay.count, overflowed.retransmission_delay.sum_ns), (4, i128::from(4 * 1630 * MS)));
        assert_eq!(healthy.ended[Outcome::Completed.index()], 4);
        assert_eq!(healthy.ended.iter().sum::<u64>(), 4);
        let snapshot = run.watch.metrics();
        assert!(snapshot.listeners.iter().find(|l| l.listener == Some(listener(9000))).unwrap().episode.is_some_and(|e| e.contains(Symptom::FinalAckDropped)));
        assert!(snapshot.listeners.iter().find(|l| l.listener == Some(listener(8080))).unwrap().episode.is_none());
    }

    // ---- bounded listeners ----

    #[test]
    fn test_rebalance_moves_a_quiet_slot_to_a_busy_listener_and_counters_never_go_down() {
        let mut m = Metrics::new(2);
        let no_episodes = FxHashMap::default();
        let mut id = 0;
        let mut connect = |m: &mut Metrics, port: u16, t: i64| {
            id += 1;
            m.seen(t);
            m.note(&opened(id, port, t), Symptoms::default());
        };
        // 9001 and 9002 take the slots; 9003 and 9004 go to other.
        for port in [9001, 9002, 9003, 9003, 9003, 9004] {
            connect(&mut m, port, 0);
        }
        let first = m.snapshot(0, None, &no_episodes);
        assert_eq!(first.listeners.iter().map(|l| l.listener.map(|e| e.port)).collect::<Vec<_>>(), vec![Some(9001), Some(9002), None]);
        assert_eq!(row_of(&first, None).unwrap().connections, 4);
        assert_eq!(first.listeners_other, 2);
        // At the end of the first period every named listener had a connection: no change.
        connect(&mut m, 9003, 61 * SECOND);
        assert_eq!(m.slots.iter().map(|s| s.listener.port).collect::<Vec<_>>(), vec![9001, 9002]);
        // In the next one only 9001 and 9003 are busy; at its end 9003 takes 9002's slot.
        connect(&mut m, 9001, 70 * SECOND);
        connect(&mut m, 9003, 80 * SECOND);
        connect(&mut m, 9003, 125 * SECOND);
        let second = m.snapshot(0, None, &no_episodes);
        assert_eq!(second.listeners.iter().map(|l| l.listener.map(|e| e.port)).collect::<Vec<_>>(), vec![Some(9001), Some(9003), None]);
        // 9003 starts from zero: its earlier connections stay in other.
        assert_eq!(row_of(&second, Some(9003)).unwrap().connections, 1);
        assert_eq!(row_of(&second, None).unwrap().connections, 6);
        assert_eq!(row_of(&second, Some(9001)).unwrap().connections, 2);
        // 9002's later counts go to other; other only grows.
        connect(&mut m, 9002, 126 * SECOND);
        let third = m.snapshot(0, None, &no_episodes);
        assert_eq!(row_of(&third, None).unwrap().connections, 7);
        for (before, after) in [(&first, &second), (&second, &third)] {
            for l in &before.listeners {
                if let Some(now) = after.listeners.iter().find(|x| x.listener == l.listener) {
                    assert!(now.row.connections >= l.row.connections || l.listener == Some(listener(9003)), "{:?}", l.listener);
                }
            }
        }
    }

    #[test]
    fn test_rebalance_keeps_slots_of_listeners_still_busy() {
        let mut m = Metrics::new(1);
        m.seen(0);
        m.note(&opened(1, 9001, 0), Symptoms::default());
        m.seen(61 * SECOND);
        // 9002 is busier, but 9001 had a connection in the period.
        for (id, t) in [(2, 62), (3, 63), (4, 64)] {
            m.seen(t * SECOND);
            m.note(&opened(id, 9002, t * SECOND), Symptoms::default());
        }
        m.seen(90 * SECOND);
        m.note(&opened(5, 9001, 90 * SECOND), Symptoms::default());
        m.seen(125 * SECOND);
        let s = m.snapshot(0, None, &FxHashMap::default());
        assert_eq!(s.listeners[0].listener, Some(listener(9001)));
        assert_eq!(row_of(&s, None).unwrap().connections, 3);
    }

    #[test]
    fn test_waiting_follows_a_listener_into_other_when_its_slot_is_taken() {
        let mut m = Metrics::new(1);
        let acked = Stage { syn_count: 1, synack_count: 1, handshake_acked: true, ..Stage::default() };
        m.seen(0);
        m.note(&opened(1, 9001, 0), Symptoms::default());
        let ack = Change { before: Stage { synack_count: 1, ..opened(1, 9001, 0).after }, after: acked, opened: false, ..opened(1, 9001, SECOND) };
        m.note(&ack, Symptoms::default());
        // 9002 busy, 9001 quiet for a period: 9002 takes the slot, 9001's waiting goes to other.
        m.seen(61 * SECOND);
        for id in 2..5 {
            m.seen(70 * SECOND);
            m.note(&opened(id, 9002, 70 * SECOND), Symptoms::default());
        }
        m.seen(125 * SECOND);
        let s = m.snapshot(0, None, &FxHashMap::default());
        assert_eq!(s.listeners[0].listener, Some(listener(9002)));
        assert_eq!((s.listeners[0].row.waiting, row_of(&s, None).unwrap().waiting), (0, 1));
        // Its end takes it off other's gauge.
        let conn = Connection::new(1, Endpoint { ip: "10.0.0.1".parse().unwrap(), port: 40000 }, listener(9001), false, Default::default(), 0);
        m.ended(&conn, Outcome::Open);
        let s = m.snapshot(0, None, &FxHashMap::default());
        let other = row_of(&s, None).unwrap();
        assert_eq!((other.waiting, other.ended[Outcome::Open.index()]), (0, 1));
    }

    #[test]
    fn test_candidates_stay_bounded_under_a_scan() {
        let mut m = Metrics::new(2);
        for port in 1..=5000u16 {
            m.note(&opened(u64::from(port), port, 0), Symptoms::default());
        }
        assert_eq!(m.slots.len(), 2);
        assert_eq!(m.candidates.len(), 2 * CANDIDATES_PER_SLOT);
        assert_eq!(row_of(&m.snapshot(0, None, &FxHashMap::default()), None).unwrap().connections, 4998);
    }
}
