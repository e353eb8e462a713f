//! Endpoints and the direction-free key of a TCP 4-tuple.

use std::fmt;
use std::net::IpAddr;

use crate::decode::Segment;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

/// The 4-tuple with its endpoints in a fixed order, so both directions find the same entry.
/// Addresses are packed into integers (IPv4 in the low 32 bits, with `v6` telling the
/// families apart): hashing and comparing it is on the path of every packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    low: (u128, u16),
    high: (u128, u16),
    v6: bool,
}

fn packed(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

impl FlowKey {
    pub fn new(a: Endpoint, b: Endpoint) -> FlowKey {
        let v6 = a.ip.is_ipv6();
        let (a, b) = ((packed(a.ip), a.port), (packed(b.ip), b.port));
        if a <= b {
            FlowKey { low: a, high: b, v6 }
        } else {
            FlowKey { low: b, high: a, v6 }
        }
    }

    pub fn of(seg: &Segment) -> FlowKey {
        let v6 = seg.src.is_ipv6();
        let (a, b) = ((packed(seg.src), seg.src_port), (packed(seg.dst), seg.dst_port));
        if a <= b {
            FlowKey { low: a, high: b, v6 }
        } else {
            FlowKey { low: b, high: a, v6 }
        }
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
        let mapped = Endpoint { ip: "::a00:1".parse().unwrap(), port: 40000 };
        let mapped_b = Endpoint { ip: "::a00:2".parse().unwrap(), port: 9000 };
        assert_ne!(FlowKey::new(a, b), FlowKey::new(mapped, mapped_b));
    }

    #[test]
    fn test_display_ipv4_and_ipv6() {
        let v4 = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        let v6 = Endpoint { ip: "2001:db8::2".parse().unwrap(), port: 443 };
        assert_eq!(v4.to_string(), "10.0.0.2:9000");
        assert_eq!(v6.to_string(), "[2001:db8::2]:443");
    }
}
