//! What alignment tells, once both streams have passed: the clock fit, and per connection the
//! packets seen at one point and missing at the other (`Vanished`), among those the other point
//! should have seen: it was capturing then, and the connection's hosts are ones whose packets
//! passed both points.

use super::clock::ClockFit;
use super::conns::Conn;
use super::matcher::{Matcher, Unmatched};
use super::sighting::PointRead;

/// A packet one point saw and the other did not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vanished {
    /// The point that saw it (0 or 1); the other missed it.
    pub seen_at: usize,
    pub packet: Unmatched,
}

/// One connection with packets that vanished between the points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathConnection {
    /// Its index in each point's `conns` (None: that point never saw it).
    pub conn: [Option<u32>; 2],
    pub vanished: Vec<Vanished>,
}

/// Packets that vanished in one second of the first point's clock, per direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossSecond {
    pub second: i64,
    pub by_dir: [u64; 2],
}

pub struct Alignment {
    pub fit: Option<ClockFit>,
    /// The estimate the merge ended with (second point minus first), without a fit.
    pub running_offset_ns: i64,
    pub matched: u64,
    pub packets: [u64; 2],
    /// Seen at the point and missing at the other, which should have seen it.
    pub vanished: [u64; 2],
    /// Seen at the point only, where the other was not capturing or the connection's hosts
    /// never passed both points.
    pub not_expected: [u64; 2],
    /// Data seen at one point only whose bytes the other point saw cut otherwise: segmentation
    /// offload (TSO/GSO) on the sender's host, or receive offload (GRO) on the capturing one,
    /// made other packets of the same bytes. Not vanished.
    pub resegmented: [u64; 2],
    /// Packets seen at one point only beyond `MAX_UNMATCHED`: not sorted into either.
    pub uncounted: u64,
    pub translated: bool,
    pub connections: Vec<PathConnection>,
    pub loss_per_second: Vec<LossSecond>,
    /// Each point's connections.
    pub conns: [Vec<Conn>; 2],
    /// Per point, the connections that had a packet matched at the other.
    pub aligned: [Vec<u32>; 2],
    pub reads: [PointRead; 2],
}

/// Sorts what the matcher left into the alignment.
pub fn assemble(mut m: Matcher, reads: [PointRead; 2]) -> Alignment {
    m.finish();
    let fit = m.clock.fit();
    let offset = |t: i64| fit.as_ref().map_or(m.clock.running_offset() as f64, |f| f.offset_at(t));
    // The slowest crossing seen each way: how far from either end of the other's capture a
    // packet must be for its absence to say something.
    let slowest = fit.as_ref().map_or(0.0, |f| f.delays.iter().map(|d| d.max).fold(0.0, f64::max) * 1e9) as i64;
    let on_first_clock = |side: usize, t: i64| if side == 0 { t } else { t - offset(t) as i64 };
    let resegmented_at = resegmented(&m, &on_first_clock, slowest + RESEGMENT_SLACK_NS);
    let mut resegmented_count = [0u64; 2];
    let mut vanished_count = [0u64; 2];
    let mut not_expected = [0u64; 2];
    let mut by_conn: rustc_hash::FxHashMap<(usize, u32), Vec<Vanished>> = Default::default();
    let mut per_second: std::collections::BTreeMap<i64, [u64; 2]> = Default::default();
    for seen_at in 0..2 {
        let other = 1 - seen_at;
        let (Some(first), Some(last)) = (reads[other].first_ns, reads[other].last_ns) else {
            not_expected[seen_at] += m.sides[seen_at].unmatched.len() as u64;
            continue;
        };
        for (i, u) in m.sides[seen_at].unmatched.iter().enumerate() {
            if resegmented_at[seen_at].contains(&i) {
                resegmented_count[seen_at] += 1;
                continue;
            }
            let c = &m.sides[seen_at].conns.list[u.conn as usize];
            // On the other point's clock.
            let t_first = if seen_at == 0 { u.time_ns } else { u.time_ns - offset(u.time_ns) as i64 };
            let t_other = if other == 0 { t_first } else { t_first + offset(t_first) as i64 };
            let capturing = t_other - slowest >= first && t_other + slowest <= last;
            let pair = (c.client.ip, c.server.ip);
            let on_path = m.host_pairs.iter().any(|(a, b)| if seen_at == 0 { *a == pair } else { *b == pair })
                || (!m.translated && !m.host_pairs.is_empty() && m.sides[other].addresses.contains(&c.server.ip) && m.sides[other].addresses.contains(&c.client.ip));
            if !(capturing && on_path) {
                not_expected[seen_at] += 1;
                continue;
            }
            vanished_count[seen_at] += 1;
            by_conn.entry((seen_at, u.conn)).or_default().push(Vanished { seen_at, packet: *u });
            per_second.entry(t_first.div_euclid(1_000_000_000)).or_default()[u.dir as usize] += 1;
        }
    }
    // One entry per connection: a connection seen at both points gathers both points' lists.
    let mut connections: Vec<PathConnection> = Vec::new();
    let mut index: rustc_hash::FxHashMap<(usize, u32), usize> = Default::default();
    let mut keys: Vec<(usize, u32)> = by_conn.keys().copied().collect();
    keys.sort_unstable_by_key(|&(side, conn)| (m.sides[side].conns.list[conn as usize].first_ns, side, conn));
    for key in keys {
        let (side, conn) = key;
        let partner = m.sides[side].partner[conn as usize];
        let slot = partner.and_then(|p| index.get(&(1 - side, p)).copied());
        let list = by_conn.remove(&key).unwrap_or_default();
        match slot {
            Some(i) => connections[i].vanished.extend(list),
            None => {
                let mut pair = [None, None];
                pair[side] = Some(conn);
                pair[1 - side] = partner;
                index.insert(key, connections.len());
                if let Some(p) = partner {
                    index.insert((1 - side, p), connections.len());
                }
                connections.push(PathConnection { conn: pair, vanished: list });
            }
        }
    }
    for c in &mut connections {
        c.vanished.sort_by_key(|v| if v.seen_at == 0 { v.packet.time_ns } else { v.packet.time_ns - offset(v.packet.time_ns) as i64 });
    }
    let aligned = [0, 1].map(|side| {
        m.sides[side].partner.iter().enumerate().filter(|(_, p)| p.is_some()).map(|(i, _)| i as u32).collect()
    });
    let [a, b] = m.sides;
    Alignment {
        running_offset_ns: m.clock.running_offset(),
        fit,
        matched: m.matched,
        packets: [a.packets, b.packets],
        vanished: vanished_count,
        not_expected,
        resegmented: resegmented_count,
        uncounted: a.unmatched_dropped + b.unmatched_dropped,
        translated: m.translated,
        connections,
        loss_per_second: per_second.into_iter().map(|(second, by_dir)| LossSecond { second, by_dir }).collect(),
        conns: [a.conns.list, b.conns.list],
        aligned,
        reads,
    }
}

/// How much later than the slowest crossing the other point may see the bytes of an offload
/// segment: a 64 KB segment leaves the device in about half a millisecond at 1 Gbit/s (45 packets
/// of 1,500 bytes).
const RESEGMENT_SLACK_NS: i64 = 1_000_000;

/// Per point, the indexes (in its `unmatched`) of the data segments whose bytes the other
/// point saw in other segments left unmatched too, in the same connection and direction and
/// at the same moment (within `window` of it, on one clock, `on_first_clock`): one packet of
/// 64 KB at the sender's point (TSO: Linux v6.6 net/ipv4/tcp_output.c: tcp_write_xmit() hands
/// the device segments up to gso_max_size) is several on the wire and at the other point, or
/// the other way round after GRO (net/core/gro.c: dev_gro_receive()). Their sequence numbers are
/// the same at both points (a NAT keeps them). The same bytes seen later, cut smaller, were sent
/// again: the packet seen at one point only vanished (a router that could not forward a
/// full-size packet, and the sender re-sent it smaller after the ICMP error or its timer).
fn resegmented(m: &Matcher, on_first_clock: &dyn Fn(usize, i64) -> i64, window: i64) -> [rustc_hash::FxHashSet<usize>; 2] {
    type Key = (u32, u8);
    // Per point, per (connection, direction): (start, end, index, time on the first point's
    // clock) of unmatched data.
    let ranges = [0, 1].map(|side| {
        let mut by: rustc_hash::FxHashMap<Key, Vec<(u64, u64, usize, i64)>> = Default::default();
        for (i, u) in m.sides[side].unmatched.iter().enumerate() {
            if u.len == 0 {
                continue;
            }
            // Relative numbers are from the same ISN at both points when both saw the handshake;
            // absolute ones (base + relative) are the same at both points in any case.
            let c = &m.sides[side].conns.list[u.conn as usize];
            let start = u64::from(c.base[u.dir as usize].unwrap_or(0).wrapping_add(u.seq));
            by.entry((u.conn, u.dir as u8)).or_default().push((start, start + u64::from(u.len), i, on_first_clock(side, u.time_ns)));
        }
        by
    });
    let mut out = [rustc_hash::FxHashSet::default(), rustc_hash::FxHashSet::default()];
    for side in 0..2 {
        let other = 1 - side;
        for (&(conn, dir), list) in &ranges[side] {
            let Some(partner) = m.sides[side].partner[conn as usize] else { continue };
            let Some(theirs) = ranges[other].get(&(partner, dir)) else { continue };
            for &(start, end, i, t) in list {
                // Covered by the other point's unmatched data of the connection seen at the same
                // moment: merge the ranges that overlap this one, and see whether they leave a hole.
                let mut pieces: Vec<(u64, u64)> =
                    theirs.iter().filter(|r| r.0 < end && r.1 > start && (r.3 - t).abs() <= window).map(|r| (r.0, r.1)).collect();
                pieces.sort_unstable();
                let mut reached = start;
                for (s, e) in pieces {
                    if s > reached {
                        break;
                    }
                    reached = reached.max(e);
                }
                if reached >= end && end > start {
                    out[side].insert(i);
                }
            }
        }
    }
    out
}
