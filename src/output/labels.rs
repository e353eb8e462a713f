//! The words pcapq writes on each packet it labelled: what the packet means, in plain words,
//! with each retransmission's wait set against the kernel's schedule (docs/diagnosis.md).
//! `pcapq timeline` shows them as its notes; `pcapq annotate` writes them as packet comments.
//!
//! A label reads the whole connection (its verdict, its series, the events around it), so the
//! labels of a connection are written together, and only when asked for. Numbers and times are
//! those of the JSON document (docs/json.md): times are its epoch seconds, rounded to the
//! microsecond, so a time between two packets reads as the difference of the two shown.

use std::fmt::{self, Write as _};
use std::ops::Range;

use super::json::{epoch, relative_seq_ack, seconds};
use crate::detect::schedule::Schedule;
use crate::detect::{self, Outcome, Symptom, Symptoms, Verdict};
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
    let mut text = String::new();
    let mut spans = Vec::with_capacity(c.events.len() + c.icmp_answers().len());
    write_labels(c, &verdict, &mut text, "", |at, span| spans.push((at, span)));
    spans
        .into_iter()
        .map(|(at, span)| Label { file: at.file, frame: at.frame, text: text.get(span).unwrap_or_default().to_string() })
        .collect()
}

/// Writes the labels of connection `c` (`connection_labels`), `verdict` its `detect::judge`,
/// one after the other into `text`, each after `before_each`; tells `written` the packet of each
/// and where it is in `text`, `before_each` included.
pub fn write_labels(
    c: &Connection, verdict: &Verdict, text: &mut String, before_each: &str, mut written: impl FnMut(FrameRef, Range<usize>),
) {
    let mut writer = EventWriter::new(c, verdict.symptoms, verdict.outcome, &verdict.series);
    let mut previous: Option<&Event> = None;
    for (index, e) in c.events.iter().enumerate() {
        let start = text.len();
        text.push_str(before_each);
        writer.note(text, index, e, previous);
        written(e.at, start..text.len());
        previous = Some(e);
    }
    for a in c.icmp_answers() {
        let start = text.len();
        text.push_str(before_each);
        icmp_note(text, a);
        written(a.at, start..text.len());
    }
}

/// Seconds for a sentence: 0.81 s, 63.1 s, 4.2 ms, 0.042 ms.
struct Seconds(f64);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.0;
        if seconds < 0.001 {
            write!(f, "{:.3} ms", seconds * 1000.0)
        } else if seconds < 0.01 {
            write!(f, "{:.1} ms", seconds * 1000.0)
        } else if seconds < 10.0 {
            write!(f, "{seconds:.2} s")
        } else {
            write!(f, "{seconds:.1} s")
        }
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
struct OrdinalSend(Option<u32>);

impl fmt::Display for OrdinalSend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(n) => write!(f, "#{n}"),
            None => f.write_str("again"),
        }
    }
}

/// A re-sent segment's attempt number ("?" when not numbered: the tracker numbers every re-send).
struct AttemptNumber(Option<u32>);

impl fmt::Display for AttemptNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("?"),
        }
    }
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
/// Writing into a `String` cannot fail: the `fmt::Result`s of `write!` are let go.
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
    /// Every send of a timed series and where it is, sorted by where; of two at one packet,
    /// the later send's facts count.
    sends: Vec<(FrameRef, SendFacts)>,
}

impl<'a> EventWriter<'a> {
    fn new(c: &'a Connection, symptoms: Symptoms, outcome: Outcome, series: &[detect::Series]) -> EventWriter<'a> {
        let events = &c.events;
        // The first event of each kind the notes name, in one pass.
        let (mut handshake_ack, mut first_synack, mut request, mut answer, mut spurious_synack) = (None, None, None, None, None);
        for e in events {
            let first = match e.kind {
                EventKind::HandshakeAck => &mut handshake_ack,
                EventKind::Synack => &mut first_synack,
                EventKind::DataFirst if e.from == Side::Client => &mut request,
                EventKind::DataFirst => &mut answer,
                EventKind::SynackRetransmit if after_handshake_ack(e) => &mut spurious_synack,
                _ => continue,
            };
            first.get_or_insert(e);
        }
        let request_taken = answer.and_then(|answer| {
            let answered = epoch(answer.time_ns);
            events.iter().rposition(|e| {
                e.kind == EventKind::DataRetransmit
                    && e.from == Side::Client
                    && relative_seq_ack(c, e).0 == Some(1)
                    && epoch(e.time_ns) <= answered
            })
        });
        let mut sends = Vec::new();
        for s in series {
            for send in &s.sends {
                let facts = SendFacts { expected: send.expected_ns.map(seconds), schedule: s.schedule, triggered: send.triggered };
                sends.push((send.at, facts));
            }
        }
        // Stable: two sends at one packet stay in order.
        sends.sort_by_key(|&(at, _)| at);
        EventWriter {
            c,
            symptoms,
            outcome,
            handshake_ack,
            first_synack,
            request,
            spurious_synack,
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
        let after = self.sends.partition_point(|&(at, _)| at <= e.at);
        let (at, facts) = self.sends.get(after.checked_sub(1)?)?;
        (*at == e.at).then_some(*facts)
    }

    fn triggered(&self, e: &Event) -> bool {
        self.send_facts(e).is_some_and(|f| f.triggered)
    }

    /// "waited 1.00 s, the SYN-ACK schedule predicts 1.00 s"; nothing without a wait
    /// (`since_previous`).
    fn timing(&self, out: &mut String, e: &Event) {
        let Some(waited) = since_previous(e) else {
            return;
        };
        let _ = write!(out, "waited {}", Seconds(waited));
        if let Some(SendFacts { expected: Some(expected), schedule, .. }) = self.send_facts(e) {
            let _ = write!(out, ", {} predicts {}", schedule_name(schedule), Seconds(expected));
        }
    }

    /// Writes what event number `index`, `e`, means; `previous` is the event before it.
    fn note(&mut self, out: &mut String, index: usize, e: &Event, previous: Option<&Event>) {
        let side = e.from.name();
        match e.kind {
            EventKind::Syn => out.push_str("SYN: the client opens the connection"),
            EventKind::SynRetransmit => {
                let _ = write!(out, "SYN {}, same ISN: no SYN-ACK came; ", OrdinalSend(attempt(e)));
                self.timing(out, e);
            }
            EventKind::Synack if self.has(Symptom::SyncookieSuspected) => {
                // A cookie SYN-ACK leaves no request socket behind (net/ipv4/syncookies.c).
                out.push_str("SYN-ACK: the server's kernel answers, probably with a SYN cookie: it holds no half-open request");
            }
            EventKind::Synack => out.push_str("SYN-ACK: the server's kernel answers and holds a half-open request"),
            EventKind::SynackRetransmit => {
                let ordinal = OrdinalSend(attempt(e));
                match self.handshake_ack {
                    Some(ack) if after_handshake_ack(e) => {
                        let _ = write!(
                            out,
                            "SYN-ACK {ordinal}, spurious: the client already ACKed in frame {}, so the server dropped that ACK (accept queue full)",
                            frame_number(ack.at)
                        );
                    }
                    _ if self.triggered(e) => {
                        let _ = write!(out, "SYN-ACK {ordinal}, sent at once in answer to the re-sent SYN");
                    }
                    _ => {
                        let _ = write!(out, "SYN-ACK {ordinal}: no ACK from the client; ");
                        self.timing(out, e);
                    }
                }
            }
            EventKind::HandshakeAck => {
                out.push_str("ACK completing the handshake: established for the client, its connect() returns");
                if let Some(spurious) = self.spurious_synack {
                    let _ = write!(out, "; the server did not take it (SYN-ACK again in frame {})", frame_number(spurious.at));
                }
            }
            EventKind::DataFirst if e.from == Side::Client => {
                let _ = write!(out, "request: the client's first data, {} bytes", e.len);
            }
            EventKind::DataFirst => {
                let _ = write!(out, "answer: the server's first data, {} bytes", e.len);
                if let Some(request) = self.request {
                    let _ = write!(out, ", {} after the request", Seconds(epoch(e.time_ns) - epoch(request.time_ns)));
                }
            }
            EventKind::DataRetransmit => self.data_retransmit_note(out, index, e),
            EventKind::FinRetransmit => {
                let _ = write!(out, "FIN re-sent by the {side}, attempt {}: ", AttemptNumber(attempt(e)));
                self.timing(out, e);
            }
            EventKind::DupAck => {
                // The duplicate ACK tells the data sender, the other side, that a segment is missing.
                self.dup_acks_seen[e.from.other().index()] += 1;
                let (count, of) = match e.detail {
                    Detail::DupAck { count, of } => (count, Some(frame_number(of))),
                    _ => (1, None),
                };
                let _ = write!(out, "duplicate ACK #{count} of frame ");
                match of {
                    Some(frame) => {
                        let _ = write!(out, "{frame}");
                    }
                    None => out.push('?'),
                }
                match previous {
                    Some(p) if matches!(p.kind, EventKind::SynackRetransmit | EventKind::SynRetransmit) && p.from != e.from => {
                        let resent = if e.from == Side::Client { "SYN-ACK" } else { "SYN" };
                        let _ = write!(out, ": the {side} answers the re-sent {resent}");
                    }
                    _ => {
                        let _ = write!(out, ": the {side} is missing data, or got a segment twice");
                    }
                }
            }
            EventKind::ZeroWindow => {
                let _ = write!(out, "zero window: the {side}'s receive buffer is full, the peer must wait");
            }
            EventKind::Fin => self.fin_note(out, e),
            EventKind::Rst => self.rst_note(out, e),
        }
    }

    fn data_retransmit_note(&mut self, out: &mut String, index: usize, e: &Event) {
        let side = e.from.name();
        if e.from == Side::Client && relative_seq_ack(self.c, e).0 == Some(1) {
            out.push_str("request re-sent");
        } else {
            let _ = write!(out, "data re-sent by the {side}");
        }
        let attempt = AttemptNumber(attempt(e));
        let dup_acks = std::mem::take(&mut self.dup_acks_seen[e.from.index()]);
        let facts = self.send_facts(e);
        let expected = facts.and_then(|f| f.expected);
        // RFC 5681 §3.2: three duplicate ACKs trigger a retransmission before the RTO.
        if let Some(waited) = since_previous(e) {
            if dup_acks >= 3 && expected.is_none_or(|expected| waited < expected / 2.0) {
                let _ = write!(
                    out,
                    ", attempt {attempt}: a fast retransmit after {dup_acks} duplicate ACKs, {} after the previous send (no timeout)",
                    Seconds(waited)
                );
                return;
            }
        }
        if facts.is_some_and(|f| f.triggered) {
            // tcp_v4_mtu_reduced() -> tcp_simple_retransmit(): smaller, at once, no timer.
            let _ = write!(out, ", attempt {attempt}: at once and smaller, after the too-big ICMP error (no timeout)");
        } else {
            let _ = write!(out, ", attempt {attempt}");
            if since_previous(e).is_some() {
                out.push_str(": ");
                self.timing(out, e);
            }
        }
        match self.answer {
            Some(answer) if self.request_taken == Some(index) => {
                let _ = write!(out, "; this copy got through: the server answered it in frame {}", frame_number(answer.at));
            }
            _ if e.from == Side::Client && self.has(Symptom::RequestUnacked) && after_handshake_ack(e) => {
                if self.has(Symptom::SyncookieSuspected) {
                    out.push_str("; never acknowledged: the server's kernel has no connection for it (a SYN cookie whose ACK it did not take)");
                } else {
                    out.push_str("; never acknowledged: sent into a half-open connection");
                }
            }
            _ => {}
        }
    }

    fn fin_note(&self, out: &mut String, e: &Event) {
        let answered = self.c.milestones.server_data_ns.get().map(epoch);
        if self.request.is_some() && answered.is_none_or(|answered| answered > epoch(e.time_ns)) {
            out.push_str(match e.from {
                Side::Client => "FIN from the client before any answer: it gave up waiting (a read timeout)",
                Side::Server => "FIN from the server before any answer: the upstream closed without answering",
            });
            return;
        }
        let _ = write!(out, "FIN: the {} is done sending", e.from.name());
    }

    fn rst_note(&self, out: &mut String, e: &Event) {
        let (answers, answers_frame, after) = match e.detail {
            Detail::Rst { answers, answers_frame, after_ns } => (answers, answers_frame, after_ns.map(seconds)),
            _ => (None, None, None),
        };
        let side = e.from.name();
        // "the client's SYN": the packet the RST answered.
        let (answered_side, answered_role) = (e.from.other().name(), answers.map_or("nothing", role_name));
        if e.from == Side::Server {
            if answers == Some(PacketRole::Syn) {
                out.push_str("RST from the server answers the SYN: connection refused, nothing listens on the port");
                return;
            }
            if let Some(synack) = self.first_synack.filter(|_| self.has(Symptom::ResetAfterExpiry)) {
                let since = epoch(e.time_ns) - epoch(synack.time_ns);
                let _ = write!(
                    out,
                    "RST from the server {} after the first SYN-ACK: the half-open request had expired",
                    Seconds(since)
                );
                return;
            }
            if self.has(Symptom::ResetAfterAck) {
                let _ = write!(
                    out,
                    "RST from the server answering the {answered_side}'s {answered_role}: the accept queue was full and \
                     net.ipv4.tcp_abort_on_overflow is 1"
                );
                return;
            }
        }
        let _ = write!(out, "RST from the {side}");
        if let (Some(frame), Some(after)) = (answers_frame, after) {
            let _ = write!(out, ", {} after the {answered_side}'s {answered_role} in frame {}", Seconds(after), frame_number(frame));
        }
        if e.from == Side::Client && self.outcome != Outcome::ResetByClient {
            // The connection went on: this RST was the client's kernel refusing one segment (a
            // stale or unexpected one), not the application closing.
            let _ = write!(
                out,
                ": the client's kernel refused a segment it did not expect; the connection went on ({})",
                self.outcome.slug().replace('_', " ")
            );
        } else if e.from == Side::Client {
            out.push_str(": the client gave up (a timeout in the application)");
        }
    }
}

/// Writes an ICMP error answering one of the connection's packets, in plain words.
fn icmp_note(out: &mut String, a: &IcmpAnswer) {
    let answered = a.answers_role.map_or("packet", role_name);
    let _ = write!(out, "ICMP {} from {}, answering the {}'s {answered}", a.kind.meaning(), a.sender, a.answers.name());
    if let Some(frame) = a.answers_frame {
        let _ = write!(out, " (frame {})", frame_number(frame));
    }
    if let Some(mtu) = a.mtu.filter(|&mtu| mtu != 0) {
        let _ = write!(out, ": next-hop MTU {}, the packet was {} bytes", with_commas(mtu), with_commas(a.quoted_len));
    }
    if let Some((errno, errno_text)) = a.kind.connect_errno(a.sender.is_ipv6()) {
        if a.answers == Side::Client && a.answers_role == Some(PacketRole::Syn) {
            let _ = write!(out, "; a Linux connect() fails at once with {errno} ({errno_text})");
        }
    }
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
        assert_eq!(Seconds(0.000_042).to_string(), "0.042 ms");
        assert_eq!(Seconds(0.0042).to_string(), "4.2 ms");
        assert_eq!(Seconds(0.81).to_string(), "0.81 s");
        assert_eq!(Seconds(4.875).to_string(), "4.88 s", "a tie rounds to even, as Python's format does");
        assert_eq!(Seconds(63.1).to_string(), "63.1 s");
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
