//! Times each stage of the core on one capture: read, read+decode, read+decode+track.
//! `cargo run --release --example stages -- FILE`

use std::time::Instant;

use _core::analysis::{analyze, AnalyzeOptions};
use _core::decode::decode;
use _core::flow::TrackerOptions;
use _core::reader::CaptureReader;

fn main() {
    let path = std::env::args().nth(1).expect("usage: stages FILE");
    let t = Instant::now();
    let mut reader = CaptureReader::open(&path).expect("open");
    let mut n = 0u64;
    reader.for_each_packet(|p| n += p.data.len() as u64);
    report("read", n, t, &reader);

    let t = Instant::now();
    let mut reader = CaptureReader::open(&path).expect("open");
    let mut tcp = 0u64;
    reader.for_each_packet(|p| tcp += u64::from(decode(p.linktype, p.data).is_ok()));
    report("read+decode", tcp, t, &reader);

    for keep_events in [false, true] {
        let t = Instant::now();
        let options = AnalyzeOptions { tracker: TrackerOptions { keep_events, mergeable: false, keep_connections: keep_events, max_live: 0, ..Default::default() } };
        let a = analyze(std::slice::from_ref(&path), options).expect("analyze");
        let packets = a.files[0].packets;
        let secs = t.elapsed().as_secs_f64();
        let connections = a.summary().connections.connections;
        println!("analyze keep_events={keep_events:<5} {secs:.3} s  {:.2} Mpps  ({connections} connections)", packets as f64 / secs / 1e6);
    }
}

fn report(stage: &str, n: u64, t: Instant, reader: &CaptureReader) {
    let secs = t.elapsed().as_secs_f64();
    println!("{stage:<26} {secs:.3} s  {:.2} Mpps  ({n})", reader.info.records as f64 / secs / 1e6);
}
