//! The packet comments `pcapq annotate` writes (docs/wireshark.md): each labelled packet's
//! words (`labels`), and on the first packet of each connection with a problem, the
//! connection's outcome, symptoms and the finding it belongs to.
//!
//! A thread of their own labels the connections, in order, while the capture is copied. It
//! hands the comments over in batches, sorted by packet, each complete up to a packet: the
//! lowest that a connection not yet labelled comments (its first packet, its events' and its
//! ICMP errors' packets). The copy asks for the comments in frame order, and waits for the
//! batch it needs.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io;
use std::ops::Range;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::{Scope, ScopedJoinHandle};

use rustc_hash::FxHashMap;

use crate::detect::{self, Outcome, Symptoms};
use crate::flow::{Connection, FrameRef};
use crate::output::labels::write_labels;

/// Every comment begins so: `frame.comment contains "pcapq: "` shows them all in Wireshark.
pub const PREFIX: &str = "pcapq: ";

/// Connections labelled between two batches.
const CONNECTIONS_PER_BATCH: usize = 1024;
/// Batches labelled and not yet read, at most: the labelling thread waits beyond that.
const BATCHES_AHEAD: usize = 8;

/// The comments of every packet before `until` (every packet when `None`) not in an earlier
/// batch, sorted by packet, their text one after the other.
#[derive(Debug, Default)]
struct Batch {
    until: Option<FrameRef>,
    comments: Vec<Comment>,
    text: String,
}

/// A packet's comment: `text[span]` of its batch.
#[derive(Clone, Debug)]
struct Comment {
    at: FrameRef,
    span: Range<usize>,
}

impl Batch {
    /// Whether every comment of packet `at` is in this batch or an earlier one.
    fn covers(&self, at: FrameRef) -> bool {
        self.until.is_none_or(|until| at < until)
    }
}

/// The comments of the connections being labelled, for the copy (`packet_comments`).
pub struct PacketComments<'scope> {
    batches: Receiver<Batch>,
    /// Batches read, given back to be filled again.
    read: Sender<Batch>,
    /// The batch being read, and the index of its next comment.
    reading: RefCell<(Batch, usize)>,
    labelling: ScopedJoinHandle<'scope, u64>,
}

/// Starts labelling `connections`, in order, on a thread of `scope`. `findings`: (title,
/// connection ids) of each finding, in the order the report lists them; a connection in
/// several is named by the first.
///
/// A packet with two parts (data with a FIN) carries both, "; " between them; the
/// connection's header, when it is its first packet, comes first. A header replaces what
/// earlier connections put on its packet.
///
/// Errors: the thread could not be started.
pub fn packet_comments<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>, connections: &'env [&'env Connection], end_ns: i64, findings: &'env [(String, Vec<u64>)],
) -> io::Result<PacketComments<'scope>> {
    let (to_copy, batches) = mpsc::sync_channel(BATCHES_AHEAD);
    let (read, to_refill) = mpsc::channel();
    let labelling = std::thread::Builder::new().name("pcapq-labels".to_string()).spawn_scoped(scope, move || {
        let mut finding_of: FxHashMap<u64, &str> = FxHashMap::default();
        for (title, ids) in findings {
            for &id in ids {
                finding_of.entry(id).or_insert(title.as_str());
            }
        }
        label(connections, end_ns, &finding_of, &to_copy, &to_refill)
    })?;
    // Covers no packet: the first question fetches the first batch.
    let before_all = Batch { until: Some(FrameRef::default()), ..Batch::default() };
    Ok(PacketComments { batches, read, reading: RefCell::new((before_all, 0)), labelling })
}

impl PacketComments<'_> {
    /// Appends the comment of packet `frame` of file `file` to `out`, if it has one. Packets
    /// are asked in frame order: a packet before one asked already gets none.
    pub fn write_comment(&self, file: u32, frame: u64, out: &mut String) {
        let at = FrameRef { file, frame };
        let mut reading = self.reading.borrow_mut();
        let (batch, next) = &mut *reading;
        while !batch.covers(at) {
            // No batch and none to come: there were no connections, or the labelling thread
            // panicked (`finish` says so).
            let Ok(following) = self.batches.recv() else { return };
            let done = std::mem::replace(batch, following);
            *next = 0;
            // Unused once the labelling is over.
            let _ = self.read.send(done);
        }
        while batch.comments.get(*next).is_some_and(|c| c.at < at) {
            *next += 1;
        }
        if let Some(comment) = batch.comments.get(*next).filter(|c| c.at == at) {
            out.push_str(batch.text.get(comment.span.clone()).unwrap_or_default());
            *next += 1;
        }
    }

    /// Stops the labelling if it is not over, and waits for its thread: the number of
    /// connections whose packets got comments.
    pub fn finish(self) -> u64 {
        let PacketComments { batches, labelling, .. } = self;
        // A labelling thread waiting to hand a batch over stops.
        drop(batches);
        labelling.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

/// A part of a packet's comment, as one connection gives it (its header, or one label),
/// beginning with `PREFIX`: the packet and where the text is.
#[derive(Clone, Copy, Debug)]
struct Part {
    at: FrameRef,
    start: usize,
    len: usize,
    header: bool,
}

/// The labelling thread: labels `connections` in order and sends the batches to `to_copy`,
/// filling those `to_refill` gives back. Returns the number of connections that got a part.
fn label(
    connections: &[&Connection], end_ns: i64, finding_of: &FxHashMap<u64, &str>, to_copy: &SyncSender<Batch>,
    to_refill: &Receiver<Batch>,
) -> u64 {
    // The lowest packet commented by any connection from each one on.
    let mut lowest_from: Vec<Option<FrameRef>> = vec![None; connections.len() + 1];
    for (index, c) in connections.iter().enumerate().rev() {
        let later = lowest_from.get(index + 1).copied().flatten();
        let lowest = lowest_commented(c);
        if let Some(slot) = lowest_from.get_mut(index) {
            *slot = Some(later.map_or(lowest, |later| later.min(lowest)));
        }
    }
    let mut labeller = Labeller::default();
    let mut labelled = 0u64;
    for (index, chunk) in connections.chunks(CONNECTIONS_PER_BATCH).enumerate() {
        for c in chunk {
            labelled += u64::from(labeller.add_connection(c, end_ns, finding_of.get(&c.id).copied()));
        }
        let until = lowest_from.get((index + 1) * CONNECTIONS_PER_BATCH).copied().flatten();
        let mut batch = to_refill.try_recv().unwrap_or_default();
        labeller.release(until, &mut batch);
        if to_copy.send(batch).is_err() {
            // The copy is over.
            break;
        }
    }
    labelled
}

/// The lowest packet `c` can comment: its first packet, its events', its ICMP errors'.
fn lowest_commented(c: &Connection) -> FrameRef {
    let events = c.events.iter().map(|e| e.at);
    let icmp = c.icmp_answers().iter().map(|a| a.at);
    events.chain(icmp).fold(c.first, FrameRef::min)
}

/// The parts labelled and not yet handed over, their text one after the other.
#[derive(Default)]
struct Labeller {
    text: String,
    pending: Vec<Part>,
    /// Scratch space of `release`, kept for its capacity.
    ready: Vec<Part>,
    spare_text: String,
}

impl Labeller {
    /// The header, then the labels of `c`; whether `c` gave a part.
    fn add_connection(&mut self, c: &Connection, end_ns: i64, finding: Option<&str>) -> bool {
        let Labeller { text, pending, .. } = self;
        let before = pending.len();
        let verdict = detect::judge(c, end_ns);
        if verdict.outcome.is_failure() || !verdict.symptoms.is_empty() {
            let start = text.len();
            write_header(text, c, verdict.outcome, verdict.symptoms, finding);
            pending.push(Part { at: c.first, start, len: text.len() - start, header: true });
        }
        write_labels(c, &verdict, text, PREFIX, |at, span| {
            pending.push(Part { at, start: span.start, len: span.len(), header: false });
        });
        pending.len() > before
    }

    /// Moves the parts of the packets before `until` (every packet when `None`) into `batch`,
    /// one comment per packet, sorted by packet; keeps the text of the others only.
    fn release(&mut self, until: Option<FrameRef>, batch: &mut Batch) {
        batch.until = until;
        batch.comments.clear();
        batch.text.clear();
        let covered = |p: &Part| until.is_none_or(|until| p.at < until);
        self.ready.clear();
        self.ready.extend(self.pending.iter().filter(|p| covered(p)));
        self.pending.retain(|p| !covered(p));
        // Stable: the parts of one packet stay in connection order.
        self.ready.sort_by_key(|p| p.at);

        let text = &self.text;
        let text_of = |p: &Part| text.get(p.start..p.start + p.len).unwrap_or_default();
        let mut index = 0;
        while let Some(first) = self.ready.get(index) {
            let at = first.at;
            let same_packet = self.ready.get(index..).unwrap_or_default().iter().take_while(|p| p.at == at).count();
            let group = self.ready.get(index..index + same_packet).unwrap_or_default();
            index += same_packet;
            // From the last header on.
            let kept = group.get(group.iter().rposition(|p| p.header).unwrap_or(0)..).unwrap_or_default();
            let start = batch.text.len();
            for (n, p) in kept.iter().enumerate() {
                if n == 0 {
                    batch.text.push_str(text_of(p));
                } else {
                    batch.text.push_str("; ");
                    batch.text.push_str(text_of(p).get(PREFIX.len()..).unwrap_or_default());
                }
            }
            batch.comments.push(Comment { at, span: start..batch.text.len() });
        }

        // The text of the parts still pending, moved to the start of a string.
        let mut kept_text = std::mem::take(&mut self.spare_text);
        kept_text.clear();
        for p in &mut self.pending {
            let start = kept_text.len();
            kept_text.push_str(self.text.get(p.start..p.start + p.len).unwrap_or_default());
            p.start = start;
        }
        self.spare_text = std::mem::replace(&mut self.text, kept_text);
    }
}

/// The first line of a problem connection's first packet: "pcapq: connection 7, 10.0.0.1:5000
/// → 10.0.0.2:9000: timed out (syn retransmitted); Accept queue overflow on 10.0.0.2:9000".
fn write_header(out: &mut String, c: &Connection, outcome: Outcome, symptoms: Symptoms, finding: Option<&str>) {
    let words = |slug: &str| slug.replace('_', " ");
    let _ = write!(out, "{PREFIX}connection {}, {} → {}: {}", c.id, c.client, c.server, words(outcome.slug()));
    if !symptoms.is_empty() {
        let listed: Vec<String> = symptoms.iter().map(|s| words(s.slug())).collect();
        let _ = write!(out, " ({})", listed.join(", "));
    }
    if let Some(title) = finding {
        let _ = write!(out, "; {title}");
    }
}

#[cfg(test)]
mod tests {
    //! The comments of many connections built by the tracker, against those of one
    //! connection at a time.

    use super::*;
    use crate::flow::wire::*;
    use crate::output::labels::connection_labels;

    /// Each packet's comment as `packet_comments` gives it, asking every frame in order.
    fn streamed(connections: &[&Connection], frames: u64, end_ns: i64, findings: &[(String, Vec<u64>)]) -> Vec<(u64, String)> {
        std::thread::scope(|scope| {
            let comments = packet_comments(scope, connections, end_ns, findings).unwrap();
            let mut out = Vec::new();
            for frame in 1..=frames {
                let mut comment = String::new();
                comments.write_comment(0, frame, &mut comment);
                if !comment.is_empty() {
                    out.push((frame, comment));
                }
            }
            comments.finish();
            out
        })
    }

    /// The same, one connection after the other into a map: the header first on its packet
    /// (replacing what was there), each label after "; ".
    fn one_at_a_time(connections: &[&Connection], end_ns: i64, findings: &[(String, Vec<u64>)]) -> Vec<(u64, String)> {
        let mut by_frame: std::collections::BTreeMap<u64, String> = Default::default();
        for c in connections {
            let (outcome, symptoms) = detect::classify(c, end_ns);
            if outcome.is_failure() || !symptoms.is_empty() {
                let finding = findings.iter().find(|(_, ids)| ids.contains(&c.id)).map(|(title, _)| title.as_str());
                let mut header = String::new();
                write_header(&mut header, c, outcome, symptoms, finding);
                by_frame.insert(c.first.frame, header);
            }
            for label in connection_labels(c, end_ns) {
                let entry = by_frame.entry(label.frame).or_default();
                entry.push_str(if entry.is_empty() { PREFIX } else { "; " });
                entry.push_str(&label.text);
            }
        }
        by_frame.into_iter().collect()
    }

    #[test]
    fn test_comments_of_many_connections_are_those_of_each_in_turn() {
        let mut w = Wire::new();
        let count = 3 * CONNECTIONS_PER_BATCH as u16 + 100;
        let client_port = |i: u16| 10_000 + i;
        // Every connection opens, then every one is answered: their packets interleave.
        for i in 0..count {
            w.client.port = client_port(i);
            w.send(i64::from(i), C, SYN, CISN, 0, 0);
        }
        for i in 0..count {
            w.client.port = client_port(i);
            let ms = i64::from(count + i);
            if i % 7 == 3 {
                // No answer: the SYN is sent again, and the connection times out.
                w.send(ms + 1000, C, SYN, CISN, 0, 0);
                continue;
            }
            w.send(ms, S, SYN | ACK, SISN, CISN + 1, 0);
            w.send(ms, C, ACK, CISN + 1, SISN + 1, 0);
            w.send(ms, C, PSH | ACK, CISN + 1, SISN + 1, 100);
            if i != 0 {
                w.send(ms + 1, S, PSH | ACK | FIN, SISN + 1, CISN + 101, 50);
            }
        }
        // The first connection is answered last: its labels wait through every batch.
        w.client.port = client_port(0);
        w.send(5000, S, PSH | ACK, SISN + 1, CISN + 101, 50);

        let end_ns = w.last_ms * MS;
        let in_order: Vec<&Connection> = w.conns().iter().collect();
        assert_eq!(in_order.len(), usize::from(count));
        let findings = vec![("SYNs dropped".to_string(), vec![in_order[3].id, in_order[10].id])];
        let expected = one_at_a_time(&in_order, end_ns, &findings);
        assert!(expected.iter().any(|(_, comment)| comment.starts_with("pcapq: connection ") && comment.contains("; SYNs dropped")));
        assert!(expected.iter().any(|(_, comment)| comment.contains("; FIN")));
        assert_eq!(streamed(&in_order, w.frames, end_ns, &findings), expected);

        // Connections in another order than their first packets': the same comments.
        let reversed: Vec<&Connection> = in_order.iter().rev().copied().collect();
        assert_eq!(streamed(&reversed, w.frames, end_ns, &findings), one_at_a_time(&reversed, end_ns, &findings));
        assert_eq!(streamed(&[], w.frames, end_ns, &[]), []);
    }
}
