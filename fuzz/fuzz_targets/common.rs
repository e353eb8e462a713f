//! The whole path on one capture held in memory: read, decode, track, classify, write the JSON
//! document, and every per-server aggregate the Python layer asks for.

use _core::analysis::{analyze_readers, Analysis, AnalyzeOptions};
use _core::flow::TrackerOptions;
use _core::output::json;
use _core::reader::CaptureReader;

fn analyse(bytes: &[u8], tracker: TrackerOptions) -> Option<Analysis> {
    let opened = CaptureReader::from_bytes("fuzz", bytes.to_vec()).map(|r| ("fuzz".to_string(), r));
    analyze_readers([opened], AnalyzeOptions { tracker }, &mut |_| {}).ok()
}

pub fn analyse_bytes(bytes: Vec<u8>) {
    for keep_connections in [true, false] {
        let tracker = TrackerOptions { keep_connections, keep_events: keep_connections, mergeable: keep_connections, ..TrackerOptions::default() };
        let Some(mut analysis) = analyse(&bytes, tracker) else { return };
        if keep_connections {
            // The same capture twice in a row, as a ring buffer's files are merged.
            if let Some(later) = analyse(&bytes, tracker) {
                analysis = analysis.merge(later).expect("both analyses are mergeable");
            }
        }
        let _ = analysis.summary();
        let _ = analysis.warnings();
        let _ = analysis.port_pressure();
        for stats in analysis.servers() {
            let _ = stats.waiting_at(stats.first_ns);
        }
        let end_ns = analysis.end_ns();
        for c in &analysis.connections {
            let _ = json::connection_json(c, end_ns);
        }
        let _ = json::write_document(&analysis, &mut std::io::sink(), false, None);
    }
}
