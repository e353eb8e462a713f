//! The per-connection state machine: labels each segment of a connection with its events
//! (handshake, retransmissions, duplicate ACKs, resets, windows) and updates the record. The
//! tracker (`super::tracker`) finds the segment's connection; this says what the segment was.
//!
//! The rules for retransmissions and duplicate ACKs follow Wireshark's tcp_analyze_sequence_number()
//! so that pcapq and Wireshark label the same frames; see docs/json.md for each event.

use crate::flow::connection::{ConnState, Connection, RetransmitLog, RstFacts, Send, Vanished};
use crate::flow::event::{Detail, Event, EventKind, FrameRef, PacketRole, Side};
use crate::flow::seq::SeqNumber;
use crate::flow::state::{DirectionState, Flow, Sent, SentSegment};
use crate::decode::{flags, Segment};

/// A SYN-ACK this soon after a client SYN retransmission answers it.
pub(crate) const TRIGGERED_SYNACK_NS: i64 = 10_000_000;
/// A SYN or SYN-ACK with the ID of its side's last one is a copy this soon after it: half the
/// initial RTO (RFC 6298 §2.1: 1 s), the earliest a handshake timer re-sends.
const COPY_SAME_ID_SYN_NS: i64 = 500_000_000;
/// Without an ID (IPv4 ID 0, as macOS and FreeBSD send it with DF, and Linux its SYN-ACKs, Linux
/// v6.6 net/ipv4/ip_output.c: ip_build_and_send_pkt(); IPv6; or one ID for every segment), a copy
/// comes within this: a
/// timer re-send waits at least TCP_TIMEOUT_MIN (2 jiffies, net/ipv4/tcp_output.c:
/// tcp_schedule_loss_probe()), a SYN-ACK re-send 1 s.
/// Either way nothing from the peer came in between: a fast re-send answers the peer's ACK.
const COPY_NO_ID_NS: i64 = 1_000_000;
/// A frame this much older than its connection's latest one was not sent after it: the file
/// holds packets twice or out of order (captures joined without sorting, a clock stepped back).
/// Timed as it stands it would make re-sends of copies; the reader warns that time went back.
const CLOCK_BACK_NS: i64 = 1_000_000_000;

/// Is `this` a copy of `repeated`, the frame sent before it the same way when `this` repeats it
/// (`Sent::same_segment`), rather than a re-send? `peer_last` is the last frame the other side
/// sent. See COPY_NO_ID_NS; a repeat with the same non-zero IP ID is `is_recent_copy`'s.
/// `copies_seen`: the connection showed a copy before. A closed socket answers each segment
/// that reaches it with an RST (RFC 9293 §3.10.7.1), all alike (no ID, no timestamp: Linux v6.6
/// net/ipv4/tcp_ipv4.c: tcp_v4_send_reset()): two segments arriving together get two identical
/// RSTs back to back. Such an RST is a copy only in a connection whose frames the capture
/// already doubled.
/// `id_tells`: the IP ID is non-zero and its sender varies it (`DirectionState::constant_id`).
fn is_copy(this: &Sent, repeated: Option<&Sent>, peer_last: Option<&Sent>, copies_seen: bool, id_tells: bool) -> bool {
    let Some(last) = repeated else { return false };
    if this.flags & flags::RST != 0 && !copies_seen {
        return false;
    }
    let gap = (this.time_ns - last.time_ns).abs();
    let same_tsval = this.tsval.is_some() && this.tsval == last.tsval;
    let limit = match (same_tsval, id_tells) {
        // The same TSval: the same datagram, at any delay.
        (true, _) => i64::MAX,
        (false, false) => COPY_NO_ID_NS,
        // The same ID: `is_recent_copy` judges.
        (false, true) => return false,
    };
    gap <= limit && peer_last.is_none_or(|p| p.at < last.at)
}

/// Is `this` a datagram its side sent before, seen again: the same non-zero IP ID, TCP header
/// and checksum as one of its last frames, at any delay and whatever came in between (a router
/// captured with `-i any` shows each datagram on both interfaces, TTLs one apart). A re-send
/// takes a new ID: Linux draws one per transmission (v6.6 include/net/ip.h:
/// ip_select_ident_segs(), from __ip_queue_xmit()). Windows keeps the ID when its timer re-sends
/// a SYN, 1 s or more later (RFC 6298 §2.1's initial RTO): a handshake repeat is a copy only
/// within `COPY_SAME_ID_SYN_NS` of the side's last one. An RST as in `is_copy`.
fn is_recent_copy(direction: &DirectionState, this: &Sent, fingerprint: u32, time_ns: i64, copies_seen: bool) -> bool {
    if !direction.sent_recently(fingerprint) || (this.flags & flags::RST != 0 && !copies_seen) {
        return false;
    }
    this.flags & flags::SYN == 0 || time_ns - direction.last_handshake_ns < COPY_SAME_ID_SYN_NS
}

/// Is `seg` data its side sent a moment ago, seen again cut at other boundaries (a tunnel's two
/// sides, a capture before and after segmentation offload: 1460 bytes, then the same as 1440 +
/// 20)? Its bytes all lie within segments first sent within `COPY_NO_ID_NS`, or half the
/// handshake's round trip if longer, with nothing from the peer since. A re-send with nothing from the peer
/// in between waits for a timer: a tail loss probe's 2 SRTT (RFC 8985 §7.2) or the RTO; a fast
/// re-send answers the peer's duplicate ACKs (RFC 5681 §3.2).
/// An ICMP error that answered this side since those bytes were first sent (a router's "too
/// big": path MTU discovery re-sends them at once, cut smaller, tcp_v4_mtu_reduced()) makes it a
/// re-send.
fn is_seen_again(conn: &Connection, dir: &DirectionState, peer_last: Option<&Sent>, seg: &Segment, side: Side, time_ns: i64) -> bool {
    if seg.payload_len == 0 || seg.flags & (flags::SYN | flags::RST | flags::FIN) != 0 {
        return false;
    }
    let (mut at, end) = (SeqNumber(seg.seq), SeqNumber(seg.seq).plus(seg.payload_len));
    if dir.next_seq.is_none_or(|next| !at.before(next)) {
        return false;
    }
    let within = handshake_rtt_ns(conn).map_or(COPY_NO_ID_NS, |rtt| (rtt / 2).max(COPY_NO_ID_NS));
    let len = usize::from(dir.in_flight_len).min(dir.in_flight.len());
    // First sent that recently: a re-send's copy is judged as a re-send (the segments in flight
    // do not say which of their bytes a partial re-send covered).
    let recent = || dir.in_flight[..len].iter().filter(|s| time_ns - s.first_send_ns <= within);
    let Some(earliest) = recent().map(|s| s.first_send_ns).min() else { return false };
    if peer_last.is_some_and(|p| p.time_ns >= earliest) || conn.icmp_answers().iter().any(|a| a.answers == side && a.time_ns >= earliest) {
        return false;
    }
    while at.before(end) {
        match recent().find(|s| !at.before(s.seq) && at.before(s.end)) {
            Some(s) => at = s.end,
            None => return false,
        }
    }
    true
}

/// The handshake's round trip as the capture saw it, SYN to handshake ACK, when the SYN was
/// sent once (else the span holds the SYN timer's waits).
fn handshake_rtt_ns(conn: &Connection) -> Option<i64> {
    (conn.syn_count == 1).then_some(())?;
    Some(conn.handshake_ack_time_ns.get()? - conn.syn_time_ns.get()?)
}

/// Is `seg` a copy of its side's first SYN (SYN-ACK), whatever came in between? The same IP
/// ID and TSval: a re-send carries a new TSval (RFC 7323 §3.2), so this is the first datagram
/// seen again (a router captured on two interfaces, both directions of a SPAN, a link-layer
/// retry), at any delay.
fn is_handshake_copy(conn: &Connection, seg: &Segment, side: Side) -> bool {
    seg.has(flags::SYN)
        && seg.options.timestamp.is_some_and(|(tsval, _)| conn.handshake_ident[side.index()] == Some((seg.ip_id, tsval)))
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

/// The per-connection state machine: labels one segment and updates the connection.
/// Phases run in order: reset, handshake, sequence, acknowledgement, window.
pub(super) fn observe(flow: &mut Flow, conn: &mut Connection, seg: &Segment, side: Side, at: FrameRef, time_ns: i64, keep_events: bool) {
    label(flow, conn, seg, side, at, time_ns, keep_events);
    // The flow mirrors the record's state (changed only by `Connection::set_state`), so that
    // the table sweeps without reading records.
    flow.state = conn.state;
}

fn label(flow: &mut Flow, conn: &mut Connection, seg: &Segment, side: Side, at: FrameRef, time_ns: i64, keep_events: bool) {
    let (me, peer) = (side.index(), side.other().index());
    if time_ns < conn.last_time_ns - CLOCK_BACK_NS {
        // Older than its connection's latest frame by over a second: a copy, not a re-send.
        conn.duplicates += 1;
        return;
    }
    flow.last_time_ns = time_ns;
    conn.last_time_ns = conn.last_time_ns.max(time_ns);
    // A copy of the frame before it (span port, `-i any`, bridge): counted, not labelled.
    let sent = Sent::of(seg, at, time_ns);
    let repeated = flow.direction[me].last_sent.as_ref().filter(|last| sent.same_segment(last));
    let id_tells = sent.ip_id != 0 && !flow.direction[me].constant_id;
    let fingerprint = if id_tells { sent.fingerprint() } else { 0 };
    if is_copy(&sent, repeated, flow.direction[peer].last_sent.as_ref(), conn.duplicates > 0, id_tells)
        || is_handshake_copy(conn, seg, side)
        || is_recent_copy(&flow.direction[me], &sent, fingerprint, time_ns, conn.duplicates > 0)
        || is_seen_again(conn, &flow.direction[me], flow.direction[peer].last_sent.as_ref(), seg, side, time_ns)
    {
        conn.duplicates += 1;
        return;
    }
    // A repeat kept as a re-send: without a TSval, only its delay told it from a copy (an RST
    // answers a segment, it is no re-send).
    if repeated.is_some() && sent.tsval.is_none() && !seg.has(flags::RST) {
        conn.repeats_told_by_delay += 1;
    }
    if side == Side::Server && !seg.has(flags::SYN) && conn.server_ttl.is_none() {
        conn.server_ttl = Some(seg.ttl);
    }
    // What this side sent before, for a SYN that follows an RST (below).
    let my_last = flow.direction[me].last_packet();
    if flow.direction[me].last_sent.as_ref().is_some_and(|last| last.ip_id == sent.ip_id && !last.same_segment(&sent)) {
        flow.direction[me].constant_id = true;
    }
    flow.direction[me].last_sent = Some(sent);
    flow.direction[me].remember(fingerprint);
    note_vanished(flow, conn, side, seg, &at, time_ns, my_last.map(|(_, _, t)| t));
    conn.counts[me].packets += 1;
    conn.counts[me].payload_bytes += u64::from(seg.payload_len);
    if seg.snaplen_cut {
        conn.snaplen_cut += 1;
    }
    let keep_alive = is_keep_alive(&flow.direction[me], seg);
    flow.direction[me].keep_alive = keep_alive;
    let pkt = Packet { seg, at, time_ns, side, keep_alive };
    if side == Side::Client
        && seg.flags & (flags::FIN | flags::RST) != 0
        && seg.has(flags::ACK)
        && conn.milestones.client_closed_ns.get().is_none()
    {
        conn.milestones.client_close_ack = Some(seg.ack);
    }

    // Reset. RFC 9293 §3.10.7: an acceptable RST ends the connection in any state. What it
    // answered is the peer's last packet.
    if seg.has(flags::RST) {
        let answered = flow.direction[peer].last_packet();
        let detail = Detail::Rst {
            answers: answered.map(|(role, _, _)| role),
            answers_frame: answered.map(|(_, frame, _)| frame),
            after_ns: answered.map(|(_, _, t)| time_ns - t),
        };
        conn.push(pkt.event(EventKind::Rst, detail), keep_events);
        if conn.milestones.first_rst().is_none() {
            let answers = answered.map(|(role, _, _)| role);
            conn.milestones.set_first_rst(Some(RstFacts {
                from: side,
                time_ns,
                at,
                answers,
                answers_frame: answered.map(|(_, frame, _)| frame),
                after_ns: answered.map(|(_, _, t)| time_ns - t),
            }));
        }
        conn.counts[me].rst = true;
        if side == Side::Client {
            conn.milestones.client_closed_ns.set_if_none(time_ns);
        }
        conn.set_state(ConnState::Reset);
        note_base(conn, flow, side, seg);
        flow.direction[me].labelled(PacketRole::Rst);
        return;
    }

    let mut role = PacketRole::Ack;
    let syn = seg.has(flags::SYN);
    if syn && seg.has(flags::ACK) == (side == Side::Server) {
        // The client's SYN (RFC 9293 §3.5), or the server's SYN-ACK. Again, with the same ISN:
        // the client's SYN timer fired (Linux v6.6 net/ipv4/tcp_timer.c: tcp_retransmit_timer()),
        // or the server's request timer (net/ipv4/inet_connection_sock.c: reqsk_timer_handler()),
        // or a client SYN retransmission hit the request (net/ipv4/tcp_minisocks.c: tcp_check_req()).
        // The server's RST answered the client's last SYN: this one tries again (Windows does,
        // twice) and is no SYN that went unanswered.
        let after_rst = side == Side::Client
            && matches!((flow.direction[peer].last_packet(), my_last),
                (Some((PacketRole::Rst, rst, _)), Some((PacketRole::Syn, syn, _))) if rst > syn);
        let first = handshake_send(flow, conn, &pkt, keep_events);
        match side {
            Side::Client => {
                if first {
                    conn.syn_time_ns.set(Some(time_ns));
                } else if after_rst {
                    conn.milestones.syns_after_rst += 1;
                }
                if seg.payload_len > 0 && conn.milestones.syn_data_len == 0 {
                    conn.milestones.syn_data_len = seg.payload_len;
                }
                role = PacketRole::Syn;
            }
            Side::Server => {
                if first {
                    conn.synack_time_ns.set(Some(time_ns));
                    if conn.base_seq[peer].is_none() {
                        conn.base_seq[peer] = Some(seg.ack.wrapping_sub(1));
                    }
                    // After an RST that answered the SYN, a SYN-ACK all the same: the RST was
                    // forged or stale, and the handshake goes on (RFC 5961 §3).
                    let reset_before = conn.state == ConnState::Reset && conn.handshake_ack_time_ns.get().is_none();
                    if let Some(answered_ns) = answered_before(flow, conn, seg) {
                        conn.handshake_ack_time_ns.set(Some(answered_ns));
                        if conn.state == ConnState::SynSent {
                            conn.set_state(ConnState::Established);
                        }
                    } else if conn.state == ConnState::SynSent || (conn.partial && conn.syn_count == 0) || reset_before {
                        conn.set_state(ConnState::SynReceived);
                    }
                }
                syn_data_answer(flow, conn, seg);
                role = PacketRole::Synack;
            }
        }
    } else if side == Side::Client
        && seg.has(flags::ACK)
        && conn.state == ConnState::SynReceived
        && conn.base_seq[peer].map(|isn| isn.wrapping_add(1)) == Some(seg.ack)
    {
        // RFC 9293 §3.5: the client's ACK of the SYN-ACK completes the handshake.
        conn.handshake_ack_time_ns.set(Some(time_ns));
        conn.handshake_ack_echo = seg.options.timestamp.map(|(_, echo)| echo);
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
    flow.direction[me].labelled(role);
}

/// The client acknowledged this first SYN-ACK before the capture stamped it: its handshake ACK
/// (and its request, its FIN) came first in the capture, as where the two directions are
/// stamped on different queues. A client acknowledges a SYN-ACK only once it has it (RFC 9293
/// §3.5), so the handshake completed with its first packet after the SYN; that packet's time is
/// the earliest of the client's first data, its FIN and its last packet. None when the client
/// sent nothing after its SYN that acknowledged this SYN-ACK.
fn answered_before(flow: &Flow, conn: &Connection, seg: &Segment) -> Option<i64> {
    let client = &flow.direction[Side::Client.index()];
    let syn_ns = conn.syn_time_ns.get()?;
    if conn.handshake_ack_time_ns.get().is_some() || client.last_ack != Some(seg.seq.wrapping_add(1)) {
        return None;
    }
    let m = &conn.milestones;
    let last = client.last_packet().map(|(_, _, t)| t);
    [m.client_data_ns.get(), m.client_closed_ns.get(), last].into_iter().flatten().filter(|&t| t > syn_ns).min()
}

/// RFC 7413 §4.2: a SYN-ACK that acknowledges only the SYN of a SYN that carried data (TCP Fast
/// Open) tells the client the server dropped the data; the client sends it again after the
/// handshake. That send is the data's first that counts, not a retransmission. A SYN-ACK that
/// acknowledges the data took it: the client's request went with the SYN.
fn syn_data_answer(flow: &mut Flow, conn: &mut Connection, seg: &Segment) {
    let len = conn.milestones.syn_data_len;
    let Some(isn) = conn.base_seq[Side::Client.index()] else { return };
    if len == 0 || conn.milestones.syn_data_acked.is_some() {
        return;
    }
    let (syn_end, data_end) = (SeqNumber(isn).plus(1), SeqNumber(isn).plus(1 + len));
    let client = &mut flow.direction[Side::Client.index()];
    if SeqNumber(seg.ack) == syn_end && client.next_seq == Some(data_end) {
        conn.milestones.syn_data_acked = Some(false);
        client.next_seq = Some(syn_end);
    } else if SeqNumber(seg.ack) == data_end {
        conn.milestones.syn_data_acked = Some(true);
        client.data_seen = true;
        conn.milestones.client_data_ns.set(conn.milestones.client_data_ns.get().or(conn.syn_time_ns.get()));
        conn.milestones.client_last_data_ns.set(conn.milestones.client_last_data_ns.get().or(conn.syn_time_ns.get()));
    }
}

/// A SYN from the client or a SYN-ACK from the server: the first is recorded (ISN, options),
/// one again is numbered. Returns whether it was the first.
fn handshake_send(flow: &mut Flow, conn: &mut Connection, pkt: &Packet<'_>, keep_events: bool) -> bool {
    let (seg, me) = (pkt.seg, pkt.side.index());
    // A SYN-ACK sent at once after a client SYN retransmission reached the request
    // (Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_check_req()), not by the SYN-ACK timer.
    let triggered = pkt.side == Side::Server
        && matches!(flow.direction[pkt.side.other().index()].last_packet(),
            Some((PacketRole::Syn, _, t)) if pkt.time_ns - t <= TRIGGERED_SYNACK_NS)
        && conn.syn_count > 1;
    let (sends, first_kind, again_kind) = match pkt.side {
        Side::Client => (conn.syn_count, EventKind::Syn, EventKind::SynRetransmit),
        Side::Server => (conn.synack_count, EventKind::Synack, EventKind::SynackRetransmit),
    };
    let dir = &mut flow.direction[me];
    if sends == 0 {
        conn.base_seq[me] = Some(seg.seq);
        conn.options[me] = Some(seg.options.into());
        conn.handshake_ident[me] = seg.options.timestamp.map(|(tsval, _)| (seg.ip_id, tsval));
        if pkt.side == Side::Server {
            conn.synack_ttl = Some(seg.ttl);
            conn.synack_echo = seg.options.timestamp.map(|(_, echo)| echo);
        }
        dir.first_handshake = Some(pkt.at);
        conn.push(pkt.event(first_kind, Detail::None), keep_events);
    } else {
        let detail = Detail::Attempt {
            attempt: sends + 1,
            original: dir.first_handshake,
            since_previous_ns: Some(pkt.time_ns - dir.last_handshake_ns),
            after_handshake_ack: conn.handshake_completed(),
        };
        conn.push(pkt.event(again_kind, detail), keep_events);
        let first_time = match pkt.side {
            Side::Client => conn.syn_time_ns.get(),
            Side::Server => conn.synack_time_ns.get(),
        };
        let first = dir.first_handshake.zip(first_time).map(|(at, time_ns)| Send { at, time_ns, triggered: false });
        let this = Send { at: pkt.at, time_ns: pkt.time_ns, triggered };
        let log = conn.retransmits_mut();
        let series = match pkt.side {
            Side::Client => &mut log.syn,
            Side::Server => &mut log.synack,
        };
        RetransmitLog::handshake(series, first, this);
    }
    match pkt.side {
        Side::Client => conn.syn_count += 1,
        Side::Server => conn.synack_count += 1,
    }
    dir.last_handshake_ns = pkt.time_ns;
    let after_syn = SeqNumber(seg.seq).plus(1 + seg.payload_len);
    dir.next_seq = Some(dir.next_seq.map_or(after_syn, |n| n.max(after_syn)));
    sends == 0
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

/// Bytes that vanished before the capture point (`Vanished`): a data segment, FIN or RST after
/// the handshake whose sequence number is past the highest byte its side was seen to send. Later
/// data from that side that covers the first missing byte fills the hole.
fn note_vanished(flow: &mut Flow, conn: &mut Connection, side: Side, seg: &Segment, at: &FrameRef, time_ns: i64, previous_ns: Option<i64>) {
    if seg.has(flags::SYN) || !conn.handshake_completed() {
        return;
    }
    let dir = &mut flow.direction[side.index()];
    let seq = SeqNumber(seg.seq);
    if let Some(v) = conn.vanished.as_deref_mut().filter(|v| v.from == side && !v.filled) {
        v.largest_through = v.largest_through.max(seg.payload_len);
        let start = SeqNumber(v.start);
        v.filled |= seg.payload_len > 0 && !start.before(seq) && start.before(seq.plus(seg.payload_len));
    }
    let carries = seg.payload_len > 0 || seg.flags & (flags::FIN | flags::RST) != 0;
    if let (true, None, Some(next)) = (carries, conn.vanished.as_ref(), dir.next_seq) {
        if seq.after(next) {
            conn.vanished = Some(Box::new(Vanished {
                from: side,
                start: next.0,
                end: seg.seq,
                at: *at,
                time_ns,
                quiet_before_ns: previous_ns.map_or(0, |t| time_ns - t),
                largest_through: dir.max_payload.max(seg.payload_len),
                filled: false,
            }));
        }
    }
    dir.max_payload = dir.max_payload.max(seg.payload_len);
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
    // Wireshark's spurious retransmission: payload the peer has already acknowledged was sent
    // before, even if the capture missed the first send.
    let acked_before = seg.payload_len > 0 && peer.last_ack.is_some_and(|ack| !SeqNumber(ack).before(seq.plus(seg.payload_len)));
    let peer_ack = peer.last_ack;
    let dir = &mut flow.direction[me];
    let end = seq.plus(seg.payload_len + u32::from(fin));
    let next = dir.next_seq.unwrap_or(seq);
    if seq.after(next) {
        conn.counts[me].unseen_before += 1;
    }
    let role = if pkt.keep_alive {
        PacketRole::Ack
    } else if seq.before(next) || acked_before {
        // The range starts below the highest sequence number already sent, or was acknowledged.
        let time_ns = pkt.time_ns;
        let previous = dir.find_in_flight(seq);
        let original = previous.as_ref().map(|sent| Send { at: sent.first, time_ns: sent.first_send_ns, triggered: false });
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
            // Re-sent smaller after a router said the segment was too big: path MTU discovery,
            // not a timer, and no sign of a half-open connection.
            let after_too_big = conn.resent_smaller_after_too_big(side, seg.payload_len, time_ns);
            // Client data re-sent before the server acknowledged any: into a half-open connection.
            let into_half_open = side == Side::Client && conn.milestones.client_data_acked_ns.get().is_none() && !after_too_big;
            let this = Send { at: pkt.at, time_ns, triggered: after_too_big };
            conn.retransmits_mut().data(side, seg.seq, original, this, into_half_open);
            conn.retransmits_mut().sized(side, seg.seq, seg.payload_len, peer_ack);
            if acked_before {
                conn.retransmits_mut().resent_after_ack(side, seg.seq);
            }
        }
        conn.push(pkt.event(kind, detail), keep_events);
        PacketRole::Retransmit
    } else {
        if seg.payload_len > 0 && !dir.data_seen {
            dir.data_seen = true;
            match side {
                Side::Client => conn.milestones.client_data_ns.set(Some(pkt.time_ns)),
                Side::Server => conn.milestones.server_data_ns.set(Some(pkt.time_ns)),
            }
            conn.push(pkt.event(EventKind::DataFirst, Detail::None), keep_events);
        }
        if seg.payload_len > 0 {
            match side {
                Side::Client => {
                    let m = &mut conn.milestones;
                    m.client_last_data_ns.set(Some(pkt.time_ns));
                    if m.server_closed_ns.get().is_some() {
                        m.client_bytes_after_server_close = m.client_bytes_after_server_close.saturating_add(seg.payload_len);
                    }
                }
                Side::Server => conn.milestones.server_last_data_ns.set(Some(pkt.time_ns)),
            }
        }
        dir.push_in_flight(SentSegment { seq, end, first: pkt.at, first_send_ns: pkt.time_ns, last_send_ns: pkt.time_ns, sends: 1 });
        if fin { PacketRole::Fin } else { PacketRole::Data }
    };
    if fin && !dir.fin_seen {
        dir.fin_seen = true;
        conn.counts[me].fin = true;
        conn.milestones.note_fin(side, pkt.time_ns, pkt.at);
        if role != PacketRole::Retransmit {
            conn.push(pkt.event(EventKind::Fin, Detail::None), keep_events);
        }
        let both = flow.direction[side.other().index()].fin_seen;
        flow.server_closed_first |= side == Side::Server && !both;
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
    // RFC 2883 §4: a first SACK block below the ACK number, or inside the second block, reports
    // a segment received twice; a re-send of it by the peer was spurious (Linux v6.6
    // net/ipv4/tcp_input.c: tcp_check_dsack(), TcpExtTCPDSACKRecv and TcpExtTCPDSACKOfoRecv).
    if let (Some((left, right)), Some(log)) = (seg.options.first_sack, conn.retransmits.as_deref_mut()) {
        if SeqNumber(left).before(SeqNumber(seg.ack)) || seg.options.first_sack_in_second {
            let (left, right) = (SeqNumber(left), SeqNumber(right));
            let inside = |seq: u32| !SeqNumber(seq).before(left) && SeqNumber(seq).before(right);
            for series in log.data.iter_mut().filter(|d| d.from == side.other() && inside(d.seq)) {
                series.dsacked = true;
            }
        }
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
    // The server's first acknowledgement of client data: the kernel took the client's request.
    if side == Side::Server && conn.milestones.client_data_acked_ns.get().is_none() {
        let client_base = conn.base_seq[Side::Client.index()];
        if client_base.is_some_and(|isn| SeqNumber(seg.ack).after(SeqNumber(isn).plus(1))) {
            conn.milestones.client_data_acked_ns.set(Some(pkt.time_ns));
        }
    }
    // What the peer sent and this ACK covers needs no more attempt numbers.
    let acked = SeqNumber(seg.ack);
    flow.direction[side.other().index()].acknowledge_in_flight(acked);
    if let Some(v) = conn.vanished.as_deref_mut().filter(|v| v.from == side.other()) {
        v.filled |= SeqNumber(seg.ack).after(SeqNumber(v.start));
    }
    let round_trip = conn.round_trip_to(side);
    if let Some(log) = conn.retransmits.as_mut() {
        log.acknowledged(side.other(), seg.ack, pkt.time_ns, round_trip);
    }
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

#[cfg(test)]
mod tests {
    //! The state machine driven by hand-made segments through a tracker: no files, no decoding.

    use super::*;
    use crate::flow::connection::MAX_EVENTS;
    use crate::flow::wire::*;
    use crate::flow::TrackerOptions;

    use EventKind::*;

    // ---------------------------------------------------------------------------------------
    // SYN-SENT

    #[test]
    fn test_syn_sent_syn_same_isn_is_syn_retransmit_with_attempt_and_gap() {
        let mut w = Wire::new();
        for ms in [0, 1000, 2000, 4000] {
            w.send(ms, C, SYN, CISN, 0, 0);
        }
        assert_eq!(w.kinds(), vec![(1, Syn), (2, SynRetransmit), (3, SynRetransmit), (4, SynRetransmit)]);
        assert_eq!(w.detail(2, SynRetransmit), attempt(2, 1, 1000, false));
        assert_eq!(w.detail(3, SynRetransmit), attempt(3, 1, 1000, false));
        assert_eq!(w.detail(4, SynRetransmit), attempt(4, 1, 2000, false));
        let c = w.conn();
        assert_eq!((c.syn_count, c.state, c.partial), (4, ConnState::SynSent, false));
        assert_eq!(c.syn_time_ns.get(), Some(0), "the handshake is timed from the first SYN");
        assert_eq!(w.relative(4, SynRetransmit).0, 0);
    }

    #[test]
    fn test_syn_sent_rst_answers_syn() {
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        let r = w.send(3, S, RST | ACK, 0, CISN + 1, 0);
        assert_eq!(w.kinds(), vec![(1, Syn), (r, Rst)]);
        assert_eq!(w.detail(r, Rst), rst(PacketRole::Syn, 1, 3));
        assert_eq!(w.conn().state, ConnState::Reset);
        assert!(w.conn().counts[S.index()].rst);
        // Wireshark: the server's base is the RST's seq - 1.
        assert_eq!(w.relative(r, Rst), (1, 1));
    }

    #[test]
    fn test_syn_sent_syn_with_fin_is_still_the_syn() {
        let mut w = Wire::new();
        w.send(0, C, SYN | FIN, CISN, 0, 0);
        w.send(1000, C, SYN | FIN, CISN, 0, 0);
        assert_eq!(w.kinds(), vec![(1, Syn), (2, SynRetransmit)]);
    }

    #[test]
    fn test_syn_sent_syn_with_rst_is_an_rst() {
        let mut w = Wire::new();
        w.send(0, C, SYN | RST, CISN, 0, 0);
        assert_eq!(w.kinds(), vec![(1, Rst)]);
        assert_eq!(w.detail(1, Rst), Detail::Rst { answers: None, answers_frame: None, after_ns: None });
        assert!(!w.conn().partial, "a SYN (even with RST) names the client");
    }

    #[test]
    fn test_syn_sent_odd_flag_combinations_do_not_panic() {
        let seqs = [0, 1, CISN, u32::MAX, u32::MAX - 1];
        for bits in 0..=0xffu8 {
            for &seq in &seqs {
                for len in [0, 1, 1460] {
                    // As the first packet, during the handshake, and in an established connection.
                    let mut w = Wire::new();
                    w.send(0, C, bits, seq, seq, len);
                    w.send(1, S, bits, seq.wrapping_add(7), seq, len);
                    let mut w = Wire::new();
                    w.send(0, C, SYN, CISN, 0, 0);
                    w.send(1, S, bits, SISN, CISN + 1, len);
                    w.send(2, C, bits, seq, SISN + 1, len);
                    let mut w = Wire::new();
                    w.handshake(CISN, SISN);
                    w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
                    w.send(4, S, bits, seq, seq, len);
                    w.send(5, C, bits, seq, seq, len);
                    w.send(6, S, ACK, SISN + 1, CISN + 101, 0);
                    assert!(!w.conns().is_empty());
                }
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // SYN-RECEIVED

    #[test]
    fn test_syn_received_ack_of_synack_is_handshake_ack() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        assert_eq!(w.kinds(), vec![(1, Syn), (2, Synack), (3, HandshakeAck)]);
        let c = w.conn();
        assert_eq!(c.state, ConnState::Established);
        assert_eq!(c.handshake_duration_ns(), Some(2 * MS));
        assert_eq!(c.base_seq, [Some(CISN), Some(SISN)]);
        assert_eq!(w.relative(3, HandshakeAck), (1, 1));
    }

    #[test]
    fn test_syn_sent_answers_stamped_before_the_synack_complete_the_handshake() {
        // The client's ACK, request and FIN stamped before the SYN-ACK they answer.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(9, C, ACK, CISN + 1, SISN + 1, 0);
        w.send(9, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(9, C, FIN | ACK, CISN + 101, SISN + 1, 0);
        w.send(10, S, SYN | ACK, SISN, CISN + 1, 0);
        let c = w.conn();
        assert_eq!(c.handshake_ack_time_ns.get(), Some(9 * MS));
        assert_eq!(c.state, ConnState::Closing);
        // An ACK of another sequence number answers no SYN-ACK of this connection.
        let mut other = Wire::new();
        other.send(0, C, SYN, CISN, 0, 0);
        other.send(9, C, ACK, CISN + 1, SISN + 9, 0);
        other.send(10, S, SYN | ACK, SISN, CISN + 1, 0);
        assert_eq!(other.conn().handshake_ack_time_ns.get(), None);
        assert_eq!(other.conn().state, ConnState::SynReceived);
    }

    #[test]
    fn test_syn_received_ack_of_something_else_is_not_handshake_ack() {
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(2, C, ACK, CISN + 1, SISN + 9, 0);
        assert_eq!(w.kinds(), vec![(1, Syn), (2, Synack)]);
        assert_eq!(w.conn().state, ConnState::SynReceived);
    }

    #[test]
    fn test_syn_received_synack_again_is_synack_retransmit_before_handshake_ack() {
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1001, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(3001, S, SYN | ACK, SISN, CISN + 1, 0);
        assert_eq!(w.frames_of(SynackRetransmit), vec![3, 4]);
        assert_eq!(w.detail(3, SynackRetransmit), attempt(2, 2, 1000, false));
        assert_eq!(w.detail(4, SynackRetransmit), attempt(3, 2, 2000, false));
        assert_eq!(w.conn().synack_count, 3);
    }

    #[test]
    fn test_syn_received_syn_again_after_synack_is_syn_retransmit() {
        // The SYN-ACK was lost on the way to the client: the client's SYN timer fires.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1000, C, SYN, CISN, 0, 0);
        w.send(1001, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1002, C, ACK, CISN + 1, SISN + 1, 0);
        assert_eq!(w.kinds(), vec![(1, Syn), (2, Synack), (3, SynRetransmit), (4, SynackRetransmit), (5, HandshakeAck)]);
        assert_eq!(w.detail(3, SynRetransmit), attempt(2, 1, 1000, false));
        assert_eq!(w.detail(4, SynackRetransmit), attempt(2, 2, 1000, false));
        assert_eq!(w.conn().state, ConnState::Established);
        assert_eq!(w.conn().follows, None);
    }

    #[test]
    fn test_syn_received_rst_answers_synack() {
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1, S, SYN | ACK, SISN, CISN + 1, 0);
        let r = w.send(2, C, RST, CISN + 1, 0, 0);
        assert_eq!(w.detail(r, Rst), rst(PacketRole::Synack, 2, 1));
    }

    // ---------------------------------------------------------------------------------------
    // ESTABLISHED

    #[test]
    fn test_established_synack_again_after_handshake_ack_marks_accept_queue() {
        // The server dropped the client's ACK (accept queue full) and re-sends the SYN-ACK; the
        // client answers each with a duplicate ACK and re-sends its request into the void.
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let request = w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 200);
        let retry1 = w.send(203, C, PSH | ACK, CISN + 1, SISN + 1, 200);
        let synack2 = w.send(1001, S, SYN | ACK, SISN, CISN + 1, 0);
        let dup1 = w.send(1001, C, ACK, CISN + 201, SISN + 1, 0);
        let retry2 = w.send(1403, C, PSH | ACK, CISN + 1, SISN + 1, 200);
        let synack3 = w.send(3001, S, SYN | ACK, SISN, CISN + 1, 0);
        let dup2 = w.send(3001, C, ACK, CISN + 201, SISN + 1, 0);
        assert_eq!(w.detail(synack2, SynackRetransmit), attempt(2, 2, 1000, true));
        assert_eq!(w.detail(synack3, SynackRetransmit), attempt(3, 2, 2000, true));
        assert_eq!(w.detail(retry1, DataRetransmit), attempt(2, request, 200, true));
        assert_eq!(w.detail(retry2, DataRetransmit), attempt(3, request, 1200, true));
        // The last ACK number change was the handshake ACK (frame 3).
        assert_eq!(w.detail(dup1, DupAck), dup(1, 3));
        assert_eq!(w.detail(dup2, DupAck), dup(2, 3));
        assert_eq!(w.relative(dup2, DupAck), (201, 1));
        assert_eq!(w.conn().counts[C.index()].data_retransmits, 2);
    }

    #[test]
    fn test_established_data_first_once_each_way() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let c1 = w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(4, C, PSH | ACK, CISN + 101, SISN + 1, 100);
        let s1 = w.send(5, S, PSH | ACK, SISN + 1, CISN + 201, 300);
        w.send(6, S, PSH | ACK, SISN + 301, CISN + 201, 300);
        assert_eq!(w.frames_of(DataFirst), vec![c1, s1]);
        assert_eq!(w.event(s1, DataFirst).from, S);
        assert_eq!(w.relative(s1, DataFirst), (1, 201));
        assert!(w.frames_of(DataRetransmit).is_empty());
    }

    #[test]
    fn test_established_data_below_nextseq_is_data_retransmit_numbered_per_segment() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let a = w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        let b = w.send(11, C, PSH | ACK, CISN + 101, SISN + 1, 100);
        let a2 = w.send(210, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        let a3 = w.send(610, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        let b2 = w.send(611, C, PSH | ACK, CISN + 101, SISN + 1, 100);
        assert_eq!(w.frames_of(DataRetransmit), vec![a2, a3, b2]);
        assert_eq!(w.detail(a2, DataRetransmit), attempt(2, a, 200, true));
        assert_eq!(w.detail(a3, DataRetransmit), attempt(3, a, 400, true));
        assert_eq!(w.detail(b2, DataRetransmit), attempt(2, b, 600, true));
        assert_eq!(w.relative(b2, DataRetransmit), (101, 1));
        assert_eq!(w.conn().counts[C.index()].data_retransmits, 3);
    }

    #[test]
    fn test_established_retransmit_not_lined_up_with_a_segment_has_no_original() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        let r = w.send(300, C, PSH | ACK, CISN + 51, SISN + 1, 100);
        let expected = Detail::Attempt { attempt: 2, original: None, since_previous_ns: None, after_handshake_ack: true };
        assert_eq!(w.detail(r, DataRetransmit), expected);
    }

    #[test]
    fn test_established_acked_segment_forgets_its_attempts() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(20, S, ACK, SISN + 1, CISN + 101, 0);
        let r = w.send(300, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        // Still a retransmission (below nextseq), but no longer numbered against the original.
        let expected = Detail::Attempt { attempt: 2, original: None, since_previous_ns: None, after_handshake_ack: true };
        assert_eq!(w.detail(r, DataRetransmit), expected);
    }

    #[test]
    fn test_established_keep_alive_is_not_retransmit() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(20, S, ACK, SISN + 1, CISN + 101, 0);
        // Zero or one byte at nextseq - 1.
        w.send(10_000, C, ACK, CISN + 100, SISN + 1, 0);
        w.send(20_000, C, ACK, CISN + 100, SISN + 1, 1);
        w.send(30_000, C, ACK, CISN + 100, SISN + 1, 1);
        assert!(w.frames_of(DataRetransmit).is_empty(), "{:?}", w.kinds());
        assert_eq!(w.conn().counts[C.index()].data_retransmits, 0);
        // Two bytes below nextseq are a retransmission.
        let r = w.send(40_000, C, ACK, CISN + 99, SISN + 1, 2);
        assert_eq!(w.frames_of(DataRetransmit), vec![r]);
    }

    #[test]
    fn test_established_keep_alive_ack_is_not_dup_ack() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        let new_ack = w.send(20, S, ACK, SISN + 1, CISN + 101, 0);
        let d1 = w.send(30, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(10_000, C, ACK, CISN + 100, SISN + 1, 0);
        let keep_alive_ack = w.send(10_001, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(10_002, C, ACK, CISN + 101, SISN + 1, 0);
        let d2 = w.send(10_003, S, ACK, SISN + 1, CISN + 101, 0);
        assert_eq!(w.detail(d1, DupAck), dup(1, new_ack));
        assert!(!w.frames_of(DupAck).contains(&keep_alive_ack), "{:?}", w.kinds());
        // Wireshark neither counts the keep-alive ACK nor restarts the count at it.
        assert_eq!(w.detail(d2, DupAck), dup(2, new_ack));
    }

    #[test]
    fn test_established_dup_ack_counts_and_points_at_last_new_ack() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(11, C, PSH | ACK, CISN + 101, SISN + 1, 100);
        w.send(12, C, PSH | ACK, CISN + 201, SISN + 1, 100);
        let first = w.send(20, S, ACK, SISN + 1, CISN + 101, 0);
        let dups: Vec<u64> = (0..3).map(|i| w.send(21 + i, S, ACK, SISN + 1, CISN + 101, 0)).collect();
        for (n, d) in dups.iter().enumerate() {
            assert_eq!(w.detail(*d, DupAck), dup(n as u32 + 1, first));
        }
        assert_eq!(w.relative(dups[2], DupAck), (1, 101));
        assert_eq!(w.conn().counts[S.index()].dup_acks, 3);
    }

    #[test]
    fn test_established_dup_ack_count_restarts_when_ack_moves() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(11, C, PSH | ACK, CISN + 101, SISN + 1, 100);
        w.send(20, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(21, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(22, S, ACK, SISN + 1, CISN + 101, 0);
        let moved = w.send(23, S, ACK, SISN + 1, CISN + 201, 0);
        let d = w.send(24, S, ACK, SISN + 1, CISN + 201, 0);
        assert_eq!(w.detail(d, DupAck), dup(1, moved));
    }

    #[test]
    fn test_established_dup_ack_count_survives_data_and_window_change_with_same_ack() {
        // Wireshark only restarts the count when the ACK number changes.
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        let first = w.send(20, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(21, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(22, S, PSH | ACK, SISN + 1, CISN + 101, 50);
        let d2 = w.send(23, S, ACK, SISN + 51, CISN + 101, 0);
        let update = w.send_win(24, S, ACK, SISN + 51, CISN + 101, 0, 2000);
        let d3 = w.send_win(25, S, ACK, SISN + 51, CISN + 101, 0, 2000);
        assert_eq!(w.detail(d2, DupAck), dup(2, first));
        assert!(!w.frames_of(DupAck).contains(&update));
        assert_eq!(w.detail(d3, DupAck), dup(3, first));
    }

    #[test]
    fn test_established_dup_ack_needs_same_window_no_data_and_seq_at_nextseq() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(20, S, ACK, SISN + 1, CISN + 101, 0);
        w.send_win(21, S, ACK, SISN + 1, CISN + 101, 0, 999); // window update
        w.send_win(22, S, ACK, SISN + 1, CISN + 101, 0, 0); // zero window
        w.send_win(23, S, ACK, SISN + 1, CISN + 101, 0, 0); // zero window again
        w.send_win(24, S, ACK, SISN + 7, CISN + 101, 0, 0); // seq not at nextseq
        w.send_win(25, S, ACK, SISN + 7, CISN + 101, 0, 999);
        w.send_win(26, S, FIN | ACK, SISN + 1, CISN + 101, 0, 999);
        assert!(w.frames_of(DupAck).is_empty(), "{:?}", w.kinds());
        // Same ACK, same non-zero window, seq at nextseq: now a duplicate.
        let d = w.send_win(27, S, ACK, SISN + 2, CISN + 101, 0, 999);
        assert_eq!(w.frames_of(DupAck), vec![d]);
    }

    #[test]
    fn test_established_zero_window_once_per_stall() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 1000);
        let stall1 = w.send_win(20, S, ACK, SISN + 1, CISN + 1001, 0, 0);
        w.send_win(300, S, ACK, SISN + 1, CISN + 1001, 0, 0);
        w.send_win(600, S, ACK, SISN + 1, CISN + 1001, 0, 4000);
        w.send(610, C, PSH | ACK, CISN + 1001, SISN + 1, 1000);
        let stall2 = w.send_win(620, S, ACK, SISN + 1, CISN + 2001, 0, 0);
        w.send_win(630, S, FIN | ACK, SISN + 1, CISN + 2001, 0, 0);
        assert_eq!(w.frames_of(ZeroWindow), vec![stall1, stall2]);
        assert_eq!(w.conn().counts[S.index()].zero_windows, 2);
        assert_eq!(w.relative(stall2, ZeroWindow), (1, 2001));
    }

    #[test]
    fn test_established_zero_window_probe_does_not_make_later_data_retransmit() {
        // A one-byte probe at nextseq while the window is zero; the receiver drops the byte.
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 1000);
        w.send_win(20, S, ACK, SISN + 1, CISN + 1001, 0, 0);
        w.send(300, C, ACK, CISN + 1001, SISN + 1, 1);
        w.send_win(301, S, ACK, SISN + 1, CISN + 1001, 0, 0);
        w.send(900, C, ACK, CISN + 1001, SISN + 1, 1);
        w.send_win(901, S, ACK, SISN + 1, CISN + 1001, 0, 0);
        w.send_win(1500, S, ACK, SISN + 1, CISN + 1001, 0, 4000);
        w.send(1510, C, PSH | ACK, CISN + 1001, SISN + 1, 1000);
        assert!(w.frames_of(DataRetransmit).is_empty(), "{:?}", w.kinds());
        assert_eq!(w.conn().counts[C.index()].unseen_before, 0);
        // A byte at nextseq while the window is open is ordinary data.
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 1);
        let r = w.send(300, C, PSH | ACK, CISN + 1, SISN + 1, 2);
        assert_eq!(w.frames_of(DataRetransmit), vec![r]);
    }

    #[test]
    fn test_established_rst_after_late_retransmit_answers_retransmit_with_gap() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 200);
        let late = w.send(3010, C, PSH | ACK, CISN + 1, SISN + 1, 200);
        let r = w.send(3012, S, RST, SISN + 1, 0, 0);
        assert_eq!(w.detail(r, Rst), rst(PacketRole::Retransmit, late, 2));
        assert_eq!(w.conn().state, ConnState::Reset);
        assert_eq!(w.relative(r, Rst).0, 1);
    }

    #[test]
    fn test_established_rst_answers_data_ack_and_handshake_ack() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let r = w.send(5, S, RST, SISN + 1, 0, 0);
        assert_eq!(w.detail(r, Rst), rst(PacketRole::HandshakeAck, 3, 3));

        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let d = w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 10);
        let r = w.send(11, S, RST | ACK, SISN + 1, CISN + 11, 0);
        assert_eq!(w.detail(r, Rst), rst(PacketRole::Data, d, 1));

        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, S, PSH | ACK, SISN + 1, CISN + 1, 10);
        let a = w.send(11, C, ACK, CISN + 1, SISN + 11, 0);
        let r = w.send(15, S, RST | ACK, SISN + 11, CISN + 1, 0);
        assert_eq!(w.detail(r, Rst), rst(PacketRole::Ack, a, 4));
    }

    #[test]
    fn test_established_data_the_peer_acknowledged_is_retransmit_though_unseen() {
        // The capture missed bytes 101-400, which the server acknowledged; 101-200 come again.
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(20, S, ACK, SISN + 1, CISN + 401, 0);
        let r = w.send(30, C, PSH | ACK, CISN + 101, SISN + 1, 100);
        let expected = Detail::Attempt { attempt: 2, original: None, since_previous_ns: None, after_handshake_ack: true };
        assert_eq!(w.detail(r, DataRetransmit), expected);
        // Bytes 401 on were not acknowledged: new data.
        w.send(31, C, PSH | ACK, CISN + 401, SISN + 1, 100);
        assert_eq!(w.frames_of(DataRetransmit), vec![r]);
    }

    #[test]
    fn test_established_data_beyond_nextseq_counts_unseen_not_retransmit() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(11, C, PSH | ACK, CISN + 201, SISN + 1, 100);
        assert!(w.frames_of(DataRetransmit).is_empty());
        assert_eq!(w.conn().counts[C.index()].unseen_before, 1);
        // The missing segment, when it comes, starts below nextseq: a retransmission.
        let late = w.send(12, C, PSH | ACK, CISN + 101, SISN + 1, 100);
        assert_eq!(w.frames_of(DataRetransmit), vec![late]);
    }

    #[test]
    fn test_established_dup_acks_beyond_max_events_count_as_dropped() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let extra = 10;
        for i in 0..(MAX_EVENTS as i64 + extra) {
            w.send(10 + i, S, ACK, SISN + 1, CISN + 1, 0);
        }
        let c = w.conn();
        assert_eq!(c.events.len(), MAX_EVENTS);
        // Three handshake events came first.
        assert_eq!(c.events_dropped, 3 + extra as u32);
        assert_eq!(c.counts[S.index()].dup_acks, MAX_EVENTS as u32 + extra as u32);
        assert_eq!(c.events.last().map(|e| e.kind), Some(DupAck));
    }

    #[test]
    fn test_established_events_off_keeps_counts_only() {
        let options = TrackerOptions { keep_events: false, ..TrackerOptions::default() };
        let mut w = Wire::with_options(40000, 9000, options);
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(300, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(301, S, ACK, SISN + 1, CISN + 1, 0);
        let c = w.conn();
        assert!(c.events.is_empty());
        assert_eq!(c.events_dropped, 0);
        assert_eq!((c.counts[C.index()].data_retransmits, c.counts[S.index()].dup_acks), (1, 1));
        assert!(c.handshake_completed());
    }

    // ---------------------------------------------------------------------------------------
    // closing

    #[test]
    fn test_closing_fin_each_way_closes() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let f1 = w.send(10, C, FIN | ACK, CISN + 1, SISN + 1, 0);
        assert_eq!(w.conn().state, ConnState::Closing);
        let f2 = w.send(11, S, FIN | ACK, SISN + 1, CISN + 2, 0);
        w.send(12, C, ACK, CISN + 2, SISN + 2, 0);
        assert_eq!(w.frames_of(Fin), vec![f1, f2]);
        assert_eq!(w.conn().state, ConnState::Closed);
        assert_eq!(w.relative(f2, Fin), (1, 2));
        assert!(w.conn().counts.iter().all(|d| d.fin));
    }

    #[test]
    fn test_closing_fin_again_is_fin_retransmit() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(20, S, ACK, SISN + 1, CISN + 101, 0);
        let fin = w.send(100, C, FIN | ACK, CISN + 101, SISN + 1, 0);
        let again = w.send(400, C, FIN | ACK, CISN + 101, SISN + 1, 0);
        let third = w.send(1000, C, FIN | ACK, CISN + 101, SISN + 1, 0);
        assert_eq!(w.frames_of(Fin), vec![fin]);
        assert_eq!(w.frames_of(FinRetransmit), vec![again, third]);
        assert_eq!(w.detail(again, FinRetransmit), attempt(2, fin, 300, true));
        assert_eq!(w.detail(third, FinRetransmit), attempt(3, fin, 600, true));
        assert_eq!(w.relative(third, FinRetransmit), (101, 1));
        assert_eq!(w.conn().counts[C.index()].data_retransmits, 0, "a FIN carries no data");
    }

    #[test]
    fn test_closing_fin_with_data_again_is_data_retransmit() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let fin = w.send(10, C, FIN | PSH | ACK, CISN + 1, SISN + 1, 100);
        let again = w.send(300, C, FIN | PSH | ACK, CISN + 1, SISN + 1, 100);
        assert_eq!(w.kinds()[3..], [(fin, DataFirst), (fin, Fin), (again, DataRetransmit)]);
    }

    #[test]
    fn test_closing_rst_after_fin_answers_fin() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let fin = w.send(10, C, FIN | ACK, CISN + 1, SISN + 1, 0);
        let r = w.send(15, S, RST, SISN + 1, 0, 0);
        assert_eq!(w.detail(r, Rst), rst(PacketRole::Fin, fin, 5));
        assert_eq!(w.conn().state, ConnState::Reset);
    }

    #[test]
    fn test_closing_rst_after_rst_answers_rst() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let first = w.send(10, C, RST | ACK, CISN + 1, SISN + 1, 0);
        let second = w.send(20, S, RST | ACK, SISN + 1, CISN + 1, 0);
        assert_eq!(w.detail(first, Rst), rst(PacketRole::Synack, 2, 9));
        assert_eq!(w.detail(second, Rst), rst(PacketRole::Rst, first, 10));
    }

    #[test]
    fn test_closing_rst_after_retransmitted_fin_answers_retransmit() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(10, C, FIN | ACK, CISN + 1, SISN + 1, 0);
        let again = w.send(310, C, FIN | ACK, CISN + 1, SISN + 1, 0);
        let r = w.send(311, S, RST, SISN + 1, 0, 0);
        assert_eq!(w.detail(r, Rst), rst(PacketRole::Retransmit, again, 1));
    }

    // ---------------------------------------------------------------------------------------
    // sequence wrap

    /// Client ISN 150 below 2^32, server ISN 3 below: data from both sides crosses zero.
    const WRAP_CISN: u32 = u32::MAX - 149;
    const WRAP_SISN: u32 = u32::MAX - 2;

    fn wrapped_transfer() -> (Wire, [u64; 4]) {
        let mut w = Wire::new();
        w.handshake(WRAP_CISN, WRAP_SISN);
        let (c, s) = (WRAP_CISN.wrapping_add(1), WRAP_SISN.wrapping_add(1));
        let a = w.send(10, C, PSH | ACK, c, s, 100);
        let b = w.send(11, C, PSH | ACK, c.wrapping_add(100), s, 100); // crosses 0
        let d = w.send(12, C, PSH | ACK, c.wrapping_add(200), s, 100); // after 0
        let e = w.send(20, S, PSH | ACK, s, c, 100); // crosses 0
        (w, [a, b, d, e])
    }

    #[test]
    fn test_wrap_data_crossing_zero_is_not_retransmit() {
        let (mut w, _) = wrapped_transfer();
        let (c, s) = (WRAP_CISN.wrapping_add(301), WRAP_SISN.wrapping_add(101));
        w.send(21, S, ACK, s, c, 0);
        w.send(22, C, ACK, c, s, 0);
        assert!(w.frames_of(DataRetransmit).is_empty(), "{:?}", w.kinds());
        let counts = w.conn().counts;
        assert_eq!((counts[0].unseen_before, counts[1].unseen_before), (0, 0));
        assert!(w.frames_of(DupAck).is_empty(), "{:?}", w.kinds());
    }

    #[test]
    fn test_wrap_relative_numbers_count_from_isn() {
        let (w, [a, _, _, e]) = wrapped_transfer();
        assert_eq!(w.relative(a, DataFirst), (1, 1));
        assert_eq!(w.relative(e, DataFirst), (1, 1));
        assert_eq!(w.conn().base_seq, [Some(WRAP_CISN), Some(WRAP_SISN)]);
    }

    #[test]
    fn test_wrap_retransmit_across_zero_is_detected() {
        let (mut w, [_, b, d, _]) = wrapped_transfer();
        let c = WRAP_CISN.wrapping_add(1);
        let b2 = w.send(300, C, PSH | ACK, c.wrapping_add(100), WRAP_SISN.wrapping_add(1), 100);
        let d2 = w.send(301, C, PSH | ACK, c.wrapping_add(200), WRAP_SISN.wrapping_add(1), 100);
        assert_eq!(w.detail(b2, DataRetransmit), attempt(2, b, 289, true));
        assert_eq!(w.detail(d2, DataRetransmit), attempt(2, d, 289, true));
        assert_eq!(w.relative(d2, DataRetransmit), (201, 1));
    }

    #[test]
    fn test_wrap_retransmit_of_data_ending_at_zero_is_detected() {
        // nextseq lands exactly on 0 (Wireshark takes 0 for "unknown" and misses this one).
        let isn = u32::MAX - 100;
        let mut w = Wire::new();
        w.handshake(isn, SISN);
        let a = w.send(10, C, PSH | ACK, isn.wrapping_add(1), SISN + 1, 100);
        let r = w.send(300, C, PSH | ACK, isn.wrapping_add(1), SISN + 1, 100);
        assert_eq!(w.detail(r, DataRetransmit), attempt(2, a, 290, true));
    }

    #[test]
    fn test_wrap_syn_with_isn_at_max_retransmits_and_completes() {
        let mut w = Wire::new();
        w.send(0, C, SYN, u32::MAX, 0, 0);
        w.send(1000, C, SYN, u32::MAX, 0, 0);
        w.send(1001, S, SYN | ACK, SISN, 0, 0);
        let h = w.send(1002, C, ACK, 0, SISN + 1, 0);
        assert_eq!(w.frames_of(SynRetransmit), vec![2]);
        assert_eq!(w.frames_of(HandshakeAck), vec![h]);
        assert_eq!(w.relative(h, HandshakeAck), (1, 1));
    }

    #[test]
    fn test_wrap_dup_acks_across_zero() {
        let (mut w, [_, _, d, _]) = wrapped_transfer();
        let (s, acked) = (WRAP_SISN.wrapping_add(101), WRAP_CISN.wrapping_add(201));
        assert_eq!(acked, 51, "the ACK number has wrapped");
        let first = w.send(30, S, ACK, s, acked, 0);
        let d1 = w.send(31, S, ACK, s, acked, 0);
        let d2 = w.send(32, S, ACK, s, acked, 0);
        assert_eq!(w.detail(d2, DupAck), dup(2, first));
        assert_eq!(w.relative(d1, DupAck), (101, 201));
        let fast = w.send(33, C, PSH | ACK, acked, s, 100);
        assert_eq!(w.detail(fast, DataRetransmit), attempt(2, d, 21, true));
    }

    // ---------------------------------------------------------------------------------------
    // Copies of frames (span ports, `-i any`, bridges) are not re-sends

    #[test]
    fn test_established_copy_with_same_ip_id_is_duplicate_not_retransmit() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let a = w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        // A bridge copy 1.4 ms later (ppa_hauntedbrowser), then the server's ACK.
        w.copy_at_us(4_400, a);
        w.send(5, S, ACK, SISN + 1, CISN + 101, 0);
        let c = w.conn();
        assert!(w.frames_of(DataRetransmit).is_empty(), "{:?}", w.kinds());
        assert_eq!((c.duplicates, c.counts[C.index()].packets, c.counts[C.index()].data_retransmits), (1, 3, 0));
    }

    #[test]
    fn test_two_identical_rsts_answering_two_segments_are_both_rsts_unless_the_capture_doubles_frames() {
        // proxy_read_timeout: the client closed; the server's late answer and its FIN arrive
        // together and each gets an RST, alike (no ID, no timestamp), 45 µs apart.
        let exchange = |doubled: bool| {
            let mut w = Wire::new();
            w.zero_ip_id = true;
            w.handshake(CISN, SISN);
            if doubled {
                w.copy_at_us(2_010, 3);
            }
            w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
            w.send(1_000, C, FIN | ACK, CISN + 101, SISN + 1, 0);
            w.send(1_001, S, PSH | ACK, SISN + 1, CISN + 101, 1000);
            w.send(1_002, S, FIN | ACK, SISN + 1001, CISN + 101, 0);
            let rst = w.send(1_070, C, RST, CISN + 101, 0, 0);
            w.copy_at_us(1_070_045, rst);
            (w.frames_of(EventKind::Rst).len(), w.conn().duplicates)
        };
        assert_eq!(exchange(false), (2, 0));
        // A capture that showed a copy before: the second RST is one too.
        assert_eq!(exchange(true), (1, 2));
    }

    #[test]
    fn test_frames_repeated_with_the_clock_gone_back_are_copies() {
        // ppa_blaster: the exchange, then the same frames again with their timestamps from 0.
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let a = w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        let b = w.send(4, S, PSH | ACK, SISN + 1, CISN + 101, 50);
        w.send(5000, C, ACK, CISN + 101, SISN + 51, 0);
        w.copy_at_us(3_000, a);
        w.copy_at_us(4_000, b);
        let c = w.conn();
        assert!(w.frames_of(DataRetransmit).is_empty(), "{:?}", w.kinds());
        assert_eq!(c.duplicates, 2);
        assert_eq!((c.counts[C.index()].data_retransmits, c.counts[S.index()].data_retransmits), (0, 0));
    }

    #[test]
    fn test_syn_sent_syn_copy_with_same_ip_id_33ms_later_is_duplicate() {
        // ddos_pkt.TCP.synflood.spoofed: 172 SYNs captured twice, 17 to 33 ms apart.
        let mut w = Wire::new();
        let syn = w.send(0, C, SYN, CISN, 0, 0);
        w.copy_at_us(33_000, syn);
        let c = w.conn();
        assert_eq!((c.syn_count, c.duplicates), (1, 1));
        assert!(w.frames_of(SynRetransmit).is_empty());
    }

    #[test]
    fn test_established_copies_with_zero_ip_id_at_the_same_instant_are_duplicates() {
        // zeek_tcp_ssh-dups: a macOS client (IPv4 ID 0), every frame recorded four times.
        let mut w = Wire::new();
        w.zero_ip_id = true;
        w.handshake(CISN, SISN);
        let a = w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 21);
        for _ in 0..3 {
            w.copy_at_us(3_000, a);
        }
        let ack = w.send(4, S, ACK, SISN + 1, CISN + 22, 0);
        for _ in 0..3 {
            w.copy_at_us(4_000, ack);
        }
        assert!(w.frames_of(DataRetransmit).is_empty() && w.frames_of(DupAck).is_empty(), "{:?}", w.kinds());
        assert_eq!(w.conn().duplicates, 6);
    }

    #[test]
    fn test_established_resend_with_a_new_ip_id_is_a_copy_at_once_and_a_retransmit_after_the_peers_ack() {
        // The same bytes with a new IP ID at the same instant, nothing from the peer between: no
        // timer or duplicate ACK could have sent them again, one transmission seen twice. After
        // the peer's duplicate ACK, the same again is a re-send.
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let a = w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        assert_eq!((w.frames_of(DataRetransmit).len(), w.conn().duplicates), (0, 1));
        w.send(4, S, ACK, SISN + 1, CISN + 1, 0);
        let r = w.send(4, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        assert_eq!(w.frames_of(DataRetransmit), vec![r]);
        assert_eq!(w.detail(r, DataRetransmit), attempt(2, a, 1, true));
    }

    #[test]
    fn test_established_zero_ip_id_resend_after_a_peer_ack_is_retransmit() {
        // The same bytes within a millisecond, but the peer's ACK came between: a fast re-send.
        let mut w = Wire::new();
        w.zero_ip_id = true;
        w.handshake(CISN, SISN);
        let a = w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(3, S, ACK, SISN + 1, CISN + 1, 0);
        let r = w.copy_at_us(3_500, a);
        assert_eq!(w.frames_of(DataRetransmit), vec![r]);
        assert_eq!(w.conn().duplicates, 0);
    }

    #[test]
    fn test_syn_received_zero_ip_id_synack_timer_resend_is_retransmit() {
        // Linux sends SYN-ACKs with ID 0, byte-identical without timestamps: only the gap tells.
        let mut w = Wire::new();
        w.zero_ip_id = true;
        w.send(0, C, SYN, CISN, 0, 0);
        let sa = w.send(1, S, SYN | ACK, SISN, CISN + 1, 0);
        let again = w.copy_at_us(1_001_000, sa);
        assert_eq!(w.frames_of(SynackRetransmit), vec![again]);
        assert_eq!(w.conn().duplicates, 0);
    }

    #[test]
    fn test_established_same_ip_id_resend_after_a_peer_packet_is_retransmit() {
        // A tool that keeps the IP ID (scapy sends 1 every time): the peer's packet in between
        // shows the second RST answers something new.
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let rst = w.send(3, S, RST, SISN + 1, 0, 0);
        w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.copy_at_us(3_100, rst);
        assert_eq!(w.frames_of(Rst).len(), 2);
        assert_eq!(w.conn().duplicates, 0);
    }

    #[test]
    fn test_established_same_ip_id_data_40ms_later_is_a_copy_and_a_new_id_a_retransmit() {
        // The same datagram seen again 40 ms later (a capture on two interfaces), then a re-send
        // with a new ID.
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        let a = w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.copy_at_us(3_000 + 40_000, a);
        assert_eq!((w.frames_of(DataRetransmit).len(), w.conn().duplicates), (0, 1));
        let r = w.send(300, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        assert_eq!(w.frames_of(DataRetransmit), vec![r]);
    }

    #[test]
    fn test_a_sender_with_one_ip_id_for_every_segment_resends_with_it() {
        // A packet crafter's fixed ID tells no datagram from another: its re-send 200 ms later
        // is one, its copy at the same instant is not.
        let mut w = Wire::new();
        w.fixed_ip_id = Some(1);
        w.handshake(CISN, SISN);
        let a = w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.copy_at_us(3_010, a);
        let r = w.copy_at_us(203_000, a);
        assert_eq!(w.frames_of(DataRetransmit), vec![r]);
        assert_eq!(w.conn().duplicates, 1);
    }

    #[test]
    fn test_the_same_bytes_cut_differently_at_once_are_seen_again_not_resent() {
        // 1460 bytes, then within 30 us the same as 1440 + 20 (a capture before and after
        // segmentation offload), each with its own IP ID: one transmission seen twice.
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.send(4, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(5, S, ACK, SISN + 1, CISN + 101, 1460);
        let mut at = |us: i64, seq: u32, len: u32| {
            let mut seg = *w.sent.last().unwrap();
            (seg.seq, seg.payload_len, seg.ip_id) = (seq, len, seg.ip_id + 1);
            w.sent.push(seg);
            w.frames += 1;
            w.tracker.on_segment(&seg, FrameRef { file: 0, frame: w.frames }, us * 1000);
        };
        at(5_010, SISN + 1, 1440);
        at(5_030, SISN + 1 + 1440, 20);
        assert_eq!((w.frames_of(DataRetransmit).len(), w.conn().duplicates), (0, 2));
        // Its twin: the same bytes again 200 ms later, on the RTO, are a re-send.
        let r = w.send(205, S, ACK, SISN + 1, CISN + 101, 1460);
        assert_eq!(w.frames_of(DataRetransmit), vec![r]);
    }

    #[test]
    fn test_copies_interleaved_with_the_peers_packets_are_copies() {
        // `-i any` on a router: each datagram on both interfaces, the peer's answer between a
        // frame and its copy: SYN, SYN-ACK, SYN copy, SYN-ACK copy, ACK, data, ACK copy, data
        // copy, the answer, its copy.
        let mut w = Wire::new();
        let syn = w.send(0, C, SYN, CISN, 0, 0);
        let sa = w.send(1, S, SYN | ACK, SISN, CISN + 1, 0);
        w.copy_at_us(1_500, syn);
        w.copy_at_us(2_000, sa);
        let ack = w.send(3, C, ACK, CISN + 1, SISN + 1, 0);
        let data = w.send(3, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        w.copy_at_us(3_400, ack);
        w.copy_at_us(3_500, data);
        let answer = w.send(20, S, PSH | ACK, SISN + 1, CISN + 101, 100);
        w.send(21, C, ACK, CISN + 101, SISN + 101, 0);
        w.copy_at_us(22_000, answer);
        let c = w.conn();
        assert_eq!((c.syn_count, c.synack_count, c.duplicates), (1, 1, 5));
        assert!(c.retransmits.is_none());
        assert_eq!(w.frames_of(DataRetransmit).len(), 0);
    }

    #[test]
    fn test_syn_sent_same_ip_id_syn_after_1s_is_syn_retransmit() {
        // cs_nowebaccess3: Windows re-sends its SYN with the same ID after 1 s.
        let mut w = Wire::new();
        let syn = w.send(0, C, SYN, CISN, 0, 0);
        let copy = w.copy_at_us(5_000, syn);
        let again = w.copy_at_us(1_002_000, syn);
        assert_eq!(w.frames_of(SynRetransmit), vec![again]);
        assert_eq!((copy, w.conn().duplicates), (2, 1));
    }

    // ---------------------------------------------------------------------------------------
    // TCP Fast Open (RFC 7413)

    #[test]
    fn test_syn_received_tfo_data_rejected_then_resent_is_first_data_not_retransmit() {
        // sv_tcp-fastopen-11-reject-syn-data: the SYN carries 517 bytes, the SYN-ACK acknowledges
        // only the SYN, the client sends the data again after its ACK.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 517);
        w.send(1, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(2, C, ACK, CISN + 1, SISN + 1, 0);
        let data = w.send(9, C, PSH | ACK, CISN + 1, SISN + 1, 517);
        w.send(10, S, ACK, SISN + 1, CISN + 518, 0);
        let c = w.conn();
        assert_eq!(w.frames_of(DataFirst), vec![data]);
        assert!(w.frames_of(DataRetransmit).is_empty(), "{:?}", w.kinds());
        assert_eq!((c.milestones.syn_data_len, c.milestones.syn_data_acked), (517, Some(false)));
        assert_eq!((c.milestones.client_data_ns.get(), c.milestones.client_data_acked_ns.get()), (Some(9 * MS), Some(10 * MS)));
        assert!(c.retransmits.is_none());
    }

    #[test]
    fn test_syn_received_tfo_data_accepted_counts_the_request_from_the_syn() {
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 300);
        w.send(1, S, SYN | ACK, SISN, CISN + 301, 0);
        w.send(2, C, ACK, CISN + 301, SISN + 1, 0);
        w.send(3, S, PSH | ACK, SISN + 1, CISN + 301, 1000);
        let c = w.conn();
        assert_eq!(c.milestones.syn_data_acked, Some(true));
        assert_eq!((c.milestones.client_data_ns.get(), c.milestones.client_data_acked_ns.get()), (Some(0), Some(MS)));
        assert!(w.frames_of(DataFirst).len() == 1 && w.frames_of(DataRetransmit).is_empty(), "{:?}", w.kinds());
    }

    // ---------------------------------------------------------------------------------------
    // Refused, and tried again

    #[test]
    fn test_reset_syn_again_after_rst_is_counted_as_syn_after_rst() {
        // Windows: SYN, RST, the same SYN 0.5 s later, RST, once more.
        let mut w = Wire::new();
        for t in [0, 500, 1000] {
            w.send(t, C, SYN, CISN, 0, 0);
            w.send(t + 1, S, RST | ACK, 0, CISN + 1, 0);
        }
        let c = w.conn();
        assert_eq!((c.syn_count, c.milestones.syns_after_rst), (3, 2));
        assert_eq!(c.state, ConnState::Reset);
    }

    #[test]
    fn test_syn_sent_syn_retry_before_any_rst_is_not_after_rst() {
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1000, C, SYN, CISN, 0, 0);
        w.send(1001, S, RST | ACK, 0, CISN + 1, 0);
        w.send(1500, C, SYN, CISN, 0, 0);
        assert_eq!((w.conn().syn_count, w.conn().milestones.syns_after_rst), (3, 1));
    }

    #[test]
    fn test_reset_syn_again_after_a_syn_the_rst_did_not_answer_is_not_after_rst() {
        // mk_nmap_TCP_CONNECT_SCAN: the third SYN got no RST; the next one re-sends an
        // unanswered SYN, although the server's last packet was an RST.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1, S, RST | ACK, 0, CISN + 1, 0);
        w.send(500, C, SYN, CISN, 0, 0);
        w.send(501, S, RST | ACK, 0, CISN + 1, 0);
        w.send(1000, C, SYN, CISN, 0, 0);
        w.send(13_000, C, SYN, CISN, 0, 0);
        assert_eq!((w.conn().syn_count, w.conn().milestones.syns_after_rst), (4, 2));
    }

    // ---------------------------------------------------------------------------------------
    // What the client sent last, what the server answered last, when the client closed

    #[test]
    fn test_closing_milestones_last_new_data_each_way_and_client_close() {
        let mut w = Wire::new();
        w.handshake(CISN, SISN);
        w.request_at(3, CISN + 1, 100);
        w.send(4, S, PSH | ACK, SISN + 1, CISN + 101, 50);
        w.request_at(10, CISN + 101, 100);
        // A re-send is no new data.
        w.request_at(300, CISN + 101, 100);
        w.send(301, S, PSH | ACK, SISN + 51, CISN + 201, 50);
        w.send(400, C, FIN | ACK, CISN + 201, SISN + 101, 0);
        w.send(401, C, RST, CISN + 202, 0, 0);
        let m = &w.conn().milestones;
        assert_eq!((m.client_data_ns.get(), m.client_last_data_ns.get()), (Some(3 * MS), Some(10 * MS)));
        assert_eq!((m.server_data_ns.get(), m.server_last_data_ns.get()), (Some(4 * MS), Some(301 * MS)));
        assert_eq!(m.client_closed_ns.get(), Some(400 * MS));
    }
}
