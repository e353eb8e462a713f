//! Verdicts: what happened to each connection (its outcome), what went wrong on the way (its
//! symptoms), and each retransmission series timed against the kernel's schedule. The rules
//! are in docs/diagnosis.md; they read only the connection's record.

pub mod checks;
pub mod digest;
pub mod episodes;
pub mod facts;
pub mod felt;
pub mod marks;
pub mod moments;
pub mod icmp;
pub mod probes;
pub mod scans;
pub mod schedule;
pub mod servers;
pub mod settings;
pub mod timeouts;
pub mod timings;
pub mod trimmed;
pub mod worst;

use crate::flow::connection::{Connection, RstFacts, Send};
use crate::flow::{FrameRef, PacketRole, Side};
use schedule::Schedule;

/// How late a retransmission may be and still be the one the schedule predicts.
const SLACK_NS: i64 = 1_000_000_000;
/// A request unacknowledged this long, with no SYN-ACK re-sent, had no request socket behind it.
const COOKIE_STALL_NS: i64 = 1_000_000_000;

crate::slugs::slug_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Outcome {
        Completed => "completed",
        Open => "open",
        Refused => "refused",
        TimedOut => "timed_out",
        Abandoned => "abandoned",
        ResetByServer => "reset_by_server",
        ResetByClient => "reset_by_client",
        Partial => "partial",
        /// An ICMP error answered the client's SYN and ended its connect() (detect::icmp).
        Unreachable => "unreachable",
        /// The server closed (FIN) with the client's last request taken and not a byte of answer to
        /// it, before the client closed: its application closed the socket or died
        /// (`closed_by_server`).
        ClosedByServer => "closed_by_server",
    }
}

impl Outcome {
    /// The connection failed: it was refused, timed out, abandoned, reset, closed unanswered, or
    /// an ICMP error ended its connect().
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Refused
                | Outcome::TimedOut
                | Outcome::Abandoned
                | Outcome::ResetByServer
                | Outcome::ResetByClient
                | Outcome::Unreachable
                | Outcome::ClosedByServer
        )
    }
}

crate::slugs::slug_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Symptom {
        SynRetransmitted => "syn_retransmitted",
        SynackRetransmitted => "synack_retransmitted",
        FinalAckDropped => "final_ack_dropped",
        RequestUnacked => "request_unacked",
        DataRetransmitted => "data_retransmitted",
        SyncookieSuspected => "syncookie_suspected",
        ResetAfterAck => "reset_after_ack",
        ResetAfterExpiry => "reset_after_expiry",
        Rejected => "rejected",
        TfoFallback => "tfo_fallback",
        DeferAcceptSuspected => "defer_accept_suspected",
        SynAfterRst => "syn_after_rst",
        /// Data re-sent that the receiver reported as received twice (D-SACK, RFC 2883 §4).
        SpuriousRetransmission => "spurious_retransmission",
        /// Full-size data re-sent and never acknowledged while smaller packets got through
        /// (detect::icmp::black_hole).
        MtuBlackHole => "mtu_black_hole",
    }
}

/// A set of symptoms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Symptoms(u16);

const _: () = assert!(Symptom::COUNT <= u16::BITS as usize, "a symptom set is a u16");

impl Symptoms {
    pub fn insert(&mut self, s: Symptom) {
        self.0 |= 1 << s.index();
    }

    pub fn contains(self, s: Symptom) -> bool {
        self.0 & (1 << s.index()) != 0
    }

    pub fn iter(self) -> impl Iterator<Item = Symptom> {
        Symptom::ALL.into_iter().filter(move |&s| self.contains(s))
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

crate::slugs::slug_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum SeriesKind {
        Syn => "syn",
        Synack => "synack",
        Data => "data",
    }
}

/// One send of a series, timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedSend {
    pub at: FrameRef,
    pub time_ns: i64,
    /// Since the previous send (none for the first).
    pub interval_ns: Option<i64>,
    /// What the schedule predicts for that interval (none for the first, or a triggered send).
    pub expected_ns: Option<i64>,
    pub triggered: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    pub kind: SeriesKind,
    pub from: Side,
    /// For data: the absolute sequence number re-sent.
    pub seq: Option<u32>,
    pub schedule: Schedule,
    pub sends: Vec<TimedSend>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: Outcome,
    pub symptoms: Symptoms,
    pub series: Vec<Series>,
    /// What retransmissions cost the connection.
    pub added_latency_ns: i64,
}

/// The verdict on `c`, for a capture that ends at `end_ns`.
pub fn judge(c: &Connection, end_ns: i64) -> Verdict {
    let series = timed_series(c);
    Verdict { outcome: outcome(c, end_ns), symptoms: symptoms(c), added_latency_ns: added_latency_ns(c), series }
}

/// Only the outcome and symptoms (what the summary counts), without timing the series.
pub fn classify(c: &Connection, end_ns: i64) -> (Outcome, Symptoms) {
    (outcome(c, end_ns), symptoms(c))
}

fn syn_sends(c: &Connection) -> Vec<Send> {
    match &c.retransmits {
        Some(log) if !log.syn.is_empty() => log.syn.clone(),
        _ => c.syn_time_ns.get().map(|time_ns| Send { at: c.first, time_ns, triggered: false }).into_iter().collect(),
    }
}

fn intervals(sends: &[Send]) -> Vec<i64> {
    sends.windows(2).map(|w| w[1].time_ns - w[0].time_ns).collect()
}

fn outcome(c: &Connection, end_ns: i64) -> Outcome {
    // What the capture did not watch tells nothing: a gap after the connection ends it there.
    let end_ns = c.seen_until_ns.get().map_or(end_ns, |gap| gap.min(end_ns));
    if c.partial {
        return Outcome::Partial;
    }
    // The client closed at its read timeout as the answer was on its way: what follows (its
    // RSTs for the late answer) is the end of an exchange it had already given up.
    if facts::answer_crossed_close(c) {
        return Outcome::Abandoned;
    }
    if let Some(rst) = c.milestones.first_rst().filter(|r| !answered_anyway(c, r) && !after_both_fins(c, r)) {
        return match (rst.from, rst.answers) {
            (Side::Server, Some(PacketRole::Syn)) => Outcome::Refused,
            (Side::Server, _) => Outcome::ResetByServer,
            (Side::Client, _) => Outcome::ResetByClient,
        };
    }
    if icmp::connect_error(c).is_some() {
        return Outcome::Unreachable;
    }
    let fin = c.counts.iter().any(|d| d.fin);
    if c.handshake_completed() {
        let client_sent = c.milestones.client_data_ns.get().is_some();
        let server_sent = c.milestones.server_data_ns.get().is_some();
        return match (client_sent, server_sent, fin) {
            (true, _, true) if closed_by_server(c) => Outcome::ClosedByServer,
            (true, true, _) => Outcome::Completed,
            (true, false, true) => Outcome::Abandoned,
            (_, _, true) => Outcome::Completed,
            (true, false, false) if request_given_up(c, end_ns) => Outcome::Abandoned,
            _ => Outcome::Open,
        };
    }
    let sends = syn_sends(c);
    let schedule = schedule::fit_syn(&intervals(&sends));
    if c.syn_count >= schedule.syn_sends() {
        return Outcome::TimedOut;
    }
    // Still within its SYN retries when the capture ended, or stopped early?
    let Some(last) = sends.last() else { return Outcome::Open };
    let next_due = last.time_ns + schedule.interval_ns(c.syn_count.max(1)) + SLACK_NS;
    if end_ns > next_due {
        Outcome::Abandoned
    } else {
        Outcome::Open
    }
}

fn symptoms(c: &Connection) -> Symptoms {
    let mut s = Symptoms::default();
    // SYNs re-sent after the server's RST had answered the SYN went unanswered by no one.
    if c.syn_count > 1 + c.milestones.syns_after_rst {
        s.insert(Symptom::SynRetransmitted);
    }
    if c.milestones.syns_after_rst > 0 {
        s.insert(Symptom::SynAfterRst);
    }
    if c.synack_count > 1 {
        s.insert(Symptom::SynackRetransmitted);
    }
    if c.milestones.syn_data_acked == Some(false) {
        s.insert(Symptom::TfoFallback);
    }
    if let Some(log) = &c.retransmits {
        // A SYN-ACK re-sent after the client's ACK (its checks were weighed: not_defer_accept is
        // always tested then): the ACK was dropped, unless a competing explanation's check says
        // otherwise (detect::checks).
        let weighed = checks::of(c);
        if weighed.failed(checks::Check::NotDeferAccept) {
            s.insert(Symptom::DeferAcceptSuspected);
        } else if weighed.held(checks::Check::NotDeferAccept) && !weighed.explained_otherwise() {
            s.insert(Symptom::FinalAckDropped);
        }
        if log.data.iter().any(|d| d.into_half_open) {
            s.insert(Symptom::RequestUnacked);
        }
        if log.data.iter().any(|d| !d.into_half_open && !d.spurious()) {
            s.insert(Symptom::DataRetransmitted);
        }
        if log.data.iter().any(|d| d.spurious()) {
            s.insert(Symptom::SpuriousRetransmission);
        }
    }
    let total_data_retransmits: u32 = c.counts.iter().map(|d| d.data_retransmits).sum();
    let logged: usize = c.retransmits.as_ref().map_or(0, |l| l.data.iter().map(|d| d.sends.len().saturating_sub(1)).sum());
    // Re-sends beyond the log (more series than it keeps) count too, unless the only logged
    // series was D-SACKed: its first send was the segment reordered, counted once more.
    let only_spurious = s.contains(Symptom::SpuriousRetransmission) && !s.contains(Symptom::DataRetransmitted);
    if total_data_retransmits as usize > logged && !s.contains(Symptom::RequestUnacked) && !only_spurious {
        s.insert(Symptom::DataRetransmitted);
    }
    if icmp::black_hole(c).is_some() {
        s.insert(Symptom::MtuBlackHole);
    }
    if syncookie_suspected(c, s) {
        s.insert(Symptom::SyncookieSuspected);
    }
    if let Some(rst) = c.milestones.first_rst().filter(|r| !answered_anyway(c, r)) {
        match (rst.from, rst.answers) {
            (_, Some(PacketRole::Syn)) => s.insert(Symptom::Rejected),
            (Side::Server, Some(PacketRole::HandshakeAck)) if embryonic(c) => s.insert(Symptom::ResetAfterAck),
            (Side::Server, Some(PacketRole::Data)) if embryonic(c) && answers_first_data(c, &rst) => s.insert(Symptom::ResetAfterAck),
            (Side::Server, Some(PacketRole::Retransmit)) => s.insert(Symptom::ResetAfterExpiry),
            _ => {}
        }
    }
    s
}

/// The client's request was never acknowledged, it stopped re-sending it, and the capture went
/// on past the moment its kernel's next re-send was due: the client gave up (a kernel still
/// trying would have sent it again: Linux v6.6 net/ipv4/tcp_timer.c: tcp_retransmit_timer()).
fn request_given_up(c: &Connection, end_ns: i64) -> bool {
    if c.milestones.client_data_acked_ns.get().is_some() {
        return false;
    }
    let series = timed_series(c);
    let Some(request) = series.iter().filter(|s| s.kind == SeriesKind::Data && s.from == Side::Client).max_by_key(|s| s.sends.len())
    else {
        return false;
    };
    let (Some(last), retries) = (request.sends.last(), request.sends.iter().skip(1).filter(|t| !t.triggered).count() as u32) else {
        return false;
    };
    end_ns > last.time_ns + request.schedule.interval_ns(retries + 1) + SLACK_NS
}

/// The server closed (FIN, no RST) with the client's last request unanswered, and before the
/// client closed: its application called close() (or exited) with the request unanswered (Linux
/// v6.6 net/ipv4/tcp.c: tcp_close() sends a FIN when nothing unread is left, an RST otherwise).
/// The request may be the first, or a later one on a keep-alive connection whose earlier
/// requests were answered (php-fpm's worker exiting after `pm.max_requests` as nginx sends the
/// next). That later request may even follow the FIN: a FastCGI server shuts its side down
/// and reads what still comes before it closes (php-fpm's fcgi_close()), so no RST answers it.
/// nginx logs "upstream prematurely closed connection while reading response header from
/// upstream", and retries the request on another connection or answers 502.
fn closed_by_server(c: &Connection) -> bool {
    let m = &c.milestones;
    let (Some(server_closed), Some(request)) = (m.server_closed_ns.get(), m.client_last_data_ns.get().or(m.client_data_ns.get())) else {
        return false;
    };
    if !facts::last_request_unanswered(c) || m.client_closed_ns.get().is_some_and(|client_closed| client_closed <= server_closed) {
        return false;
    }
    // A request after the FIN counts on a connection the server had answered before: data after a
    // first FIN with nothing answered is an upload to a server that half-closed.
    request < server_closed || (m.server_data_ns.get().is_some() && facts::request_after_server_close(c))
}

/// An RST answering the SYN, and then the handshake completed all the same: the port was open and
/// the RST was forged or stale (RFC 5961 §3: an in-window RST would have ended a real attempt).
fn answered_anyway(c: &Connection, rst: &RstFacts) -> bool {
    rst.answers == Some(PacketRole::Syn) && c.handshake_ack_time_ns.get().is_some_and(|t| t > rst.time_ns)
}

/// An RST after both sides had sent their FIN: the exchange had ended for both applications,
/// and a socket already closed answers a late segment (a copy, a re-send that crossed the
/// close) with RST (RFC 9293 §3.10.7.1; Linux v6.6 net/ipv4/tcp_ipv4.c: tcp_v4_send_reset()
/// when no socket is left). It changes nothing of how the exchange went.
fn after_both_fins(c: &Connection, rst: &RstFacts) -> bool {
    let m = &c.milestones;
    let fins = c.counts.iter().all(|d| d.fin);
    let closed_before = |t: Option<i64>| t.is_some_and(|t| t < rst.time_ns);
    c.revived_after_close || (fins && closed_before(m.client_closed_ns.get()) && closed_before(m.server_closed_ns.get()))
}

/// The server had neither acknowledged client data nor sent any: no socket was established on
/// its side. tcp_abort_on_overflow's RST comes from there (Linux v6.6 net/ipv4/tcp_minisocks.c:
/// tcp_check_req(): embryonic_reset); an application that answered and then reset is not it.
fn embryonic(c: &Connection) -> bool {
    c.milestones.client_data_acked_ns.get().is_none() && c.milestones.server_data_ns.get().is_none()
}

/// The server re-sent its SYN-ACK once after the client's bare ACK, with nothing from the client
/// before that re-send: the listener has TCP_DEFER_ACCEPT (Apache's default, 30 s; nginx's
/// `listen ... deferred`, 1 s). Linux drops a bare ACK while the request has timed out fewer
/// times than the defer period's retransmissions and notes it (Linux v6.6
/// net/ipv4/tcp_minisocks.c: tcp_check_req(): `inet_rsk(req)->acked`); the request timer then
/// re-sends nothing until the period's last retransmission (net/ipv4/inet_connection_sock.c:
/// syn_ack_recalc(); the period in retransmissions is net/ipv4/tcp.c: secs_to_retrans(), 1 for
/// 1 s), and the client's ACK to that one re-send is taken. With 1 s the re-send comes at the
/// timer's first time, 1 s after the SYN-ACK, as a full accept queue's first re-send does. What
/// tells them apart is the client's data: it completes a deferred handshake at once (there is no
/// re-send after it), while a full queue drops it too and re-sends the SYN-ACK at every timer
/// while it stays full. A full queue that drained within the second, for a client that sent
/// nothing, looks the same as a deferring listener: no request was held back, and nothing in the
/// capture says a queue was full.
pub(crate) fn defer_accept_suspected(c: &Connection, after_ack: &[Send]) -> bool {
    let [resend] = after_ack else { return false };
    // Data sent again counts: a capture that began mid-connection sees the request's re-sends only.
    let first_sent = c.milestones.client_data_ns.get().is_some_and(|t| t < resend.time_ns);
    let sent_again = c.retransmits.as_ref().is_some_and(|log| {
        log.data.iter().any(|d| d.from == Side::Client && d.sends.first().is_some_and(|s| s.time_ns < resend.time_ns))
    });
    !first_sent && !sent_again
}

/// The RST answers a data segment sent at the time of the client's first data: that segment.
fn answers_first_data(c: &Connection, rst: &RstFacts) -> bool {
    let answered_ns = rst.after_ns.map(|after| rst.time_ns - after);
    answered_ns.is_some() && answered_ns == c.milestones.client_data_ns.get()
}

/// The handshake completed, the client's request then went unacknowledged for over a second,
/// and the server's SYN-ACK timer never re-sent it: no request socket was waiting for that ACK,
/// as when the SYN-ACK was a cookie. A re-send answering a client SYN proves nothing: a cookie
/// listener answers every SYN. The SYN-ACK's MSS says nothing either: it is the route's advmss
/// with or without a cookie (net/ipv4/tcp_output.c: tcp_make_synack()). But a cookie SYN-ACK
/// without timestamps has no window scale and no SACK (net/ipv4/tcp_input.c:
/// tcp_conn_request(): tcp_clear_options()), so one that has them was not a cookie. A request
/// lost to a path MTU black hole stalls alike: not a cookie either.
fn syncookie_suspected(c: &Connection, s: Symptoms) -> bool {
    let (Some(ack_ns), Some(data_ns)) = (c.handshake_ack_time_ns.get(), c.milestones.client_data_ns.get()) else { return false };
    let stalled_until = c.milestones.client_data_acked_ns.get().unwrap_or(c.last_time_ns);
    // A request too big for the path stalls as long, with no cookie: smaller packets got through.
    let stalled = s.contains(Symptom::RequestUnacked)
        && !s.contains(Symptom::MtuBlackHole)
        && stalled_until - data_ns.max(ack_ns) > COOKIE_STALL_NS;
    let timer_resent = c.retransmits.as_ref().is_some_and(|log| log.synack.iter().skip(1).any(|send| !send.triggered));
    let cookie_options = c.options[Side::Server.index()]
        .is_none_or(|o| o.timestamps || (o.window_scale.is_none() && !o.sack_permitted));
    stalled && !timer_resent && cookie_options
}

fn timed_series(c: &Connection) -> Vec<Series> {
    let Some(log) = &c.retransmits else { return Vec::new() };
    let mut out = Vec::new();
    if log.syn.len() > 1 {
        let schedule = schedule::fit_syn(&intervals(&log.syn));
        out.push(time(SeriesKind::Syn, Side::Client, None, schedule, &log.syn));
    }
    if log.synack.len() > 1 {
        out.push(time(SeriesKind::Synack, Side::Server, None, Schedule::Synack, &log.synack));
    }
    let timestamps = c.options.iter().all(|o| o.is_some_and(|o| o.timestamps));
    // Linux's default (net.ipv4.tcp_sack = 1) when a handshake was not captured.
    let sack = c.options.iter().all(|o| o.is_none_or(|o| o.sack_permitted));
    for d in &log.data {
        // Karn: no round-trip sample from a SYN (SYN-ACK) the sender re-sent, unless timestamps.
        let resent = match d.from {
            Side::Client => c.syn_count > 1,
            Side::Server => c.synack_count > 1,
        };
        let rtt = if resent && !timestamps { None } else { Some(round_trip_ns(c).unwrap_or(0)) };
        let schedule = Schedule::DataRto(schedule::data_timers(rtt, sack));
        out.push(time(SeriesKind::Data, d.from, Some(d.seq), schedule, &d.sends));
    }
    out
}

/// Each send's interval, and the schedule's for timer-driven ones (triggered sends do not count).
fn time(kind: SeriesKind, from: Side, seq: Option<u32>, schedule: Schedule, sends: &[Send]) -> Series {
    let mut timed = Vec::with_capacity(sends.len());
    let mut retries = 0u32;
    let mut previous: Option<i64> = None;
    for send in sends {
        let interval_ns = previous.map(|p| send.time_ns - p);
        let expected_ns = match (previous, send.triggered) {
            (Some(_), false) => {
                retries += 1;
                Some(schedule.interval_ns(retries))
            }
            _ => None,
        };
        timed.push(TimedSend { at: send.at, time_ns: send.time_ns, interval_ns, expected_ns, triggered: send.triggered });
        previous = Some(send.time_ns);
    }
    Series { kind, from, seq, schedule, sends: timed }
}

/// The handshake's round trip: from the SYN that was answered to the client's ACK.
fn round_trip_ns(c: &Connection) -> Option<i64> {
    let ack = c.handshake_ack_time_ns.get()?;
    let last_syn = syn_sends(c).iter().filter(|s| s.time_ns <= ack).map(|s| s.time_ns).max()?;
    Some(ack - last_syn)
}

/// From the first to the last SYN, plus from the client's first data to its last re-send into
/// a half-open connection.
fn added_latency_ns(c: &Connection) -> i64 {
    let span = |sends: &[Send]| match (sends.first(), sends.last()) {
        (Some(a), Some(b)) => b.time_ns - a.time_ns,
        _ => 0,
    };
    let Some(log) = &c.retransmits else { return 0 };
    let request = log.data.iter().filter(|d| d.into_half_open).map(|d| span(&d.sends)).max().unwrap_or(0);
    span(&log.syn) + request
}

#[cfg(test)]
mod tests {
    //! Verdicts on connections built by the tracker from hand-made segments.

    use super::*;
    use crate::decode::{flags, TcpOptions};
    use crate::flow::wire::*;

    const PA: u8 = flags::PSH | flags::ACK;

    fn with_timestamps() -> TcpOptions {
        TcpOptions { timestamp: Some((1, 0)), ..plain() }
    }

    /// A SYN-ACK as a cookie listener sends it to a SYN without timestamps: MSS only.
    fn mss_only(mss: u16) -> TcpOptions {
        TcpOptions { mss: Some(mss), ..TcpOptions::default() }
    }

    /// What the verdict tests send and read on a wire.
    impl Wire {
        fn syn(&mut self, ms: i64) {
            self.send_opts(ms, C, SYN, CISN, 0, 0, plain());
        }

        /// The verdict on the only connection, for a capture ending at `end_ms` (at least its last packet).
        fn verdict_at(self, end_ms: i64) -> Verdict {
            let end_ms = end_ms.max(self.last_ms);
            let conns = self.tracker.connections();
            assert_eq!(conns.len(), 1);
            judge(&conns[0], end_ms * MS)
        }

        fn verdict(self) -> Verdict {
            self.verdict_at(0)
        }
    }

    fn has(v: &Verdict, s: Symptom) -> bool {
        v.symptoms.contains(s)
    }

    /// The data re-sent was spurious, and no loss is counted.
    fn assert_spurious_not_lost(v: &Verdict) {
        assert!(has(v, Symptom::SpuriousRetransmission), "{:?}", v.symptoms);
        assert!(!has(v, Symptom::DataRetransmitted), "{:?}", v.symptoms);
    }

    /// Captured at the server, a 100 ms round trip to the client: the request answered, the
    /// answer re-sent at 330 ms, before the client's ACK of it.
    fn answer_resent_over_100ms_round_trip() -> Wire {
        let mut w = Wire::new();
        w.send_opts(0, C, SYN, CISN, 0, 0, plain());
        w.send_opts(1, S, SYN | ACK, SISN, CISN + 1, 0, plain());
        w.send(101, C, ACK, CISN + 1, SISN + 1, 0);
        w.send(102, C, PA, CISN + 1, SISN + 1, 100);
        w.send(103, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(104, S, PA, SISN + 1, CISN + 101, 100);
        w.send(330, S, PA, SISN + 1, CISN + 101, 100);
        w
    }

    fn expected_ms(series: &Series) -> Vec<Option<i64>> {
        series.sends.iter().map(|t| t.expected_ns.map(|e| e / MS)).collect()
    }

    // -------------------------------------------------------------------------------------
    // SYN retries: how many before ETIMEDOUT depends on the schedule

    #[test]
    fn test_seven_linear_syns_still_have_retries_left() {
        let linear = [0, 1000, 2000, 3000, 4000, 5000, 7000];
        let mut w = Wire::new();
        linear.iter().for_each(|&t| w.syn(t));
        assert_eq!(w.verdict_at(7500).outcome, Outcome::Open, "the 8th SYN is due at 11 s");
        let mut w = Wire::new();
        linear.iter().for_each(|&t| w.syn(t));
        assert_eq!(w.verdict_at(20_000).outcome, Outcome::Abandoned);
    }

    #[test]
    fn test_eleven_linear_syns_time_out() {
        let mut w = Wire::new();
        [0, 1, 2, 3, 4, 5, 7, 11, 19, 35, 67].iter().for_each(|&s| w.syn(s * 1000));
        let v = w.verdict();
        assert_eq!(v.outcome, Outcome::TimedOut);
        assert_eq!(v.series[0].schedule, Schedule::SynLinear);
        assert_eq!(v.added_latency_ns, 67_000 * MS);
    }

    #[test]
    fn test_seven_exponential_syns_time_out() {
        let mut w = Wire::new();
        [0, 1, 3, 7, 15, 31, 63].iter().for_each(|&s| w.syn(s * 1000));
        let v = w.verdict();
        assert_eq!(v.outcome, Outcome::TimedOut);
        assert_eq!(v.series[0].schedule, Schedule::SynExponential);
    }

    #[test]
    fn test_six_legacy_syns_time_out() {
        let mut w = Wire::new();
        [0, 3, 9, 21, 45, 93].iter().for_each(|&s| w.syn(s * 1000));
        assert_eq!(w.verdict().outcome, Outcome::TimedOut);
    }

    // -------------------------------------------------------------------------------------
    // Resets

    #[test]
    fn test_rst_answering_the_first_data_is_reset_after_ack() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, RST, SISN + 1, 0, 0);
        let v = w.verdict();
        assert_eq!(v.outcome, Outcome::ResetByServer);
        assert!(has(&v, Symptom::ResetAfterAck), "{:?}", v.symptoms);
    }

    #[test]
    fn test_data_resent_and_dsacked_is_spurious_not_lost() {
        // The second segment is re-sent at 210 ms; the server's ACK reports it received twice.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(5, C, PA, CISN + 101, SISN + 1, 100);
        w.send(210, C, PA, CISN + 101, SISN + 1, 100);
        let dsack = TcpOptions { sack_blocks: 1, first_sack: Some((CISN + 101, CISN + 201)), ..TcpOptions::default() };
        w.send_opts(211, S, ACK, SISN + 1, CISN + 201, 0, dsack);
        w.send(212, S, PA, SISN + 1, CISN + 201, 50);
        assert!(checks::of(w.conn()).failed(checks::Check::ResendNotDsacked));
        assert_spurious_not_lost(&w.verdict());
    }

    #[test]
    fn test_data_resent_and_dsacked_inside_the_second_block_is_spurious_not_lost() {
        // RFC 2883 §4: above the ACK number, a first block inside the second is a D-SACK.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(5, C, PA, CISN + 101, SISN + 1, 100);
        w.send(6, C, PA, CISN + 201, SISN + 1, 100);
        w.send(210, C, PA, CISN + 201, SISN + 1, 100);
        let dsack = TcpOptions { sack_blocks: 2, first_sack: Some((CISN + 201, CISN + 301)), first_sack_in_second: true,
                                 ..TcpOptions::default() };
        w.send_opts(211, S, ACK, SISN + 1, CISN + 101, 0, dsack);
        w.send(212, S, ACK, SISN + 1, CISN + 301, 0);
        assert_spurious_not_lost(&w.verdict());
    }

    #[test]
    fn test_data_resent_and_acked_sooner_than_a_round_trip_is_spurious_not_lost() {
        // Captured at the server, a 100 ms round trip to the client: an ACK 5 ms after the re-send
        // answered the original.
        let mut w = answer_resent_over_100ms_round_trip();
        w.send(335, C, ACK, CISN + 101, SISN + 101, 0);
        assert_spurious_not_lost(&w.verdict());
        // The same ACK a round trip after the re-send: the re-send repaired a loss.
        let mut w = answer_resent_over_100ms_round_trip();
        w.send(431, C, ACK, CISN + 101, SISN + 101, 0);
        assert!(has(&w.verdict(), Symptom::DataRetransmitted));
    }

    #[test]
    fn test_established_reset_past_bytes_that_never_arrived_is_a_black_hole_at_the_receiver() {
        // Two full-size segments never reach the server; the client's RST 2.5 s later does.
        let mut w = Wire::new();
        w.handshake_plain();
        w.send(2502, C, RST | ACK, CISN + 1 + 2 * 1448, SISN + 1, 0);
        let hole = icmp::black_hole(w.conn()).expect("a black hole");
        assert_eq!((hole.from, hole.vanished, hole.largest_through), (C, Some(2 * 1448), Some(0)));
        assert!(has(&w.verdict(), Symptom::MtuBlackHole));
        // An RST just after the handshake: nothing lasted long enough to tell.
        let mut w = Wire::new();
        w.handshake_plain();
        w.send(5, C, RST | ACK, CISN + 1 + 2 * 1448, SISN + 1, 0);
        assert_eq!(icmp::black_hole(w.conn()), None);
        // The server acknowledged the bytes: they arrived, the capture missed them.
        let mut w = Wire::new();
        w.handshake_plain();
        w.send(3, C, PA, CISN + 2897, SISN + 1, 100);
        w.send(4, S, ACK, SISN + 1, CISN + 2997, 0);
        w.send(2502, C, RST | ACK, CISN + 2997, SISN + 1, 0);
        assert_eq!(icmp::black_hole(w.conn()), None);
        // A full-size segment got through: the path carries them.
        let mut w = Wire::new();
        w.handshake_plain();
        w.send(3, C, PA, CISN + 1, SISN + 1, 1448);
        w.send(4, S, ACK, SISN + 1, CISN + 1449, 0);
        w.send(2502, C, RST | ACK, CISN + 1449 + 2 * 1448, SISN + 1, 0);
        assert_eq!(icmp::black_hole(w.conn()), None);
    }

    #[test]
    fn test_request_resent_then_silence_past_the_next_rto_is_abandoned() {
        // Re-sent at 0.2 and 0.6 s, nothing after: the next re-send was due about 0.8 s later.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[205, 609]);
        assert_eq!(w.verdict_at(1000).outcome, Outcome::Open, "still within its next RTO");
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[205, 609]);
        assert_eq!(w.verdict_at(10_000).outcome, Outcome::Abandoned);
    }

    #[test]
    fn test_rst_after_both_fins_leaves_the_exchange_completed() {
        // Both closed; a late copy of the answer reached the client's closed socket: its RST.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, PA, SISN + 1, CISN + 101, 50);
        w.send(5, S, FIN | ACK, SISN + 51, CISN + 101, 0);
        w.send(6, C, FIN | ACK, CISN + 101, SISN + 52, 0);
        w.send(7, S, ACK, SISN + 52, CISN + 102, 0);
        w.send(40, C, RST, CISN + 102, 0, 0);
        assert_eq!(w.verdict().outcome, Outcome::Completed);
    }

    #[test]
    fn test_syns_stopping_before_a_gap_in_the_capture_are_not_abandoned() {
        // Two SYNs, then another connection's packet `later_ms` on: past the next SYN either way,
        // but across a silence longer than any TCP timer the capture did not watch this one.
        let judged = |later_ms: i64| {
            let mut w = Wire::new();
            w.syn(0);
            w.syn(1_000);
            w.client.port += 1;
            w.syn(later_ms);
            outcome(&w.conns()[0], later_ms * MS)
        };
        assert_eq!(judged(100_000), Outcome::Abandoned);
        assert_eq!(judged(300_000), Outcome::Open);
    }

    #[test]
    fn test_rst_answering_the_syn_then_a_completed_handshake_is_no_refusal() {
        // An RST injected before the real SYN-ACK: the handshake completes and data flows.
        let mut w = Wire::new();
        w.syn(0);
        w.send(1, S, RST | ACK, 0, CISN + 1, 0);
        w.send_opts(2, S, SYN | ACK, SISN, CISN + 1, 0, plain());
        w.send(3, C, ACK, CISN + 1, SISN + 1, 0);
        w.request(4, &[]);
        w.send(5, S, PA, SISN + 1, CISN + 101, 20);
        let v = w.verdict();
        assert_eq!(v.outcome, Outcome::Completed);
        assert!(!has(&v, Symptom::Rejected), "{:?}", v.symptoms);
    }

    #[test]
    fn test_rst_after_the_server_answered_is_no_reset_after_ack() {
        // The application took the request, answered and reset (SO_LINGER 0): not the kernel's
        // tcp_abort_on_overflow.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(5, S, PA, SISN + 1, CISN + 101, 20);
        w.send(6, S, RST, SISN + 21, 0, 0);
        let v = w.verdict();
        assert_eq!(v.outcome, Outcome::ResetByServer);
        assert!(!has(&v, Symptom::ResetAfterAck), "{:?}", v.symptoms);
    }

    #[test]
    fn test_rst_answering_later_data_is_no_reset_after_ack() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, PA, SISN + 1, CISN + 101, 50);
        w.send(1000, C, PA, CISN + 101, SISN + 51, 100);
        w.send(1001, S, RST, SISN + 51, 0, 0);
        let v = w.verdict();
        assert_eq!(v.outcome, Outcome::ResetByServer);
        assert!(v.symptoms.is_empty(), "{:?}", v.symptoms);
    }

    #[test]
    fn test_server_fin_after_the_request_without_answer_is_closed_by_server() {
        // The worker took the request and closed (exited) at 500 ms; the client's FIN answers it.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(500, S, FIN | ACK, SISN + 1, CISN + 101, 0);
        w.send(501, C, FIN | ACK, CISN + 101, SISN + 2, 0);
        assert_eq!(w.verdict().outcome, Outcome::ClosedByServer);
    }

    #[test]
    fn test_server_fin_after_a_later_request_on_a_kept_alive_connection_is_closed_by_server() {
        // The first request answered at 4 ms; the second at 10 ms meets the worker's exit
        // (php-fpm's pm.max_requests): the server's FIN, no answer.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, PA, SISN + 1, CISN + 101, 50);
        w.send(10, C, PA, CISN + 101, SISN + 51, 100);
        w.send(11, S, FIN | ACK, SISN + 51, CISN + 201, 0);
        w.send(12, C, FIN | ACK, CISN + 201, SISN + 52, 0);
        assert_eq!(w.verdict().outcome, Outcome::ClosedByServer);
    }

    #[test]
    fn test_request_after_the_fin_of_a_draining_server_is_closed_by_server() {
        // Answered at 4 ms; the server shuts its side down at 10 ms and reads on (php-fpm's
        // fcgi_close()); the proxy's next request at 11 ms gets only an ACK.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, PA, SISN + 1, CISN + 101, 50);
        w.send(10, S, FIN | ACK, SISN + 51, CISN + 101, 0);
        w.send(11, C, PA, CISN + 101, SISN + 52, 100);
        w.send(11, S, ACK, SISN + 52, CISN + 201, 0);
        w.send(12, C, FIN | ACK, CISN + 201, SISN + 52, 0);
        assert_eq!(w.verdict().outcome, Outcome::ClosedByServer);
    }

    #[test]
    fn test_a_tls_alert_after_the_server_fin_is_no_request() {
        // The server's close_notify and FIN; the client's close_notify (31 bytes) after them, then
        // its FIN (drained) or the server's RST (closed): neither is a request after the close.
        for reset in [false, true] {
            let mut w = Wire::new();
            w.handshake_plain();
            w.request(3, &[]);
            w.send(4, S, PA, SISN + 1, CISN + 101, 50);
            w.send(500, S, PA, SISN + 51, CISN + 101, 31);
            w.send(500, S, FIN | ACK, SISN + 82, CISN + 101, 0);
            w.send(501, C, PA, CISN + 101, SISN + 83, 31);
            if reset {
                w.send(501, S, RST, SISN + 83, 0, 0);
            } else {
                w.send(502, C, FIN | ACK, CISN + 132, SISN + 83, 0);
            }
            let end = w.last_ms * MS;
            let conns = w.tracker.connections();
            let (outcome, symptoms) = classify(&conns[0], end);
            assert_ne!(outcome, Outcome::ClosedByServer);
            let f = facts::of(&conns[0], outcome, symptoms);
            assert!(!f.contains(facts::Fact::RequestAfterServerClose), "reset {reset}");
            assert!(!f.contains(facts::Fact::RequestUnanswered), "reset {reset}");
        }
    }

    #[test]
    fn test_server_fin_after_answering_the_last_request_is_completed() {
        // Two requests, both answered, then the server closes the idle connection.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, PA, SISN + 1, CISN + 101, 50);
        w.send(10, C, PA, CISN + 101, SISN + 51, 100);
        w.send(11, S, PA, SISN + 51, CISN + 201, 50);
        w.send(500, S, FIN | ACK, SISN + 101, CISN + 201, 0);
        w.send(501, C, FIN | ACK, CISN + 201, SISN + 102, 0);
        assert_eq!(w.verdict().outcome, Outcome::Completed);
    }

    #[test]
    fn test_client_fin_first_is_abandoned_not_closed_by_server() {
        // The client's read timeout at 500 ms, the server's FIN after it.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(500, C, FIN | ACK, CISN + 101, SISN + 1, 0);
        w.send(501, S, FIN | ACK, SISN + 1, CISN + 102, 0);
        assert_eq!(w.verdict().outcome, Outcome::Abandoned);
    }

    #[test]
    fn test_server_fin_before_any_request_then_data_is_not_closed_by_server() {
        // The server closed first (a half-close) and the client sent data after it: no request
        // was pending when the server closed.
        let mut w = Wire::new();
        w.handshake_plain();
        w.send(3, S, FIN | ACK, SISN + 1, CISN + 1, 0);
        w.request(4, &[]);
        w.send(5, S, ACK, SISN + 2, CISN + 101, 0);
        w.send(6, C, FIN | ACK, CISN + 101, SISN + 2, 0);
        assert_ne!(w.verdict().outcome, Outcome::ClosedByServer);
    }

    #[test]
    fn test_request_after_the_server_fin_answered_by_rst_has_the_fact() {
        // An idle keep-alive connection: answered at 4 ms, closed by the server at 500 ms, a new
        // request at 1000 ms, answered by the server's RST (Linux: tcp_timewait_state_process()).
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(4, S, PA, SISN + 1, CISN + 101, 50);
        w.send(500, S, FIN | ACK, SISN + 51, CISN + 101, 0);
        w.send(501, C, ACK, CISN + 101, SISN + 52, 0);
        w.send(1000, C, PA, CISN + 101, SISN + 52, 100);
        w.send(1001, S, RST, SISN + 52, 0, 0);
        let end = w.last_ms * MS;
        let conns = w.tracker.connections();
        let c = &conns[0];
        let (outcome, symptoms) = classify(c, end);
        assert_eq!(outcome, Outcome::ResetByServer);
        let f = facts::of(c, outcome, symptoms);
        assert!(f.contains(facts::Fact::RequestAfterServerClose));
        assert!(f.contains(facts::Fact::RequestUnanswered));
    }

    #[test]
    fn test_rst_answering_a_retransmission_is_reset_after_expiry() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[203]);
        w.send(204, S, RST, SISN + 1, 0, 0);
        let v = w.verdict();
        assert!(has(&v, Symptom::ResetAfterExpiry) && !has(&v, Symptom::ResetAfterAck), "{:?}", v.symptoms);
    }

    // -------------------------------------------------------------------------------------
    // SYN cookies

    /// Handshake with these options, then the request re-sent for 1.6 s and never acknowledged.
    fn stalled(client: TcpOptions, server: TcpOptions) -> Wire {
        let mut w = Wire::new();
        w.handshake_with(client, server);
        w.request(3, &[203, 403, 803, 1603]);
        w
    }

    #[test]
    fn test_cookie_shaped_synack_with_a_stall_is_suspected() {
        for (client, server) in [(plain(), mss_only(1460)), (plain(), mss_only(1400)), (with_timestamps(), with_timestamps())] {
            let v = stalled(client, server).verdict();
            assert!(has(&v, Symptom::SyncookieSuspected), "{server:?}: {:?}", v.symptoms);
            assert!(has(&v, Symptom::RequestUnacked));
        }
    }

    #[test]
    fn test_synack_with_window_scale_or_sack_but_no_timestamps_was_no_cookie() {
        let sack_only = TcpOptions { mss: Some(1460), sack_permitted: true, ..TcpOptions::default() };
        for server in [plain(), sack_only] {
            let v = stalled(plain(), server).verdict();
            assert!(!has(&v, Symptom::SyncookieSuspected), "{server:?}: {:?}", v.symptoms);
        }
    }

    #[test]
    fn test_stall_under_a_second_is_no_cookie() {
        let mut w = Wire::new();
        w.handshake_with(plain(), mss_only(1460));
        w.request(3, &[203, 403]);
        w.send(500, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(1500, C, ACK, CISN + 101, SISN + 1, 0);
        let v = w.verdict();
        assert!(has(&v, Symptom::RequestUnacked) && !has(&v, Symptom::SyncookieSuspected), "{:?}", v.symptoms);
    }

    #[test]
    fn test_synack_timer_resend_is_no_cookie_but_a_triggered_one_may_be() {
        // Timer: 1 s after the SYN-ACK, after the handshake ACK.
        let mut w = Wire::new();
        w.handshake_with(plain(), mss_only(1460));
        w.request(3, &[203, 403, 803]);
        w.send(1001, S, SYN | ACK, SISN, CISN + 1, 0);
        w.request(1603, &[]);
        let v = w.verdict();
        assert!(has(&v, Symptom::FinalAckDropped) && !has(&v, Symptom::SyncookieSuspected), "{:?}", v.symptoms);
        // Answering a re-sent SYN: a cookie listener does that too.
        let mut w = Wire::new();
        w.syn(0);
        w.send_opts(1, S, SYN | ACK, SISN, CISN + 1, 0, mss_only(1460));
        w.syn(1000);
        w.send_opts(1001, S, SYN | ACK, SISN, CISN + 1, 0, mss_only(1460));
        w.send(1002, C, ACK, CISN + 1, SISN + 1, 0);
        w.request(1003, &[2003, 5003]);
        let v = w.verdict();
        assert!(v.series.iter().any(|s| s.kind == SeriesKind::Synack && s.sends[1].triggered));
        assert!(has(&v, Symptom::SyncookieSuspected) && !has(&v, Symptom::FinalAckDropped), "{:?}", v.symptoms);
    }

    // -------------------------------------------------------------------------------------
    // Data timers

    fn data_series(v: &Verdict, from: Side) -> &Series {
        v.series.iter().find(|s| s.kind == SeriesKind::Data && s.from == from).expect("a data series")
    }

    #[test]
    fn test_data_probe_then_doubling_from_the_handshake_round_trip() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[205, 407, 811]);
        let v = w.verdict();
        // RTT 2 ms: RTO 202 ms, the probe capped at it.
        assert_eq!(expected_ms(data_series(&v, C)), [None, Some(202), Some(202), Some(404)]);
    }

    #[test]
    fn test_data_without_sack_has_no_probe() {
        let no_sack = TcpOptions { sack_permitted: false, ..plain() };
        let mut w = Wire::new();
        w.handshake_with(no_sack, plain());
        w.request(3, &[205, 609]);
        assert_eq!(expected_ms(data_series(&w.verdict(), C)), [None, Some(202), Some(404)]);
    }

    #[test]
    fn test_fallback_rto_only_for_the_side_that_resent_its_handshake_packet() {
        // The client's SYN was re-sent (no RTT sample: 3 s, probe 1 s); the server's SYN-ACK was
        // not (its RTT sample stands: 202 ms).
        let mut w = Wire::new();
        w.syn(0);
        w.syn(1000);
        w.send_opts(1001, S, SYN | ACK, SISN, CISN + 1, 0, plain());
        w.send(1002, C, ACK, CISN + 1, SISN + 1, 0);
        w.request(1003, &[2003, 5003]);
        w.send(5004, S, PA, SISN + 1, CISN + 101, 50);
        w.send(5206, S, PA, SISN + 1, CISN + 101, 50);
        let v = w.verdict();
        assert_eq!(expected_ms(data_series(&v, C)), [None, Some(1000), Some(3000)]);
        assert_eq!(expected_ms(data_series(&v, S)), [None, Some(202)]);
    }

    #[test]
    fn test_timestamps_keep_the_round_trip_sample_after_a_resent_syn() {
        let mut w = Wire::new();
        w.send_opts(0, C, SYN, CISN, 0, 0, with_timestamps());
        w.send_opts(1000, C, SYN, CISN, 0, 0, with_timestamps());
        w.send_opts(1001, S, SYN | ACK, SISN, CISN + 1, 0, with_timestamps());
        w.send(1002, C, ACK, CISN + 1, SISN + 1, 0);
        w.request(1003, &[1205]);
        assert_eq!(expected_ms(data_series(&w.verdict(), C)), [None, Some(202)]);
    }

    #[test]
    fn test_dropped_final_ack_keeps_the_clients_round_trip_sample() {
        // Only the SYN-ACK was re-sent: the client's RTT sample stands.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[205, 407]);
        w.send(1001, S, SYN | ACK, SISN, CISN + 1, 0);
        let v = w.verdict();
        assert_eq!(expected_ms(data_series(&v, C)), [None, Some(202), Some(202)]);
        assert!(has(&v, Symptom::FinalAckDropped));
    }

    // -------------------------------------------------------------------------------------
    // SYN-ACK re-sent after the client's bare ACK: a full accept queue or TCP_DEFER_ACCEPT

    /// Handshake with a bare ACK, then the SYN-ACK again at each of `again` (ms).
    fn synack_again(again: &[i64]) -> Wire {
        let mut w = Wire::new();
        w.handshake_plain();
        for &t in again {
            w.send(t, S, SYN | ACK, SISN, CISN + 1, 0);
            w.send(t + 1, C, ACK, CISN + 1, SISN + 1, 0);
        }
        w
    }

    #[test]
    fn test_defer_accept_one_late_synack_resend_is_defer_not_final_ack_dropped() {
        // Measured on Linux 6.18 in a namespace: TCP_DEFER_ACCEPT 30 re-sends the SYN-ACK once,
        // 31.4 s after it; TCP_DEFER_ACCEPT 2 once, after 3.04 s.
        for resend in [31_422, 3_038, 4_004] {
            let v = synack_again(&[resend]).verdict_at(40_000);
            assert!(has(&v, Symptom::DeferAcceptSuspected) && !has(&v, Symptom::FinalAckDropped), "{resend}: {:?}", v.symptoms);
            assert!(has(&v, Symptom::SynackRetransmitted));
        }
    }

    #[test]
    fn test_accept_queue_full_without_data_resends_at_every_timer_is_final_ack_dropped() {
        // No client data either, but the SYN-ACK timer re-sends at 1 s and every time after: the
        // ACK answering the first re-send was dropped too.
        for again in [&[1_001, 3_001, 7_001][..], &[1_001, 3_001]] {
            let v = synack_again(again).verdict_at(20_000);
            assert!(has(&v, Symptom::FinalAckDropped) && !has(&v, Symptom::DeferAcceptSuspected), "{again:?}: {:?}", v.symptoms);
        }
    }

    #[test]
    fn test_defer_accept_of_one_second_resends_once_at_the_first_timer_without_data() {
        // TCP_DEFER_ACCEPT 1 (nginx's `deferred`): one re-send 1 s after the SYN-ACK, the ACK
        // answering it taken, no data before it.
        let v = synack_again(&[1_001]).verdict_at(20_000);
        assert!(has(&v, Symptom::DeferAcceptSuspected) && !has(&v, Symptom::FinalAckDropped), "{:?}", v.symptoms);
    }

    #[test]
    fn test_late_synack_resend_after_client_data_is_final_ack_dropped() {
        // The client sent its request: TCP_DEFER_ACCEPT would have taken it at once.
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[205, 409, 817, 1633]);
        w.send(3_001, S, SYN | ACK, SISN, CISN + 1, 0);
        let v = w.verdict();
        assert!(has(&v, Symptom::FinalAckDropped) && !has(&v, Symptom::DeferAcceptSuspected), "{:?}", v.symptoms);
    }

    #[test]
    fn test_two_late_synack_resends_after_the_ack_are_final_ack_dropped() {
        let v = synack_again(&[3_001, 7_001]).verdict_at(20_000);
        assert!(has(&v, Symptom::FinalAckDropped) && !has(&v, Symptom::DeferAcceptSuspected), "{:?}", v.symptoms);
    }

    // -------------------------------------------------------------------------------------
    // Refused, TFO

    #[test]
    fn test_refused_syns_after_rst_are_syn_after_rst_not_syn_retransmitted() {
        let mut w = Wire::new();
        for t in [0, 500, 1000] {
            w.syn(t);
            w.send(t + 1, S, RST | ACK, 0, CISN + 1, 0);
        }
        let v = w.verdict();
        assert_eq!(v.outcome, Outcome::Refused);
        assert!(has(&v, Symptom::SynAfterRst) && has(&v, Symptom::Rejected), "{:?}", v.symptoms);
        assert!(!has(&v, Symptom::SynRetransmitted), "{:?}", v.symptoms);
    }

    #[test]
    fn test_refused_after_an_unanswered_syn_is_still_syn_retransmitted() {
        let mut w = Wire::new();
        w.syn(0);
        w.syn(1000);
        w.send(1001, S, RST | ACK, 0, CISN + 1, 0);
        w.syn(1500);
        let v = w.verdict();
        assert!(has(&v, Symptom::SynAfterRst) && has(&v, Symptom::SynRetransmitted), "{:?}", v.symptoms);
    }

    #[test]
    fn test_tfo_data_rejected_is_tfo_fallback_not_loss() {
        let mut w = Wire::new();
        w.send_opts(0, C, SYN, CISN, 0, 517, plain());
        w.send_opts(1, S, SYN | ACK, SISN, CISN + 1, 0, plain());
        w.send(2, C, ACK, CISN + 1, SISN + 1, 0);
        w.request(9, &[]);
        w.send(10, S, PA, SISN + 1, CISN + 101, 50);
        let v = w.verdict();
        assert!(has(&v, Symptom::TfoFallback), "{:?}", v.symptoms);
        assert!(!has(&v, Symptom::DataRetransmitted) && !has(&v, Symptom::RequestUnacked), "{:?}", v.symptoms);
        assert_eq!(v.outcome, Outcome::Completed);
    }

    #[test]
    fn test_tfo_data_accepted_is_healthy() {
        let mut w = Wire::new();
        w.send_opts(0, C, SYN, CISN, 0, 100, plain());
        w.send_opts(1, S, SYN | ACK, SISN, CISN + 101, 0, plain());
        w.send(2, C, ACK, CISN + 101, SISN + 1, 0);
        w.send(3, S, PA, SISN + 1, CISN + 101, 50);
        let v = w.verdict();
        assert!(v.symptoms.is_empty(), "{:?}", v.symptoms);
        assert_eq!(v.outcome, Outcome::Completed);
    }

    #[test]
    fn test_symptom_slugs_are_unique_and_fit_the_set() {
        let mut slugs: Vec<&str> = Symptom::ALL.iter().map(|s| s.slug()).collect();
        slugs.sort_unstable();
        slugs.dedup();
        assert_eq!(slugs.len(), Symptom::COUNT);
        assert!(Symptom::ALL.iter().enumerate().all(|(i, s)| s.index() == i));
    }
}
