//! What the capture's offered load would have done with other settings of the listener: the
//! load taken from the capture (`load`), replayed through a model of the kernel's listen queues
//! and a prefork server (`model`).

pub mod load;
pub mod model;

pub use load::{Load, Offered};
pub use model::{replay, Settings};

/// What one listener's connections came to, counted the same way for the capture (`observed`)
/// and for a replay of its load.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub connections: u64,
    pub answered: u64,
    pub failed: u64,
    /// Failed without ever getting a SYN-ACK: every SYN was dropped until the client gave up.
    pub failed_connecting: u64,
    /// Failed after the handshake, waiting for an answer (the request dropped, queued or served late).
    pub failed_waiting: u64,
    /// Failed on an RST from the server.
    pub failed_reset: u64,
    /// Connections whose client sent its SYN more than once.
    pub syn_retransmitted: u64,
    /// Segments dropped because the accept queue was full (Linux's LISTEN_OVERFLOWS); in the
    /// capture, an estimate from the SYNs never answered and the SYN-ACKs re-sent after the
    /// client's ACK.
    pub listen_overflows: u64,
    /// The answered connections' waits from their first SYN until a worker had their request.
    pub wait_p50_ns: Option<i64>,
    pub wait_p99_ns: Option<i64>,
    /// Over a prediction's replays (`replay_median`): the failed and SYN-retransmitted counts
    /// that the middle 80 % of them gave; None for one replay and for the capture.
    pub spread: Option<Spread>,
}

/// How far a prediction's replays spread: each count's 10th and 90th percentiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spread {
    pub failed: (u64, u64),
    pub syn_retransmitted: (u64, u64),
}

impl Outcome {
    /// Counts one connection: answered, or failed by how (an RST from the server, after a
    /// SYN-ACK waiting for an answer, or never connected).
    fn tally(&mut self, answered: bool, reset: bool, got_synack: bool) {
        if answered {
            self.answered += 1;
        } else if reset {
            self.failed_reset += 1;
        } else if got_synack {
            self.failed_waiting += 1;
        } else {
            self.failed_connecting += 1;
        }
    }

    /// Once every connection is counted: the failed ones, and the answered ones' waits.
    fn finish(&mut self, waits: &mut [i64]) {
        self.failed = self.connections - self.answered;
        self.wait_p50_ns = quantile(waits, 0.5);
        self.wait_p99_ns = quantile(waits, 0.99);
    }
}

/// Replays of a load differ by their draws of service times, and a queue on the edge of
/// overflowing turns a small difference into a large one (as the kernel's runs of one load do):
/// a prediction is the median, count by count, of this many replays seeded one after another,
/// with the spread of their counts.
pub const REPLAYS: u64 = 31;

/// The median outcome, count by count, of `REPLAYS` replays of `load` with `settings`, seeded
/// from `seed` on.
pub fn replay_median(load: &Load, settings: &Settings, seed: u64) -> Outcome {
    let outcomes: Vec<Outcome> = (0..REPLAYS).map(|i| replay(load, settings, seed.wrapping_add(i))).collect();
    let percentile = |f: fn(&Outcome) -> u64, q: f64| {
        let mut v: Vec<i64> = outcomes.iter().map(|o| f(o) as i64).collect();
        quantile(&mut v, q).map_or(0, |x| x as u64)
    };
    let median = |f: fn(&Outcome) -> u64| percentile(f, 0.5);
    let spread = |f: fn(&Outcome) -> u64| (percentile(f, 0.1), percentile(f, 0.9));
    let median_ns = |f: fn(&Outcome) -> Option<i64>| {
        let mut v: Vec<i64> = outcomes.iter().filter_map(f).collect();
        quantile(&mut v, 0.5)
    };
    let answered = median(|o| o.answered);
    let connections = outcomes.first().map_or(0, |o| o.connections);
    Outcome {
        connections,
        answered,
        failed: connections - answered,
        failed_connecting: median(|o| o.failed_connecting),
        failed_waiting: median(|o| o.failed_waiting),
        failed_reset: median(|o| o.failed_reset),
        syn_retransmitted: median(|o| o.syn_retransmitted),
        listen_overflows: median(|o| o.listen_overflows),
        wait_p50_ns: median_ns(|o| o.wait_p50_ns),
        wait_p99_ns: median_ns(|o| o.wait_p99_ns),
        spread: Some(Spread { failed: spread(|o| o.failed), syn_retransmitted: spread(|o| o.syn_retransmitted) }),
    }
}

/// The `q`-quantile (0..=1) of `values` by the nearest rank; None when empty.
pub fn quantile(values: &mut [i64], q: f64) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_replay_median_is_one_of_the_seeded_replays_count_by_count() {
        const MS: i64 = 1_000_000;
        // Ten connections at once on one worker and backlog 2, half with a service time the
        // capture showed, half drawn: the median lies within the replays' own range.
        let connections = (0..10)
            .map(|i| Offered { syn_ns: 0, rtt_ns: MS, service_ns: (i % 2 == 0).then_some(50 * MS * (i + 1)), seen: load::Seen::default() })
            .collect();
        let load = Load { connections };
        let settings = Settings { backlog: 2, workers: 1, client_timeout_ns: Some(400 * MS), ..Settings::default() };
        let each: Vec<Outcome> = (0..REPLAYS).map(|i| replay(&load, &settings, 7 + i)).collect();
        let median = replay_median(&load, &settings, 7);
        let failed: Vec<u64> = each.iter().map(|o| o.failed).collect();
        assert!(failed.iter().min() <= Some(&median.failed) && Some(&median.failed) <= failed.iter().max());
        let spread = median.spread.unwrap();
        assert!(failed.iter().min() <= Some(&spread.failed.0) && spread.failed.0 <= median.failed);
        assert!(median.failed <= spread.failed.1 && Some(&spread.failed.1) <= failed.iter().max());
        assert_eq!(median.connections, 10);
        assert_eq!(median.answered + median.failed, 10);
        assert_eq!(replay_median(&load, &settings, 7), median);
    }

    #[test]
    fn test_quantile_nearest_rank() {
        let mut v = vec![5, 1, 4, 2, 3];
        assert_eq!(quantile(&mut v, 0.5), Some(3));
        assert_eq!(quantile(&mut v, 0.99), Some(5));
        assert_eq!(quantile(&mut [], 0.5), None);
    }
}
