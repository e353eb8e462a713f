//! ICMP and ICMPv6 error messages (RFC 792, RFC 4443 §3): what kind of error, who sent it, and
//! the packet it answers, read from the quote every error carries.
//!
//! An ICMP error quotes the IP header of the packet that caused it and at least its first 8
//! bytes (RFC 792, "Destination Unreachable Message"); routers quote more (RFC 1812 §4.3.2.3),
//! ICMPv6 as much as fits in 1280 bytes (RFC 4443 §2.4). For TCP those 8 bytes are the ports and
//! the sequence number: enough to tie the error to one connection and one packet. Linux reads no
//! shorter quote (Linux v6.6 net/ipv4/icmp.c: icmp_unreach(): pskb_may_pull(ihl * 4 + 8)), so a
//! shorter one is reported as truncated and tied to nothing.
//!
//! Only IP protocols 1 and 58 come here: the TCP path never pays for this module.

use std::net::IpAddr;

use super::bytes::{be16, be32, u8_at};
use super::{ip, link, Skip};

pub const PROTO_ICMP: u8 = 1;
pub const PROTO_ICMPV6: u8 = 58;

/// RFC 792: Destination Unreachable and Time Exceeded.
const ICMP_DEST_UNREACH: u8 = 3;
const ICMP_TIME_EXCEEDED: u8 = 11;
/// RFC 4443 §3.1–§3.3.
const ICMPV6_DEST_UNREACH: u8 = 1;
const ICMPV6_PACKET_TOO_BIG: u8 = 2;
const ICMPV6_TIME_EXCEEDED: u8 = 3;
/// Both carry 4 bytes after type, code and checksum, then the quote.
const ICMP_HEADER_LEN: usize = 8;
/// RFC 792: the quote holds "the first 64 bits of the original data datagram".
pub const MIN_QUOTED_TCP: usize = 8;

crate::slugs::slug_enum! {
    /// What an ICMP error says, one variant per type and code (IPv4 type 3 codes from RFC 792 and
    /// RFC 1812 §5.2.7.1; ICMPv6 type 1 codes from RFC 4443 §3.1 and RFC 6550 §20.18). Both
    /// families share a variant where the meaning is the same.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
    pub enum IcmpKind {
        NetUnreachable => "net_unreachable",
        HostUnreachable => "host_unreachable",
        ProtocolUnreachable => "protocol_unreachable",
        PortUnreachable => "port_unreachable",
        /// IPv4 code 4: fragmentation needed and DF set (RFC 1191 §4: with the next-hop MTU).
        FragNeeded => "frag_needed",
        SourceRouteFailed => "source_route_failed",
        NetUnknown => "net_unknown",
        HostUnknown => "host_unknown",
        HostIsolated => "host_isolated",
        /// IPv4 code 9: communication with the network administratively prohibited.
        NetProhibited => "net_prohibited",
        /// IPv4 code 10: communication with the host administratively prohibited.
        HostProhibited => "host_prohibited",
        NetUnreachableForTos => "net_unreachable_for_tos",
        HostUnreachableForTos => "host_unreachable_for_tos",
        /// IPv4 code 13 (RFC 1812 §5.2.7.1), ICMPv6 code 1: communication administratively prohibited.
        AdminProhibited => "admin_prohibited",
        PrecedenceViolation => "precedence_violation",
        PrecedenceCutoff => "precedence_cutoff",
        /// IPv4 type 3 with a code above 15: Linux ignores it (Linux v6.6 net/ipv4/tcp_ipv4.c:
        /// tcp_v4_err(): code > NR_ICMP_UNREACH).
        UnreachableOther => "unreachable_other",
        /// ICMPv6 type 1 code 0: no route to destination.
        NoRoute => "no_route",
        /// ICMPv6 type 1 code 2: beyond scope of source address.
        BeyondScope => "beyond_scope",
        /// ICMPv6 type 1 code 3: address unreachable (neighbour discovery failed).
        AddressUnreachable => "address_unreachable",
        /// ICMPv6 type 1 code 5: source address failed ingress/egress policy.
        SourcePolicyFailed => "source_policy_failed",
        /// ICMPv6 type 1 code 6: reject route to destination.
        RejectRoute => "reject_route",
        /// ICMPv6 type 1 code 7 and above: error in source routing header (RFC 6550), or unassigned.
        Ipv6UnreachableOther => "ipv6_unreachable_other",
        /// ICMPv6 type 2 (with the MTU of the next hop).
        PacketTooBig => "packet_too_big",
        /// IPv4 type 11 code 0, ICMPv6 type 3 code 0: TTL or hop limit exceeded in transit.
        TtlExceeded => "ttl_exceeded",
        /// Type 11 code 1 / ICMPv6 type 3 code 1: fragment reassembly time exceeded.
        ReassemblyTimeExceeded => "reassembly_time_exceeded",
    }
}

/// What a kind means for the diagnosis: which cause it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IcmpClass {
    /// A filter said no: administratively prohibited, policy, reject route.
    Prohibited,
    /// No route to the net or host, or the host did not answer neighbour discovery.
    NoRoute,
    /// The host answered: nothing listens there (port or protocol unreachable).
    PortUnreachable,
    /// The packet looped or the path is longer than its TTL.
    TtlExceeded,
    /// The packet was too big for the next hop: path MTU discovery.
    TooBig,
}

impl IcmpKind {
    pub fn class(self) -> IcmpClass {
        use IcmpKind::*;
        match self {
            NetProhibited | HostProhibited | AdminProhibited | PrecedenceViolation | PrecedenceCutoff | SourcePolicyFailed | RejectRoute => {
                IcmpClass::Prohibited
            }
            ProtocolUnreachable | PortUnreachable => IcmpClass::PortUnreachable,
            FragNeeded | PacketTooBig => IcmpClass::TooBig,
            TtlExceeded | ReassemblyTimeExceeded => IcmpClass::TtlExceeded,
            NetUnreachable | HostUnreachable | SourceRouteFailed | NetUnknown | HostUnknown | HostIsolated | NetUnreachableForTos
            | HostUnreachableForTos | UnreachableOther | NoRoute | BeyondScope | AddressUnreachable | Ipv6UnreachableOther => {
                IcmpClass::NoRoute
            }
        }
    }

    /// The errno a Linux client's connect() fails with when this error answers its SYN, or
    /// `None` when the kernel does not end the attempt. We model Linux here: in SYN-SENT every
    /// destination-unreachable (but fragmentation-needed) and time-exceeded error ends the
    /// connect at once (Linux v6.6 net/ipv4/tcp_ipv4.c: tcp_v4_err(), errno from
    /// net/ipv4/icmp.c: icmp_err_convert[]; net/ipv6/tcp_ipv6.c: tcp_v6_err(), errno from
    /// net/ipv6/icmp.c: icmpv6_err_convert()). The same errors later in a connection are soft:
    /// the kernel keeps re-sending and reports the errno only when it times out.
    pub fn connect_errno(self, v6: bool) -> Option<(u16, &'static str)> {
        use IcmpKind::*;
        const ENETUNREACH: (u16, &str) = (101, "Network is unreachable");
        const EHOSTUNREACH: (u16, &str) = (113, "No route to host");
        const ECONNREFUSED: (u16, &str) = (111, "Connection refused");
        const EACCES: (u16, &str) = (13, "Permission denied");
        const EPROTO: (u16, &str) = (71, "Protocol error");
        Some(match self {
            FragNeeded | PacketTooBig | UnreachableOther => return None,
            NetUnreachable | NetUnknown | NetProhibited | NetUnreachableForTos | NoRoute => ENETUNREACH,
            HostUnreachable | HostProhibited | HostUnreachableForTos | PrecedenceViolation | PrecedenceCutoff | BeyondScope
            | AddressUnreachable | TtlExceeded | ReassemblyTimeExceeded => EHOSTUNREACH,
            AdminProhibited if v6 => EACCES,
            AdminProhibited => EHOSTUNREACH,
            SourcePolicyFailed | RejectRoute => EACCES,
            PortUnreachable => ECONNREFUSED,
            ProtocolUnreachable => (92, "Protocol not available"),
            SourceRouteFailed => (95, "Operation not supported"),
            HostUnknown => (112, "Host is down"),
            HostIsolated => (64, "Machine is not on the network"),
            Ipv6UnreachableOther => EPROTO,
        })
    }

    /// The RFC's name for the type and code, for reports.
    pub fn meaning(self) -> &'static str {
        use IcmpKind::*;
        match self {
            NetUnreachable => "network unreachable",
            HostUnreachable => "host unreachable",
            ProtocolUnreachable => "protocol unreachable",
            PortUnreachable => "port unreachable",
            FragNeeded => "fragmentation needed and DF set",
            SourceRouteFailed => "source route failed",
            NetUnknown => "destination network unknown",
            HostUnknown => "destination host unknown",
            HostIsolated => "source host isolated",
            NetProhibited => "network administratively prohibited",
            HostProhibited => "host administratively prohibited",
            NetUnreachableForTos => "network unreachable for TOS",
            HostUnreachableForTos => "host unreachable for TOS",
            AdminProhibited => "communication administratively prohibited",
            PrecedenceViolation => "host precedence violation",
            PrecedenceCutoff => "precedence cutoff in effect",
            UnreachableOther => "destination unreachable (unassigned code)",
            NoRoute => "no route to destination",
            BeyondScope => "beyond scope of source address",
            AddressUnreachable => "address unreachable",
            SourcePolicyFailed => "source address failed ingress/egress policy",
            RejectRoute => "reject route to destination",
            Ipv6UnreachableOther => "destination unreachable (other code)",
            PacketTooBig => "packet too big",
            TtlExceeded => "time to live exceeded in transit",
            ReassemblyTimeExceeded => "fragment reassembly time exceeded",
        }
    }

    fn of(v6: bool, icmp_type: u8, code: u8) -> Option<IcmpKind> {
        use IcmpKind::*;
        const V4_UNREACH: [IcmpKind; 16] = [
            NetUnreachable,
            HostUnreachable,
            ProtocolUnreachable,
            PortUnreachable,
            FragNeeded,
            SourceRouteFailed,
            NetUnknown,
            HostUnknown,
            HostIsolated,
            NetProhibited,
            HostProhibited,
            NetUnreachableForTos,
            HostUnreachableForTos,
            AdminProhibited,
            PrecedenceViolation,
            PrecedenceCutoff,
        ];
        const V6_UNREACH: [IcmpKind; 7] = [NoRoute, AdminProhibited, BeyondScope, AddressUnreachable, PortUnreachable, SourcePolicyFailed, RejectRoute];
        let exceeded = if code == 0 { TtlExceeded } else { ReassemblyTimeExceeded };
        match (v6, icmp_type) {
            (false, ICMP_DEST_UNREACH) => Some(V4_UNREACH.get(usize::from(code)).copied().unwrap_or(UnreachableOther)),
            (false, ICMP_TIME_EXCEEDED) => Some(exceeded),
            (true, ICMPV6_DEST_UNREACH) => Some(V6_UNREACH.get(usize::from(code)).copied().unwrap_or(Ipv6UnreachableOther)),
            (true, ICMPV6_PACKET_TOO_BIG) => Some(PacketTooBig),
            (true, ICMPV6_TIME_EXCEEDED) => Some(exceeded),
            _ => None,
        }
    }
}

/// The TCP segment an error quotes: it went from `src` to `dst`, the other way from the error
/// when the error came from the far end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuotedTcp {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    /// The quoted packet's length on the wire, from its IP header: the size that was too big.
    pub ip_len: u32,
    /// IPv4 Don't Fragment (always true for IPv6: routers never fragment it).
    pub dont_fragment: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Quote {
    Tcp(QuotedTcp),
    /// A TCP header quoted with fewer than 8 bytes: not enough for the sequence number.
    TcpTruncated,
    /// Another protocol (UDP, ICMP, ...), or a non-first fragment.
    Other(u8),
    /// Too little quoted to read the IP header.
    Unreadable,
}

/// One ICMP or ICMPv6 error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IcmpMessage {
    /// Who sent the error: the server's host, a router or a firewall on the way.
    pub sender: IpAddr,
    pub dst: IpAddr,
    pub kind: IcmpKind,
    /// Fragmentation needed (RFC 1191 §4) or packet too big (RFC 4443 §3.2): the next hop's MTU
    /// (none when a pre-RFC 1191 router left it 0).
    pub mtu: Option<u32>,
    pub quote: Quote,
    /// The VLAN tags the error came on (`link::vlan_ids`): part of the connection's identity.
    pub vlan: u32,
}

impl IcmpMessage {
    pub fn is_v6(&self) -> bool {
        self.sender.is_ipv6()
    }
}

/// Decodes one frame as an ICMP error. `None` for anything else (including ICMP queries such as
/// echo, redirects and parameter problems), which stays counted as not TCP.
pub fn decode(linktype: u32, frame: &[u8]) -> Option<IcmpMessage> {
    let (at, network) = link::ip_offset(linktype, frame).ok()?;
    let packet = frame.get(at..)?;
    let header = match (network, packet.first()? >> 4) {
        (link::Network::Ipv4, _) | (link::Network::Either, 4) => ip::ipv4(packet).ok()?,
        (link::Network::Ipv6, _) | (link::Network::Either, 6) => ip::ipv6(packet).ok()?,
        _ => return None,
    };
    let v6 = match header.protocol {
        PROTO_ICMP if header.src.is_ipv4() => false,
        PROTO_ICMPV6 if header.src.is_ipv6() => true,
        _ => return None,
    };
    let icmp = packet.get(header.header_len..)?;
    let kind = IcmpKind::of(v6, u8_at(icmp, 0)?, u8_at(icmp, 1)?)?;
    let mtu = match kind {
        // RFC 1191 §4: the low 16 bits of the second word.
        IcmpKind::FragNeeded => be16(icmp, 6).map(u32::from),
        IcmpKind::PacketTooBig => be32(icmp, 4),
        _ => None,
    }
    .filter(|&m| m > 0);
    let quote = icmp.get(ICMP_HEADER_LEN..).map_or(Quote::Unreadable, |q| quote(q, v6));
    Some(IcmpMessage { sender: header.src, dst: header.dst, kind, mtu, quote, vlan: link::vlan_ids(linktype, frame) })
}

/// Reads the quoted packet: its IP header, then the TCP ports and sequence number.
fn quote(quoted: &[u8], v6: bool) -> Quote {
    let parsed = if v6 { ip::ipv6(quoted) } else { ip::ipv4(quoted) };
    let inner = match parsed {
        Ok(inner) => inner,
        Err(Skip::Fragment) => return Quote::Other(ip::PROTO_TCP),
        Err(_) => return Quote::Unreadable,
    };
    if inner.protocol != ip::PROTO_TCP {
        return Quote::Other(inner.protocol);
    }
    let tcp = quoted.get(inner.header_len..).unwrap_or_default();
    let (Some(src_port), Some(dst_port), Some(seq)) = (be16(tcp, 0), be16(tcp, 2), be32(tcp, 4)) else {
        return Quote::TcpTruncated;
    };
    let dont_fragment = v6 || u8_at(quoted, 6).is_some_and(|b| b & 0x40 != 0);
    let ip_len = inner.payload_len + inner.header_len as u32;
    Quote::Tcp(QuotedTcp { src: inner.src, dst: inner.dst, src_port, dst_port, seq, ip_len, dont_fragment })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IPv4 header of `proto` carrying `payload` bytes.
    fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, payload: usize, df: bool) -> Vec<u8> {
        let mut h = vec![0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&((20 + payload) as u16).to_be_bytes());
        h[6] = if df { 0x40 } else { 0 };
        h[8] = 64;
        h[9] = proto;
        h[12..16].copy_from_slice(&src);
        h[16..20].copy_from_slice(&dst);
        h
    }

    /// A SYN from 10.0.0.1:40000 to 10.0.0.2:9000 with sequence number 1000, quoting `tcp_bytes` of it.
    fn quoted_syn(tcp_bytes: usize) -> Vec<u8> {
        let mut q = v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 40, true);
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&9000u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x02;
        q.extend_from_slice(&tcp[..tcp_bytes]);
        q
    }

    /// Raw IPv4: an ICMP error from `sender` to 10.0.0.1 with the given quote.
    fn icmp_v4(sender: [u8; 4], icmp_type: u8, code: u8, rest: [u8; 4], quote: &[u8]) -> Vec<u8> {
        let mut f = v4(sender, [10, 0, 0, 1], 1, 8 + quote.len(), false);
        f.extend_from_slice(&[icmp_type, code, 0, 0]);
        f.extend_from_slice(&rest);
        f.extend_from_slice(quote);
        f
    }

    // --- IPv4 ---

    #[test]
    fn test_ipv4_admin_prohibited_quotes_the_syn() {
        let m = decode(link::LINKTYPE_RAW, &icmp_v4([192, 0, 2, 1], 3, 13, [0; 4], &quoted_syn(20))).unwrap();
        assert_eq!(m.kind, IcmpKind::AdminProhibited);
        assert_eq!(m.kind.class(), IcmpClass::Prohibited);
        assert_eq!(m.sender, IpAddr::from([192, 0, 2, 1]));
        let Quote::Tcp(q) = m.quote else { panic!("{:?}", m.quote) };
        assert_eq!((q.src_port, q.dst_port, q.seq, q.ip_len, q.dont_fragment), (40000, 9000, 1000, 60, true));
        assert_eq!(q.src, IpAddr::from([10, 0, 0, 1]));
    }

    #[test]
    fn test_ipv4_every_unreachable_code_has_a_kind() {
        for code in 0..=255u8 {
            let m = decode(link::LINKTYPE_RAW, &icmp_v4([10, 0, 0, 2], 3, code, [0; 4], &quoted_syn(8))).unwrap();
            assert_eq!(m.kind == IcmpKind::UnreachableOther, code > 15, "code {code}");
        }
    }

    #[test]
    fn test_ipv4_frag_needed_carries_next_hop_mtu() {
        let m = decode(link::LINKTYPE_RAW, &icmp_v4([10, 0, 0, 254], 3, 4, [0, 0, 0x05, 0x78], &quoted_syn(8))).unwrap();
        assert_eq!((m.kind, m.mtu), (IcmpKind::FragNeeded, Some(1400)));
        assert_eq!(m.kind.connect_errno(false), None);
        let old_router = decode(link::LINKTYPE_RAW, &icmp_v4([10, 0, 0, 254], 3, 4, [0; 4], &quoted_syn(8))).unwrap();
        assert_eq!(old_router.mtu, None);
    }

    #[test]
    fn test_ipv4_quote_of_eight_tcp_bytes_is_enough_seven_is_truncated() {
        let m = decode(link::LINKTYPE_RAW, &icmp_v4([10, 0, 0, 2], 3, 3, [0; 4], &quoted_syn(8))).unwrap();
        assert!(matches!(m.quote, Quote::Tcp(q) if q.seq == 1000));
        let m = decode(link::LINKTYPE_RAW, &icmp_v4([10, 0, 0, 2], 3, 3, [0; 4], &quoted_syn(7))).unwrap();
        assert_eq!(m.quote, Quote::TcpTruncated);
        let m = decode(link::LINKTYPE_RAW, &icmp_v4([10, 0, 0, 2], 3, 3, [0; 4], &quoted_syn(0)[..12])).unwrap();
        assert_eq!(m.quote, Quote::Unreadable);
    }

    #[test]
    fn test_ipv4_quote_of_udp_is_other() {
        let mut q = v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 8, false);
        q.extend_from_slice(&[0; 8]);
        let m = decode(link::LINKTYPE_RAW, &icmp_v4([10, 0, 0, 2], 3, 3, [0; 4], &q)).unwrap();
        assert_eq!(m.quote, Quote::Other(17));
    }

    #[test]
    fn test_ipv4_time_exceeded_and_echo() {
        let m = decode(link::LINKTYPE_RAW, &icmp_v4([10, 9, 9, 9], 11, 0, [0; 4], &quoted_syn(8))).unwrap();
        assert_eq!((m.kind, m.kind.connect_errno(false)), (IcmpKind::TtlExceeded, Some((113, "No route to host"))));
        assert_eq!(decode(link::LINKTYPE_RAW, &icmp_v4([10, 0, 0, 2], 8, 0, [0; 4], &[])), None);
        assert_eq!(decode(link::LINKTYPE_RAW, &icmp_v4([10, 0, 0, 2], 5, 1, [0; 4], &quoted_syn(8))), None);
    }

    #[test]
    fn test_ipv4_admin_prohibited_errno_differs_by_family() {
        assert_eq!(IcmpKind::AdminProhibited.connect_errno(false), Some((113, "No route to host")));
        assert_eq!(IcmpKind::AdminProhibited.connect_errno(true), Some((13, "Permission denied")));
        assert_eq!(IcmpKind::PortUnreachable.connect_errno(false), Some((111, "Connection refused")));
    }

    #[test]
    fn test_slugs_are_unique() {
        let mut slugs: Vec<_> = IcmpKind::ALL.iter().map(|k| k.slug()).collect();
        slugs.sort();
        slugs.dedup();
        assert_eq!(slugs.len(), 26);
    }

    // --- IPv6 ---

    fn v6_header(src: u8, dst: u8, next: u8, payload: usize) -> Vec<u8> {
        let mut h = vec![0u8; 40];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
        h[6] = next;
        h[7] = 64;
        h[8] = 0x20;
        h[9] = 0x01;
        h[23] = src;
        h[24] = 0x20;
        h[25] = 0x01;
        h[39] = dst;
        h
    }

    #[test]
    fn test_ipv6_router_packet_too_big_quotes_the_segment() {
        let mut quote = v6_header(1, 2, 6, 1440);
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&443u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&7u32.to_be_bytes());
        quote.extend_from_slice(&tcp);
        let mut f = v6_header(254, 1, 58, 8 + quote.len());
        f.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0x05, 0x00]);
        f.extend_from_slice(&quote);
        let m = decode(link::LINKTYPE_RAW, &f).unwrap();
        assert_eq!((m.kind, m.mtu), (IcmpKind::PacketTooBig, Some(1280)));
        let Quote::Tcp(q) = m.quote else { panic!() };
        assert_eq!((q.dst_port, q.seq, q.ip_len, q.dont_fragment), (443, 7, 1480, true));
        f[40] = 1;
        f[41] = 4;
        assert_eq!(decode(link::LINKTYPE_RAW, &f).unwrap().kind, IcmpKind::PortUnreachable);
        f[41] = 9;
        assert_eq!(decode(link::LINKTYPE_RAW, &f).unwrap().kind, IcmpKind::Ipv6UnreachableOther);
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn prop_any_frame_decodes_or_not_without_panic(linktype in prop::sample::select(vec![1u32, 101, 113, 228, 229, 276]),
                                                       frame in prop::collection::vec(any::<u8>(), 0..160)) {
            let _ = decode(linktype, &frame);
        }

        #[test]
        fn prop_any_cut_of_an_error_is_an_error_or_nothing(cut in 0usize..80) {
            let f = icmp_v4([10, 0, 0, 2], 3, 13, [0; 4], &quoted_syn(20));
            if let Some(m) = decode(link::LINKTYPE_RAW, &f[..cut.min(f.len())]) {
                prop_assert_eq!(m.kind, IcmpKind::AdminProhibited);
            }
        }
    }
}
