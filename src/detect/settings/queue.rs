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
const MAX_SPREAD: u64 = 2;

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

/// How many connections were established for certain and unanswered at each moment the
/// listener dropped a handshake ACK or a SYN; and whether any was a handshake ACK (the accept
/// queue full for certain: a SYN is dropped on the path too).
pub fn held_at_drops(spans: &[Span], drops: &[ListenDrop]) -> (bool, Vec<u64>) {
    let mut settled: Vec<i64> = spans.iter().map(|s| s.settled_ns).collect();
    let mut untils: Vec<i64> = spans.iter().map(|s| s.until_ns).collect();
    settled.sort_unstable();
    untils.sort_unstable();
    let held = |t: i64| settled.partition_point(|&f| f < t).saturating_sub(untils.partition_point(|&u| u < t)) as u64;
    let mut out: Vec<u64> = drops.iter().map(|d| held(d.time_ns)).collect();
    out.sort_unstable();
    (drops.iter().any(|d| d.what == Dropped::HandshakeAck), out)
}

/// The effective backlog: the most connections held at a drop, less one, less the workers.
pub fn backlog(spans: &[Span], drops: &[ListenDrop], workers: Option<&Workers>) -> Option<Estimate> {
    let (acks, held) = held_at_drops(spans, drops);
    let most = *held.last()?;
    let (w_low, w_high) = workers.map_or((None, None), |w| (Some(w.at_least), w.at_most));
    let full = most.checked_sub(1 + w_low.unwrap_or(0))?;
    let dropped = if acks { "handshake ACKs and SYNs" } else { "SYNs" };
    let mut evidence = vec![format!(
        "when the listener dropped {dropped} ({} in all), it held up to {most} connections established and \
         unanswered: backlog + 1 in the accept queue (sk_acceptq_is_full()) and one with each worker",
        held.len()
    )];
    let low = match w_high {
        Some(w) => most.saturating_sub(1 + w),
        None => 0,
    };
    let high = full;
    let value = workers.and_then(|w| w.number()).map(|w| most.saturating_sub(1 + w));
    match (w_low, w_high) {
        (Some(lo), Some(hi)) if lo == hi => evidence.push(format!("less {}", plural(lo, "worker", "workers"))),
        (Some(lo), Some(hi)) => evidence.push(format!("less {lo} to {hi} workers")),
        _ => evidence.push("the workers are not known: an upper bound".into()),
    }
    if !acks {
        evidence.push("no handshake ACK was seen dropped, and SYNs lost on the path look the same: an estimate".into());
    }
    let confidence = match (acks, value.is_some()) {
        (true, true) => 0.8,
        (false, true) => 0.6,
        _ => 0.5,
    };
    Some(Estimate::count(value, Some(low), Some(high), confidence, evidence))
}
