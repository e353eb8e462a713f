//! The connection tracker: finds each segment's connection in the flow table, opens a new one
//! (also on a reused 4-tuple), retires finished ones, and hands each segment to the
//! per-connection state machine that labels it with events (`super::label`).
//!
//! A connection is the 4-tuple plus the client's ISN. A SYN with the same ISN is a
//! retransmission; a SYN with a new ISN on a known 4-tuple starts a new connection (TIME-WAIT
//! reuse, RFC 9293 §3.10.7.4 and Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_timewait_state_process()).
//!
//! The rules for retransmissions and duplicate ACKs follow Wireshark's tcp_analyze_sequence_number()
//! so that pcapq and Wireshark label the same frames; see docs/json.md for each event.

use super::label::observe;
use crate::flow::connection::{ConnState, Connection, SeenSegment, PREFIX_LEN};
use crate::flow::event::{FrameRef, PacketRole, Side};
use crate::flow::key::{Endpoint, SegmentKey};
use crate::flow::stage::{Change, Stage};
use crate::flow::state::Flow;
use crate::flow::store::{ConnectionStore, Counter, Finished, FlowTable};
use crate::decode::{flags, Segment};

/// Linux's default ephemeral port range starts here (net.ipv4.ip_local_port_range = 32768 60999).
const EPHEMERAL_PORT_START: u16 = 32768;
/// A capture silent this long saw no TCP timer fire: every one fires within TCP_RTO_MAX (120 s,
/// include/net/tcp.h) and a SYN series ends sooner. A connection live before such a gap was not
/// watched through it.
const CAPTURE_GAP_NS: i64 = 130 * 1_000_000_000;
/// Gaps noted on the live connections, at most (each looks at every live record).
const MAX_GAPS_NOTED: u32 = 64;
/// Look for finished connections to retire every this many segments.
const SWEEP_EVERY: u32 = 4 * 1024;
/// Unanswered flows and tombstones are kept for minutes: looking through all of them this
/// often is enough.
const FULL_SWEEP_INTERVAL_NS: i64 = 15 * 1_000_000_000;

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct TrackerOptions {
    /// Keep each connection's event list (JSON, timelines). Off, only counts are kept.
    pub keep_events: bool,
    /// Keep what a merge with the capture before this one needs (connection prefixes).
    pub mergeable: bool,
    /// Keep every connection's record. Off, a finished connection is counted in the summary
    /// and its record dropped (events and merging need the records).
    pub keep_connections: bool,
    /// At most this many connections in the hot table (0: no limit). When a new connection
    /// finds it full, the longest-idle eighth is finalised early (`Tracker::evicted`).
    pub max_live: usize,
    /// With `keep_connections` off: at most this many records of problem connections kept
    /// whole; the census keeps the others in short form (`detect::digest`).
    pub max_kept_problems: usize,
}

impl Default for TrackerOptions {
    fn default() -> Self {
        TrackerOptions { keep_events: true, mergeable: false, keep_connections: true, max_live: 0, max_kept_problems: crate::flow::store::MAX_KEPT_WITH_PROBLEMS }
    }
}

/// In a mergeable analysis, a connection that starts this long after the first segment can
/// no longer be the continuation of a handshake from the capture before: the client's SYN
/// retries end after 131 s with tcp_syn_linear_timeouts=4 (127 s classic).
const JOIN_WINDOW_NS: i64 = 135 * 1_000_000_000;


/// The connection a new one replaces on the same 4-tuple.
#[derive(Clone, Copy, Debug)]
struct Follows {
    id: u64,
    /// How long after its last packet the new one began.
    after_ns: i64,
    /// Whether the server held the 4-tuple in TIME-WAIT then (`server_time_wait`).
    server_time_wait: bool,
}

/// The server closed first and no RST ended the connection: the server's socket went to
/// TIME-WAIT (RFC 9293 §3.6); an RST ends a TIME-WAIT as well (Linux, net.ipv4.tcp_rfc1337 = 0:
/// net/ipv4/tcp_minisocks.c: tcp_timewait_state_process()).
pub(crate) fn server_time_wait(flow: &Flow) -> bool {
    flow.server_closed_first && flow.state == ConnState::Closed
}

pub struct Tracker<C> {
    options: TrackerOptions,
    pub(crate) table: FlowTable,
    pub(crate) store: ConnectionStore<C>,
    segments_since_sweep: u32,
    last_full_sweep_ns: Option<i64>,
    first_time_ns: Option<i64>,
    /// The latest capture time seen: where the capture ends, for verdicts.
    last_time_ns: i64,
    /// Connections finalised early because the hot table held `max_live`.
    pub evicted: u64,
    /// Gaps in the capture noted on the live connections (`note_gap`), at most `MAX_GAPS_NOTED`.
    gaps_noted: u32,
    /// While watched live: the segments that moved a connection on, since the last `take_changes`.
    noting: Option<Vec<Change>>,
}

impl<C: Counter> Tracker<C> {
    pub fn new(options: TrackerOptions) -> Tracker<C> {
        Tracker {
            options,
            table: FlowTable::default(),
            store: ConnectionStore::new(options.keep_connections, options.mergeable, options.max_kept_problems),
            segments_since_sweep: 0,
            last_full_sweep_ns: None,
            first_time_ns: None,
            last_time_ns: i64::MIN,
            evicted: 0,
            gaps_noted: 0,
            noting: None,
        }
    }

    /// From now on, notes every segment that moves a connection on, and every connection that
    /// leaves the hot table (`pcapq watch`: `take_changes`, `store.take_ends`).
    pub fn note_changes(&mut self) {
        self.noting.get_or_insert_with(Vec::new);
        self.store.note_ends();
    }

    /// The changes noted since the last call, in segment order.
    pub fn take_changes(&mut self) -> Vec<Change> {
        self.noting.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// A tracker that continues where an earlier one, which kept every record, stopped.
    pub fn resume(options: TrackerOptions, connections: Vec<Connection>, table: FlowTable) -> Tracker<C> {
        let mut tracker = Tracker::new(options);
        tracker.store = ConnectionStore::resume(connections);
        tracker.table = table;
        tracker
    }

    /// A tracker that continues from a store and table made elsewhere (a merge of analyses
    /// that did not keep every record).
    pub fn resume_with(options: TrackerOptions, store: ConnectionStore<C>, table: FlowTable) -> Tracker<C> {
        let mut tracker = Tracker::new(options);
        tracker.store = store;
        tracker.table = table;
        tracker
    }

    /// How many flows in the hot table are in each state (for diagnostics and tests).
    pub fn live_states(&self) -> Vec<(&'static str, usize)> {
        self.table.live_states()
    }

    /// The records in use, by slot (every record, by id, when `keep_connections` is on).
    pub fn connections(&self) -> &[Connection] {
        self.store.records()
    }

    /// Connections in the hot table (not yet finished, or finished less than a second ago).
    pub fn live_connections(&self) -> usize {
        self.table.live_len()
    }

    /// Finished connections remembered as tombstones.
    pub fn tombstones(&self) -> usize {
        self.table.tombstones_len()
    }

    /// What the connections finished so far were counted into.
    pub fn census(&self) -> &C {
        self.store.census()
    }

    /// Feeds one segment. `at` says where it is in the input, `time_ns` when it was captured.
    pub fn on_segment(&mut self, seg: &Segment, at: FrameRef, time_ns: i64) {
        self.on_keyed_segment(seg, &SegmentKey::of(seg), at, time_ns);
    }

    /// `on_segment` with the segment's key, its hash and whether its source is the key's low
    /// endpoint (`SegmentKey::of(seg)`) worked out by the caller: the reading thread does it, so
    /// that the tracking thread, the one that bounds a run, does not.
    pub fn on_keyed_segment(&mut self, seg: &Segment, keyed: &SegmentKey, at: FrameRef, time_ns: i64) {
        if self.last_time_ns != i64::MIN && time_ns - self.last_time_ns > CAPTURE_GAP_NS {
            self.note_gap(self.last_time_ns);
        }
        self.last_time_ns = self.last_time_ns.max(time_ns);
        self.track_keyed(seg, keyed, at, time_ns);
        self.maybe_sweep(time_ns);
    }

    /// The capture holds nothing from `from_ns` for longer than any TCP timer: every connection
    /// still live was not watched past `from_ns` (a capture stopped and started again, files
    /// merged days apart, a clock step). Their verdicts take the capture as ending there.
    fn note_gap(&mut self, from_ns: i64) {
        if self.gaps_noted >= MAX_GAPS_NOTED {
            return;
        }
        self.gaps_noted += 1;
        for slot in self.store.used_slots() {
            self.store.get_mut(slot).seen_until_ns.set_if_none(from_ns);
        }
    }

    /// `on_segment` without forgetting idle connections (a merge replays segments out of
    /// global time order).
    pub(crate) fn track(&mut self, seg: &Segment, at: FrameRef, time_ns: i64) {
        self.track_keyed(seg, &SegmentKey::of(seg), at, time_ns);
    }

    fn track_keyed(&mut self, seg: &Segment, &SegmentKey { key, hash, source_is_low }: &SegmentKey, at: FrameRef, time_ns: i64) {
        let follows = match self.table.get_mut_hashed(&key, hash, &mut self.store) {
            Some(flow) => {
                let conn = self.store.get_mut(flow.slot());
                let side = if source_is_low == flow.client_is_low { Side::Client } else { Side::Server };
                if !starts_new_connection(conn, side, seg) {
                    let was_over = flow.state.is_over();
                    let before = self.noting.is_some().then(|| Stage::of(conn));
                    observe(flow, conn, seg, side, at, time_ns, self.options.keep_events);
                    if let (Some(notes), Some(before)) = (self.noting.as_mut(), before) {
                        note(notes, conn, before, false, time_ns);
                    }
                    if self.options.mergeable {
                        record_prefix(conn, seg, at, time_ns);
                    }
                    if !was_over && flow.state.is_over() {
                        self.table.note_finished(key, hash, time_ns);
                    }
                    return;
                }
                // A connection refused by an RST to its SYN left no state on either side (no
                // TIME-WAIT): the client trying again with a new ISN replaces nothing.
                let follows = if refused(conn) { None } else { Some(Follows { id: conn.id, after_ns: time_ns - conn.last_time_ns, server_time_wait: server_time_wait(flow) }) };
                // The new connection takes its flow: the old one leaves the hot table here and
                // is counted now, its slot freed (a run of days reuses many 4-tuples).
                self.store.retire(flow.slot(), time_ns);
                follows
            }
            None => None,
        };
        if self.options.max_live > 0 && self.table.live_len() >= self.options.max_live {
            self.make_room(time_ns);
        }
        let (conn_index, side) = self.open_connection(seg, at, time_ns, follows);
        let client_is_low = source_is_low == (side == Side::Client);
        // Observed in its place in the table: a flow is large, and moving it costs a copy.
        let flow = Flow { conn: conn_index as u32, client_is_low, state: ConnState::SynSent, server_closed_first: false, direction: Default::default(), last_time_ns: time_ns };
        let flow = self.table.insert_hashed(key, hash, flow);
        let conn = self.store.get_mut(conn_index);
        observe(flow, conn, seg, side, at, time_ns, self.options.keep_events);
        if let Some(notes) = self.noting.as_mut() {
            note(notes, conn, Stage::default(), true, time_ns);
        }
        if self.options.mergeable {
            record_prefix(conn, seg, at, time_ns);
        }
        if flow.state.is_over() {
            self.table.note_finished(key, hash, time_ns);
        }
        self.table.relieve_pressure(&mut self.store, time_ns);
    }

    /// Opens the record of a new connection; returns its index and the side that sent `seg`.
    /// `follows`: the connection this one replaces on the same 4-tuple.
    fn open_connection(&mut self, seg: &Segment, at: FrameRef, time_ns: i64, follows: Option<Follows>) -> (usize, Side) {
        let (src, dst) = (Endpoint::source(seg), Endpoint::destination(seg));
        let (client, server, partial) = if seg.has(flags::SYN) && !seg.has(flags::ACK) {
            (src, dst, false)
        } else if seg.has(flags::SYN) {
            // A SYN-ACK first: its receiver is the client.
            (dst, src, true)
        } else {
            let (client, server) = guess_client(src, dst);
            (client, server, true)
        };
        let first_time_ns = *self.first_time_ns.get_or_insert(time_ns);
        let with_prefix = self.options.mergeable && follows.is_none() && (partial || time_ns - first_time_ns <= JOIN_WINDOW_NS);
        // Filled in its slot: a record is large, and moving it costs a copy.
        let slot = self.store.add(|id| Connection::new(id, client, server, partial, at, time_ns));
        let conn = self.store.get_mut(slot);
        conn.vlan = seg.vlan;
        conn.follows = follows.map(|f| f.id);
        conn.follows_after_ns.set(follows.map(|f| f.after_ns));
        conn.follows_server_time_wait = follows.is_some_and(|f| f.server_time_wait);
        if with_prefix {
            conn.prefix = Some(Box::default());
        }
        let side = if client == src { Side::Client } else { Side::Server };
        (slot, side)
    }

    /// Every `SWEEP_EVERY` segments, retires the connections that finished more than the
    /// grace period ago (a cost in proportion to them); every `FULL_SWEEP_INTERVAL_NS` of
    /// capture time, also looks through every flow and tombstone for ones to forget.
    fn maybe_sweep(&mut self, now_ns: i64) {
        self.segments_since_sweep += 1;
        if self.segments_since_sweep < SWEEP_EVERY {
            return;
        }
        self.segments_since_sweep = 0;
        self.table.sweep_finished_flows(&mut self.store, now_ns);
        let last_full = *self.last_full_sweep_ns.get_or_insert(now_ns);
        if now_ns - last_full >= FULL_SWEEP_INTERVAL_NS {
            self.last_full_sweep_ns = Some(now_ns);
            self.table.sweep_forgotten_flows(&mut self.store, now_ns);
            self.table.sweep_finished(now_ns);
        }
    }

    /// With a window of capture time (`ConnectionStore::keep_window`), before the segment of
    /// time `now_ns`: once the slice being counted is over, the connections that finished by
    /// now are counted in it (the sweep otherwise waits `SWEEP_EVERY` segments, minutes of a
    /// quiet capture), and it is set aside.
    pub fn tick(&mut self, now_ns: i64) {
        if self.store.slice_due(now_ns) {
            self.table.sweep_finished_flows(&mut self.store, now_ns);
            self.store.rotate(now_ns);
        }
    }

    /// The hot table is full: retires what is finished or forgotten, and if that is not
    /// enough, finalises the longest-idle eighth of the live connections as they stand
    /// (counted like connections still open at the end; later packets of theirs start new,
    /// partial connections). A batch, so that the scan is paid once per `max_live / 8`
    /// new connections.
    fn make_room(&mut self, now_ns: i64) {
        self.table.sweep_finished_flows(&mut self.store, now_ns);
        self.table.sweep_forgotten_flows(&mut self.store, now_ns);
        let max = self.options.max_live;
        let room_for = (max / 8).max(1);
        let target = max.saturating_sub(room_for);
        let live = self.table.live_len();
        if live > target {
            self.evicted += self.table.evict_idlest(&mut self.store, live - target, now_ns) as u64;
        }
    }

    /// What the run leaves (every record when `keep_connections` is on; otherwise the tally,
    /// the servers' statistics and the connections with a problem), and the table of flows
    /// still remembered.
    pub fn finish(self) -> (Finished<C>, FlowTable) {
        let mut renumbered = Vec::new();
        let finished = self.store.finish(self.last_time_ns, &mut renumbered);
        let mut table = self.table;
        table.renumber(&renumbered);
        (finished, table)
    }
}

/// Adds a `Change` when the segment moved `conn` on from `before` (or opened it).
fn note(notes: &mut Vec<Change>, conn: &Connection, before: Stage, opened: bool, time_ns: i64) {
    let after = Stage::of(conn);
    if opened || after != before {
        notes.push(Change { id: conn.id, server: conn.server, time_ns, opened, partial: conn.partial, before, after });
    }
}

/// Keeps the connection's first `PREFIX_LEN` segments, and a snapshot of the record after them.
fn record_prefix(conn: &mut Connection, seg: &Segment, at: FrameRef, time_ns: i64) {
    let Some(mut prefix) = conn.prefix.take() else { return };
    if prefix.segments.len() < PREFIX_LEN {
        prefix.segments.push(SeenSegment { segment: *seg, at, time_ns });
        if prefix.segments.len() == PREFIX_LEN {
            let events = std::mem::take(&mut conn.events);
            prefix.snapshot = Some(Box::new(conn.clone()));
            conn.events = events;
        }
    }
    conn.prefix = Some(prefix);
}

/// Does this segment start a new connection on a 4-tuple that already has one?
pub(crate) fn starts_new_connection(conn: &Connection, source: Side, seg: &Segment) -> bool {
    if !seg.has(flags::SYN) || seg.has(flags::ACK) {
        return false;
    }
    if source == Side::Client {
        // Same ISN: a retransmission. A different one: a new connection (Wireshark's
        // tcp.analysis.reused_ports). Without the SYN, Wireshark compares with the client's
        // base (a SYN-ACK's ACK number - 1, or first seq - 1); an unknown base means new.
        conn.base_seq[Side::Client.index()] != Some(seg.seq)
    } else {
        // The former server opens a connection back on the same 4-tuple.
        conn.state.is_over() || conn.partial
    }
}

/// The server answered the client's SYN with an RST and no handshake completed.
fn refused(conn: &Connection) -> bool {
    !conn.handshake_completed()
        && conn.milestones.first_rst().is_some_and(|r| r.from == Side::Server && r.answers == Some(PacketRole::Syn))
}

/// For a connection whose SYN was not captured: the side on an ephemeral port is the client;
/// failing that, the higher port; failing that, the sender of the first packet.
fn guess_client(src: Endpoint, dst: Endpoint) -> (Endpoint, Endpoint) {
    let src_ephemeral = src.port >= EPHEMERAL_PORT_START;
    let dst_ephemeral = dst.port >= EPHEMERAL_PORT_START;
    match (src_ephemeral, dst_ephemeral) {
        (true, false) => (src, dst),
        (false, true) => (dst, src),
        _ if src.port < dst.port => (dst, src),
        _ => (src, dst),
    }
}

#[cfg(test)]
mod tests {
    //! Finding each segment's connection, driven by hand-made segments: no files, no decoding.

    use super::*;
    use crate::flow::wire::*;
    use crate::flow::{Detail, EventKind};
    use EventKind::*;

    // ---------------------------------------------------------------------------------------
    // partial captures

    #[test]
    fn test_partial_ack_only_start_guesses_ephemeral_client() {
        let mut w = Wire::new();
        // The server speaks first; the client is still the side on the ephemeral port.
        w.send(0, S, ACK, SISN + 301, CISN + 101, 0);
        let d = w.send(1, C, PSH | ACK, CISN + 101, SISN + 301, 50);
        let c = w.conn();
        assert!(c.partial);
        assert_eq!((c.client, c.server), (w.client, w.server));
        assert_eq!(c.state, ConnState::Established);
        assert_eq!(w.kinds(), vec![(d, DataFirst)]);
        // Bases from the first packet: the server's seq - 1, and its ACK number - 1.
        assert_eq!(c.base_seq, [Some(CISN + 100), Some(SISN + 300)]);
        assert_eq!(w.relative(d, DataFirst), (1, 1));
    }

    #[test]
    fn test_partial_client_guess_falls_back_to_higher_port_then_first_sender() {
        // Neither port ephemeral: the higher one is the client.
        let mut w = Wire::between(8080, 5432);
        w.send(0, S, ACK, 1, 1, 0);
        assert_eq!(w.conn().client, w.client);
        // Both ephemeral: the higher one.
        let mut w = Wire::between(50000, 40000);
        w.send(0, S, ACK, 1, 1, 0);
        assert_eq!(w.conn().client, w.client);
        // Same port: the first sender.
        let mut w = Wire::between(9000, 9000);
        w.send(0, S, ACK, 1, 1, 0);
        assert_eq!(w.conn().client, w.server);
    }

    #[test]
    fn test_partial_synack_first_makes_receiver_client() {
        let mut w = Wire::new();
        w.send(0, S, SYN | ACK, SISN, CISN + 1, 0);
        let h = w.send(1, C, ACK, CISN + 1, SISN + 1, 0);
        let c = w.conn();
        assert!(c.partial);
        assert_eq!(c.client, w.client);
        assert_eq!(w.kinds(), vec![(1, Synack), (h, HandshakeAck)]);
        assert_eq!(c.base_seq, [Some(CISN), Some(SISN)]);
        assert_eq!(c.state, ConnState::Established);
    }

    #[test]
    fn test_partial_synack_first_then_syn_with_same_isn_stays_one_connection() {
        // The capture began after the first SYN; the SYN-ACK names the client's ISN.
        let mut w = Wire::new();
        w.send(0, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1000, C, SYN, CISN, 0, 0);
        let again = w.send(1001, S, SYN | ACK, SISN, CISN + 1, 0);
        let h = w.send(1002, C, ACK, CISN + 1, SISN + 1, 0);
        let c = w.conn();
        assert_eq!(c.follows, None);
        assert_eq!(w.detail(again, SynackRetransmit), attempt(2, 1, 1001, false));
        assert_eq!(w.frames_of(HandshakeAck), vec![h]);
        assert_eq!(c.state, ConnState::Established);
    }

    #[test]
    fn test_partial_peer_base_from_first_ack_number() {
        // Wireshark: the server's base is the client's first ACK number - 1, even when the
        // server's first captured segment starts later (its earlier data was not captured).
        let mut w = Wire::new();
        let c1 = w.send(0, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        let s1 = w.send(10, S, PSH | ACK, SISN + 501, CISN + 101, 100);
        assert_eq!(w.relative(c1, DataFirst), (1, 1));
        assert_eq!(w.relative(s1, DataFirst), (501, 101));
    }

    #[test]
    fn test_partial_retransmit_and_dup_ack_detected_without_handshake() {
        let mut w = Wire::new();
        let a = w.send(0, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(1, C, PSH | ACK, CISN + 101, SISN + 1, 100);
        let first = w.send(5, S, ACK, SISN + 1, CISN + 101, 0);
        let d1 = w.send(6, S, ACK, SISN + 1, CISN + 101, 0);
        let r = w.send(7, C, PSH | ACK, CISN + 101, SISN + 1, 100);
        let r2 = w.send(300, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        assert_eq!(w.detail(d1, DupAck), dup(1, first));
        assert_eq!(w.frames_of(DataRetransmit), vec![r, r2]);
        assert!(matches!(w.detail(r, DataRetransmit), Detail::Attempt { attempt: 2, after_handshake_ack: false, .. }));
        // The first segment was acknowledged: its attempts are no longer numbered.
        assert!(matches!(w.detail(r2, DataRetransmit), Detail::Attempt { original: None, .. }));
        assert_eq!(w.frames_of(DataFirst), vec![a]);
    }

    #[test]
    fn test_partial_rst_alone_answers_nothing() {
        let mut w = Wire::new();
        w.send(0, S, RST, SISN + 1, 0, 0);
        let c = w.conn();
        assert!(c.partial);
        assert_eq!(w.detail(1, Rst), Detail::Rst { answers: None, answers_frame: None, after_ns: None });
        assert_eq!(c.state, ConnState::Reset);
    }

    // ---------------------------------------------------------------------------------------
    // 4-tuple reuse (and VLAN IDs, which tell the same 4-tuple apart)

    #[test]
    fn test_reuse_syn_new_isn_starts_connection_following_old() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, FIN | ACK, CISN + 1, SISN + 1, 0);
        w.send(11, S, FIN | ACK, SISN + 1, CISN + 2, 0);
        w.send(12, C, ACK, CISN + 2, SISN + 2, 0);
        let syn = w.send(2000, C, SYN, 9_000_000, 0, 0);
        w.send(2001, S, SYN | ACK, 123, 9_000_001, 0);
        w.send(2002, C, ACK, 9_000_001, 124, 0);
        let conns = w.conns();
        assert_eq!(conns.len(), 2);
        assert_eq!((conns[0].state, conns[0].follows), (ConnState::Closed, None));
        assert_eq!((conns[1].state, conns[1].follows, conns[1].partial), (ConnState::Established, Some(0), false));
        assert_eq!(conns[1].base_seq, [Some(9_000_000), Some(123)]);
        assert_eq!(conns[1].events.first().map(|e| (e.at.frame, e.kind)), Some((syn, Syn)));
        assert_eq!(w.relative(syn, Syn).0, 0);
    }

    #[test]
    fn test_reuse_syn_new_isn_while_established_starts_connection() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(3000, C, SYN, CISN + 77_777, 0, 0);
        assert_eq!(w.conns().len(), 2);
        assert_eq!(w.conns()[1].follows, Some(0));
    }

    #[test]
    fn test_reuse_syn_same_isn_after_close_is_syn_retransmit() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, FIN | ACK, CISN + 1, SISN + 1, 0);
        w.send(11, S, FIN | ACK, SISN + 1, CISN + 2, 0);
        let syn = w.send(1000, C, SYN, CISN, 0, 0);
        assert_eq!(w.conns().len(), 1);
        assert_eq!(w.detail(syn, SynRetransmit), attempt(2, 1, 1000, true));
    }

    #[test]
    fn test_reuse_syn_after_midstream_start_starts_connection() {
        let mut w = Wire::new();
        w.send(0, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(1, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(5000, C, SYN, 77, 0, 0);
        let conns = w.conns();
        assert_eq!(conns.len(), 2);
        assert!(conns[0].partial && !conns[1].partial);
        assert_eq!(conns[1].follows, Some(0));
    }

    #[test]
    fn test_reuse_server_syn_after_close_opens_reverse_connection() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, FIN | ACK, CISN + 1, SISN + 1, 0);
        w.send(11, S, FIN | ACK, SISN + 1, CISN + 2, 0);
        w.send(5000, S, SYN, 42, 0, 0);
        let conns = w.conns();
        assert_eq!(conns.len(), 2);
        assert_eq!((conns[1].client, conns[1].follows), (w.server, Some(0)));
    }

    #[test]
    fn test_reuse_counts_the_replaced_connection_and_frees_its_slot() {
        // Records not kept: each connection a new SYN replaces is counted at once, so a run of
        // days that reuses one 4-tuple holds one slot, not one per connection before.
        let options = TrackerOptions { keep_events: false, mergeable: false, keep_connections: false, max_live: 0, ..TrackerOptions::default() };
        let mut w = Wire::with_options(40000, 9000, options);
        for i in 0..100u32 {
            let (c, s) = (CISN + i * 1_000_000, SISN + i * 1_000_000);
            let ms = i64::from(i) * 1000;
            w.send(ms, C, SYN, c, 0, 0);
            w.send(ms + 1, S, SYN | ACK, s, c + 1, 0);
            w.send(ms + 2, C, ACK, c + 1, s + 1, 0);
        }
        assert_eq!(w.tracker.store.used_slots().len(), 1);
        let (finished, _) = w.tracker.finish();
        assert_eq!(finished.census.tally.connections, 100);
        assert_eq!(finished.census.tally.handshakes_completed, 100);
    }

    #[test]
    fn test_vlan_copies_of_one_flow_are_separate_connections() {
        // zeek_vlan-collisions: one flow on untagged, VLAN 42 and QinQ 10/20, 50 ms apart.
        let mut w = Wire::new();
        for (i, vlan) in [0, 42 << 12, 10 << 12 | 20].into_iter().enumerate() {
            w.vlan = vlan;
            let t = 50 * i as i64;
            w.send(t, C, SYN, CISN, 0, 0);
            w.send(t + 1, S, SYN | ACK, SISN, CISN + 1, 0);
            w.send(t + 2, C, ACK, CISN + 1, SISN + 1, 0);
        }
        let conns = w.conns();
        assert_eq!(conns.iter().map(|c| (c.vlan, c.syn_count, c.synack_count, c.follows)).collect::<Vec<_>>(),
                   vec![(0, 1, 1, None), (42 << 12, 1, 1, None), (10 << 12 | 20, 1, 1, None)]);
        assert!(conns.iter().all(|c| c.state == ConnState::Established));
    }

    #[test]
    fn test_reset_new_isn_after_refused_connection_follows_nothing() {
        // mk_evidence06: refused, then the same source port with a new ISN. No TIME-WAIT anywhere.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1, S, RST | ACK, 0, CISN + 1, 0);
        w.send(2, C, SYN, CISN + 300_000, 0, 0);
        let conns = w.conns();
        assert_eq!(conns.len(), 2);
        assert_eq!(conns[1].follows, None);
    }

    // ---------------------------------------------------------------------------------------
    // Memory: finished connections leave the hot table; without kept records they are counted

    fn closed_connection(options: TrackerOptions) -> Wire {
        let mut w = Wire::with_options(40000, 9000, options);
        w.handshake(CISN, SISN);
        w.send(3, C, FIN | ACK, CISN + 1, SISN + 1, 0);
        w.send(4, S, FIN | ACK, SISN + 1, CISN + 2, 0);
        w.send(5, C, ACK, CISN + 2, SISN + 2, 0);
        w
    }

    #[test]
    fn test_closed_retired_after_grace_then_late_rst_revives_and_counts_once() {
        let options = TrackerOptions { keep_events: false, mergeable: false, keep_connections: false, max_live: 0, ..TrackerOptions::default() };
        let mut w = closed_connection(options);
        w.tracker.table.sweep_finished_flows(&mut w.tracker.store, 300 * MS);
        assert_eq!(w.tracker.live_connections(), 1, "still within the grace period");
        w.tracker.table.sweep_finished_flows(&mut w.tracker.store, 2_000 * MS);
        assert_eq!(w.tracker.live_connections(), 0, "retired to a tombstone");
        w.send(3_000, C, RST, CISN + 2, 0, 0);
        assert_eq!(w.tracker.live_connections(), 1, "the late RST brought it back");
        w.tracker.table.sweep_finished_flows(&mut w.tracker.store, 9_000 * MS);
        assert_eq!(w.tracker.live_connections(), 0, "and it is retired again");
        let (finished, _) = w.tracker.finish();
        let tally = finished.census.tally;
        // An RST after both FINs changes nothing of the exchange (detect::after_both_fins): the
        // connection stays completed, no problem to keep, and its RST is counted once.
        assert_eq!(finished.connections.len(), 0);
        assert_eq!((tally.connections, tally.handshakes_completed, tally.reset), (1, 1, 1));
        assert_eq!(tally.outcomes[crate::detect::Outcome::Completed.index()], 1);
    }

    #[test]
    fn test_tombstones_over_the_limit_forget_the_oldest_first() {
        let mut w = Wire::new();
        // Ten connections, reset 100 ms apart, all past their grace.
        for i in 0..10u16 {
            w.client.port = 40000 + i;
            let t = i64::from(i) * 100;
            w.send(t, C, SYN, CISN, 0, 0);
            w.send(t + 1, S, SYN | ACK, SISN, CISN + 1, 0);
            w.send(t + 2, C, RST, CISN + 1, 0, 0);
        }
        w.tracker.table.sweep_finished_flows(&mut w.tracker.store, 5_000 * MS);
        assert_eq!(w.tracker.live_connections(), 0);
        w.tracker.table.forget_oldest_tombstones(4);
        assert_eq!(w.tracker.table.finished_forgotten_early, 6);
        // The newest is still remembered: its late RST is its own; the oldest's starts a new one.
        w.client.port = 40009;
        w.send(6_000, C, RST, CISN + 1, 0, 0);
        assert_eq!(w.conns().len(), 10);
        w.client.port = 40000;
        w.send(6_001, C, RST, CISN + 1, 0, 0);
        assert_eq!(w.conns().len(), 11);
    }

    #[test]
    fn test_closed_retired_with_records_kept_late_fin_finds_its_record() {
        let mut w = closed_connection(TrackerOptions::default());
        w.tracker.table.sweep_finished_flows(&mut w.tracker.store, 2_000 * MS);
        assert_eq!(w.tracker.live_connections(), 0);
        w.send(2_500, S, FIN | ACK, SISN + 1, CISN + 2, 0);
        let conns = w.conns();
        assert_eq!(conns.len(), 1);
        assert_eq!(conns[0].events.last().map(|e| e.kind), Some(EventKind::FinRetransmit));
    }

    // -----------------------------------------------------------------------------------------
    // A flood of half-open connections: the hot table stays near its limit

    #[test]
    fn test_syn_flood_half_open_flows_leave_the_hot_table_and_a_late_syn_finds_its_tombstone() {
        use crate::flow::store::table::MAX_LIVE_FLOWS;
        use std::net::IpAddr;
        let options = TrackerOptions { keep_events: true, mergeable: false, keep_connections: false, ..TrackerOptions::default() };
        let mut w = Wire::with_options(1024, 9000, options);
        // One established connection first: never set aside, however many SYNs follow.
        w.handshake(CISN, SISN);
        let flood = 3 * MAX_LIVE_FLOWS as u32;
        for i in 0..flood {
            // 10.1.x.y:port -> the server, one SYN each, 10 microseconds apart.
            w.client = Endpoint { ip: IpAddr::from([10, 1, (i >> 16) as u8, (i >> 8) as u8]), port: 1024 + (i & 0xff) as u16 };
            let seg_ms = 10 + i64::from(i) / 100;
            w.send(seg_ms, C, SYN, i, 0, 0);
        }
        assert!(w.tracker.live_connections() <= MAX_LIVE_FLOWS + MAX_LIVE_FLOWS / 2 + 1, "{}", w.tracker.live_connections());
        assert!(w.tracker.table.retired_early >= u64::from(flood) - MAX_LIVE_FLOWS as u64);
        // The first flood SYN sent again: its tombstone brings it back as the same connection.
        w.client = Endpoint { ip: IpAddr::from([10, 1, 0, 0]), port: 1024 };
        w.send(10_000, C, SYN, 0, 0, 0);
        // And the established connection is still live.
        w.client = Endpoint { ip: IpAddr::from([10, 0, 0, 1]), port: 1024 };
        w.send(10_001, C, ACK | PSH, CISN + 1, SISN + 1, 10);
        let (finished, table) = w.tracker.finish();
        assert_eq!(finished.census.tally.connections, u64::from(flood) + 1, "the re-sent SYN is no new connection");
        assert_eq!(finished.census.tally.with_syn_retransmits, 1);
        assert!(finished.connections.len() <= crate::flow::store::MAX_KEPT_WITH_PROBLEMS * 5 / 4);
        let book = finished.census.servers;
        // Counted once, when set aside (the re-sent SYN came after).
        assert_eq!(book.one_syn().connections, u64::from(flood));
        drop(table);
    }

    #[test]
    fn test_a_new_connection_follows_a_server_time_wait_only_when_the_server_closed_first() {
        // Closed by each side first, then an RST: a SYN with a new ISN 2 s later, after the
        // earlier connection went to a tombstone (its record dropped, counted).
        let options = TrackerOptions { keep_events: false, mergeable: false, keep_connections: false, max_live: 0, ..TrackerOptions::default() };
        for (first, last, time_wait) in [(S, C, true), (C, S, false)] {
            let mut w = Wire::with_options(40000, 9000, options);
            w.handshake(CISN, SISN);
            let (first_isn, last_isn) = if first == C { (CISN, SISN) } else { (SISN, CISN) };
            w.send(3, first, FIN | ACK, first_isn + 1, last_isn + 1, 0);
            w.send(4, last, FIN | ACK, last_isn + 1, first_isn + 2, 0);
            w.send(5, first, ACK, first_isn + 2, last_isn + 2, 0);
            w.tracker.table.sweep_finished_flows(&mut w.tracker.store, 2_000 * MS);
            w.send(3_000, C, SYN, 77_777, 0, 0);
            let conn = w.conns().into_iter().last().unwrap();
            assert_eq!((conn.follows.is_some(), conn.follows_server_time_wait), (true, time_wait), "{first:?} closed first");
        }
        let mut w = Wire::with_options(40000, 9000, options);
        w.handshake(CISN, SISN);
        w.send(3, S, FIN | ACK, SISN + 1, CISN + 1, 0);
        w.send(4, C, RST, CISN + 1, 0, 0);
        w.tracker.table.sweep_finished_flows(&mut w.tracker.store, 2_000 * MS);
        w.send(3_000, C, SYN, 77_777, 0, 0);
        let conn = w.conns().into_iter().last().unwrap();
        assert_eq!((conn.follows.is_some(), conn.follows_server_time_wait), (true, false), "an RST ends the TIME-WAIT");
    }

    #[test]
    fn test_new_isn_on_retired_tuple_is_a_new_connection_that_follows() {
        let mut w = closed_connection(TrackerOptions::default());
        w.tracker.table.sweep_finished_flows(&mut w.tracker.store, 2_000 * MS);
        w.send(30_000, C, SYN, 77_777, 0, 0);
        let conns = w.conns();
        assert_eq!(conns.len(), 2);
        assert_eq!(conns[1].follows, Some(0));
    }
}
