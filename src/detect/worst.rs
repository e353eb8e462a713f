//! The worst connections of a capture, ranked for the report's table and ladders (Python's
//! `Analysis.worst` and `Analysis.worst_rows`).

use super::{added_latency_ns, classify, servers};
use crate::flow::Connection;

/// How many of `connections` have a problem (`servers::has_problem`), and the places of the `n`
/// worst, worst first: failed outcomes, then any symptom, then the most added latency, then the
/// earliest, then the lowest id (`report.timeline.severity` in Python).
pub fn rank_worst(connections: &[Connection], end_ns: i64, n: usize) -> (usize, Vec<usize>) {
    let mut ranked: Vec<((bool, bool, i64, i64, u64), usize)> = Vec::new();
    for (i, c) in connections.iter().enumerate() {
        let (outcome, symptoms) = classify(c, end_ns);
        if !servers::has_problem(outcome, symptoms) {
            continue;
        }
        let latency = added_latency_ns(c);
        ranked.push(((!outcome.is_failure(), symptoms.is_empty(), -latency, c.first_time_ns, c.id), i));
    }
    let count = ranked.len();
    if n < count {
        ranked.select_nth_unstable(n);
        ranked.truncate(n);
    }
    ranked.sort_unstable();
    (count, ranked.into_iter().map(|(_, i)| i).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::wire::*;

    /// A handshake from `ms`, its SYN sent again at each of `again`: open, with no problem when
    /// `again` is empty, else `syn_retransmitted` and its added latency.
    fn connected(ms: i64, again: &[i64]) -> Connection {
        let mut w = Wire::new();
        for &t in std::iter::once(&ms).chain(again) {
            w.send(t, C, SYN, CISN, 0, 0);
        }
        let last = again.last().copied().unwrap_or(ms);
        w.send(last + 1, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(last + 2, C, ACK, CISN + 1, SISN + 1, 0);
        w.conn().clone()
    }

    /// A SYN at `ms` answered by the server's RST: refused, a failure.
    fn refused(ms: i64) -> Connection {
        let mut w = Wire::new();
        w.send(ms, C, SYN, CISN, 0, 0);
        w.send(ms + 1, S, RST | ACK, 0, CISN + 1, 0);
        w.conn().clone()
    }

    #[test]
    fn test_failures_first_then_symptoms_by_added_latency_then_the_earliest() {
        let conns = [connected(0, &[]), connected(100, &[1100]), refused(5000), connected(200, &[1200, 3200]), refused(50)];
        let end_ns = 10_000 * MS;
        assert_eq!(rank_worst(&conns, end_ns, 10), (4, vec![4, 2, 3, 1]));
        // Fewer asked for: the same first ones, and still every problem counted.
        assert_eq!(rank_worst(&conns, end_ns, 3), (4, vec![4, 2, 3]));
        assert_eq!(rank_worst(&conns, end_ns, 0), (4, vec![]));
        assert_eq!(rank_worst(&conns[..1], end_ns, 10), (0, vec![]));
    }

    #[test]
    fn test_ties_go_to_the_lowest_id() {
        let mut a = refused(0);
        let mut b = refused(0);
        (a.id, b.id) = (7, 3);
        assert_eq!(rank_worst(&[a, b], 1_000 * MS, 10), (2, vec![1, 0]));
    }
}
