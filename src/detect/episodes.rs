//! Episodes: per server endpoint (a listener), its problem connections in time order, split where
//! nothing failed for a while, each reduced to its marks (`super::marks`): its outcome, its
//! symptoms and its facts. The diagnosis's rules count, select and claim over marks here; they
//! never loop over connections. The rules are in docs/diagnosis.md.

use std::net::IpAddr;

use rustc_hash::{FxHashMap, FxHashSet};

use super::digest::{self, Digest, Seed, EPISODE_GAP_NS};
use super::marks::fact_bit;
use super::checks::{Check, Checks};
use super::facts::Fact;
use super::scans::ScanBook;
use super::servers::ServerStats;
use super::timings::Timings;
use crate::flow::{Connection, Endpoint};

/// A SYN or request this close to a span in which its listener's accept queue was full belongs
/// to that queue: a full accept queue drops SYNs too (Linux v6.6 net/ipv4/tcp_input.c:
/// tcp_conn_request(): sk_acceptq_is_full()), and a client's first SYN re-send comes 1 s later.
pub const QUEUE_WINDOW_PAD_NS: i64 = 1_000_000_000;

/// One problem connection, as the rules see it, or several alike (`weight`) whose records
/// were not kept (`digest`).
#[derive(Clone, Copy, Debug)]
pub struct Member {
    /// Where its record is in `Analysis::connections` (`Member::NO_RECORD`: not kept).
    pub index: u32,
    pub id: u64,
    pub first_ns: i64,
    pub last_ns: i64,
    pub marks: u64,
    /// The client's handshake ACK (the earliest of those it stands for).
    pub ack_ns: Option<i64>,
    /// Connections it stands for: 1, more for a merged seed of the digest.
    pub weight: u32,
    /// Which checks held and failed (`checks::Checks::bits`).
    pub checks: u32,
    /// Claimed by a rule that explains it: later rules leave it alone unless they ask for it.
    pub claimed: bool,
}

impl Member {
    pub const NO_RECORD: u32 = u32::MAX;

    /// Where its record is, when it was kept.
    pub fn record(&self) -> Option<usize> {
        (self.index != Member::NO_RECORD).then_some(self.index as usize)
    }

    pub fn has(&self, fact: Fact) -> bool {
        self.marks & fact_bit(fact) != 0
    }
}

/// Which members a rule asks for: all of `all`, at least one of `any` (when not empty), none
/// of `none`, and unclaimed ones only unless `claimed` is set.
#[derive(Clone, Copy, Debug, Default)]
pub struct Filter {
    pub all: u64,
    pub any: u64,
    pub none: u64,
    pub claimed: bool,
}

impl Filter {
    pub fn matches(&self, m: &Member) -> bool {
        (self.claimed || !m.claimed)
            && m.marks & self.all == self.all
            && (self.any == 0 || m.marks & self.any != 0)
            && m.marks & self.none == 0
    }
}

#[derive(Clone, Debug)]
pub struct Episode {
    pub server: Endpoint,
    /// In order of first packet.
    pub members: Vec<Member>,
}

impl Episode {
    pub fn first_ns(&self) -> i64 {
        self.members.iter().map(|m| m.first_ns).min().unwrap_or(0)
    }

    pub fn last_ns(&self) -> i64 {
        self.members.iter().map(|m| m.last_ns).max().unwrap_or(0)
    }

    /// Connections in it (a merged member stands for several).
    pub fn connections(&self) -> u64 {
        self.members.iter().map(|m| u64::from(m.weight)).sum()
    }

    /// Positions of the members that match.
    pub fn select(&self, filter: &Filter) -> Vec<u32> {
        (0..self.members.len() as u32).filter(|&i| self.members.get(i as usize).is_some_and(|m| filter.matches(m))).collect()
    }

    pub fn claim(&mut self, positions: &[u32]) {
        for &i in positions {
            if let Some(m) = self.members.get_mut(i as usize) {
                m.claimed = true;
            }
        }
    }
}

/// The problem connections of a whole capture, per listener, with the facts that need more than
/// one connection (scans, queue windows, silent hosts) decided.
#[derive(Default)]
pub struct Book {
    pub scans: ScanBook,
    pub timings: Timings,
    by_server: FxHashMap<Endpoint, Vec<Member>>,
}

impl Book {
    /// Reads every kept record once, and the seeds of the problem connections not kept
    /// (`digest`); `servers` are the statistics of every connection (also the ones not kept),
    /// which say whether a host ever sent a packet.
    /// `trimmed_at`: the frame count the capture cut every long flow at, if it was trimmed
    /// (`trimmed::FlowLengths::trimmed_at`).
    /// `sent_as_client`: whether an address sent packets as a client of any connection.
    pub fn build(
        connections: &[Connection], digest: &Digest, end_ns: i64, servers: &[&ServerStats], trimmed_at: Option<u32>,
        sent_as_client: &dyn Fn(IpAddr) -> bool,
    ) -> Book {
        let mut book = Book::default();
        let mut spoke: FxHashMap<IpAddr, u64> = FxHashMap::default();
        for s in servers {
            *spoke.entry(s.server.ip).or_default() += s.spoke;
        }
        // A host that sent anything, as a server on any port or as a client (its own SYNs; on
        // loopback client and server are one address), is up: SYNs to it that go unanswered are
        // dropped by a filter or its listener, not lost to a host that is down.
        let mut silent: FxHashSet<IpAddr> =
            spoke.into_iter().filter(|&(ip, n)| n == 0 && !sent_as_client(ip)).map(|(ip, _)| ip).collect();
        // A client that sent more than SYNs (an ACK, data) had heard from the server: the capture
        // misses that direction, the host was not silent.
        let heard = connections.iter().filter(|c| digest::client_spoke(c)).map(|c| c.server.ip);
        let mut one_way: FxHashSet<IpAddr> = FxHashSet::default();
        for ip in heard.chain(digest.seeds().iter().filter(|s| s.client_spoke).map(|s| s.server.ip)) {
            if silent.remove(&ip) {
                one_way.insert(ip);
            }
        }
        let reorders: FxHashSet<Endpoint> = servers.iter().filter(|s| s.reorders()).map(|s| s.server).collect();
        let mut building = Building { silent, one_way, trimmed_at, reorders, ..Building::default() };
        for (index, c) in connections.iter().enumerate() {
            let (outcome, symptoms) = super::classify(c, end_ns);
            if !super::servers::has_problem(outcome, symptoms) {
                continue;
            }
            book.timings.add(c, end_ns);
            building.add(&mut book, &Seed::of(c, outcome, symptoms), index as u32);
        }
        book.timings.merge(digest.timings.clone());
        for seed in digest.seeds() {
            building.add(&mut book, seed, Member::NO_RECORD);
        }
        let Building { mut troubles, spans, probes, .. } = building;
        for (server, members) in book.by_server.iter_mut() {
            for i in stalled(members) {
                if let Some(m) = members.get_mut(i) {
                    m.marks |= fact_bit(Fact::ListenerStalled);
                }
            }
            if let Some(spans) = spans.get(server) {
                let mut troubles = troubles.remove(server).unwrap_or_default();
                for i in in_queue_windows(spans, &mut troubles) {
                    if let Some(m) = members.get_mut(i) {
                        m.marks |= fact_bit(Fact::InQueueWindow);
                    }
                }
            }
            for &(i, client) in probes.get(server).map(Vec::as_slice).unwrap_or_default() {
                if let Some(m) = members.get_mut(i).filter(|_| book.scans.is_scan(client, server.ip)) {
                    m.marks |= fact_bit(Fact::ScanProbe);
                }
            }
            members.sort_by_key(|m| (m.first_ns, m.id));
        }
        book
    }

    /// The servers with problem connections, in order.
    pub fn servers(&self) -> Vec<Endpoint> {
        let mut out: Vec<Endpoint> = self.by_server.keys().copied().collect();
        out.sort();
        out
    }

    /// `server`'s episodes, in time order.
    pub fn episodes(&self, server: Endpoint) -> Vec<Episode> {
        let Some(members) = self.by_server.get(&server) else { return Vec::new() };
        let mut out = Vec::new();
        let mut current: Vec<Member> = Vec::new();
        let mut end = i64::MIN;
        for m in members {
            if !current.is_empty() && m.first_ns.saturating_sub(end) > EPISODE_GAP_NS {
                out.push(Episode { server, members: std::mem::take(&mut current) });
                end = i64::MIN;
            }
            end = end.max(m.last_ns);
            current.push(*m);
        }
        if !current.is_empty() {
            out.push(Episode { server, members: current });
        }
        out
    }
}

/// When a member's SYN or request was in trouble, and its position among its listener's members.
type Trouble = ((i64, i64), usize);

/// What `Book::build` gathers per listener before it decides the facts that need more than one
/// connection.
#[derive(Default)]
struct Building {
    silent: FxHashSet<IpAddr>,
    /// Addresses that sent nothing the capture shows while their clients answered them.
    one_way: FxHashSet<IpAddr>,
    trimmed_at: Option<u32>,
    /// Listeners most of whose re-sent data segments were spurious (`ServerStats::reorders`).
    reorders: FxHashSet<Endpoint>,
    /// Troubles (span, member position) and queue-full spans, per listener.
    troubles: FxHashMap<Endpoint, Vec<Trouble>>,
    spans: FxHashMap<Endpoint, Vec<(i64, i64)>>,
    /// Probes (member position, source), per listener.
    probes: FxHashMap<Endpoint, Vec<(usize, IpAddr)>>,
}

impl Building {
    fn add(&mut self, book: &mut Book, seed: &Seed, index: u32) {
        let mut marks = seed.marks;
        if self.silent.contains(&seed.server.ip) {
            marks |= fact_bit(Fact::SilentHost);
        }
        if marks & fact_bit(Fact::ResentOnce) != 0 && self.reorders.contains(&seed.server) {
            marks |= fact_bit(Fact::Reordering);
        }
        let one_way = self.one_way.contains(&seed.server.ip);
        if one_way {
            marks |= fact_bit(Fact::OneWay);
        }
        // Only a connection that never closed can have been cut.
        let trimmed = self.trimmed_at.is_some_and(|limit| seed.unclosed_frames == Some(limit));
        if trimmed {
            marks |= fact_bit(Fact::FlowTrimmed);
        }
        let mut checks = Checks::from_bits(seed.checks);
        if seed.silence {
            checks.set(Check::BothDirectionsSeen, Some(!one_way));
            checks.set(Check::FlowNotTrimmed, Some(!trimmed));
        }
        let members = book.by_server.entry(seed.server).or_default();
        let position = members.len();
        if let Some(p) = seed.probe {
            book.scans.add(&p, seed.server, seed.first_ns, seed.weight);
            self.probes.entry(seed.server).or_default().push((position, p.client));
        }
        if let Some(span) = seed.span {
            if seed.has(Fact::QueueSign) {
                self.spans.entry(seed.server).or_default().push(span);
            } else {
                self.troubles.entry(seed.server).or_default().push((span, position));
            }
        }
        members.push(Member {
            index,
            id: seed.id,
            first_ns: seed.first_ns,
            last_ns: seed.last_ns,
            marks,
            ack_ns: seed.ack_ns,
            weight: seed.weight,
            checks: checks.bits(),
            claimed: false,
        });
    }
}

/// The members of one listener that show it not taking connections: SYNs unanswered (their
/// first SYN) while an earlier connection, its handshake done (its ACK before that SYN), waited
/// with its request acknowledged by the kernel and never answered until its client closed; and
/// those connections. The kernel acknowledges a request on a connection in the accept queue
/// whether or not the application accepted it; with the queue full, it drops new SYNs.
fn stalled(members: &[Member]) -> Vec<usize> {
    let has = |m: &Member, f: Fact| m.marks & fact_bit(f) != 0;
    // Held connections as (handshake ACK, last packet), by ACK; SYN drops as (first SYN, index).
    let mut held: Vec<(i64, i64, usize)> = members
        .iter()
        .enumerate()
        .filter(|(_, m)| has(m, Fact::RequestAcked) && has(m, Fact::RequestUnanswered) && has(m, Fact::ClientWaited))
        .filter_map(|(i, m)| Some((m.ack_ns?, m.last_ns, i)))
        .collect();
    let mut drops: Vec<(i64, usize)> =
        members.iter().enumerate().filter(|(_, m)| has(m, Fact::SynUnanswered)).map(|(i, m)| (m.first_ns, i)).collect();
    if held.is_empty() || drops.is_empty() {
        return Vec::new();
    }
    held.sort_unstable();
    drops.sort_unstable();
    let mut out = Vec::new();
    // A drop is inside a held span when a connection acknowledged before it still waited then.
    let (mut k, mut latest_end) = (0, i64::MIN);
    for &(at, i) in &drops {
        while k < held.len() && held[k].0 <= at {
            latest_end = latest_end.max(held[k].1);
            k += 1;
        }
        if latest_end >= at {
            out.push(i);
        }
    }
    // A held connection is one when a drop falls in its span.
    for &(ack, last, i) in &held {
        let first_after = drops.partition_point(|&(at, _)| at < ack);
        if drops.get(first_after).is_some_and(|&(at, _)| at <= last) {
            out.push(i);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The spans in which a listener showed a full accept queue, padded and joined.
fn queue_windows(spans: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut padded: Vec<(i64, i64)> =
        spans.iter().map(|&(a, b)| (a.saturating_sub(QUEUE_WINDOW_PAD_NS), b.saturating_add(QUEUE_WINDOW_PAD_NS))).collect();
    padded.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(padded.len());
    for (a, b) in padded {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Which troubles (span, member) overlap a queue-full window. A trouble that overlaps one widens
/// it to cover the trouble, padded: SYNs dropped back to back, before the first ACK could be
/// dropped and show the queue, are the same full queue.
fn in_queue_windows(spans: &[(i64, i64)], troubles: &mut [((i64, i64), usize)]) -> Vec<usize> {
    let mut windows = queue_windows(spans);
    troubles.sort_unstable();
    let mut inside = vec![false; troubles.len()];
    let overlaps = |w: &(i64, i64), (a, b): (i64, i64)| a <= w.1 && b >= w.0;
    // Forward, widening ends; then backward, widening starts.
    for (k, &(span, _)) in troubles.iter().enumerate() {
        if let Some(w) = windows.iter_mut().find(|w| overlaps(w, span)) {
            w.1 = w.1.max(span.1.saturating_add(QUEUE_WINDOW_PAD_NS));
            inside[k] = true;
        }
    }
    for (k, &(span, _)) in troubles.iter().enumerate().rev() {
        if let Some(w) = windows.iter_mut().find(|w| overlaps(w, span)) {
            w.0 = w.0.min(span.0.saturating_sub(QUEUE_WINDOW_PAD_NS));
            inside[k] = true;
        }
    }
    troubles.iter().zip(inside).filter(|(_, yes)| *yes).map(|(&(_, i), _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn test_queue_windows_pad_and_join_overlapping_spans() {
        let w = queue_windows(&[(10 * S, 12 * S), (13 * S, 14 * S), (30 * S, 31 * S)]);
        assert_eq!(w, vec![(9 * S, 15 * S), (29 * S, 32 * S)]);
    }

    #[test]
    fn test_troubles_back_to_back_before_the_first_sign_belong_to_the_window() {
        // A sign from 3 s on; SYNs dropped from 1.8 to 2.8 s, 0.9 to 1.9 s and 0 to 1 s chain back
        // to it; one at -5 s is too far, one at 20 s too late.
        let at = |a: i64, b: i64| (a * S / 10, b * S / 10);
        let mut troubles = vec![(at(-50, -49), 0), (at(0, 10), 1), (at(9, 19), 2), (at(18, 28), 3), (at(200, 210), 4)];
        let mut inside = in_queue_windows(&[(3 * S, 4 * S)], &mut troubles);
        inside.sort_unstable();
        assert_eq!(inside, vec![1, 2, 3]);
    }

    #[test]
    fn test_seeds_without_records_join_episodes_windows_and_counts() {
        use crate::detect::digest::Seed;
        let server = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        let seed = |id: u64, at: i64, fact: Fact, weight: u32| Seed {
            server,
            id,
            first_ns: at * S,
            last_ns: at * S + S / 2,
            marks: fact_bit(fact),
            span: Some((at * S, at * S + S / 2)),
            client_spoke: true,
            probe: None,
            ack_ns: Some(at * S + 1),
            weight,
            checks: 0,
            silence: false,
            unclosed_frames: None,
        };
        let mut digest = Digest::default();
        // A queue-full sign at 10 s, a re-sent SYN beside it (5 alike merged), one far later.
        digest.push(seed(1, 10, Fact::QueueSign, 1));
        digest.push(seed(2, 11, Fact::SynUnanswered, 5));
        digest.push(seed(3, 100, Fact::SynUnanswered, 1));
        let book = Book::build(&[], &digest, 200 * S, &[], None, &|_| false);
        let episodes = book.episodes(server);
        assert_eq!(episodes.len(), 2);
        assert_eq!((episodes[0].connections(), episodes[1].connections()), (6, 1));
        let window = Filter { all: fact_bit(Fact::InQueueWindow), ..Filter::default() };
        let inside = episodes[0].select(&window);
        assert_eq!(inside.len(), 1);
        let m = episodes[0].members[inside[0] as usize];
        assert_eq!((m.id, m.weight, m.record(), m.ack_ns), (2, 5, None, Some(11 * S + 1)));
        assert!(episodes[1].select(&window).is_empty());
    }

    #[test]
    fn test_syns_dropped_while_an_acknowledged_request_waits_unanswered_stall_the_listener() {
        let member = |first: i64, last: i64, ack: Option<i64>, facts: &[Fact]| Member {
            index: 0, id: 0, first_ns: first * S, last_ns: last * S, marks: facts.iter().fold(0, |b, &f| b | fact_bit(f)),
            ack_ns: ack.map(|a| a * S), weight: 1, checks: 0, claimed: false,
        };
        let held = [Fact::RequestAcked, Fact::RequestUnanswered, Fact::ClientWaited];
        let members = [
            member(0, 3, Some(0), &held),
            member(1, 3, None, &[Fact::SynUnanswered]),
            // After the held connection's client gave up: not inside its wait.
            member(5, 7, None, &[Fact::SynUnanswered]),
            // A held connection with no SYN dropped while it waited.
            member(10, 12, Some(10), &held),
        ];
        assert_eq!(stalled(&members), [0, 1]);
        // Without the first held connection, the SYNs dropped fell in no wait.
        assert!(stalled(&members[1..]).is_empty());
    }

    #[test]
    fn test_filter_skips_claimed_members_unless_asked() {
        let m = Member { index: 0, id: 0, first_ns: 0, last_ns: 0, marks: fact_bit(Fact::HalfOpen), ack_ns: None, weight: 1, checks: 0, claimed: true };
        let f = Filter { all: fact_bit(Fact::HalfOpen), ..Filter::default() };
        assert!(!f.matches(&m));
        assert!(Filter { claimed: true, ..f }.matches(&m));
        assert!(!Filter { claimed: true, none: fact_bit(Fact::HalfOpen), ..f }.matches(&m));
    }
}
