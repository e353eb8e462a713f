//! The clock offset between two capture points, and its drift, from the packets both saw.
//!
//! As NTP does from its four timestamps (RFC 5905 §8): a packet that went from point U (nearer
//! the client) to point D and one that came back give `f = t_D - t_U = offset + delay_forth`
//! and `g = t_U - t_D = delay_back - offset`, so `offset = (f - g) / 2` wherever the two delays
//! are equal, and it is off by at most half the round trip `f + g` where they are not. Queues
//! only ever add delay, so the packets that crossed fastest each way in a window give the best
//! pair (RFC 5905 §10, the clock filter). Here the windows are `BUCKET_NS` of the first point's
//! clock; the offsets of the windows are fitted by a line over time: its slope is the drift of
//! one clock against the other.
//!
//! Which point is nearer the client is not given: packets from client to server reach it first,
//! so their `t_b - t_a` is larger than that of packets the other way when it is the first point.

use rustc_hash::FxHashMap;

use super::conns::Dir;

/// The window of the clock filter.
pub const BUCKET_NS: i64 = 1_000_000_000;

/// Running statistics of `x = t_b - t_a - base` over the packets of one direction of one window.
#[derive(Clone, Copy, Debug)]
struct Spread {
    n: u64,
    min: i64,
    max: i64,
    sum: f64,
    sumsq: f64,
}

impl Default for Spread {
    fn default() -> Spread {
        Spread { n: 0, min: i64::MAX, max: i64::MIN, sum: 0.0, sumsq: 0.0 }
    }
}

impl Spread {
    fn add(&mut self, x: i64) {
        self.n += 1;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        let x = x as f64;
        self.sum += x;
        self.sumsq += x * x;
    }

    fn mean(&self) -> f64 {
        self.sum / self.n as f64
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    /// Per `Dir`, of the connection as the first point saw it.
    dirs: [Spread; 2],
    /// Sum of the first point's times less the bucket start, for the mean time of its samples.
    times: f64,
}

/// The one-way delays of one direction of the connections, between the two points.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Delays {
    pub packets: u64,
    /// Seconds.
    pub min: f64,
    pub mean: f64,
    /// Standard deviation.
    pub spread: f64,
    pub max: f64,
}

/// What the matched pairs say of the two clocks.
#[derive(Clone, Debug, PartialEq)]
pub struct ClockFit {
    /// Whether the first point is the one nearer the client (packets to the server pass it first).
    pub first_is_client_side: bool,
    /// Second point's clock minus the first's at `at_ns` (first point's clock), nanoseconds.
    pub offset_ns: f64,
    pub at_ns: i64,
    /// d offset / d time (0.00005 is 50 ppm).
    pub drift: f64,
    /// Half the smallest round trip of a window, or the spread of the windows around the line
    /// if larger: how far the true offset may be from the one given.
    pub uncertainty_ns: f64,
    /// Windows that had packets both ways (the fit's points).
    pub windows: usize,
    /// Per `Dir`.
    pub delays: [Delays; 2],
}

impl ClockFit {
    /// The offset at time `t_ns` of the first point's clock.
    pub fn offset_at(&self, t_ns: i64) -> f64 {
        self.offset_ns + self.drift * (t_ns - self.at_ns) as f64
    }
}

/// Collects matched pairs, then fits.
pub struct Clock {
    /// The latest window's mean one-way delay (half the gap between the directions' means).
    delay: f64,
    /// Subtracted from every `t_b - t_a` so the sums stay small: the coarse offset.
    base: i64,
    buckets: FxHashMap<i64, Bucket>,
    /// The latest window's estimate (midpoint of the two directions' means), for the merge.
    running: Option<f64>,
}

impl Clock {
    pub fn new(base: i64) -> Clock {
        Clock { base, buckets: FxHashMap::default(), running: None, delay: 0.0 }
    }

    /// A packet seen at the first point at `t_a` and at the second at `t_b`, going `dir` in
    /// its connection as the first point saw it.
    pub fn add(&mut self, t_a: i64, t_b: i64, dir: Dir) {
        let index = t_a.div_euclid(BUCKET_NS);
        let b = self.buckets.entry(index).or_default();
        b.dirs[dir as usize].add(t_b - t_a - self.base);
        b.times += (t_a - index * BUCKET_NS) as f64;
        let [c2s, s2c] = &b.dirs;
        if c2s.n > 0 && s2c.n > 0 {
            self.running = Some((c2s.mean() + s2c.mean()) / 2.0);
            self.delay = (c2s.mean() - s2c.mean()).abs() / 2.0;
        } else if self.running.is_none() {
            self.running = Some(b.dirs[dir as usize].mean());
        }
    }

    /// The offset now, roughly (within the delays): where the merge of the two streams puts
    /// the second point's packets.
    pub fn running_offset(&self) -> i64 {
        self.base + self.running.unwrap_or(0.0) as i64
    }

    /// The mean one-way delay lately, nanoseconds (0 before packets both ways were matched).
    pub fn running_delay(&self) -> i64 {
        self.delay as i64
    }

    /// The fit over every window that saw packets both ways; None without one.
    pub fn fit(&self) -> Option<ClockFit> {
        let mut windows: Vec<(i64, &Bucket)> = self.buckets.iter().map(|(&i, b)| (i, b)).filter(|(_, b)| b.dirs[0].n > 0 && b.dirs[1].n > 0).collect();
        if windows.is_empty() {
            return None;
        }
        windows.sort_unstable_by_key(|(i, _)| *i);
        let (mut n0, mut s0, mut n1, mut s1) = (0u64, 0.0, 0u64, 0.0);
        for (_, b) in &windows {
            n0 += b.dirs[0].n;
            s0 += b.dirs[0].sum;
            n1 += b.dirs[1].n;
            s1 += b.dirs[1].sum;
        }
        let first_is_client_side = s0 / n0 as f64 >= s1 / n1 as f64;
        // Per window: its time (mean of its samples), offset and round trip.
        let points: Vec<(f64, f64, f64)> = windows
            .iter()
            .map(|(i, b)| {
                let total = (b.dirs[0].n + b.dirs[1].n) as f64;
                let t = (*i * BUCKET_NS) as f64 + b.times / total;
                let (forth, back) = if first_is_client_side { (&b.dirs[0], &b.dirs[1]) } else { (&b.dirs[1], &b.dirs[0]) };
                // forth: t_b - t_a = offset + delay; back: t_b - t_a = offset - delay.
                let offset = (forth.min as f64 + back.max as f64) / 2.0;
                let rtt = (forth.min - back.max) as f64;
                (t, offset, rtt.max(0.0))
            })
            .collect();
        let t0 = points[0].0;
        let weight = |rtt: f64| 1.0 / (rtt / 2.0 + 1_000.0).powi(2);
        let mut kept: Vec<&(f64, f64, f64)> = points.iter().collect();
        let mut line = fit_line(&kept, t0, weight);
        // Windows whose pair both queued on one side sit off the line: left out once.
        let tolerance = |rtt: f64| 3.0 * (rtt / 2.0) + 20_000.0;
        let inliers: Vec<&(f64, f64, f64)> = kept.iter().copied().filter(|(t, o, rtt)| (o - line.at(*t - t0)).abs() <= tolerance(*rtt)).collect();
        if !inliers.is_empty() && inliers.len() < kept.len() {
            kept = inliers;
            line = fit_line(&kept, t0, weight);
        }
        let min_rtt = kept.iter().map(|p| p.2).fold(f64::INFINITY, f64::min);
        let rms = (kept.iter().map(|(t, o, _)| (o - line.at(t - t0)).powi(2)).sum::<f64>() / kept.len() as f64).sqrt();
        let delays = [Dir::ClientToServer, Dir::ServerToClient].map(|dir| {
            let forth = (dir == Dir::ClientToServer) == first_is_client_side;
            delays(&windows, &points, dir, forth, |t| line.at(t - t0))
        });
        Some(ClockFit {
            first_is_client_side,
            offset_ns: self.base as f64 + line.intercept,
            at_ns: t0 as i64,
            drift: line.slope,
            uncertainty_ns: (min_rtt / 2.0).max(rms),
            windows: kept.len(),
            delays,
        })
    }
}

struct Line {
    intercept: f64,
    slope: f64,
}

impl Line {
    fn at(&self, dt: f64) -> f64 {
        self.intercept + self.slope * dt
    }
}

/// Weighted least squares of offset over time (time from `t0`); a flat line through the
/// weighted mean when the points do not span a second.
fn fit_line(points: &[&(f64, f64, f64)], t0: f64, weight: impl Fn(f64) -> f64) -> Line {
    let (mut sw, mut st, mut so, mut stt, mut sto) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &&(t, o, rtt) in points {
        let (w, dt) = (weight(rtt), t - t0);
        sw += w;
        st += w * dt;
        so += w * o;
        stt += w * dt * dt;
        sto += w * dt * o;
    }
    let denominator = sw * stt - st * st;
    let span = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max) - points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    if points.len() < 2 || span < BUCKET_NS as f64 || denominator.abs() < f64::EPSILON {
        return Line { intercept: so / sw, slope: 0.0 };
    }
    let slope = (sw * sto - st * so) / denominator;
    Line { intercept: (so - slope * st) / sw, slope }
}

/// The one-way delays of `dir` over the windows, each window's samples set against the line's
/// offset at its time; `forth`: the packets went from the first point to the second.
fn delays(windows: &[(i64, &Bucket)], points: &[(f64, f64, f64)], dir: Dir, forth: bool, offset: impl Fn(f64) -> f64) -> Delays {
    let (mut n, mut sum, mut sumsq, mut min, mut max) = (0u64, 0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY);
    for ((_, b), (t, _, _)) in windows.iter().zip(points) {
        let s = &b.dirs[dir as usize];
        if s.n == 0 {
            continue;
        }
        let o = offset(*t);
        let k = s.n as f64;
        // d = ±(x - o)
        let (lo, hi) = if forth { (s.min as f64 - o, s.max as f64 - o) } else { (o - s.max as f64, o - s.min as f64) };
        let sum_d = if forth { s.sum - k * o } else { k * o - s.sum };
        n += s.n;
        sum += sum_d;
        sumsq += s.sumsq - 2.0 * o * s.sum + k * o * o;
        min = min.min(lo);
        max = max.max(hi);
    }
    if n == 0 {
        return Delays::default();
    }
    let mean = sum / n as f64;
    let variance = (sumsq / n as f64 - mean * mean).max(0.0);
    Delays { packets: n, min: min / 1e9, mean: mean / 1e9, spread: variance.sqrt() / 1e9, max: max / 1e9 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs both ways every 10 ms for `seconds`, with first-point clock `t`, second point's
    /// clock `t + offset + drift * t`, delays of 200 µs plus up to 5 ms of queueing.
    fn synthetic(offset_ns: i64, drift: f64, seconds: i64, first_is_client_side: bool) -> Clock {
        let mut clock = Clock::new(offset_ns + 3_000_000);
        let start = 1_700_000_000_000_000_000i64;
        let mut queue = 12345u64;
        for k in 0..seconds * 100 {
            let t = start + k * 10_000_000;
            for dir in [Dir::ClientToServer, Dir::ServerToClient] {
                queue = queue.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let delay = 200_000 + if k % 7 == 0 { 0 } else { (queue >> 33) as i64 % 5_000_000 };
                let skew = |t: i64| offset_ns + (drift * (t - start) as f64) as i64;
                let forth = (dir == Dir::ClientToServer) == first_is_client_side;
                let (t_a, t_b) = if forth { (t, t + delay + skew(t + delay)) } else { (t + delay, t + skew(t)) };
                clock.add(t_a, t_b, dir);
            }
        }
        clock
    }

    #[test]
    fn test_clock_offset_and_drift_recovered_within_a_millisecond() {
        let fit = synthetic(2_500_000_000, 50e-6, 60, true).fit().unwrap();
        assert!(fit.first_is_client_side);
        let start = 1_700_000_000_000_000_000i64;
        let error = fit.offset_at(start) - 2_500_000_000.0;
        assert!(error.abs() < 1_000_000.0, "offset off by {error} ns");
        assert!((fit.drift - 50e-6).abs() < 2e-6, "drift {}", fit.drift);
        let late = fit.offset_at(start + 59_000_000_000) - (2_500_000_000.0 + 50e-6 * 59e9);
        assert!(late.abs() < 1_000_000.0, "late offset off by {late} ns");
        assert!(fit.uncertainty_ns < 1_000_000.0);
        assert!((fit.delays[0].min - 200e-6).abs() < 50e-6, "min delay {}", fit.delays[0].min);
    }

    #[test]
    fn test_clock_negative_offset_second_point_on_the_client_side() {
        let fit = synthetic(-7_000_000_000, -20e-6, 20, false).fit().unwrap();
        assert!(!fit.first_is_client_side);
        let error = fit.offset_at(1_700_000_000_000_000_000) + 7_000_000_000.0;
        assert!(error.abs() < 1_000_000.0, "offset off by {error} ns");
    }

    #[test]
    fn test_clock_one_way_only_gives_no_fit() {
        let mut clock = Clock::new(0);
        clock.add(10, 20, Dir::ClientToServer);
        assert!(clock.fit().is_none());
        assert_eq!(clock.running_offset(), 10);
    }
}
