//! The connection tracker: finds each segment's connection and runs the per-connection state
//! machine that labels packets with events.
//!
//! A connection is the 4-tuple plus the client's ISN. A SYN with the same ISN is a
//! retransmission; a SYN with a new ISN on a known 4-tuple starts a new connection (TIME-WAIT
//! reuse, RFC 9293 §3.10.7.4 and Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_timewait_state_process()).
//!
//! The rules for retransmissions and duplicate ACKs follow Wireshark's tcp_analyze_sequence_number()
//! so that pcapq and Wireshark label the same frames; see docs/json.md for each event.

use super::connection::{ConnState, Connection, SeenSegment, PREFIX_LEN};
use super::event::{Detail, Event, EventKind, FrameRef, PacketRole, Side};
use super::key::{Endpoint, FlowKey};
use super::seq::SeqNumber;
use super::table::FlowTable;
use crate::decode::{flags, Segment};

/// Linux's default ephemeral port range starts here (net.ipv4.ip_local_port_range = 32768 60999).
const EPHEMERAL_PORT_START: u16 = 32768;
/// Look for connections to retire every this many segments...
const SWEEP_EVERY: u32 = 16 * 1024;
/// ...once this much capture time has passed since the last look.
const SWEEP_INTERVAL_NS: i64 = 500_000_000;
/// Segments remembered per direction to number retransmission attempts.
const MAX_IN_FLIGHT: usize = 8;

#[derive(Clone, Copy, Debug)]
pub struct TrackerOptions {
    /// Keep each connection's event list (JSON, timelines). Off, only counts are kept.
    pub keep_events: bool,
    /// Keep what a merge with the capture before this one needs (connection prefixes).
    pub mergeable: bool,
}

impl Default for TrackerOptions {
    fn default() -> Self {
        TrackerOptions { keep_events: true, mergeable: false }
    }
}

/// In a mergeable analysis, a connection that starts this long after the first segment can
/// no longer be the continuation of a handshake from the capture before: the client's SYN
/// retries end after 131 s with tcp_syn_linear_timeouts=4 (127 s classic).
const JOIN_WINDOW_NS: i64 = 135 * 1_000_000_000;

/// One segment sent and not yet acknowledged, remembered to number its retransmissions.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SentSegment {
    seq: SeqNumber,
    end: SeqNumber,
    first: FrameRef,
    last_send_ns: i64,
    sends: u32,
}

/// What the tracker knows about one direction of a live connection.
#[derive(Clone, Debug, Default)]
pub struct DirectionState {
    /// Highest sequence number sent plus one (SYN and FIN count one), Wireshark's nextseq.
    pub(crate) next_seq: Option<SeqNumber>,
    pub(crate) last_ack: Option<u32>,
    pub(crate) last_window: u16,
    pub(crate) dup_acks: u32,
    /// The last ACK that was not a duplicate.
    pub(crate) last_ack_at: FrameRef,
    pub(crate) zero_window: bool,
    /// The last segment sent this way was a keep-alive (Wireshark's lastsegmentflags).
    pub(crate) keep_alive: bool,
    pub(crate) data_seen: bool,
    pub(crate) fin_seen: bool,
    /// The last packet sent this way, what it was and when: what an RST from the other side answers.
    pub(crate) last_packet: Option<(PacketRole, FrameRef, i64)>,
    /// First SYN (client) or SYN-ACK (server), and the latest one.
    pub(crate) first_handshake: Option<FrameRef>,
    pub(crate) last_handshake_ns: i64,
    pub(crate) in_flight: Vec<SentSegment>,
}

/// The tracker's working state for a connection that may still see packets.
#[derive(Clone, Debug)]
pub struct Flow {
    /// Index of the connection's record in `Tracker::connections`.
    pub conn: usize,
    pub direction: [DirectionState; 2],
    pub last_time_ns: i64,
}

/// The segment being labelled, with where and when it was captured and who sent it.
struct Packet<'a> {
    seg: &'a Segment,
    at: FrameRef,
    time_ns: i64,
    side: Side,
    keep_alive: bool,
}

impl Packet<'_> {
    fn event(&self, kind: EventKind, detail: Detail) -> Event {
        Event {
            at: self.at,
            time_ns: self.time_ns,
            kind,
            from: self.side,
            flags: self.seg.flags,
            seq: self.seg.seq,
            ack: self.seg.ack,
            len: self.seg.payload_len,
            window: self.seg.window,
            detail,
        }
    }
}

pub struct Tracker {
    options: TrackerOptions,
    pub(crate) table: FlowTable,
    pub connections: Vec<Connection>,
    segments_since_sweep: u32,
    last_sweep_ns: Option<i64>,
    first_time_ns: Option<i64>,
}

impl Tracker {
    pub fn new(options: TrackerOptions) -> Tracker {
        Tracker {
            options,
            table: FlowTable::default(),
            connections: Vec::new(),
            segments_since_sweep: 0,
            last_sweep_ns: None,
            first_time_ns: None,
        }
    }

    /// A tracker that continues where an earlier one stopped (`finish()`'s result).
    pub fn resume(options: TrackerOptions, connections: Vec<Connection>, table: FlowTable) -> Tracker {
        let mut tracker = Tracker::new(options);
        tracker.connections = connections;
        tracker.table = table;
        tracker
    }

    /// Connections in the hot table (not yet finished, or finished less than a second ago).
    pub fn live_connections(&self) -> usize {
        self.table.live_len()
    }

    /// Feeds one segment. `at` says where it is in the input, `time_ns` when it was captured.
    pub fn on_segment(&mut self, seg: &Segment, at: FrameRef, time_ns: i64) {
        self.track(seg, at, time_ns);
        self.maybe_sweep(time_ns);
    }

    /// `on_segment` without forgetting idle connections (a merge replays segments out of
    /// global time order).
    pub(crate) fn track(&mut self, seg: &Segment, at: FrameRef, time_ns: i64) {
        let key = FlowKey::of(seg);
        let follows = match self.table.get_mut(&key) {
            Some(flow) => {
                let conn = &mut self.connections[flow.conn];
                if !starts_new_connection(conn, Endpoint::source(seg), seg) {
                    observe(flow, conn, seg, at, time_ns, self.options.keep_events);
                    if self.options.mergeable {
                        record_prefix(conn, seg, at, time_ns);
                    }
                    return;
                }
                Some(conn.id)
            }
            None => None,
        };
        let conn_index = self.open_connection(seg, at, time_ns, follows);
        let mut flow = Flow { conn: conn_index, direction: Default::default(), last_time_ns: time_ns };
        let conn = &mut self.connections[conn_index];
        observe(&mut flow, conn, seg, at, time_ns, self.options.keep_events);
        if self.options.mergeable {
            record_prefix(conn, seg, at, time_ns);
        }
        self.table.insert(key, flow);
    }

    fn open_connection(&mut self, seg: &Segment, at: FrameRef, time_ns: i64, follows: Option<u64>) -> usize {
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
        let id = self.connections.len() as u64;
        let mut conn = Connection::new(id, client, server, partial, at, time_ns);
        conn.follows = follows;
        let first_time_ns = *self.first_time_ns.get_or_insert(time_ns);
        if self.options.mergeable && follows.is_none() && (partial || time_ns - first_time_ns <= JOIN_WINDOW_NS) {
            conn.prefix = Some(Box::default());
        }
        self.connections.push(conn);
        self.connections.len() - 1
    }

    /// Every `SWEEP_EVERY` segments, and at most every `SWEEP_INTERVAL_NS` of capture time,
    /// lets the table retire finished connections (their records stay in `connections`).
    fn maybe_sweep(&mut self, now_ns: i64) {
        self.segments_since_sweep += 1;
        if self.segments_since_sweep < SWEEP_EVERY {
            return;
        }
        self.segments_since_sweep = 0;
        let last = *self.last_sweep_ns.get_or_insert(now_ns);
        if now_ns - last < SWEEP_INTERVAL_NS {
            return;
        }
        self.last_sweep_ns = Some(now_ns);
        self.table.sweep(&self.connections, now_ns);
    }

    /// The connection records, in order of first packet, and the table of flows still remembered.
    pub fn finish(self) -> (Vec<Connection>, FlowTable) {
        (self.connections, self.table)
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
pub(crate) fn starts_new_connection(conn: &Connection, source: Endpoint, seg: &Segment) -> bool {
    if !seg.has(flags::SYN) || seg.has(flags::ACK) {
        return false;
    }
    if source == conn.client {
        // Same ISN: a retransmission. A different one: a new connection (Wireshark's
        // tcp.analysis.reused_ports). Without the SYN, Wireshark compares with the client's
        // base (a SYN-ACK's ACK number - 1, or first seq - 1); an unknown base means new.
        conn.base_seq[Side::Client.index()] != Some(seg.seq)
    } else {
        // The former server opens a connection back on the same 4-tuple.
        conn.state.is_over() || conn.partial
    }
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

/// The per-connection state machine: labels one segment and updates the connection.
/// Phases run in order: reset, handshake, sequence, acknowledgement, window.
fn observe(flow: &mut Flow, conn: &mut Connection, seg: &Segment, at: FrameRef, time_ns: i64, keep_events: bool) {
    let side = conn.side_of(Endpoint::source(seg));
    let (me, peer) = (side.index(), side.other().index());
    flow.last_time_ns = time_ns;
    conn.last_time_ns = conn.last_time_ns.max(time_ns);
    conn.counts[me].packets += 1;
    conn.counts[me].payload_bytes += u64::from(seg.payload_len);
    if seg.snaplen_cut {
        conn.snaplen_cut += 1;
    }
    let keep_alive = is_keep_alive(&flow.direction[me], seg);
    flow.direction[me].keep_alive = keep_alive;
    let pkt = Packet { seg, at, time_ns, side, keep_alive };

    // Reset. RFC 9293 §3.10.7: an acceptable RST ends the connection in any state. What it
    // answered is the peer's last packet.
    if seg.has(flags::RST) {
        let answered = flow.direction[peer].last_packet;
        let detail = Detail::Rst {
            answers: answered.map(|(role, _, _)| role),
            answers_frame: answered.map(|(_, frame, _)| frame),
            after_ns: answered.map(|(_, _, t)| time_ns - t),
        };
        conn.push(pkt.event(EventKind::Rst, detail), keep_events);
        conn.counts[me].rst = true;
        conn.set_state(ConnState::Reset);
        note_base(conn, flow, side, seg);
        flow.direction[me].last_packet = Some((PacketRole::Rst, at, time_ns));
        return;
    }

    let mut role = PacketRole::Ack;
    let syn = seg.has(flags::SYN);
    if syn && !seg.has(flags::ACK) && side == Side::Client {
        // The client's SYN (RFC 9293 §3.5). Same ISN again: its SYN timer fired
        // (Linux v6.6 net/ipv4/tcp_timer.c: tcp_retransmit_timer()).
        let dir = &mut flow.direction[me];
        if conn.syn_count == 0 {
            conn.base_seq[me] = Some(seg.seq);
            conn.syn_time_ns = Some(time_ns);
            conn.options[me] = Some(seg.options);
            dir.first_handshake = Some(at);
            conn.push(pkt.event(EventKind::Syn, Detail::None), keep_events);
        } else {
            let detail = Detail::Attempt {
                attempt: conn.syn_count + 1,
                original: dir.first_handshake,
                since_previous_ns: Some(time_ns - dir.last_handshake_ns),
                after_handshake_ack: conn.handshake_completed(),
            };
            conn.push(pkt.event(EventKind::SynRetransmit, detail), keep_events);
        }
        conn.syn_count += 1;
        dir.last_handshake_ns = time_ns;
        let after_syn = SeqNumber(seg.seq).add(1 + seg.payload_len);
        dir.next_seq = Some(dir.next_seq.map_or(after_syn, |n| n.max(after_syn)));
        role = PacketRole::Syn;
    } else if syn && seg.has(flags::ACK) && side == Side::Server {
        // The server's SYN-ACK. Again: its request timer fired (Linux v6.6
        // net/ipv4/inet_connection_sock.c: reqsk_timer_handler()), or a client SYN
        // retransmission hit the request (net/ipv4/tcp_minisocks.c: tcp_check_req()).
        let dir = &mut flow.direction[me];
        if conn.synack_count == 0 {
            conn.base_seq[me] = Some(seg.seq);
            conn.synack_time_ns = Some(time_ns);
            conn.options[me] = Some(seg.options);
            dir.first_handshake = Some(at);
            if conn.base_seq[peer].is_none() {
                conn.base_seq[peer] = Some(seg.ack.wrapping_sub(1));
            }
            if conn.state == ConnState::SynSent || (conn.partial && conn.syn_count == 0) {
                conn.set_state(ConnState::SynReceived);
            }
            conn.push(pkt.event(EventKind::Synack, Detail::None), keep_events);
        } else {
            let detail = Detail::Attempt {
                attempt: conn.synack_count + 1,
                original: dir.first_handshake,
                since_previous_ns: Some(time_ns - dir.last_handshake_ns),
                after_handshake_ack: conn.handshake_completed(),
            };
            conn.push(pkt.event(EventKind::SynackRetransmit, detail), keep_events);
        }
        conn.synack_count += 1;
        dir.last_handshake_ns = time_ns;
        let after_syn = SeqNumber(seg.seq).add(1 + seg.payload_len);
        dir.next_seq = Some(dir.next_seq.map_or(after_syn, |n| n.max(after_syn)));
        role = PacketRole::Synack;
    } else if side == Side::Client
        && seg.has(flags::ACK)
        && conn.state == ConnState::SynReceived
        && conn.base_seq[peer].map(|isn| isn.wrapping_add(1)) == Some(seg.ack)
    {
        // RFC 9293 §3.5: the client's ACK of the SYN-ACK completes the handshake.
        conn.handshake_ack_time_ns = Some(time_ns);
        conn.set_state(ConnState::Established);
        conn.push(pkt.event(EventKind::HandshakeAck, Detail::None), keep_events);
        role = PacketRole::HandshakeAck;
    }

    if !syn {
        note_base(conn, flow, side, seg);
        if let Some(r) = sequence(flow, conn, &pkt, keep_events) {
            role = r;
        }
    }
    acknowledgement(flow, conn, &pkt, keep_events);
    window(flow, conn, &pkt, keep_events);
    flow.direction[me].last_packet = Some((role, at, time_ns));
}

/// A side whose SYN was not captured gets its relative-sequence base as Wireshark does: its
/// first sequence number minus one, or the first ACK number the peer sent it minus one,
/// whichever comes first.
fn note_base(conn: &mut Connection, flow: &mut Flow, side: Side, seg: &Segment) {
    let (me, peer) = (side.index(), side.other().index());
    if conn.base_seq[me].is_none() {
        conn.base_seq[me] = Some(seg.seq.wrapping_sub(1));
    }
    if conn.base_seq[peer].is_none() && seg.has(flags::ACK) {
        conn.base_seq[peer] = Some(seg.ack.wrapping_sub(1));
    }
    if flow.direction[me].next_seq.is_none() && !seg.has(flags::RST) {
        flow.direction[me].next_seq = Some(SeqNumber(seg.seq));
    }
}

/// Wireshark's keep-alive: zero or one byte at nextseq - 1, no SYN, FIN or RST.
fn is_keep_alive(dir: &DirectionState, seg: &Segment) -> bool {
    seg.payload_len <= 1
        && seg.flags & (flags::SYN | flags::FIN | flags::RST) == 0
        && dir.next_seq == Some(SeqNumber(seg.seq.wrapping_add(1)))
}

/// Sequence analysis of a segment without SYN: first data, retransmissions, FIN.
fn sequence(flow: &mut Flow, conn: &mut Connection, pkt: &Packet<'_>, keep_events: bool) -> Option<PacketRole> {
    let (seg, side) = (pkt.seg, pkt.side);
    let me = side.index();
    let fin = seg.has(flags::FIN);
    if seg.payload_len == 0 && !fin {
        return None;
    }
    let seq = SeqNumber(seg.seq);
    // Wireshark's zero-window probe: one byte at nextseq while the peer's window is zero. The
    // receiver may drop the byte, so the probe does not advance nextseq; otherwise the data
    // sent once the window opens would look retransmitted.
    let peer = &flow.direction[side.other().index()];
    let window_closed = peer.last_ack.is_some() && peer.last_window == 0;
    if window_closed && !fin && seg.payload_len == 1 && flow.direction[me].next_seq == Some(seq) {
        return Some(PacketRole::Data);
    }
    let dir = &mut flow.direction[me];
    let end = seq.add(seg.payload_len + u32::from(fin));
    let next = dir.next_seq.unwrap_or(seq);
    let role = if pkt.keep_alive {
        PacketRole::Ack
    } else if seq.before(next) {
        // The range starts below the highest sequence number already sent: a retransmission.
        let time_ns = pkt.time_ns;
        let previous = dir.in_flight.iter_mut().find(|s| s.seq == seq);
        let detail = match previous {
            Some(sent) => {
                sent.sends += 1;
                let since = time_ns - sent.last_send_ns;
                sent.last_send_ns = time_ns;
                Detail::Attempt { attempt: sent.sends, original: Some(sent.first), since_previous_ns: Some(since), after_handshake_ack: conn.handshake_completed() }
            }
            None => Detail::Attempt { attempt: 2, original: None, since_previous_ns: None, after_handshake_ack: conn.handshake_completed() },
        };
        let kind = if seg.payload_len > 0 { EventKind::DataRetransmit } else { EventKind::FinRetransmit };
        if seg.payload_len > 0 {
            conn.counts[me].data_retransmits += 1;
        }
        conn.push(pkt.event(kind, detail), keep_events);
        PacketRole::Retransmit
    } else {
        if seq.after(next) {
            conn.counts[me].unseen_before += 1;
        }
        if seg.payload_len > 0 && !dir.data_seen {
            dir.data_seen = true;
            conn.push(pkt.event(EventKind::DataFirst, Detail::None), keep_events);
        }
        if dir.in_flight.len() >= MAX_IN_FLIGHT {
            dir.in_flight.remove(0);
        }
        dir.in_flight.push(SentSegment { seq, end, first: pkt.at, last_send_ns: pkt.time_ns, sends: 1 });
        if fin { PacketRole::Fin } else { PacketRole::Data }
    };
    if fin && !dir.fin_seen {
        dir.fin_seen = true;
        conn.counts[me].fin = true;
        if role != PacketRole::Retransmit {
            conn.push(pkt.event(EventKind::Fin, Detail::None), keep_events);
        }
        let both = flow.direction[side.other().index()].fin_seen;
        if conn.state != ConnState::Reset {
            conn.set_state(if both { ConnState::Closed } else { ConnState::Closing });
        }
    }
    let dir = &mut flow.direction[me];
    dir.next_seq = Some(next.max(end));
    Some(role)
}

/// Acknowledgement analysis: duplicate ACKs (Wireshark's rule: no data, no SYN/FIN/RST, same
/// ACK number and same non-zero window as the last ACK, sequence number at nextseq).
fn acknowledgement(flow: &mut Flow, conn: &mut Connection, pkt: &Packet<'_>, keep_events: bool) {
    let (seg, side) = (pkt.seg, pkt.side);
    if !seg.has(flags::ACK) {
        return;
    }
    let me = side.index();
    // Wireshark's keep-alive ACK (the same ACK answering the peer's keep-alive) is no duplicate.
    let answers_keep_alive = flow.direction[side.other().index()].keep_alive;
    let dir = &mut flow.direction[me];
    let duplicate = seg.payload_len == 0
        && !answers_keep_alive
        && seg.flags & (flags::SYN | flags::FIN | flags::RST) == 0
        && dir.last_ack == Some(seg.ack)
        && seg.window == dir.last_window
        && seg.window != 0
        && dir.next_seq == Some(SeqNumber(seg.seq));
    if duplicate {
        dir.dup_acks += 1;
        conn.counts[me].dup_acks += 1;
        let detail = Detail::DupAck { count: dir.dup_acks, of: dir.last_ack_at };
        conn.push(pkt.event(EventKind::DupAck, detail), keep_events);
    } else if dir.last_ack != Some(seg.ack) {
        dir.dup_acks = 0;
        dir.last_ack_at = pkt.at;
    }
    dir.last_ack = Some(seg.ack);
    dir.last_window = seg.window;
    // What the peer sent and this ACK covers needs no more attempt numbers.
    let acked = SeqNumber(seg.ack);
    flow.direction[side.other().index()].in_flight.retain(|s| acked.before(s.end));
}

/// A receive window that drops to zero (RFC 9293 §3.8.6.2.2); one event per stall.
fn window(flow: &mut Flow, conn: &mut Connection, pkt: &Packet<'_>, keep_events: bool) {
    let (seg, side) = (pkt.seg, pkt.side);
    if seg.flags & (flags::SYN | flags::FIN | flags::RST) != 0 {
        return;
    }
    let me = side.index();
    let dir = &mut flow.direction[me];
    if seg.window == 0 && !dir.zero_window {
        dir.zero_window = true;
        conn.counts[me].zero_windows += 1;
        conn.push(pkt.event(EventKind::ZeroWindow, Detail::None), keep_events);
    } else if seg.window != 0 {
        dir.zero_window = false;
    }
}
