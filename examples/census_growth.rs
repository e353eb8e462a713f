//! What the core holds as a capture is read, every N packets: resident memory (anonymous and
//! file-backed), flows in the hot table, tombstones, and the census's parts by their
//! serialised size (what grows with the capture and what stops at its cap). `-` reads
//! standard input.
//! `bench/generate.py --packets 50000000 --out - | cargo run --release --example census_growth -- - 5000000`
use _core::census::Census;
use _core::decode::decode;
use _core::flow::{FrameRef, Tracker, TrackerOptions};
use _core::reader::CaptureReader;

/// A line of /proc/self/status, in MiB (`VmRSS`, `RssAnon`, `RssFile`).
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok());
    kib.unwrap_or(0.0) / 1024.0
}

fn serialised_mib<T: serde::Serialize>(part: &T) -> f64 {
    postcard::to_stdvec(part).map_or(0.0, |bytes| bytes.len() as f64 / 1_048_576.0)
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: census_growth FILE|- [EVERY]");
    let every: u64 = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(5_000_000);
    let mut reader = CaptureReader::open(&path).expect("open");
    let mut tracker: Tracker<Census> = Tracker::new(TrackerOptions { keep_events: false, mergeable: false, keep_connections: false, ..Default::default() });
    println!("{:>10} {:>8} {:>8} {:>8} {:>7} {:>10} | serialised MiB: {:>7} {:>7} {:>8} {:>8}", "packets", "RSS MiB", "anon", "file", "live", "tombstones", "servers", "digest", "timeline", "give-ups");
    let mut n = 0u64;
    reader.for_each_packet(|p| {
        let Ok(segment) = decode(p.linktype, p.data) else { return };
        tracker.on_segment(&segment, FrameRef { file: 0, frame: p.frame }, p.time_ns);
        n += 1;
        if n.is_multiple_of(every) {
            let census = tracker.census();
            println!(
                "{n:>10} {:>8.1} {:>8.1} {:>8.1} {:>7} {:>10} | {:>23.2} {:>7.2} {:>8.2} {:>8.3}",
                status_mib("VmRSS"),
                status_mib("RssAnon"),
                status_mib("RssFile"),
                tracker.live_connections(),
                tracker.tombstones(),
                serialised_mib(&census.servers),
                serialised_mib(&census.digest),
                serialised_mib(&census.timeline),
                serialised_mib(&census.give_ups),
            );
        }
    });
}
