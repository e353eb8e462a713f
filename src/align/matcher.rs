//! Matches the packets of two capture points as they stream past, in one pass.
//!
//! The two streams are merged in time order, the second point's times moved onto the first
//! point's clock by the running offset estimate (`Clock::running_offset`). Each packet looks for
//! its copy among the other point's packets still waiting (same `MatchKey`, digests that agree,
//! the closest in time); found, the pair feeds the clock; not found, it waits. A packet waiting
//! longer than the window (a few seconds) was seen at one point only: it leaves the window as
//! `Unmatched`. Memory holds the window, the connections, and the packets seen at one point.

use std::collections::VecDeque;
use std::net::IpAddr;

use rustc_hash::{FxHashMap, FxHashSet};

use super::clock::Clock;
use super::conns::{Conns, Dir};
use super::sighting::{digests_agree, MatchKey, Sighting};
use crate::flow::FrameRef;

/// Packets seen at one point only kept for the report; beyond, only counted.
pub const MAX_UNMATCHED: usize = 2_000_000;
/// Copies at most this much (plus twice the one-way delay) apart pair as soon as both are seen.
pub const CLOSE_NS: i64 = 50_000_000;

/// A packet seen at one point and not at the other within the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unmatched {
    pub conn: u32,
    pub dir: Dir,
    pub seq: u32,
    pub ack: u32,
    pub len: u32,
    pub flags: u8,
    /// The point's own clock.
    pub time_ns: i64,
    pub at: FrameRef,
}

#[derive(Clone, Copy, Debug)]
struct Waiting {
    s: Sighting,
    conn: u32,
    dir: Dir,
    serial: u64,
    /// On the first point's clock.
    adjusted_ns: i64,
}

/// One point's side of the matcher.
#[derive(Default)]
pub struct Side {
    pub conns: Conns,
    waiting: FxHashMap<MatchKey, Vec<Waiting>>,
    /// Waiting packets in arrival order: (time on the first point's clock, key, serial).
    order: VecDeque<(i64, MatchKey, u64)>,
    pub unmatched: Vec<Unmatched>,
    pub unmatched_dropped: u64,
    /// Per connection, the other point's connection its first matched packet belonged to.
    pub partner: Vec<Option<u32>>,
    /// Per connection, packets matched.
    pub matched: Vec<u32>,
    /// Addresses this point saw in TCP packets.
    pub addresses: FxHashSet<IpAddr>,
    pub packets: u64,
}

impl Side {
    /// The oldest waiting packet, if it arrived before `before_ns`, taken out of the window.
    fn pop_older(&mut self, before_ns: i64) -> Option<Waiting> {
        while let Some(&(t, key, serial)) = self.order.front() {
            if t >= before_ns {
                return None;
            }
            self.order.pop_front();
            let Some(list) = self.waiting.get_mut(&key) else { continue };
            let Some(i) = list.iter().position(|w| w.serial == serial) else { continue };
            let w = list.swap_remove(i);
            if list.is_empty() {
                self.waiting.remove(&key);
            }
            return Some(w);
        }
        None
    }

    /// The waiting packet that is `s`'s copy, closest in time within `tolerance_ns`, taken out.
    fn take_copy(&mut self, s: &Sighting, adjusted_ns: i64, tolerance_ns: i64) -> Option<Waiting> {
        let list = self.waiting.get_mut(&s.key)?;
        let (i, _) = list
            .iter()
            .enumerate()
            .filter(|(_, w)| digests_agree(w.s.digest, s.digest) && (w.adjusted_ns - adjusted_ns).abs() <= tolerance_ns)
            .min_by_key(|(_, w)| (w.adjusted_ns - adjusted_ns).abs())?;
        let w = list.swap_remove(i);
        if list.is_empty() {
            self.waiting.remove(&s.key);
        }
        Some(w)
    }

    fn unmatched(&mut self, w: &Waiting) {
        if self.unmatched.len() >= MAX_UNMATCHED {
            self.unmatched_dropped += 1;
            return;
        }
        let c = &self.conns.list[w.conn as usize];
        self.unmatched.push(Unmatched {
            conn: w.conn,
            dir: w.dir,
            seq: c.relative(w.dir, w.s.key.seq),
            ack: w.s.key.ack,
            len: w.s.key.len,
            flags: w.s.key.flags,
            time_ns: w.s.time_ns,
            at: w.s.at,
        });
    }
}

/// The two points' host pairs (client address, server address) of matched connections.
pub type HostPair = (IpAddr, IpAddr);

pub struct Matcher {
    pub sides: [Side; 2],
    pub clock: Clock,
    window_ns: i64,
    serial: u64,
    pub matched: u64,
    /// (first point's pair, second point's pair) of every matched connection.
    pub host_pairs: FxHashSet<(HostPair, HostPair)>,
    /// A matched connection had another 4-tuple at each point: a NAT between them.
    pub translated: bool,
}

impl Matcher {
    /// `offset_ns`: where to start, second point's clock minus the first's (`coarse_offset`).
    pub fn new(offset_ns: i64, window_ns: i64) -> Matcher {
        Matcher {
            sides: [Side::default(), Side::default()],
            clock: Clock::new(offset_ns),
            window_ns,
            serial: 0,
            matched: 0,
            host_pairs: FxHashSet::default(),
            translated: false,
        }
    }

    /// Where a packet of `side` at `time_ns` of its own clock falls on the first point's clock.
    pub fn adjusted(&self, side: usize, time_ns: i64) -> i64 {
        if side == 0 { time_ns } else { time_ns - self.clock.running_offset() }
    }

    /// The next packet of point `side` (0 or 1), in the merged order (`adjusted`).
    pub fn feed(&mut self, side: usize, s: Sighting) {
        let adjusted = self.adjusted(side, s.time_ns);
        let me = &mut self.sides[side];
        me.packets += 1;
        let (conn, dir) = me.conns.observe(&s);
        if me.partner.len() < me.conns.list.len() {
            me.partner.resize(me.conns.list.len(), None);
            me.matched.resize(me.conns.list.len(), 0);
        }
        if me.addresses.len() < 1 << 16 {
            me.addresses.insert(s.src.ip);
            me.addresses.insert(s.dst.ip);
        }
        self.expire(adjusted - self.window_ns);
        // A copy close in time pairs at once. One further away may be a packet sent twice
        // alike (a SYN-ACK re-sent carries IP ID 0 again, Linux v6.6 net/ipv4/ip_output.c:
        // ip_build_and_send_pkt()) whose closer copy has not come yet: the pair waits, and is
        // made when the packet leaves the window if nothing closer came (`expire`).
        let other = 1 - side;
        if let Some(w) = self.sides[other].take_copy(&s, adjusted, self.close_ns()) {
            let mine = Waiting { s, conn, dir, serial: 0, adjusted_ns: adjusted };
            let (a, b) = if side == 0 { (mine, w) } else { (w, mine) };
            self.paired(a, b);
            return;
        }
        self.serial += 1;
        let w = Waiting { s, conn, dir, serial: self.serial, adjusted_ns: adjusted };
        let me = &mut self.sides[side];
        me.waiting.entry(s.key).or_default().push(w);
        me.order.push_back((adjusted, s.key, self.serial));
    }

    fn paired(&mut self, a: Waiting, b: Waiting) {
        self.matched += 1;
        self.clock.add(a.s.time_ns, b.s.time_ns, a.dir);
        for (side, me, them) in [(0, &a, &b), (1, &b, &a)] {
            let s = &mut self.sides[side];
            s.matched[me.conn as usize] += 1;
            s.partner[me.conn as usize].get_or_insert(them.conn);
        }
        let (ca, cb) = (&self.sides[0].conns.list[a.conn as usize], &self.sides[1].conns.list[b.conn as usize]);
        if self.sides[0].matched[a.conn as usize] == 1 {
            self.host_pairs.insert(((ca.client.ip, ca.server.ip), (cb.client.ip, cb.server.ip)));
            self.translated |= (ca.client, ca.server) != (cb.client, cb.server);
        }
    }

    /// How far apart in time two copies pair at once: a generous bound on the one-way delay
    /// (`CLOSE_NS` beyond twice the mean one-way delay seen lately), well under the second a
    /// re-sent SYN-ACK comes after (RFC 6298 §2.1's initial RTO).
    fn close_ns(&self) -> i64 {
        (CLOSE_NS + 2 * self.clock.running_delay()).min(self.window_ns)
    }

    /// Packets that arrived before `before_ns` leave the window, oldest first: each pairs with
    /// the other point's closest copy still waiting, or is seen at one point only.
    fn expire(&mut self, before_ns: i64) {
        loop {
            let fronts = [0, 1].map(|i| self.sides[i].order.front().map(|f| f.0).filter(|&t| t < before_ns));
            let side = match fronts {
                [None, None] => return,
                [Some(_), None] => 0,
                [None, Some(_)] => 1,
                [Some(a), Some(b)] => usize::from(b < a),
            };
            let Some(w) = self.sides[side].pop_older(before_ns) else { continue };
            match self.sides[1 - side].take_copy(&w.s, w.adjusted_ns, self.window_ns) {
                Some(copy) => {
                    let (a, b) = if side == 0 { (w, copy) } else { (copy, w) };
                    self.paired(a, b);
                }
                None => self.sides[side].unmatched(&w),
            }
        }
    }

    /// Every packet still waiting leaves the window.
    pub fn finish(&mut self) {
        self.expire(i64::MAX);
    }
}

/// A first guess of the offset (second point's clock minus the first's) from the first packets
/// of each point: the median of `t_b - t_a` over the packets whose keys agree. None if none do.
pub fn coarse_offset(a: &[Sighting], b: &[Sighting]) -> Option<i64> {
    let mut times: FxHashMap<MatchKey, Vec<&Sighting>> = FxHashMap::default();
    for s in b {
        times.entry(s.key).or_default().push(s);
    }
    let mut diffs: Vec<i64> = a
        .iter()
        .filter_map(|s| {
            let candidates = times.get(&s.key)?;
            // One key seen more than twice is no evidence (a pure ACK repeated with IP ID 0).
            (candidates.len() <= 2).then_some(())?;
            candidates.iter().find(|c| digests_agree(c.digest, s.digest)).map(|c| c.time_ns - s.time_ns)
        })
        .collect();
    if diffs.is_empty() {
        return None;
    }
    let middle = diffs.len() / 2;
    Some(*diffs.select_nth_unstable(middle).1)
}

/// Matched pairs enough for a first guess of the offset from `offset_from_stream`.
const SCAN_PAIRS: usize = 101;

/// A first guess of the offset when the first packets of the two points share nothing (one
/// capture began long before the other): the median of `t_b - t_a` over the packets of
/// `stream` (of the other point) whose key is one the `probe` holds once. `probe_is_first`:
/// the probe is of the first point. Stops after `SCAN_PAIRS` pairs.
pub fn offset_from_stream(probe: &[Sighting], stream: impl Iterator<Item = Sighting>, probe_is_first: bool) -> Option<i64> {
    let mut once: FxHashMap<MatchKey, Option<&Sighting>> = FxHashMap::default();
    for s in probe {
        once.entry(s.key).and_modify(|seen| *seen = None).or_insert(Some(s));
    }
    let mut diffs = Vec::new();
    for s in stream {
        let Some(Some(p)) = once.get(&s.key) else { continue };
        if !digests_agree(p.digest, s.digest) {
            continue;
        }
        diffs.push(if probe_is_first { s.time_ns - p.time_ns } else { p.time_ns - s.time_ns });
        if diffs.len() >= SCAN_PAIRS {
            break;
        }
    }
    if diffs.is_empty() {
        return None;
    }
    let middle = diffs.len() / 2;
    Some(*diffs.select_nth_unstable(middle).1)
}
