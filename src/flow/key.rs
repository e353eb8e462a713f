//! Endpoints and the direction-free key of a TCP 4-tuple.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use crate::decode::Segment;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Endpoint {
    pub ip: IpAddr,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    /// "10.0.0.2:9000", and "[2001:db8::2]:9000" for IPv6, as URLs write them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip {
            IpAddr::V4(ip) => write!(f, "{ip}:{}", self.port),
            IpAddr::V6(ip) => write!(f, "[{ip}]:{}", self.port),
        }
    }
}

impl Endpoint {
    pub fn source(seg: &Segment) -> Endpoint {
        Endpoint { ip: seg.src, port: seg.src_port }
    }

    pub fn destination(seg: &Segment) -> Endpoint {
        Endpoint { ip: seg.dst, port: seg.dst_port }
    }
}

/// The 4-tuple with its endpoints in a fixed order, so both directions find the same entry,
/// and the VLAN IDs it was seen on: copies of one flow on several VLANs (a trunk or mirror
/// port) are separate connections. Addresses are packed into integers (IPv4 in the low 32
/// bits, with `v6` telling the families apart): hashing and comparing it is on the path of
/// every packet. 40 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowKey {
    low_ip: [u64; 2],
    high_ip: [u64; 2],
    low_port: u16,
    high_port: u16,
    /// `decode::link::vlan_ids` (24 bits), little-endian in three bytes to keep the key at 40.
    vlan: [u8; 3],
    v6: bool,
}

impl Hash for FlowKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.low_ip[0] ^ self.high_ip[1].rotate_left(32));
        state.write_u64(self.high_ip[0] ^ self.low_ip[1].rotate_left(32));
        let vlan = u64::from(self.vlan());
        state.write_u64(u64::from(self.low_port) | u64::from(self.high_port) << 16 | u64::from(self.v6) << 32 | vlan << 33);
    }
}

fn packed(ip: IpAddr) -> (u128, bool) {
    match ip {
        IpAddr::V4(a) => (u128::from(u32::from(a)), false),
        IpAddr::V6(a) => (u128::from(a), true),
    }
}

fn halves(ip: u128) -> [u64; 2] {
    [ip as u64, (ip >> 64) as u64]
}

impl FlowKey {
    /// The key of the 4-tuple between `a` and `b`, and whether `a` is its low endpoint.
    pub fn oriented(a: Endpoint, b: Endpoint) -> (FlowKey, bool) {
        let ((a_ip, v6), (b_ip, _)) = (packed(a.ip), packed(b.ip));
        let a_low = (a_ip, a.port) <= (b_ip, b.port);
        let ((low, low_port), (high, high_port)) =
            if a_low { ((a_ip, a.port), (b_ip, b.port)) } else { ((b_ip, b.port), (a_ip, a.port)) };
        (FlowKey { low_ip: halves(low), high_ip: halves(high), low_port, high_port, vlan: [0; 3], v6 }, a_low)
    }

    /// The same 4-tuple on the VLANs `vlan` (`decode::link::vlan_ids`).
    pub fn with_vlan(mut self, vlan: u32) -> FlowKey {
        let [a, b, c, _] = vlan.to_le_bytes();
        self.vlan = [a, b, c];
        self
    }

    pub fn vlan(&self) -> u32 {
        let [a, b, c] = self.vlan;
        u32::from_le_bytes([a, b, c, 0])
    }

    pub fn new(a: Endpoint, b: Endpoint) -> FlowKey {
        FlowKey::oriented(a, b).0
    }

    /// The two endpoints, the low one first.
    pub fn endpoints(&self) -> (Endpoint, Endpoint) {
        let ip = |halves: [u64; 2]| -> IpAddr {
            let value = u128::from(halves[0]) | u128::from(halves[1]) << 64;
            if self.v6 {
                IpAddr::from(value.to_be_bytes())
            } else {
                IpAddr::from((value as u32).to_be_bytes())
            }
        };
        (Endpoint { ip: ip(self.low_ip), port: self.low_port }, Endpoint { ip: ip(self.high_ip), port: self.high_port })
    }

    /// The segment's key, and whether its sender is the low endpoint.
    pub fn of(seg: &Segment) -> (FlowKey, bool) {
        let (key, low) = FlowKey::oriented(Endpoint::source(seg), Endpoint::destination(seg));
        (key.with_vlan(seg.vlan), low)
    }

    /// An IPv4 key in 16 bytes: the addresses, the ports, and the VLAN IDs in the low 24 bits
    /// of the last word (its top byte is 0). None for IPv6.
    pub fn packed_v4(&self) -> Option<[u32; 4]> {
        (!self.v6).then(|| {
            let ports = u32::from(self.low_port) | u32::from(self.high_port) << 16;
            [self.low_ip[0] as u32, self.high_ip[0] as u32, ports, self.vlan()]
        })
    }

    /// The key `packed_v4` packed.
    pub fn from_packed_v4(packed: [u32; 4]) -> FlowKey {
        let [low, high, ports, vlan] = packed;
        let key = FlowKey {
            low_ip: [u64::from(low), 0],
            high_ip: [u64::from(high), 0],
            low_port: ports as u16,
            high_port: (ports >> 16) as u16,
            vlan: [0; 3],
            v6: false,
        };
        key.with_vlan(vlan)
    }

    /// The key's hash, as an `FxHashMap` would take it: what the hot table is probed with.
    pub fn hash64(&self) -> u64 {
        std::hash::BuildHasher::hash_one(&rustc_hash::FxBuildHasher, self)
    }
}

/// What the tracker needs to find a segment's flow, worked out from the segment alone (on the
/// reading thread, so that the tracking thread does not): its key, the key's hash, and whether
/// the segment's sender is the key's low endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentKey {
    pub key: FlowKey,
    pub hash: u64,
    pub source_is_low: bool,
}

impl SegmentKey {
    pub fn of(seg: &Segment) -> SegmentKey {
        let (key, source_is_low) = FlowKey::of(seg);
        SegmentKey { key, hash: key.hash64(), source_is_low }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_key_is_the_same_both_ways_and_tells_families_apart() {
        let a = Endpoint { ip: "10.0.0.1".parse().unwrap(), port: 40000 };
        let b = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        assert_eq!(FlowKey::new(a, b), FlowKey::new(b, a));
        assert_ne!(FlowKey::oriented(a, b).1, FlowKey::oriented(b, a).1);
        assert_eq!(FlowKey::new(b, a).endpoints(), (a, b));
        let mapped = Endpoint { ip: "::a00:1".parse().unwrap(), port: 40000 };
        let mapped_b = Endpoint { ip: "::a00:2".parse().unwrap(), port: 9000 };
        assert_ne!(FlowKey::new(a, b), FlowKey::new(mapped, mapped_b));
        let v6a = Endpoint { ip: "2001:db8::1".parse().unwrap(), port: 1 };
        assert_eq!(FlowKey::new(v6a, mapped).endpoints(), (mapped, v6a));
    }

    #[test]
    fn test_key_vlan_tells_copies_apart_and_stays_small() {
        let a = Endpoint { ip: "10.0.0.1".parse().unwrap(), port: 40000 };
        let b = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        let untagged = FlowKey::new(a, b);
        let qinq = FlowKey::new(b, a).with_vlan(10 << 12 | 20);
        assert_ne!(untagged, FlowKey::new(a, b).with_vlan(42 << 12));
        assert_ne!(qinq, FlowKey::new(a, b).with_vlan(20 << 12 | 10));
        assert_eq!(qinq, FlowKey::new(a, b).with_vlan(10 << 12 | 20));
        assert_eq!((qinq.vlan(), untagged.vlan()), (10 << 12 | 20, 0));
        assert_eq!(std::mem::size_of::<FlowKey>(), 40);
    }

    #[test]
    fn test_packed_v4_round_trips_and_leaves_ipv6_alone() {
        let a = Endpoint { ip: "10.0.0.1".parse().unwrap(), port: 40000 };
        let b = Endpoint { ip: "192.168.255.2".parse().unwrap(), port: 9000 };
        let key = FlowKey::new(a, b).with_vlan(10 << 12 | 20);
        let packed = key.packed_v4().unwrap();
        assert_eq!(packed[3] >> 24, 0);
        assert_eq!(FlowKey::from_packed_v4(packed), key);
        let v6 = Endpoint { ip: "2001:db8::1".parse().unwrap(), port: 1 };
        assert_eq!(FlowKey::new(v6, v6).packed_v4(), None);
    }

    #[test]
    fn test_display_ipv4_and_ipv6() {
        let v4 = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        let v6 = Endpoint { ip: "2001:db8::2".parse().unwrap(), port: 443 };
        assert_eq!(v4.to_string(), "10.0.0.2:9000");
        assert_eq!(v6.to_string(), "[2001:db8::2]:443");
    }
}
