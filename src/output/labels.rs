//! The words pcapq writes on each packet it labelled: what the packet means, in plain words,
//! with each retransmission's wait set against the kernel's schedule (docs/diagnosis.md).
//! `pcapq timeline` shows them as its notes; `pcapq annotate` writes them as packet comments.
//!
//! A label reads the whole connection (its verdict, its series, the events around it), so the
//! labels of a connection are written together, and only when asked for. Numbers and times are
//! those of the JSON document (docs/json.md): times are its epoch seconds, rounded to the
//! microsecond, so a time between two packets reads as the difference of the two shown.

use rustc_hash::FxHashMap;

use super::json::{epoch, relative_seq_ack, seconds};
use crate::detect::schedule::Schedule;
use crate::detect::{self, Outcome, Symptom, Symptoms};
use crate::flow::icmp::IcmpAnswer;
use crate::flow::{Connection, Detail, Event, EventKind, FrameRef, PacketRole, Side};

/// The words on one packet of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub file: u32,
    pub frame: u64,
    pub text: String,
}

/// The labels of connection `c`, for a capture that ends at `end_ns`: one per event, in event
/// order, then one per ICMP error that answered one of its packets, in capture order. A packet
/// with two events (data with a FIN) has two labels.
pub fn connection_labels(c: &Connection, end_ns: i64) -> Vec<Label> {
    let verdict = detect::judge(c, end_ns);
    let mut writer = EventWriter::new(c, verdict.symptoms, verdict.outcome, &verdict.series);
    let mut labels = Vec::with_capacity(c.events.len() + c.icmp_answers().len());
    let mut previous: Option<&Event> = None;
    for (index, e) in c.events.iter().enumerate() {
        labels.push(Label { file: e.at.file, frame: e.at.frame, text: writer.note(index, e, previous) });
        previous = Some(e);
    }
    for a in c.icmp_answers() {
        labels.push(Label { file: a.at.file, frame: a.at.frame, text: icmp_note(a) });
    }
    labels
}

/// Seconds for a sentence: 0.81 s, 63.1 s, 4.2 ms, 0.042 ms.
fn seconds_text(seconds: f64) -> String {
    if seconds < 0.001 {
        format!("{:.3} ms", seconds * 1000.0)
    } else if seconds < 0.01 {
        format!("{:.1} ms", seconds * 1000.0)
    } else if seconds < 10.0 {
        format!("{seconds:.2} s")
    } else {
        format!("{seconds:.1} s")
    }
}

/// A count with thousands separators: 1,500.
fn with_commas(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

fn schedule_name(schedule: Schedule) -> &'static str {
    match schedule {
        Schedule::SynLinear => "the linear SYN schedule",
        Schedule::SynExponential => "the doubling SYN schedule",
        Schedule::SynLegacy => "the pre-3.1 SYN schedule",
        Schedule::Synack => "the SYN-ACK schedule",
        Schedule::DataRto(_) => "the RTO schedule",
    }
}

/// A packet an RST or an ICMP error answered, by its role, in words.
fn role_name(role: PacketRole) -> &'static str {
    match role {
        PacketRole::Syn => "SYN",
        PacketRole::Synack => "SYN-ACK",
        PacketRole::HandshakeAck => "handshake ACK",
        PacketRole::Ack => "ACK",
        PacketRole::Data => "data",
        PacketRole::Retransmit => "re-sent segment",
        PacketRole::Fin => "FIN",
        PacketRole::Rst => "RST",
    }
}

/// The frame number of a packet (a copy: `FrameRef` is packed, its fields cannot be borrowed).
fn frame_number(at: FrameRef) -> u64 {
    at.frame
}

/// Which send a SYN or SYN-ACK sent again is: "#3", or "again" when not numbered.
fn ordinal_send(attempt: Option<u32>) -> String {
    attempt.map_or_else(|| "again".to_string(), |n| format!("#{n}"))
}

/// A re-sent segment's attempt number ("?" when not numbered: the tracker numbers every re-send).
fn attempt_number(attempt: Option<u32>) -> String {
    attempt.map_or_else(|| "?".to_string(), |n| n.to_string())
}

/// The send number of a retransmission (2 = the first retransmission).
fn attempt(e: &Event) -> Option<u32> {
    match e.detail {
        Detail::Attempt { attempt, .. } => Some(attempt),
        _ => None,
    }
}

/// Seconds since the previous send of the same thing, for a retransmission.
fn since_previous(e: &Event) -> Option<f64> {
    match e.detail {
        Detail::Attempt { since_previous_ns, .. } => since_previous_ns.map(seconds),
        _ => None,
    }
}

/// A retransmission sent after the client's handshake ACK.
fn after_handshake_ack(e: &Event) -> bool {
    matches!(e.detail, Detail::Attempt { after_handshake_ack: true, .. })
}

/// What the detect module says of one send of a timed series.
#[derive(Clone, Copy)]
struct SendFacts {
    /// The interval the schedule predicts before this send, seconds.
    expected: Option<f64>,
    schedule: Schedule,
    /// Sent at once, not by a timer (a SYN-ACK answering a re-sent SYN, data re-sent smaller
    /// after a too-big ICMP error).
    triggered: bool,
}

/// Writes the note of each event of one connection, knowing the whole connection. The events
/// are given in order: duplicate ACKs are counted as they come, for the re-send they trigger.
struct EventWriter<'a> {
    c: &'a Connection,
    symptoms: Symptoms,
    outcome: Outcome,
    handshake_ack: Option<&'a Event>,
    first_synack: Option<&'a Event>,
    request: Option<&'a Event>,
    /// The first SYN-ACK sent again after the client's handshake ACK.
    spurious_synack: Option<&'a Event>,
    answer: Option<&'a Event>,
    /// The request's last copy before the answer, by event index: the one the server took.
    request_taken: Option<usize>,
    /// Duplicate ACKs each side received since it last sent data again (fast retransmit).
    dup_acks_seen: [u32; 2],
    /// Every send of a timed series, by where it is.
    sends: FxHashMap<FrameRef, SendFacts>,
}

impl<'a> EventWriter<'a> {
    fn new(c: &'a Connection, symptoms: Symptoms, outcome: Outcome, series: &[detect::Series]) -> EventWriter<'a> {
        let events = &c.events;
        // The first event of this kind (from this side).
        let first = |kind: EventKind, from: Option<Side>| {
            events.iter().find(|e| e.kind == kind && from.is_none_or(|side| e.from == side))
        };
        let answer = first(EventKind::DataFirst, Some(Side::Server));
        let request_taken = answer.and_then(|answer| {
            let answered = epoch(answer.time_ns);
            events.iter().rposition(|e| {
                e.kind == EventKind::DataRetransmit
                    && e.from == Side::Client
                    && relative_seq_ack(c, e).0 == Some(1)
                    && epoch(e.time_ns) <= answered
            })
        });
        let mut sends = FxHashMap::default();
        for s in series {
            for send in &s.sends {
                let facts = SendFacts { expected: send.expected_ns.map(seconds), schedule: s.schedule, triggered: send.triggered };
                sends.insert(send.at, facts);
            }
        }
        EventWriter {
            c,
            symptoms,
            outcome,
            handshake_ack: first(EventKind::HandshakeAck, None),
            first_synack: first(EventKind::Synack, None),
            request: first(EventKind::DataFirst, Some(Side::Client)),
            spurious_synack: events.iter().find(|e| e.kind == EventKind::SynackRetransmit && after_handshake_ack(e)),
            answer,
            request_taken,
            dup_acks_seen: [0, 0],
            sends,
        }
    }

    fn has(&self, symptom: Symptom) -> bool {
        self.symptoms.contains(symptom)
    }

    fn send_facts(&self, e: &Event) -> Option<SendFacts> {
        self.sends.get(&e.at).copied()
    }

    fn triggered(&self, e: &Event) -> bool {
        self.send_facts(e).is_some_and(|f| f.triggered)
    }

    /// "waited 1.00 s, the SYN-ACK schedule predicts 1.00 s"; empty without a wait.
    fn timing(&self, e: &Event) -> String {
        let Some(waited) = since_previous(e) else {
            return String::new();
        };
        let mut text = format!("waited {}", seconds_text(waited));
        if let Some(SendFacts { expected: Some(expected), schedule, .. }) = self.send_facts(e) {
            text += &format!(", {} predicts {}", schedule_name(schedule), seconds_text(expected));
        }
        text
    }

    /// What event number `index`, `e`, means; `previous` is the event before it.
    fn note(&mut self, index: usize, e: &Event, previous: Option<&Event>) -> String {
        let side = e.from.name();
        match e.kind {
            EventKind::Syn => "SYN: the client opens the connection".to_string(),
            EventKind::SynRetransmit => {
                format!("SYN {}, same ISN: no SYN-ACK came; {}", ordinal_send(attempt(e)), self.timing(e))
            }
            EventKind::Synack if self.has(Symptom::SyncookieSuspected) => {
                // A cookie SYN-ACK leaves no request socket behind (net/ipv4/syncookies.c).
                "SYN-ACK: the server's kernel answers, probably with a SYN cookie: it holds no half-open request".to_string()
            }
            EventKind::Synack => "SYN-ACK: the server's kernel answers and holds a half-open request".to_string(),
            EventKind::SynackRetransmit => {
                let ordinal = ordinal_send(attempt(e));
                match self.handshake_ack {
                    Some(ack) if after_handshake_ack(e) => format!(
                        "SYN-ACK {ordinal}, spurious: the client already ACKed in frame {}, so the server dropped that ACK (accept queue full)",
                        frame_number(ack.at)
                    ),
                    _ if self.triggered(e) => format!("SYN-ACK {ordinal}, sent at once in answer to the re-sent SYN"),
                    _ => format!("SYN-ACK {ordinal}: no ACK from the client; {}", self.timing(e)),
                }
            }
            EventKind::HandshakeAck => {
                let mut text = "ACK completing the handshake: established for the client, its connect() returns".to_string();
                if let Some(spurious) = self.spurious_synack {
                    text += &format!("; the server did not take it (SYN-ACK again in frame {})", frame_number(spurious.at));
                }
                text
            }
            EventKind::DataFirst if e.from == Side::Client => format!("request: the client's first data, {} bytes", e.len),
            EventKind::DataFirst => {
                let after = self
                    .request
                    .map(|request| format!(", {} after the request", seconds_text(epoch(e.time_ns) - epoch(request.time_ns))))
                    .unwrap_or_default();
                format!("answer: the server's first data, {} bytes{after}", e.len)
            }
            EventKind::DataRetransmit => self.data_retransmit_note(index, e),
            EventKind::FinRetransmit => {
                format!("FIN re-sent by the {side}, attempt {}: {}", attempt_number(attempt(e)), self.timing(e))
            }
            EventKind::DupAck => {
                // The duplicate ACK tells the data sender, the other side, that a segment is missing.
                self.dup_acks_seen[e.from.other().index()] += 1;
                let (count, of_frame) = match e.detail {
                    Detail::DupAck { count, of } => (count, frame_number(of).to_string()),
                    _ => (1, "?".to_string()),
                };
                let text = format!("duplicate ACK #{count} of frame {of_frame}");
                match previous {
                    Some(p) if matches!(p.kind, EventKind::SynackRetransmit | EventKind::SynRetransmit) && p.from != e.from => {
                        let resent = if e.from == Side::Client { "SYN-ACK" } else { "SYN" };
                        format!("{text}: the {side} answers the re-sent {resent}")
                    }
                    _ => format!("{text}: the {side} is missing data, or got a segment twice"),
                }
            }
            EventKind::ZeroWindow => format!("zero window: the {side}'s receive buffer is full, the peer must wait"),
            EventKind::Fin => self.fin_note(e),
            EventKind::Rst => self.rst_note(e),
        }
    }

    fn data_retransmit_note(&mut self, index: usize, e: &Event) -> String {
        let side = e.from.name();
        let what = if e.from == Side::Client && relative_seq_ack(self.c, e).0 == Some(1) {
            "request re-sent".to_string()
        } else {
            format!("data re-sent by the {side}")
        };
        let attempt = attempt_number(attempt(e));
        let dup_acks = std::mem::take(&mut self.dup_acks_seen[e.from.index()]);
        let facts = self.send_facts(e);
        let expected = facts.and_then(|f| f.expected);
        // RFC 5681 §3.2: three duplicate ACKs trigger a retransmission before the RTO.
        if let Some(waited) = since_previous(e) {
            if dup_acks >= 3 && expected.is_none_or(|expected| waited < expected / 2.0) {
                return format!(
                    "{what}, attempt {attempt}: a fast retransmit after {dup_acks} duplicate ACKs, {} after the previous send (no timeout)",
                    seconds_text(waited)
                );
            }
        }
        let mut text = if facts.is_some_and(|f| f.triggered) {
            // tcp_v4_mtu_reduced() -> tcp_simple_retransmit(): smaller, at once, no timer.
            format!("{what}, attempt {attempt}: at once and smaller, after the too-big ICMP error (no timeout)")
        } else {
            let timing = self.timing(e);
            if timing.is_empty() {
                format!("{what}, attempt {attempt}")
            } else {
                format!("{what}, attempt {attempt}: {timing}")
            }
        };
        match self.answer {
            Some(answer) if self.request_taken == Some(index) => {
                text += &format!("; this copy got through: the server answered it in frame {}", frame_number(answer.at));
            }
            _ if e.from == Side::Client && self.has(Symptom::RequestUnacked) && after_handshake_ack(e) => {
                if self.has(Symptom::SyncookieSuspected) {
                    text += "; never acknowledged: the server's kernel has no connection for it (a SYN cookie whose ACK it did not take)";
                } else {
                    text += "; never acknowledged: sent into a half-open connection";
                }
            }
            _ => {}
        }
        text
    }

    fn fin_note(&self, e: &Event) -> String {
        let answered = self.c.milestones.server_data_ns.get().map(epoch);
        if self.request.is_some() && answered.is_none_or(|answered| answered > epoch(e.time_ns)) {
            return match e.from {
                Side::Client => "FIN from the client before any answer: it gave up waiting (a read timeout)".to_string(),
                Side::Server => "FIN from the server before any answer: the upstream closed without answering".to_string(),
            };
        }
        format!("FIN: the {} is done sending", e.from.name())
    }

    fn rst_note(&self, e: &Event) -> String {
        let (answers, answers_frame, after) = match e.detail {
            Detail::Rst { answers, answers_frame, after_ns } => (answers, answers_frame, after_ns.map(seconds)),
            _ => (None, None, None),
        };
        let side = e.from.name();
        let answered = format!("the {}'s {}", e.from.other().name(), answers.map_or("nothing", role_name));
        if e.from == Side::Server {
            if answers == Some(PacketRole::Syn) {
                return "RST from the server answers the SYN: connection refused, nothing listens on the port".to_string();
            }
            if let Some(synack) = self.first_synack.filter(|_| self.has(Symptom::ResetAfterExpiry)) {
                let since = epoch(e.time_ns) - epoch(synack.time_ns);
                return format!("RST from the server {} after the first SYN-ACK: the half-open request had expired", seconds_text(since));
            }
            if self.has(Symptom::ResetAfterAck) {
                return format!(
                    "RST from the server answering {answered}: the accept queue was full and net.ipv4.tcp_abort_on_overflow is 1"
                );
            }
        }
        let mut text = format!("RST from the {side}");
        if let (Some(frame), Some(after)) = (answers_frame, after) {
            text += &format!(", {} after {answered} in frame {}", seconds_text(after), frame_number(frame));
        }
        if e.from == Side::Client && self.outcome != Outcome::ResetByClient {
            // The connection went on: this RST was the client's kernel refusing one segment (a
            // stale or unexpected one), not the application closing.
            text += &format!(
                ": the client's kernel refused a segment it did not expect; the connection went on ({})",
                self.outcome.slug().replace('_', " ")
            );
        } else if e.from == Side::Client {
            text += ": the client gave up (a timeout in the application)";
        }
        text
    }
}

/// An ICMP error answering one of the connection's packets, in plain words.
fn icmp_note(a: &IcmpAnswer) -> String {
    let answered = a.answers_role.map_or("packet", role_name);
    let mut text = format!("ICMP {} from {}, answering the {}'s {answered}", a.kind.meaning(), a.sender, a.answers.name());
    if let Some(frame) = a.answers_frame {
        text += &format!(" (frame {})", frame_number(frame));
    }
    if let Some(mtu) = a.mtu.filter(|&mtu| mtu != 0) {
        text += &format!(": next-hop MTU {}, the packet was {} bytes", with_commas(mtu), with_commas(a.quoted_len));
    }
    if let Some((errno, errno_text)) = a.kind.connect_errno(a.sender.is_ipv6()) {
        if a.answers == Side::Client && a.answers_role == Some(PacketRole::Syn) {
            text += &format!("; a Linux connect() fails at once with {errno} ({errno_text})");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    //! Labels of connections built by the tracker from hand-made segments.

    use super::*;
    use crate::flow::wire::*;

    const PA: u8 = PSH | ACK;

    /// The only connection's labels as (frame, text), for a capture ending at its last packet.
    fn labels(w: &Wire) -> Vec<(u64, String)> {
        connection_labels(w.conn(), w.last_ms * MS).into_iter().map(|l| (l.frame, l.text)).collect()
    }

    fn texts(labels: &[(u64, String)]) -> Vec<&str> {
        labels.iter().map(|(_, text)| text.as_str()).collect()
    }

    #[test]
    fn test_seconds_read_as_the_timeline_writes_them() {
        assert_eq!(seconds_text(0.000_042), "0.042 ms");
        assert_eq!(seconds_text(0.0042), "4.2 ms");
        assert_eq!(seconds_text(0.81), "0.81 s");
        assert_eq!(seconds_text(4.875), "4.88 s", "a tie rounds to even, as Python's format does");
        assert_eq!(seconds_text(63.1), "63.1 s");
        assert_eq!(with_commas(576), "576");
        assert_eq!(with_commas(1500), "1,500");
        assert_eq!(with_commas(1_234_567), "1,234,567");
    }

    #[test]
    fn test_accept_queue_overflow_spurious_synack_and_the_request_copy_that_got_through() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.send(3, C, PA, CISN + 1, SISN + 1, 100);
        // The server dropped the handshake ACK (accept queue full): its SYN-ACK timer fires.
        w.send(1001, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1002, C, ACK, CISN + 101, SISN + 1, 0);
        w.send(1500, C, PA, CISN + 1, SISN + 1, 100);
        w.send(1600, S, PA, SISN + 1, CISN + 101, 50);
        assert_eq!(
            texts(&labels(&w)),
            [
                "SYN: the client opens the connection",
                "SYN-ACK: the server's kernel answers and holds a half-open request",
                "ACK completing the handshake: established for the client, its connect() returns; the server did not \
                 take it (SYN-ACK again in frame 5)",
                "request: the client's first data, 100 bytes",
                "SYN-ACK #2, spurious: the client already ACKed in frame 3, so the server dropped that ACK (accept queue full)",
                "duplicate ACK #1 of frame 3: the client answers the re-sent SYN-ACK",
                "request re-sent, attempt 2: waited 1.50 s, the RTO schedule predicts 0.20 s; this copy got through: the \
                 server answered it in frame 8",
                "answer: the server's first data, 50 bytes, 1.60 s after the request",
            ]
        );
    }

    #[test]
    fn test_accept_queue_overflow_request_never_acknowledged() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.send(3, C, PA, CISN + 1, SISN + 1, 100);
        w.send(1001, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1002, C, ACK, CISN + 101, SISN + 1, 0);
        w.send(1205, C, PA, CISN + 1, SISN + 1, 100);
        let labels = labels(&w);
        assert_eq!(labels[5], (6, "duplicate ACK #1 of frame 3: the client answers the re-sent SYN-ACK".to_string()));
        assert_eq!(
            labels[6],
            (
                7,
                "request re-sent, attempt 2: waited 1.20 s, the RTO schedule predicts 0.20 s; never acknowledged: sent \
                 into a half-open connection"
                    .to_string()
            )
        );
    }

    #[test]
    fn test_refused_connect() {
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1, S, RST | ACK, 0, CISN + 1, 0);
        assert_eq!(
            texts(&labels(&w)),
            [
                "SYN: the client opens the connection",
                "RST from the server answers the SYN: connection refused, nothing listens on the port",
            ]
        );
    }

    #[test]
    fn test_fast_retransmit_after_three_duplicate_acks() {
        let mut w = Wire::new();
        w.handshake_plain();
        for (ms, n) in [(10, 0), (11, 1), (12, 2), (13, 3), (14, 4)] {
            w.send(ms, C, PA, CISN + 1 + 100 * n, SISN + 1, 100);
        }
        // The second segment was lost: the server acknowledges the first, then each later one
        // with the same ACK again.
        for ms in [15, 15, 16, 16] {
            w.send(ms, S, ACK, SISN + 1, CISN + 101, 0);
        }
        let resent = w.send(17, C, PA, CISN + 101, SISN + 1, 100);
        let labels = labels(&w);
        let dup_acks: Vec<&str> = labels.iter().filter(|(_, t)| t.starts_with("duplicate ACK")).map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            dup_acks,
            [
                "duplicate ACK #1 of frame 9: the server is missing data, or got a segment twice",
                "duplicate ACK #2 of frame 9: the server is missing data, or got a segment twice",
                "duplicate ACK #3 of frame 9: the server is missing data, or got a segment twice",
            ]
        );
        assert_eq!(
            labels.last(),
            Some(&(
                resent,
                "data re-sent by the client, attempt 2: a fast retransmit after 3 duplicate ACKs, 6.0 ms after the \
                 previous send (no timeout)"
                    .to_string()
            ))
        );
    }

    #[test]
    fn test_client_rst_after_both_fins_is_no_give_up() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.send(3, C, PA, CISN + 1, SISN + 1, 100);
        w.send(10, S, PA, SISN + 1, CISN + 101, 50);
        w.send(11, C, FIN | ACK, CISN + 101, SISN + 51, 0);
        let server_fin = w.send(12, S, FIN | ACK, SISN + 51, CISN + 102, 0);
        w.send(13, C, RST, CISN + 102, 0, 0);
        assert_eq!(
            labels(&w).last().map(|(_, text)| text.as_str()),
            Some(&*format!(
                "RST from the client, 1.0 ms after the server's FIN in frame {server_fin}: the client's kernel refused a \
                 segment it did not expect; the connection went on (completed)"
            ))
        );
    }
}
