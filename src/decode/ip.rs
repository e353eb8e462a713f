//! IPv4 (RFC 791 §3.1) and IPv6 (RFC 8200 §3) headers: addresses, the upper-layer protocol, where its
//! header starts, and its length as the IP header states it (not as the snaplen cut it).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::bytes::{array, be16, header, u8_at};
use super::Skip;

pub const PROTO_TCP: u8 = 6;

/// RFC 8200 §4: extension headers that may precede TCP. ESP (50) hides what follows.
const EXT_HOP_BY_HOP: u8 = 0;
const EXT_ROUTING: u8 = 43;
const EXT_FRAGMENT: u8 = 44;
const EXT_AUTH: u8 = 51;
const EXT_DESTINATION: u8 = 60;
const EXT_MOBILITY: u8 = 135;
const EXT_HIP: u8 = 139;
const EXT_SHIM6: u8 = 140;
/// A chain longer than this is hostile; RFC 8200 §4.1 expects each kind at most twice.
const MAX_EXTENSION_HEADERS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeader {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    /// Offset of the upper-layer header from the start of the IP header.
    pub header_len: usize,
    /// Upper-layer length from the IP length field.
    pub payload_len: u32,
    /// IPv4 Identification (RFC 791 §3.1); 0 for IPv6, which has none outside fragments.
    pub id: u16,
    /// IPv4 Time to Live or IPv6 Hop Limit, as captured (RFC 791 §3.1, RFC 8200 §3).
    pub ttl: u8,
}

pub fn ipv4(packet: &[u8]) -> Result<IpHeader, Skip> {
    let h: &[u8; 20] = header(packet).ok_or(Skip::IpHeaderCut)?;
    if h[0] >> 4 != 4 {
        return Err(Skip::MalformedIp);
    }
    let header_len = usize::from(h[0] & 0x0f) * 4;
    if header_len < 20 {
        return Err(Skip::MalformedIp);
    }
    // RFC 791 §3.1: the low 13 bits are the fragment offset; only the first fragment has the TCP header.
    if u16::from_be_bytes([h[6], h[7]]) & 0x1fff != 0 {
        return Err(Skip::Fragment);
    }
    let total_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    // A total length of 0 appears in captures of TCP segmentation offload; fall back to what was captured.
    let total_len = if total_len == 0 { packet.len() } else { total_len };
    let payload_len = total_len.checked_sub(header_len).ok_or(Skip::MalformedIp)?;
    Ok(IpHeader {
        src: Ipv4Addr::new(h[12], h[13], h[14], h[15]).into(),
        dst: Ipv4Addr::new(h[16], h[17], h[18], h[19]).into(),
        protocol: h[9],
        header_len,
        payload_len: payload_len as u32,
        id: u16::from_be_bytes([h[4], h[5]]),
        ttl: h[8],
    })
}

pub fn ipv6(packet: &[u8]) -> Result<IpHeader, Skip> {
    let version = u8_at(packet, 0).ok_or(Skip::IpHeaderCut)? >> 4;
    if version != 6 {
        return Err(Skip::MalformedIp);
    }
    let payload_field = usize::from(be16(packet, 4).ok_or(Skip::IpHeaderCut)?);
    let ttl = u8_at(packet, 7).ok_or(Skip::IpHeaderCut)?;
    let mut next = u8_at(packet, 6).ok_or(Skip::IpHeaderCut)?;
    let src = Ipv6Addr::from(array::<16>(packet, 8).ok_or(Skip::IpHeaderCut)?);
    let dst = Ipv6Addr::from(array::<16>(packet, 24).ok_or(Skip::IpHeaderCut)?);
    // A zero payload length means a jumbogram (RFC 2675 §2) or offload; use what was captured.
    let payload_total = if payload_field == 0 { packet.len().saturating_sub(40) } else { payload_field };
    let mut at = 40usize;
    for _ in 0..MAX_EXTENSION_HEADERS {
        match next {
            EXT_HOP_BY_HOP | EXT_ROUTING | EXT_DESTINATION | EXT_MOBILITY | EXT_HIP | EXT_SHIM6 => {
                next = u8_at(packet, at).ok_or(Skip::IpHeaderCut)?;
                let len = (usize::from(u8_at(packet, at + 1).ok_or(Skip::IpHeaderCut)?) + 1) * 8;
                at += len;
            }
            EXT_AUTH => {
                // RFC 4302 §2.2: the length is in 4-octet units, minus 2.
                next = u8_at(packet, at).ok_or(Skip::IpHeaderCut)?;
                let len = (usize::from(u8_at(packet, at + 1).ok_or(Skip::IpHeaderCut)?) + 2) * 4;
                at += len;
            }
            EXT_FRAGMENT => {
                let offset = be16(packet, at + 2).ok_or(Skip::IpHeaderCut)? >> 3;
                if offset != 0 {
                    return Err(Skip::Fragment);
                }
                next = u8_at(packet, at).ok_or(Skip::IpHeaderCut)?;
                at += 8;
            }
            protocol => {
                let payload_len = (payload_total + 40).checked_sub(at).ok_or(Skip::MalformedIp)?;
                return Ok(IpHeader { src: src.into(), dst: dst.into(), protocol, header_len: at, payload_len: payload_len as u32, id: 0, ttl });
            }
        }
    }
    Err(Skip::Ipv6ExtensionChain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(total_len: u16, ihl: u8, frag: u16, proto: u8) -> Vec<u8> {
        let mut p = vec![0u8; (usize::from(ihl) * 4).max(20)];
        p[0] = 0x40 | ihl;
        p[2..4].copy_from_slice(&total_len.to_be_bytes());
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p[9] = proto;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p
    }

    #[test]
    fn test_ipv4_with_options_payload_from_total_length() {
        let h = ipv4(&v4(100, 6, 0, 6)).unwrap();
        assert_eq!(h.header_len, 24);
        assert_eq!(h.payload_len, 76);
        assert_eq!(h.src, IpAddr::from([10, 0, 0, 1]));
    }

    #[test]
    fn test_ipv4_non_first_fragment_is_skipped_first_is_kept() {
        assert_eq!(ipv4(&v4(100, 5, 0x0010, 6)), Err(Skip::Fragment));
        assert!(ipv4(&v4(100, 5, 0x2000, 6)).is_ok());
    }

    #[test]
    fn test_ipv4_bad_ihl_and_short_total_length() {
        assert_eq!(ipv4(&v4(100, 4, 0, 6)), Err(Skip::MalformedIp));
        assert_eq!(ipv4(&v4(10, 5, 0, 6)), Err(Skip::MalformedIp));
        assert_eq!(ipv4(&[0x45, 0, 0]), Err(Skip::IpHeaderCut));
        assert_eq!(ipv4(&[]), Err(Skip::IpHeaderCut));
    }

    fn v6(next: u8, payload: u16, ext: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&payload.to_be_bytes());
        p[6] = next;
        p.extend_from_slice(ext);
        p
    }

    #[test]
    fn test_ipv6_hop_by_hop_then_tcp() {
        let h = ipv6(&v6(0, 48, &[6, 0, 0, 0, 0, 0, 0, 0])).unwrap();
        assert_eq!(h.protocol, 6);
        assert_eq!(h.header_len, 48);
        assert_eq!(h.payload_len, 40);
    }

    #[test]
    fn test_ipv6_fragment_header_offset_nonzero_is_skipped() {
        assert_eq!(ipv6(&v6(44, 8, &[6, 0, 0, 8, 0, 0, 0, 1])), Err(Skip::Fragment));
        assert_eq!(ipv6(&v6(44, 28, &[6, 0, 0, 1, 0, 0, 0, 1])).unwrap().header_len, 48);
    }

    #[test]
    fn test_ipv6_extension_header_loop_is_bounded() {
        // Destination options pointing to destination options, forever.
        let mut ext = Vec::new();
        for _ in 0..40 {
            ext.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]);
        }
        assert_eq!(ipv6(&v6(60, 320, &ext)), Err(Skip::Ipv6ExtensionChain));
    }
}
