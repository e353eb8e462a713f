//! Tests' segment builder: one client (10.0.0.1) and one server (10.0.0.2) exchanging
//! hand-made segments through a tracker, no files and no decoding.

use std::net::{IpAddr, Ipv4Addr};

use super::{Connection, Detail, Endpoint, Event, EventKind, FrameRef, PacketRole, Side, Tracker, TrackerOptions};
use crate::census::Census;
use crate::decode::{flags, Segment, TcpOptions};

pub const C: Side = Side::Client;
pub const S: Side = Side::Server;
pub const SYN: u8 = flags::SYN;
pub const ACK: u8 = flags::ACK;
pub const FIN: u8 = flags::FIN;
pub const RST: u8 = flags::RST;
pub const PSH: u8 = flags::PSH;
pub const MS: i64 = 1_000_000;
pub const WIN: u16 = 1000;

/// Linux's usual SYN options without timestamps.
pub fn plain() -> TcpOptions {
    TcpOptions { mss: Some(1460), window_scale: Some(7), sack_permitted: true, ..TcpOptions::default() }
}
/// Default ISNs: relative numbers are absolute ones minus these.
pub const CISN: u32 = 1000;
pub const SISN: u32 = 5000;

/// Feeds segments between one client and one server to a tracker, numbering frames from 1.
pub struct Wire {
    pub tracker: Tracker<Census>,
    pub client: Endpoint,
    pub server: Endpoint,
    pub frames: u64,
    /// The latest time sent, in milliseconds.
    pub last_ms: i64,
    /// VLAN IDs of the segments sent (`decode::link::vlan_ids`).
    pub vlan: u32,
    /// Each side's IPv4 ID counter: every segment gets a new ID, as Linux and Windows send them.
    pub ip_ids: [u16; 2],
    /// Send IPv4 ID 0 (as macOS and FreeBSD do with DF), the same as IPv6's none.
    pub zero_ip_id: bool,
    /// Send this IPv4 ID every time (a packet crafter's fixed ID).
    pub fixed_ip_id: Option<u16>,
    /// The TTL of the segments sent from now on.
    pub ttl: u8,
    /// Every segment sent, by frame number - 1.
    pub sent: Vec<Segment>,
}

impl Wire {
    pub fn new() -> Wire {
        Wire::between(40000, 9000)
    }

    pub fn between(client_port: u16, server_port: u16) -> Wire {
        Wire::with_options(client_port, server_port, TrackerOptions::default())
    }

    pub fn with_options(client_port: u16, server_port: u16, options: TrackerOptions) -> Wire {
        let ip = |last| IpAddr::V4(Ipv4Addr::new(10, 0, 0, last));
        Wire {
            tracker: Tracker::new(options),
            client: Endpoint { ip: ip(1), port: client_port },
            server: Endpoint { ip: ip(2), port: server_port },
            frames: 0,
            last_ms: 0,
            vlan: 0,
            ip_ids: [100, 200],
            zero_ip_id: false,
            fixed_ip_id: None,
            ttl: 64,
            sent: Vec::new(),
        }
    }

    /// One segment from `from` at `ms` milliseconds, window `WIN`; returns its frame number.
    pub fn send(&mut self, ms: i64, from: Side, flags: u8, seq: u32, ack: u32, len: u32) -> u64 {
        self.send_segment(ms, from, flags, seq, ack, len, WIN, TcpOptions::default())
    }

    #[allow(clippy::too_many_arguments)]
    pub fn send_win(&mut self, ms: i64, from: Side, flags: u8, seq: u32, ack: u32, len: u32, window: u16) -> u64 {
        self.send_segment(ms, from, flags, seq, ack, len, window, TcpOptions::default())
    }

    #[allow(clippy::too_many_arguments)]
    pub fn send_opts(&mut self, ms: i64, from: Side, flags: u8, seq: u32, ack: u32, len: u32, options: TcpOptions) -> u64 {
        self.send_segment(ms, from, flags, seq, ack, len, WIN, options)
    }

    #[allow(clippy::too_many_arguments)]
    fn send_segment(&mut self, ms: i64, from: Side, flags: u8, seq: u32, ack: u32, len: u32, window: u16, options: TcpOptions) -> u64 {
        let (src, dst) = if from == C { (self.client, self.server) } else { (self.server, self.client) };
        let seg = Segment {
            src: src.ip,
            dst: dst.ip,
            src_port: src.port,
            dst_port: dst.port,
            seq,
            ack,
            flags,
            window,
            payload_len: len,
            options,
            snaplen_cut: false,
            ip_id: match (self.zero_ip_id, self.fixed_ip_id) {
                (true, _) => 0,
                (false, Some(id)) => id,
                (false, None) => self.next_ip_id(from),
            },
            checksum: 0,
            vlan: self.vlan,
            ttl: self.ttl,
        };
        self.feed(seg, ms * MS)
    }

    fn next_ip_id(&mut self, from: Side) -> u16 {
        let id = &mut self.ip_ids[from.index()];
        *id = id.wrapping_add(1).max(1);
        *id
    }

    /// Frame `of` captured again at `ms`, byte for byte (a span port or `-i any` seeing it
    /// twice). Returns the new frame number.
    pub fn copy_at_us(&mut self, us: i64, of: u64) -> u64 {
        let seg = self.sent[of as usize - 1];
        self.feed(seg, us * 1000)
    }

    fn feed(&mut self, seg: Segment, time_ns: i64) -> u64 {
        self.sent.push(seg);
        self.frames += 1;
        self.last_ms = self.last_ms.max(time_ns / MS);
        self.tracker.on_segment(&seg, FrameRef { file: 0, frame: self.frames }, time_ns);
        self.frames
    }

    /// SYN at 0, SYN-ACK at 1 ms and the client's ACK at 2 ms, with these options.
    pub fn handshake_with(&mut self, client: TcpOptions, server: TcpOptions) {
        self.send_opts(0, C, SYN, CISN, 0, 0, client);
        self.send_opts(1, S, SYN | ACK, SISN, CISN + 1, 0, server);
        self.send(2, C, ACK, CISN + 1, SISN + 1, 0);
    }

    /// The handshake with Linux's usual options.
    pub fn handshake_plain(&mut self) {
        self.handshake_with(plain(), plain());
    }

    /// The client's 100-byte request at `ms`, sent again at each of `again`.
    pub fn request(&mut self, ms: i64, again: &[i64]) {
        for &t in std::iter::once(&ms).chain(again) {
            self.send(t, C, PSH | ACK, CISN + 1, SISN + 1, 100);
        }
    }

    /// SYN at 0 ms, SYN-ACK at 1 ms, the client's ACK at 2 ms (frames 1 to 3).
    pub fn handshake(&mut self, client_isn: u32, server_isn: u32) {
        self.send(0, C, SYN, client_isn, 0, 0);
        self.send(1, S, SYN | ACK, server_isn, client_isn.wrapping_add(1), 0);
        self.send(2, C, ACK, client_isn.wrapping_add(1), server_isn.wrapping_add(1), 0);
    }

    pub fn conns(&self) -> &[Connection] {
        self.tracker.connections()
    }

    /// The only connection.
    pub fn conn(&self) -> &Connection {
        assert_eq!(self.conns().len(), 1, "connections: {:?}", self.conns());
        &self.conns()[0]
    }
}

/// What the tracker and labeller tests read of a wire's connections.
impl Wire {
    /// Every event of every connection as (frame, kind), in frame order.
    pub fn kinds(&self) -> Vec<(u64, EventKind)> {
        let mut all: Vec<(u64, EventKind)> =
            self.conns().iter().flat_map(|c| c.events.iter().map(|e| (e.at.frame, e.kind))).collect();
        all.sort_by_key(|(frame, _)| *frame);
        all
    }

    /// Frames labelled with `kind`.
    pub fn frames_of(&self, kind: EventKind) -> Vec<u64> {
        self.kinds().into_iter().filter(|(_, k)| *k == kind).map(|(f, _)| f).collect()
    }

    /// The event of `kind` on `frame`, and its connection.
    pub fn find(&self, frame: u64, kind: EventKind) -> (&Connection, &Event) {
        self.conns()
            .iter()
            .find_map(|c| c.events.iter().find(|e| e.at.frame == frame && e.kind == kind).map(|e| (c, e)))
            .unwrap_or_else(|| panic!("no {kind:?} on frame {frame}: {:?}", self.kinds()))
    }

    pub fn event(&self, frame: u64, kind: EventKind) -> &Event {
        self.find(frame, kind).1
    }

    pub fn detail(&self, frame: u64, kind: EventKind) -> Detail {
        self.event(frame, kind).detail
    }

    /// `len` bytes of client data at `seq`, acknowledging the server's first byte.
    pub fn request_at(&mut self, ms: i64, seq: u32, len: u32) -> u64 {
        self.send(ms, C, PSH | ACK, seq, SISN + 1, len)
    }

    /// Relative (seq, ack) of an event, as the JSON shows them; ack 0 without the ACK flag.
    pub fn relative(&self, frame: u64, kind: EventKind) -> (u32, u32) {
        let (c, e) = self.find(frame, kind);
        let base = |side: Side| c.base_seq[side.index()].expect("base known");
        let ack = if e.flags & ACK != 0 { e.ack.wrapping_sub(base(e.from.other())) } else { 0 };
        (e.seq.wrapping_sub(base(e.from)), ack)
    }
}

/// Frame `n` of the first input, and the details of the events the tests expect.
pub fn frame(n: u64) -> Option<FrameRef> {
    Some(FrameRef { file: 0, frame: n })
}

pub fn attempt(attempt: u32, original: u64, since_ms: i64, after_handshake_ack: bool) -> Detail {
    Detail::Attempt { attempt, original: frame(original), since_previous_ns: Some(since_ms * MS), after_handshake_ack }
}

pub fn dup(count: u32, of: u64) -> Detail {
    Detail::DupAck { count, of: FrameRef { file: 0, frame: of } }
}

pub fn rst(answers: PacketRole, frame_n: u64, after_ms: i64) -> Detail {
    Detail::Rst { answers: Some(answers), answers_frame: frame(frame_n), after_ns: Some(after_ms * MS) }
}
