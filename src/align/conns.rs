//! The connections of one capture point, as far as alignment needs them: which side is the
//! client, the bases of the relative sequence numbers, where each connection begins. A light
//! copy of the tracker's rules (src/flow/track/tracker.rs): a connection is the 4-tuple and VLAN IDs
//! plus the client's ISN; a SYN with a new ISN, or a packet after `LINGER_NS` of silence,
//! begins another on the same 4-tuple.

use rustc_hash::FxHashMap;

use super::sighting::Sighting;
use crate::decode::flags;
use crate::flow::{Endpoint, FrameRef};

/// Longer than any TCP timer: the tracker forgets an idle connection after as long
/// (src/flow/store/table.rs LINGER_NS).
pub const LINGER_NS: i64 = 120_000_000_000;

/// Which way a packet went in its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    ClientToServer = 0,
    ServerToClient = 1,
}

impl Dir {
    pub fn slug(self) -> &'static str {
        match self {
            Dir::ClientToServer => "client_to_server",
            Dir::ServerToClient => "server_to_client",
        }
    }
}

/// One connection at one point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conn {
    pub client: Endpoint,
    pub server: Endpoint,
    pub vlan: u32,
    pub first: FrameRef,
    pub first_ns: i64,
    pub last_ns: i64,
    /// ISN of each direction (client, server); for a direction whose SYN was not seen, its
    /// first sequence number minus one, as Wireshark counts.
    pub base: [Option<u32>; 2],
    /// The client's SYN was seen (its ISN is `base[0]`).
    pub syn_seen: bool,
}

impl Conn {
    pub fn relative(&self, dir: Dir, seq: u32) -> u32 {
        seq.wrapping_sub(self.base[dir as usize].unwrap_or(seq))
    }
}

type TupleKey = (Endpoint, Endpoint, u32);

/// The connections of one point, in order of their first packet.
#[derive(Default)]
pub struct Conns {
    pub list: Vec<Conn>,
    live: FxHashMap<TupleKey, u32>,
}

/// Whether the source of a packet seen without the handshake is the client: the side on an
/// ephemeral port (>= 32768), else the higher port (docs/json.md, `partial`).
fn source_is_client(s: &Sighting) -> bool {
    match (s.src.port >= 32768, s.dst.port >= 32768) {
        (true, false) => true,
        (false, true) => false,
        _ => s.src.port > s.dst.port,
    }
}

impl Conns {
    /// The connection `s` belongs to and which way it went.
    pub fn observe(&mut self, s: &Sighting) -> (u32, Dir) {
        let key = if s.src <= s.dst { (s.src, s.dst, s.vlan) } else { (s.dst, s.src, s.vlan) };
        let syn = s.key.flags & (flags::SYN | flags::ACK) == flags::SYN;
        let synack = s.key.flags & (flags::SYN | flags::ACK) == flags::SYN | flags::ACK;
        let existing = self.live.get(&key).copied().filter(|&i| {
            let c = &self.list[i as usize];
            let stale = s.time_ns - c.last_ns > LINGER_NS;
            let new_isn = syn && c.syn_seen && c.base[0] != Some(s.key.seq) && c.client == s.src;
            let new_client = syn && c.server == s.src && c.server != c.client;
            !(stale || new_isn || new_client)
        });
        let index = match existing {
            Some(i) => i,
            None => {
                let client_is_src = if syn { true } else if synack { false } else { source_is_client(s) };
                let (client, server) = if client_is_src { (s.src, s.dst) } else { (s.dst, s.src) };
                let i = self.list.len() as u32;
                self.list.push(Conn { client, server, vlan: s.vlan, first: s.at, first_ns: s.time_ns, last_ns: s.time_ns, base: [None; 2], syn_seen: false });
                self.live.insert(key, i);
                i
            }
        };
        let c = &mut self.list[index as usize];
        let dir = if s.src == c.client && s.dst == c.server { Dir::ClientToServer } else { Dir::ServerToClient };
        c.last_ns = c.last_ns.max(s.time_ns);
        if (syn && dir == Dir::ClientToServer) || (synack && dir == Dir::ServerToClient) {
            if dir == Dir::ClientToServer {
                c.syn_seen = true;
            }
            c.base[dir as usize].get_or_insert(s.key.seq);
        } else {
            c.base[dir as usize].get_or_insert(s.key.seq.wrapping_sub(1));
        }
        (index, dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::align::sighting::MatchKey;
    use std::net::{IpAddr, Ipv4Addr};

    fn seen(src: u16, dst: u16, flags: u8, seq: u32, t: i64) -> Sighting {
        let ip = |n| IpAddr::V4(Ipv4Addr::new(10, 0, 0, n));
        Sighting {
            time_ns: t,
            at: FrameRef { file: 0, frame: t as u64 },
            src: Endpoint { ip: ip(1), port: src },
            dst: Endpoint { ip: ip(2), port: dst },
            vlan: 0,
            key: MatchKey { seq, ack: 0, len: 0, ip_id: 0, flags },
            digest: 1,
        }
    }

    #[test]
    fn test_conns_new_isn_begins_another_connection() {
        let mut conns = Conns::default();
        assert_eq!(conns.observe(&seen(40000, 80, flags::SYN, 100, 1)), (0, Dir::ClientToServer));
        assert_eq!(conns.observe(&seen(40000, 80, flags::SYN, 100, 2)), (0, Dir::ClientToServer));
        assert_eq!(conns.observe(&seen(40000, 80, flags::SYN, 900, 3)), (1, Dir::ClientToServer));
        assert_eq!(conns.list[1].relative(Dir::ClientToServer, 901), 1);
    }

    #[test]
    fn test_conns_synack_first_makes_its_receiver_the_client() {
        let mut conns = Conns::default();
        let (i, dir) = conns.observe(&seen(80, 40000, flags::SYN | flags::ACK, 5, 1));
        assert_eq!(dir, Dir::ServerToClient);
        assert_eq!(conns.list[i as usize].client.port, 40000);
    }
}
