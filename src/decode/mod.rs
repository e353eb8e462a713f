//! Decoding a captured frame into a TCP segment: link layer, IP, TCP.
//!
//! Lengths come from the IP header, not from the captured bytes, so a capture taken with a small
//! snaplen (`tcpdump -s 96`) still tells how much data each segment carried.

mod bytes;
pub mod icmp;
pub mod ip;
pub mod link;
pub mod tcp;

use std::net::IpAddr;

pub use tcp::{flags, TcpOptions};

/// A decoded TCP segment: everything the connection tracker needs, nothing borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Segment {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// Payload bytes, from the IP length fields.
    pub payload_len: u32,
    pub options: TcpOptions,
    /// The capture holds fewer bytes than the IP header says (snaplen).
    pub snaplen_cut: bool,
    /// IPv4 Identification; 0 for IPv6. With `checksum`, tells a copy of a frame from a re-send.
    pub ip_id: u16,
    /// The TCP checksum field as captured.
    pub checksum: u16,
    /// The frame's 802.1Q/802.1ad VLAN IDs (`link::vlan_ids`); 0 untagged.
    pub vlan: u32,
    /// IPv4 TTL or IPv6 Hop Limit: one sender on one path keeps it (a middlebox answering for
    /// the server shows another).
    #[serde(default)]
    pub ttl: u8,
}

impl Segment {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Why a frame is not a TCP segment pcapq can use. Counted, never fatal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Skip {
    UnknownLinkType(u32),
    LinkHeaderCut,
    TooManyVlanTags,
    NotIp,
    IpHeaderCut,
    MalformedIp,
    Ipv6ExtensionChain,
    /// A non-first IP fragment: no TCP header in it.
    Fragment,
    NotTcp,
    TcpHeaderCut,
    MalformedTcp,
}

impl Skip {
    /// A stable slug, used as the key in the JSON `skipped` object.
    pub fn slug(&self) -> &'static str {
        match self {
            Skip::UnknownLinkType(_) => "unknown_link_type",
            Skip::LinkHeaderCut => "link_header_cut",
            Skip::TooManyVlanTags => "too_many_vlan_tags",
            Skip::NotIp => "not_ip",
            Skip::IpHeaderCut => "ip_header_cut",
            Skip::MalformedIp => "malformed_ip",
            Skip::Ipv6ExtensionChain => "ipv6_extension_chain",
            Skip::Fragment => "ip_fragment",
            Skip::NotTcp => "not_tcp",
            Skip::TcpHeaderCut => "tcp_header_cut",
            Skip::MalformedTcp => "malformed_tcp",
        }
    }

    /// A plain-words explanation for the summary.
    pub fn meaning(&self) -> &'static str {
        match self {
            Skip::UnknownLinkType(_) => "link type pcapq does not decode",
            Skip::LinkHeaderCut => "frame too short for its link-layer header",
            Skip::TooManyVlanTags => "more than 8 VLAN tags",
            Skip::NotIp => "not IPv4 or IPv6 (ARP, LLDP, ...)",
            Skip::IpHeaderCut => "IP header cut by the snaplen",
            Skip::MalformedIp => "IP header with impossible lengths",
            Skip::Ipv6ExtensionChain => "IPv6 extension header chain too long",
            Skip::Fragment => "IP fragment without a TCP header",
            Skip::NotTcp => "IP but not TCP (UDP, ICMP, ...)",
            Skip::TcpHeaderCut => "TCP header cut by the snaplen",
            Skip::MalformedTcp => "TCP header with an impossible data offset",
        }
    }
}

/// Decodes one frame of the given LINKTYPE into a TCP segment.
/// Inlined into the reading loop (`analysis::read_file`, its one hot caller): the segment is
/// then built where it is kept instead of being copied there.
#[inline(always)]
pub fn decode(linktype: u32, frame: &[u8]) -> Result<Segment, Skip> {
    let (at, network) = link::ip_offset(linktype, frame)?;
    let packet = frame.get(at..).ok_or(Skip::LinkHeaderCut)?;
    let version = packet.first().map(|b| b >> 4).ok_or(Skip::IpHeaderCut)?;
    let ip = match (network, version) {
        (link::Network::Ipv4, _) | (link::Network::Either, 4) => ip::ipv4(packet)?,
        (link::Network::Ipv6, _) | (link::Network::Either, 6) => ip::ipv6(packet)?,
        _ => return Err(Skip::NotIp),
    };
    if ip.protocol != ip::PROTO_TCP {
        return Err(Skip::NotTcp);
    }
    let segment = packet.get(ip.header_len..).ok_or(Skip::TcpHeaderCut)?;
    let tcp = tcp::parse(segment)?;
    let payload_len = ip.payload_len.checked_sub(tcp.header_len).ok_or(Skip::MalformedTcp)?;
    let captured_payload = segment.len().saturating_sub(tcp.header_len as usize);
    Ok(Segment {
        src: ip.src,
        dst: ip.dst,
        src_port: tcp.src_port,
        dst_port: tcp.dst_port,
        seq: tcp.seq,
        ack: tcp.ack,
        flags: tcp.flags,
        window: tcp.window,
        payload_len,
        options: tcp.options,
        snaplen_cut: (captured_payload as u64) < u64::from(payload_len),
        ip_id: ip.id,
        checksum: tcp.checksum,
        vlan: link::vlan_ids_before(linktype, frame, at),
        ttl: ip.ttl,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + IPv4 (total length `ip_total`) + a 20-byte TCP header, `extra` captured bytes after.
    fn frame(ip_total: u16, extra: usize) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&ip_total.to_be_bytes());
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        f.extend_from_slice(&ip);
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&50000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&9000u16.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = flags::ACK | flags::PSH;
        f.extend_from_slice(&tcp);
        f.extend(std::iter::repeat_n(0x61, extra));
        f
    }

    #[test]
    fn test_payload_length_from_ip_header_when_snaplen_cut() {
        // 1000 bytes of payload on the wire, 10 captured.
        let s = decode(link::LINKTYPE_ETHERNET, &frame(1040, 10)).unwrap();
        assert_eq!(s.payload_len, 1000);
        assert!(s.snaplen_cut);
        assert_eq!((s.src_port, s.dst_port), (50000, 9000));
    }

    #[test]
    fn test_ethernet_padding_does_not_count_as_payload() {
        // A 40-byte IP packet padded to the 60-byte Ethernet minimum.
        let s = decode(link::LINKTYPE_ETHERNET, &frame(40, 6)).unwrap();
        assert_eq!(s.payload_len, 0);
        assert!(!s.snaplen_cut);
    }

    #[test]
    fn test_tcp_header_cut_is_reported() {
        let f = frame(40, 0);
        assert_eq!(decode(link::LINKTYPE_ETHERNET, &f[..14 + 20 + 10]), Err(Skip::TcpHeaderCut));
    }

    #[test]
    fn test_udp_is_not_tcp() {
        let mut f = frame(40, 0);
        f[14 + 9] = 17;
        assert_eq!(decode(link::LINKTYPE_ETHERNET, &f), Err(Skip::NotTcp));
    }

    #[test]
    fn test_tcp_header_longer_than_ip_payload_is_malformed() {
        let mut f = frame(40, 0);
        f[14 + 20 + 12] = 8 << 4;
        assert_eq!(decode(link::LINKTYPE_ETHERNET, &f), Err(Skip::MalformedTcp));
    }

    #[test]
    fn test_raw_ip_version_nibble_decides() {
        let f = frame(40, 0);
        assert!(decode(link::LINKTYPE_RAW, &f[14..]).is_ok());
        let mut bad = f[14..].to_vec();
        bad[0] = 0x25;
        assert_eq!(decode(link::LINKTYPE_RAW, &bad), Err(Skip::NotIp));
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn prop_any_frame_decodes_or_is_skipped(linktype in prop::sample::select(vec![0u32, 1, 12, 14, 101, 108, 113, 228, 229, 276, 147]),
                                                 frame in prop::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(s) = decode(linktype, &frame) {
                prop_assert!(s.payload_len as usize <= frame.len().max(65_535));
            }
        }

        #[test]
        fn prop_any_cut_of_a_good_frame_is_the_segment_or_a_skip(cut in 0usize..80, extra in 0usize..20) {
            let f = frame(40 + extra as u16, extra);
            let whole = decode(link::LINKTYPE_ETHERNET, &f).unwrap();
            match decode(link::LINKTYPE_ETHERNET, &f[..cut.min(f.len())]) {
                Ok(s) => {
                    prop_assert_eq!((s.seq, s.payload_len, s.src_port), (whole.seq, whole.payload_len, whole.src_port));
                    prop_assert_eq!(s.snaplen_cut, cut < f.len());
                }
                Err(skip) => prop_assert!(matches!(skip, Skip::LinkHeaderCut | Skip::IpHeaderCut | Skip::TcpHeaderCut)),
            }
        }
    }
}
