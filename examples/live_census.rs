//! Prints how many flows are in the hot table, and their states, as a capture is read.
//! `cargo run --release --example live_census -- FILE`
use _core::census::Census;
use _core::decode::decode;
use _core::flow::{FrameRef, Tracker, TrackerOptions};
use _core::reader::CaptureReader;

fn main() {
    let path = std::env::args().nth(1).expect("usage: live_census FILE");
    let mut reader = CaptureReader::open(&path).expect("open");
    let mut tracker: Tracker<Census> = Tracker::new(TrackerOptions { keep_events: false, mergeable: false, keep_connections: false, max_live: 0, ..Default::default() });
    let mut n = 0u64;
    reader.for_each_packet(|p| {
        if let Ok(seg) = decode(p.linktype, p.data) {
            tracker.on_segment(&seg, FrameRef { file: 0, frame: p.frame }, p.time_ns);
            n += 1;
            if n.is_multiple_of(200_000) {
                println!("{n:>9} packets: {} live flows, states {:?}", tracker.live_connections(), tracker.live_states());
            }
        }
    });
}
