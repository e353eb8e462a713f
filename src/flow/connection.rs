//! The record of one TCP connection: who, when, what happened. This is what reports read;
//! the tracker's working state lives in `state::Flow` and is dropped when the connection ends.

use super::event::{Event, FrameRef, PacketRole, Side};
use super::icmp::{IcmpAnswer, IcmpLog, MAX_ICMP};
use super::key::Endpoint;
use super::tallied::Tallied;
use crate::decode::icmp::IcmpClass;
use crate::decode::{Segment, TcpOptions};

crate::slugs::slug_enum! {
    /// Where the handshake and teardown got to, as seen at the capture point.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum ConnState {
        /// Client SYN seen, no SYN-ACK yet (RFC 9293 §3.3.2 SYN-SENT, from the client's view).
        SynSent => "syn_sent",
        /// SYN-ACK seen, the client's ACK of it not yet (SYN-RECEIVED at the server).
        SynReceived => "syn_received",
        /// The handshake completed, or the capture started mid-connection.
        Established => "established",
        /// A FIN from one side.
        Closing => "closing",
        /// FINs from both sides.
        Closed => "closed",
        /// An RST ended it.
        Reset => "reset",
    }
}

impl ConnState {
    pub fn is_over(self) -> bool {
        matches!(self, ConnState::Closed | ConnState::Reset)
    }
}

/// A time or a duration in nanoseconds that may be unknown: an `Option<i64>` in 8 bytes, not
/// 16 (`i64::MIN`, never a capture time nor a gap between two, stands for none). A record holds
/// ten of them. Read with `get()`; serialised as the `Option<i64>` it stands for.
#[derive(Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "Option<i64>", into = "Option<i64>")]
pub struct OptNs(i64);

impl OptNs {
    pub const NONE: OptNs = OptNs(i64::MIN);

    pub fn get(self) -> Option<i64> {
        (self.0 != i64::MIN).then_some(self.0)
    }

    pub fn set(&mut self, ns: Option<i64>) {
        *self = OptNs::from(ns);
    }

    /// Sets it to `ns` unless it is known already.
    pub fn set_if_none(&mut self, ns: i64) {
        if *self == OptNs::NONE {
            self.set(Some(ns));
        }
    }
}

impl Default for OptNs {
    fn default() -> Self {
        OptNs::NONE
    }
}

impl From<Option<i64>> for OptNs {
    fn from(ns: Option<i64>) -> Self {
        debug_assert_ne!(ns, Some(i64::MIN), "i64::MIN stands for none");
        OptNs(ns.unwrap_or(i64::MIN))
    }
}

impl From<OptNs> for Option<i64> {
    fn from(ns: OptNs) -> Self {
        ns.get()
    }
}

impl std::fmt::Debug for OptNs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// Per-direction counts, indexed by `Side::index()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DirectionCounts {
    pub packets: u64,
    pub payload_bytes: u64,
    pub data_retransmits: u32,
    pub dup_acks: u32,
    pub zero_windows: u32,
    /// Segments that start beyond the highest sequence seen: the one before was not captured.
    pub unseen_before: u32,
    pub fin: bool,
    pub rst: bool,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Connection {
    /// Order of first appearance in the analysis, from 0.
    pub id: u64,
    pub client: Endpoint,
    pub server: Endpoint,
    /// The VLAN IDs the connection was captured on (`decode::link::vlan_ids`); 0 untagged.
    pub vlan: u32,
    /// The capture does not show the client's first SYN; `client` is then a guess.
    pub partial: bool,
    pub first: FrameRef,
    pub first_time_ns: i64,
    pub last_time_ns: i64,
    pub state: ConnState,
    /// Bases of the relative sequence numbers: the ISN of each side (for a side whose SYN was
    /// not seen, its first sequence number minus one, as Wireshark does).
    pub base_seq: [Option<u32>; 2],
    pub syn_count: u32,
    pub synack_count: u32,
    pub syn_time_ns: OptNs,
    pub synack_time_ns: OptNs,
    pub handshake_ack_time_ns: OptNs,
    pub counts: [DirectionCounts; 2],
    /// Options of the SYN (client) and SYN-ACK (server).
    pub options: [Option<HandshakeOptions>; 2],
    /// The connection this one replaced on the same 4-tuple (a SYN with a new ISN)...
    pub follows: Option<u64>,
    /// ...and how long after that connection's last packet this one began...
    pub follows_after_ns: OptNs,
    /// ...and whether that connection had left the server in TIME-WAIT (the server closed it
    /// first, and no RST ended it).
    #[serde(default)]
    pub follows_server_time_wait: bool,
    pub events: Vec<Event>,
    /// Events not kept because the connection reached `MAX_EVENTS`.
    pub events_dropped: u32,
    /// Segments whose payload the snaplen cut.
    pub snaplen_cut: u32,
    /// Frames that were a copy of the frame before them in the same direction (`label::is_copy`),
    /// not counted as packets and not labelled.
    pub duplicates: u32,
    /// Re-sends that repeat the frame before them with the same IP ID and no TSval: only the
    /// delay told them from a copy (`label::is_copy`).
    #[serde(default)]
    pub repeats_told_by_delay: u32,
    /// In a mergeable analysis, the first segments of a connection that may have begun in the
    /// capture before this one (see `merge`).
    pub prefix: Option<Box<Prefix>>,
    /// What the summary already counted for this connection: set on a record revived by a late
    /// packet after its first record was counted and dropped.
    pub tallied: Tallied,
    /// Moments the verdict needs (src/detect).
    pub milestones: Milestones,
    /// Every re-sent SYN, SYN-ACK and data segment with the sends before it; only for
    /// connections that re-sent something.
    pub retransmits: Option<Box<RetransmitLog>>,
    /// ICMP errors that answered its packets (src/flow/icmp.rs); only for connections that got one.
    pub icmp: Option<Box<IcmpLog>>,
    /// The first bytes that vanished before the capture point; only for connections that lost some.
    #[serde(default)]
    pub vanished: Option<Box<Vanished>>,
    /// The IP ID and TSval of the first SYN (client) and SYN-ACK (server) when they carried
    /// timestamps: the same again is that datagram copied (`label::is_handshake_copy`).
    #[serde(default)]
    pub handshake_ident: [Option<(u16, u32)>; 2],
    /// The TTL (hop limit) of the first SYN-ACK and of the server's first packet after it, at
    /// the capture point: one sender on one path keeps it; a middlebox that answers the
    /// handshake itself shows another.
    #[serde(default)]
    pub synack_ttl: Option<u8>,
    /// The TSecr of the first SYN-ACK: the TSval of the SYN it answered (RFC 7323 §3.2).
    #[serde(default)]
    pub synack_echo: Option<u32>,
    /// The TSecr of the client's handshake ACK: the TSval of the SYN-ACK it answered.
    #[serde(default)]
    pub handshake_ack_echo: Option<u32>,
    /// The capture went silent for longer than any TCP timer after this time, while the
    /// connection was live (`tracker::note_gap`): nothing of it was watched from then.
    #[serde(default)]
    pub seen_until_ns: OptNs,
    /// A record revived by late packets of a connection both sides had closed (FIN) before it
    /// was counted and dropped.
    #[serde(default)]
    pub revived_after_close: bool,
    #[serde(default)]
    pub server_ttl: Option<u8>,
}

/// Moments in a connection's life that its verdict needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Milestones {
    pub client_data_ns: OptNs,
    pub server_data_ns: OptNs,
    /// The server's first ACK of client data.
    pub client_data_acked_ns: OptNs,
    /// Read as `first_rst()`. Boxed: few connections see an RST, and its facts inline would
    /// cost every record 48 bytes more (serialised as the facts themselves).
    pub first_rst: Option<Box<RstFacts>>,
    /// The last segment that carried new client (server) data, not a re-send.
    pub client_last_data_ns: OptNs,
    pub server_last_data_ns: OptNs,
    /// The client's first FIN or RST: when it closed or gave up.
    pub client_closed_ns: OptNs,
    /// The server's first FIN, when its application closed the connection, and its frame
    /// (meaningful only with the time; an RST is `first_rst`). Read as `server_closed()`.
    pub server_closed_ns: OptNs,
    pub server_closed_at: FrameRef,
    /// Bytes of data the client's SYN carried (TCP Fast Open, RFC 7413 §3).
    pub syn_data_len: u32,
    /// Whether the SYN-ACK acknowledged that data (Fast Open accepted) or only the SYN (the
    /// server dropped it and the client sends it again, RFC 7413 §4.2); none without SYN data.
    pub syn_data_acked: Option<bool>,
    /// Client SYNs re-sent after a server RST had answered the SYN before (Windows retries a
    /// refused connect twice, about 0.5 s apart).
    pub syns_after_rst: u32,
    /// Payload bytes the client sent after the server's first FIN: a request on a connection the
    /// server had closed, or a TLS client's close_notify alert answering the server's.
    pub client_bytes_after_server_close: u32,
    /// The acknowledgement number of the client's first FIN or RST (with ACK): how much of the
    /// server's data it had received when it closed.
    #[serde(default)]
    pub client_close_ack: Option<u32>,
}

/// The server's first FIN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Close {
    pub time_ns: i64,
    pub at: FrameRef,
}

impl Milestones {
    /// `side` sent its first FIN (the client's first FIN or RST is `client_closed_ns`).
    pub fn note_fin(&mut self, side: Side, time_ns: i64, at: FrameRef) {
        match side {
            Side::Client => self.client_closed_ns.set_if_none(time_ns),
            Side::Server => {
                if self.server_closed_ns.get().is_none() {
                    self.server_closed_ns.set(Some(time_ns));
                    self.server_closed_at = at;
                }
            }
        }
    }

    pub fn server_closed(&self) -> Option<Close> {
        self.server_closed_ns.get().map(|time_ns| Close { time_ns, at: self.server_closed_at })
    }

    /// The first RST and what it answered.
    pub fn first_rst(&self) -> Option<RstFacts> {
        self.first_rst.as_deref().copied()
    }

    pub fn set_first_rst(&mut self, rst: Option<RstFacts>) {
        self.first_rst = rst.map(Box::new);
    }
}

/// The first RST and what it answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RstFacts {
    pub from: Side,
    pub time_ns: i64,
    pub at: FrameRef,
    pub answers: Option<PacketRole>,
    pub answers_frame: Option<FrameRef>,
    pub after_ns: Option<i64>,
}

/// One send of a retransmitted SYN, SYN-ACK or segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Send {
    pub at: FrameRef,
    pub time_ns: i64,
    /// Sent at once in answer to a client SYN retransmission, not by a timer.
    pub triggered: bool,
}

/// The sends of one data segment that was re-sent.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DataSeries {
    pub from: Side,
    pub seq: u32,
    pub sends: Vec<Send>,
    /// Client data re-sent before the server had acknowledged any client data.
    pub into_half_open: bool,
    /// The receiver reported the segment as arrived twice (D-SACK, RFC 2883 §4): the re-send was
    /// spurious (reordering, or a timer that fired early), nothing was lost.
    #[serde(default)]
    pub dsacked: bool,
    /// The largest and the latest re-send's payload length (a path MTU black hole re-sends
    /// full-size segments; path MTU discovery that works re-sends smaller ones).
    #[serde(default)]
    pub max_len: u32,
    #[serde(default)]
    pub last_len: u32,
    /// The peer's acknowledgement when the first re-send went out...
    #[serde(default)]
    pub peer_ack: Option<u32>,
    /// ...and whether the peer later acknowledged the whole segment.
    #[serde(default)]
    pub acked: bool,
    /// The original arrived: the peer acknowledged the segment before the re-send could have
    /// reached it and its answer come back (sooner than half the round trip, seen at the capture
    /// point, from the re-send; Linux v6.6 net/ipv4/tcp_recovery.c: tcp_rack_advance() takes
    /// an ACK sooner than the least RTT after a re-send for the original's), or had
    /// acknowledged it before the re-send was seen.
    #[serde(default)]
    pub original_arrived: bool,
}

impl DataSeries {
    /// The re-send was not needed: the receiver got the segment twice (D-SACK) or the original
    /// arrived (`original_arrived`). Reordering, or a timer that fired early; nothing lost.
    pub fn spurious(&self) -> bool {
        self.dsacked || self.original_arrived
    }
}

/// Bytes that never reached the capture point: a segment (data, FIN or RST) came whose sequence
/// number lies past bytes its sender was not seen to send.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Vanished {
    pub from: Side,
    /// The first byte missing, and the sequence number of the segment past it.
    pub start: u32,
    pub end: u32,
    /// That segment, and how long its sender had been silent before it.
    pub at: FrameRef,
    pub time_ns: i64,
    pub quiet_before_ns: i64,
    /// The largest payload of the sender's that reached the capture point.
    pub largest_through: u32,
    /// The missing bytes came later, or the receiver acknowledged them (the capture missed them).
    pub filled: bool,
}

/// Retransmission series of a connection (at most `MAX_SERIES` data series, `MAX_SENDS` sends each).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RetransmitLog {
    pub syn: Vec<Send>,
    pub synack: Vec<Send>,
    pub data: Vec<DataSeries>,
}

pub const MAX_SERIES: usize = 8;
/// A round trip shorter than this tells no early ACK from a re-send's own: below a millisecond the
/// hosts' scheduling moves an answer as much as the path does.
pub const MIN_TIMED_ROUND_TRIP_NS: i64 = 1_000_000;
pub const MAX_SENDS: usize = 16;

impl RetransmitLog {
    /// Adds a send to a handshake series, starting it with the first send if it is new.
    pub fn handshake(series: &mut Vec<Send>, first: Option<Send>, this: Send) {
        if series.is_empty() {
            series.extend(first);
        }
        if series.len() < MAX_SENDS {
            series.push(this);
        }
    }

    /// Notes the length of the latest re-send of `seq` from `from`, and the peer's ACK then.
    pub fn sized(&mut self, from: Side, seq: u32, len: u32, peer_ack: Option<u32>) {
        if let Some(series) = self.data.iter_mut().find(|d| d.from == from && d.seq == seq) {
            series.max_len = series.max_len.max(len);
            series.last_len = len;
            series.peer_ack = series.peer_ack.or(peer_ack);
        }
    }

    /// The peer of `from` acknowledged up to `ack` at `time_ns`: the series it covers got
    /// through. `round_trip_ns`: from the capture point to that peer and back (the handshake's),
    /// if known: an ACK sooner than half of it after the latest re-send answered an earlier copy
    /// (half: a handshake slower than the path's least round trip must not make a re-send's own
    /// ACK look early).
    pub fn acknowledged(&mut self, from: Side, ack: u32, time_ns: i64, round_trip_ns: Option<i64>) {
        let ack = super::seq::SeqNumber(ack);
        for series in self.data.iter_mut().filter(|d| d.from == from && !d.acked && d.last_len > 0) {
            series.acked = !ack.before(super::seq::SeqNumber(series.seq).plus(series.last_len));
            let latest = series.sends.last().map(|s| s.time_ns);
            let round_trip = round_trip_ns.filter(|&rt| rt >= MIN_TIMED_ROUND_TRIP_NS);
            if let (true, Some(latest), Some(rt)) = (series.acked, latest, round_trip) {
                series.original_arrived |= time_ns - latest < rt / 2;
            }
        }
    }

    /// The series of `from` at `seq` was re-sent after its peer had acknowledged it.
    pub fn resent_after_ack(&mut self, from: Side, seq: u32) {
        if let Some(series) = self.data.iter_mut().find(|d| d.from == from && d.seq == seq) {
            series.original_arrived = true;
        }
    }

    /// Adds a re-send of `seq` from `from`, starting its series with the original send if known.
    pub fn data(&mut self, from: Side, seq: u32, original: Option<Send>, this: Send, into_half_open: bool) {
        let index = match self.data.iter().position(|d| d.from == from && d.seq == seq) {
            Some(i) => i,
            None if self.data.len() < MAX_SERIES => {
                self.data.push(DataSeries { from, seq, sends: original.into_iter().collect(), into_half_open, dsacked: false, max_len: 0, last_len: 0, peer_ack: None, acked: false, original_arrived: false });
                self.data.len() - 1
            }
            None => return,
        };
        if let Some(series) = self.data.get_mut(index) {
            if series.sends.len() < MAX_SENDS {
                series.sends.push(this);
            }
        }
    }
}

/// The options a SYN or SYN-ACK offered (RFC 9293 §3.7.1, RFC 7323 §2.2 and §3.2, RFC 2018 §2), in 8 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HandshakeOptions {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
}

impl From<TcpOptions> for HandshakeOptions {
    fn from(o: TcpOptions) -> Self {
        HandshakeOptions { mss: o.mss, window_scale: o.window_scale, sack_permitted: o.sack_permitted, timestamps: o.timestamp.is_some() }
    }
}

/// A segment as the tracker saw it, kept so a merge can feed it again.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct SeenSegment {
    pub segment: Segment,
    pub at: FrameRef,
    pub time_ns: i64,
}

/// The first `PREFIX_LEN` segments of a connection and the record as it stood after them.
/// A merge replays the segments into the earlier capture's connection and adds what came
/// after the snapshot.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Prefix {
    pub segments: Vec<SeenSegment>,
    /// The record after the last prefix segment (without events); `None` while the whole
    /// connection fits in the prefix.
    pub snapshot: Option<Box<Connection>>,
}

/// How many segments a prefix keeps. A merge is exact when each direction's sequence state
/// is re-established within them (docs/merging.md).
pub const PREFIX_LEN: usize = 16;

/// Most events one connection keeps; a long bulk transfer can produce endless duplicate ACKs.
pub const MAX_EVENTS: usize = 4096;

impl DirectionCounts {
    /// Adds what `later` counted beyond `snapshot` (both of the same connection).
    pub fn add_since(&mut self, later: &DirectionCounts, snapshot: &DirectionCounts) {
        self.packets += later.packets - snapshot.packets;
        self.payload_bytes += later.payload_bytes - snapshot.payload_bytes;
        self.data_retransmits += later.data_retransmits - snapshot.data_retransmits;
        self.dup_acks += later.dup_acks - snapshot.dup_acks;
        self.zero_windows += later.zero_windows - snapshot.zero_windows;
        self.unseen_before += later.unseen_before - snapshot.unseen_before;
        self.fin |= later.fin;
        self.rst |= later.rst;
    }
}

impl Connection {
    pub fn new(id: u64, client: Endpoint, server: Endpoint, partial: bool, first: FrameRef, time_ns: i64) -> Connection {
        Connection {
            id,
            client,
            server,
            vlan: 0,
            partial,
            first,
            first_time_ns: time_ns,
            last_time_ns: time_ns,
            state: if partial { ConnState::Established } else { ConnState::SynSent },
            base_seq: [None, None],
            syn_count: 0,
            synack_count: 0,
            syn_time_ns: OptNs::NONE,
            synack_time_ns: OptNs::NONE,
            handshake_ack_time_ns: OptNs::NONE,
            counts: [DirectionCounts::default(); 2],
            options: [None, None],
            follows: None,
            follows_after_ns: OptNs::NONE,
            follows_server_time_wait: false,
            events: Vec::new(),
            events_dropped: 0,
            snaplen_cut: 0,
            duplicates: 0,
            repeats_told_by_delay: 0,
            prefix: None,
            tallied: Tallied::default(),
            milestones: Milestones::default(),
            retransmits: None,
            icmp: None,
            vanished: None,
            handshake_ident: [None, None],
            synack_ttl: None,
            synack_echo: None,
            handshake_ack_echo: None,
            seen_until_ns: OptNs::NONE,
            revived_after_close: false,
            server_ttl: None,
        }
    }

    /// A record for a late packet of a connection that was already counted and dropped: it
    /// carries what was counted, so counting it again adds only what the late packets show.
    pub fn revived(id: u64, client: Endpoint, server: Endpoint, state: ConnState, tallied: Tallied, at: FrameRef, time_ns: i64) -> Connection {
        let mut conn = Connection::new(id, client, server, tallied.is_partial(), at, time_ns);
        conn.set_state(state);
        conn.tallied = tallied;
        conn.revived_after_close = state == ConnState::Closed;
        conn
    }

    pub fn side_of(&self, source: Endpoint) -> Side {
        if source == self.client {
            Side::Client
        } else {
            Side::Server
        }
    }

    pub fn endpoint(&self, side: Side) -> Endpoint {
        match side {
            Side::Client => self.client,
            Side::Server => self.server,
        }
    }

    /// The retransmission log, made on first use.
    pub fn retransmits_mut(&mut self) -> &mut RetransmitLog {
        self.retransmits.get_or_insert_with(Box::default)
    }

    pub fn handshake_completed(&self) -> bool {
        self.handshake_ack_time_ns.get().is_some()
    }

    /// From the capture point to `side` and back, as its handshake showed it: the server's
    /// SYN-ACK answering the SYN, or the client's ACK answering the SYN-ACK. Only a handshake
    /// with one SYN and one SYN-ACK tells it.
    pub fn round_trip_to(&self, side: Side) -> Option<i64> {
        if self.syn_count != 1 || self.synack_count != 1 {
            return None;
        }
        let (from, to) = match side {
            Side::Server => (self.syn_time_ns.get()?, self.synack_time_ns.get()?),
            Side::Client => (self.synack_time_ns.get()?, self.handshake_ack_time_ns.get()?),
        };
        Some(to - from).filter(|&rt| rt >= 0)
    }

    pub fn push(&mut self, event: Event, keep_events: bool) {
        if !keep_events {
            return;
        }
        if self.events.len() < MAX_EVENTS {
            self.events.push(event);
        } else {
            self.events_dropped += 1;
        }
    }

    /// Changes the state; every transition goes through here.
    /// Every change of a connection's state goes through here (the tracker's state machine, a
    /// revived record, a merge). Built with the `trace-states` feature, each change is printed
    /// to standard error as `pcapq: connection 7 state=syn_sent=>syn_received` (smoltcp's
    /// `set_state` trace).
    pub fn set_state(&mut self, state: ConnState) {
        #[cfg(feature = "trace-states")]
        if state != self.state {
            eprintln!("pcapq: connection {} state={}=>{}", self.id, self.state.slug(), state.slug());
        }
        self.state = state;
    }

    /// The wait for the handshake: first SYN to the client's handshake ACK.
    pub fn handshake_duration_ns(&self) -> Option<i64> {
        Some(self.handshake_ack_time_ns.get()? - self.syn_time_ns.get()?)
    }
}

/// From the client's handshake ACK until the server's first data, its reset, the client's FIN
/// or the connection's last packet: the time a connection waits for the server to accept and
/// answer it. While the server's accept queue is full this is how long a connection sits in
/// it (Linux v6.6 net/ipv4/inet_connection_sock.c: inet_csk_accept() takes it off the queue).
pub fn waiting_span(c: &Connection) -> Option<(i64, i64)> {
    let established = c.handshake_ack_time_ns.get()?;
    let answered = c.milestones.server_data_ns.get();
    let ended = c.milestones.first_rst().map(|r| r.time_ns);
    let client_fin = c.counts[Side::Client.index()].fin.then_some(c.last_time_ns);
    let until = answered.or(ended).or(client_fin).unwrap_or(c.last_time_ns);
    Some((established, until.max(established)))
}

impl Connection {
    pub fn icmp_answers(&self) -> &[IcmpAnswer] {
        self.icmp.as_ref().map_or(&[], |log| log.answers.as_slice())
    }

    /// A re-send of `len` payload bytes by `side` that a too-big error answering `side` came
    /// before, and that fits the MTU it gave: the sender's kernel lowered its segment size and
    /// re-sent at once (Linux v6.6 net/ipv4/tcp_ipv4.c: tcp_v4_err() -> tcp_v4_mtu_reduced() ->
    /// tcp_simple_retransmit(); net/ipv6/tcp_ipv6.c: tcp_v6_mtu_reduced()), not on a timer.
    pub fn resent_smaller_after_too_big(&self, side: Side, len: u32, time_ns: i64) -> bool {
        self.icmp_answers().iter().any(|a| {
            a.answers == side && a.kind.class() == IcmpClass::TooBig && a.time_ns <= time_ns && a.mtu.is_none_or(|mtu| len < mtu)
        })
    }

    pub(crate) fn add_icmp(&mut self, answer: IcmpAnswer) {
        let log = self.icmp.get_or_insert_with(Box::default);
        if log.answers.len() < MAX_ICMP {
            log.answers.push(answer);
        } else {
            log.more += 1;
        }
    }

    /// The tally's bits for what the record itself shows (no verdict): counted, handshake,
    /// retransmissions, resets...
    pub fn record_bits(&self) -> Tallied {
        let c = self;
        let any = |f: &dyn Fn(&DirectionCounts) -> bool| c.counts.iter().any(f);
        let bits = [
            (true, Tallied::COUNTED),
            (c.handshake_completed(), Tallied::HANDSHAKE_COMPLETED),
            (c.syn_count > 1, Tallied::SYN_RETRANSMITS),
            (c.synack_count > 1, Tallied::SYNACK_RETRANSMITS),
            (any(&|d| d.data_retransmits > 0), Tallied::DATA_RETRANSMITS),
            (any(&|d| d.dup_acks > 0), Tallied::DUP_ACKS),
            (any(&|d| d.zero_windows > 0), Tallied::ZERO_WINDOW),
            (any(&|d| d.rst), Tallied::RESET),
            (c.partial, Tallied::PARTIAL),
            (c.follows.is_some(), Tallied::PORT_REUSE),
        ];
        Tallied::default().with_bits(bits.iter().filter(|(on, _)| *on).fold(0, |m, (_, bit)| m | bit))
    }
}
