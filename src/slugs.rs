//! Enums named by slugs, the stable snake_case words of the JSON, the vocabulary and the docs.
//! One list of `Variant => "slug"` pairs declares the enum and everything kept in step with it,
//! so that no second list can drift from the first.

/// Declares a fieldless enum from `Variant => "slug"` pairs (doc comments and attributes kept),
/// and with it: `ALL`, every variant in declaration order (the order the vocabulary exports to
/// Python); `COUNT`; `index()`, a variant's place in `ALL` (its bit in a set); `slug()`;
/// `from_slug()`; and `rule()`, the words a pair may carry after it (`Variant => "slug" ; "the
/// rule in words"`), for the docs, empty where it carries none. Those words are also the
/// variant's doc comment, so that they are written once.
macro_rules! slug_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $slug:literal $(; $rule:literal)?),* $(,)? }) => {
        $(#[$meta])*
        $vis enum $name {
            $($(#[$vmeta])* $(#[doc = $rule])? $variant,)*
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [$name; [$($slug),*].len()] = [$($name::$variant),*];
            pub const COUNT: usize = $name::ALL.len();

            /// Its place in `ALL`.
            pub const fn index(self) -> usize {
                self as usize
            }

            pub const fn slug(self) -> &'static str {
                match self {
                    $($name::$variant => $slug,)*
                }
            }

            pub fn from_slug(slug: &str) -> Option<$name> {
                match slug {
                    $($slug => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// The rule in words declared with the variant; empty when none was.
            #[allow(dead_code)]
            pub const fn rule(self) -> &'static str {
                match self {
                    $($name::$variant => concat!("" $(, $rule)?),)*
                }
            }
        }
    };
}

pub(crate) use slug_enum;

#[cfg(test)]
mod tests {
    slug_enum! {
        /// Two words.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        enum Word {
            /// The first.
            First => "first" ; "the first word",
            SecondOne => "second_one",
        }
    }

    #[test]
    fn test_slug_enum_keeps_order_and_maps_both_ways() {
        assert_eq!(Word::ALL, [Word::First, Word::SecondOne]);
        assert_eq!(Word::COUNT, 2);
        assert_eq!(Word::SecondOne.index(), 1);
        assert_eq!(Word::SecondOne.slug(), "second_one");
        assert_eq!(Word::from_slug("first"), Some(Word::First));
        assert_eq!(Word::from_slug("First"), None);
        assert_eq!((Word::First.rule(), Word::SecondOne.rule()), ("the first word", ""));
        for w in Word::ALL {
            assert_eq!(Word::from_slug(w.slug()), Some(w));
        }
    }
}
