//! Counting connections for the summary. A connection is counted when it finishes, and its
//! record may then be dropped: memory follows the live connections, not the length of the capture.

use serde::ser::{SerializeMap, Serializer};

use crate::detect::{self, Outcome, Symptom};
use crate::flow::tallied::Tallied;
use crate::flow::Connection;

const _: () = assert!(Symptom::COUNT <= Tallied::SYMPTOM_BITS, "the symptoms fit in the bits Tallied has for them");
const _: () = assert!(Outcome::COUNT <= Tallied::OUTCOME_ROOM, "an outcome's index plus one fits in the bits Tallied has for it");

/// The outcome counted for a connection, if it was counted.
pub fn counted_outcome(tallied: Tallied) -> Option<Outcome> {
    tallied.outcome_index().and_then(|i| Outcome::ALL.get(i).copied())
}

/// Counts over connections (docs/json.md, `summary`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    /// Connections by outcome, in `Outcome::ALL` order.
    #[serde(serialize_with = "by_outcome", deserialize_with = "outcomes_by_slug")]
    pub outcomes: [u64; Outcome::COUNT],
    /// Connections with each symptom, in `Symptom::ALL` order.
    #[serde(serialize_with = "by_symptom", deserialize_with = "symptoms_by_slug")]
    pub symptoms: [u64; Symptom::COUNT],
    pub connections: u64,
    pub handshakes_completed: u64,
    pub with_syn_retransmits: u64,
    pub with_synack_retransmits: u64,
    pub with_data_retransmits: u64,
    pub with_dup_acks: u64,
    pub with_zero_window: u64,
    pub reset: u64,
    pub partial: u64,
    pub port_reuse: u64,
    pub snaplen_cut_segments: u64,
    /// Frames that were copies of the frame before them (`Connection::duplicates`).
    #[serde(default)]
    pub duplicate_frames: u64,
}

impl Tally {
    /// Counts what `c` shows beyond what was already counted for it (`c.tallied`, set on a
    /// record revived after it was counted), for a capture read up to `end_ns`. Returns
    /// everything counted for it so far. The outcome is counted once, the first time.
    pub fn count(&mut self, c: &Connection, end_ns: i64) -> Tallied {
        let (outcome, symptoms) = detect::classify(c, end_ns);
        self.count_as(c, outcome, symptoms)
    }

    /// `count`, with the connection's outcome and symptoms already known.
    pub fn count_as(&mut self, c: &Connection, outcome: Outcome, symptoms: detect::Symptoms) -> Tallied {
        let symptom_bits = symptoms.iter().fold(0, |bits, s| bits | Tallied::symptom_bit(s.index()));
        let now = c.record_bits().with_bits(symptom_bits).union(c.tallied);
        let new = now.new_since(c.tallied);
        let outcome = match counted_outcome(c.tallied) {
            // Counted before; a revived record knows too little to be judged again, but a late
            // RST turns the outcome into a reset, unless both sides had closed before it
            // (detect::after_both_fins).
            Some(before) => {
                let after = match c.milestones.first_rst() {
                    Some(rst) if !c.revived_after_close && !matches!(before, Outcome::ResetByClient | Outcome::ResetByServer | Outcome::Refused) => {
                        if rst.from == crate::flow::Side::Server { Outcome::ResetByServer } else { Outcome::ResetByClient }
                    }
                    _ => before,
                };
                if after != before {
                    // Wrapping: with a window of slices (`flow::store::window`) the connection may have
                    // been counted in an earlier slice's tally; the sum of the slices is right.
                    self.outcomes[before.index()] = self.outcomes[before.index()].wrapping_sub(1);
                    self.outcomes[after.index()] += 1;
                }
                after
            }
            None => {
                self.outcomes[outcome.index()] += 1;
                outcome
            }
        };
        let now = now.with_outcome_index(outcome.index());
        for s in Symptom::ALL {
            self.symptoms[s.index()] += new.has(Tallied::symptom_bit(s.index()));
        }
        self.connections += new.has(Tallied::COUNTED);
        self.handshakes_completed += new.has(Tallied::HANDSHAKE_COMPLETED);
        self.with_syn_retransmits += new.has(Tallied::SYN_RETRANSMITS);
        self.with_synack_retransmits += new.has(Tallied::SYNACK_RETRANSMITS);
        self.with_data_retransmits += new.has(Tallied::DATA_RETRANSMITS);
        self.with_dup_acks += new.has(Tallied::DUP_ACKS);
        self.with_zero_window += new.has(Tallied::ZERO_WINDOW);
        self.reset += new.has(Tallied::RESET);
        self.partial += new.has(Tallied::PARTIAL);
        self.port_reuse += new.has(Tallied::PORT_REUSE);
        self.snaplen_cut_segments += u64::from(c.snaplen_cut);
        self.duplicate_frames += u64::from(c.duplicates);
        now
    }

    pub fn add(&mut self, other: &Tally) {
        for (mine, theirs) in self.outcomes.iter_mut().zip(other.outcomes) {
            *mine = mine.wrapping_add(theirs);
        }
        for (mine, theirs) in self.symptoms.iter_mut().zip(other.symptoms) {
            *mine += theirs;
        }
        self.connections += other.connections;
        self.handshakes_completed += other.handshakes_completed;
        self.with_syn_retransmits += other.with_syn_retransmits;
        self.with_synack_retransmits += other.with_synack_retransmits;
        self.with_data_retransmits += other.with_data_retransmits;
        self.with_dup_acks += other.with_dup_acks;
        self.with_zero_window += other.with_zero_window;
        self.reset += other.reset;
        self.partial += other.partial;
        self.port_reuse += other.port_reuse;
        self.snaplen_cut_segments += other.snaplen_cut_segments;
        self.duplicate_frames += other.duplicate_frames;
    }
}

fn by_outcome<S: Serializer>(counts: &[u64; Outcome::COUNT], serializer: S) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(counts.len()))?;
    for o in Outcome::ALL {
        map.serialize_entry(o.slug(), &counts[o.index()])?;
    }
    map.end()
}

fn by_symptom<S: Serializer>(counts: &[u64; Symptom::COUNT], serializer: S) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(counts.len()))?;
    for s in Symptom::ALL {
        map.serialize_entry(s.slug(), &counts[s.index()])?;
    }
    map.end()
}

/// Reads counts written by `by_outcome`/`by_symptom` back into their arrays; an unknown slug
/// is an error (a partial result from another version).
fn by_slug<'de, D: serde::Deserializer<'de>, const N: usize>(d: D, index: impl Fn(&str) -> Option<usize>) -> Result<[u64; N], D::Error> {
    use serde::Deserialize;
    let counts = std::collections::BTreeMap::<String, u64>::deserialize(d)?;
    let mut out = [0u64; N];
    for (slug, n) in counts {
        let i = index(&slug).filter(|&i| i < N).ok_or_else(|| serde::de::Error::custom(format!("unknown count {slug}")))?;
        out[i] = n;
    }
    Ok(out)
}

fn outcomes_by_slug<'de, D: serde::Deserializer<'de>>(d: D) -> Result<[u64; Outcome::COUNT], D::Error> {
    by_slug(d, |slug| Outcome::from_slug(slug).map(Outcome::index))
}

fn symptoms_by_slug<'de, D: serde::Deserializer<'de>>(d: D) -> Result<[u64; Symptom::COUNT], D::Error> {
    by_slug(d, |slug| Symptom::from_slug(slug).map(Symptom::index))
}
