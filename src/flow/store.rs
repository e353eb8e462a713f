//! Where connection records live while the tracker works on them, and what happens to them
//! when their connection leaves the hot table.
//!
//! Keeping every record (JSON output, timelines, merges) costs memory with every connection in
//! the capture. Without that, a finished connection is counted into a `Tally` and its slot is
//! reused, so memory follows the connections that are live at once.

use super::connection::{ConnState, Connection};
use super::key::FlowKey;
use super::tally::{Marks, Tally};
use super::timeline::Timeline;
use crate::detect::{self, servers, servers::ServerBook};

/// What a run leaves: every record (when all are kept), or the tally of all connections, their
/// servers' statistics and the records of those with a problem.
#[derive(Default)]
pub struct Finished {
    pub connections: Vec<Connection>,
    pub tally: Tally,
    /// `None` when every record is kept: the statistics are made from the records then.
    pub servers: Option<ServerBook>,
    /// Connections with a problem beyond `MAX_KEPT_WITH_PROBLEMS`, counted but not kept.
    pub not_kept: u64,
    /// Per-second counts of the connections counted (empty when every record is kept).
    pub timeline: Timeline,
}

/// What is left of a record when its connection leaves the hot table: its id (when every
/// record is kept, also its slot) and what the tally counted for it (when it was dropped).
#[derive(Clone, Copy, Debug)]
pub struct Retired {
    pub id: u64,
    pub tallied: Marks,
}

pub struct ConnectionStore {
    slots: Vec<Connection>,
    free: Vec<usize>,
    next_id: u64,
    keep_all: bool,
    /// Connections counted and dropped.
    tally: Tally,
    /// Their servers' statistics.
    servers: ServerBook,
    /// Their per-second counts.
    timeline: Timeline,
    /// The dropped ones that had a problem (up to `MAX_KEPT_WITH_PROBLEMS`), kept for findings.
    with_problems: Vec<Connection>,
    with_problems_not_kept: u64,
}

/// Connections with a problem kept when records are not: a SYN flood can bring millions.
pub const MAX_KEPT_WITH_PROBLEMS: usize = 100_000;

impl ConnectionStore {
    pub fn new(keep_all: bool) -> ConnectionStore {
        ConnectionStore {
            slots: Vec::new(),
            free: Vec::new(),
            next_id: 0,
            keep_all,
            tally: Tally::default(),
            servers: ServerBook::default(),
            timeline: Timeline::default(),
            with_problems: Vec::new(),
            with_problems_not_kept: 0,
        }
    }

    /// Continues from records kept by an earlier run. When every record is kept, a record's
    /// slot is its id.
    pub fn resume(records: Vec<Connection>) -> ConnectionStore {
        let next_id = records.len() as u64;
        ConnectionStore { slots: records, next_id, ..ConnectionStore::new(true) }
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

    pub fn get(&self, slot: usize) -> &Connection {
        &self.slots[slot]
    }

    pub fn get_mut(&mut self, slot: usize) -> &mut Connection {
        &mut self.slots[slot]
    }

    pub fn state(&self, slot: usize) -> ConnState {
        self.slots[slot].state
    }

    /// The connection has left the hot table at `now_ns`: keep its record, or count it and
    /// free the slot.
    pub fn retire(&mut self, slot: usize, now_ns: i64) -> Retired {
        let conn = &self.slots[slot];
        if self.keep_all {
            return Retired { id: conn.id, tallied: Marks::default() };
        }
        let tallied = self.count(slot, now_ns);
        let id = self.slots[slot].id;
        self.slots[slot].events = Vec::new();
        self.free.push(slot);
        Retired { id, tallied }
    }

    /// Counts the record in `slot` into the tally and its server's statistics, and keeps it if
    /// it had a problem. A revived record adds to the tally only what is new, to the server's
    /// statistics nothing.
    fn count(&mut self, slot: usize, end_ns: i64) -> Marks {
        let conn = &self.slots[slot];
        let (outcome, symptoms) = detect::classify(conn, end_ns);
        let first_count = conn.tallied.counted_outcome().is_none();
        let mut tallied = self.tally.count_as(conn, outcome, symptoms);
        if first_count {
            self.servers.add(conn, outcome, symptoms);
            self.timeline.add_connection(conn, outcome);
        }
        // A revived record is judged only by its outcome (a late RST can change it).
        let outcome_now = tallied.counted_outcome().unwrap_or(outcome);
        let symptoms_now = if first_count { symptoms } else { detect::Symptoms::default() };
        if servers::has_problem(outcome_now, symptoms_now) && !tallied.is_kept() {
            if self.with_problems.len() < MAX_KEPT_WITH_PROBLEMS {
                self.with_problems.push(conn.clone());
            } else {
                self.with_problems_not_kept += 1;
            }
            tallied = tallied.kept();
        }
        tallied
    }

    /// A late packet came for a retired connection: its slot, holding its record again.
    pub fn revive(&mut self, retired: &Retired, key: &FlowKey, client_is_low: bool, state: ConnState, time_ns: i64) -> usize {
        if self.keep_all {
            // Records are never dropped then, and each sits at the slot of its id.
            return retired.id as usize;
        }
        let (low, high) = key.endpoints();
        let (client, server) = if client_is_low { (low, high) } else { (high, low) };
        self.place(Connection::revived(retired.id, client, server, state, retired.tallied, Default::default(), time_ns))
    }

    /// What the run leaves, for a capture that ended at `end_ns`.
    pub fn finish(mut self, end_ns: i64) -> Finished {
        if self.keep_all {
            return Finished { connections: self.slots, ..Finished::default() };
        }
        let free: std::collections::HashSet<usize> = self.free.iter().copied().collect();
        for slot in 0..self.slots.len() {
            if !free.contains(&slot) {
                self.count(slot, end_ns);
            }
        }
        let mut kept = self.with_problems;
        kept.sort_by_key(|c| c.id);
        Finished {
            connections: kept,
            tally: self.tally,
            servers: Some(self.servers),
            not_kept: self.with_problems_not_kept,
            timeline: self.timeline,
        }
    }

    /// The records, by slot (by id when every record is kept).
    pub fn records(&self) -> &[Connection] {
        &self.slots
    }
}
