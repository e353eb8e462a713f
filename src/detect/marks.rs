//! Marks: what the episodes keep of a problem connection (`episodes::Member::marks`,
//! `digest::Seed::marks`), its outcome, its symptoms and its facts, one bit each of a u64 in
//! that order. The diagnosis's rules select and count over them by name (`VOCABULARY["marks"]`).
//! (Not `flow::tallied`: those bits are what the census counted, these a verdict's.)

use super::facts::Fact;
use super::{Outcome, Symptom};

/// Outcomes take the bits from 0, symptoms from here...
const FIRST_SYMPTOM: usize = Outcome::COUNT;
/// ...and facts from here.
const FIRST_FACT: usize = FIRST_SYMPTOM + Symptom::COUNT;
/// How many marks there are.
pub const COUNT: usize = FIRST_FACT + Fact::COUNT;

const _: () = assert!(COUNT <= u64::BITS as usize, "every mark is a bit of a u64");

pub fn outcome_bit(o: Outcome) -> u64 {
    1 << o.index()
}

pub fn symptom_bit(s: Symptom) -> u64 {
    1 << (FIRST_SYMPTOM + s.index())
}

pub fn fact_bit(f: Fact) -> u64 {
    1 << (FIRST_FACT + f.index())
}

/// Every mark's name, in bit order: outcomes, then symptoms, then facts.
pub const NAMES: [&str; COUNT] = {
    let mut names = [""; COUNT];
    let mut i = 0;
    while i < Outcome::COUNT {
        names[i] = Outcome::ALL[i].slug();
        i += 1;
    }
    let mut i = 0;
    while i < Symptom::COUNT {
        names[FIRST_SYMPTOM + i] = Symptom::ALL[i].slug();
        i += 1;
    }
    let mut i = 0;
    while i < Fact::COUNT {
        names[FIRST_FACT + i] = Fact::ALL[i].slug();
        i += 1;
    }
    names
};

/// The bit of a mark, by name.
pub fn bit(name: &str) -> Option<u64> {
    NAMES.iter().position(|&n| n == name).map(|i| 1 << i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashSet;

    #[test]
    fn test_mark_names_are_unique_and_name_their_bits() {
        let unique: FxHashSet<&str> = NAMES.iter().copied().collect();
        assert_eq!(unique.len(), NAMES.len());
        assert_eq!(bit("completed"), Some(1));
        assert_eq!(bit("completed"), Some(outcome_bit(Outcome::Completed)));
        assert_eq!(bit("mtu_black_hole"), Some(symptom_bit(Symptom::MtuBlackHole)));
        assert_eq!(bit("syn_unanswered"), Some(fact_bit(Fact::SynUnanswered)));
        assert_eq!(bit("listener_stalled"), Some(1 << (COUNT - 1)));
        assert_eq!(bit("no_such_mark"), None);
    }
}
