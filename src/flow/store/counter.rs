//! What counts a finished connection's record: a trait, so that `flow` does not depend on the
//! verdicts in `detect` (the census, `crate::census::Census`, implements it).

use crate::flow::connection::Connection;
use crate::flow::tallied::Tallied;

/// What counts a record when its connection is finished: the census (`crate::census::Census`),
/// which judges it with `detect`'s verdicts.
pub trait Counter: Default {
    /// Counts `conn`, in a capture read up to `end_ns`, beyond what was counted for it before
    /// (`conn.tallied`). The store hands the record over without its events.
    fn count(&mut self, conn: &Connection, end_ns: i64) -> Counted;

    /// Keeps what the findings read of `conn`, a problem connection whose record is not kept.
    fn digest(&mut self, conn: &Connection, end_ns: i64);

    /// Adds the counts of another counter (the slices of a window, `super::window`).
    fn add(&mut self, other: Self);

    /// Adds only the totals of another counter (a slice that left the window).
    fn add_totals(&mut self, other: &Self);
}

/// What the counter says of a record it counted.
#[derive(Clone, Copy, Debug)]
pub struct Counted {
    /// Everything counted for it so far (kept with its tombstone, for a revival).
    pub tallied: Tallied,
    /// It had a problem: its record is kept for the findings (or digested beyond the cap)...
    pub problem: bool,
    /// ...and it is among the first of its listener's episode: kept whole beyond the cap too,
    /// within `ConnectionStore::room_for_examples`, so that a late episode has examples.
    pub example: bool,
}
