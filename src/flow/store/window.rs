//! A window of capture time for a watch that runs for days (`pcapq watch --keep 1h`): the
//! report at the end covers the connections counted in the last `keep` of capture time, plus
//! the totals since the watch began, in memory that does not grow with the days.
//!
//! What grows with capture time in a run that keeps no records is the census's per-second
//! timeline (every second per server, forever) and, up to their caps, the problem records kept
//! for the findings, the digest of the others and the per-server moments. So the store's counts
//! rotate: every `keep / SLICES` of capture time (`Tracker::tick`, driven by each segment's
//! time) the connections finished by then are counted, the census and the problem records kept
//! are set aside as a slice, and a new census starts. A slice whose end is `keep` or more before the latest packet leaves the
//! window: only its totals stay (`Counter::add_totals`, the tally). At the end the slices of the
//! window are added up (`Counter::add`, the census's merge) into the one census the analysis
//! reads, oldest first. The window is thus between `keep` and `keep` plus one slice long.
//!
//! A connection is in the slice in which it was counted: when it finished, not when it began.
//! The problem records kept are capped over the whole window (`max_kept`), as in one run; a slice
//! leaving the window frees its share. A record revived by a late packet in a later slice than
//! the one that counted it adds only what is new, there (its outcome moved by a late RST is taken
//! off the earlier slice's count in the later one: the window's counts of an outcome can miss
//! such a move when the earlier slice has left, `Census` keeps them from going below zero).

use std::collections::VecDeque;

use super::counter::Counter;
use crate::flow::connection::Connection;

/// Slices in a window of `keep`.
pub const SLICES: i64 = 4;

/// The counts and the problem records of one stretch of capture time.
pub struct Slice<C> {
    pub start_ns: i64,
    pub end_ns: i64,
    pub census: C,
    pub with_problems: Vec<Connection>,
    pub not_kept: u64,
}

/// The slices set aside, and the totals of those that left the window.
pub struct Window<C> {
    pub keep_ns: i64,
    pub slice_ns: i64,
    /// When the slice being counted began (None before the first segment).
    pub current_start: Option<i64>,
    /// The first segment's time.
    pub first_ns: Option<i64>,
    /// Slices set aside and still in the window, oldest first.
    pub older: VecDeque<Slice<C>>,
    /// Problem records kept in `older`.
    pub kept_older: usize,
    /// The totals of the slices that left the window.
    pub gone: C,
    /// Slices that left the window.
    pub slices_gone: u64,
}

/// What a windowed run leaves besides its census: the totals since it began.
pub struct Covered<C> {
    /// Every connection counted since the first segment (the window's and those before).
    pub all_time: C,
    pub first_ns: i64,
    /// Where the window begins: the start of its oldest slice.
    pub from_ns: i64,
    pub keep_ns: i64,
}

impl<C: Counter> Window<C> {
    pub fn new(keep_ns: i64) -> Window<C> {
        let keep_ns = keep_ns.max(SLICES);
        Window {
            keep_ns,
            slice_ns: keep_ns / SLICES,
            current_start: None,
            first_ns: None,
            older: VecDeque::new(),
            kept_older: 0,
            gone: C::default(),
            slices_gone: 0,
        }
    }

    /// Whether the slice being counted is over at `now_ns` (the first call starts it).
    pub fn due(&mut self, now_ns: i64) -> bool {
        match self.current_start {
            None => {
                self.current_start = Some(now_ns);
                self.first_ns = Some(now_ns);
                false
            }
            Some(start) => now_ns >= start.saturating_add(self.slice_ns),
        }
    }

    /// Sets aside the slice counted until `now_ns` (`census`, `with_problems`, `not_kept`),
    /// starts the next at `now_ns`, and lets go of the slices that left the window.
    pub fn rotate(&mut self, now_ns: i64, census: C, with_problems: Vec<Connection>, not_kept: u64) {
        let start_ns = self.current_start.unwrap_or(now_ns);
        // After a gap in capture time the slice ends where it was due, not at the next packet.
        let end_ns = now_ns.min(start_ns.saturating_add(self.slice_ns));
        self.kept_older += with_problems.len();
        self.older.push_back(Slice { start_ns, end_ns, census, with_problems, not_kept });
        self.current_start = Some(now_ns);
        self.leave_before(now_ns.saturating_sub(self.keep_ns));
    }

    /// Slices that ended at or before `from_ns` leave the window: their totals stay.
    pub fn leave_before(&mut self, from_ns: i64) {
        while self.older.front().is_some_and(|s| s.end_ns <= from_ns) {
            if let Some(slice) = self.older.pop_front() {
                self.kept_older -= slice.with_problems.len();
                self.gone.add_totals(&slice.census);
                self.slices_gone += 1;
            }
        }
    }

    /// The window at `end_ns` with the slice being counted (`current`): its census, its problem
    /// records (in slice order) and how many were not kept, and what it covers.
    pub fn close(mut self, end_ns: i64, current: Slice<C>) -> (Slice<C>, Covered<C>) {
        self.leave_before(end_ns.saturating_sub(self.keep_ns));
        let first_ns = self.first_ns.unwrap_or(end_ns);
        let from_ns = self.older.front().map_or(current.start_ns, |s| s.start_ns);
        let mut all_time = self.gone;
        let mut census = C::default();
        let mut with_problems = Vec::new();
        let mut not_kept = 0;
        for slice in self.older.into_iter().chain(std::iter::once(current)) {
            all_time.add_totals(&slice.census);
            census.add(slice.census);
            with_problems.extend(slice.with_problems);
            not_kept += slice.not_kept;
        }
        let merged = Slice { start_ns: from_ns, end_ns, census, with_problems, not_kept };
        (merged, Covered { all_time, first_ns, from_ns, keep_ns: self.keep_ns })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::store::counter::Counted;

    const S: i64 = 1_000_000_000;

    /// Counts connections, and their totals apart (as the census's tally).
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
    struct Count {
        window: u64,
        totals: u64,
    }

    impl Counter for Count {
        fn count(&mut self, _: &Connection, _: i64) -> Counted {
            self.window += 1;
            self.totals += 1;
            Counted { tallied: Default::default(), problem: false, example: false }
        }
        fn digest(&mut self, _: &Connection, _: i64) {}
        fn add(&mut self, other: Count) {
            self.window += other.window;
            self.totals += other.totals;
        }
        fn add_totals(&mut self, other: &Count) {
            self.totals += other.totals;
        }
    }

    fn counted(n: u64) -> Count {
        Count { window: n, totals: n }
    }

    /// One slice a minute (10 connections each) for ten minutes, a window of 4 minutes.
    fn ten_minutes() -> Window<Count> {
        let mut w = Window::new(240 * S);
        assert!(!w.due(0));
        for minute in 1..=10 {
            assert!(w.due(minute * 60 * S));
            w.rotate(minute * 60 * S, counted(10), Vec::new(), 0);
        }
        w
    }

    #[test]
    fn test_window_slices_past_keep_leave_with_their_totals_kept() {
        let w = ten_minutes();
        assert_eq!(w.slice_ns, 60 * S);
        // The slices of minutes 6..10 end after 10 min - 4 min.
        assert_eq!(w.older.iter().map(|s| s.start_ns / (60 * S)).collect::<Vec<_>>(), vec![6, 7, 8, 9]);
        assert_eq!((w.gone.totals, w.slices_gone), (60, 6));
    }

    #[test]
    fn test_window_closes_with_the_window_and_every_connection_since_the_start() {
        let w = ten_minutes();
        let current = Slice { start_ns: 600 * S, end_ns: 630 * S, census: counted(5), with_problems: Vec::new(), not_kept: 2 };
        let (merged, covered) = w.close(630 * S, current);
        // At 10.5 min the window starts with the slice from 6 min (it ends at 7 min, after
        // 10.5 - 4 min): 4.5 min, between keep and keep plus a slice.
        assert_eq!(covered.from_ns, 6 * 60 * S);
        assert_eq!(merged.census.window, 4 * 10 + 5);
        assert_eq!(merged.not_kept, 2);
        assert_eq!(covered.all_time.totals, 10 * 10 + 5);
        assert_eq!((covered.first_ns, covered.keep_ns), (0, 240 * S));
    }

    #[test]
    fn test_window_a_gap_in_capture_time_lets_every_older_slice_go() {
        let mut w = ten_minutes();
        assert!(w.due(10 * 3600 * S));
        w.rotate(10 * 3600 * S, counted(1), Vec::new(), 0);
        assert!(w.older.is_empty(), "{:?}", w.older.len());
        assert_eq!(w.gone.totals, 101);
        assert_eq!(w.current_start, Some(10 * 3600 * S));
    }
}
