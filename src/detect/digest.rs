//! Problem connections in short form: what the episodes read of each one (`Seed`), made from
//! its record once. A run that does not keep every record keeps the first problem records
//! whole (`flow::store::MAX_KEPT_WITH_PROBLEMS`) and the rest here, so the findings count every
//! problem connection of a capture of any size; only examples need whole records.
//!
//! The digest has a budget of seeds. When it is spent, seeds alike (one listener, the same
//! marks, the same probe source) whose first packets fall in the same interval are merged into
//! one that stands for all of them (`weight`); the interval doubles at each merge, from 1 s.
//! Before any merge every seed is one connection, as a kept record would give.

use rustc_hash::FxHashMap;

use super::scans::Probe;
use super::timings::Timings;
use super::facts::{self, Fact, Facts};
use super::marks::{fact_bit, outcome_bit, symptom_bit};
use super::{Outcome, Symptom, Symptoms};
use crate::flow::{Connection, Endpoint, Side};

/// Seeds kept before alike ones are merged: 136 bytes each in memory. More are kept only when
/// they differ in listener or marks (and probe source) after every merge (`merge_alike`).
pub const MAX_SEEDS: usize = 131_072;
/// The first problem connections of a listener's episode that stay whole beyond the cap of
/// records, for its examples.
pub const EXAMPLES_PER_EPISODE: u32 = 8;
/// Listeners followed for that, at most (a scan makes one per port probed).
const MAX_LISTENERS: usize = 65_536;
const SECOND_NS: i64 = 1_000_000_000;
/// Problem connections of one listener further apart than this are separate episodes.
pub const EPISODE_GAP_NS: i64 = 30 * SECOND_NS;

/// One problem connection as the episodes read it, or several alike merged (`weight`).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Seed {
    pub server: Endpoint,
    /// Its id (the lowest, once merged).
    pub id: u64,
    pub first_ns: i64,
    pub last_ns: i64,
    /// Its outcome, symptoms and facts (`super::marks`), without the facts that need
    /// other connections: SilentHost, ScanProbe and InQueueWindow.
    pub marks: u64,
    /// When its accept queue showed full (QueueSign), or when its SYN or request was in
    /// trouble (`troubled`): what the queue windows are made of.
    pub span: Option<(i64, i64)>,
    /// The client sent more than SYNs: it heard from the server.
    pub client_spoke: bool,
    pub probe: Option<Probe>,
    /// The client's handshake ACK (the earliest, once merged).
    pub ack_ns: Option<i64>,
    pub weight: u32,
    /// Its checks (`checks::Checks::bits`): only alike seeds with the same are merged.
    #[serde(default)]
    pub checks: u32,
    /// Its verdict rests on something the capture did not show (`facts::rests_on_silence`).
    #[serde(default)]
    pub silence: bool,
    /// Its frames, if it never closed (`trimmed::unclosed_frames`); once merged, only if every
    /// one merged had the same.
    #[serde(default)]
    pub unclosed_frames: Option<u32>,
}

/// Something a full accept queue does to a connection: its SYN or request re-sent, a connect
/// that never got a SYN-ACK, or a request left half-open.
fn troubled(symptoms: Symptoms, f: Facts) -> bool {
    let resent = [Symptom::SynRetransmitted, Symptom::RequestUnacked, Symptom::DataRetransmitted];
    resent.iter().any(|&s| symptoms.contains(s)) || f.contains(Fact::NeverConnected) || f.contains(Fact::HalfOpen)
}

impl Seed {
    /// The seed of `c`, judged `outcome` and `symptoms`.
    pub fn of(c: &Connection, outcome: Outcome, symptoms: Symptoms) -> Seed {
        let f: Facts = facts::of(c, outcome, symptoms);
        let silence = facts::rests_on_silence(outcome, symptoms, f);
        let mut checks = super::checks::of(c);
        if silence {
            checks = checks.with(super::checks::of_silence(c));
        }
        let marks = outcome_bit(outcome)
            | symptoms.iter().fold(0, |bits, s| bits | symptom_bit(s))
            | Fact::ALL.iter().filter(|&&x| f.contains(x)).fold(0, |bits, &x| bits | fact_bit(x));
        let span = if f.contains(Fact::QueueSign) {
            Some(facts::queue_full_span(c))
        } else if troubled(symptoms, f) {
            Some(facts::trouble_span(c, f))
        } else {
            None
        };
        let probe = f.contains(Fact::Probe).then(|| Probe {
            client: c.client.ip,
            first: c.first,
            open: c.synack_count > 0,
            refused: outcome == Outcome::Refused,
            one_syn: f.contains(Fact::OneSyn),
        });
        Seed {
            server: c.server,
            id: c.id,
            first_ns: c.first_time_ns,
            last_ns: c.last_time_ns,
            marks,
            span,
            client_spoke: client_spoke(c),
            probe,
            ack_ns: c.handshake_ack_time_ns.get(),
            weight: 1,
            checks: checks.bits(),
            silence,
            unclosed_frames: super::trimmed::unclosed_frames(c),
        }
    }

    pub fn has(&self, fact: Fact) -> bool {
        self.marks & fact_bit(fact) != 0
    }

    /// Takes in `other`, a seed alike.
    fn absorb(&mut self, other: &Seed) {
        self.id = self.id.min(other.id);
        if other.first_ns < self.first_ns {
            self.first_ns = other.first_ns;
            if let (Some(p), Some(q)) = (&mut self.probe, other.probe) {
                p.first = q.first;
            }
        }
        self.last_ns = self.last_ns.max(other.last_ns);
        self.span = match (self.span, other.span) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
        self.client_spoke |= other.client_spoke;
        self.ack_ns = match (self.ack_ns, other.ack_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.weight = self.weight.saturating_add(other.weight);
        if self.unclosed_frames != other.unclosed_frames {
            self.unclosed_frames = None;
        }
    }
}

/// The client sent more than SYNs (an ACK, data): it had heard from the server.
pub fn client_spoke(c: &Connection) -> bool {
    c.counts[Side::Client.index()].packets > u64::from(c.syn_count)
}

/// Per listener, the end of its latest problem connection and how many of its current episode
/// were seen (connections counted as they finish, so in about that order).
#[derive(Clone, Debug, Default)]
pub struct ExampleQuota {
    by_server: FxHashMap<Endpoint, (i64, u32)>,
}

impl ExampleQuota {
    /// Whether problem connection `c` is among the first `EXAMPLES_PER_EPISODE` of its
    /// listener's episode (none for `EPISODE_GAP_NS` before it began).
    pub fn wants(&mut self, c: &Connection) -> bool {
        if self.by_server.len() >= MAX_LISTENERS && !self.by_server.contains_key(&c.server) {
            return false;
        }
        let (last_ns, seen) = self.by_server.entry(c.server).or_insert((i64::MIN, 0));
        if c.first_time_ns.saturating_sub(*last_ns) > EPISODE_GAP_NS {
            *seen = 0;
        }
        *last_ns = (*last_ns).max(c.last_time_ns);
        *seen += 1;
        *seen <= EXAMPLES_PER_EPISODE
    }
}

/// The problem connections a run counted and did not keep whole.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Digest {
    seeds: Vec<Seed>,
    /// What their retransmission series show (`timings::Timings`).
    pub timings: Timings,
    /// Seeds whose first packets are in the same interval of this length are merged when alike
    /// (0: none merged yet).
    merged_within_ns: i64,
    /// Probes from different sources were merged too (`merge_alike`).
    probe_sources_merged: bool,
    budget: usize,
    /// The number of seeds at which the next merge happens.
    merge_at: usize,
}

impl Default for Digest {
    fn default() -> Digest {
        Digest::with_budget(MAX_SEEDS)
    }
}

impl Digest {
    pub fn with_budget(budget: usize) -> Digest {
        let budget = budget.max(2);
        Digest { seeds: Vec::new(), timings: Timings::default(), merged_within_ns: 0, probe_sources_merged: false, budget, merge_at: budget }
    }

    /// Adds problem connection `c`, in a capture read up to `end_ns`.
    pub fn add(&mut self, c: &Connection, end_ns: i64) {
        let (outcome, symptoms) = super::classify(c, end_ns);
        self.timings.add(c, end_ns);
        self.push(Seed::of(c, outcome, symptoms));
    }

    pub(crate) fn push(&mut self, seed: Seed) {
        if self.seeds.capacity() == 0 {
            // Room for the budget at once (address space: pages count as they are written), so
            // that the vector is not copied as it grows to it.
            self.seeds.reserve_exact(self.budget);
        }
        self.seeds.push(seed);
        if self.seeds.len() >= self.merge_at {
            self.merge_alike();
        }
    }

    pub fn seeds(&self) -> &[Seed] {
        &self.seeds
    }

    /// Connections the seeds stand for.
    pub fn connections(&self) -> u64 {
        self.seeds.iter().map(|s| u64::from(s.weight)).sum()
    }

    /// The longest interval within which alike seeds were merged (0: none were).
    pub fn merged_within_ns(&self) -> i64 {
        self.merged_within_ns
    }

    /// Adds another run's digest (a merge of two analyses, already renumbered).
    pub fn add_digest(&mut self, other: Digest) {
        self.timings.merge(other.timings);
        self.merged_within_ns = self.merged_within_ns.max(other.merged_within_ns);
        self.probe_sources_merged |= other.probe_sources_merged;
        for seed in other.seeds {
            self.push(seed);
        }
    }

    /// Moves ids and file numbers into a merged analysis's numbering.
    pub fn renumber(&mut self, id: impl Fn(u64) -> u64, file_offset: u32) {
        for s in &mut self.seeds {
            s.id = id(s.id);
            if let Some(p) = &mut s.probe {
                p.first.file += file_offset;
            }
        }
    }

    /// Merges alike seeds within the interval, doubled (from 1 s) until at most half the
    /// budget is left.
    /// When even seeds alike over the whole capture are too many, probes of different sources
    /// are merged too (a spoofed flood's); what is still left is one seed per listener and
    /// marks, merged again only when they have doubled.
    fn merge_alike(&mut self) {
        let first = self.seeds.iter().map(|s| s.first_ns).min().unwrap_or(0);
        let last = self.seeds.iter().map(|s| s.first_ns).max().unwrap_or(0);
        let span = last.saturating_sub(first);
        if self.merged_within_ns > 0 {
            self.merge_pass();
        }
        while self.seeds.len() > self.budget / 2 {
            if self.merged_within_ns <= span {
                self.merged_within_ns = if self.merged_within_ns == 0 { SECOND_NS } else { self.merged_within_ns.saturating_mul(2) };
            } else if !self.probe_sources_merged {
                self.probe_sources_merged = true;
            } else {
                break;
            }
            self.merge_pass();
        }
        self.merge_at = self.budget.max(2 * self.seeds.len());
    }

    /// One pass over the seeds, in place (no second copy at the budget): sorted so that alike
    /// ones are neighbours, merged, then put back in time order.
    fn merge_pass(&mut self) {
        let within = self.merged_within_ns.max(1);
        let sources = !self.probe_sources_merged;
        let key = |s: &Seed| {
            let probe = s.probe.map(|p| (sources.then_some(p.client), p.open, p.refused, p.one_syn));
            (s.server, s.marks, s.checks, probe, s.first_ns.div_euclid(within))
        };
        self.seeds.sort_unstable_by_key(|s| (key(s), s.first_ns, s.id));
        self.seeds.dedup_by(|later, kept| {
            let alike = key(later) == key(kept);
            if alike {
                kept.absorb(later);
            }
            alike
        });
        self.seeds.sort_unstable_by_key(|s| (s.first_ns, s.id));
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;
    use crate::flow::FrameRef;

    const S: i64 = SECOND_NS;

    fn seed(id: u64, at_ns: i64, marks: u64) -> Seed {
        Seed {
            server: Endpoint { ip: IpAddr::from([10, 0, 0, 2]), port: 9000 },
            id,
            first_ns: at_ns,
            last_ns: at_ns + S / 2,
            marks,
            span: Some((at_ns, at_ns + S / 4)),
            client_spoke: id == 7,
            probe: None,
            ack_ns: Some(at_ns + 1),
            weight: 1,
            checks: 0,
            silence: false,
            unclosed_frames: None,
        }
    }

    #[test]
    fn test_a_spent_budget_merges_alike_seeds_and_keeps_their_count() {
        let mut d = Digest::with_budget(8);
        // Ten a second for 2 s, of two kinds alternating.
        for i in 0..20u64 {
            d.push(seed(i, i as i64 * S / 10, 1 + i % 2));
        }
        assert_eq!(d.connections(), 20);
        assert!(d.seeds().len() <= 8, "{}", d.seeds().len());
        assert_eq!(d.merged_within_ns(), S);
        let first = d.seeds().iter().find(|s| s.marks == 1).unwrap();
        // The first second's five of the first kind: ids 0, 2, 4, 6, 8.
        assert_eq!((first.id, first.weight, first.first_ns, first.last_ns), (0, 5, 0, 8 * S / 10 + S / 2));
        assert_eq!(first.span, Some((0, 8 * S / 10 + S / 4)));
        assert_eq!(first.ack_ns, Some(1));
        // One of them (id 7, second kind) heard from the server: its merged seed says so.
        assert!(d.seeds().iter().any(|s| s.marks == 2 && s.client_spoke && s.weight == 5));
    }

    #[test]
    fn test_seeds_of_different_servers_or_marks_never_merge() {
        let mut d = Digest::with_budget(4);
        for i in 0..4u64 {
            let mut s = seed(i, 0, 1 << i);
            s.server.port = 9000 + i as u16;
            d.push(s);
        }
        // Alike none: the interval grows and nothing merges, as none may.
        assert_eq!(d.connections(), 4);
        assert!(d.seeds().iter().all(|s| s.weight == 1));
    }

    #[test]
    fn test_the_first_of_each_episode_are_examples() {
        let mut quota = ExampleQuota::default();
        let server = Endpoint { ip: IpAddr::from([10, 0, 0, 2]), port: 9000 };
        let client = Endpoint { ip: IpAddr::from([10, 0, 0, 1]), port: 40_000 };
        let at = |s: i64| Connection::new(0, client, server, false, FrameRef::default(), s * S);
        // Twelve problem connections a second apart: the first eight are examples.
        let first: Vec<bool> = (0..12).map(|s| quota.wants(&at(s))).collect();
        assert_eq!(first.iter().filter(|&&w| w).count(), EXAMPLES_PER_EPISODE as usize);
        assert!(first[..8].iter().all(|&w| w));
        // Within the gap of the last one: the same episode still. After it: a new one.
        assert!(!quota.wants(&at(11 + EPISODE_GAP_NS / S)));
        assert!(quota.wants(&at(12 + 2 * EPISODE_GAP_NS / S)));
    }

    #[test]
    fn test_renumber_moves_ids_and_probe_files() {
        let mut d = Digest::default();
        let mut s = seed(3, 0, 1);
        s.probe = Some(Probe { client: IpAddr::from([10, 0, 0, 1]), first: FrameRef { file: 0, frame: 9 }, open: false, refused: true, one_syn: true });
        d.push(s);
        d.renumber(|id| id + 100, 2);
        assert_eq!(d.seeds()[0].id, 103);
        assert_eq!({ d.seeds()[0].probe.unwrap().first.file }, 2);
    }
}
