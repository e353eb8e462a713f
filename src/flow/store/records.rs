//! Where connection records live while the tracker works on them, and what happens to them
//! when their connection leaves the hot table.
//!
//! Keeping every record (JSON output, timelines, merges) costs memory with every connection in
//! the capture. Without that, a finished connection is handed to a `Counter` (the census,
//! `crate::census`) and its slot is reused, so memory follows the connections that are live at
//! once.

use super::counter::{Counted, Counter};
use super::spill::Spill;
use super::window::{Covered, Slice, Window};
use crate::flow::connection::{ConnState, Connection};
use crate::flow::key::FlowKey;
use crate::flow::tallied::Tallied;

/// What a run leaves: every record (when all are kept), or the counts of all connections and
/// the records of those with a problem.
#[derive(Default)]
pub struct Finished<C> {
    pub connections: Vec<Connection>,
    /// The connections counted (nothing when every record is kept: they are counted from the
    /// records then).
    pub census: C,
    /// Connections with a problem beyond the records kept (`TrackerOptions::max_kept_problems`),
    /// counted and kept in short form (`detect::digest`).
    pub not_kept: u64,
    /// A mergeable run that does not keep every record: the records not counted yet (live
    /// when the input ended, or able to join the capture before), in order of id. The flow
    /// table refers to them by their index here.
    pub open: Vec<Connection>,
    /// The id the next connection gets.
    pub next_id: u64,
    /// Every record counted, when the run handed them to a sink.
    pub spill: Option<Spill>,
    /// A run with a window of capture time (`keep_window`): `census` and `connections` are
    /// the window's, and this has the totals since the start.
    pub covered: Option<Covered<C>>,
}

/// What is left of a record when its connection leaves the hot table: its id, its slot when
/// the store keeps the record (every record kept, or one a merge may still join), and what
/// the tally counted for it (when it was dropped).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Retired {
    pub id: u64,
    pub tallied: Tallied,
    slot: u32,
}

impl Retired {
    const NO_SLOT: u32 = u32::MAX;

    /// The slot still holding the record, if the store kept it.
    pub fn slot(&self) -> Option<usize> {
        (self.slot != Retired::NO_SLOT).then_some(self.slot as usize)
    }

    pub fn renumber(&mut self, slot: usize) {
        self.slot = slot as u32;
    }

    /// The record was counted and dropped after all.
    pub fn fold(&mut self, tallied: Tallied) {
        self.slot = Retired::NO_SLOT;
        self.tallied = tallied;
    }
}

pub struct ConnectionStore<C> {
    slots: Vec<Connection>,
    free: Vec<usize>,
    next_id: u64,
    keep_all: bool,
    /// Records that a merge may join to the capture before (they have a prefix) are not
    /// counted when they leave the hot table, but kept.
    mergeable: bool,
    /// Counts the connections whose records are dropped.
    census: C,
    /// The dropped ones that had a problem (up to `max_kept`), kept for findings; the census
    /// digests the others.
    with_problems: Vec<Connection>,
    with_problems_not_kept: u64,
    max_kept: usize,
    /// Where each record goes when it is counted, for the writers of every connection.
    spill: Option<Spill>,
    /// While watched live (`note_ends`): the connections that left the hot table since the
    /// last `take_ends`, each a copy of its record without events, with when.
    ending: Option<Vec<(Connection, i64)>>,
    /// The counts and problem records set aside by stretch of capture time (`keep_window`).
    window: Option<Window<C>>,
}

/// Puts `records` in order of id, moving each record once: a sort that swaps records of some
/// 400 bytes copies each many times, and a stable one borrows room for half of them.
fn sort_by_id(records: &mut [Connection]) {
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_unstable_by_key(|&i| records[i].id);
    // The record for place k is at order[k]: follow each cycle of the permutation, swapping the
    // right record into place; a place done points to itself.
    for start in 0..records.len() {
        let mut at = start;
        while order[at] != at {
            let from = order[at];
            order[at] = at;
            if from == start {
                break;
            }
            records.swap(at, from);
            at = from;
        }
    }
}

/// Connections with a problem kept whole when records are not (a SYN flood can bring
/// millions): the examples, the worst connections and the timelines are read from them. The
/// findings count the others from their digest (`detect::digest`). About 570 bytes each with
/// their retransmission logs, more with events.
pub const MAX_KEPT_WITH_PROBLEMS: usize = 20_000;

impl<C: Counter> ConnectionStore<C> {
    pub fn new(keep_all: bool, mergeable: bool, max_kept: usize) -> ConnectionStore<C> {
        ConnectionStore {
            slots: Vec::new(),
            free: Vec::new(),
            next_id: 0,
            keep_all,
            mergeable,
            census: C::default(),
            with_problems: Vec::new(),
            with_problems_not_kept: 0,
            max_kept,
            spill: None,
            ending: None,
            window: None,
        }
    }

    /// Counts by stretch of capture time, so that the run ends with the last `keep_ns` of it
    /// and the totals since its start (`super::window`); `Tracker::tick` moves the time on. Only for a
    /// run that keeps neither every record nor what a merge needs.
    pub fn keep_window(&mut self, keep_ns: i64) {
        if !self.keep_all && !self.mergeable {
            self.window = Some(Window::new(keep_ns));
        }
    }

    /// With a window: is the slice being counted over at `now_ns` (a segment's time)?
    pub fn slice_due(&mut self, now_ns: i64) -> bool {
        self.window.as_mut().is_some_and(|window| window.due(now_ns))
    }

    /// With a window: sets the slice being counted aside at `now_ns` and starts the next.
    pub fn rotate(&mut self, now_ns: i64) {
        let Some(window) = &mut self.window else { return };
        let census = std::mem::take(&mut self.census);
        let kept = std::mem::take(&mut self.with_problems);
        let not_kept = std::mem::take(&mut self.with_problems_not_kept);
        window.rotate(now_ns, census, kept, not_kept);
    }

    /// Continues from records kept by an earlier run. When every record is kept, a record's
    /// slot is its id.
    pub fn resume(records: Vec<Connection>) -> ConnectionStore<C> {
        let next_id = records.len() as u64;
        ConnectionStore { slots: records, next_id, ..ConnectionStore::new(true, false, 0) }
    }

    /// Continues from what a run that did not keep every record left: its counts, the records
    /// of connections with a problem, and its open records (slot = index in `open`).
    pub fn resume_folded(finished: Finished<C>, mergeable: bool, max_kept: usize) -> ConnectionStore<C> {
        ConnectionStore {
            slots: finished.open,
            next_id: finished.next_id,
            census: finished.census,
            with_problems: finished.connections,
            with_problems_not_kept: finished.not_kept,
            ..ConnectionStore::new(false, mergeable, max_kept)
        }
    }

    /// The counts so far.
    pub fn census(&self) -> &C {
        &self.census
    }

    /// The counts so far (a merge adds another run's to them).
    pub fn census_mut(&mut self) -> &mut C {
        &mut self.census
    }

    /// Takes over the records of connections with a problem that another run kept (already
    /// renumbered), and how many it could not keep (its census has their digest); the capture
    /// ends at `end_ns`.
    pub fn absorb_problems(&mut self, with_problems: Vec<Connection>, not_kept: u64, end_ns: i64) {
        for conn in with_problems {
            if self.with_problems.len() < self.max_kept {
                self.with_problems.push(conn);
            } else {
                self.census.digest(&conn, end_ns);
                self.with_problems_not_kept += 1;
            }
        }
        self.with_problems_not_kept += not_kept;
    }

    /// Records kept beyond `max_kept` for the first problem connections of a listener's
    /// episode that began after the cap was reached.
    fn room_for_examples(&self) -> usize {
        self.max_kept / 4
    }

    /// Ids from here on continue after `next_id`.
    pub fn set_next_id(&mut self, next_id: u64) {
        self.next_id = next_id;
    }

    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Drops the records' prefixes: none of them can join an earlier capture any more, so
    /// they are counted when they leave the hot table.
    pub fn forget_prefixes(&mut self) {
        for conn in &mut self.slots {
            conn.prefix = None;
        }
    }

    /// Slots in use (not free), in slot order.
    pub fn used_slots(&self) -> Vec<usize> {
        let free: std::collections::HashSet<usize> = self.free.iter().copied().collect();
        (0..self.slots.len()).filter(|s| !free.contains(s)).collect()
    }

    /// Counts the record in `slot` and frees the slot (a record no flow refers to any more).
    pub fn fold(&mut self, slot: usize, now_ns: i64) -> Tallied {
        self.slots[slot].prefix = None;
        let tallied = self.count(slot, now_ns);
        self.slots[slot].events = Vec::new();
        self.free.push(slot);
        tallied
    }

    /// Hands every record to `spill` when it is counted (only when records are not all kept,
    /// and the run is not mergeable: those records are counted later, or never).
    pub fn spill_to(&mut self, spill: Spill) {
        self.spill = Some(spill);
    }

    pub fn keeps_all(&self) -> bool {
        self.keep_all
    }

    /// Stores a new connection made by `make` from its id; returns its slot.
    pub fn add(&mut self, make: impl FnOnce(u64) -> Connection) -> usize {
        let conn = make(self.next_id);
        self.next_id += 1;
        self.place(conn)
    }

    /// Puts a record in a free slot, or a new one.
    fn place(&mut self, conn: Connection) -> usize {
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = conn;
                slot
            }
            None => {
                self.slots.push(conn);
                self.slots.len() - 1
            }
        }
    }

    /// Adds a record made by another run (a merge), numbered as the next connection.
    pub fn adopt(&mut self, mut conn: Connection) -> usize {
        conn.id = self.next_id;
        self.add(|_| conn)
    }

    /// Adds a record made by another run under the id it has in the merged numbering.
    pub fn adopt_as(&mut self, mut conn: Connection, id: u64) -> usize {
        conn.id = id;
        self.next_id = self.next_id.max(id + 1);
        self.place(conn)
    }

    pub fn get(&self, slot: usize) -> &Connection {
        &self.slots[slot]
    }

    pub fn get_mut(&mut self, slot: usize) -> &mut Connection {
        &mut self.slots[slot]
    }

    /// Asks the CPU for the record in `slot` (see `super::prefetch`).
    pub(crate) fn prefetch(&self, slot: usize) {
        if let Some(conn) = self.slots.get(slot) {
            super::prefetch::prefetch_all(conn);
        }
    }

    pub fn state(&self, slot: usize) -> ConnState {
        self.slots[slot].state
    }

    /// From now on, notes every connection that leaves the hot table (`pcapq watch`).
    pub fn note_ends(&mut self) {
        self.ending.get_or_insert_with(Vec::new);
    }

    /// The connections that left the hot table since the last call, in that order.
    pub fn take_ends(&mut self) -> Vec<(Connection, i64)> {
        self.ending.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The record in `slot` leaves the hot table at `now_ns`: noted when watched live.
    #[inline]
    pub(crate) fn note_end(&mut self, slot: usize, now_ns: i64) {
        if self.ending.is_some() {
            self.push_end(slot, now_ns);
        }
    }

    /// A copy of the record, without its events: the slot may be reused before the watch
    /// reads it.
    #[cold]
    fn push_end(&mut self, slot: usize, now_ns: i64) {
        let Some(ending) = &mut self.ending else { return };
        let conn = &mut self.slots[slot];
        let events = std::mem::take(&mut conn.events);
        ending.push((conn.clone(), now_ns));
        conn.events = events;
    }

    /// The connection has left the hot table at `now_ns`: keep its record, or count it and
    /// free the slot.
    pub fn retire(&mut self, slot: usize, now_ns: i64) -> Retired {
        self.note_end(slot, now_ns);
        let conn = &self.slots[slot];
        if self.keep_all {
            return Retired { id: conn.id, tallied: Tallied::default(), slot: slot as u32 };
        }
        if self.mergeable && conn.prefix.is_some() {
            // A merge may still join it to the capture before: not counted yet.
            return Retired { id: conn.id, tallied: conn.tallied, slot: slot as u32 };
        }
        let id = self.slots[slot].id;
        let tallied = self.fold(slot, now_ns);
        Retired { id, tallied, slot: Retired::NO_SLOT }
    }

    /// Hands the record in `slot` to the census, and keeps it if it had a problem. The one
    /// place where a finished connection leaves the tracker.
    fn count(&mut self, slot: usize, end_ns: i64) -> Tallied {
        // The writers of every connection (JSON, Parquet) read it back from the spill.
        if let Some(spill) = &mut self.spill {
            spill.put(&self.slots[slot]);
        }
        // Counted without its events, which the census does not read: its books may take a
        // copy of the record to another thread (`census::beside`).
        let events = std::mem::take(&mut self.slots[slot].events);
        let Counted { mut tallied, problem, example } = self.census.count(&self.slots[slot], end_ns);
        self.slots[slot].events = events;
        let conn = &self.slots[slot];
        if problem && !tallied.is_kept() {
            let kept = self.with_problems.len() + self.window.as_ref().map_or(0, |w| w.kept_older);
            if kept < self.max_kept || (example && kept < self.max_kept + self.room_for_examples()) {
                self.with_problems.push(conn.clone());
            } else {
                self.census.digest(conn, end_ns);
                self.with_problems_not_kept += 1;
            }
            tallied = tallied.kept();
        }
        tallied
    }

    /// A late packet came for a retired connection: its slot, holding its record again.
    pub fn revive(&mut self, retired: &Retired, key: &FlowKey, client_is_low: bool, state: ConnState, time_ns: i64) -> usize {
        if let Some(slot) = retired.slot() {
            // The record was kept (every record is, or a merge may join it).
            return slot;
        }
        if let Some(mut conn) = self.spill.as_mut().and_then(|spill| spill.get(retired.id)) {
            // The whole record, as if it had been kept, counting only what is new.
            conn.tallied = retired.tallied;
            return self.place(conn);
        }
        let (low, high) = key.endpoints();
        let (client, server) = if client_is_low { (low, high) } else { (high, low) };
        let mut conn = Connection::revived(retired.id, client, server, state, retired.tallied, Default::default(), time_ns);
        conn.vlan = key.vlan();
        self.place(conn)
    }

    /// What the run leaves, for a capture that ended at `end_ns`.
    /// A mergeable store does not count the records in use: they come back in `open`, in
    /// order of id, and `renumbered` gets each one's slot and its index there.
    pub fn finish(mut self, end_ns: i64, renumbered: &mut Vec<(usize, usize)>) -> Finished<C> {
        let next_id = self.next_id;
        if self.keep_all {
            return Finished { connections: self.slots, next_id, ..Finished::default() };
        }
        let mut open = Vec::new();
        let mut used = self.used_slots();
        if self.mergeable {
            used.sort_by_key(|&slot| self.slots[slot].id);
            for (index, &slot) in used.iter().enumerate() {
                renumbered.push((slot, index));
            }
            let mut slots: Vec<Option<Connection>> = std::mem::take(&mut self.slots).into_iter().map(Some).collect();
            open = used.iter().filter_map(|&slot| slots[slot].take()).collect();
        } else {
            for slot in used {
                self.count(slot, end_ns);
            }
        }
        let (mut kept, census, not_kept, covered) = match self.window.take() {
            Some(window) => {
                let start_ns = window.current_start.unwrap_or(end_ns);
                let current = Slice { start_ns, end_ns, census: self.census, with_problems: self.with_problems, not_kept: self.with_problems_not_kept };
                let (merged, covered) = window.close(end_ns, current);
                (merged.with_problems, merged.census, merged.not_kept, Some(covered))
            }
            None => (self.with_problems, self.census, self.with_problems_not_kept, None),
        };
        sort_by_id(&mut kept);
        Finished { connections: kept, census, not_kept, open, next_id, spill: self.spill, covered }
    }

    /// The records, by slot (by id when every record is kept).
    pub fn records(&self) -> &[Connection] {
        &self.slots
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{Endpoint, FrameRef};
    use proptest::prelude::*;

    fn record(id: u64) -> Connection {
        let a = Endpoint { ip: std::net::IpAddr::from([10, 0, 0, 1]), port: 40_000 };
        let b = Endpoint { ip: std::net::IpAddr::from([10, 0, 0, 2]), port: 9_000 };
        Connection::new(id, a, b, false, FrameRef::default(), id as i64)
    }

    proptest! {
        #[test]
        fn test_sort_by_id_orders_any_permutation(ids in Just((0..200u64).collect::<Vec<_>>()).prop_shuffle(), n in 0usize..200) {
            let mut records: Vec<Connection> = ids.iter().take(n).map(|&id| record(id)).collect();
            let mut want: Vec<u64> = ids.iter().take(n).copied().collect();
            want.sort_unstable();
            sort_by_id(&mut records);
            prop_assert_eq!(records.iter().map(|c| c.id).collect::<Vec<_>>(), want.clone());
            // Each record moved whole: its first time still matches its id.
            prop_assert!(records.iter().all(|c| c.first_time_ns == c.id as i64));
        }
    }
}
