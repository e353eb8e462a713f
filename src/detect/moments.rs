//! Moments of two kinds on a time line (a connection began or stopped waiting for its server's
//! answer; a source port was taken or freed; the server answered), kept exactly while a capture
//! has few and as counts per second once it has many, so that memory stops growing with the
//! connections of a capture.
//!
//! The owner (`servers::ServerBook`) keeps a budget of exact moments over all its series and
//! folds the largest series when it is spent. A series folded to `binned_through` answers to
//! the second there: a count at an instant inside a kept second spreads that second's moments
//! evenly over it, and is off by at most that second's moments of the kind counted
//! (`Count::error`). Before any fold (every capture with fewer moments than the budget) every
//! answer is exact.

use std::collections::BTreeMap;

const SECOND_NS: i64 = 1_000_000_000;

fn second(t_ns: i64) -> i64 {
    t_ns.div_euclid(SECOND_NS)
}

/// The two kinds: what begins (a wait, a port taken, an answer) and what ends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Begins = 0,
    Ends = 1,
}

/// A count of moments, and how far off it can be (0: exact).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    pub value: u64,
    pub error: u64,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Moments {
    /// Per kind, the exact moments after `binned_through`, sorted only by `sort`.
    exact: [Vec<i64>; 2],
    /// Per second (epoch seconds) up to `binned_through`: how many moments of each kind.
    bins: BTreeMap<i64, [u64; 2]>,
    binned_through: Option<i64>,
}

impl Moments {
    /// Adds a moment; true when it was kept exactly (it counts against the owner's budget).
    pub fn push(&mut self, t_ns: i64, kind: Kind) -> bool {
        match self.binned_through {
            Some(through) if second(t_ns) <= through => {
                self.bins.entry(second(t_ns)).or_default()[kind as usize] += 1;
                false
            }
            _ => {
                self.exact[kind as usize].push(t_ns);
                true
            }
        }
    }

    /// Moments kept exactly.
    pub fn exact_len(&self) -> usize {
        self.exact[0].len() + self.exact[1].len()
    }

    /// Moments of `kind` in all.
    pub fn total(&self, kind: Kind) -> u64 {
        let binned: u64 = self.bins.values().map(|n| n[kind as usize]).sum();
        binned + self.exact[kind as usize].len() as u64
    }

    /// The last second counted per second, if any is (`None`: every moment is exact).
    pub fn binned_through(&self) -> Option<i64> {
        self.binned_through
    }

    /// Moves the earlier half (at least) of each kind's exact moments into counts per second;
    /// returns how many moved.
    pub fn fold(&mut self) -> usize {
        let before = self.exact_len();
        let mut cut = None;
        for times in &mut self.exact {
            times.sort_unstable();
            if let Some(&median) = times.get(times.len().saturating_sub(1) / 2) {
                cut = cut.max(Some(second(median)));
            }
        }
        if let Some(cut) = cut {
            self.bin_through(cut);
        }
        before - self.exact_len()
    }

    /// Counts per second every exact moment up to the second `through`.
    fn bin_through(&mut self, through: i64) {
        let bins = &mut self.bins;
        for (kind, times) in self.exact.iter_mut().enumerate() {
            times.retain(|&t| {
                let binned = second(t) <= through;
                if binned {
                    bins.entry(second(t)).or_default()[kind] += 1;
                }
                !binned
            });
        }
        self.binned_through = self.binned_through.max(Some(through));
    }

    /// Adds another series' moments; what either counted per second stays counted per second.
    pub fn merge(&mut self, other: Moments) {
        for (s, n) in other.bins {
            let mine = self.bins.entry(s).or_default();
            mine[0] += n[0];
            mine[1] += n[1];
        }
        for (mine, theirs) in self.exact.iter_mut().zip(other.exact) {
            mine.extend(theirs);
        }
        if let Some(through) = self.binned_through.max(other.binned_through) {
            self.bin_through(through);
        }
    }

    /// Sorts the exact moments (before `count_until` and `count_before`).
    pub fn sort(&mut self) {
        for times in &mut self.exact {
            times.sort_unstable();
        }
    }

    /// Moments of `kind` at or before `t_ns` (sorted first).
    pub fn count_until(&self, kind: Kind, t_ns: i64) -> Count {
        self.count(kind, t_ns, |t| t <= t_ns)
    }

    /// Moments of `kind` before `t_ns` (sorted first).
    pub fn count_before(&self, kind: Kind, t_ns: i64) -> Count {
        self.count(kind, t_ns, |t| t < t_ns)
    }

    fn count(&self, kind: Kind, t_ns: i64, counted: impl Fn(i64) -> bool) -> Count {
        let k = kind as usize;
        let s = second(t_ns);
        let whole: u64 = self.bins.range(..s).map(|(_, n)| n[k]).sum();
        let exact = self.exact[k].partition_point(|&t| counted(t)) as u64;
        match self.bins.get(&s) {
            // Spread evenly over its second.
            Some(n) => {
                let share = (t_ns - s * SECOND_NS) as f64 / SECOND_NS as f64;
                Count { value: whole + (n[k] as f64 * share).round() as u64 + exact, error: n[k] }
            }
            None => Count { value: whole + exact, error: 0 },
        }
    }

    /// The most `Begins` not yet followed by as many `Ends` at once, when it was reached, and
    /// how far too high it can be: within a second counted per second, every begin is taken to
    /// come before every end (off by at most that second's ends). Ends come first on ties.
    pub fn peak(&self) -> (u64, i64, u64) {
        let (mut held, mut peak, mut at_ns, mut error) = (0i64, 0i64, 0i64, 0u64);
        for (&s, n) in &self.bins {
            held += n[0] as i64;
            if held > peak {
                (peak, at_ns, error) = (held, s * SECOND_NS, n[1]);
            }
            held -= n[1] as i64;
        }
        let (mut begins, mut ends) = (self.exact[0].clone(), self.exact[1].clone());
        begins.sort_unstable();
        ends.sort_unstable();
        let mut ends = ends.into_iter().peekable();
        for t in begins {
            while ends.next_if(|&end| end <= t).is_some() {
                held -= 1;
            }
            held += 1;
            if held > peak {
                (peak, at_ns, error) = (held, t, 0);
            }
        }
        (peak.max(0) as u64, at_ns, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = SECOND_NS;

    fn spans(m: &mut Moments, spans: &[(i64, i64)]) {
        for &(from, until) in spans {
            m.push(from, Kind::Begins);
            m.push(until, Kind::Ends);
        }
    }

    #[test]
    fn test_unfolded_counts_are_exact() {
        let mut m = Moments::default();
        spans(&mut m, &[(S, 3 * S), (2 * S, 4 * S), (S / 2, S)]);
        m.sort();
        assert_eq!(m.count_until(Kind::Begins, 2 * S), Count { value: 3, error: 0 });
        assert_eq!(m.count_before(Kind::Begins, 2 * S), Count { value: 2, error: 0 });
        assert_eq!(m.count_until(Kind::Ends, S), Count { value: 1, error: 0 });
        // (S/2, S) ends where (S, 3S) begins: ends first, so two at once at most, at 2 s.
        assert_eq!(m.peak(), (2, 2 * S, 0));
    }

    #[test]
    fn test_fold_keeps_totals_and_bounds_the_error() {
        let mut m = Moments::default();
        // 100 waits, one begun every 10 ms, each 50 ms long.
        let ten_ms = S / 100;
        spans(&mut m, &(0..100).map(|i| (i * ten_ms, i * ten_ms + 5 * ten_ms)).collect::<Vec<_>>());
        m.sort();
        let exact_count = m.count_until(Kind::Begins, S / 4);
        let exact_peak = m.peak();
        assert!(m.fold() >= 100);
        m.sort();
        assert_eq!((m.total(Kind::Begins), m.total(Kind::Ends)), (100, 100));
        let c = m.count_until(Kind::Begins, S / 4);
        assert!(c.error > 0 && c.value.abs_diff(exact_count.value) <= c.error);
        let (peak, _, error) = m.peak();
        assert!(peak >= exact_peak.0 && peak - exact_peak.0 <= error);
        // A later moment in a kept second goes to its count.
        assert!(!m.push(S / 2, Kind::Begins));
        assert!(m.push(10 * S, Kind::Begins));
    }

    #[test]
    fn test_merge_counts_per_second_what_either_folded() {
        let (mut a, mut b) = (Moments::default(), Moments::default());
        spans(&mut a, &[(S, 2 * S), (5 * S, 6 * S)]);
        spans(&mut b, &[(3 * S, 4 * S), (7 * S, 8 * S)]);
        b.fold();
        let through = b.binned_through().unwrap();
        a.merge(b);
        assert_eq!(a.binned_through(), Some(through));
        assert_eq!((a.total(Kind::Begins), a.total(Kind::Ends)), (4, 4));
        assert!(a.exact[0].iter().chain(&a.exact[1]).all(|&t| second(t) > through));
    }
}
