//! One frame through the decoders: the first byte picks the link type, the rest is the frame.
#![no_main]

use _core::decode::{self, link};
use libfuzzer_sys::fuzz_target;

const LINKTYPES: [u32; 10] = [
    link::LINKTYPE_NULL,
    link::LINKTYPE_ETHERNET,
    link::LINKTYPE_RAW_OPENBSD,
    link::LINKTYPE_RAW_BSDOS,
    link::LINKTYPE_RAW,
    link::LINKTYPE_LOOP,
    link::LINKTYPE_LINUX_SLL,
    link::LINKTYPE_IPV4,
    link::LINKTYPE_IPV6,
    link::LINKTYPE_LINUX_SLL2,
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, frame)) = data.split_first() else { return };
    let linktype = LINKTYPES[usize::from(pick) % LINKTYPES.len()];
    if let Ok(segment) = decode::decode(linktype, frame) {
        // What the decoder promises: a payload no longer than an IP length field can say
        // (an IPv6 jumbogram's length is what was captured).
        assert!(segment.payload_len as usize <= frame.len().max(65_535), "{segment:?}");
    }
    let _ = decode::tcp::parse_options(frame);
    // ICMP errors and the segment they quote (src/decode/icmp.rs).
    let _ = decode::icmp::decode(linktype, frame);
});
