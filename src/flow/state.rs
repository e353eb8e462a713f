//! The tracker's working state for a live flow: per direction, the sequence space seen, the
//! last ACK and window, and the segments in flight. The hot table (`table.rs`) keeps it; the
//! state machine (`label.rs`) changes it.

use super::connection::ConnState;
use super::event::{FrameRef, PacketRole};
use super::seq::SeqNumber;
use crate::decode::Segment;

/// Segments remembered per direction to number retransmission attempts.
pub(crate) const MAX_IN_FLIGHT: usize = 4;

/// The last frame sent one way that was no copy: what it was (`role`, what an RST from the
/// other side answers), where and when, and what tells a copy of it from a re-send of its
/// segment: every header field a re-send could change, and the TCP checksum, which covers
/// the options (a re-send carries a new timestamp) and the payload. 40 bytes, and as many
/// in an `Option` (the role's spare values mark `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Sent {
    pub(crate) seq: u32,
    pub(crate) ack: u32,
    pub(crate) payload_len: u32,
    pub(crate) window: u16,
    pub(crate) checksum: u16,
    pub(crate) ip_id: u16,
    pub(crate) flags: u8,
    /// Its TSval, when it carries the timestamp option: every re-send has a new one (RFC 7323
    /// §3.2; Linux's clock ticks each millisecond). The checksum says nothing of it when the
    /// capture is taken on the sender, before the NIC fills it in (checksum offload).
    pub(crate) tsval: Option<u32>,
    /// Set once the state machine has labelled the frame (`DirectionState::labelled`).
    pub(crate) role: PacketRole,
    pub(crate) at: FrameRef,
    pub(crate) time_ns: i64,
}

impl Sent {
    /// The frame of `seg`, its role not known yet.
    pub(crate) fn of(seg: &Segment, at: FrameRef, time_ns: i64) -> Sent {
        let (seq, ack, payload_len, window, checksum, ip_id, flags) =
            (seg.seq, seg.ack, seg.payload_len, seg.window, seg.checksum, seg.ip_id, seg.flags);
        let tsval = seg.options.timestamp.map(|(tsval, _)| tsval);
        Sent { seq, ack, payload_len, window, checksum, ip_id, flags, tsval, role: PacketRole::Ack, at, time_ns }
    }

    /// The IP ID, TCP header fields and checksum (which covers the options and payload) in one
    /// number, never 0; 0 for a frame without an IP ID, which tells no datagram from another.
    pub(crate) fn fingerprint(&self) -> u32 {
        // The fields packed in three words, each mixed by a multiplication (FxHash's constant):
        // computed for every frame, so kept to a few instructions.
        const MIX: u64 = 0x517c_c1b7_2722_0a95;
        if self.ip_id == 0 {
            return 0;
        }
        let numbers = ((u64::from(self.seq) << 32) | u64::from(self.ack)).wrapping_mul(MIX);
        let sizes = ((u64::from(self.payload_len) << 32) | (u64::from(self.window) << 16) | u64::from(self.checksum)).wrapping_mul(MIX);
        let tsval = self.tsval.map_or(1 << 32, u64::from);
        let ids = (u64::from(self.ip_id) << 48) ^ (u64::from(self.flags) << 40) ^ tsval;
        let h = (numbers ^ sizes.rotate_left(23) ^ ids).wrapping_mul(MIX);
        ((h >> 32) as u32 ^ h as u32) | 1
    }

    pub(crate) fn same_segment(&self, other: &Sent) -> bool {
        (self.seq, self.ack, self.payload_len, self.window, self.checksum, self.ip_id, self.flags)
            == (other.seq, other.ack, other.payload_len, other.window, other.checksum, other.ip_id, other.flags)
    }
}


/// One segment sent and not yet acknowledged, remembered to number its retransmissions.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct SentSegment {
    pub(crate) seq: SeqNumber,
    pub(crate) end: SeqNumber,
    pub(crate) first: FrameRef,
    pub(crate) first_send_ns: i64,
    pub(crate) last_send_ns: i64,
    pub(crate) sends: u32,
}

/// What the tracker knows about one direction of a live connection.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
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
    /// First SYN (client) or SYN-ACK (server), and the latest one.
    pub(crate) first_handshake: Option<FrameRef>,
    pub(crate) last_handshake_ns: i64,
    /// The last `MAX_IN_FLIGHT` segments sent and not yet acknowledged, oldest first, kept
    /// inline (no allocation per connection): the first `in_flight_len` are in use. The count
    /// is a field here, beside the flags, not in a struct of its own with the segments, where
    /// it would cost 7 bytes of padding.
    pub(crate) in_flight: [SentSegment; MAX_IN_FLIGHT],
    pub(crate) in_flight_len: u8,
    /// The last frame sent this way that was no copy, and what it was.
    pub(crate) last_sent: Option<Sent>,
    /// Fingerprints (`Sent::fingerprint`) of the last `RECENT_SENT` frames sent this way with
    /// a non-zero IP ID that were no copy, oldest overwritten first: a copy that comes after
    /// other frames (a router captured with `-i any` shows each datagram on both interfaces)
    /// repeats one of them.
    pub(crate) recent: [u32; RECENT_SENT],
    pub(crate) recent_next: u8,
    /// This side sent two different segments with one IP ID: its ID tells no datagram from
    /// another (a packet crafter's fixed ID; RFC 6864 §4.1 lets an atomic datagram carry any).
    pub(crate) constant_id: bool,
    /// The largest payload sent this way.
    pub(crate) max_payload: u32,
}

/// Frames per direction whose copies are recognised after other frames came between.
pub const RECENT_SENT: usize = 6;

impl DirectionState {
    /// The segments in flight, oldest first.
    pub(crate) fn in_flight(&mut self) -> &mut [SentSegment] {
        let len = usize::from(self.in_flight_len).min(MAX_IN_FLIGHT);
        &mut self.in_flight[..len]
    }

    pub(crate) fn find_in_flight(&mut self, seq: SeqNumber) -> Option<&mut SentSegment> {
        self.in_flight().iter_mut().find(|s| s.seq == seq)
    }

    /// Adds a segment in flight. When all places are taken the newest is replaced: a
    /// retransmission timeout re-sends the oldest unacknowledged segment (RFC 6298 §5.4), so
    /// those stay.
    pub(crate) fn push_in_flight(&mut self, segment: SentSegment) {
        if usize::from(self.in_flight_len) == MAX_IN_FLIGHT {
            self.in_flight_len -= 1;
        }
        let at = usize::from(self.in_flight_len);
        if let Some(slot) = self.in_flight.get_mut(at) {
            *slot = segment;
            self.in_flight_len += 1;
        }
    }

    /// Forgets the segments in flight that `ack` covers entirely.
    pub(crate) fn acknowledge_in_flight(&mut self, ack: SeqNumber) {
        let covered = self.in_flight().iter().take_while(|s| !ack.before(s.end)).count();
        if covered > 0 {
            // The rest move to the front, in order (a loop of at most three copies: this runs
            // for most ACKs, and `rotate_left` calls memmove three times).
            let len = usize::from(self.in_flight_len).min(MAX_IN_FLIGHT);
            for from in covered..len {
                self.in_flight[from - covered] = self.in_flight[from];
            }
            self.in_flight_len -= covered as u8;
        }
    }

    /// Did this direction send a frame with `fingerprint` among its last `RECENT_SENT`?
    pub(crate) fn sent_recently(&self, fingerprint: u32) -> bool {
        fingerprint != 0 && self.recent.contains(&fingerprint)
    }

    pub(crate) fn remember(&mut self, fingerprint: u32) {
        if fingerprint != 0 {
            let at = usize::from(self.recent_next);
            if let Some(slot) = self.recent.get_mut(at) {
                *slot = fingerprint;
            }
            self.recent_next = if at + 1 >= RECENT_SENT { 0 } else { (at + 1) as u8 };
        }
    }

    /// The last packet sent this way, what it was and when: what an RST from the other side
    /// answers.
    pub(crate) fn last_packet(&self) -> Option<(PacketRole, FrameRef, i64)> {
        self.last_sent.map(|s| (s.role, s.at, s.time_ns))
    }

    /// The state machine labelled the last frame sent this way `role`.
    pub(crate) fn labelled(&mut self, role: PacketRole) {
        if let Some(sent) = self.last_sent.as_mut() {
            sent.role = role;
        }
    }

    /// Moves every frame reference `offset` files on (a merge puts a later capture's files
    /// after the earlier one's).
    pub(crate) fn shift_files(&mut self, offset: u32) {
        let shift = |f: &mut FrameRef| f.file += offset;
        shift(&mut self.last_ack_at);
        if let Some(f) = self.first_handshake.as_mut() {
            shift(f);
        }
        if let Some(sent) = self.last_sent.as_mut() {
            shift(&mut sent.at);
        }
        for sent in self.in_flight() {
            shift(&mut sent.first);
        }
    }
}

/// The tracker's working state for a connection that may still see packets.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Flow {
    /// Index of the connection's record in `Tracker::connections`, as `slot()`. A `u32`, as
    /// `Retired` keeps it (8 bytes of the flow's header less): slots stay far below 2^32, a
    /// record being hundreds of bytes.
    pub conn: u32,
    /// The client is the low endpoint of the flow's key: a segment's side follows from the
    /// key's orientation, without comparing addresses.
    pub client_is_low: bool,
    /// The record's state, copied after every segment so the table can sweep without
    /// reading the records.
    pub state: ConnState,
    /// The server's FIN came before any FIN of the client: the server closed first, so after
    /// the close the server, not the client, holds the 4-tuple in TIME-WAIT (RFC 9293 §3.6).
    #[serde(default)]
    pub server_closed_first: bool,
    pub direction: [DirectionState; 2],
    pub last_time_ns: i64,
}

impl Flow {
    /// The slot of the connection's record in the store.
    pub fn slot(&self) -> usize {
        self.conn as usize
    }

    pub fn set_slot(&mut self, slot: usize) {
        self.conn = slot as u32;
    }
}
