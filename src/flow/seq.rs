//! Sequence numbers compare modulo 2^32 (RFC 9293 §3.4).

/// A TCP sequence number. `a.before(b)` is true when `a` comes earlier in sequence space,
/// wrapping included, as RFC 9293 §3.4 defines "<" for sequence numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    pub fn before(self, other: SeqNumber) -> bool {
        (self.0.wrapping_sub(other.0) as i32) < 0
    }

    pub fn after(self, other: SeqNumber) -> bool {
        other.before(self)
    }

    pub fn plus(self, n: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(n))
    }

    /// Later of the two, in sequence space.
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self.before(other) {
            other
        } else {
            self
        }
    }

    /// Distance from `base` to `self`, as Wireshark's relative sequence numbers show it.
    pub fn relative_to(self, base: u32) -> u32 {
        self.0.wrapping_sub(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_before_across_wrap() {
        let near_end = SeqNumber(u32::MAX - 10);
        let wrapped = near_end.plus(100);
        assert_eq!(wrapped.0, 89);
        assert!(near_end.before(wrapped));
        assert!(wrapped.after(near_end));
        assert_eq!(near_end.max(wrapped), wrapped);
        assert_eq!(wrapped.relative_to(near_end.0), 100);
    }

    #[test]
    fn test_equal_is_neither_before_nor_after() {
        let s = SeqNumber(5);
        assert!(!s.before(s) && !s.after(s));
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn prop_before_is_a_strict_order_within_half_the_space(a in any::<u32>(), n in 1u32..(1 << 31)) {
            let (a, b) = (SeqNumber(a), SeqNumber(a).plus(n));
            prop_assert!(a.before(b));
            prop_assert!(!b.before(a));
            prop_assert!(b.after(a));
            prop_assert_eq!(a.max(b), b);
            prop_assert_eq!(b.max(a), b);
            prop_assert_eq!(b.relative_to(a.0), n);
        }

        #[test]
        fn prop_exactly_one_of_before_equal_after(a in any::<u32>(), b in any::<u32>()) {
            let (a, b) = (SeqNumber(a), SeqNumber(b));
            let relations = [a.before(b), a == b, a.after(b)];
            // Half the space apart (2^31), both directions say "before": RFC 9293 §3.4 leaves it undefined.
            if b.0.wrapping_sub(a.0) == 1 << 31 {
                prop_assert!(a.before(b) && b.before(a));
            } else {
                prop_assert_eq!(relations.iter().filter(|&&r| r).count(), 1);
            }
        }
    }
}
