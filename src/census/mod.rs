//! The census: every connection counted once, when it is finished, for the summary, the
//! per-server statistics, the per-second timeline and the proxy's give-ups.
//!
//! It is the one consumer of finished connections. The tracker's store hands it each record as
//! the connection leaves the hot table (`flow::store::ConnectionStore::retire`, through the
//! `flow::store::Counter` trait, so that `flow` does not depend on the verdicts in `detect`);
//! an analysis that kept every record has them counted here at the end, by the same
//! `count`. Either way the summary is computed in this one place. When a capture is read on two
//! threads, the books that need nothing back are filled on a third (`beside`).

pub mod beside;
pub mod tally;
pub mod timeline;

pub use tally::Tally;
pub use timeline::Timeline;

use crate::detect::digest::{Digest, ExampleQuota};
use crate::detect::timeouts::GiveUps;
use crate::detect::{self, servers, servers::ServerBook, Outcome, Symptoms};
use crate::flow::store::{Counted, Counter};
use crate::flow::Connection;
use beside::{Beside, Books};

/// The counts of the connections finished so far.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Census {
    pub tally: Tally,
    /// Their servers' statistics (handshake and answer times, port spans, one-SYN probes).
    pub servers: ServerBook,
    /// Their per-second counts, per server.
    pub timeline: Timeline,
    /// The problem connections whose records were not kept, in short form for the findings.
    pub digest: Digest,
    /// When the proxy gave up on its connections, for its timeouts (`detect::timeouts`).
    pub give_ups: GiveUps,
    /// Which problem connections open an episode of their listener (kept whole for examples).
    #[serde(skip)]
    examples: ExampleQuota,
    /// The thread that fills `servers`, `timeline` and `give_ups` while counting, if any
    /// (`count_beside`).
    #[serde(skip)]
    beside: Option<Beside>,
}

/// Adds a connection counted for the first time to the books that count each connection once.
fn add_to_books(servers: &mut ServerBook, timeline: &mut Timeline, give_ups: &mut GiveUps, conn: &Connection, outcome: Outcome, symptoms: Symptoms) {
    servers.add(conn, outcome, symptoms);
    timeline.add_connection(conn, outcome);
    give_ups.add(conn, outcome);
}

impl Census {
    /// Every record of an analysis that kept them all, counted as each would have been when it
    /// finished, for a capture that ended at `end_ns`.
    pub fn of_records(records: &[Connection], end_ns: i64) -> Census {
        let mut census = Census::default();
        for c in records {
            census.count(c, end_ns);
        }
        census
    }

    /// Before the first connection is counted: `servers`, `timeline` and `give_ups` are
    /// filled on a thread of their own (`beside`) until `join_beside`. They stay on this
    /// thread if no thread can be started.
    pub fn count_beside(&mut self) {
        if self.beside.is_none() && self.tally.connections == 0 {
            self.beside = Beside::start();
        }
    }

    /// Waits for the thread of `count_beside` to add every connection handed over, and takes
    /// its books: this census's stayed empty while it ran.
    pub fn join_beside(&mut self) {
        if let Some(beside) = self.beside.take() {
            let Books { servers, timeline, give_ups } = beside.join();
            (self.servers, self.timeline, self.give_ups) = (servers, timeline, give_ups);
        }
    }

    /// Adds the counts of another run (a merge of two analyses).
    pub fn add(&mut self, other: Census) {
        self.tally.add(&other.tally);
        self.servers.merge(other.servers);
        self.timeline.add(&other.timeline);
        self.digest.add_digest(other.digest);
        self.give_ups.merge(&other.give_ups);
    }
}

impl Counter for Census {
    /// Counts what `conn` shows beyond what was counted for it before (a record revived by a
    /// late packet adds to the tally only what is new, to its server's statistics and the
    /// timeline nothing).
    fn count(&mut self, conn: &Connection, end_ns: i64) -> Counted {
        let (outcome, symptoms) = detect::classify(conn, end_ns);
        let first_count = tally::counted_outcome(conn.tallied).is_none();
        let tallied = self.tally.count_as(conn, outcome, symptoms);
        if first_count {
            match &mut self.beside {
                Some(beside) => beside.add(conn, outcome, symptoms),
                None => add_to_books(&mut self.servers, &mut self.timeline, &mut self.give_ups, conn, outcome, symptoms),
            }
        }
        // A revived record is judged only by its outcome (a late RST can change it).
        let outcome_now = tally::counted_outcome(tallied).unwrap_or(outcome);
        let symptoms_now = if first_count { symptoms } else { detect::Symptoms::default() };
        let problem = servers::has_problem(outcome_now, symptoms_now);
        let example = problem && first_count && self.examples.wants(conn);
        Counted { tallied, problem, example }
    }

    fn digest(&mut self, conn: &Connection, end_ns: i64) {
        self.digest.add(conn, end_ns);
    }

    /// The slices of a window added up. An outcome a late RST moved, in a later slice than
    /// the one that counted the connection, is taken off there: once that slice left the
    /// window the count would be below zero, and is kept at zero (`flow::store::window`).
    fn add(&mut self, other: Census) {
        Census::add(self, other);
        for n in &mut self.tally.outcomes {
            if *n > i64::MAX as u64 {
                *n = 0;
            }
        }
    }

    fn add_totals(&mut self, other: &Census) {
        self.tally.add(&other.tally);
    }
}
