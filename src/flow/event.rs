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

crate::slugs::slug_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
    pub enum EventKind {
        /// The client's first SYN.
        Syn => "syn",
        /// The SYN again with the same ISN: the client's SYN timer fired (or a SYN-ACK never arrived).
        SynRetransmit => "syn_retransmit",
        /// The server's first SYN-ACK.
        Synack => "synack",
        /// The SYN-ACK again (same ISN).
        SynackRetransmit => "synack_retransmit",
        /// The client's ACK of the SYN-ACK that completes the three-way handshake.
        HandshakeAck => "handshake_ack",
        /// The first payload byte in this direction.
        DataFirst => "data_first",
        /// Payload again whose range starts below the highest sequence number already sent.
        DataRetransmit => "data_retransmit",
        /// A FIN with no data again.
        FinRetransmit => "fin_retransmit",
        /// Same ACK number, same window, no data, as Wireshark's tcp.analysis.duplicate_ack.
        DupAck => "dup_ack",
        /// The receive window dropped to zero.
        ZeroWindow => "zero_window",
        Fin => "fin",
        Rst => "rst",
    }
}

crate::slugs::slug_enum! {
    /// What a packet was, as far as an RST that follows it is concerned.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
    pub enum PacketRole {
        Syn => "syn",
        Synack => "synack",
        HandshakeAck => "handshake_ack",
        Ack => "ack",
        Data => "data",
        Retransmit => "retransmit",
        Fin => "fin",
        Rst => "rst",
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
