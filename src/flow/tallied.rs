//! What a connection showed when it was counted, as bits kept with its record and its tombstone,
//! so that counting it again (after a late packet revived it) adds only what is new. The census
//! (`crate::census`) gives the outcome and symptom bits their meaning; here they are indexes.
//! (Not the episodes' marks, `detect::marks`: those are a verdict's bits, these a count's.)
//! What the record itself shows is `Connection::record_bits`.

/// What the tally counted for one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tallied(u32);

impl Tallied {
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
    const OUTCOME_MASK: u32 = 0b1111 << Tallied::OUTCOME_SHIFT;
    /// How many outcomes there is room for (0 in those bits is none).
    pub const OUTCOME_ROOM: usize = (Tallied::OUTCOME_MASK >> Tallied::OUTCOME_SHIFT) as usize;
    /// Symptoms take the bits from here up, by index.
    const FIRST_SYMPTOM: u32 = 16;
    /// How many symptom bits there are room for.
    pub const SYMPTOM_BITS: usize = (u32::BITS - Tallied::FIRST_SYMPTOM) as usize;

    /// The bit of the symptom with this index.
    pub fn symptom_bit(index: usize) -> u32 {
        1 << (Tallied::FIRST_SYMPTOM + index as u32)
    }

    pub fn with_bits(self, bits: u32) -> Tallied {
        Tallied(self.0 | bits)
    }

    pub fn union(self, other: Tallied) -> Tallied {
        Tallied(self.0 | other.0)
    }

    /// The bits set here and not in `before`, the outcome left out.
    pub fn new_since(self, before: Tallied) -> Tallied {
        Tallied(self.0 & !before.0 & !Tallied::OUTCOME_MASK)
    }

    /// 1 if `bit` is set, else 0 (to add to a count).
    pub fn has(self, bit: u32) -> u64 {
        u64::from(self.0 & bit != 0)
    }

    /// The index of the outcome counted, if the connection was counted.
    pub fn outcome_index(self) -> Option<usize> {
        let n = ((self.0 & Tallied::OUTCOME_MASK) >> Tallied::OUTCOME_SHIFT) as usize;
        n.checked_sub(1)
    }

    pub fn with_outcome_index(self, index: usize) -> Tallied {
        Tallied((self.0 & !Tallied::OUTCOME_MASK) | ((index as u32 + 1) << Tallied::OUTCOME_SHIFT))
    }

    pub fn is_partial(self) -> bool {
        self.0 & Tallied::PARTIAL != 0
    }

    pub fn is_kept(self) -> bool {
        self.0 & Tallied::KEPT != 0
    }

    pub fn kept(self) -> Tallied {
        Tallied(self.0 | Tallied::KEPT)
    }
}
