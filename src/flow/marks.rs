//! What a connection showed when it was counted, as bits kept with its record and its tombstone,
//! so that counting it again (after a late packet revived it) adds only what is new. The census
//! (`crate::census`) gives the outcome and symptom bits their meaning; here they are indexes.

use super::connection::{Connection, DirectionCounts};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Marks(u32);

impl Marks {
    pub const COUNTED: u32 = 1 << 0;
    pub const HANDSHAKE_COMPLETED: u32 = 1 << 1;
    pub const SYN_RETRANSMITS: u32 = 1 << 2;
    pub const SYNACK_RETRANSMITS: u32 = 1 << 3;
    pub const DATA_RETRANSMITS: u32 = 1 << 4;
    pub const DUP_ACKS: u32 = 1 << 5;
    pub const ZERO_WINDOW: u32 = 1 << 6;
    pub const RESET: u32 = 1 << 7;
    pub const PARTIAL: u32 = 1 << 8;
    pub const PORT_REUSE: u32 = 1 << 9;
    /// The store kept the record for the findings.
    const KEPT: u32 = 1 << 14;
    /// The outcome counted, as its index plus one, in these four bits.
    const OUTCOME_SHIFT: u32 = 10;
    const OUTCOME_MASK: u32 = 0b1111 << Marks::OUTCOME_SHIFT;
    /// Symptoms take the bits from here up, by index.
    const FIRST_SYMPTOM: u32 = 16;
    /// How many symptom bits there are room for.
    pub const SYMPTOM_BITS: usize = 16;

    /// What the record itself shows (no verdict): counted, handshake, retransmissions, resets...
    pub fn of(c: &Connection) -> Marks {
        let any = |f: &dyn Fn(&DirectionCounts) -> bool| c.counts.iter().any(f);
        let bits = [
            (true, Marks::COUNTED),
            (c.handshake_completed(), Marks::HANDSHAKE_COMPLETED),
            (c.syn_count > 1, Marks::SYN_RETRANSMITS),
            (c.synack_count > 1, Marks::SYNACK_RETRANSMITS),
            (any(&|d| d.data_retransmits > 0), Marks::DATA_RETRANSMITS),
            (any(&|d| d.dup_acks > 0), Marks::DUP_ACKS),
            (any(&|d| d.zero_windows > 0), Marks::ZERO_WINDOW),
            (any(&|d| d.rst), Marks::RESET),
            (c.partial, Marks::PARTIAL),
            (c.follows.is_some(), Marks::PORT_REUSE),
        ];
        Marks(bits.iter().filter(|(on, _)| *on).fold(0, |m, (_, bit)| m | bit))
    }

    /// The bit of the symptom with this index.
    pub fn symptom_bit(index: usize) -> u32 {
        1 << (Marks::FIRST_SYMPTOM + index as u32)
    }

    pub fn with_bits(self, bits: u32) -> Marks {
        Marks(self.0 | bits)
    }

    pub fn union(self, other: Marks) -> Marks {
        Marks(self.0 | other.0)
    }

    /// The bits set here and not in `before`, the outcome left out.
    pub fn new_since(self, before: Marks) -> Marks {
        Marks(self.0 & !before.0 & !Marks::OUTCOME_MASK)
    }

    /// 1 if `bit` is set, else 0 (to add to a count).
    pub fn has(self, bit: u32) -> u64 {
        u64::from(self.0 & bit != 0)
    }

    /// The index of the outcome counted, if the connection was counted.
    pub fn outcome_index(self) -> Option<usize> {
        let n = ((self.0 & Marks::OUTCOME_MASK) >> Marks::OUTCOME_SHIFT) as usize;
        n.checked_sub(1)
    }

    pub fn with_outcome_index(self, index: usize) -> Marks {
        Marks((self.0 & !Marks::OUTCOME_MASK) | ((index as u32 + 1) << Marks::OUTCOME_SHIFT))
    }

    pub fn is_partial(self) -> bool {
        self.0 & Marks::PARTIAL != 0
    }

    pub fn is_kept(self) -> bool {
        self.0 & Marks::KEPT != 0
    }

    pub fn kept(self) -> Marks {
        Marks(self.0 | Marks::KEPT)
    }
}
