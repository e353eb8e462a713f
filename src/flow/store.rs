//! Where connection records live while the tracker works on them, and what happens to them
//! when their connection leaves the hot table.
//!
//! Keeping every record (JSON output, timelines, merges) costs memory with every connection in
//! the capture. Without that, a finished connection is counted into a `Tally` and its slot is
//! reused, so memory follows the connections that are live at once.

use super::connection::{ConnState, Connection};
use super::key::FlowKey;
use super::tally::{Marks, Tally};

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
}

impl ConnectionStore {
    pub fn new(keep_all: bool) -> ConnectionStore {
        ConnectionStore { slots: Vec::new(), free: Vec::new(), next_id: 0, keep_all, tally: Tally::default() }
    }

    /// Continues from records kept by an earlier run. When every record is kept, a record's
    /// slot is its id.
    pub fn resume(records: Vec<Connection>) -> ConnectionStore {
        let next_id = records.len() as u64;
        ConnectionStore { slots: records, free: Vec::new(), next_id, keep_all: true, tally: Tally::default() }
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
        let tallied = self.tally.count(conn, now_ns);
        let id = conn.id;
        self.slots[slot].events = Vec::new();
        self.free.push(slot);
        Retired { id, tallied }
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

    /// Every kept record in id order (all of them when every record is kept, none otherwise)
    /// and the tally of the dropped ones, with the records still in use counted in (for a
    /// capture that ended at `end_ns`).
    pub fn finish(mut self, end_ns: i64) -> (Vec<Connection>, Tally) {
        if self.keep_all {
            return (self.slots, self.tally);
        }
        let free: std::collections::HashSet<usize> = self.free.iter().copied().collect();
        for (slot, conn) in self.slots.iter().enumerate() {
            if !free.contains(&slot) {
                self.tally.count(conn, end_ns);
            }
        }
        (Vec::new(), self.tally)
    }

    /// The records, by slot (by id when every record is kept).
    pub fn records(&self) -> &[Connection] {
        &self.slots
    }
}
