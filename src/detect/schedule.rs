//! The kernel's retransmission schedules, and which one a series of sends follows.
//!
//! We model Linux here (docs/diagnosis.md). Intervals are between consecutive sends.

const SECOND: i64 = 1_000_000_000;
/// Linux include/net/tcp.h: TCP_RTO_MIN (HZ/5), TCP_RTO_MAX (120 HZ), TCP_TIMEOUT_FALLBACK (3 HZ).
const RTO_MIN_NS: i64 = SECOND / 5;
const RTO_MAX_NS: i64 = 120 * SECOND;
const TIMEOUT_FALLBACK_NS: i64 = 3 * SECOND;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// net.ipv4.tcp_syn_linear_timeouts = 4 (Linux 6.5+): 1 s five times, then doubling.
    SynLinear,
    /// Initial RTO 1 s, doubling (Linux 3.1 to 6.4, RFC 6298 §2.1).
    SynExponential,
    /// Initial RTO 3 s, doubling (before Linux 3.1, RFC 2988).
    SynLegacy,
    /// net/ipv4/inet_connection_sock.c: reqsk_timer_handler(): 1 s << retries.
    Synack,
    /// Data: a tail loss probe after about one RTO (RFC 8985 §7; Linux v6.6
    /// net/ipv4/tcp_output.c: tcp_schedule_loss_probe() waits 1.5 RTT + 200 ms, at most the
    /// RTO, with one segment in flight), then the RTO, doubling, at most 120 s.
    DataRto,
}

impl Schedule {
    pub fn slug(self) -> &'static str {
        match self {
            Schedule::SynLinear => "syn_linear",
            Schedule::SynExponential => "syn_exponential",
            Schedule::SynLegacy => "syn_legacy",
            Schedule::Synack => "synack",
            Schedule::DataRto => "data_rto",
        }
    }

    /// The interval before send number `n + 1` (the first retransmission is n = 1).
    pub fn interval_ns(self, n: u32, first_rto_ns: i64) -> i64 {
        let doubling = |first: i64, k: u32| first.saturating_mul(1i64 << k.saturating_sub(1).min(20)).min(RTO_MAX_NS);
        match self {
            Schedule::SynLinear if n <= 5 => SECOND,
            Schedule::SynLinear => doubling(SECOND, n - 4),
            Schedule::SynExponential | Schedule::Synack => doubling(SECOND, n),
            Schedule::SynLegacy => doubling(3 * SECOND, n),
            Schedule::DataRto if n <= 1 => first_rto_ns,
            Schedule::DataRto => doubling(first_rto_ns, n - 1),
        }
    }
}

/// The first data RTO Linux would use: srtt + 4 rttvar is about the round trip plus 200 ms on a
/// LAN, never less than 200 ms; 3 s when the handshake was retransmitted and timestamps are
/// off (commit 9ad7c049, TCP_TIMEOUT_FALLBACK).
pub fn first_data_rto_ns(rtt_ns: Option<i64>, handshake_retransmitted: bool, timestamps: bool) -> i64 {
    if handshake_retransmitted && !timestamps {
        return TIMEOUT_FALLBACK_NS;
    }
    (rtt_ns.unwrap_or(0).max(0) + RTO_MIN_NS).max(RTO_MIN_NS)
}

/// Total deviation of observed intervals from a schedule's.
fn deviation_ns(schedule: Schedule, intervals: &[i64], first_rto_ns: i64) -> i64 {
    intervals.iter().zip(1u32..).map(|(&seen, n)| (seen - schedule.interval_ns(n, first_rto_ns)).abs()).sum()
}

/// The SYN schedule the intervals fit best. With nothing to tell linear and exponential apart
/// (no interval past the first), linear, the current default, is chosen.
pub fn fit_syn(intervals: &[i64]) -> Schedule {
    [Schedule::SynLinear, Schedule::SynExponential, Schedule::SynLegacy]
        .into_iter()
        .min_by_key(|&s| deviation_ns(s, intervals, 0))
        .unwrap_or(Schedule::SynLinear)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = SECOND;

    #[test]
    fn test_syn_linear_is_five_seconds_of_one_then_doubling() {
        let got: Vec<i64> = (1..=8).map(|n| Schedule::SynLinear.interval_ns(n, 0) / S).collect();
        assert_eq!(got, [1, 1, 1, 1, 1, 2, 4, 8]);
    }

    #[test]
    fn test_synack_doubles_from_one_second() {
        let got: Vec<i64> = (1..=5).map(|n| Schedule::Synack.interval_ns(n, 0) / S).collect();
        assert_eq!(got, [1, 2, 4, 8, 16]);
    }

    #[test]
    fn test_data_probe_then_rto_doubling_capped_at_120_s() {
        let got: Vec<i64> = (1..=5).map(|n| Schedule::DataRto.interval_ns(n, RTO_MIN_NS) / (RTO_MIN_NS / 10)).collect();
        assert_eq!(got, [10, 10, 20, 40, 80]);
        assert_eq!(Schedule::DataRto.interval_ns(16, RTO_MIN_NS), RTO_MAX_NS);
    }

    #[test]
    fn test_fit_syn_tells_the_schedules_apart() {
        assert_eq!(fit_syn(&[S, S, S]), Schedule::SynLinear);
        assert_eq!(fit_syn(&[S, 2 * S, 4 * S]), Schedule::SynExponential);
        assert_eq!(fit_syn(&[3 * S, 6 * S]), Schedule::SynLegacy);
        assert_eq!(fit_syn(&[S]), Schedule::SynLinear);
    }

    #[test]
    fn test_first_data_rto() {
        assert_eq!(first_data_rto_ns(Some(1_000_000), false, true), RTO_MIN_NS + 1_000_000);
        assert_eq!(first_data_rto_ns(None, false, false), RTO_MIN_NS);
        assert_eq!(first_data_rto_ns(Some(1_000_000), true, false), 3 * S);
        assert_eq!(first_data_rto_ns(Some(1_000_000), true, true), RTO_MIN_NS + 1_000_000);
    }
}
