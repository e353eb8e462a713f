//! The census: every connection counted once, when it is finished, for the summary, the
//! per-server statistics, the per-second timeline and the proxy's give-ups.
//!
//! It is the one consumer of finished connections. The tracker's store hands it each record as
//! the connection leaves the hot table (`flow::store::ConnectionStore::retire`, through the
//! `flow::store::Counter` trait, so that `flow` does not depend on the verdicts in `detect`);
//! an analysis that kept every record has them counted here at the end, by the same
//! `count`. Either way the summary is computed in this one place.

pub mod tally;
pub mod timeline;

pub use tally::Tally;
pub use timeline::Timeline;

use crate::detect::digest::{Digest, ExampleQuota};
use crate::detect::timeouts::GiveUps;
use crate::detect::{self, servers, servers::ServerBook};
use crate::flow::store::{Counted, Counter};
use crate::flow::Connection;

/// The counts of the connections finished so far.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
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
        let marks = self.tally.count_as(conn, outcome, symptoms);
        if first_count {
            self.servers.add(conn, outcome, symptoms);
            self.timeline.add_connection(conn, outcome);
            self.give_ups.add(conn, outcome);
        }
        // A revived record is judged only by its outcome (a late RST can change it).
        let outcome_now = tally::counted_outcome(marks).unwrap_or(outcome);
        let symptoms_now = if first_count { symptoms } else { detect::Symptoms::default() };
        let problem = servers::has_problem(outcome_now, symptoms_now);
        let example = problem && first_count && self.examples.wants(conn);
        Counted { marks, problem, example }
    }

    fn digest(&mut self, conn: &Connection, end_ns: i64) {
        self.digest.add(conn, end_ns);
    }
}
