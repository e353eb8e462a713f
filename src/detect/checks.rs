//! Hypotheses and the checks that test them. A sign has more than one explanation: a SYN-ACK
//! sent again after the client's handshake ACK may be a full accept queue dropping that ACK,
//! or one ACK lost on the way, TCP_DEFER_ACCEPT, a re-send that crossed the ACK, an answer to a
//! SYN the client sent again, a copy the capture made, or a middlebox answering for the server.
//! Each explanation predicts what else the capture must show; a check is one such prediction,
//! tested on one connection. It held, it failed, or the capture cannot tell (neither bit).
//! A full accept queue is claimed for a connection only where no check of a competing
//! explanation failed (`explained_otherwise`). The findings list which checks held and which
//! failed (docs/diagnosis.md, "Hypotheses and their checks").

use super::schedule::Schedule;
use crate::flow::connection::Send;
use crate::flow::Connection;

/// A timer fires up to an eighth late (the timer wheel's granularity), plus this.
const TIMER_SLACK_NS: i64 = 200_000_000;
/// The client's data acknowledged this long after it was sent, beyond one round trip, was
/// taken at once: Linux acknowledges the first data of a connection without delay (quick-ack
/// mode, net/ipv4/tcp_input.c: tcp_init_transfer()), while a dropped segment waits for the
/// client's RTO (at least 200 ms) or a SYN-ACK re-send (1 s).
const TAKEN_AT_ONCE_SLACK_NS: i64 = 100_000_000;
/// A SYN-ACK that follows a re-sent SYN by up to twice the server side's round trip plus this
/// answers it (the first SYN-ACK may have answered an earlier SYN, which makes that round trip
/// look shorter than it is).
const ANSWER_SLACK_NS: i64 = 10_000_000;

macro_rules! checks {
    ($($(#[doc = $doc:literal])* $variant:ident = $slug:literal, $cites:literal, $held:literal, $failed:literal;)*) => {
        crate::slugs::slug_enum! {
            /// A prediction one explanation of a sign makes of the capture.
            #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
            pub enum Check {
                $($(#[doc = $doc])* $variant => $slug,)*
            }
        }

        impl Check {
            /// The kernel function or RFC section the prediction rests on.
            pub fn cites(self) -> &'static str {
                match self { $(Check::$variant => $cites,)* }
            }

            /// What the capture showed when the check held, and when it failed.
            pub fn sentences(self) -> (&'static str, &'static str) {
                match self { $(Check::$variant => ($held, $failed),)* }
            }
        }
    };
}

checks! {
    /// Full accept queue: the client's first data after its handshake ACK is held back too,
    /// not acknowledged within a round trip, until a SYN-ACK re-send lets it in or the queue
    /// drains. One ACK lost on the way, or TCP_DEFER_ACCEPT, lets the data in at once.
    RequestHeldBack = "request_held_back",
        "Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_check_req(): listen_overflow drops every segment that would complete the handshake",
        "the client's request after its handshake ACK was held back too (not acknowledged within a round trip)",
        "the client's request after its handshake ACK was acknowledged at once: the listener was taking connections (one ACK lost on the way, or TCP_DEFER_ACCEPT)";
    /// The re-send left the server after the client's ACK could have reached it: it is later
    /// than the ACK by more than the server side's round trip at the capture point.
    SentAfterAckArrived = "sent_after_ack_arrived",
        "Linux v6.6 net/ipv4/inet_connection_sock.c: reqsk_timer_handler() re-sends only for a request still waiting",
        "the SYN-ACK was sent again after the client's ACK had reached the server",
        "the SYN-ACK re-send left the server before the client's ACK could reach it (they crossed on a long path): it proves nothing";
    /// The re-send does not answer a SYN the client sent again.
    NotAnswerToResentSyn = "not_answer_to_resent_syn",
        "Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_check_req() answers a re-sent SYN with the SYN-ACK again",
        "the SYN-ACK re-send answered no re-sent SYN",
        "the SYN-ACK after the ACK answered a SYN the client had sent again: nothing was dropped after the handshake";
    /// The SYN-ACK came from the host that sent the server's later packets: the same TTL at
    /// the capture point (a sender's TTL is fixed, and so are the hops of one path).
    SameSender = "same_sender",
        "RFC 791 §3.1 (Time to Live); RFC 8200 §3 (Hop Limit)",
        "the SYN-ACK and the server's later packets came from one host (the same TTL)",
        "the SYN-ACK's TTL differs from the server's later packets': a middlebox (NAT, load balancer, proxy) answered the handshake, and its re-sends say nothing of the server's queue";
    /// Not TCP_DEFER_ACCEPT: not a single SYN-ACK re-send with nothing from the client before
    /// it (`detect::defer_accept_suspected`).
    NotDeferAccept = "not_defer_accept",
        "Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_check_req(); net/ipv4/inet_connection_sock.c: syn_ack_recalc(); net/ipv4/tcp.c: secs_to_retrans()",
        "the SYN-ACK was re-sent more than once, or after the client's request: not once at the end of a defer period",
        "one SYN-ACK re-send with nothing from the client before it: TCP_DEFER_ACCEPT ignoring a bare ACK until the end of its period (1 s: the timer's first time), or a queue full for less than a second that held nothing back";
    /// The re-sends after the ACK come on the request timer counted from the first SYN-ACK:
    /// 1, 3, 7, 15, 31 s (TCP_TIMEOUT_INIT, doubling).
    OnRequestTimer = "on_request_timer",
        "Linux v6.6 net/ipv4/inet_connection_sock.c: reqsk_timer_handler(); include/net/tcp.h: TCP_TIMEOUT_INIT",
        "the SYN-ACK re-sends came at 1, 3, 7 ... s after the first SYN-ACK, the request timer's times",
        "the SYN-ACK re-sends do not fit Linux's request timer (another stack, or not a timer)";
    /// Loss of a SYN or its answer: the client's handshake ACK does not echo the first SYN-ACK
    /// captured before the re-sent SYN. Fails when it does: both arrived, on a path slower than
    /// the SYN timer (`Fact::SynResendSpurious`).
    FirstSynAnswerLost = "first_syn_answer_lost",
        "RFC 7323 §3.2 (TSecr echoes the segment answered); Linux v6.6 net/ipv4/tcp_timer.c: tcp_retransmit_timer()",
        "the client's handshake ACK answered a later SYN-ACK: the first SYN or its answer was lost",
        "the client's handshake ACK echoes the first SYN-ACK: nothing was lost, the path was slower than the SYN timer";
    /// Loss of data: the receiver never reports the re-sent segment as received twice. Fails
    /// when it does (D-SACK): the re-send was spurious (reordering, an early timer).
    ResendNotDsacked = "resend_not_dsacked",
        "RFC 2883 §4 (D-SACK)",
        "no re-sent segment was reported received twice (no D-SACK)",
        "the receiver reported a re-sent segment as received twice (D-SACK): reordering or an early timer, not loss";
    /// Loss of data re-sends the same segment whole. Fails when a full-size segment is re-sent
    /// cut in two after the path MTU dropped: path MTU discovery, not loss.
    ResentWhole = "resent_whole",
        "Linux v6.6 net/ipv4/tcp_output.c: tcp_fragment() from tcp_simple_retransmit(); RFC 1191 §3",
        "the re-sent segments were sent again whole",
        "a full-size segment was re-sent cut in two after the path MTU dropped: path MTU discovery, not loss";
    /// A re-send, not a copy the capture made: a frame seen again with the same IP ID and the
    /// same TSval is the same datagram (two interfaces, both directions of a SPAN, a link-layer
    /// retry, a file appended to itself); the tracker counts those as copies, not re-sends.
    /// Held when every re-send that repeats the frame before it (the ones a copy could be) carried
    /// a new TSval or IP ID, failed when every repeat was a copy, neither when only the delay told
    /// them apart (no timestamps, and the ID 0 or kept).
    NotCaptureCopy = "not_capture_copy",
        "RFC 7323 §3.2 (every segment sent carries the clock's current TSval); RFC 6864 §4 (the IPv4 ID of a datagram)",
        "every frame seen again carried a new IP ID or TSval: the sender sent it again",
        "the frames seen again were the same datagrams (same IP ID and TSval): copies the capture made, not re-sends";
    /// Not a stack retrying a refused connect: a SYN sent again after the server's RST (Windows
    /// retries twice, about 0.5 s apart), or after an ICMP error that answered it (a soft error
    /// on which RFC 1122 lets TCP keep trying), is neither loss nor a listener's drop.
    NotRetryAfterRefusal = "not_retry_after_refusal",
        "RFC 9293 §3.10.7.3 (an RST in SYN-SENT ends the attempt); RFC 1122 §4.2.3.9 (soft ICMP errors)",
        "no SYN was sent again after an RST or an ICMP error had answered the one before",
        "SYNs were sent again after an RST or ICMP error had answered them: a stack retrying a refused connect, not loss";
    /// Nothing from the server is claimed missing where the capture misses its direction: the
    /// server's address sent packets the capture shows. Fails when it sent none while its
    /// clients acknowledged it (a one-way capture, or asymmetric routing past the capture point).
    BothDirectionsSeen = "both_directions_seen",
        "RFC 9293 §3.4 (an acknowledgment number says what its sender received)",
        "the capture shows the server's direction",
        "the server's address sent nothing the capture shows while its clients acknowledged it: a one-way capture cannot say what the server did not send";
    /// The capture watched the connection to its end: no gap longer than any TCP timer (the
    /// capture stopped and started again, files merged days apart, a clock step) fell inside it.
    WatchedThroughout = "watched_throughout",
        "Linux v6.6 include/net/tcp.h: TCP_RTO_MAX (120 s, the longest a live connection stays silent while it waits)",
        "the capture has no gap longer than any TCP timer in these connections",
        "the capture stopped for longer than any TCP timer while these connections were live: what followed was not seen";
    /// The connection's last frames are not where the capture was cut: a capture kept to the
    /// first packets of each flow stops many flows at the same count, mid-exchange, while the
    /// capture goes on; what did not follow says nothing of the hosts. (What came before the
    /// cut, such as a SYN re-sent with nothing back before it, stands.)
    FlowNotTrimmed = "flow_not_trimmed",
        "RFC 9293 §3.8.1 (a sender re-sends what is unacknowledged until it gives up: a flow does not stop mid-exchange)",
        "the connections did not stop at the capture's per-flow packet limit",
        "the connection stopped at the packet count where the capture cut every long flow: it was trimmed, not silent";
}

crate::slugs::slug_enum! {
    /// A sign that explanations compete for; its checks weigh them.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Sign {
        /// A SYN-ACK sent again after the client's handshake ACK: a full accept queue, or another.
        SynackAfterAck => "synack_after_ack",
        /// A SYN or data sent again: loss on the path, or another.
        Resent => "resent",
        /// A SYN or request sent again with nothing back before the re-send, or a host that sent
        /// nothing: the host did not answer, or the capture did not see the answer.
        Unanswered => "unanswered",
        /// Nothing followed a connection's last packet (a client that gave up, a handshake never
        /// completed, a request never answered): nothing was sent, or the capture did not see it.
        NothingFollowed => "nothing_followed",
    }
}

impl Check {
    /// The signs whose explanations it weighs.
    pub fn signs(self) -> &'static [Sign] {
        match self {
            Check::FirstSynAnswerLost | Check::ResendNotDsacked | Check::ResentWhole | Check::NotRetryAfterRefusal => &[Sign::Resent],
            Check::NotCaptureCopy => &[Sign::SynackAfterAck, Sign::Resent],
            Check::BothDirectionsSeen | Check::WatchedThroughout => &[Sign::Unanswered, Sign::NothingFollowed],
            Check::FlowNotTrimmed => &[Sign::NothingFollowed],
            _ => &[Sign::SynackAfterAck],
        }
    }

    /// Failed, the check says another explanation than its sign's first one holds.
    /// `OnRequestTimer` only describes the timing.
    pub fn vetoes(self) -> bool {
        !matches!(self, Check::OnRequestTimer)
    }
}

/// The checks of one connection: those that held and those that failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checks {
    held: u16,
    failed: u16,
}

const _: () = assert!(Check::COUNT <= u16::BITS as usize, "Checks keeps a check in one bit of a u16");

impl Checks {
    pub fn set(&mut self, check: Check, result: Option<bool>) {
        match result {
            Some(true) => self.held |= 1 << check.index(),
            Some(false) => self.failed |= 1 << check.index(),
            None => {}
        }
    }

    pub fn held(self, check: Check) -> bool {
        self.held & (1 << check.index()) != 0
    }

    pub fn failed(self, check: Check) -> bool {
        self.failed & (1 << check.index()) != 0
    }

    /// Both sets of checks (a check tested in both keeps `other`'s result).
    pub fn with(self, other: Checks) -> Checks {
        let tested = other.held | other.failed;
        Checks { held: (self.held & !tested) | other.held, failed: (self.failed & !tested) | other.failed }
    }

    pub fn is_empty(self) -> bool {
        self.held == 0 && self.failed == 0
    }

    /// A competing explanation of the SYN-ACK after the ACK holds: the sign says nothing of the
    /// server's accept queue.
    pub fn explained_otherwise(self) -> bool {
        Check::ALL.iter().any(|&c| c.signs().contains(&Sign::SynackAfterAck) && c.vetoes() && self.failed(c))
    }

    /// Held in the low 16 bits, failed in the high 16.
    pub fn bits(self) -> u32 {
        u32::from(self.held) | (u32::from(self.failed) << 16)
    }

    pub fn from_bits(bits: u32) -> Checks {
        Checks { held: bits as u16, failed: (bits >> 16) as u16 }
    }
}

/// The checks of a connection's re-sends: of a SYN-ACK sent again after the client's handshake
/// ACK, and of a SYN or data sent again. None for a connection without either (nor copies).
pub fn of(c: &Connection) -> Checks {
    let mut checks = Checks::default();
    checks.set(Check::NotCaptureCopy, not_capture_copy(c));
    let Some(log) = &c.retransmits else { return checks };
    let after_ack = super::facts::synacks_after_ack(c);
    let deferred = super::defer_accept_suspected(c, &after_ack);
    if let Some(synack) = of_synack_after_ack(c, &after_ack, deferred) {
        checks = checks.with(synack);
    }
    // A SYN or data re-sent: what loss predicts.
    if log.syn.len() > 1 {
        checks.set(Check::FirstSynAnswerLost, super::facts::first_syn_answer_lost(c));
        checks.set(Check::NotRetryAfterRefusal, Some(!syn_resent_after_refusal(c)));
    }
    if !log.data.is_empty() {
        checks.set(Check::ResendNotDsacked, Some(!log.data.iter().any(|d| d.dsacked)));
        checks.set(Check::ResentWhole, Some(super::icmp::resegmented(c).is_none()));
    }
    checks
}

/// The checks of what the capture saw of a connection whose verdict rests on something it did
/// not show (`Sign::Unanswered`, `Sign::NothingFollowed`) that the record alone can tell;
/// `episodes` adds those that need the whole capture (`BothDirectionsSeen`, `FlowNotTrimmed`).
pub fn of_silence(c: &Connection) -> Checks {
    let mut checks = Checks::default();
    checks.set(Check::WatchedThroughout, Some(c.seen_until_ns.get().is_none()));
    checks
}

/// Held when every repeat of the connection carried a new IP ID or TSval (`same_segment`
/// compares the ID; a repeat with the same TSval is a copy whatever its delay); none when some
/// repeat had neither; failed when no re-send is left but copies were seen.
fn not_capture_copy(c: &Connection) -> Option<bool> {
    let resent = c.retransmits.as_ref().is_some_and(|log| log.syn.len() > 1 || log.synack.len() > 1 || !log.data.is_empty());
    if !resent {
        return (c.duplicates > 0).then_some(false);
    }
    (c.repeats_told_by_delay == 0).then_some(true)
}

/// A SYN sent again after the server's RST answered the one before (`syns_after_rst`), or after
/// an ICMP error other than "too big" answered one of the client's SYNs.
fn syn_resent_after_refusal(c: &Connection) -> bool {
    let Some(log) = &c.retransmits else { return false };
    let last_resend = log.syn.iter().skip(1).map(|s| s.time_ns).max();
    c.milestones.syns_after_rst > 0
        || c.icmp_answers().iter().any(|a| {
            a.answers == crate::flow::Side::Client
                && a.kind.class() != crate::decode::icmp::IcmpClass::TooBig
                && last_resend.is_some_and(|t| t > a.time_ns)
        })
}

/// `deferred`: the re-sends look like TCP_DEFER_ACCEPT's (`detect::defer_accept_suspected`).
fn of_synack_after_ack(c: &Connection, after_ack: &[Send], deferred: bool) -> Option<Checks> {
    let first_resend = after_ack.first()?;
    let ack_ns = c.handshake_ack_time_ns.get()?;
    let mut checks = Checks::default();
    let server_rtt = server_side_round_trip_ns(c);
    checks.set(Check::RequestHeldBack, request_held_back(c, ack_ns, after_ack));
    checks.set(Check::SentAfterAckArrived, server_rtt.map(|rtt| first_resend.time_ns - ack_ns > rtt));
    checks.set(Check::NotAnswerToResentSyn, Some(!answers_resent_syn(c, after_ack, server_rtt.unwrap_or(0))));
    checks.set(Check::SameSender, same_sender(c));
    checks.set(Check::NotDeferAccept, Some(!deferred));
    checks.set(Check::OnRequestTimer, on_request_timer(c, after_ack));
    Some(checks)
}

/// From the SYN the first SYN-ACK answered to that SYN-ACK, at the capture point: the part of
/// the round trip on the server's side of it (about 0 captured at the server).
fn server_side_round_trip_ns(c: &Connection) -> Option<i64> {
    let synack = c.synack_time_ns.get()?;
    let mut syns: Vec<i64> = c.retransmits.as_ref().map(|log| log.syn.iter().map(|s| s.time_ns).collect()).unwrap_or_default();
    syns.extend(c.syn_time_ns.get());
    syns.retain(|&t| t <= synack);
    // The SYN-ACK echoes the TSval of the SYN it answers (RFC 7323 §3.2), and a sender's TSval
    // counts milliseconds (Linux v6.6 include/net/tcp.h: tcp_time_stamp_ms()): the answered
    // SYN is the one sent nearest to the first SYN's time plus the difference. Without
    // timestamps, the last SYN before the SYN-ACK.
    let first_syn = c.syn_time_ns.get();
    let echoed = match (c.synack_echo, c.handshake_ident[crate::flow::Side::Client.index()], first_syn) {
        (Some(echo), Some((_, first_tsval)), Some(first)) => {
            let since_ms = i64::from(echo.wrapping_sub(first_tsval) as i32);
            let guess = first + since_ms * 1_000_000;
            syns.iter().copied().min_by_key(|&t| (t - guess).abs())
        }
        _ => None,
    };
    let answered = echoed.or(syns.iter().copied().max())?;
    Some(synack - answered)
}

/// Whether the client's segments after its handshake ACK were held back too. Two re-sends or
/// more after the ACK: the client's answer to the first was dropped as well. One: its first
/// data after the ACK waited, unacknowledged beyond a round trip (or never acknowledged); data
/// taken at once means the listener was taking connections. None when the client sent no data.
fn request_held_back(c: &Connection, ack_ns: i64, after_ack: &[Send]) -> Option<bool> {
    if after_ack.len() >= 2 {
        return Some(true);
    }
    let sent = c.milestones.client_data_ns.get().filter(|&t| t >= ack_ns)?;
    let round_trip = super::round_trip_ns(c).unwrap_or(0);
    Some(c.milestones.client_data_acked_ns.get().is_none_or(|acked| acked - sent > round_trip + TAKEN_AT_ONCE_SLACK_NS))
}

/// Whether every re-send after the ACK follows a re-sent client SYN by at most the server
/// side's round trip: they answer those SYNs.
fn answers_resent_syn(c: &Connection, after_ack: &[Send], server_rtt: i64) -> bool {
    let Some(log) = &c.retransmits else { return false };
    let resent_syns: Vec<i64> = log.syn.iter().skip(1).map(|s| s.time_ns).collect();
    after_ack.iter().all(|r| resent_syns.iter().any(|&syn| r.time_ns >= syn && r.time_ns - syn <= 2 * server_rtt + ANSWER_SLACK_NS))
}

/// Whether the first SYN-ACK and the server's first later packet came from one sender. None
/// without a later packet of the server's.
fn same_sender(c: &Connection) -> Option<bool> {
    Some(c.synack_ttl? == c.server_ttl?)
}

/// Whether each re-send after the ACK came at one of the request timer's times after the
/// first SYN-ACK: 1, 3, 7, 15, 31 s (the intervals of `Schedule::Synack` added up), up to an
/// eighth late plus `TIMER_SLACK_NS`.
fn on_request_timer(c: &Connection, after_ack: &[Send]) -> Option<bool> {
    let first = c.synack_time_ns.get()?;
    let due: Vec<i64> = (1..=6).scan(0i64, |at, retry| {
        *at += Schedule::Synack.interval_ns(retry);
        Some(*at)
    }).collect();
    Some(after_ack.iter().all(|r| {
        let since = r.time_ns - first;
        due.iter().any(|&d| since >= d - TIMER_SLACK_NS && since <= d + d / 8 + TIMER_SLACK_NS)
    }))
}

#[cfg(test)]
mod tests {
    //! Each competing explanation, made by hand with the tracker, against a full accept queue.

    use super::*;
    use crate::decode::flags::{ACK, RST, SYN};
    use crate::decode::TcpOptions;
    use crate::flow::wire::*;

    fn weighed(w: &Wire) -> Checks {
        of(w.conn())
    }

    fn competing(w: &Wire) -> Vec<&'static str> {
        let k = weighed(w);
        Check::ALL.iter().filter(|&&c| c.vetoes() && k.failed(c)).map(|c| c.slug()).collect()
    }

    // -------------------------------------------------------------------------------------
    // A full accept queue: every prediction holds

    #[test]
    fn test_full_queue_request_held_back_resent_on_the_timer_holds_every_check() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[205, 409, 817]);
        w.send(1_001, S, SYN | ACK, SISN, CISN + 1, 0);
        let k = weighed(&w);
        for check in [Check::RequestHeldBack, Check::SentAfterAckArrived, Check::NotAnswerToResentSyn, Check::NotDeferAccept, Check::OnRequestTimer] {
            assert!(k.held(check), "{check:?}: {k:?}");
        }
        assert!(!k.explained_otherwise());
    }

    // -------------------------------------------------------------------------------------
    // One ACK lost on the way

    #[test]
    fn test_lost_ack_request_after_the_resend_taken_at_once_fails_request_held_back() {
        // One re-send with nothing before it: TCP_DEFER_ACCEPT of 1 s looks the same.
        let mut w = Wire::new();
        w.handshake_plain();
        w.send(1_001, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1_002, C, ACK, CISN + 1, SISN + 1, 0);
        w.request(2_000, &[]);
        w.send(2_001, S, ACK, SISN + 1, CISN + 1 + 100, 0);
        assert_eq!(competing(&w), ["request_held_back", "not_defer_accept"]);
    }

    #[test]
    fn test_two_resends_after_the_ack_hold_request_held_back_without_data() {
        let mut w = Wire::new();
        w.handshake_plain();
        for t in [1_001, 3_001] {
            w.send(t, S, SYN | ACK, SISN, CISN + 1, 0);
            w.send(t + 1, C, ACK, CISN + 1, SISN + 1, 0);
        }
        assert!(weighed(&w).held(Check::RequestHeldBack));
    }

    // -------------------------------------------------------------------------------------
    // A re-send that crossed the ACK, and one that answers a re-sent SYN

    #[test]
    fn test_resend_within_the_server_sides_round_trip_of_the_ack_crossed_it() {
        // Captured at the client, 1.2 s round trip: the SYN-ACK timer fired before the ACK
        // could arrive; its re-send reaches the capture point 1 s after the ACK left.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1_200, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1_201, C, ACK, CISN + 1, SISN + 1, 0);
        w.send(2_200, S, SYN | ACK, SISN, CISN + 1, 0);
        assert!(competing(&w).contains(&"sent_after_ack_arrived"), "{:?}", weighed(&w));
    }

    #[test]
    fn test_first_synack_echoing_the_first_syn_measures_the_round_trip_from_it() {
        // Captured at the client, 1.4 s round trip: the client re-sent its SYN at 1 s, the
        // first SYN-ACK (echoing the first SYN's TSval) came at 1.4 s; the timer's re-send
        // crossed the ACK and came 1 s later.
        let ts = |val: u32, echo: u32| TcpOptions { timestamp: Some((val, echo)), ..plain() };
        let mut w = Wire::new();
        w.send_opts(0, C, SYN, CISN, 0, 0, ts(500, 0));
        w.send_opts(1_000, C, SYN, CISN, 0, 0, ts(1_500, 0));
        w.send_opts(1_400, S, SYN | ACK, SISN, CISN + 1, 0, ts(90_000, 500));
        w.send(1_401, C, ACK, CISN + 1, SISN + 1, 0);
        w.send_opts(2_400, S, SYN | ACK, SISN, CISN + 1, 0, ts(91_000, 500));
        assert!(competing(&w).contains(&"sent_after_ack_arrived"), "{:?}", weighed(&w));
        // The same at the server, where the SYN-ACK answered the second SYN (the first was
        // dropped): the re-send came after the ACK had arrived.
        let mut w = Wire::new();
        w.send_opts(0, C, SYN, CISN, 0, 0, ts(500, 0));
        w.send_opts(1_000, C, SYN, CISN, 0, 0, ts(1_500, 0));
        w.send_opts(1_001, S, SYN | ACK, SISN, CISN + 1, 0, ts(90_000, 1_500));
        w.send(1_100, C, ACK, CISN + 1, SISN + 1, 0);
        w.send_opts(2_001, S, SYN | ACK, SISN, CISN + 1, 0, ts(91_000, 1_500));
        assert!(weighed(&w).held(Check::SentAfterAckArrived), "{:?}", weighed(&w));
    }

    #[test]
    fn test_synack_answering_a_resent_syn_at_the_client_side_explains_the_resend() {
        // Captured at the client: the answer to the first SYN was held up for a second, the
        // client re-sent its SYN at 1 s and ACKed the late answer; the answer to the second
        // SYN came 40 ms after it.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1_000, C, SYN, CISN, 0, 0);
        w.send(1_020, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1_021, C, ACK, CISN + 1, SISN + 1, 0);
        w.send(1_040, S, SYN | ACK, SISN, CISN + 1, 0);
        assert!(competing(&w).contains(&"not_answer_to_resent_syn"), "{:?}", weighed(&w));
    }

    // -------------------------------------------------------------------------------------
    // A middlebox answering the handshake, TCP_DEFER_ACCEPT

    #[test]
    fn test_synack_from_another_sender_than_the_servers_later_packets_is_a_middlebox() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[205, 409, 817]);
        w.send(1_001, S, SYN | ACK, SISN, CISN + 1, 0);
        let mut same = Wire::new();
        same.handshake_plain();
        same.request(3, &[205, 409, 817]);
        same.send(1_001, S, SYN | ACK, SISN, CISN + 1, 0);
        same.send(1_500, S, ACK, SISN + 1, CISN + 101, 0);
        assert!(weighed(&same).held(Check::SameSender), "{:?}", weighed(&same));
        w.ttl = 61;
        w.send(1_500, S, ACK, SISN + 1, CISN + 101, 0);
        assert_eq!(competing(&w), ["same_sender"]);
    }

    #[test]
    fn test_one_late_resend_without_data_is_defer_accept() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.send(31_422, S, SYN | ACK, SISN, CISN + 1, 0);
        assert_eq!(competing(&w), ["not_defer_accept"]);
    }

    // -------------------------------------------------------------------------------------
    // A copy made by the capture

    #[test]
    fn test_synack_seen_again_with_the_same_tsval_is_a_copy_not_a_resend() {
        let ts = TcpOptions { timestamp: Some((1000, 0)), ..TcpOptions::default() };
        let mut w = Wire::new();
        w.zero_ip_id = true;
        w.send_opts(0, C, SYN, CISN, 0, 0, ts);
        let synack = w.send_opts(1, S, SYN | ACK, SISN, CISN + 1, 0, ts);
        w.send(2, C, ACK, CISN + 1, SISN + 1, 0);
        w.copy_at_us(400_000, synack);
        let c = w.conn();
        assert_eq!((c.synack_count, c.duplicates), (1, 1));
        assert_eq!(competing(&w), ["not_capture_copy"]);
        // The timer's re-send carries a new TSval (the checksum as captured on the sender may
        // not differ: offload fills it in later).
        w.send_opts(1_001, S, SYN | ACK, SISN, CISN + 1, 0, TcpOptions { timestamp: Some((2000, 0)), ..ts });
        assert_eq!((w.conn().synack_count, w.conn().duplicates), (2, 1));
        assert!(weighed(&w).held(Check::NotCaptureCopy), "{:?}", weighed(&w));
    }

    #[test]
    fn test_a_resend_told_from_a_copy_only_by_its_delay_leaves_the_copy_check_untested() {
        // Linux SYN-ACKs carry IP ID 0; without timestamps, a re-send 1 s later is the same
        // frame but for its time.
        let mut w = Wire::new();
        w.zero_ip_id = true;
        w.handshake_plain();
        w.send(1_001, S, SYN | ACK, SISN, CISN + 1, 0);
        let k = weighed(&w);
        assert!(!k.held(Check::NotCaptureCopy) && !k.failed(Check::NotCaptureCopy), "{k:?}");
        assert_eq!(w.conn().repeats_told_by_delay, 1);
    }

    // -------------------------------------------------------------------------------------
    // A stack retrying a refused connect

    #[test]
    fn test_syn_sent_again_after_the_servers_rst_is_a_retry_not_loss() {
        // Windows: SYN, RST, the same SYN 0.5 s later.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1, S, RST | ACK, 0, CISN + 1, 0);
        w.send(500, C, SYN, CISN, 0, 0);
        assert!(weighed(&w).failed(Check::NotRetryAfterRefusal), "{:?}", weighed(&w));
        // A SYN re-sent on its timer with nothing back is what loss predicts.
        let mut lost = Wire::new();
        lost.send(0, C, SYN, CISN, 0, 0);
        lost.send(1_000, C, SYN, CISN, 0, 0);
        lost.send(1_001, S, SYN | ACK, SISN, CISN + 1, 0);
        assert!(weighed(&lost).held(Check::NotRetryAfterRefusal), "{:?}", weighed(&lost));
    }

    // -------------------------------------------------------------------------------------
    // What the capture did not watch

    #[test]
    fn test_a_connection_live_across_a_capture_gap_was_not_watched_throughout() {
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        assert!(of_silence(w.conn()).held(Check::WatchedThroughout));
        let mut c = w.conn().clone();
        c.seen_until_ns.set(Some(4_000_000));
        assert!(of_silence(&c).failed(Check::WatchedThroughout));
    }
}
