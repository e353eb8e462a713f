//! Packet-level events of a connection, with stable snake_case names shared by the JSON schema
//! (docs/json.md) and the docs.

/// Which end of the connection sent a packet. The client is the side that sent the SYN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Side {
    Client = 0,
    Server = 1,
}

impl Side {
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum EventKind {
    /// The client's first SYN.
    Syn,
    /// The SYN again with the same ISN: the client's SYN timer fired (or a SYN-ACK never arrived).
    SynRetransmit,
    /// The server's first SYN-ACK.
    Synack,
    /// The SYN-ACK again (same ISN).
    SynackRetransmit,
    /// The client's ACK of the SYN-ACK that completes the three-way handshake.
    HandshakeAck,
    /// The first payload byte in this direction.
    DataFirst,
    /// Payload again whose range starts below the highest sequence number already sent.
    DataRetransmit,
    /// A FIN with no data again.
    FinRetransmit,
    /// Same ACK number, same window, no data, as Wireshark's tcp.analysis.duplicate_ack.
    DupAck,
    /// The receive window dropped to zero.
    ZeroWindow,
    Fin,
    Rst,
}

impl EventKind {
    pub fn slug(self) -> &'static str {
        match self {
            EventKind::Syn => "syn",
            EventKind::SynRetransmit => "syn_retransmit",
            EventKind::Synack => "synack",
            EventKind::SynackRetransmit => "synack_retransmit",
            EventKind::HandshakeAck => "handshake_ack",
            EventKind::DataFirst => "data_first",
            EventKind::DataRetransmit => "data_retransmit",
            EventKind::FinRetransmit => "fin_retransmit",
            EventKind::DupAck => "dup_ack",
            EventKind::ZeroWindow => "zero_window",
            EventKind::Fin => "fin",
            EventKind::Rst => "rst",
        }
    }

    pub const ALL: [EventKind; 12] = [
        EventKind::Syn,
        EventKind::SynRetransmit,
        EventKind::Synack,
        EventKind::SynackRetransmit,
        EventKind::HandshakeAck,
        EventKind::DataFirst,
        EventKind::DataRetransmit,
        EventKind::FinRetransmit,
        EventKind::DupAck,
        EventKind::ZeroWindow,
        EventKind::Fin,
        EventKind::Rst,
    ];
}

/// What a packet was, as far as an RST that follows it is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum PacketRole {
    Syn,
    Synack,
    HandshakeAck,
    Ack,
    Data,
    Retransmit,
    Fin,
    Rst,
}

impl PacketRole {
    pub const ALL: [PacketRole; 8] = [
        PacketRole::Syn,
        PacketRole::Synack,
        PacketRole::HandshakeAck,
        PacketRole::Ack,
        PacketRole::Data,
        PacketRole::Retransmit,
        PacketRole::Fin,
        PacketRole::Rst,
    ];

    pub fn slug(self) -> &'static str {
        match self {
            PacketRole::Syn => "syn",
            PacketRole::Synack => "synack",
            PacketRole::HandshakeAck => "handshake_ack",
            PacketRole::Ack => "ack",
            PacketRole::Data => "data",
            PacketRole::Retransmit => "retransmit",
            PacketRole::Fin => "fin",
            PacketRole::Rst => "rst",
        }
    }
}

/// Where a packet is: which input file (0-based, in the order given) and its frame number there.
/// Packed to 12 bytes: events, flows and segments in flight each hold several.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[repr(C, packed(4))]
pub struct FrameRef {
    pub file: u32,
    pub frame: u64,
}

/// Extra facts some events carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Detail {
    None,
    /// A retransmission: which send this is (2 = first retransmission), where the original
    /// went out, and the wait since the previous send of the same sequence number.
    Attempt { attempt: u32, original: Option<FrameRef>, since_previous_ns: Option<i64>, after_handshake_ack: bool },
    /// Wireshark's duplicate_ack_num and duplicate_ack_frame.
    DupAck { count: u32, of: FrameRef },
    /// What the RST answered: the other side's last packet, and how long after it.
    Rst { answers: Option<PacketRole>, answers_frame: Option<FrameRef>, after_ns: Option<i64> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    pub at: FrameRef,
    pub time_ns: i64,
    pub kind: EventKind,
    pub from: Side,
    pub flags: u8,
    /// Absolute sequence and acknowledgement numbers; output makes them relative.
    pub seq: u32,
    pub ack: u32,
    pub len: u32,
    pub window: u16,
    pub detail: Detail,
}
