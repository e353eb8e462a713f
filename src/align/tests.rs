//! Alignment of synthetic captures of one path: a client's connections pass point A (the
//! proxy's side), cross a middle hop that loses, reorders and translates (NAT), and pass point
//! B (the server's side), whose clock runs ahead and drifts. The truth is what the generator
//! lost.

use std::net::{IpAddr, Ipv4Addr};

use super::conns::Dir;
use super::report::assemble;
use super::sighting::{MatchKey, PointRead, Sighting};
use super::*;
use crate::decode::flags;
use crate::flow::{Endpoint, FrameRef};

const START: i64 = 1_700_000_000_000_000_000;

struct World {
    offset_ns: i64,
    drift: f64,
    /// Source ports rewritten between the points (NAT).
    nat: bool,
    /// Extra delay of every `reorder`-th packet: later packets overtake it.
    reorder: u64,
    rng: u64,
    a: Vec<Sighting>,
    b: Vec<Sighting>,
    /// Frames at the sending point of packets lost between the points, with their direction.
    lost: Vec<(usize, FrameRef, Dir)>,
    sent: u64,
    /// How long each capture ran before its first packet and after its last.
    margin_ns: i64,
    /// IPv6: no IP ID (every packet's is 0, RFC 8200 §3 has none outside fragments).
    ipv6: bool,
}

fn ep(host: u8, port: u16) -> Endpoint {
    Endpoint { ip: IpAddr::V4(Ipv4Addr::new(10, 0, host, 1)), port }
}

fn ep6(host: u8, port: u16) -> Endpoint {
    Endpoint { ip: IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, u16::from(host), 0, 0, 0, 1)), port }
}

impl World {
    fn new(offset_ns: i64, drift: f64, nat: bool) -> World {
        World { offset_ns, drift, nat, reorder: 0, rng: 7, a: Vec::new(), b: Vec::new(), lost: Vec::new(), sent: 0, margin_ns: 10_000_000_000, ipv6: false }
    }

    fn random(&mut self, below: u64) -> u64 {
        self.rng = self.rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.rng >> 33) % below
    }

    fn b_clock(&self, t: i64) -> i64 {
        t + self.offset_ns + (self.drift * (t - START) as f64) as i64
    }

    /// One packet of connection (client port `port`) sent at true time `t`, `dir`, lost between
    /// the points when `lose`.
    #[allow(clippy::too_many_arguments)]
    fn packet(&mut self, t: i64, port: u16, dir: Dir, key: MatchKey, lose: bool) {
        self.sent += 1;
        // No two packets at one instant: the truth names packets by their time.
        let t = t + (self.sent % 997) as i64;
        let mut delay = 150_000 + self.random(300_000) as i64;
        if self.reorder > 0 && self.sent.is_multiple_of(self.reorder) {
            delay += 2_000_000;
        }
        let ep = |host: u8, port: u16| if self.ipv6 { ep6(host, port) } else { ep(host, port) };
        let key = if self.ipv6 { MatchKey { ip_id: 0, ..key } } else { key };
        let (client_a, server) = (ep(0, port), ep(1, 80));
        let client_b = if self.nat { ep(2, port.wrapping_add(1000)) } else { client_a };
        let (at_a, at_b) = match dir {
            Dir::ClientToServer => (t, t + delay),
            Dir::ServerToClient => (t + delay, t),
        };
        let (src_a, dst_a, src_b, dst_b) = match dir {
            Dir::ClientToServer => (client_a, server, client_b, server),
            Dir::ServerToClient => (server, client_a, server, client_b),
        };
        let digest = 1 + key.len;
        let a = Sighting { time_ns: at_a, at: FrameRef { file: 0, frame: 0 }, src: src_a, dst: dst_a, vlan: 0, key, digest };
        let b = Sighting { time_ns: self.b_clock(at_b), at: FrameRef { file: 0, frame: 0 }, src: src_b, dst: dst_b, vlan: 0, key, digest };
        // The point the packet passes first keeps it; lost, the other never sees it.
        let sender_first = dir == Dir::ClientToServer;
        match (lose, sender_first) {
            (false, _) => {
                self.a.push(a);
                self.b.push(b);
            }
            (true, true) => {
                self.a.push(a);
                self.lost.push((0, FrameRef { file: 0, frame: at_a as u64 }, dir));
            }
            (true, false) => {
                self.b.push(b);
                self.lost.push((1, FrameRef { file: 0, frame: self.b_clock(at_b) as u64 }, dir));
            }
        }
    }

    /// A connection: handshake, a request, an answer, FINs. `lose(n)`: whether its n-th packet
    /// is lost between the points. The SYN-ACK carries IP ID 0, as Linux sends it
    /// (ip_build_and_send_pkt()), and a lost one is sent again, the same.
    fn connection(&mut self, t: i64, port: u16, lose: &dyn Fn(usize) -> bool) {
        let (c, s) = (1000u32 + u32::from(port), 5000u32 + u32::from(port));
        let id = port.wrapping_mul(7);
        let k = |seq, ack, len, ip_id, flags| MatchKey { seq, ack, len, ip_id, flags };
        let ms = 1_000_000i64;
        self.packet(t, port, Dir::ClientToServer, k(c, 0, 0, id, flags::SYN), lose(0));
        let mut at = t + ms;
        self.packet(at, port, Dir::ServerToClient, k(s, c + 1, 0, 0, flags::SYN | flags::ACK), lose(1));
        if lose(1) {
            at += 1000 * ms;
            self.packet(at, port, Dir::ServerToClient, k(s, c + 1, 0, 0, flags::SYN | flags::ACK), false);
        }
        self.packet(at + ms, port, Dir::ClientToServer, k(c + 1, s + 1, 0, id + 1, flags::ACK), lose(2));
        self.packet(at + 2 * ms, port, Dir::ClientToServer, k(c + 1, s + 1, 100, id + 2, flags::ACK | flags::PSH), lose(3));
        self.packet(at + 5 * ms, port, Dir::ServerToClient, k(s + 1, c + 101, 500, 7, flags::ACK | flags::PSH), lose(4));
        self.packet(at + 6 * ms, port, Dir::ClientToServer, k(c + 101, s + 501, 0, id + 3, flags::ACK | flags::FIN), lose(5));
        self.packet(at + 7 * ms, port, Dir::ServerToClient, k(s + 501, c + 102, 0, 8, flags::ACK | flags::FIN), lose(6));
    }

    /// Each point's sightings in its time order, numbered as frames; the lost packets' frames.
    fn run(mut self, options: Options) -> (Alignment, Vec<(usize, FrameRef, Dir)>) {
        let numbered = |list: &mut Vec<Sighting>, lost: &mut Vec<(usize, FrameRef, Dir)>, side: usize| {
            list.sort_by_key(|s| s.time_ns);
            for (i, s) in list.iter_mut().enumerate() {
                s.at.frame = i as u64 + 1;
                for l in lost.iter_mut().filter(|l| l.0 == side && l.1.frame == s.time_ns as u64) {
                    l.1.frame = i as u64 + 1;
                }
            }
        };
        let mut lost = std::mem::take(&mut self.lost);
        numbered(&mut self.a, &mut lost, 0);
        numbered(&mut self.b, &mut lost, 1);
        // Each capture runs a little before the first packet and after the last.
        let read = |list: &[Sighting]| PointRead {
            first_ns: list.first().map(|s| s.time_ns - self.margin_ns),
            last_ns: list.last().map(|s| s.time_ns + self.margin_ns),
            tcp_packets: list.len() as u64,
        };
        let reads = [read(&self.a), read(&self.b)];
        let (a, b) = (self.a.clone(), self.b.clone());
        let mut fallback = |pa: &[Sighting], pb: &[Sighting]| {
            super::matcher::offset_from_stream(pa, b.iter().copied(), true).or_else(|| super::matcher::offset_from_stream(pb, a.iter().copied(), false))
        };
        let mut streams = [Stream::of(self.a), Stream::of(self.b)];
        let m = align_streams(&mut streams, options, &mut fallback);
        lost.sort();
        (assemble(m, reads), lost)
    }
}

fn same(found: &[(usize, FrameRef, Dir)], lost: &[(usize, FrameRef, Dir)]) {
    let extra: Vec<_> = found.iter().filter(|f| !lost.contains(f)).take(5).collect();
    let missing: Vec<_> = lost.iter().filter(|l| !found.contains(l)).take(5).collect();
    assert!(extra.is_empty() && missing.is_empty(), "{} listed, {} lost; listed, not lost: {extra:?}; lost, not listed: {missing:?}", found.len(), lost.len());
}

fn vanished(al: &Alignment) -> Vec<(usize, FrameRef, Dir)> {
    let mut v: Vec<_> = al.connections.iter().flat_map(|c| c.vanished.iter().map(|v| (v.seen_at, v.packet.at, v.packet.dir))).collect();
    v.sort();
    v
}

/// A hundred connections a second for `seconds`, the n-th packet of every `every`-th connection
/// lost when `lose(conn, n)`.
fn traffic(world: &mut World, seconds: i64, lose: impl Fn(u16, usize) -> bool) {
    for i in 0..(seconds * 100) as u16 {
        let t = START + i64::from(i) * 10_000_000;
        world.connection(t, 20000 + i, &|n| lose(i, n));
    }
}

#[test]
fn test_align_offset_and_drift_recovered_within_a_millisecond() {
    let mut world = World::new(2_500_000_000, 50e-6, false);
    traffic(&mut world, 120, |_, _| false);
    let (al, _) = world.run(Options::default());
    let fit = al.fit.as_ref().unwrap();
    assert!(fit.first_is_client_side);
    for t in [START, START + 60_000_000_000, START + 119_000_000_000] {
        let truth = 2_500_000_000.0 + 50e-6 * (t - START) as f64;
        assert!((fit.offset_at(t) - truth).abs() < 1_000_000.0, "at {t}: {} vs {truth}", fit.offset_at(t));
    }
    assert!((fit.drift - 50e-6).abs() < 1e-6, "drift {}", fit.drift);
    assert_eq!(al.matched, al.packets[0]);
    assert_eq!(al.vanished, [0, 0]);
}

#[test]
fn test_align_loss_each_way_listed_where_it_vanished() {
    let mut world = World::new(2_500_000_000, 50e-6, false);
    // Every 7th connection loses its request (toward the server), every 11th its answer.
    traffic(&mut world, 30, |i, n| (i % 7 == 3 && n == 3) || (i % 11 == 5 && n == 4) || (i % 13 == 1 && n == 0));
    let (al, lost) = world.run(Options::default());
    assert!(!lost.is_empty());
    same(&vanished(&al), &lost);
    for c in &al.connections {
        for v in &c.vanished {
            let expected_at = if v.packet.dir == Dir::ClientToServer { 0 } else { 1 };
            assert_eq!(v.seen_at, expected_at);
        }
    }
    let lost_c2s = lost.iter().filter(|l| l.2 == Dir::ClientToServer).count() as u64;
    assert_eq!(al.loss_per_second.iter().map(|s| s.by_dir[0]).sum::<u64>(), lost_c2s);
}

#[test]
fn test_align_nat_ports_still_match() {
    let mut world = World::new(-300_000_000, 0.0, true);
    traffic(&mut world, 10, |i, n| i % 5 == 0 && n == 2);
    let (al, lost) = world.run(Options::default());
    assert!(al.translated);
    same(&vanished(&al), &lost);
    let c = &al.connections[0];
    let (a, b) = (&al.conns[0][c.conn[0].unwrap() as usize], &al.conns[1][c.conn[1].unwrap() as usize]);
    assert_eq!(b.client.port, a.client.port + 1000);
}

#[test]
fn test_align_reordering_and_duplicate_ip_ids() {
    let mut world = World::new(1_000_000_000, 0.0, false);
    world.reorder = 3;
    // Lost SYN-ACKs (IP ID 0) are sent again identical: the copy that crossed matches the
    // re-send, and the lost one is listed.
    traffic(&mut world, 20, |i, n| i % 4 == 0 && n == 1);
    let (al, lost) = world.run(Options::default());
    same(&vanished(&al), &lost);
    assert!(lost.iter().all(|l| l.0 == 1 && l.2 == Dir::ServerToClient));
    let fit = al.fit.unwrap();
    assert!((fit.offset_at(START) - 1e9).abs() < 1e6);
}

#[test]
fn test_align_other_point_not_capturing_lists_nothing() {
    let mut world = World::new(0, 0.0, false);
    traffic(&mut world, 10, |_, _| false);
    // The second point's capture covers only the first half.
    let half = START + 5_000_000_000;
    world.b.retain(|s| s.time_ns < half);
    world.margin_ns = 0;
    let (mut al, _) = world.run(Options::default());
    assert_eq!(al.vanished, [0, 0], "{:?}", al.connections.first().map(|c| c.vanished.len()));
    assert!(al.not_expected[0] > 0);
    al.connections.clear();
}

#[test]
fn test_align_ipv6_without_ip_ids_still_pairs_each_packet() {
    let mut world = World::new(-1_200_000_000, 20e-6, false);
    world.ipv6 = true;
    world.reorder = 4;
    traffic(&mut world, 20, |i, n| (i % 6 == 2 && n == 4) || (i % 9 == 1 && n == 1) || (i % 5 == 3 && n == 5));
    let (al, lost) = world.run(Options::default());
    same(&vanished(&al), &lost);
    let fit = al.fit.as_ref().unwrap();
    let truth = -1_200_000_000.0 + 20e-6 * 10e9;
    assert!((fit.offset_at(START + 10_000_000_000) - truth).abs() < 1_000_000.0);
}

#[test]
fn test_align_late_second_capture_far_offset_found_by_scanning() {
    // The second point began capturing 60 s after the first, its clock 10 s ahead: the first
    // packets of the two share nothing, and the offset is beyond the window.
    let mut world = World::new(10_000_000_000, 0.0, false);
    traffic(&mut world, 90, |i, n| i % 10 == 7 && n == 3);
    let late = START + 60_000_000_000 + 10_000_000_000;
    world.b.retain(|s| s.time_ns >= late);
    world.lost.retain(|l| l.0 == 0 || l.1.frame as i64 >= late);
    let (al, _) = world.run(Options { probe: 2_000, ..Options::default() });
    let fit = al.fit.as_ref().unwrap();
    assert!((fit.offset_at(START + 70_000_000_000) - 10e9).abs() < 1_000_000.0, "{}", fit.offset_at(START));
    assert!(al.matched > 10_000);
}

#[test]
fn test_align_segments_cut_otherwise_at_one_point_are_not_vanished() {
    let mut world = World::new(500_000_000, 0.0, false);
    traffic(&mut world, 10, |i, n| i % 50 == 7 && n == 3);
    // The server's answers reach the second point as one segment and the first as two
    // (segmentation offload on the way, or GRO the other way round).
    let mut cut = 0;
    let answers: Vec<Sighting> = world.a.iter().filter(|s| s.key.len == 500 && s.src.port % 10 == 0).copied().collect();
    world.a.retain(|s| !(s.key.len == 500 && s.src.port % 10 == 0));
    for s in answers {
        for (k, part) in [(0u32, 200u32), (200, 300)] {
            let key = MatchKey { seq: s.key.seq.wrapping_add(k), len: part, ip_id: s.key.ip_id.wrapping_add(100 + k as u16), ..s.key };
            world.a.push(Sighting { time_ns: s.time_ns + i64::from(k), key, digest: 0, ..s });
        }
        cut += 1;
    }
    let (al, lost) = world.run(Options::default());
    same(&vanished(&al), &lost);
    assert_eq!(al.resegmented, [2 * cut, cut]);
}

#[test]
fn test_align_segments_cut_otherwise_later_at_one_point_vanished() {
    // The server's answers reach the second point whole; the first sees the same bytes only
    // 300 ms later, cut in two: the whole segment never got through and was sent again smaller
    // (path MTU discovery after a router's error, or the timer), not cut by an offload.
    let mut world = World::new(500_000_000, 0.0, false);
    traffic(&mut world, 10, |i, n| i % 50 == 7 && n == 3);
    let answers: Vec<Sighting> = world.a.iter().filter(|s| s.key.len == 500 && s.src.port % 10 == 0).copied().collect();
    world.a.retain(|s| !(s.key.len == 500 && s.src.port % 10 == 0));
    for s in &answers {
        for (k, part) in [(0u32, 200u32), (200, 300)] {
            let key = MatchKey { seq: s.key.seq.wrapping_add(k), len: part, ip_id: s.key.ip_id.wrapping_add(100 + k as u16), ..s.key };
            world.a.push(Sighting { time_ns: s.time_ns + 300_000_000 + i64::from(k), key, digest: 0, ..*s });
        }
    }
    world.a.sort_by_key(|s| s.time_ns);
    let (al, _) = world.run(Options::default());
    assert_eq!(al.resegmented, [0, 0]);
    assert!(al.vanished[1] >= answers.len() as u64, "{:?}", al.vanished);
}
