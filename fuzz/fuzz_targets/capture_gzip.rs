//! The input gzip-compressed before it is read: mutations act on the inflated capture while
//! every byte still goes through the gzip path (a fuzzer mutating gzip bytes mostly breaks
//! the CRC).
#![no_main]

use std::io::Write;

use flate2::write::GzEncoder;
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    if gz.write_all(data).is_err() {
        return;
    }
    let Ok(mut bytes) = gz.finish() else { return };
    // The last input byte, when odd, cuts the gzip stream short too.
    if data.last().is_some_and(|b| b & 1 == 1) {
        let keep = bytes.len() - usize::from(data.len() as u8) % bytes.len().max(1);
        bytes.truncate(keep.max(2));
    }
    common::analyse_bytes(bytes);
});
