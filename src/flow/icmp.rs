//! What a connection keeps of the ICMP errors tied to it (`IcmpLog`), and the counts of ICMP
//! errors over a capture. The tracker ties them (`track::icmp`).

use std::net::IpAddr;

use super::event::{FrameRef, PacketRole, Side};
use crate::decode::icmp::IcmpKind;

/// ICMP answers kept per connection; more are counted in `IcmpLog::more`.
pub const MAX_ICMP: usize = 16;

/// One ICMP error tied to a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IcmpAnswer {
    pub at: FrameRef,
    pub time_ns: i64,
    /// Who sent the error: the peer's host, or a router or firewall on the way.
    pub sender: IpAddr,
    pub kind: IcmpKind,
    /// The next hop's MTU, for fragmentation needed and packet too big.
    pub mtu: Option<u32>,
    /// Whose packet it answers.
    pub answers: Side,
    /// That packet's sequence number (absolute) and IP length, as quoted.
    pub seq: u32,
    pub quoted_len: u32,
    pub dont_fragment: bool,
    /// The last packet that side sent before the error, and what it was.
    pub answers_role: Option<PacketRole>,
    pub answers_frame: Option<FrameRef>,
}

/// A connection's ICMP answers, in capture order.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IcmpLog {
    pub answers: Vec<IcmpAnswer>,
    /// Answers past `MAX_ICMP`, counted only.
    pub more: u32,
}

/// What became of one ICMP error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpMatch {
    Tied(Side),
    /// The quote names a TCP 4-tuple with no live connection (before the capture, or long over).
    NoConnection,
    /// A connection of that 4-tuple, but the quoted sequence number is outside its window.
    OutOfWindow,
    /// Fewer than 8 bytes of TCP quoted: Linux reads no such error.
    Truncated,
    /// The quote is UDP or another protocol, or unreadable.
    NotTcp,
}

/// Counts of ICMP errors over a capture, for the summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IcmpSummary {
    pub by_kind: Vec<(IcmpKind, u64)>,
    pub tied: u64,
    pub no_connection: u64,
    pub out_of_window: u64,
    pub truncated: u64,
    pub not_tcp: u64,
}

impl IcmpSummary {
    pub fn count(&mut self, kind: IcmpKind, result: IcmpMatch) {
        match self.by_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => self.by_kind.push((kind, 1)),
        }
        match result {
            IcmpMatch::Tied(_) => self.tied += 1,
            IcmpMatch::NoConnection => self.no_connection += 1,
            IcmpMatch::OutOfWindow => self.out_of_window += 1,
            IcmpMatch::Truncated => self.truncated += 1,
            IcmpMatch::NotTcp => self.not_tcp += 1,
        }
    }

    pub fn total(&self) -> u64 {
        self.by_kind.iter().map(|(_, n)| n).sum()
    }

    /// Counts by kind slug, sorted by slug.
    pub fn by_slug(&self) -> Vec<(&'static str, u64)> {
        let mut out: Vec<_> = self.by_kind.iter().map(|(k, n)| (k.slug(), *n)).collect();
        out.sort();
        out
    }

    pub fn merge(&mut self, other: &IcmpSummary) {
        for (kind, n) in &other.by_kind {
            match self.by_kind.iter_mut().find(|(k, _)| k == kind) {
                Some((_, count)) => *count += n,
                None => self.by_kind.push((*kind, *n)),
            }
        }
        self.tied += other.tied;
        self.no_connection += other.no_connection;
        self.out_of_window += other.out_of_window;
        self.truncated += other.truncated;
        self.not_tcp += other.not_tcp;
    }
}
