//! The packet comments `pcapq annotate` writes (docs/wireshark.md): each labelled packet's
//! words (`labels`), and on the first packet of each connection with a problem, the
//! connection's outcome, symptoms and the finding it belongs to.

use rustc_hash::FxHashMap;

use crate::detect;
use crate::flow::Connection;
use crate::output::labels::connection_labels;

/// Every comment begins so: `frame.comment contains "pcapq: "` shows them all in Wireshark.
pub const PREFIX: &str = "pcapq: ";

/// The comments of one capture point's packets, by (file index, frame number).
#[derive(Debug, Default)]
pub struct PacketComments {
    pub by_frame: FxHashMap<(u32, u64), String>,
    /// Connections whose packets got comments.
    pub connections: u64,
}

impl PacketComments {
    pub fn get(&self, file: u32, frame: u64) -> Option<&str> {
        self.by_frame.get(&(file, frame)).map(String::as_str)
    }
}

/// The first line of a problem connection's first packet: "pcapq: connection 7, 10.0.0.1:5000
/// → 10.0.0.2:9000: timed out (syn retransmitted); Accept queue overflow on 10.0.0.2:9000".
fn connection_header(c: &Connection, end_ns: i64, finding: Option<&str>) -> Option<String> {
    let (outcome, symptoms) = detect::classify(c, end_ns);
    if !outcome.is_failure() && symptoms.is_empty() {
        return None;
    }
    let words = |slug: &str| slug.replace('_', " ");
    let mut text = format!("{PREFIX}connection {}, {} → {}: {}", c.id, c.client, c.server, words(outcome.slug()));
    if !symptoms.is_empty() {
        let listed: Vec<String> = symptoms.iter().map(|s| words(s.slug())).collect();
        text.push_str(&format!(" ({})", listed.join(", ")));
    }
    if let Some(title) = finding {
        text.push_str(&format!("; {title}"));
    }
    Some(text)
}

/// The comments of `connections`. `findings`: (title, connection ids) of each finding, in the
/// order the report lists them; a connection in several is named by the first.
pub fn packet_comments<'a>(
    connections: impl Iterator<Item = &'a Connection>, end_ns: i64, findings: &[(String, Vec<u64>)],
) -> PacketComments {
    let mut finding_of: FxHashMap<u64, &str> = FxHashMap::default();
    for (title, ids) in findings {
        for &id in ids {
            finding_of.entry(id).or_insert(title.as_str());
        }
    }
    let mut out = PacketComments::default();
    for c in connections {
        let mut any = false;
        if let Some(header) = connection_header(c, end_ns, finding_of.get(&c.id).copied()) {
            out.by_frame.insert((c.first.file, c.first.frame), header);
            any = true;
        }
        for label in connection_labels(c, end_ns) {
            let entry = out.by_frame.entry((label.file, label.frame)).or_default();
            // A packet with two events (data with a FIN) carries both; the connection's
            // header, when it is its first packet, comes first.
            entry.push_str(if entry.is_empty() { PREFIX } else { "; " });
            entry.push_str(&label.text);
            any = true;
        }
        out.connections += u64::from(any);
    }
    out
}
