//! What users felt of a set of connections (a finding's): how many failed, how many waited
//! materially longer than the capture's healthy connections, and what the re-sends cost
//! (Python's `Analysis.felt`, read by the findings' materiality).

use rustc_hash::FxHashSet;

use super::{classify, servers::ServerStats};
use crate::flow::connection::Send;
use crate::flow::Connection;

/// Linux's TCP_RTO_MIN (include/net/tcp.h): no loss recovery by timer takes less.
pub const RTO_MIN_NS: i64 = 200_000_000;
/// A wait is material past this many of the capture's median handshake round trips: an RTO
/// computed from that RTT with a deviation of half of it (RFC 6298 §2: SRTT + 4 RTTVAR = 3 RTT)
/// and one round trip more for the re-send to be answered.
pub const MEDIAN_RTTS: i64 = 4;

/// A client waiting for its answer reads end of file the moment the server's FIN comes and
/// closes (read() returns 0; nginx then logs "upstream prematurely closed connection"): one that
/// stays open and silent this long after it was not waiting for an answer.
pub const CLIENT_REACTS_NS: i64 = 1_000_000_000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Felt {
    /// Of the ids asked for, those found among the records kept.
    pub connections: u64,
    /// Outcomes that are failures (refused, reset, timed out, given up, unreachable, closed).
    pub failed: u64,
    /// Not failed, and waited at least `threshold_ns` on re-sends.
    pub delayed: u64,
    /// Packets sent again (SYNs, SYN-ACKs, data), over the connections.
    pub resends: u64,
    /// The waits on re-sends added up, and the longest.
    pub waited_ns: i64,
    pub longest_ns: i64,
    /// The wait that is material in this capture: the largest of `RTO_MIN_NS` and
    /// `MEDIAN_RTTS` median handshake round trips.
    pub threshold_ns: i64,
}

fn span(sends: &[Send]) -> i64 {
    match (sends.first(), sends.last()) {
        (Some(a), Some(b)) => b.time_ns - a.time_ns,
        _ => 0,
    }
}

/// What re-sends cost `c`: from its first to its last SYN, plus its longest-stalled data segment
/// (first send to last re-send; D-SACKed re-sends were spurious and cost nothing), and how many
/// packets it sent again.
pub fn waited_ns(c: &Connection) -> (i64, u64) {
    let Some(log) = &c.retransmits else { return (0, 0) };
    let data = log.data.iter().filter(|d| !d.spurious()).map(|d| span(&d.sends)).max().unwrap_or(0);
    let again = |sends: &[Send]| sends.len().saturating_sub(1) as u64;
    let resends = again(&log.syn) + again(&log.synack) + log.data.iter().map(|d| again(&d.sends)).sum::<u64>();
    (span(&log.syn) + data, resends.max(c.counts.iter().map(|d| u64::from(d.data_retransmits)).sum()))
}

/// The median handshake round trip (SYN to handshake ACK, clean handshakes) over every server's
/// sample.
pub fn median_rtt_ns<'a>(servers: impl IntoIterator<Item = &'a ServerStats>) -> Option<i64> {
    let mut rtts: Vec<i64> = servers.into_iter().flat_map(|s| s.handshake_rtts_ns()).collect();
    rtts.sort_unstable();
    rtts.get(rtts.len() / 2).copied()
}

pub fn threshold_ns(median_rtt_ns: Option<i64>) -> i64 {
    median_rtt_ns.map_or(RTO_MIN_NS, |m| (MEDIAN_RTTS * m).max(RTO_MIN_NS))
}

/// The server closed (FIN) and the client neither closed nor sent anything for
/// `CLIENT_REACTS_NS` after it, to the capture's end: nobody was waiting for an answer.
fn not_waiting(c: &Connection, end_ns: i64) -> bool {
    let m = &c.milestones;
    let Some(fin) = m.server_closed_ns.get() else { return false };
    let quiet_until = c.seen_until_ns.get().map_or(end_ns, |gap| gap.min(end_ns));
    m.client_closed_ns.get().is_none() && m.client_last_data_ns.get().is_none_or(|t| t < fin) && quiet_until - fin >= CLIENT_REACTS_NS
}

/// What users felt of the connections with `ids`, among `connections`.
pub fn felt(connections: &[Connection], ids: &[u64], end_ns: i64, threshold_ns: i64) -> Felt {
    let wanted: FxHashSet<u64> = ids.iter().copied().collect();
    let mut f = Felt { threshold_ns, ..Felt::default() };
    for c in connections.iter().filter(|c| wanted.contains(&c.id)) {
        let (outcome, _) = classify(c, end_ns);
        let (waited, resends) = waited_ns(c);
        f.connections += 1;
        f.resends += resends;
        f.waited_ns += waited;
        f.longest_ns = f.longest_ns.max(waited);
        if outcome.is_failure() && !(outcome == super::Outcome::ClosedByServer && not_waiting(c, end_ns)) {
            f.failed += 1;
        } else if waited >= threshold_ns {
            f.delayed += 1;
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::wire::*;

    /// A handshake at 0 with a 10 ms round trip, a request at 20 ms sent again at `again_ms`
    /// (none: not re-sent), the answer after the last, then FINs.
    fn fetch(again_ms: Option<i64>) -> Connection {
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(5, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(10, C, ACK, CISN + 1, SISN + 1, 0);
        w.send(20, C, ACK | PSH, CISN + 1, SISN + 1, 100);
        let mut t = 20;
        if let Some(again) = again_ms {
            w.send(again, C, ACK | PSH, CISN + 1, SISN + 1, 100);
            t = again;
        }
        w.send(t + 5, S, ACK | PSH, SISN + 1, CISN + 101, 200);
        w.send(t + 10, C, ACK | FIN, CISN + 101, SISN + 201, 0);
        w.send(t + 15, S, ACK | FIN, SISN + 201, CISN + 102, 0);
        w.send(t + 20, C, ACK, CISN + 102, SISN + 202, 0);
        w.conn().clone()
    }

    #[test]
    fn test_a_quick_resend_is_felt_by_no_one_and_a_timer_resend_delays() {
        let quick = fetch(Some(32));
        let slow = fetch(Some(20 + 400));
        let end = 10_000 * MS;
        let threshold = threshold_ns(Some(10 * MS));
        assert_eq!(threshold, RTO_MIN_NS);
        let one = felt(std::slice::from_ref(&quick), &[quick.id], end, threshold);
        assert_eq!((one.connections, one.failed, one.delayed, one.resends), (1, 0, 0, 1));
        assert_eq!(one.waited_ns, 12 * MS);
        let other = felt(std::slice::from_ref(&slow), &[slow.id], end, threshold);
        assert_eq!((other.connections, other.failed, other.delayed), (1, 0, 1));
        assert_eq!(other.longest_ns, 400 * MS);
    }

    #[test]
    fn test_the_threshold_grows_with_a_slow_capture_median() {
        assert_eq!(threshold_ns(None), RTO_MIN_NS);
        assert_eq!(threshold_ns(Some(300 * MS)), 1_200 * MS);
    }

    #[test]
    fn test_a_server_close_the_client_never_reacted_to_was_felt_by_no_one() {
        // The client's data, the server's FIN, the client's ACK of it and then nothing: a client
        // waiting for an answer would have read end of file and closed.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(2, C, ACK, CISN + 1, SISN + 1, 0);
        w.send(3, C, ACK | PSH, CISN + 1, SISN + 1, 100);
        w.send(4, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(50, S, ACK | FIN, SISN + 1, CISN + 101, 0);
        w.send(51, C, ACK, CISN + 101, SISN + 2, 0);
        let c = w.conn().clone();
        assert_eq!(classify(&c, 60 * MS).0, crate::detect::Outcome::ClosedByServer);
        let soon = felt(std::slice::from_ref(&c), &[c.id], 60 * MS, RTO_MIN_NS);
        assert_eq!(soon.failed, 1);
        let later = felt(std::slice::from_ref(&c), &[c.id], 5_000 * MS, RTO_MIN_NS);
        assert_eq!(later.failed, 0);
    }

    #[test]
    fn test_a_refused_connect_failed() {
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1, S, RST | ACK, 0, CISN + 1, 0);
        let c = w.conn().clone();
        let f = felt(std::slice::from_ref(&c), &[c.id], 10 * MS, RTO_MIN_NS);
        assert_eq!((f.failed, f.delayed), (1, 0));
    }
}
