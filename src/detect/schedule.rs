//! The kernel's retransmission schedules, and which one a series of sends follows.
//!
//! We model Linux here (docs/diagnosis.md). Intervals are between consecutive sends.

const SECOND: i64 = 1_000_000_000;
/// Linux include/net/tcp.h: TCP_RTO_MIN (HZ/5), TCP_RTO_MAX (120 HZ), TCP_TIMEOUT_INIT (1 HZ),
/// TCP_TIMEOUT_FALLBACK (3 HZ).
const RTO_MIN_NS: i64 = SECOND / 5;
const RTO_MAX_NS: i64 = 120 * SECOND;
const TIMEOUT_INIT_NS: i64 = SECOND;
const TIMEOUT_FALLBACK_NS: i64 = 3 * SECOND;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// net.ipv4.tcp_syn_linear_timeouts = 4 (Linux 6.5+): 1 s five times, then doubling.
    SynLinear,
    /// Initial RTO 1 s, doubling (Linux 3.1 to 6.4, RFC 6298 §2.1).
    SynExponential,
    /// Initial RTO 3 s, doubling (before Linux 3.1, RFC 2988 §2.1).
    SynLegacy,
    /// net/ipv4/inet_connection_sock.c: reqsk_timer_handler(): 1 s << retries.
    Synack,
    /// Data: with SACK, a tail loss probe (RFC 8985 §7), then the RTO, doubling, at most 120 s.
    DataRto(DataTimers),
}

/// A data sender's timers when its segment went unanswered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataTimers {
    /// The first retransmission timeout.
    pub rto_ns: i64,
    /// The tail loss probe's wait, when there is one.
    pub probe_ns: Option<i64>,
}

impl DataTimers {
    /// The interval before timer-driven re-send number `n` (from 1).
    fn interval_ns(self, n: u32) -> i64 {
        match (self.probe_ns, n) {
            (Some(probe), 1) => probe,
            (Some(_), n) => doubling(self.rto_ns, n - 1),
            (None, n) => doubling(self.rto_ns, n),
        }
    }
}

/// `first`, doubled for every send after the first, at most TCP_RTO_MAX.
fn doubling(first: i64, n: u32) -> i64 {
    first.saturating_mul(1i64 << n.saturating_sub(1).min(20)).min(RTO_MAX_NS)
}

impl Schedule {
    /// Every schedule's slug, in the order of the variants.
    pub const SLUGS: [&'static str; 5] = ["syn_linear", "syn_exponential", "syn_legacy", "synack", "data_rto"];

    pub fn slug(self) -> &'static str {
        match self {
            Schedule::SynLinear => "syn_linear",
            Schedule::SynExponential => "syn_exponential",
            Schedule::SynLegacy => "syn_legacy",
            Schedule::Synack => "synack",
            Schedule::DataRto(_) => "data_rto",
        }
    }

    /// The interval before send number `n + 1` (the first retransmission is n = 1).
    pub fn interval_ns(self, n: u32) -> i64 {
        match self {
            Schedule::SynLinear if n <= 5 => SECOND,
            Schedule::SynLinear => doubling(SECOND, n - 4),
            Schedule::SynExponential | Schedule::Synack => doubling(SECOND, n),
            Schedule::SynLegacy => doubling(3 * SECOND, n),
            Schedule::DataRto(timers) => timers.interval_ns(n),
        }
    }

    /// SYNs a client sends before connect() fails with ETIMEDOUT. Linux v6.6
    /// net/ipv4/tcp_timer.c: tcp_write_timeout() allows tcp_syn_retries (6) plus
    /// tcp_syn_linear_timeouts (4) retransmissions in SYN-SENT; before 3.7, TCP_SYN_RETRIES was 5.
    pub fn syn_sends(self) -> u32 {
        match self {
            Schedule::SynLinear => 11,
            Schedule::SynLegacy => 6,
            _ => 7,
        }
    }
}

/// The data timers Linux starts with. `rtt_ns` is the handshake's round trip if the sender
/// took a sample from it: none after it re-sent its SYN (SYN-ACK) without timestamps (Karn).
/// net/ipv4/tcp_input.c: tcp_rtt_estimator(), first sample: srtt = rtt, rttvar = max(2 rtt,
/// TCP_RTO_MIN), RTO = srtt + rttvar; without one, net/ipv4/tcp_metrics.c: tcp_init_metrics():
/// TCP_TIMEOUT_FALLBACK. The probe (net/ipv4/tcp_output.c: tcp_schedule_loss_probe(), SACK
/// only): 2 srtt + TCP_RTO_MIN with one segment in flight, TCP_TIMEOUT_INIT without srtt, at
/// most the RTO.
pub fn data_timers(rtt_ns: Option<i64>, sack: bool) -> DataTimers {
    let (rto_ns, probe_ns) = match rtt_ns {
        Some(rtt) => {
            let rtt = rtt.max(0);
            ((rtt + (2 * rtt).max(RTO_MIN_NS)).min(RTO_MAX_NS), 2 * rtt + RTO_MIN_NS)
        }
        None => (TIMEOUT_FALLBACK_NS, TIMEOUT_INIT_NS),
    };
    DataTimers { rto_ns, probe_ns: sack.then_some(probe_ns.min(rto_ns)) }
}

/// Total deviation of observed intervals from a schedule's.
fn deviation_ns(schedule: Schedule, intervals: &[i64]) -> i64 {
    intervals.iter().zip(1u32..).map(|(&seen, n)| (seen - schedule.interval_ns(n)).abs()).sum()
}

/// The SYN schedule the intervals fit best. With nothing to tell linear and exponential apart
/// (no interval past the first), linear, the current default, is chosen.
pub fn fit_syn(intervals: &[i64]) -> Schedule {
    [Schedule::SynLinear, Schedule::SynExponential, Schedule::SynLegacy]
        .into_iter()
        .min_by_key(|&s| deviation_ns(s, intervals))
        .unwrap_or(Schedule::SynLinear)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = SECOND;
    const MS: i64 = S / 1000;

    #[test]
    fn test_syn_linear_is_five_seconds_of_one_then_doubling() {
        let got: Vec<i64> = (1..=10).map(|n| Schedule::SynLinear.interval_ns(n) / S).collect();
        assert_eq!(got, [1, 1, 1, 1, 1, 2, 4, 8, 16, 32]);
    }

    #[test]
    fn test_synack_doubles_from_one_second() {
        let got: Vec<i64> = (1..=5).map(|n| Schedule::Synack.interval_ns(n) / S).collect();
        assert_eq!(got, [1, 2, 4, 8, 16]);
    }

    #[test]
    fn test_syn_sends_before_etimedout() {
        assert_eq!(Schedule::SynLinear.syn_sends(), 11);
        assert_eq!(Schedule::SynExponential.syn_sends(), 7);
        assert_eq!(Schedule::SynLegacy.syn_sends(), 6);
    }

    #[test]
    fn test_data_probe_then_rto_doubling_capped_at_120_s() {
        let timers = DataTimers { rto_ns: 200 * MS, probe_ns: Some(150 * MS) };
        let got: Vec<i64> = (1..=5).map(|n| Schedule::DataRto(timers).interval_ns(n) / MS).collect();
        assert_eq!(got, [150, 200, 400, 800, 1600]);
        assert_eq!(Schedule::DataRto(timers).interval_ns(16), RTO_MAX_NS);
    }

    #[test]
    fn test_data_without_probe_doubles_from_the_first_rto() {
        let timers = DataTimers { rto_ns: 200 * MS, probe_ns: None };
        let got: Vec<i64> = (1..=4).map(|n| Schedule::DataRto(timers).interval_ns(n) / MS).collect();
        assert_eq!(got, [200, 400, 800, 1600]);
    }

    #[test]
    fn test_fit_syn_tells_the_schedules_apart() {
        assert_eq!(fit_syn(&[S, S, S]), Schedule::SynLinear);
        assert_eq!(fit_syn(&[S, 2 * S, 4 * S]), Schedule::SynExponential);
        assert_eq!(fit_syn(&[3 * S, 6 * S]), Schedule::SynLegacy);
        assert_eq!(fit_syn(&[S]), Schedule::SynLinear);
        assert_eq!(fit_syn(&[]), Schedule::SynLinear);
    }

    #[test]
    fn test_data_timers_lan_round_trip() {
        // RTO = rtt + 200 ms; the probe (2 rtt + 200 ms) is capped at the RTO.
        assert_eq!(data_timers(Some(MS), true), DataTimers { rto_ns: 201 * MS, probe_ns: Some(201 * MS) });
        assert_eq!(data_timers(Some(0), true), DataTimers { rto_ns: 200 * MS, probe_ns: Some(200 * MS) });
    }

    #[test]
    fn test_data_timers_long_round_trip() {
        // rttvar = 2 rtt once that exceeds 200 ms: RTO = 3 rtt; the probe comes first.
        assert_eq!(data_timers(Some(300 * MS), true), DataTimers { rto_ns: 900 * MS, probe_ns: Some(800 * MS) });
        assert_eq!(data_timers(Some(300 * MS), false), DataTimers { rto_ns: 900 * MS, probe_ns: None });
    }

    #[test]
    fn test_data_timers_without_a_sample_fall_back() {
        assert_eq!(data_timers(None, true), DataTimers { rto_ns: 3 * S, probe_ns: Some(S) });
        assert_eq!(data_timers(None, false), DataTimers { rto_ns: 3 * S, probe_ns: None });
    }
}
