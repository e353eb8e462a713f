//! The listener's accept queue and workers as the connections' spans show them.
//!
//! A listener hands connections to its application in the order they were established (the
//! accept queue is a FIFO: Linux v6.6 net/ipv4/inet_connection_sock.c: inet_csk_accept() takes
//! reqsk_queue_remove()'s head). So a connection answered while others established before it
//! were still unanswered was in service beside them: the most such, plus one, is a lower bound
//! on the workers. Their number is then the one whose service times, worked out for the
//! connections that waited (each starting when enough of those ahead of it had gone), match those
//! of the connections that never waited. When the listener dropped, its accept queue held
//! backlog + 1 connections (include/net/sock.h: sk_acceptq_is_full() is `>`
//! sk_max_ack_backlog) and every worker was busy: the connections established and unanswered
//! then were backlog + 1 + workers.

use super::estimate::{plural, Estimate};
use super::gather::{Dropped, ListenDrop, Span};

/// Workers looked for, at most.
const MAX_WORKERS: usize = 1024;
/// Fewer service times than this on either side tell nothing.
const MIN_SAMPLE: u64 = 5;
/// A connection is taken as established before another only when it was this much earlier (two
/// ACKs a moment apart may reach the listener in either order).
const BEFORE_NS: i64 = 1_000_000;
/// The workers are given as a number when the service times fit no more than this many above
/// the fewest that explain what was seen.
const MAX_SPREAD: u64 = 1;

/// What the spans show of the workers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Workers {
    /// The most connections answered while in service beside others: a lower bound.
    pub at_least: u64,
    /// The most workers whose service times fit those of the connections that never waited;
    /// None when any number above `at_least` fits (the connections never waited long enough to
    /// tell), or too few connections waited.
    pub at_most: Option<u64>,
    /// Connections answered that never waited, those that waited, and their mean service time.
    pub free: u64,
    pub waited: u64,
    pub mean_service_s: f64,
}

/// Visits the spans in order of establishment (the earliest), each with the ends of those
/// established before it for certain (their latest establishment `BEFORE_NS` before its
/// earliest) and still held then, sorted.
fn sweep(spans: &[Span], mut visit: impl FnMut(&Span, &[i64])) {
    let mut by_from: Vec<&Span> = spans.iter().collect();
    by_from.sort_by_key(|s| (s.from_ns, s.settled_ns, s.until_ns));
    let mut by_settled: Vec<&Span> = spans.iter().collect();
    by_settled.sort_by_key(|s| (s.settled_ns, s.from_ns, s.until_ns));
    let mut settled = by_settled.into_iter().peekable();
    let mut ahead: Vec<i64> = Vec::new();
    for s in by_from {
        while let Some(before) = settled.next_if(|b| b.settled_ns < s.from_ns - BEFORE_NS) {
            let at = ahead.partition_point(|&u| u <= before.until_ns);
            ahead.insert(at, before.until_ns);
        }
        let gone = ahead.partition_point(|&u| u <= s.from_ns);
        ahead.drain(..gone);
        visit(s, &ahead);
    }
}

/// Sums of a sample, for its mean and variance.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    n: u64,
    sum: f64,
    squares: f64,
}

impl Sample {
    fn add(&mut self, x: f64, n: u64) {
        self.n += n;
        self.sum += x * n as f64;
        self.squares += x * x * n as f64;
    }

    fn plus(self, other: Sample) -> Sample {
        Sample { n: self.n + other.n, sum: self.sum + other.sum, squares: self.squares + other.squares }
    }

    fn mean(&self) -> f64 {
        self.sum / self.n.max(1) as f64
    }

    /// The variance of the mean.
    fn mean_variance(&self) -> f64 {
        if self.n < 2 {
            return f64::INFINITY;
        }
        let n = self.n as f64;
        ((self.squares - self.sum * self.sum / n) / (n - 1.0)).max(0.0) / n
    }
}

pub fn workers(spans: &[Span]) -> Option<Workers> {
    let mut at_least = 0u64;
    sweep(spans, |s, ahead| {
        if s.served {
            let still_there = ahead.len() - ahead.partition_point(|&u| u <= s.until_ns);
            at_least = at_least.max(still_there as u64 + 1);
        }
    });
    if at_least == 0 {
        return None;
    }
    let low = (at_least as usize).min(MAX_WORKERS);
    // Per number of workers w (index), the service times of the connections that waited, had
    // there been w; for each connection, from the count of those ahead of it (`tail`) on, its
    // time from establishment to answer.
    let mut waited = vec![Sample::default(); MAX_WORKERS + 2];
    let mut tail = vec![Sample::default(); MAX_WORKERS + 2];
    let mut free = Sample::default();
    let mut most_ahead = 0usize;
    sweep(spans, |s, ahead| {
        if !s.served {
            return;
        }
        let whole = (s.until_ns - s.settled_ns) as f64 / 1e9;
        let len = ahead.len();
        if len < low {
            free.add(whole, 1);
            return;
        }
        most_ahead = most_ahead.max(len);
        for (w, sample) in waited.iter_mut().enumerate().take(len.min(MAX_WORKERS) + 1).skip(low) {
            let start = ahead[len - w].max(s.settled_ns);
            sample.add((s.until_ns - start) as f64 / 1e9, 1);
        }
        tail[(len + 1).min(MAX_WORKERS + 1)].add(whole, 1);
    });
    let mut out = Workers { at_least, at_most: None, free: free.n, waited: 0, mean_service_s: free.mean() };
    // Past `top` every connection's service time is its whole wait: more workers change nothing.
    let top = (most_ahead + 1).min(MAX_WORKERS + 1);
    let mut cumulative = Sample::default();
    for w in 0..=top {
        cumulative = cumulative.plus(tail[w]);
        if w < low {
            continue;
        }
        let sample = waited[w].plus(cumulative);
        if w == low {
            out.waited = sample.n;
        }
        if sample.n < MIN_SAMPLE || free.n < MIN_SAMPLE || w == top {
            return Some(out);
        }
        // More workers only lengthen the service times worked out for those that waited: past
        // the first number that makes them longer than the free ones', none fits.
        let gap = sample.mean() - free.mean();
        let tolerance = 2.0 * (sample.mean_variance() + free.mean_variance()).sqrt();
        if gap > tolerance {
            out.at_most = Some((w as u64).saturating_sub(1).max(at_least));
            return Some(out);
        }
    }
    Some(out)
}

impl Workers {
    /// The fewest workers that explain what was seen, when the service times fit no more than
    /// `MAX_SPREAD` above them.
    pub fn number(&self) -> Option<u64> {
        self.at_most.filter(|&high| high - self.at_least <= MAX_SPREAD).map(|_| self.at_least)
    }

    pub fn estimate(&self) -> Estimate {
        let mut evidence = vec![if self.at_least <= 1 {
            "no connection was answered while one established before it waited: at least 1 worker".to_string()
        } else {
            format!(
                "a connection was answered while {} established before it {} still unanswered: the listener hands \
                 connections over in the order they were established (inet_csk_accept()), so at least {} were in \
                 service at once",
                plural(self.at_least - 1, "connection", "connections"),
                if self.at_least == 2 { "was" } else { "were" },
                self.at_least,
            )
        }];
        match self.at_most {
            Some(high) => {
                evidence.push(format!(
                    "with more than {} workers, the {} connections that waited would have taken longer to serve than \
                     the {} that never waited ({:.3} s on average)",
                    high, self.waited, self.free, self.mean_service_s
                ));
                let value = self.number();
                let confidence = if high == self.at_least { 0.8 } else { 0.6 };
                Estimate::count(value, Some(self.at_least), Some(high), confidence, evidence)
            }
            None => {
                evidence.push(format!(
                    "the {} connections that waited ({} never did) do not tell how many more: a lower bound",
                    self.waited, self.free
                ));
                Estimate::count(None, Some(self.at_least), None, 0.5, evidence)
            }
        }
    }
}

/// A drop after which the server answered within this long found its workers busy.
const ANSWERING_NS: i64 = 1_000_000_000;

/// At one drop: the connections established for certain and unanswered, and whether the server
/// answered one soon after (its workers were serving, not stalled).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Held {
    pub connections: u64,
    pub answering: bool,
}

/// What the listener held at each moment it dropped a handshake ACK or a SYN, sorted; and
/// whether any was a handshake ACK (the accept queue full for certain: a SYN is dropped on the
/// path too).
pub fn held_at_drops(spans: &[Span], drops: &[ListenDrop]) -> (bool, Vec<Held>) {
    let mut settled: Vec<i64> = spans.iter().map(|s| s.settled_ns).collect();
    let mut untils: Vec<i64> = spans.iter().map(|s| s.until_ns).collect();
    let mut answers: Vec<i64> = spans.iter().filter(|s| s.served).map(|s| s.until_ns).collect();
    settled.sort_unstable();
    untils.sort_unstable();
    answers.sort_unstable();
    let held = |t: i64| Held {
        connections: settled.partition_point(|&f| f < t).saturating_sub(untils.partition_point(|&u| u < t)) as u64,
        answering: answers.get(answers.partition_point(|&a| a < t)).is_some_and(|&a| a - t <= ANSWERING_NS),
    };
    let mut out: Vec<Held> = drops.iter().map(|d| held(d.time_ns)).collect();
    out.sort_unstable();
    (drops.iter().any(|d| d.what == Dropped::HandshakeAck), out)
}

/// SYN drops at a steady fullest count, this many at least, are the listener's: a full accept
/// queue holds steady while it drops, the path's losses come at any count.
const MIN_AT_FULLEST: usize = 3;

/// The most connections held at drops: the highest count seen at two drops or more. A count
/// seen once above it is a race, not the queue's size: the listener checks sk_acceptq_is_full()
/// before it queues the child, without a lock (net/ipv4/tcp_ipv4.c: tcp_v4_syn_recv_sock()), so
/// two handshakes completing at once on two CPUs can both pass the check.
fn fullest(held: &[Held]) -> u64 {
    let repeated = held.windows(2).filter(|w| w[0].connections == w[1].connections).map(|w| w[0].connections).max();
    repeated.or_else(|| held.last().map(|h| h.connections)).unwrap_or(0)
}

/// The effective backlog: the most connections held at drops (`fullest()`), less one, less the
/// workers when they were serving then.
pub fn backlog(spans: &[Span], drops: &[ListenDrop], workers: Option<&Workers>) -> Option<Estimate> {
    let (acks, held) = held_at_drops(spans, drops);
    let highest = held.last()?.connections;
    let most = fullest(&held);
    let at_most = held.iter().filter(|h| h.connections == most).count();
    if most == 0 || (!acks && (at_most < MIN_AT_FULLEST || 2 * at_most < held.len())) {
        return None;
    }
    let busy = held.iter().any(|h| h.connections == most && h.answering);
    let dropped = if acks { "handshake ACKs and SYNs" } else { "SYNs" };
    let mut evidence = vec![format!(
        "when the listener dropped {dropped} ({} in all), it held up to {most} connections established and \
         unanswered: backlog + 1 in the accept queue (sk_acceptq_is_full()) and one with each busy worker",
        held.len()
    )];
    let (w_low, w_high, w_value) = match (workers, busy) {
        (Some(w), true) => (w.at_least, w.at_most, w.number()),
        _ => (0, None, None),
    };
    let high = most - 1 - w_low.min(most - 1);
    let low = w_high.map_or(0, |w| most.saturating_sub(1 + w));
    let value = w_value.map(|w| most.saturating_sub(1 + w));
    match (busy, w_value, w_high) {
        (false, _, _) => evidence.push("the server answered nothing just after: its workers may not have been serving, an upper bound".into()),
        (true, Some(w), _) => evidence.push(format!("less {}", plural(w, "worker", "workers"))),
        (true, None, Some(hi)) => evidence.push(format!("less {w_low} to {hi} workers")),
        (true, None, None) => evidence.push(format!("less at least {}: an upper bound", plural(w_low, "worker", "workers"))),
    }
    if highest > most {
        let above = held.iter().filter(|h| h.connections > most).count();
        evidence.push(format!(
            "{} held more, up to {highest}, each count once: two handshakes completed at the same moment on two CPUs \
             both pass sk_acceptq_is_full() before either child is queued (tcp_v4_syn_recv_sock(), a lockless listener)",
            plural(above as u64, "drop", "drops")
        ));
    }
    if !acks {
        evidence.push(format!(
            "no handshake ACK was seen dropped; {at_most} of the SYN drops came at that count, as a full queue's do, \
             not at any count as a path's losses"
        ));
    }
    let confidence = match (acks, value.is_some()) {
        (true, true) => 0.8,
        (false, true) => 0.6,
        _ => 0.5,
    };
    Some(Estimate::count(value, Some(low), Some(high), confidence, evidence))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::settings::estimate::Value;

    const MS: i64 = 1_000_000;

    /// The spans of connections arriving at `arrivals` (ms) with `services` (ms, cycled), served
    /// first come first served by `workers`.
    fn served(workers: usize, arrivals: &[i64], services: &[i64]) -> Vec<Span> {
        let mut free_at = vec![0i64; workers];
        arrivals
            .iter()
            .zip(services.iter().cycle())
            .map(|(&at, &service)| {
                let (w, &free) = free_at.iter().enumerate().min_by_key(|(_, &f)| f).unwrap();
                let start = free.max(at * MS);
                free_at[w] = start + service * MS;
                Span { from_ns: at * MS, settled_ns: at * MS, until_ns: start + service * MS, served: true }
            })
            .collect()
    }

    /// Quiet arrivals (each served alone), then a burst of 30, 2 ms apart.
    fn quiet_then_burst() -> Vec<i64> {
        let mut arrivals: Vec<i64> = (0..20).map(|i| i * 1000).collect();
        arrivals.extend((0..30).map(|i| 30_000 + 2 * i));
        arrivals
    }

    const MIX: [i64; 5] = [20, 80, 20, 300, 20];

    #[test]
    fn test_workers_burst_behind_two_workers_is_two() {
        let w = workers(&served(2, &quiet_then_burst(), &MIX)).unwrap();
        assert_eq!((w.at_least, w.number()), (2, Some(2)), "{w:?}");
    }

    #[test]
    fn test_workers_burst_behind_four_workers_holds_four() {
        let w = workers(&served(4, &quiet_then_burst(), &MIX)).unwrap();
        assert!(w.at_least == 4 && w.at_most.is_none_or(|high| high >= 4), "{w:?}");
    }

    #[test]
    fn test_workers_never_waiting_is_only_a_lower_bound() {
        // One connection at a time: nothing tells how many workers there were.
        let arrivals: Vec<i64> = (0..50).map(|i| i * 1000).collect();
        let w = workers(&served(8, &arrivals, &MIX)).unwrap();
        assert_eq!((w.at_least, w.at_most, w.number()), (1, None, None), "{w:?}");
        assert_eq!(w.estimate().value, Value::Unknown);
    }

    #[test]
    fn test_workers_overtaking_within_a_moment_is_not_counted() {
        // Two established 0.5 ms apart, the second answered first: either may have come first.
        let spans = [
            Span { from_ns: 0, settled_ns: 0, until_ns: 100 * MS, served: true },
            Span { from_ns: MS / 2, settled_ns: MS / 2, until_ns: 50 * MS, served: true },
        ];
        assert_eq!(workers(&spans).unwrap().at_least, 1);
    }

    #[test]
    fn test_backlog_is_the_most_held_at_a_drop_less_one_less_the_workers() {
        // Two workers and a backlog of 3: six connections held when the listener dropped.
        let mut spans = served(2, &quiet_then_burst(), &MIX);
        spans.truncate(20 + 6);
        let drop = ListenDrop { time_ns: 30_011 * MS, what: Dropped::HandshakeAck };
        let w = workers(&served(2, &quiet_then_burst(), &MIX)).unwrap();
        let b = backlog(&spans, &[drop], Some(&w)).unwrap();
        assert_eq!(b.value, Value::Count(3), "{b:?}");
    }

    #[test]
    fn test_fullest_sets_aside_a_count_seen_once_above_the_others() {
        let held = |counts: &[u64]| counts.iter().map(|&connections| Held { connections, answering: true }).collect::<Vec<_>>();
        // A queue of 17 with 2 busy workers holds 19 at most; 20 once is two ACKs admitted at once.
        assert_eq!(fullest(&held(&[17, 18, 19, 19, 19, 20])), 19);
        assert_eq!(fullest(&held(&[19, 19, 20, 20])), 20);
        // Nothing repeats: the highest is all there is.
        assert_eq!(fullest(&held(&[5, 7])), 7);
        assert_eq!(fullest(&[]), 0);
    }

    #[test]
    fn test_backlog_without_drops_is_not_shown() {
        let spans = served(2, &quiet_then_burst(), &MIX);
        assert!(backlog(&spans, &[], workers(&spans).as_ref()).is_none());
    }

    #[test]
    fn test_held_counts_only_connections_established_for_certain() {
        // Established between 0 and 10 ms (its handshake ACK dropped): not held for certain at 5 ms.
        let spans = [Span { from_ns: 0, settled_ns: 10 * MS, until_ns: 50 * MS, served: true }];
        let at = |ms: i64| held_at_drops(&spans, &[ListenDrop { time_ns: ms * MS, what: Dropped::Syn }]).1;
        let count = |ms: i64| at(ms).iter().map(|h| h.connections).collect::<Vec<u64>>();
        assert_eq!((count(5), count(20), count(60)), (vec![0], vec![1], vec![0]));
    }
}

