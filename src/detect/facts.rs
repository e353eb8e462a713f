//! Facts: what the diagnosis asks of a problem connection beyond its outcome and symptoms,
//! decided here once, from the record, so that the rules over episodes only count and select.
//! The rules that read them are in docs/diagnosis.md.

use super::{Outcome, Symptom, Symptoms};
use crate::decode::icmp::IcmpClass;
use crate::flow::seq::SeqNumber;
use crate::flow::{Connection, PacketRole, Side};

/// TIME-WAIT lasts 60 s on Linux (include/net/tcp.h: TCP_TIMEWAIT_LEN).
pub const TIME_WAIT_NS: i64 = 60 * 1_000_000_000;
/// A client that closes this long after its last data was waiting for something: Linux's
/// shortest retransmission timeout (include/net/tcp.h: TCP_RTO_MIN). A client that had finished
/// sending closes within a round trip.
pub const WAITED_MIN_NS: i64 = 200_000_000;

crate::slugs::slug_enum! {
    /// What the diagnosis asks of a problem connection. Each fact's rule in words, after its
    /// slug, is its doc comment (`slug_enum!`) and its row of docs/diagnosis.md's table of facts.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Fact {
        SynUnanswered => "syn_unanswered" ; "the client sent its SYN again and neither a SYN-ACK nor an RST came before the re-send (a SYN re-sent after the server's RST is a closed port's, as Windows retries)",
        HalfOpen => "half_open" ; "the server sent a SYN-ACK and the handshake never completed (its SYN was seen)",
        // Decided by `probes::is_one_syn`.
        OneSyn => "one_syn" ; "one client SYN and nothing more from the client",
        Probe => "probe" ; "no payload either way, and refused, reset or never completed",
        // Decided by `detect::scans`.
        ScanProbe => "scan_probe" ; "a probe from a source that probed at least 16 ports of the server's address, or at least 5 with every probe one raw SYN never sent again (no client kernel leaves an unanswered SYN unrepeated)",
        StrayAckReset => "stray_ack_reset" ; "the client's RST answered an ACK that came before any SYN-ACK: a 4-tuple still in TIME-WAIT at the server (RFC 9293 §3.10.7.4)",
        ReusedInTimeWait => "reused_in_time_wait" ; "it reused the 4-tuple of a connection that ended less than 60 s before (TCP_TIMEWAIT_LEN), which the server had closed first and no RST ended: the server held that 4-tuple in TIME-WAIT",
        RequestAcked => "request_acked" ; "the server acknowledged client data",
        RequestUnanswered => "request_unanswered" ; "the client sent data and the server sent none after the client's last data began",
        // The 0.2 s: `WAITED_MIN_NS`.
        ClientWaited => "client_waited" ; "the client closed (FIN or RST) at least 0.2 s (TCP_RTO_MIN) after its last data: it waited for an answer, it did not just finish sending",
        NeverConnected => "never_connected" ; "no SYN-ACK, and the connect ended (`timed_out` or `abandoned`)",
        QueueSign => "queue_sign" ; "`final_ack_dropped`, `reset_after_ack` or `syncookie_suspected`",
        // The spans: `episodes::queue_windows`.
        InQueueWindow => "in_queue_window" ; "its trouble (from its first SYN to its SYN-ACK when the SYN went unanswered, else from its first request to the server's acknowledgement) overlaps a span in which the same listener showed a queue sign (from the sign connection's own dropped SYN, or its handshake ACK, to the moment it got through), padded by 1 s; a trouble inside widens the span, so SYNs dropped back to back before the first ACK could be dropped belong to it too",
        SilentHost => "silent_host" ; "the server's address sent no packet at all in the capture (from any endpoint of it, nor as a client: its own SYNs, to any peer, on loopback to itself; any connection, kept or not), and no client sent it more than SYNs (an ACK or data would show the capture misses the server's direction)",
        Loopback => "loopback" ; "client and server are one host: there is no path to lose packets on",
        SynackIgnored => "synack_ignored" ; "one SYN, a SYN-ACK, and nothing from the client: a spoofed or scanning source",
        RstUnprovoked => "rst_unprovoked" ; "the client's RST came before anything of the server was seen: no client kernel gives up a connect that way (Linux v6.6 net/ipv4/tcp.c: tcp_disconnect() sends no RST in SYN-SENT): backscatter of a spoofed SYN, or a one-way capture",
        // Tied by `flow::track::icmp`.
        IcmpAnswered => "icmp_answered" ; "an ICMP error (other than fragmentation needed / packet too big) answered one of its packets: the quote's 4-tuple is the connection's and its sequence number lies in the sender's window (Linux v6.6 net/ipv4/tcp_ipv4.c: tcp_v4_err(): between(seq, snd_una, snd_nxt))",
        IcmpProhibited => "icmp_prohibited" ; "`icmp_answered`, the error saying a filter refused the packet: administratively prohibited, policy or reject route",
        IcmpNoRoute => "icmp_no_route" ; "`icmp_answered`, the error saying there is no way there: no route, host or network unreachable or unknown, address unreachable",
        IcmpPortUnreachable => "icmp_port_unreachable" ; "`icmp_answered`, the error saying nothing listens: port or protocol unreachable",
        IcmpTtlExceeded => "icmp_ttl_exceeded" ; "`icmp_answered`, the error saying the packet ran out of hops: TTL or reassembly time exceeded",
        PmtuDiscovered => "pmtu_discovered" ; "a fragmentation-needed / packet-too-big error answered its data and no black hole followed: path MTU discovery working (RFC 1191 §3), its re-sends are not loss",
        RequestAfterServerClose => "request_after_close" ; "the client's last data came after the server's first FIN, more than 85 bytes of it (a TLS client's close_notify alert answering the server's is at most 85: no request, and no `request_unanswered` either): a request on a connection the server had already closed, such as an idle keep-alive connection reused as its server closed it; the server's kernel answers it with an RST (Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_timewait_state_process(), \"new data after half-duplex close\")",
        AnsweredBefore => "answered_before" ; "the server sent data before the client's last request and none after it: an earlier request on the connection was answered, the last one was not (a kept-alive connection)",
        // Weighed by `detect::checks`.
        SynackAfterAck => "synack_after_ack" ; "the server sent its SYN-ACK again by its timer after the client's handshake ACK: the sign the [checks](#hypotheses-and-their-checks) weigh (`final_ack_dropped` when no competitor's check failed)",
        // The 0.2 s: `WAITED_MIN_NS`.
        AnswerCrossedClose => "answer_crossed_close" ; "the server answered the request, but the client's FIN or RST, at least 0.2 s after the request, acknowledges none of the answer: the answer crossed the client's close at its read timeout (the outcome is `abandoned`; the RSTs that follow answer the late answer, RFC 9293 §3.10.7.4)",
        SynResendSpurious => "syn_resend_spurious" ; "the client sent its SYN again, yet the server's first SYN-ACK, captured before the re-sent SYN, is the one the client's handshake ACK echoes (its TSecr, RFC 7323 §3.2): the first SYN and its answer both arrived, on a path slower than the SYN timer; no loss",
        OneWay => "one_way" ; "the server's address sent no packet the capture shows, yet its clients sent it ACKs or data (they heard from it): the capture misses that direction. No unanswered SYN, listener drop, SYN queue overflow or client give-up is claimed for it",
        // The cut: `trimmed::FlowLengths::trimmed_at`.
        FlowTrimmed => "flow_trimmed" ; "the connection never closed and stopped at the frame count where the capture cut every long flow (at least three unclosed connections at the capture's longest count, one of them in a two-way exchange): what did not follow was not seen. No give-up, half-open request or unanswered request is claimed for it",
        ResentOnce => "resent_once" ; "each data segment it re-sent without a sign the re-send was needed (no D-SACK, no acknowledgement before the re-send could have arrived) it re-sent once, and before the server acknowledged any request: what a reordering path makes (the segment held back, the one behind it first) as well as a single loss",
        // Decided by `episodes::Book::build` from its listener's re-sends.
        Reordering => "reordering" ; "`resent_once`, at a listener where most data segments re-sent, in every connection of the capture, were shown spurious, D-SACKed (RFC 2883 §4, RFC 3708 §3) or acknowledged before the re-send could have arrived (Linux v6.6 net/ipv4/tcp_recovery.c: tcp_rack_advance()), at least 3 of them: a path that reorders; the re-sends the receiver did not report were probably spurious too, not loss",
        // Decided by `episodes::stalled`.
        ListenerStalled => "listener_stalled" ; "its SYN went unanswered while the same listener held an earlier connection (its handshake ACK before that SYN) whose request the kernel had acknowledged and nobody answered until its client gave up, or it was such a connection while SYNs were dropped: the listener was not taking connections. With at least 3 clients' SYNs so dropped and no dropped ACK, overflow reset or cookie, `accept_queue_overflow` at 0.7 (a steady arrival into a full queue: each new SYN finds it full, Linux v6.6 tcp_conn_request(), and none gets as far as its ACK)",
    }
}

/// A set of facts, one bit each (`Fact::index`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Facts(u64);

const _: () = assert!(Fact::COUNT <= u64::BITS as usize, "a fact set is a u64");

impl Facts {
    pub fn insert(&mut self, f: Fact) {
        self.0 |= 1 << f.index();
    }

    pub fn contains(self, f: Fact) -> bool {
        self.0 & (1 << f.index()) != 0
    }

    pub fn bits(self) -> u64 {
        self.0
    }
}

/// Whether a verdict of `outcome`, `symptoms` and `f` rests on something the capture did not
/// show: a SYN or request left unanswered, a handshake left half-open, a client that stopped
/// waiting. Those are the connections the checks of `checks::Sign::Unanswered` and
/// `checks::Sign::NothingFollowed` are weighed on.
pub fn rests_on_silence(outcome: Outcome, symptoms: Symptoms, f: Facts) -> bool {
    let unanswered = [Fact::SynUnanswered, Fact::HalfOpen, Fact::RequestUnanswered, Fact::NeverConnected, Fact::ClientWaited];
    matches!(outcome, Outcome::TimedOut | Outcome::Abandoned | Outcome::ResetByClient)
        || symptoms.contains(Symptom::RequestUnacked)
        || unanswered.iter().any(|&x| f.contains(x))
}

/// The facts one record shows on its own (the ones that need its listener or the whole capture,
/// `ScanProbe`, `InQueueWindow`, `SilentHost`, `OneWay` and `FlowTrimmed`, are added by
/// `episodes`).
pub fn of(c: &Connection, outcome: Outcome, symptoms: Symptoms) -> Facts {
    let mut f = Facts::default();
    let client = &c.counts[Side::Client.index()];
    let server = &c.counts[Side::Server.index()];
    if syn_unanswered(c) {
        f.insert(Fact::SynUnanswered);
    }
    if c.synack_count > 0 && !c.handshake_completed() && !c.partial {
        f.insert(Fact::HalfOpen);
    }
    if super::probes::is_one_syn(c) {
        f.insert(Fact::OneSyn);
        if c.synack_count > 0 {
            f.insert(Fact::SynackIgnored);
        }
    }
    if c.milestones.first_rst().is_some_and(|r| r.from == Side::Client && r.answers.is_none()) && server.packets == 0 {
        f.insert(Fact::RstUnprovoked);
    }
    let quiet = client.payload_bytes == 0 && server.payload_bytes == 0;
    if quiet && !c.partial && (!c.handshake_completed() || c.milestones.first_rst().is_some()) {
        f.insert(Fact::Probe);
    }
    if stray_ack_reset(c) {
        f.insert(Fact::StrayAckReset);
    }
    if c.follows_server_time_wait && c.follows_after_ns.get().is_none_or(|after| after < TIME_WAIT_NS) {
        f.insert(Fact::ReusedInTimeWait);
    }
    if c.milestones.client_data_acked_ns.get().is_some() {
        f.insert(Fact::RequestAcked);
    }
    let m = &c.milestones;
    if last_request_unanswered(c) {
        f.insert(Fact::RequestUnanswered);
        if m.server_data_ns.get().is_some() {
            f.insert(Fact::AnsweredBefore);
        }
    }
    if let Some(last_request) = m.client_last_data_ns.get().or(m.client_data_ns.get()) {
        if m.client_closed_ns.get().is_some_and(|closed| closed - last_request >= WAITED_MIN_NS) {
            f.insert(Fact::ClientWaited);
        }
        if request_after_server_close(c) {
            f.insert(Fact::RequestAfterServerClose);
        }
    }
    if answer_crossed_close(c) {
        f.insert(Fact::AnswerCrossedClose);
    }
    if syn_resend_spurious(c) {
        f.insert(Fact::SynResendSpurious);
    }
    if !synacks_after_ack(c).is_empty() {
        f.insert(Fact::SynackAfterAck);
    }
    if c.synack_count == 0 && matches!(outcome, Outcome::TimedOut | Outcome::Abandoned) {
        f.insert(Fact::NeverConnected);
    }
    if [Symptom::FinalAckDropped, Symptom::ResetAfterAck, Symptom::SyncookieSuspected].iter().any(|&s| symptoms.contains(s)) {
        f.insert(Fact::QueueSign);
    }
    if c.client.ip == c.server.ip || c.server.ip.is_loopback() {
        f.insert(Fact::Loopback);
    }
    for fact in super::icmp::classes(c).filter_map(icmp_fact) {
        f.insert(Fact::IcmpAnswered);
        f.insert(fact);
    }
    if super::icmp::pmtu_discovered(c, symptoms).is_some() {
        f.insert(Fact::PmtuDiscovered);
    }
    if symptoms.contains(Symptom::DataRetransmitted) && resent_once(c) {
        f.insert(Fact::ResentOnce);
    }
    f
}

/// See `Fact::ResentOnce`: a reordered segment is re-sent once (its original arrives late and
/// ends the recovery); a segment re-sent again and again by the timer was lost, as was a request
/// the server never acknowledged.
pub fn resent_once(c: &Connection) -> bool {
    let Some(log) = c.retransmits.as_deref() else { return false };
    // Every re-send counted, one per segment logged: none was sent a third time.
    let total: usize = c.counts.iter().map(|d| d.data_retransmits as usize).sum();
    total <= log.data.len() && log.data.iter().all(|d| d.spurious() || !d.into_half_open)
}

/// The client closed without any of the server's answer: its FIN or RST, at least
/// `WAITED_MIN_NS` after its request, acknowledges none of the server's data, which the server
/// sent after that request. The answer crossed the close: the client gave up at its own read
/// timeout (nginx's proxy_read_timeout: 504, error 110) just before the answer reached it, and
/// its kernel answers the late data with RST (RFC 9293 §3.10.7.4; Linux v6.6 net/ipv4/tcp.c:
/// tcp_close(), TcpExtTCPAbortOnData).
pub fn answer_crossed_close(c: &Connection) -> bool {
    let m = &c.milestones;
    let (Some(ack), Some(isn), Some(answer), Some(closed), Some(request)) = (
        m.client_close_ack,
        c.base_seq[Side::Server.index()],
        m.server_data_ns.get(),
        m.client_closed_ns.get(),
        m.client_data_ns.get(),
    ) else {
        return false;
    };
    let acked_none = !SeqNumber(ack).after(SeqNumber(isn.wrapping_add(1)));
    c.handshake_completed() && answer > request && acked_none && closed - request >= WAITED_MIN_NS
}

/// See `Fact::SynResendSpurious`.
pub fn syn_resend_spurious(c: &Connection) -> bool {
    first_syn_answer_lost(c) == Some(false)
}

/// The server's SYN-ACK re-sends by its timer after the client's handshake ACK: the sign the
/// checks weigh. Empty for any other connection.
pub fn synacks_after_ack(c: &Connection) -> Vec<crate::flow::connection::Send> {
    let (Some(log), Some(ack_ns)) = (&c.retransmits, c.handshake_ack_time_ns.get()) else { return Vec::new() };
    log.synack.iter().skip(1).filter(|s| !s.triggered && s.time_ns > ack_ns).copied().collect()
}

/// Whether the first SYN or its answer was lost. Where the capture saw a SYN-ACK before the
/// re-sent SYN (near the server): whether the client's handshake ACK answered a later one than
/// that. Where the first SYN-ACK came after the re-sent SYN (near the client): not lost when it
/// came sooner after the last SYN before it than a round trip, so it answered an earlier SYN
/// (a SYN-ACK re-sent by the server's timer comes a round trip after the client's second SYN at
/// the earliest: both timers are 1 s). None when the capture cannot tell.
pub fn first_syn_answer_lost(c: &Connection) -> Option<bool> {
    let (second_syn, first_synack) = (second_syn_ns(c)?, c.synack_time_ns.get()?);
    if first_synack < second_syn {
        let (echo, (_, first_synack_tsval)) = (c.handshake_ack_echo?, c.handshake_ident[Side::Server.index()]?);
        return Some(echo != first_synack_tsval);
    }
    let log = c.retransmits.as_ref()?;
    let last_syn = log.syn.iter().map(|s| s.time_ns).filter(|&t| t <= first_synack).max()?;
    // This soon after a SYN, a SYN-ACK answers it where it was captured (at the server).
    let gap = first_synack - last_syn;
    let round_trip = round_trip_at_least_ns(c)?;
    (gap > crate::flow::track::label::TRIGGERED_SYNACK_NS && gap < round_trip).then_some(false)
}

/// Linux delays an ACK by at most TCP_DELACK_MAX (include/net/tcp.h: 200 ms).
const DELACK_MAX_NS: i64 = 200_000_000;

/// The round trip at the capture point at least: from the client's first data to the server's
/// ACK of it, less the longest an ACK may be delayed. None when that is nothing (captured near
/// the server), the data was not acknowledged, or the client sent data again (a request held
/// back, by a full accept queue, is acknowledged only after a re-send: its wait is no round trip).
fn round_trip_at_least_ns(c: &Connection) -> Option<i64> {
    if c.counts[Side::Client.index()].data_retransmits > 0 {
        return None;
    }
    let (sent, acked) = (c.milestones.client_data_ns.get()?, c.milestones.client_data_acked_ns.get()?);
    Some(acked - sent - DELACK_MAX_NS).filter(|&t| t > 0)
}

/// When the client sent its SYN the second time, if it did.
pub fn second_syn_ns(c: &Connection) -> Option<i64> {
    c.retransmits.as_ref().and_then(|log| log.syn.get(1)).map(|s| s.time_ns)
}

/// The client re-sent its SYN, and no SYN-ACK nor RST answered the first before the re-send.
fn syn_unanswered(c: &Connection) -> bool {
    if c.syn_count < 2 {
        return false;
    }
    let Some(second) = second_syn_ns(c) else { return c.synack_time_ns.get().is_none() };
    let synack_first = c.synack_time_ns.get().is_some_and(|t| t < second);
    let rst_first = c.milestones.first_rst().is_some_and(|r| r.from == Side::Server && r.time_ns < second);
    !synack_first && !rst_first
}

fn stray_ack_reset(c: &Connection) -> bool {
    let Some(r) = c.milestones.first_rst() else { return false };
    r.from == Side::Client && r.answers == Some(PacketRole::Ack) && c.synack_time_ns.get().is_none_or(|t| r.time_ns < t)
}

/// The span whose place in time says which listener window a connection's trouble belongs to:
/// from its first SYN to its SYN-ACK (or last SYN) when the SYN went unanswered, else from its
/// first request to the server's acknowledgement (or its last packet).
pub fn trouble_span(c: &Connection, facts: Facts) -> (i64, i64) {
    let (start, end) = if facts.contains(Fact::SynUnanswered) {
        let last_syn = c.retransmits.as_ref().and_then(|log| log.syn.last()).map(|s| s.time_ns);
        (c.syn_time_ns.get().unwrap_or(c.first_time_ns), c.synack_time_ns.get().or(last_syn).unwrap_or(c.last_time_ns))
    } else {
        let m = &c.milestones;
        (m.client_data_ns.get().unwrap_or(c.first_time_ns), m.client_data_acked_ns.get().unwrap_or(c.last_time_ns))
    };
    (start, end.max(start))
}

/// The span in which a connection with a queue sign shows the listener's accept queue full:
/// from its first SYN if that went unanswered, else the client's handshake ACK (or its first
/// request, or the RST), to the moment it got
/// through (the server acknowledged or answered the request) or its last packet.
pub fn queue_full_span(c: &Connection) -> (i64, i64) {
    let m = &c.milestones;
    // Its own SYN dropped first: the queue was full then already.
    let dropped_syn = if syn_unanswered(c) { c.syn_time_ns.get() } else { None };
    let start = dropped_syn
        .or(c.handshake_ack_time_ns.get())
        .or(m.client_data_ns.get())
        .or(m.first_rst().map(|r| r.time_ns))
        .unwrap_or(c.first_time_ns);
    let through = match (m.client_data_acked_ns.get(), m.server_data_ns.get()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let end = through.or(m.first_rst().map(|r| r.time_ns)).unwrap_or(c.last_time_ns);
    (start, end.max(start))
}

/// More client bytes after the server's FIN than a TLS close_notify alert holds: at most 85
/// (TLS 1.2, CBC with SHA-384: a 5-byte header, a 16-byte IV, the 2-byte alert and its 48-byte
/// MAC padded to 64; 24 in TLS 1.3). A TLS client answers the server's close_notify with its
/// own after the server's FIN: that is no request.
pub const TLS_ALERT_MAX_BYTES: u32 = 85;

/// The client sent data and the server sent none after the client's last data began. A TLS
/// alert after the server's FIN is no request: what came before it is unknown, taken as answered.
pub fn last_request_unanswered(c: &Connection) -> bool {
    let m = &c.milestones;
    let Some(last_request) = m.client_last_data_ns.get().or(m.client_data_ns.get()) else { return false };
    let alert_after_close = data_after_server_close(c) && !request_after_server_close(c);
    !alert_after_close && m.server_last_data_ns.get().or(m.server_data_ns.get()).is_none_or(|answered| answered < last_request)
}

/// The client's last data came after the server's first FIN.
fn data_after_server_close(c: &Connection) -> bool {
    let m = &c.milestones;
    m.server_closed_ns.get().zip(m.client_last_data_ns.get()).is_some_and(|(closed, last)| closed < last)
}

/// The client sent a request after the server's first FIN.
pub fn request_after_server_close(c: &Connection) -> bool {
    data_after_server_close(c) && c.milestones.client_bytes_after_server_close > TLS_ALERT_MAX_BYTES
}

/// The fact an ICMP error of `class` marks its connection with; none for a packet too big,
/// which the path MTU facts read instead. `VOCABULARY["icmp_facts"]` lists the kinds of each.
pub fn icmp_fact(class: IcmpClass) -> Option<Fact> {
    match class {
        IcmpClass::Prohibited => Some(Fact::IcmpProhibited),
        IcmpClass::NoRoute => Some(Fact::IcmpNoRoute),
        IcmpClass::PortUnreachable => Some(Fact::IcmpPortUnreachable),
        IcmpClass::TtlExceeded => Some(Fact::IcmpTtlExceeded),
        IcmpClass::TooBig => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::flags::PSH;
    use crate::flow::wire::*;

    /// A request at 3 ms, acknowledged at 4 ms, answered (500 bytes) at `answer_ms`; the client's
    /// FIN at 1,003 ms acknowledging `fin_acks` bytes of the answer, and its RST at 1,005 ms.
    fn read_timeout(answer_ms: i64, fin_acks: u32) -> Wire {
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(answer_ms, S, PSH | ACK, SISN + 1, CISN + 101, 500);
        w.send(1_003, C, FIN | ACK, CISN + 101, SISN + 1 + fin_acks, 0);
        w.send(1_005, C, RST, CISN + 102, 0, 0);
        w
    }

    #[test]
    fn test_a_facts_rule_is_its_only_sentence() {
        // `slug_enum!` makes the rule the doc comment: a `///` beside it would say it twice.
        let source = include_str!("facts.rs");
        let declaration = source.split("pub enum Fact {").nth(1).unwrap().split("\n    }\n}").next().unwrap();
        assert!(declaration.lines().all(|line| !line.trim_start().starts_with("///")));
        assert!(Fact::ALL.iter().all(|f| !f.rule().is_empty()));
    }

    #[test]
    fn test_a_fact_set_holds_more_than_32_facts() {
        let mut f = Facts::default();
        f.0 |= 1 << 40;
        assert_eq!(f.bits(), 1 << 40);
        for fact in Fact::ALL {
            f.insert(fact);
        }
        assert!(Fact::ALL.iter().all(|&fact| f.contains(fact)));
    }

    #[test]
    fn test_close_acknowledging_none_of_the_answer_is_an_answer_that_crossed_it() {
        // Captured at the server: the answer left at 970 ms, the client's FIN (its 1 s read
        // timeout) was on its way and acknowledged none of it.
        assert!(answer_crossed_close(read_timeout(970, 0).conn()));
    }

    /// Captured at the server, 1.4 s round trip: the client's SYN timer fires at 1 s, the server
    /// answers the re-sent SYN, and the client's ACK comes back echoing `echoed` (TSval).
    fn slow_handshake(echoed: u32) -> Wire {
        use crate::decode::TcpOptions;
        let ts = |val: u32, echo: u32| TcpOptions { timestamp: Some((val, echo)), ..plain() };
        let mut w = Wire::new();
        w.send_opts(0, C, SYN, CISN, 0, 0, ts(100, 0));
        w.send_opts(1, S, SYN | ACK, SISN, CISN + 1, 0, ts(7_000, 100));
        w.send_opts(1_000, C, SYN, CISN, 0, 0, ts(1_100, 0));
        w.send_opts(1_001, S, SYN | ACK, SISN, CISN + 1, 0, ts(8_000, 100));
        w.send_opts(1_401, C, ACK, CISN + 1, SISN + 1, 0, TcpOptions { timestamp: Some((1_500, echoed)), ..TcpOptions::default() });
        w
    }

    #[test]
    fn test_handshake_ack_echoing_the_first_synack_makes_the_syn_resend_spurious() {
        use crate::detect::checks::{self, Check};
        assert!(syn_resend_spurious(slow_handshake(7_000).conn()));
        assert!(checks::of(slow_handshake(7_000).conn()).failed(Check::FirstSynAnswerLost));
        // Echoing the second: the first SYN-ACK was lost on the way.
        assert!(!syn_resend_spurious(slow_handshake(8_000).conn()));
        assert!(checks::of(slow_handshake(8_000).conn()).held(Check::FirstSynAnswerLost));
    }

    /// Captured at the client on a path of `rtt` ms: SYN, SYN again at 1 s, the first SYN-ACK
    /// `answer_after` ms after the second SYN, the request, its ACK a round trip later.
    fn slow_handshake_at_client(rtt: i64, answer_after: i64) -> Wire {
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1_000, C, SYN, CISN, 0, 0);
        let synack = 1_000 + answer_after;
        w.send(synack, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(synack + 1, C, ACK, CISN + 1, SISN + 1, 0);
        w.request(synack + 2, &[]);
        w.send(synack + 2 + rtt, S, ACK, SISN + 1, CISN + 101, 0);
        w
    }

    #[test]
    fn test_synack_sooner_after_the_resent_syn_than_a_round_trip_answered_the_first_syn() {
        // 1.4 s round trip: the answer to the first SYN came 0.4 s after the second was sent.
        assert!(syn_resend_spurious(slow_handshake_at_client(1_400, 400).conn()));
        // 0.3 s round trip, the answer 0.3 s after the second SYN: it may answer either.
        assert_eq!(first_syn_answer_lost(slow_handshake_at_client(300, 300).conn()), None);
        // A round trip within the longest delayed ACK tells nothing.
        assert_eq!(first_syn_answer_lost(slow_handshake_at_client(150, 10).conn()), None);
    }

    #[test]
    fn test_close_after_taking_the_answer_is_no_crossing() {
        assert!(!answer_crossed_close(read_timeout(970, 500).conn()));
    }
}
