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

/// What the spans show of the workers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Workers {
    /// The most connections answered while in service beside others: a lower bound.
    pub at_least: u64,
    /// The number whose service times fit, and the range that fits as well; `high` None when
    /// any number above `low` fits (the connections never waited long enough to tell).
    pub fit: Option<(u64, u64, Option<u64>)>,
    /// Service times of the connections that never waited, and of those that waited.
    pub free: u64,
    pub waited: u64,
    pub mean_service_s: f64,
}

/// Visits the spans in order of establishment, each with the ends of those established before
/// it and still held when it was (sorted).
fn sweep(spans: &[Span], mut visit: impl FnMut(&Span, &[i64])) {
    let mut order: Vec<&Span> = spans.iter().collect();
    order.sort_by_key(|s| (s.from_ns, s.until_ns));
    let mut ahead: Vec<i64> = Vec::new();
    for s in order {
        let gone = ahead.partition_point(|&u| u <= s.from_ns);
        ahead.drain(..gone);
        visit(s, &ahead);
        let at = ahead.partition_point(|&u| u <= s.until_ns);
        ahead.insert(at, s.until_ns);
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
    let low = at_least as usize;
    // Per number of workers w (index), the service times of the connections that waited, had
    // there been w; past each one's wait (`tail`), its time from establishment to answer.
    let mut waited = vec![Sample::default(); MAX_WORKERS + 2];
    let mut tail = vec![Sample::default(); MAX_WORKERS + 2];
    let mut free = Sample::default();
    let mut most_ahead = 0usize;
    sweep(spans, |s, ahead| {
        if !s.served {
            return;
        }
        let whole = (s.until_ns - s.from_ns) as f64 / 1e9;
        let len = ahead.len();
        if len < low {
            free.add(whole, 1);
            return;
        }
        most_ahead = most_ahead.max(len);
        for w in low..=len.min(MAX_WORKERS) {
            let start = ahead[len - w].max(s.from_ns);
            waited[w].add((s.until_ns - start) as f64 / 1e9, 1);
        }
        tail[(len + 1).min(MAX_WORKERS + 1)].add(whole, 1);
    });
    let mut out = Workers { at_least, fit: None, free: free.n, waited: 0, mean_service_s: free.mean() };
    let top = (most_ahead + 1).min(MAX_WORKERS + 1);
    let mut cumulative = Sample::default();
    let mut fits: Vec<(usize, f64, bool)> = Vec::new();
    for (w, (wait, past)) in waited.iter().zip(&tail).enumerate().take(top + 1).skip(low) {
        cumulative = cumulative.plus(*past);
        let sample = wait.plus(cumulative);
        out.waited = sample.n;
        if sample.n < MIN_SAMPLE || free.n < MIN_SAMPLE {
            return Some(out);
        }
        let gap = sample.mean() - free.mean();
        let tolerance = 2.0 * (sample.mean_variance() + free.mean_variance()).sqrt();
        fits.push((w, gap, gap.abs() <= tolerance));
    }
    let best = fits.iter().min_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))?;
    let fitting: Vec<usize> = fits.iter().filter(|f| f.2).map(|f| f.0).collect();
    let lo = fitting.iter().copied().min().unwrap_or(best.0).min(best.0);
    let hi = fitting.iter().copied().max().unwrap_or(best.0).max(best.0);
    let unbounded = hi >= top;
    out.fit = Some((best.0 as u64, lo as u64, (!unbounded).then_some(hi as u64)));
    Some(out)
}

impl Workers {
    pub fn estimate(&self) -> Estimate {
        let mut evidence = vec![format!(
            "{} answered while {} established before {} still unanswered: the listener hands \
             connections over in order (inet_csk_accept()), so at least {} were in service at once",
            if self.at_least == 1 { "no connection was" } else { "a connection was" },
            plural(self.at_least.saturating_sub(1), "connection", "connections"),
            if self.at_least == 2 { "it was" } else { "it were" },
            self.at_least,
        )];
        if self.at_least == 1 {
            evidence[0] = "no connection was answered while one established before it waited: at least 1 worker".into();
        }
        match self.fit {
            Some((value, low, high)) => {
                evidence.push(format!(
                    "with {value} workers, the {} connections that waited would have taken as long to serve as the {} \
                     that never waited ({:.3} s on average)",
                    self.waited, self.free, self.mean_service_s
                ));
                let value = value.max(self.at_least);
                let confidence = if high == Some(low) { 0.8 } else { 0.6 };
                Estimate::count(Some(value), Some(low.max(self.at_least)), high, confidence, evidence)
            }
            None => {
                evidence.push(format!(
                    "too few connections waited ({}) or never waited ({}) to tell more from their service times",
                    self.waited, self.free
                ));
                Estimate::count(None, Some(self.at_least), None, 0.5, evidence)
            }
        }
    }
}

/// How many connections were established and unanswered at each moment the listener dropped a
/// handshake ACK (the accept queue full for certain), else a SYN; sorted.
pub fn held_at_drops(spans: &[Span], drops: &[ListenDrop]) -> (Dropped, Vec<u64>) {
    let mut froms: Vec<i64> = spans.iter().map(|s| s.from_ns).collect();
    let mut untils: Vec<i64> = spans.iter().map(|s| s.until_ns).collect();
    froms.sort_unstable();
    untils.sort_unstable();
    let held = |t: i64| (froms.partition_point(|&f| f < t) - untils.partition_point(|&u| u < t)) as u64;
    let what = if drops.iter().any(|d| d.what == Dropped::HandshakeAck) { Dropped::HandshakeAck } else { Dropped::Syn };
    let mut out: Vec<u64> = drops.iter().filter(|d| d.what == what).map(|d| held(d.time_ns)).collect();
    out.sort_unstable();
    (what, out)
}

/// The effective backlog from the connections held at the drops and the workers.
pub fn backlog(spans: &[Span], drops: &[ListenDrop], workers: Option<&Estimate>) -> Option<Estimate> {
    let (what, held) = held_at_drops(spans, drops);
    let median = *held.get(held.len() / 2)?;
    if median == 0 {
        return None;
    }
    let (least, most) = (held[0], held[held.len() - 1]);
    let dropped = match what {
        Dropped::HandshakeAck => plural(held.len() as u64, "handshake ACK", "handshake ACKs"),
        Dropped::Syn => plural(held.len() as u64, "SYN", "SYNs"),
    };
    let mut evidence = vec![format!(
        "when the listener dropped {dropped}, the server held {median} connections established and unanswered \
         (the median; {least} to {most}): backlog + 1 in the accept queue (sk_acceptq_is_full()) and the rest with \
         the workers"
    )];
    let count = |e: Option<&Estimate>, pick: fn(&Estimate) -> Option<super::estimate::Bound>| match e.and_then(pick) {
        Some(super::estimate::Bound::Count(n)) => Some(n),
        _ => None,
    };
    let w_value = workers.and_then(|w| match w.value {
        super::estimate::Value::Count(n) => Some(n),
        _ => None,
    });
    let (w_low, w_high) = (count(workers, |w| w.low), count(workers, |w| w.high));
    let minus = |w: u64| median.checked_sub(1 + w);
    let value = w_value.and_then(minus);
    let low = w_high.and_then(minus).or(Some(0));
    let high = w_low.and_then(minus).or(median.checked_sub(1));
    match w_value {
        Some(w) => evidence.push(format!("less {} in service", plural(w, "worker", "workers"))),
        None => evidence.push("the workers are not known: only an upper bound".into()),
    }
    if what == Dropped::Syn {
        evidence.push("SYNs dropped on the path would look the same: an estimate".into());
    }
    let confidence = match (what, value.is_some(), low == high) {
        (Dropped::HandshakeAck, true, true) => 0.8,
        (Dropped::HandshakeAck, true, false) => 0.7,
        (Dropped::Syn, true, _) => 0.5,
        _ => 0.4,
    };
    Some(Estimate::count(value, low, high, confidence, evidence))
}
