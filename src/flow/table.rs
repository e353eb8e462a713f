//! The table of connections that may still see packets, and what it forgets when.
//!
//! Finished connections (FINs both ways, or an RST) leave the hot table after `CLOSED_GRACE_NS`
//! and become tombstones: a few fields, enough to label a late packet (a FIN or RST that comes
//! after the close) and to tell a new connection on the same 4-tuple from a retransmission,
//! for `LINGER_NS`. A packet on a tombstoned 4-tuple brings the flow back.

use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

use super::connection::{ConnState, Connection};
use super::event::{FrameRef, PacketRole};
use super::key::FlowKey;
use super::seq::SeqNumber;
use super::tracker::{DirectionState, Flow};

/// A finished connection stays in the hot table this long after its last packet: a lost last
/// ACK brings a FIN retransmission after the RTO (at least 200 ms, Linux TCP_RTO_MIN).
pub const CLOSED_GRACE_NS: i64 = 1_000_000_000;
/// A finished or never-answered connection is forgotten after this much capture time without
/// packets: longer than TIME-WAIT (60 s, Linux TCP_TIMEWAIT_LEN) and the SYN-ACK retries
/// (63 s, tcp_synack_retries=5).
pub const LINGER_NS: i64 = 120 * 1_000_000_000;

/// What is kept of a finished connection's state.
#[derive(Clone, Debug)]
struct Tombstone {
    conn: usize,
    last_time_ns: i64,
    next_seq: [Option<SeqNumber>; 2],
    data_seen: [bool; 2],
    fin_seen: [bool; 2],
    last_packet: [Option<(PacketRole, FrameRef, i64)>; 2],
}

impl Tombstone {
    fn of(flow: &Flow) -> Tombstone {
        let [c, s] = &flow.direction;
        Tombstone {
            conn: flow.conn,
            last_time_ns: flow.last_time_ns,
            next_seq: [c.next_seq, s.next_seq],
            data_seen: [c.data_seen, s.data_seen],
            fin_seen: [c.fin_seen, s.fin_seen],
            last_packet: [c.last_packet, s.last_packet],
        }
    }

    fn into_flow(self) -> Flow {
        let direction = |i: usize| DirectionState {
            next_seq: self.next_seq[i],
            data_seen: self.data_seen[i],
            fin_seen: self.fin_seen[i],
            last_packet: self.last_packet[i],
            ..DirectionState::default()
        };
        Flow { conn: self.conn, direction: [direction(0), direction(1)], last_time_ns: self.last_time_ns }
    }
}

#[derive(Default)]
pub struct FlowTable {
    live: FxHashMap<FlowKey, Flow>,
    finished: FxHashMap<FlowKey, Tombstone>,
}

impl FlowTable {
    /// The flow of `key`, brought back from its tombstone if it had one.
    pub fn get_mut(&mut self, key: &FlowKey) -> Option<&mut Flow> {
        match self.live.entry(*key) {
            Entry::Occupied(flow) => Some(flow.into_mut()),
            Entry::Vacant(slot) => {
                let tombstone = self.finished.remove(key)?;
                Some(slot.insert(tombstone.into_flow()))
            }
        }
    }

    pub fn insert(&mut self, key: FlowKey, flow: Flow) {
        self.finished.remove(&key);
        self.live.insert(key, flow);
    }

    pub fn remove(&mut self, key: &FlowKey) {
        self.live.remove(key);
        self.finished.remove(key);
    }

    /// Flows in the hot table (not tombstones).
    pub fn live_len(&self) -> usize {
        self.live.len()
    }

    /// Moves finished flows idle for `CLOSED_GRACE_NS` to tombstones, and forgets flows and
    /// tombstones that `is_forgotten` says are done.
    pub fn sweep(&mut self, connections: &[Connection], now_ns: i64) {
        let finished = &mut self.finished;
        self.live.retain(|key, flow| {
            let conn = &connections[flow.conn];
            if is_forgotten(flow.last_time_ns, conn.state, now_ns) {
                return false;
            }
            if conn.state.is_over() && now_ns - flow.last_time_ns > CLOSED_GRACE_NS {
                finished.insert(*key, Tombstone::of(flow));
                return false;
            }
            true
        });
        self.finished.retain(|_, t| !is_forgotten(t.last_time_ns, connections[t.conn].state, now_ns));
    }

    /// Every flow still remembered, tombstones brought back, in no particular order.
    pub fn into_flows(self) -> impl Iterator<Item = (FlowKey, Flow)> {
        self.live.into_iter().chain(self.finished.into_iter().map(|(key, t)| (key, t.into_flow())))
    }
}

/// A connection that is over (or was never answered) and idle for `LINGER_NS` is forgotten:
/// a later segment on its 4-tuple starts a new connection.
pub fn is_forgotten(last_time_ns: i64, state: ConnState, now_ns: i64) -> bool {
    let lingering = !matches!(state, ConnState::Established | ConnState::Closing);
    lingering && now_ns - last_time_ns > LINGER_NS
}
