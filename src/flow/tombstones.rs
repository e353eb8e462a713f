//! Where the flow table keeps its tombstones (`table::Tombstone`): a slab of (key, tombstone)
//! entries found through an index of their places.
//!
//! A map of key to tombstone keeps every entry in a bucket of a table between 44% and 88% full,
//! every bucket touched, and doubles by copying into a new table while the old one is still
//! held: at 400,000 tombstones (`table::MAX_TOMBSTONES`) 524,288 buckets of 80 bytes, 70 MiB
//! while it grows. Here the index holds 4-byte places, and the slab's room is reserved once at
//! the start (address space only: a page counts in the resident set when an entry is first
//! written to it), so memory follows the tombstones kept, 80 bytes each, plus 5 bytes a bucket.

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;
use std::hash::BuildHasher;

use super::key::FlowKey;

pub struct Tombstones<T> {
    /// Places in `entries`, found by the hash of their key.
    index: HashTable<u32>,
    entries: Vec<(FlowKey, T)>,
    /// Places in `entries` no index refers to, taken first by the next insert.
    free: Vec<u32>,
}

fn hash(key: &FlowKey) -> u64 {
    FxBuildHasher.hash_one(key)
}

impl<T: Copy> Tombstones<T> {
    /// Room for `capacity` tombstones before the index grows; the slab's room is untouched
    /// until used.
    pub fn with_capacity(capacity: usize) -> Tombstones<T> {
        Tombstones { index: HashTable::with_capacity(capacity), entries: Vec::with_capacity(capacity), free: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Puts `tombstone` under `key`, replacing the one there.
    pub fn insert(&mut self, key: FlowKey, tombstone: T) {
        let entries = &mut self.entries;
        if let Some(&at) = self.index.find(hash(&key), |&at| entries[at as usize].0 == key) {
            entries[at as usize].1 = tombstone;
            return;
        }
        let at = match self.free.pop() {
            Some(at) => {
                entries[at as usize] = (key, tombstone);
                at
            }
            None => {
                entries.push((key, tombstone));
                (entries.len() - 1) as u32
            }
        };
        self.index.insert_unique(hash(&key), at, |&at| hash(&entries[at as usize].0));
    }

    /// Takes the tombstone of `key` out, if there is one.
    pub fn remove(&mut self, key: &FlowKey) -> Option<T> {
        let entries = &self.entries;
        let (at, _) = self.index.find_entry(hash(key), |&at| entries[at as usize].0 == *key).ok()?.remove();
        self.free.push(at);
        Some(self.entries[at as usize].1)
    }

    /// Keeps the tombstones for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&FlowKey, &T) -> bool) {
        let (entries, free) = (&self.entries, &mut self.free);
        self.index.retain(|&mut at| {
            let (key, tombstone) = &entries[at as usize];
            let kept = keep(key, tombstone);
            if !kept {
                free.push(at);
            }
            kept
        });
    }

    pub fn iter(&self) -> impl Iterator<Item = (&FlowKey, &T)> + '_ {
        self.index.iter().map(|&at| {
            let (key, tombstone) = &self.entries[at as usize];
            (key, tombstone)
        })
    }

    pub fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.iter().map(|(_, tombstone)| tombstone)
    }

    pub fn for_each_mut(&mut self, mut f: impl FnMut(&mut T)) {
        for &at in self.index.iter() {
            f(&mut self.entries[at as usize].1);
        }
    }

    pub fn into_pairs(self) -> impl Iterator<Item = (FlowKey, T)> {
        let entries = self.entries;
        self.index.into_iter().map(move |at| entries[at as usize])
    }
}

/// Serialised as the map of key to tombstone it replaced (the same bytes).
impl<T: Copy + serde::Serialize> serde::Serialize for Tombstones<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de, T: Copy + serde::Deserialize<'de>> serde::Deserialize<'de> for Tombstones<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Copy + serde::Deserialize<'de>> serde::de::Visitor<'de> for Visitor<T> {
            type Value = Tombstones<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of tombstones")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Tombstones<T>, A::Error> {
                let mut tombstones = Tombstones::with_capacity(map.size_hint().unwrap_or(0).min(1 << 16));
                while let Some((key, tombstone)) = map.next_entry::<FlowKey, T>()? {
                    tombstones.insert(key, tombstone);
                }
                Ok(tombstones)
            }
        }
        deserializer.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::key::Endpoint;

    fn key(port: u16) -> FlowKey {
        let a = Endpoint { ip: "10.0.0.1".parse().unwrap(), port };
        let b = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 80 };
        FlowKey::oriented(a, b).0
    }

    #[test]
    fn insert_replace_remove_retain_reuse_places() {
        let mut t = Tombstones::with_capacity(4);
        for port in 1..=10 {
            t.insert(key(port), port as u32);
        }
        t.insert(key(3), 33);
        assert_eq!(t.len(), 10);
        assert_eq!(t.remove(&key(3)), Some(33));
        assert_eq!(t.remove(&key(3)), None);
        t.retain(|_, &v| v % 2 == 0);
        assert_eq!(t.len(), 5);
        // Places freed by the removal and the retain are taken before the slab grows.
        for port in 11..=16 {
            t.insert(key(port), port as u32);
        }
        assert_eq!(t.entries.len(), 11);
        t.for_each_mut(|v| *v += 100);
        let mut values: Vec<u32> = t.values().copied().collect();
        values.sort_unstable();
        assert_eq!(values, vec![102, 104, 106, 108, 110, 111, 112, 113, 114, 115, 116]);
        let mut pairs: Vec<(FlowKey, u32)> = t.into_pairs().collect();
        pairs.sort_by_key(|(_, v)| *v);
        assert_eq!(pairs[0], (key(2), 102));
    }
}
