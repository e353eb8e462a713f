//! Link layers: find where the IP packet starts in a captured frame.
//!
//! Link-type numbers are the LINKTYPE_* values of tcpdump.org/linktypes.html.

use super::bytes::{be16, be32, le32};
use super::Skip;

pub const LINKTYPE_NULL: u32 = 0;
pub const LINKTYPE_ETHERNET: u32 = 1;
/// DLT_RAW as OpenBSD and BSD/OS number it; libpcap maps both to LINKTYPE_RAW in files, but
/// old captures carry them.
pub const LINKTYPE_RAW_OPENBSD: u32 = 12;
pub const LINKTYPE_RAW_BSDOS: u32 = 14;
pub const LINKTYPE_RAW: u32 = 101;
pub const LINKTYPE_LOOP: u32 = 108;
pub const LINKTYPE_LINUX_SLL: u32 = 113;
pub const LINKTYPE_IPV4: u32 = 228;
pub const LINKTYPE_IPV6: u32 = 229;
pub const LINKTYPE_LINUX_SLL2: u32 = 276;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
/// IEEE 802.1Q customer tag, 802.1ad service tag, and the pre-standard 0x9100 QinQ tag.
const ETHERTYPE_VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];
/// More tags than this is not a real frame.
const MAX_VLAN_TAGS: usize = 8;

/// Which IP version the link layer announced, where it announces one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    Ipv4,
    Ipv6,
    /// Raw IP: the version nibble decides.
    Either,
}

/// Returns the offset of the IP header and the version the link layer announced.
pub fn ip_offset(linktype: u32, frame: &[u8]) -> Result<(usize, Network), Skip> {
    match linktype {
        LINKTYPE_ETHERNET => ethernet(frame),
        LINKTYPE_LINUX_SLL => {
            // SLL: packet type, ARPHRD, address length, 8 address bytes, then the protocol.
            let protocol = be16(frame, 14).ok_or(Skip::LinkHeaderCut)?;
            ethertype_payload(frame, 16, protocol, 0)
        }
        LINKTYPE_LINUX_SLL2 => {
            // SLL2 puts the protocol first and has a 20-byte header.
            let protocol = be16(frame, 0).ok_or(Skip::LinkHeaderCut)?;
            if frame.len() < 20 {
                return Err(Skip::LinkHeaderCut);
            }
            ethertype_payload(frame, 20, protocol, 0)
        }
        LINKTYPE_RAW | LINKTYPE_RAW_OPENBSD | LINKTYPE_RAW_BSDOS => Ok((0, Network::Either)),
        LINKTYPE_IPV4 => Ok((0, Network::Ipv4)),
        LINKTYPE_IPV6 => Ok((0, Network::Ipv6)),
        LINKTYPE_NULL => {
            // The address family in the capturing host's byte order.
            let family = le32(frame, 0).ok_or(Skip::LinkHeaderCut)?;
            let family = if family > 0xffff { family.swap_bytes() } else { family };
            bsd_family(family)
        }
        LINKTYPE_LOOP => {
            // OpenBSD loopback: the same family field, always in network byte order.
            let family = be32(frame, 0).ok_or(Skip::LinkHeaderCut)?;
            bsd_family(family)
        }
        other => Err(Skip::UnknownLinkType(other)),
    }
}

fn ethernet(frame: &[u8]) -> Result<(usize, Network), Skip> {
    let ethertype = be16(frame, 12).ok_or(Skip::LinkHeaderCut)?;
    ethertype_payload(frame, 14, ethertype, 0)
}

/// Follows 802.1Q/802.1ad tags (each 4 bytes: TCI, then the next EtherType) to the IP header.
fn ethertype_payload(frame: &[u8], at: usize, ethertype: u16, tags: usize) -> Result<(usize, Network), Skip> {
    match ethertype {
        ETHERTYPE_IPV4 => Ok((at, Network::Ipv4)),
        ETHERTYPE_IPV6 => Ok((at, Network::Ipv6)),
        t if ETHERTYPE_VLAN.contains(&t) => {
            if tags >= MAX_VLAN_TAGS {
                return Err(Skip::TooManyVlanTags);
            }
            let inner = be16(frame, at + 2).ok_or(Skip::LinkHeaderCut)?;
            ethertype_payload(frame, at + 4, inner, tags + 1)
        }
        _ => Err(Skip::NotIp),
    }
}

/// Bits of a VLAN ID (IEEE 802.1Q §9.6: 12-bit VID).
const VID_BITS: u32 = 12;
const VID_MASK: u16 = 0x0fff;

/// The VLAN IDs of a frame's first two 802.1Q/802.1ad tags, packed: the outer tag in bits 12-23,
/// the inner in bits 0-11 (a single tag is the outer one); 0 for an untagged frame. VID 0 is a
/// priority tag without a VLAN (802.1Q §9.6) and counts as none. Deeper tags are ignored.
/// Reads only the EtherType for an untagged frame.
pub fn vlan_ids(linktype: u32, frame: &[u8]) -> u32 {
    // Where the EtherType is, and where what it announces starts.
    let (type_at, mut at) = match linktype {
        LINKTYPE_ETHERNET => (12, 14),
        LINKTYPE_LINUX_SLL => (14, 16),
        LINKTYPE_LINUX_SLL2 => (0, 20),
        _ => return 0,
    };
    let mut ethertype = be16(frame, type_at).unwrap_or(0);
    let mut ids = [0u16; 2];
    for id in &mut ids {
        if !ETHERTYPE_VLAN.contains(&ethertype) {
            break;
        }
        let (Some(tci), Some(next)) = (be16(frame, at), be16(frame, at + 2)) else { break };
        *id = tci & VID_MASK;
        ethertype = next;
        at += 4;
    }
    let [outer, inner] = ids;
    if outer == 0 && inner != 0 {
        return u32::from(inner) << VID_BITS;
    }
    u32::from(outer) << VID_BITS | u32::from(inner)
}

/// `vlan_ids` of a frame whose IP header `ip_offset` found at `ip_at`: 0 without reading the
/// frame again when the IP header follows the link header at once (no tag between them).
pub fn vlan_ids_before(linktype: u32, frame: &[u8], ip_at: usize) -> u32 {
    let untagged_at = match linktype {
        LINKTYPE_ETHERNET => 14,
        LINKTYPE_LINUX_SLL => 16,
        LINKTYPE_LINUX_SLL2 => 20,
        _ => return 0,
    };
    if ip_at <= untagged_at {
        0
    } else {
        vlan_ids(linktype, frame)
    }
}

/// The VLAN IDs packed by `vlan_ids`, outer first, without the absent ones.
pub fn vlan_list(vlan: u32) -> Vec<u16> {
    let outer = (vlan >> VID_BITS) as u16 & VID_MASK;
    let inner = vlan as u16 & VID_MASK;
    [outer, inner].into_iter().filter(|&id| id != 0).collect()
}

/// BSD AF_INET is 2 everywhere; AF_INET6 is 24 (NetBSD, OpenBSD), 28 (FreeBSD), 30 (macOS).
fn bsd_family(family: u32) -> Result<(usize, Network), Skip> {
    match family {
        2 => Ok((4, Network::Ipv4)),
        24 | 28 | 30 | 10 => Ok((4, Network::Ipv6)),
        _ => Err(Skip::NotIp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(ethertype: u16, rest: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(rest);
        f
    }

    #[test]
    fn test_ethernet_ipv4() {
        assert_eq!(ip_offset(LINKTYPE_ETHERNET, &eth(0x0800, &[0x45])), Ok((14, Network::Ipv4)));
    }

    #[test]
    fn test_ethernet_qinq_two_tags() {
        // 802.1ad outer tag, 802.1Q inner tag, then IPv6.
        let frame = eth(0x88a8, &[0, 10, 0x81, 0x00, 0, 20, 0x86, 0xdd, 0x60]);
        assert_eq!(ip_offset(LINKTYPE_ETHERNET, &frame), Ok((22, Network::Ipv6)));
    }

    #[test]
    fn test_vlan_ids_untagged_single_and_qinq() {
        assert_eq!(vlan_ids(LINKTYPE_ETHERNET, &eth(0x0800, &[0x45])), 0);
        let single = eth(0x8100, &[0x20, 42, 0x08, 0x00, 0x45]);
        assert_eq!(vlan_ids(LINKTYPE_ETHERNET, &single), 42 << 12);
        assert_eq!(vlan_list(vlan_ids(LINKTYPE_ETHERNET, &single)), [42]);
        let qinq = eth(0x88a8, &[0, 10, 0x81, 0x00, 0, 20, 0x86, 0xdd, 0x60]);
        assert_eq!(vlan_ids(LINKTYPE_ETHERNET, &qinq), 10 << 12 | 20);
        assert_eq!(vlan_list(vlan_ids(LINKTYPE_ETHERNET, &qinq)), [10, 20]);
        assert_ne!(vlan_ids(LINKTYPE_ETHERNET, &qinq), vlan_ids(LINKTYPE_ETHERNET, &eth(0x8100, &[0, 20, 0x81, 0x00, 0, 10, 0x08, 0x00])));
    }

    #[test]
    fn test_vlan_ids_before_the_ip_header_are_vlan_ids() {
        let mut sll2 = vec![0u8; 25];
        sll2[0] = 0x81;
        sll2[21] = 9;
        sll2[22] = 0x08;
        sll2[24] = 0x45;
        let frames = [
            (LINKTYPE_ETHERNET, eth(0x0800, &[0x45])),
            (LINKTYPE_ETHERNET, eth(0x8100, &[0x20, 42, 0x08, 0x00, 0x45])),
            (LINKTYPE_ETHERNET, eth(0x88a8, &[0, 10, 0x81, 0x00, 0, 20, 0x86, 0xdd, 0x60])),
            (LINKTYPE_ETHERNET, eth(0x8100, &[0xa0, 0, 0x08, 0x00, 0x45])),
            (LINKTYPE_LINUX_SLL2, sll2),
            (LINKTYPE_RAW, vec![0x45; 40]),
        ];
        for (linktype, frame) in frames {
            let (at, _) = ip_offset(linktype, &frame).unwrap();
            assert_eq!(vlan_ids_before(linktype, &frame, at), vlan_ids(linktype, &frame), "{frame:?}");
        }
    }

    #[test]
    fn test_vlan_ids_priority_tag_is_no_vlan_and_cut_tags_stop() {
        // VID 0 with priority 5: a priority tag only.
        assert_eq!(vlan_ids(LINKTYPE_ETHERNET, &eth(0x8100, &[0xa0, 0, 0x08, 0x00, 0x45])), 0);
        // Priority tag outside, VLAN 7 inside: VLAN 7.
        assert_eq!(vlan_ids(LINKTYPE_ETHERNET, &eth(0x8100, &[0, 0, 0x81, 0x00, 0, 7, 0x08, 0x00])), 7 << 12);
        assert_eq!(vlan_ids(LINKTYPE_ETHERNET, &eth(0x8100, &[0, 5])), 0);
        let mut sll2 = vec![0u8; 24];
        sll2[0] = 0x81;
        sll2[21] = 9;
        sll2[22] = 0x08;
        assert_eq!(vlan_ids(LINKTYPE_LINUX_SLL2, &sll2), 9 << 12);
        assert_eq!(vlan_ids(LINKTYPE_RAW, &[0x45; 40]), 0);
    }

    #[test]
    fn test_ethernet_endless_vlan_tags_are_refused() {
        let mut rest = Vec::new();
        for _ in 0..20 {
            rest.extend_from_slice(&[0, 1, 0x81, 0x00]);
        }
        assert_eq!(ip_offset(LINKTYPE_ETHERNET, &eth(0x8100, &rest)), Err(Skip::TooManyVlanTags));
    }

    #[test]
    fn test_ethernet_arp_is_not_ip() {
        assert_eq!(ip_offset(LINKTYPE_ETHERNET, &eth(0x0806, &[0; 28])), Err(Skip::NotIp));
    }

    #[test]
    fn test_sll_and_sll2_protocol_fields() {
        let mut sll = vec![0u8; 16];
        sll[14] = 0x08;
        assert_eq!(ip_offset(LINKTYPE_LINUX_SLL, &sll), Ok((16, Network::Ipv4)));
        let mut sll2 = vec![0u8; 20];
        sll2[0] = 0x86;
        sll2[1] = 0xdd;
        assert_eq!(ip_offset(LINKTYPE_LINUX_SLL2, &sll2), Ok((20, Network::Ipv6)));
        assert_eq!(ip_offset(LINKTYPE_LINUX_SLL2, &sll2[..10]), Err(Skip::LinkHeaderCut));
    }

    #[test]
    fn test_null_family_either_byte_order_and_loop_network_order() {
        assert_eq!(ip_offset(LINKTYPE_NULL, &[2, 0, 0, 0]), Ok((4, Network::Ipv4)));
        assert_eq!(ip_offset(LINKTYPE_NULL, &[0, 0, 0, 30]), Ok((4, Network::Ipv6)));
        assert_eq!(ip_offset(LINKTYPE_LOOP, &[0, 0, 0, 2]), Ok((4, Network::Ipv4)));
        assert_eq!(ip_offset(LINKTYPE_LOOP, &[0, 0, 0, 99]), Err(Skip::NotIp));
    }

    #[test]
    fn test_unknown_link_type_is_reported() {
        assert_eq!(ip_offset(147, &[0; 40]), Err(Skip::UnknownLinkType(147)));
    }
}
