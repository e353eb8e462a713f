//! The table of connections that may still see packets, and what it forgets when.
//!
//! Finished connections (FINs both ways, or an RST) leave the hot table after `CLOSED_GRACE_NS`
//! and become tombstones: a few fields, enough to label a late packet (a FIN or RST that comes
//! after the close) and to tell a new connection on the same 4-tuple from a retransmission,
//! for `LINGER_NS`. A packet on a tombstoned 4-tuple brings the flow back.

use hashbrown::hash_table::{self, HashTable};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

use super::counter::Counter;
use super::prefetch::prefetch;
use super::records::{ConnectionStore, Retired};
use super::tombstones::{place_in, Tombstones};
use crate::flow::connection::ConnState;
use crate::flow::key::FlowKey;
use crate::flow::seq::SeqNumber;
use crate::flow::state::{DirectionState, Flow};

/// A finished connection stays in the hot table this long after its last packet: a lost last
/// ACK brings a FIN retransmission after the RTO (at least 200 ms, Linux TCP_RTO_MIN), an
/// unread response an RST within a round trip. Later packets still find the tombstone.
pub const CLOSED_GRACE_NS: i64 = 500_000_000;
/// A finished or never-answered connection is forgotten after this much capture time without
/// packets: longer than TIME-WAIT (60 s, Linux TCP_TIMEWAIT_LEN) and the SYN-ACK retries
/// (63 s, tcp_synack_retries=5).
pub const LINGER_NS: i64 = 120 * 1_000_000_000;

/// What is kept of a finished connection's state.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Tombstone {
    record: Retired,
    last_time_ns: i64,
    /// Per direction (client, server): the highest sequence number sent plus one.
    next_seq: [u32; 2],
    flags: TombstoneFlags,
    state: ConnState,
}

/// Per-direction booleans of a tombstone, as bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct TombstoneFlags(u8);

impl TombstoneFlags {
    const NEXT_SEQ_KNOWN: u8 = 0b0000_0001;
    const DATA_SEEN: u8 = 0b0000_0100;
    const FIN_SEEN: u8 = 0b0001_0000;
    const CLIENT_IS_LOW: u8 = 0b0100_0000;
    const SERVER_CLOSED_FIRST: u8 = 0b1000_0000;

    fn set(&mut self, bit: u8, direction: usize, on: bool) {
        if on {
            self.0 |= bit << direction;
        }
    }

    fn get(self, bit: u8, direction: usize) -> bool {
        self.0 & (bit << direction) != 0
    }
}

impl Tombstone {
    fn of(flow: &Flow, record: Retired, state: ConnState) -> Tombstone {
        let mut flags = TombstoneFlags::default();
        let mut next_seq = [0; 2];
        for (i, d) in flow.direction.iter().enumerate() {
            flags.set(TombstoneFlags::NEXT_SEQ_KNOWN, i, d.next_seq.is_some());
            flags.set(TombstoneFlags::DATA_SEEN, i, d.data_seen);
            flags.set(TombstoneFlags::FIN_SEEN, i, d.fin_seen);
            next_seq[i] = d.next_seq.map_or(0, |s| s.0);
        }
        flags.set(TombstoneFlags::CLIENT_IS_LOW, 0, flow.client_is_low);
        flags.set(TombstoneFlags::SERVER_CLOSED_FIRST, 0, flow.server_closed_first);
        Tombstone { record, last_time_ns: flow.last_time_ns, next_seq, flags, state }
    }

    fn client_is_low(&self) -> bool {
        self.flags.get(TombstoneFlags::CLIENT_IS_LOW, 0)
    }

    fn into_flow(self, conn: usize) -> Flow {
        let direction = |i: usize| DirectionState {
            next_seq: self.flags.get(TombstoneFlags::NEXT_SEQ_KNOWN, i).then_some(SeqNumber(self.next_seq[i])),
            data_seen: self.flags.get(TombstoneFlags::DATA_SEEN, i),
            fin_seen: self.flags.get(TombstoneFlags::FIN_SEEN, i),
            ..DirectionState::default()
        };
        Flow {
            conn: conn as u32,
            client_is_low: self.client_is_low(),
            state: self.state,
            server_closed_first: self.flags.get(TombstoneFlags::SERVER_CLOSED_FIRST, 0),
            direction: [direction(0), direction(1)],
            last_time_ns: self.last_time_ns,
        }
    }
}

/// The hot table's flows: kept in a slab and found through an index from key to place. A flow
/// is large (two directions of sequence state), so the index moves a key and a number when
/// it inserts, removes or grows, never a flow, and the place a finished flow frees is taken by
/// the next new one while it is still in the cache. The index is probed with the key's hash
/// (`FlowKey::hash64`, the hash an `FxHashMap` would take), which the reading thread works out
/// with the key; iteration follows the index, as it followed the map of flows before.
struct LiveFlows {
    index: HashTable<(FlowKey, u32)>,
    flows: Vec<Flow>,
    /// Places in `flows` no key refers to.
    free: Vec<u32>,
}

fn hash_of(entry: &(FlowKey, u32)) -> u64 {
    entry.0.hash64()
}

impl LiveFlows {
    fn with_capacity(capacity: usize) -> LiveFlows {
        LiveFlows { index: HashTable::with_capacity(capacity), flows: Vec::new(), free: Vec::new() }
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    /// Where the flow of `key` (of hash `hash`) is.
    fn place(&self, key: &FlowKey, hash: u64) -> Option<usize> {
        self.index.find(hash, |(k, _)| k == key).map(|&(_, at)| at as usize)
    }

    fn get_mut(&mut self, key: &FlowKey) -> Option<&mut Flow> {
        let at = self.place(key, key.hash64())?;
        self.flows.get_mut(at)
    }

    /// Puts `flow` under `key` (of hash `hash`), replacing the flow there; returns its place.
    fn insert(&mut self, key: FlowKey, hash: u64, flow: Flow) -> usize {
        let at = match self.index.entry(hash, |(k, _)| *k == key, hash_of) {
            hash_table::Entry::Occupied(entry) => {
                let at = entry.get().1;
                self.flows[at as usize] = flow;
                at
            }
            hash_table::Entry::Vacant(entry) => {
                let at = place_in(&mut self.flows, &mut self.free, flow);
                entry.insert((key, at));
                at
            }
        };
        at as usize
    }

    /// Forgets the flow of `key`; its place is reused. Returns where it was (still readable
    /// until the next insert).
    fn remove(&mut self, key: &FlowKey) -> Option<usize> {
        let (_, at) = self.index.find_entry(key.hash64(), |(k, _)| k == key).ok()?.remove().0;
        self.free.push(at);
        Some(at as usize)
    }

    /// Forgets the flow of `key` if `goes` says so of it: one probe of the index for both.
    /// Returns where it was (still readable until the next insert).
    fn remove_if(&mut self, key: &FlowKey, goes: impl FnOnce(&Flow) -> bool) -> Option<usize> {
        let entry = self.index.find_entry(key.hash64(), |(k, _)| k == key).ok()?;
        let at = entry.get().1;
        if !goes(&self.flows[at as usize]) {
            return None;
        }
        entry.remove();
        self.free.push(at);
        Some(at as usize)
    }

    fn at(&self, at: usize) -> &Flow {
        &self.flows[at]
    }

    fn iter(&self) -> impl Iterator<Item = (&FlowKey, &Flow)> + '_ {
        self.index.iter().map(|(key, at)| (key, &self.flows[*at as usize]))
    }

    fn values(&self) -> impl Iterator<Item = &Flow> + '_ {
        self.index.iter().map(|&(_, at)| &self.flows[at as usize])
    }

    fn for_each_mut(&mut self, mut f: impl FnMut(&mut Flow)) {
        for &(_, at) in self.index.iter() {
            f(&mut self.flows[at as usize]);
        }
    }

    /// Keeps the flows for which `keep` is true, in the index's order.
    fn retain(&mut self, mut keep: impl FnMut(&FlowKey, &mut Flow) -> bool) {
        let (flows, free) = (&mut self.flows, &mut self.free);
        self.index.retain(|(key, at)| {
            let kept = keep(key, &mut flows[*at as usize]);
            if !kept {
                free.push(*at);
            }
            kept
        });
    }

    fn into_pairs(self) -> Vec<(FlowKey, Flow)> {
        let mut flows: Vec<Option<Flow>> = self.flows.into_iter().map(Some).collect();
        self.index.into_iter().filter_map(|(key, at)| Some((key, flows.get_mut(at as usize)?.take()?))).collect()
    }
}

/// Serialised as a map of key to flow: the bytes a map of them gives.
impl serde::Serialize for LiveFlows {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for LiveFlows {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = LiveFlows;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of flows")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<LiveFlows, A::Error> {
                // serde's own capacity rule for a map of flows, so that the index iterates
                // in the order the deserialised map of flows did.
                let cautious = (1024 * 1024 / std::mem::size_of::<(FlowKey, Flow)>()).max(1);
                let mut live = LiveFlows::with_capacity(map.size_hint().unwrap_or(0).min(cautious));
                while let Some((key, flow)) = map.next_entry::<FlowKey, Flow>()? {
                    let hash = key.hash64();
                    live.insert(key, hash, flow);
                }
                Ok(live)
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// A flow that reached CLOSED or RESET at `since`, and its place in the slab then: the sweep
/// asks the CPU for it ahead of time (`prefetch_closing`). Only a hint: a sweep finds the flow
/// by its key, and by then the place may hold another flow.
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Closing {
    key: FlowKey,
    since: i64,
    place: u32,
}

#[derive(serde::Serialize, serde::Deserialize)]
pub struct FlowTable {
    live: LiveFlows,
    finished: Tombstones<Tombstone>,
    /// Flows that reached CLOSED or RESET, oldest first: what the next sweep looks at.
    closing: VecDeque<Closing>,
    /// Sizes at which the next pressure check runs (see `relieve_pressure`).
    live_limit: usize,
    finished_limit: usize,
    /// Half-open flows moved out of the hot table early, and tombstones of half-open flows
    /// forgotten early, to keep memory bounded.
    pub retired_early: u64,
    pub forgotten_early: u64,
    /// Tombstones of connections that had finished, forgotten before `LINGER_NS` because more
    /// than `MAX_TOMBSTONES` were remembered at once (`relieve_pressure`).
    pub finished_forgotten_early: u64,
}

/// More flows than this in the hot table at once, and half-open ones (a SYN, perhaps a SYN-ACK,
/// never completed) leave it early as tombstones, idle ones first: a SYN flood or a port scan
/// brings millions of them; real traffic keeps a few thousand connections live at once.
pub const MAX_LIVE_FLOWS: usize = 100_000;
/// More tombstones than this, and those of half-open connections are forgotten early; if that is
/// not enough, the oldest, down to three quarters of it. Tombstones live `LINGER_NS`, so they
/// number the connections of the last 120 s: this bounds them (about 24 MiB, src/flow/tombstones.rs)
/// past 3,333 new connections a second.
pub const MAX_TOMBSTONES: usize = 400_000;
/// A half-open flow idle this long goes first: a client's kernel sends its SYN again after
/// 1 s (Linux TCP_TIMEOUT_INIT), the server its SYN-ACK too.
const HALF_OPEN_IDLE_NS: i64 = 1_000_000_000;

/// Room made at the start for flows and tombstones: growing a large table means copying it
/// into memory touched for the first time, twice over. Untouched room costs address space only
/// (the tombstones' slab is filled from its start).
const LIVE_CAPACITY: usize = 16 * 1024;
const FINISHED_CAPACITY: usize = MAX_TOMBSTONES + MAX_TOMBSTONES / 8;

impl Default for FlowTable {
    fn default() -> Self {
        FlowTable {
            live: LiveFlows::with_capacity(LIVE_CAPACITY),
            finished: Tombstones::with_capacity(FINISHED_CAPACITY),
            closing: VecDeque::new(),
            live_limit: MAX_LIVE_FLOWS,
            finished_limit: MAX_TOMBSTONES,
            retired_early: 0,
            forgotten_early: 0,
            finished_forgotten_early: 0,
        }
    }
}

/// What a half-open connection's record knew of its SYN, from its tombstone: the client's ISN
/// (the SYN took one sequence number) and that one SYN was sent, at the flow's last packet.
fn restore_syn(conn: &mut crate::flow::Connection, tombstone: &Tombstone) {
    let client = crate::flow::Side::Client.index();
    if conn.base_seq[client].is_some() || !tombstone.flags.get(TombstoneFlags::NEXT_SEQ_KNOWN, client) {
        return;
    }
    conn.base_seq[client] = Some(tombstone.next_seq[client].wrapping_sub(1));
    conn.syn_count = conn.syn_count.max(1);
    conn.syn_time_ns.set_if_none(tombstone.last_time_ns);
}

fn is_half_open(state: ConnState) -> bool {
    matches!(state, ConnState::SynSent | ConnState::SynReceived)
}

impl FlowTable {
    /// The table of a run that will not be continued: only its counts of what it set aside,
    /// for the warnings (its flows and tombstones are tens of MB a report has no use for).
    pub fn counts_only(self) -> FlowTable {
        FlowTable {
            retired_early: self.retired_early,
            forgotten_early: self.forgotten_early,
            finished_forgotten_early: self.finished_forgotten_early,
            ..FlowTable::default()
        }
    }

    /// The flow of `key`, brought back from its tombstone (and its record from the store) if
    /// it had one.
    pub fn get_mut<C: Counter>(&mut self, key: &FlowKey, store: &mut ConnectionStore<C>) -> Option<&mut Flow> {
        self.get_mut_hashed(key, key.hash64(), store)
    }

    /// `get_mut` with the key's hash (`FlowKey::hash64`) worked out by the caller.
    pub fn get_mut_hashed<C: Counter>(&mut self, key: &FlowKey, hash: u64, store: &mut ConnectionStore<C>) -> Option<&mut Flow> {
        if let Some(at) = self.live.place(key, hash) {
            return self.live.flows.get_mut(at);
        }
        let tombstone = self.finished.remove_hashed(key, hash)?;
        let slot = store.revive(&tombstone.record, key, tombstone.client_is_low(), tombstone.state, tombstone.last_time_ns);
        if is_half_open(tombstone.state) {
            // Set aside during a flood (`relieve_pressure`): the record must still know
            // its SYN, so that the same SYN again is a retransmission, not a new connection.
            restore_syn(store.get_mut(slot), &tombstone);
        }
        let at = self.live.insert(*key, hash, tombstone.into_flow(slot));
        // Back in the hot table, finished: the next sweeps retire it again.
        self.closing.push_back(Closing { key: *key, since: tombstone.last_time_ns, place: at as u32 });
        self.live.flows.get_mut(at)
    }

    /// The flow of `key` if it is in the hot table, without bringing back a tombstone (what an
    /// ICMP error looks up: it never revives a finished connection).
    pub fn live_mut(&mut self, key: &FlowKey) -> Option<&mut Flow> {
        self.live.get_mut(key)
    }

    /// Puts a new connection's flow in the hot table. `get_mut` has already brought back
    /// any tombstone of `key`, so there is none to remove.
    pub fn insert(&mut self, key: FlowKey, flow: Flow) {
        self.insert_hashed(key, key.hash64(), flow);
    }

    /// `insert` with the key's hash (`FlowKey::hash64`) worked out by the caller; returns the
    /// flow in its place.
    pub fn insert_hashed(&mut self, key: FlowKey, hash: u64, flow: Flow) -> &mut Flow {
        let at = self.live.insert(key, hash, flow);
        &mut self.live.flows[at]
    }

    pub fn remove(&mut self, key: &FlowKey) {
        self.live.remove(key);
        self.finished.remove(key);
    }

    /// How many flows in the hot table are in each state.
    pub fn live_states(&self) -> Vec<(&'static str, usize)> {
        let mut counts: Vec<(&'static str, usize)> = Vec::new();
        for flow in self.live.values() {
            match counts.iter_mut().find(|(name, _)| *name == flow.state.slug()) {
                Some((_, n)) => *n += 1,
                None => counts.push((flow.state.slug(), 1)),
            }
        }
        counts.sort();
        counts
    }

    /// Flows in the hot table (not tombstones).
    pub fn live_len(&self) -> usize {
        self.live.len()
    }

    /// Tombstones of finished flows.
    pub fn tombstones_len(&self) -> usize {
        self.finished.len()
    }

    /// Notes that the flow of `key` (of hash `hash`) just finished (CLOSED or RESET) at `time_ns`.
    pub fn note_finished(&mut self, key: FlowKey, hash: u64, time_ns: i64) {
        let place = self.live.place(&key, hash).map_or(u32::MAX, |at| at as u32);
        self.closing.push_back(Closing { key, since: time_ns, place });
    }

    /// Moves finished flows idle for `CLOSED_GRACE_NS` to tombstones; the store retires their
    /// records. Looks only at flows noted finished, so it costs what finished since the last sweep.
    pub fn sweep_finished_flows<C: Counter>(&mut self, store: &mut ConnectionStore<C>, now_ns: i64) {
        while let Some(&Closing { key, since, place }) = self.closing.front() {
            if now_ns - since <= CLOSED_GRACE_NS {
                break;
            }
            self.prefetch_closing(store);
            self.closing.pop_front();
            let mut late_packet = None;
            let removed = self.live.remove_if(&key, |flow| {
                if now_ns - flow.last_time_ns <= CLOSED_GRACE_NS && flow.state.is_over() {
                    late_packet = Some(flow.last_time_ns);
                }
                // Not over: a new connection took the 4-tuple.
                flow.state.is_over() && late_packet.is_none()
            });
            if let Some(last_time_ns) = late_packet {
                // A late packet came: look again once the grace has passed.
                self.closing.push_back(Closing { key, since: last_time_ns, place });
            }
            let Some(at) = removed else { continue };
            let flow = self.live.at(at);
            let record = store.retire(flow.slot(), now_ns);
            self.finished.insert(key, Tombstone::of(flow, record, flow.state));
        }
    }

    /// The sweep reads each finished flow and its record when they have left the caches: while
    /// it retires one, it asks for the flow `FLOW_AHEAD` places on in the queue (the fields it
    /// reads) and the record of the one `RECORD_AHEAD` on (whose flow it asked for before).
    fn prefetch_closing<C: Counter>(&self, store: &ConnectionStore<C>) {
        const FLOW_AHEAD: usize = 4;
        const RECORD_AHEAD: usize = 2;
        let flow_at = |ahead: usize| self.closing.get(ahead).and_then(|c| self.live.flows.get(c.place as usize));
        if let Some(flow) = flow_at(FLOW_AHEAD) {
            prefetch(&flow.conn);
            prefetch(&flow.last_time_ns);
            for d in &flow.direction {
                prefetch(&d.next_seq);
                prefetch(&d.fin_seen);
            }
        }
        if let Some(flow) = flow_at(RECORD_AHEAD) {
            store.prefetch(flow.slot());
        }
    }

    /// Forgets the flows that `is_forgotten` says are done (never answered, idle for minutes);
    /// looks at every flow, so it runs seldom.
    pub fn sweep_forgotten_flows<C: Counter>(&mut self, store: &mut ConnectionStore<C>, now_ns: i64) {
        self.live.retain(|_, flow| {
            let forgotten = is_forgotten(flow.last_time_ns, flow.state, now_ns) && !flow.state.is_over();
            if forgotten {
                store.retire(flow.slot(), now_ns);
            }
            !forgotten
        });
    }

    /// Keeps the hot table and the tombstones near their limits under a flood of half-open
    /// connections: over `MAX_LIVE_FLOWS` flows, half-open ones become tombstones (their records
    /// retired as if `LINGER_NS` had passed without another packet), those idle for `HALF_OPEN_IDLE_NS` first, then
    /// all, until half the limit is free; over `MAX_TOMBSTONES` tombstones, half-open ones are
    /// forgotten, then the oldest down to three quarters of the limit. Each check scans the
    /// table, so the next one waits until it has grown by half a limit (flows) or a quarter
    /// (tombstones) again: the cost stays in proportion to the connections.
    pub fn relieve_pressure<C: Counter>(&mut self, store: &mut ConnectionStore<C>, now_ns: i64) {
        if self.live.len() > self.live_limit {
            let finished = &mut self.finished;
            let mut retired = 0u64;
            for min_idle in [HALF_OPEN_IDLE_NS, 0] {
                let mut over = self.live.len().saturating_sub(MAX_LIVE_FLOWS / 2);
                if over == 0 {
                    break;
                }
                self.live.retain(|key, flow| {
                    let goes = over > 0 && is_half_open(flow.state) && now_ns - flow.last_time_ns >= min_idle;
                    if goes {
                        over -= 1;
                        retired += 1;
                        // Judged as when it would have been forgotten, had nothing come later.
                        let record = store.retire(flow.slot(), flow.last_time_ns.saturating_add(LINGER_NS));
                        finished.insert(*key, Tombstone::of(flow, record, flow.state));
                    }
                    !goes
                });
            }
            self.retired_early += retired;
            self.live_limit = (self.live.len() + MAX_LIVE_FLOWS / 2).max(MAX_LIVE_FLOWS);
        }
        if self.finished.len() > self.finished_limit {
            let before = self.finished.len();
            self.finished.retain(|_, t| !is_half_open(t.state));
            self.forgotten_early += (before - self.finished.len()) as u64;
            self.forget_oldest_tombstones(MAX_TOMBSTONES * 3 / 4);
            // Now at most three quarters of the limit: the next scan waits for a quarter more.
            self.finished_limit = MAX_TOMBSTONES;
        }
    }

    /// Forgets the oldest tombstones (by last packet) beyond `keep`, at most one scan.
    pub fn forget_oldest_tombstones(&mut self, keep: usize) {
        let Some(over) = self.finished.len().checked_sub(keep).filter(|&n| n > 0) else { return };
        let mut times: Vec<i64> = self.finished.values().map(|t| t.last_time_ns).collect();
        let (_, &mut cutoff, _) = times.select_nth_unstable(over - 1);
        let mut left = over;
        self.finished.retain(|_, t| {
            let goes = left > 0 && t.last_time_ns <= cutoff;
            left -= usize::from(goes);
            !goes
        });
        self.finished_forgotten_early += (over - left) as u64;
    }

    /// Finalises the `n` flows idle longest: their records are retired, the flows forgotten
    /// (no tombstone: that would be memory again). Returns how many.
    pub fn evict_idlest<C: Counter>(&mut self, store: &mut ConnectionStore<C>, n: usize, now_ns: i64) -> usize {
        let mut idle: Vec<(i64, FlowKey)> = self.live.iter().map(|(k, f)| (f.last_time_ns, *k)).collect();
        let n = n.min(idle.len());
        if n == 0 {
            return 0;
        }
        idle.select_nth_unstable_by_key(n - 1, |(t, _)| *t);
        for (_, key) in idle.iter().take(n) {
            if let Some(at) = self.live.remove(key) {
                store.retire(self.live.at(at).slot(), now_ns);
            }
        }
        n
    }

    /// Forgets the tombstones that `is_forgotten` says are done.
    pub fn sweep_finished(&mut self, now_ns: i64) {
        self.finished.retain(|_, t| !is_forgotten(t.last_time_ns, t.state, now_ns));
    }

    /// Every flow whose record the store kept, in no particular order (a tombstone comes back
    /// as a flow on its record's slot), and the table of the tombstones of dropped records
    /// (with the counts of flows set aside or forgotten early).
    pub fn into_flows(self) -> (Vec<(FlowKey, Flow)>, FlowTable) {
        let mut dropped = FlowTable {
            retired_early: self.retired_early,
            forgotten_early: self.forgotten_early,
            finished_forgotten_early: self.finished_forgotten_early,
            ..FlowTable::default()
        };
        let mut flows: Vec<(FlowKey, Flow)> = self.live.into_pairs();
        for (key, t) in self.finished.into_pairs() {
            match t.record.slot() {
                Some(slot) => flows.push((key, t.into_flow(slot))),
                None => {
                    dropped.finished.insert(key, t);
                }
            }
        }
        (flows, dropped)
    }

    /// Moves the records' slots: `renumbered` holds (old slot, new slot) of every record a
    /// flow or tombstone refers to.
    pub fn renumber(&mut self, renumbered: &[(usize, usize)]) {
        if renumbered.is_empty() {
            return;
        }
        let map: FxHashMap<usize, usize> = renumbered.iter().copied().collect();
        self.live.for_each_mut(|flow| {
            if let Some(&slot) = map.get(&flow.slot()) {
                flow.set_slot(slot);
            }
        });
        self.finished.for_each_mut(|t| {
            if let Some(slot) = t.record.slot() {
                if let Some(&to) = map.get(&slot) {
                    t.record.renumber(to);
                }
            }
        });
    }

    /// Takes over the tombstones of dropped records of the capture that came next (their ids
    /// moved by `id_of`); they replace what this table had on the same 4-tuple.
    pub fn adopt_tombstones(&mut self, later: FlowTable, id_of: impl Fn(u64) -> u64) {
        self.retired_early += later.retired_early;
        self.forgotten_early += later.forgotten_early;
        self.finished_forgotten_early += later.finished_forgotten_early;
        for (key, mut t) in later.finished.into_pairs() {
            t.record.id = id_of(t.record.id);
            self.live.remove(&key);
            self.finished.insert(key, t);
        }
    }

    /// At the end of a merge: counts the records tombstones still keep (no merge can join them
    /// any more), retires finished flows past their grace and forgets what is done.
    pub fn settle<C: Counter>(&mut self, store: &mut ConnectionStore<C>, now_ns: i64) {
        self.finished.for_each_mut(|t| {
            if let Some(slot) = t.record.slot() {
                let tallied = store.fold(slot, now_ns);
                t.record.fold(tallied);
            }
        });
        let done: Vec<FlowKey> = self
            .live
            .iter()
            .filter(|(_, f)| f.state.is_over() && now_ns - f.last_time_ns > CLOSED_GRACE_NS)
            .map(|(k, _)| *k)
            .collect();
        for key in done {
            if let Some(at) = self.live.remove(&key) {
                let flow = self.live.at(at);
                let record = store.retire(flow.slot(), now_ns);
                self.finished.insert(key, Tombstone::of(flow, record, flow.state));
            }
        }
        self.sweep_forgotten_flows(store, now_ns);
        self.sweep_finished(now_ns);
    }

    /// The record slots the hot table refers to.
    pub fn live_slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.live.values().map(|f| f.slot())
    }
}

/// An established connection silent this long is dead by the kernel's own keepalive: the
/// first probe after net.ipv4.tcp_keepalive_time (7200 s), then net.ipv4.tcp_keepalive_probes
/// (9) unanswered probes net.ipv4.tcp_keepalive_intvl (75 s) apart (Linux v6.6
/// net/ipv4/tcp_timer.c: tcp_keepalive_timer()). Without keepalive the kernel keeps it; a
/// capture cannot tell, and memory must not grow with every silent connection.
pub const ESTABLISHED_IDLE_NS: i64 = (7200 + 9 * 75) * 1_000_000_000;

/// A connection that is over (or was never answered) and idle for `LINGER_NS`, or established
/// and idle for `ESTABLISHED_IDLE_NS`, is forgotten: a later segment on its 4-tuple starts a
/// new connection.
pub fn is_forgotten(last_time_ns: i64, state: ConnState, now_ns: i64) -> bool {
    let idle = now_ns - last_time_ns;
    match state {
        ConnState::Established | ConnState::Closing => idle > ESTABLISHED_IDLE_NS,
        _ => idle > LINGER_NS,
    }
}
