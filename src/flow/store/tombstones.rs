//! Where the flow table keeps its tombstones (`table::Tombstone`): a slab of (key, tombstone)
//! entries found through an index of their places.
//!
//! A map of key to tombstone keeps every entry in a bucket of a table between 44% and 88% full,
//! every bucket touched, and doubles by copying into a new table while the old one is still
//! held: at 400,000 tombstones (`table::MAX_TOMBSTONES`) 524,288 buckets of 80 bytes, 70 MiB
//! while it grows. Here the index holds 4-byte places, the slab's room is reserved once at the
//! start (address space only: a page counts in the resident set when an entry is first written
//! to it), and an IPv4 key takes 16 bytes instead of 40, so memory follows the tombstones kept,
//! 56 bytes each, plus 5 bytes a bucket of the index (which grows by copying its places).

use hashbrown::HashTable;

use crate::flow::key::FlowKey;

/// A key as the slab keeps it: an IPv4 key packed (`FlowKey::packed_v4`, top byte 0), or
/// `WIDE` in the top byte and the place of the key in `Tombstones::wide` in the first word.
type Packed = [u32; 4];
const WIDE: u32 = 1 << 24;

pub struct Tombstones<T> {
    /// Places in `entries`, found by the hash of their key.
    index: HashTable<u32>,
    entries: Vec<(Packed, T)>,
    /// Places in `entries` no index refers to, taken first by the next insert.
    free: Vec<u32>,
    /// The keys that do not pack (IPv6), and the places there no entry refers to.
    wide: Vec<FlowKey>,
    wide_free: Vec<u32>,
}

fn hash(key: &FlowKey) -> u64 {
    key.hash64()
}

/// Whether `stored` is `key` (`packed`: `key.packed_v4()`).
fn is(stored: &Packed, key: &FlowKey, packed: Option<Packed>, wide: &[FlowKey]) -> bool {
    match packed {
        Some(packed) => *stored == packed,
        None => stored[3] == WIDE && wide[stored[0] as usize] == *key,
    }
}

fn unpack(stored: &Packed, wide: &[FlowKey]) -> FlowKey {
    if stored[3] == WIDE {
        wide[stored[0] as usize]
    } else {
        FlowKey::from_packed_v4(*stored)
    }
}

/// Puts `value` in a place of `slab` that `free` lists, or at its end; returns the place.
pub(super) fn place_in<V>(slab: &mut Vec<V>, free: &mut Vec<u32>, value: V) -> u32 {
    match free.pop() {
        Some(at) => {
            slab[at as usize] = value;
            at
        }
        None => {
            slab.push(value);
            (slab.len() - 1) as u32
        }
    }
}

/// Places the index has room for at the start: growing it copies 4 bytes a tombstone, and a
/// table that holds few (a part of a merge, a small capture) touches no more than this.
const INDEX_START: usize = 64 * 1024;

impl<T: Copy> Tombstones<T> {
    /// Room for `capacity` tombstones in the slab, untouched until used.
    pub fn with_capacity(capacity: usize) -> Tombstones<T> {
        Tombstones {
            index: HashTable::with_capacity(capacity.min(INDEX_START)),
            entries: Vec::with_capacity(capacity),
            free: Vec::new(),
            wide: Vec::new(),
            wide_free: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The place of `key`'s entry, if it has one.
    fn find(&self, key: &FlowKey) -> Option<u32> {
        let packed = key.packed_v4();
        self.index.find(hash(key), |&at| is(&self.entries[at as usize].0, key, packed, &self.wide)).copied()
    }

    fn pack(&mut self, key: FlowKey) -> Packed {
        if let Some(packed) = key.packed_v4() {
            return packed;
        }
        [place_in(&mut self.wide, &mut self.wide_free, key), 0, 0, WIDE]
    }

    /// Frees the entry at `at` (the index no longer refers to it).
    fn release(free: &mut Vec<u32>, wide_free: &mut Vec<u32>, at: u32, stored: &Packed) {
        free.push(at);
        if stored[3] == WIDE {
            wide_free.push(stored[0]);
        }
    }

    /// Puts `tombstone` under `key`, replacing the one there.
    pub fn insert(&mut self, key: FlowKey, tombstone: T) {
        if let Some(at) = self.find(&key) {
            self.entries[at as usize].1 = tombstone;
            return;
        }
        let entry = (self.pack(key), tombstone);
        let at = place_in(&mut self.entries, &mut self.free, entry);
        let (entries, wide) = (&self.entries, &self.wide);
        self.index.insert_unique(hash(&key), at, |&at| hash(&unpack(&entries[at as usize].0, wide)));
    }

    /// Takes the tombstone of `key` out, if there is one.
    pub fn remove(&mut self, key: &FlowKey) -> Option<T> {
        self.remove_hashed(key, hash(key))
    }

    /// `remove` with the key's hash (`FlowKey::hash64`) worked out by the caller.
    pub fn remove_hashed(&mut self, key: &FlowKey, hash: u64) -> Option<T> {
        let packed = key.packed_v4();
        let (entries, wide) = (&self.entries, &self.wide);
        let (at, _) = self.index.find_entry(hash, |&at| is(&entries[at as usize].0, key, packed, wide)).ok()?.remove();
        let (stored, tombstone) = self.entries[at as usize];
        Self::release(&mut self.free, &mut self.wide_free, at, &stored);
        Some(tombstone)
    }

    /// Keeps the tombstones for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&FlowKey, &T) -> bool) {
        let (entries, wide, free, wide_free) = (&self.entries, &self.wide, &mut self.free, &mut self.wide_free);
        self.index.retain(|&mut at| {
            let (stored, tombstone) = &entries[at as usize];
            let kept = keep(&unpack(stored, wide), tombstone);
            if !kept {
                Self::release(free, wide_free, at, stored);
            }
            kept
        });
    }

    pub fn iter(&self) -> impl Iterator<Item = (FlowKey, &T)> + '_ {
        self.index.iter().map(|&at| {
            let (stored, tombstone) = &self.entries[at as usize];
            (unpack(stored, &self.wide), tombstone)
        })
    }

    pub fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.index.iter().map(|&at| &self.entries[at as usize].1)
    }

    pub fn for_each_mut(&mut self, mut f: impl FnMut(&mut T)) {
        for &at in self.index.iter() {
            f(&mut self.entries[at as usize].1);
        }
    }

    pub fn into_pairs(self) -> impl Iterator<Item = (FlowKey, T)> {
        let (entries, wide) = (self.entries, self.wide);
        self.index.into_iter().map(move |at| {
            let (stored, tombstone) = entries[at as usize];
            (unpack(&stored, &wide), tombstone)
        })
    }
}

/// Serialised as a map of key to tombstone, in the index's order.
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

    /// Even ports IPv4 (odd ones on a VLAN), ports from 1000 IPv6.
    fn key(port: u16) -> FlowKey {
        let ip = if port >= 1000 { "2001:db8::1" } else { "10.0.0.1" };
        let peer = if port >= 1000 { "2001:db8::2" } else { "10.0.0.2" };
        let a = Endpoint { ip: ip.parse().unwrap(), port };
        let b = Endpoint { ip: peer.parse().unwrap(), port: 80 };
        FlowKey::oriented(a, b).0.with_vlan(u32::from(port % 2) * 42)
    }

    #[test]
    fn a_round_trip_through_postcard_keeps_every_key_and_tombstone() {
        let mut t = Tombstones::with_capacity(4);
        for port in [1, 2, 1000, 1001] {
            t.insert(key(port), port);
        }
        let bytes = postcard::to_stdvec(&t).unwrap();
        let back: Tombstones<u16> = postcard::from_bytes(&bytes).unwrap();
        let sorted = |t: Tombstones<u16>| {
            let mut pairs: Vec<(FlowKey, u16)> = t.into_pairs().collect();
            pairs.sort_by_key(|(_, v)| *v);
            pairs
        };
        assert_eq!(sorted(back), sorted(t));
    }

    #[test]
    fn ipv6_keys_are_found_and_their_places_reused() {
        let mut t = Tombstones::with_capacity(4);
        for port in [1000, 1001, 5, 1002] {
            t.insert(key(port), port);
        }
        assert_eq!(t.remove(&key(1001)), Some(1001));
        assert_eq!(t.remove(&key(1001)), None);
        t.insert(key(1003), 1003);
        assert_eq!(t.wide.len(), 3, "the freed place of a wide key is taken again");
        t.retain(|k, _| *k != key(1000));
        t.insert(key(1004), 1004);
        assert_eq!(t.wide.len(), 3);
        let mut pairs: Vec<(FlowKey, u16)> = t.into_pairs().collect();
        pairs.sort_by_key(|(_, v)| *v);
        assert_eq!(pairs, vec![(key(5), 5), (key(1002), 1002), (key(1003), 1003), (key(1004), 1004)]);
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
