//! Runs the full analysis once without events (for profiling). `cargo run --release --example track_only -- FILE`
fn main() {
    let path = std::env::args().nth(1).expect("usage: track_only FILE");
    let options = _core::analysis::AnalyzeOptions { tracker: _core::flow::TrackerOptions { keep_events: false, mergeable: false, keep_connections: false, max_live: 0, ..Default::default() } };
    let a = _core::analysis::analyze(&[path], options).expect("analyze");
    println!("{}", a.summary().connections.connections);
}
