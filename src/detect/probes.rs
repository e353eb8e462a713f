//! Connections that are one client SYN and nothing more from the client: what a SYN flood
//! (spoofed sources never answer the SYN-ACK) or a port scan leaves behind. A real client's
//! kernel sends its SYN again when no SYN-ACK comes (Linux v6.6 net/ipv4/tcp_timer.c:
//! tcp_retransmit_timer(), net.ipv4.tcp_syn_retries) and answers a SYN-ACK with an ACK or
//! an RST; these do neither.
//!
//! Counted in aggregate, in tables of bounded size, so that millions of them cost no record each.

use std::net::IpAddr;

use rustc_hash::FxHashMap;

use crate::flow::{Connection, Endpoint, FrameRef, Side};

/// Distinct source addresses and target endpoints counted one by one; beyond this many, the
/// count says "at least".
pub const MAX_DISTINCT: usize = 65_536;
/// First frames kept as evidence.
const MAX_FRAMES: usize = 6;

/// Is this connection one client SYN, never followed by anything else from the client?
pub fn is_one_syn(c: &Connection) -> bool {
    let client = &c.counts[Side::Client.index()];
    !c.partial && c.syn_count == 1 && client.packets == 1 && c.handshake_ack_time_ns.get().is_none()
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct OneSynTally {
    pub connections: u64,
    /// Of them, how many the server answered with a SYN-ACK, and how many with an RST.
    pub answered_synack: u64,
    pub answered_rst: u64,
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    sources: FxHashMap<IpAddr, u64>,
    /// Connections from sources beyond `MAX_DISTINCT`.
    pub from_uncounted_sources: u64,
    targets: FxHashMap<Endpoint, u64>,
    pub to_uncounted_targets: u64,
    /// The earliest connections' SYN frames, in file order.
    pub frames: Vec<FrameRef>,
}

impl OneSynTally {
    pub fn add(&mut self, c: &Connection) {
        self.connections += 1;
        let server = &c.counts[Side::Server.index()];
        if c.synack_count > 0 {
            self.answered_synack += 1;
        } else if server.rst {
            self.answered_rst += 1;
        }
        self.first_ns = Some(self.first_ns.map_or(c.first_time_ns, |t| t.min(c.first_time_ns)));
        self.last_ns = Some(self.last_ns.map_or(c.first_time_ns, |t| t.max(c.first_time_ns)));
        if !count_in(&mut self.sources, c.client.ip) {
            self.from_uncounted_sources += 1;
        }
        if !count_in(&mut self.targets, c.server) {
            self.to_uncounted_targets += 1;
        }
        self.keep_frame(c.first);
    }

    /// Keeps the `MAX_FRAMES` earliest SYN frames, whatever order connections are counted in.
    fn keep_frame(&mut self, frame: FrameRef) {
        if self.frames.len() == MAX_FRAMES && self.frames.last().is_some_and(|&last| last <= frame) {
            return;
        }
        let at = self.frames.partition_point(|&f| f < frame);
        self.frames.insert(at, frame);
        self.frames.truncate(MAX_FRAMES);
    }

    pub fn merge(&mut self, other: &OneSynTally) {
        self.connections += other.connections;
        self.answered_synack += other.answered_synack;
        self.answered_rst += other.answered_rst;
        self.first_ns = [self.first_ns, other.first_ns].into_iter().flatten().min();
        self.last_ns = [self.last_ns, other.last_ns].into_iter().flatten().max();
        for (&ip, &n) in &other.sources {
            if !add_in(&mut self.sources, ip, n) {
                self.from_uncounted_sources += n;
            }
        }
        self.from_uncounted_sources += other.from_uncounted_sources;
        for (&t, &n) in &other.targets {
            if !add_in(&mut self.targets, t, n) {
                self.to_uncounted_targets += n;
            }
        }
        self.to_uncounted_targets += other.to_uncounted_targets;
        for &f in &other.frames {
            self.keep_frame(f);
        }
    }

    /// Distinct source addresses, and whether there were more than could be counted.
    pub fn sources(&self) -> (usize, bool) {
        (self.sources.len(), self.from_uncounted_sources > 0)
    }

    /// The sources with the most one-SYN connections, most first (ties by address).
    pub fn top_sources(&self, n: usize) -> Vec<(IpAddr, u64)> {
        top(&self.sources, n)
    }

    /// Target endpoints with their one-SYN connections, most first (ties by endpoint).
    pub fn targets(&self, n: usize) -> Vec<(Endpoint, u64)> {
        top(&self.targets, n)
    }

    /// Distinct target endpoints, and whether there were more than could be counted.
    pub fn target_count(&self) -> (usize, bool) {
        (self.targets.len(), self.to_uncounted_targets > 0)
    }
}

/// Adds one to `key`'s count; false when the table is full and `key` is not in it.
fn count_in<K: std::hash::Hash + Eq>(table: &mut FxHashMap<K, u64>, key: K) -> bool {
    add_in(table, key, 1)
}

fn add_in<K: std::hash::Hash + Eq>(table: &mut FxHashMap<K, u64>, key: K, n: u64) -> bool {
    if let Some(count) = table.get_mut(&key) {
        *count += n;
        return true;
    }
    if table.len() >= MAX_DISTINCT {
        return false;
    }
    table.insert(key, n);
    true
}

fn top<K: Copy + Ord>(table: &FxHashMap<K, u64>, n: usize) -> Vec<(K, u64)> {
    let mut all: Vec<(K, u64)> = table.iter().map(|(&k, &v)| (k, v)).collect();
    all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(n);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_distinct_sources_stop_at_the_cap_and_say_so() {
        let mut t = OneSynTally::default();
        for i in 0..(MAX_DISTINCT as u32 + 10) {
            assert_eq!(count_in(&mut t.sources, IpAddr::from(i.to_be_bytes())), i < MAX_DISTINCT as u32);
        }
        assert_eq!(t.sources.len(), MAX_DISTINCT);
    }

    #[test]
    fn test_top_is_by_count_then_key() {
        let mut table = FxHashMap::default();
        for (k, n) in [(3u8, 5u64), (1, 5), (2, 9)] {
            add_in(&mut table, k, n);
        }
        assert_eq!(top(&table, 2), vec![(2, 9), (1, 5)]);
    }
}
