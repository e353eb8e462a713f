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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub low: Endpoint,
    pub high: Endpoint,
}

impl FlowKey {
    pub fn of(seg: &Segment) -> FlowKey {
        let (a, b) = (Endpoint::source(seg), Endpoint::destination(seg));
        if a <= b {
            FlowKey { low: a, high: b }
        } else {
            FlowKey { low: b, high: a }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_display_ipv4_and_ipv6() {
        let v4 = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        let v6 = Endpoint { ip: "2001:db8::2".parse().unwrap(), port: 443 };
        assert_eq!(v4.to_string(), "10.0.0.2:9000");
        assert_eq!(v6.to_string(), "[2001:db8::2]:443");
    }
}
