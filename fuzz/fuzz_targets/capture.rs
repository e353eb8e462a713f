//! Raw bytes as a capture file: pcap, pcapng or gzip, whichever the magic says.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    common::analyse_bytes(data.to_vec());
});
