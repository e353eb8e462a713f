//! The TCP header (RFC 9293 §3.1) and the options pcapq uses.

use super::bytes::{be16, be32, header, u8_at};
use super::Skip;

/// TCP flag bits, RFC 9293 §3.1.
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// Option kinds: RFC 9293 §3.2, RFC 7323 §2.2 and §3.2, RFC 2018 §2 and §3.
const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_MSS: u8 = 2;
const OPT_WINDOW_SCALE: u8 = 3;
const OPT_SACK_PERMITTED: u8 = 4;
const OPT_SACK: u8 = 5;
const OPT_TIMESTAMP: u8 = 8;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    /// Number of SACK blocks (RFC 2018 §3).
    pub sack_blocks: u8,
    /// The first SACK block's left and right edges: below the ACK number, or inside the second
    /// block, it reports a segment that arrived twice (D-SACK, RFC 2883 §4).
    pub first_sack: Option<(u32, u32)>,
    /// The second SACK block holds the first (RFC 2883 §4: a D-SACK above the ACK number).
    pub first_sack_in_second: bool,
    /// TSval, TSecr (RFC 7323 §3).
    pub timestamp: Option<(u32, u32)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpHeader {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// Header length including options (data offset x 4).
    pub header_len: u32,
    pub options: TcpOptions,
    /// The checksum field as captured (covers the options and payload).
    pub checksum: u16,
}

/// Parses the fixed header and, on SYN segments, whatever options were captured; of other
/// segments only the first SACK block and a timestamp laid out first as Linux lays it out
/// (parsing every option costs more than the rest of the header, and nothing else reads them).
/// A header cut by the snaplen before its 20 fixed bytes is `TcpHeaderCut`; cut options are
/// parsed as far as they go.
/// Inlined into `decode`, so that the header is not built and copied into the segment.
#[inline(always)]
pub fn parse(segment: &[u8]) -> Result<TcpHeader, Skip> {
    let h: &[u8; 20] = header(segment).ok_or(Skip::TcpHeaderCut)?;
    let header_len = u32::from(h[12] >> 4) * 4;
    if header_len < 20 {
        return Err(Skip::MalformedTcp);
    }
    let flag_bits = h[13];
    let options_end = (header_len as usize).min(segment.len());
    let options = if flag_bits & flags::SYN != 0 {
        segment.get(20..options_end).map(parse_options).unwrap_or_default()
    } else if header_len > 20 {
        // Of the other segments' options only the first SACK block (D-SACK) and a leading
        // timestamp (copies, and which SYN-ACK a handshake ACK answers) are read.
        let opts = segment.get(20..options_end).unwrap_or_default();
        let (first_sack, first_sack_in_second) = first_sack(opts);
        TcpOptions { first_sack, first_sack_in_second, timestamp: leading_timestamp(opts), ..TcpOptions::default() }
    } else {
        TcpOptions::default()
    };
    Ok(TcpHeader {
        src_port: u16::from_be_bytes([h[0], h[1]]),
        dst_port: u16::from_be_bytes([h[2], h[3]]),
        seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        ack: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
        flags: flag_bits,
        window: u16::from_be_bytes([h[14], h[15]]),
        header_len,
        options,
        checksum: u16::from_be_bytes([h[16], h[17]]),
    })
}

/// The options of nearly every segment after the handshake when timestamps are on: two NOPs
/// and a timestamp (the layout of RFC 7323 Appendix A, which Linux sends), no SACK block.
const NOP_NOP_TIMESTAMP: [u8; 4] = [OPT_NOP, OPT_NOP, OPT_TIMESTAMP, 10];

/// TSval and TSecr when the options begin with two NOPs and a timestamp (RFC 7323 Appendix A),
/// as Linux, the BSDs and macOS send them; other layouts are left unread.
fn leading_timestamp(opts: &[u8]) -> Option<(u32, u32)> {
    if opts.get(..4)? != NOP_NOP_TIMESTAMP {
        return None;
    }
    be32(opts, 4).zip(be32(opts, 8))
}

/// The first SACK block's edges, if the options hold one, and whether a second block holds it.
fn first_sack(mut opts: &[u8]) -> (Option<(u32, u32)>, bool) {
    if opts.len() == 12 && opts[..4] == NOP_NOP_TIMESTAMP {
        return (None, false);
    }
    while let Some((&kind, rest)) = opts.split_first() {
        match kind {
            OPT_END => return (None, false),
            OPT_NOP => {
                opts = rest;
                continue;
            }
            _ => {}
        }
        let Some(len) = rest.first().map(|&l| usize::from(l)).filter(|&l| l >= 2) else { return (None, false) };
        if kind == OPT_SACK {
            let Some(body) = opts.get(2..len) else { return (None, false) };
            let first = be32(body, 0).zip(be32(body, 4));
            return (first, first.is_some_and(|f| in_second_block(body, f)));
        }
        let Some(next) = opts.get(len..) else { return (None, false) };
        opts = next;
    }
    (None, false)
}

/// The second SACK block of `body` holds `first` (Linux v6.6 net/ipv4/tcp_input.c:
/// tcp_check_dsack(): neither edge outside, TcpExtTCPDSACKOfoRecv).
fn in_second_block(body: &[u8], (left, right): (u32, u32)) -> bool {
    let Some((left2, right2)) = be32(body, 8).zip(be32(body, 12)) else { return false };
    // Sequence numbers compare modulo 2^32 (RFC 9293 §3.4).
    let before = |a: u32, b: u32| (a.wrapping_sub(b) as i32) < 0;
    !before(left, left2) && !before(right2, right)
}

pub fn parse_options(mut opts: &[u8]) -> TcpOptions {
    let mut out = TcpOptions::default();
    while let Some((&kind, rest)) = opts.split_first() {
        match kind {
            OPT_END => break,
            OPT_NOP => {
                opts = rest;
                continue;
            }
            _ => {}
        }
        let Some(&len) = rest.first() else { break };
        let len = usize::from(len);
        if len < 2 {
            break;
        }
        let Some(body) = opts.get(2..len) else { break };
        match (kind, body.len()) {
            (OPT_MSS, 2) => out.mss = be16(body, 0),
            (OPT_WINDOW_SCALE, 1) => out.window_scale = u8_at(body, 0),
            (OPT_SACK_PERMITTED, 0) => out.sack_permitted = true,
            (OPT_SACK, n) if n % 8 == 0 => {
                out.sack_blocks = (n / 8) as u8;
                out.first_sack = be32(body, 0).zip(be32(body, 4));
                out.first_sack_in_second = out.first_sack.is_some_and(|f| in_second_block(body, f));
            }
            (OPT_TIMESTAMP, 8) => out.timestamp = be32(body, 0).zip(be32(body, 4)),
            _ => {}
        }
        opts = opts.get(len..).unwrap_or_default();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(data_offset_words: u8, flags: u8, options: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; 20];
        h[0..2].copy_from_slice(&40000u16.to_be_bytes());
        h[2..4].copy_from_slice(&9000u16.to_be_bytes());
        h[4..8].copy_from_slice(&0xffff_fff0u32.to_be_bytes());
        h[12] = data_offset_words << 4;
        h[13] = flags;
        h[14..16].copy_from_slice(&64240u16.to_be_bytes());
        h.extend_from_slice(options);
        h
    }

    #[test]
    fn test_syn_options_linux_default_set() {
        // What Linux sends in a SYN: MSS, SACK-permitted, timestamps, NOP, window scale.
        let opts = [2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7];
        let h = parse(&header(10, flags::SYN, &opts)).unwrap();
        assert_eq!(h.seq, 0xffff_fff0);
        assert_eq!(h.options.mss, Some(1460));
        assert!(h.options.sack_permitted);
        assert_eq!(h.options.timestamp, Some((1, 0)));
        assert_eq!(h.options.window_scale, Some(7));
        assert_eq!(h.header_len, 40);
    }

    #[test]
    fn test_sack_blocks_counted() {
        let mut opts = vec![1, 1, 5, 18];
        opts.extend_from_slice(&[0; 16]);
        assert_eq!(parse_options(&opts).sack_blocks, 2);
    }

    #[test]
    fn test_first_sack_block_of_an_ack_is_read() {
        let mut opts = vec![1, 1, 5, 10];
        opts.extend_from_slice(&7_886_921u32.to_be_bytes());
        opts.extend_from_slice(&7_936_561u32.to_be_bytes());
        let h = parse(&header(8, flags::ACK, &opts)).expect("a header");
        assert_eq!(h.options.first_sack, Some((7_886_921, 7_936_561)));
        assert_eq!(h.options.mss, None);
    }

    #[test]
    fn test_first_sack_block_inside_the_second_is_a_dsack_above_the_ack() {
        let block = |l: u32, r: u32| [l.to_be_bytes(), r.to_be_bytes()].concat();
        let mut opts = vec![1, 1, 5, 18];
        opts.extend(block(3000, 4000));
        opts.extend(block(2000, 5000));
        let h = parse(&header(10, flags::ACK, &opts)).expect("a header");
        assert_eq!(h.options.first_sack, Some((3000, 4000)));
        assert!(h.options.first_sack_in_second);
        let mut opts = vec![1, 1, 5, 18];
        opts.extend(block(6000, 7000));
        opts.extend(block(2000, 5000));
        assert!(!parse(&header(10, flags::ACK, &opts)).expect("a header").options.first_sack_in_second, "disjoint blocks");
    }

    #[test]
    fn test_options_of_non_syn_segments_are_read_for_a_leading_timestamp_only() {
        let opts = [1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7];
        assert_eq!(parse(&header(8, flags::ACK, &opts)).unwrap().options, TcpOptions { timestamp: Some((9, 7)), ..TcpOptions::default() });
        let mss_first = [2, 4, 0x05, 0xb4, 1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7];
        assert_eq!(parse(&header(9, flags::ACK, &mss_first)).unwrap().options, TcpOptions::default());
        assert_eq!(parse(&header(8, flags::SYN | flags::ACK, &opts)).unwrap().options.timestamp, Some((9, 7)));
    }

    #[test]
    fn test_options_cut_by_snaplen_still_parse_fixed_header() {
        let opts = [2, 4, 0x05, 0xb4, 4, 2, 8, 10];
        let h = parse(&header(10, flags::SYN, &opts)).unwrap();
        assert_eq!(h.options.mss, Some(1460));
        assert_eq!(h.options.timestamp, None);
    }

    #[test]
    fn test_option_length_zero_or_past_end_stops_parsing() {
        assert_eq!(parse(&header(6, flags::SYN, &[2, 0, 0, 0])).unwrap().options, TcpOptions::default());
        assert_eq!(parse(&header(6, flags::SYN, &[8, 200, 0, 0])).unwrap().options, TcpOptions::default());
    }

    #[test]
    fn test_short_or_lying_header() {
        assert_eq!(parse(&[0; 19]), Err(Skip::TcpHeaderCut));
        assert_eq!(parse(&header(4, 0, &[])), Err(Skip::MalformedTcp));
        // Data offset 15 words with only 20 bytes captured: fixed header still parses.
        assert_eq!(parse(&header(15, 0, &[])).unwrap().header_len, 60);
    }

    use proptest::prelude::*;

    /// One option as a sender writes it.
    #[derive(Clone, Debug)]
    enum Opt {
        Nop,
        Mss(u16),
        WindowScale(u8),
        SackPermitted,
        Timestamp(u32, u32),
        Sack(u8),
        Unknown(u8, Vec<u8>),
    }

    fn encode(opts: &[Opt]) -> Vec<u8> {
        let mut out = Vec::new();
        for o in opts {
            match o {
                Opt::Nop => out.push(OPT_NOP),
                Opt::Mss(v) => out.extend([OPT_MSS, 4, (v >> 8) as u8, *v as u8]),
                Opt::WindowScale(v) => out.extend([OPT_WINDOW_SCALE, 3, *v]),
                Opt::SackPermitted => out.extend([OPT_SACK_PERMITTED, 2]),
                Opt::Timestamp(a, b) => {
                    out.extend([OPT_TIMESTAMP, 10]);
                    out.extend(a.to_be_bytes());
                    out.extend(b.to_be_bytes());
                }
                Opt::Sack(n) => {
                    out.extend([OPT_SACK, 2 + 8 * n]);
                    out.extend(std::iter::repeat_n(0, 8 * usize::from(*n)));
                }
                Opt::Unknown(kind, body) => {
                    out.extend([*kind, 2 + body.len() as u8]);
                    out.extend(body);
                }
            }
        }
        out
    }

    fn option() -> impl Strategy<Value = Opt> {
        prop_oneof![
            Just(Opt::Nop),
            any::<u16>().prop_map(Opt::Mss),
            any::<u8>().prop_map(Opt::WindowScale),
            Just(Opt::SackPermitted),
            (any::<u32>(), any::<u32>()).prop_map(|(a, b)| Opt::Timestamp(a, b)),
            (1u8..=4).prop_map(Opt::Sack),
            (30u8..=253, prop::collection::vec(any::<u8>(), 0..10)).prop_map(|(k, b)| Opt::Unknown(k, b)),
        ]
    }

    proptest! {
        #[test]
        fn prop_well_formed_options_are_read_back(opts in prop::collection::vec(option(), 0..8)) {
            let parsed = parse_options(&encode(&opts));
            // The last of each kind wins, as it does for a receiver that overwrites.
            let mut expected = TcpOptions::default();
            for o in &opts {
                match o {
                    Opt::Mss(v) => expected.mss = Some(*v),
                    Opt::WindowScale(v) => expected.window_scale = Some(*v),
                    Opt::SackPermitted => expected.sack_permitted = true,
                    Opt::Timestamp(a, b) => expected.timestamp = Some((*a, *b)),
                    Opt::Sack(n) => {
                        expected.sack_blocks = *n;
                        expected.first_sack = Some((0, 0));
                        // Zeroed blocks: a second one holds the first.
                        expected.first_sack_in_second = *n >= 2;
                    }
                    Opt::Nop | Opt::Unknown(..) => {}
                }
            }
            prop_assert_eq!(parsed, expected);
        }

        #[test]
        fn prop_any_bytes_parse_without_panic_and_any_prefix_too(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            for end in 0..=bytes.len() {
                let _ = parse_options(&bytes[..end]);
                let _ = parse(&bytes[..end]);
            }
        }
    }
}
