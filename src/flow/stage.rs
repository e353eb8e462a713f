//! How far a connection has got, compared before and after each segment while a capture is
//! watched live (`pcapq watch`): a segment that moves a connection on is a `Change`, and what
//! changed tells the watch what the segment was (a SYN re-sent, a first answer, a reset).

use super::connection::Connection;
use super::event::{PacketRole, Side};
use super::key::Endpoint;

/// The counts and milestones of a connection that live signs are read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stage {
    pub syn_count: u32,
    pub synack_count: u32,
    /// The last SYN-ACK was sent at once on a re-sent SYN (Linux v6.6 net/ipv4/tcp_minisocks.c:
    /// tcp_check_req()), not by the SYN-ACK timer.
    pub synack_triggered: bool,
    pub handshake_acked: bool,
    pub data_retransmits: [u32; 2],
    /// The client sent data (its request).
    pub requested: bool,
    /// The server acknowledged client data.
    pub request_acked: bool,
    /// The server sent data.
    pub answered: bool,
    /// The client sent a FIN.
    pub client_fin: bool,
    /// The server sent a FIN.
    pub server_fin: bool,
    /// The first RST: who sent it and what it answered.
    pub rst: Option<(Side, Option<PacketRole>)>,
}

impl Stage {
    pub fn of(c: &Connection) -> Stage {
        let synack_triggered = c.retransmits.as_ref().and_then(|log| log.synack.last()).is_some_and(|s| s.triggered);
        Stage {
            syn_count: c.syn_count,
            synack_count: c.synack_count,
            synack_triggered,
            handshake_acked: c.handshake_completed(),
            data_retransmits: [c.counts[0].data_retransmits, c.counts[1].data_retransmits],
            requested: c.milestones.client_data_ns.get().is_some(),
            request_acked: c.milestones.client_data_acked_ns.get().is_some(),
            answered: c.milestones.server_data_ns.get().is_some(),
            client_fin: c.counts[Side::Client.index()].fin,
            server_fin: c.counts[Side::Server.index()].fin,
            rst: c.milestones.first_rst().map(|r| (r.from, r.answers)),
        }
    }
}

/// One segment that moved a connection on.
#[derive(Clone, Copy, Debug)]
pub struct Change {
    pub id: u64,
    pub server: Endpoint,
    pub time_ns: i64,
    /// The segment opened the connection's record (`before` is then all zero).
    pub opened: bool,
    /// The capture does not show the connection's first SYN.
    pub partial: bool,
    pub before: Stage,
    pub after: Stage,
}
