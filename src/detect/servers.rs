//! Per server endpoint: how its connections went, how its handshakes were timed at the capture
//! point, and when its clients' connections waited for it.

use rustc_hash::{FxHashMap, FxHashSet};

use super::moments::{Count, Kind, Moments};
use super::probes::{self, OneSynTally};

use super::{Outcome, Symptom, Symptoms};
use crate::flow::connection::Connection;
use std::net::IpAddr;

use crate::flow::Endpoint;

/// Handshake gaps kept per server to take medians from.
const MAX_GAP_SAMPLES: usize = 4096;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ServerStats {
    pub server: Endpoint,
    pub connections: u64,
    pub outcomes: [u64; Outcome::COUNT],
    pub symptoms: [u64; Symptom::COUNT],
    pub first_ns: i64,
    pub last_ns: i64,
    /// Handshakes without retransmission: SYN to SYN-ACK, and SYN-ACK to the client's ACK, as
    /// seen at the capture point (the first is the round trip on the client's side, the second
    /// on the server's side).
    pub gaps: GapSample,
    /// When each connection the client considered established (its handshake ACK) began to
    /// wait for the server (`Begins`), and when the wait ended (`Ends`: the server's first
    /// data, or the connection's end). Sorted by `finish`.
    pub waiting: Moments,
    /// First server data of each connection (`Begins`): the service rate.
    pub answered: Moments,
    /// Connections that were one client SYN and nothing more (see `probes`).
    pub one_syn: u64,
    /// Connections in which the server sent at least one packet.
    #[serde(default)]
    pub spoke: u64,
    /// Packets of its connections, both ways, copies left out: what a re-send rate is a share of.
    #[serde(default)]
    pub packets: u64,
    /// Data segments re-sent in its connections, both ways.
    #[serde(default)]
    pub data_retransmits: u64,
    /// What its connections show of its settings and its clients' (`settings::infer`).
    #[serde(default)]
    pub shown: super::settings::gather::Shown,
}

impl ServerStats {
    fn new(server: Endpoint) -> ServerStats {
        ServerStats {
            server,
            connections: 0,
            outcomes: [0; Outcome::COUNT],
            symptoms: [0; Symptom::COUNT],
            first_ns: i64::MAX,
            last_ns: i64::MIN,
            gaps: GapSample::default(),
            waiting: Moments::default(),
            answered: Moments::default(),
            one_syn: 0,
            spoke: 0,
            packets: 0,
            data_retransmits: 0,
            shown: Default::default(),
        }
    }

    /// Connections the client considered established and the server had not answered at `t`
    /// (an estimate when `binned_through` covers `t`, off by at most `error`).
    pub fn waiting_at(&self, t_ns: i64) -> Count {
        let began = self.waiting.count_until(Kind::Begins, t_ns);
        let ended = self.waiting.count_until(Kind::Ends, t_ns);
        Count { value: began.value.saturating_sub(ended.value), error: began.error + ended.error }
    }

    /// Connections the server answered (first data) from `from_ns` to `to_ns`, both included.
    pub fn answered_between(&self, from_ns: i64, to_ns: i64) -> Count {
        let until = self.answered.count_until(Kind::Begins, to_ns);
        let before = self.answered.count_before(Kind::Begins, from_ns);
        Count { value: until.value.saturating_sub(before.value), error: until.error + before.error }
    }

    /// The last second (epoch) up to which this server's waits and answers are counted per
    /// second, not kept exactly; `None` when every one is exact.
    pub fn binned_through(&self) -> Option<i64> {
        self.waiting.binned_through().max(self.answered.binned_through())
    }
}

fn median(values: &[i64]) -> Option<i64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied()
}

impl ServerStats {
    pub fn median_syn_to_synack_ns(&self) -> Option<i64> {
        median(&self.gaps.heap.iter().map(|g| g.syn_to_synack_ns).collect::<Vec<_>>())
    }

    /// SYN to handshake ACK of each clean handshake sampled.
    pub fn handshake_rtts_ns(&self) -> impl Iterator<Item = i64> + '_ {
        self.gaps.heap.iter().map(|g| g.syn_to_synack_ns + g.synack_to_ack_ns)
    }

    pub fn median_synack_to_ack_ns(&self) -> Option<i64> {
        median(&self.gaps.heap.iter().map(|g| g.synack_to_ack_ns).collect::<Vec<_>>())
    }
}

/// The handshake gaps of the `MAX_GAP_SAMPLES` connections with the lowest ids: the same
/// sample whether connections are added in order of id (every record kept) or as they finish.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct GapSample {
    /// Greatest id on top, the one to drop when a lower one comes.
    heap: std::collections::BinaryHeap<Gaps>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
struct Gaps {
    id: u64,
    syn_to_synack_ns: i64,
    synack_to_ack_ns: i64,
}

impl GapSample {
    fn add(&mut self, gaps: Gaps) {
        if self.heap.len() < MAX_GAP_SAMPLES {
            self.heap.push(gaps);
        } else if self.heap.peek().is_some_and(|top| gaps.id < top.id) {
            self.heap.pop();
            self.heap.push(gaps);
        }
    }

    /// Adds the sample of a later capture (its ids count from 0 again): its connections come
    /// after these, as if added one at a time.
    fn merge(&mut self, other: GapSample) {
        let base = self.heap.peek().map_or(0, |top| top.id + 1);
        for gaps in other.heap {
            self.add(Gaps { id: base + gaps.id, ..gaps });
        }
    }
}

/// Linux's default net.ipv4.ip_local_port_range: 32768 to 60999.
pub const EPHEMERAL_PORTS: usize = 60999 - 32768 + 1;
/// After a close, the side that closed first keeps the 4-tuple in TIME-WAIT for 60 s
/// (include/net/tcp.h: TCP_TIMEWAIT_LEN); a proxy that closes first cannot reuse the port sooner.
const TIME_WAIT_NS: i64 = 60 * 1_000_000_000;

/// When the client's source port is free again. At the last packet when an RST ended the
/// connection (a TIME-WAIT socket dies of one too with net.ipv4.tcp_rfc1337 = 0:
/// net/ipv4/tcp_minisocks.c: tcp_timewait_state_process()) or when the server closed first:
/// the server keeps the TIME-WAIT, the client goes LAST-ACK -> CLOSED on the ACK of its FIN
/// (net/ipv4/tcp_input.c: tcp_rcv_state_process()), and connect() only looks for a socket of
/// its own host on the 4-tuple (net/ipv4/inet_hashtables.c: __inet_check_established()).
/// Also at the last packet when connect() ended without a connection (refused, unreachable,
/// out of SYN retries or given up: a socket closed from SYN-SENT leaves no TIME-WAIT,
/// net/ipv4/tcp.c: tcp_done()); a SYN flood or a scan from one address is no port held.
/// Otherwise TIME-WAIT's 60 s after the last packet: the client closed first, both at once, or
/// not yet (a port in CLOSE-WAIT or connecting is still held when the capture ends).
fn port_free_ns(c: &Connection, outcome: Outcome) -> i64 {
    let closes = (c.milestones.server_closed_ns.get(), c.milestones.client_closed_ns.get());
    let server_first = matches!(closes, (Some(server), Some(client)) if server < client);
    let never_connected = matches!(outcome, Outcome::Refused | Outcome::Unreachable | Outcome::TimedOut | Outcome::Abandoned) && !c.handshake_completed();
    if c.milestones.first_rst().is_some() || server_first || never_connected {
        c.last_time_ns
    } else {
        c.last_time_ns + TIME_WAIT_NS
    }
}

/// How many source ports one client address had in use (or in TIME-WAIT) towards one server
/// endpoint at once, at most, and when; `error`: how much too high `peak` can be (0 unless the
/// pair's spans were counted per second, see `moments`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortPressure {
    pub client: IpAddr,
    pub server: Endpoint,
    pub peak: usize,
    pub at_ns: i64,
    pub error: u64,
}

/// Moments kept exactly over a book's series (waits, answers, ports taken and freed): 8 bytes
/// each, 32 MiB in all, five a connection (about 840,000 connections). Past it series are
/// folded into counts per second (`ServerBook::spend`), port spans first: a port is held at
/// least 60 s (TIME-WAIT), so a second's resolution changes its peak little, while a wait for
/// an answer lasts milliseconds. So the book's memory follows servers, pairs and seconds, not
/// connections.
pub const EXACT_MOMENTS: usize = 4 << 20;

/// Every server's stats, filled one connection at a time.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ServerBook {
    servers: FxHashMap<Endpoint, ServerStats>,
    /// Per (client address, server endpoint): when each connection began (`Begins`), and when
    /// its port became free again (`Ends`: its end plus TIME-WAIT).
    ports: FxHashMap<(IpAddr, Endpoint), Moments>,
    /// Moments kept exactly, over every series (at most `EXACT_MOMENTS`).
    exact_moments: usize,
    /// Connections that were one client SYN and nothing more (a flood or a scan), in aggregate.
    one_syn: OneSynTally,
    /// Connections of (client, server) pairs beyond `MAX_PORT_PAIRS`, not in `ports`.
    pub untracked_port_pairs: u64,
    /// One-SYN connections to endpoints beyond `MAX_SERVERS_FOR_ONE_SYN`, not in `servers`.
    pub one_syn_without_server: u64,
    /// The capture's longest connections, to tell a capture kept to the first packets of each
    /// flow (`trimmed::FlowLengths`).
    #[serde(default)]
    pub flow_lengths: super::trimmed::FlowLengths,
    /// Addresses that sent packets as a client (a SYN at least), at most
    /// `MAX_CLIENT_ADDRESSES`: a server address among them was not silent.
    #[serde(default)]
    clients: FxHashSet<IpAddr>,
    /// Every server's moments are sorted (`sort_moments`); adding or merging unsorts them.
    #[serde(skip)]
    sorted: bool,
}

/// Client addresses kept, at most: past it an address first seen as a client is not kept, and a
/// server address that spoke only as such a client may be taken for silent.
pub const MAX_CLIENT_ADDRESSES: usize = 65_536;

/// Past this many server endpoints, a one-SYN connection to a new endpoint makes no entry.
pub const MAX_SERVERS_FOR_ONE_SYN: usize = 4096;

/// (client address, server endpoint) pairs whose ports are followed, at most.
pub const MAX_PORT_PAIRS: usize = 65_536;

impl ServerBook {
    pub fn add(&mut self, c: &Connection, outcome: Outcome, symptoms: Symptoms) {
        self.sorted = false;
        self.flow_lengths.add(c);
        let one_syn = probes::is_one_syn(c);
        if c.counts[crate::flow::Side::Client.index()].packets > 0 && self.clients.len() < MAX_CLIENT_ADDRESSES {
            self.clients.insert(c.client.ip);
        }
        if one_syn && self.servers.len() >= MAX_SERVERS_FOR_ONE_SYN && !self.servers.contains_key(&c.server) {
            // A scan of many hosts and ports would make an entry per endpoint probed: counted
            // in the aggregate only.
            self.one_syn.add(c);
            self.one_syn_without_server += 1;
            return;
        }
        let s = self.servers.entry(c.server).or_insert_with(|| ServerStats::new(c.server));
        s.connections += 1;
        s.outcomes[outcome.index()] += 1;
        for symptom in symptoms.iter() {
            s.symptoms[symptom.index()] += 1;
        }
        s.first_ns = s.first_ns.min(c.first_time_ns);
        s.last_ns = s.last_ns.max(c.last_time_ns);
        let clean = c.syn_count == 1 && c.synack_count == 1;
        if let (true, Some(syn), Some(synack), Some(ack)) = (clean, c.syn_time_ns.get(), c.synack_time_ns.get(), c.handshake_ack_time_ns.get()) {
            s.gaps.add(Gaps { id: c.id, syn_to_synack_ns: synack - syn, synack_to_ack_ns: ack - synack });
        }
        let mut exact = 0;
        if let Some((established, until)) = crate::flow::connection::waiting_span(c) {
            exact += usize::from(s.waiting.push(established, Kind::Begins)) + usize::from(s.waiting.push(until, Kind::Ends));
        }
        if let Some(answered) = c.milestones.server_data_ns.get() {
            exact += usize::from(s.answered.push(answered, Kind::Begins));
        }
        if c.counts[crate::flow::Side::Server.index()].packets > 0 {
            s.spoke += 1;
        }
        s.packets += c.counts.iter().map(|d| d.packets).sum::<u64>();
        s.data_retransmits += c.counts.iter().map(|d| u64::from(d.data_retransmits)).sum::<u64>();
        s.shown.add(c, outcome, symptoms);
        if one_syn {
            s.one_syn += 1;
            self.one_syn.add(c);
        }
        let pair = (c.client.ip, c.server);
        if self.ports.len() < MAX_PORT_PAIRS || self.ports.contains_key(&pair) {
            let mine = self.ports.entry(pair).or_default();
            exact += usize::from(mine.push(c.first_time_ns, Kind::Begins));
            exact += usize::from(mine.push(port_free_ns(c, outcome), Kind::Ends));
        } else {
            // A flood from spoofed addresses brings a new pair with every SYN; no proxy has this many.
            self.untracked_port_pairs += 1;
        }
        self.spend(exact);
    }

    /// Notes `exact` more exact moments; past `EXACT_MOMENTS`, folds the largest series, port
    /// spans first (each fold moves at least half of one into counts per second), until half
    /// the budget is free.
    fn spend(&mut self, exact: usize) {
        self.exact_moments += exact;
        if self.exact_moments <= EXACT_MOMENTS {
            return;
        }
        let ports: Vec<&mut Moments> = self.ports.values_mut().collect();
        self.exact_moments = fold_largest(ports, self.exact_moments);
        let waits: Vec<&mut Moments> = self.servers.values_mut().flat_map(|s| [&mut s.waiting, &mut s.answered]).collect();
        self.exact_moments = fold_largest(waits, self.exact_moments);
    }

    /// The connections that were one client SYN and nothing more.
    pub fn one_syn(&self) -> &OneSynTally {
        &self.one_syn
    }

    /// Per (client address, server endpoint), the most source ports held at once.
    pub fn port_pressure(&self) -> Vec<PortPressure> {
        let mut out: Vec<PortPressure> = self
            .ports
            .iter()
            .map(|(&(client, server), spans)| {
                let (peak, at_ns, error) = spans.peak();
                PortPressure { client, server, peak: peak as usize, at_ns, error }
            })
            .collect();
        out.sort_by_key(|p| (std::cmp::Reverse(p.peak), p.client, p.server));
        out
    }

    /// Did `ip` send a packet as a client of some connection (its SYN, on loopback its own
    /// server's address)?
    pub fn sent_as_client(&self, ip: IpAddr) -> bool {
        self.clients.contains(&ip)
    }

    pub fn merge(&mut self, other: ServerBook) {
        self.sorted = false;
        self.flow_lengths.merge(other.flow_lengths);
        for (server, theirs) in other.servers {
            let s = self.servers.entry(server).or_insert_with(|| ServerStats::new(server));
            s.connections += theirs.connections;
            for (a, b) in s.outcomes.iter_mut().zip(theirs.outcomes) {
                *a += b;
            }
            for (a, b) in s.symptoms.iter_mut().zip(theirs.symptoms) {
                *a += b;
            }
            s.first_ns = s.first_ns.min(theirs.first_ns);
            s.last_ns = s.last_ns.max(theirs.last_ns);
            s.gaps.merge(theirs.gaps);
            s.waiting.merge(theirs.waiting);
            s.answered.merge(theirs.answered);
            s.one_syn += theirs.one_syn;
            s.spoke += theirs.spoke;
            s.packets += theirs.packets;
            s.data_retransmits += theirs.data_retransmits;
            s.shown.merge(theirs.shown);
        }
        for ip in other.clients {
            if self.clients.len() >= MAX_CLIENT_ADDRESSES {
                break;
            }
            self.clients.insert(ip);
        }
        self.one_syn.merge(&other.one_syn);
        self.untracked_port_pairs += other.untracked_port_pairs;
        self.one_syn_without_server += other.one_syn_without_server;
        for (pair, spans) in other.ports {
            if let Some(mine) = self.ports.get_mut(&pair) {
                mine.merge(spans);
            } else if self.ports.len() >= MAX_PORT_PAIRS {
                self.untracked_port_pairs += spans.total(Kind::Begins);
            } else {
                self.ports.insert(pair, spans);
            }
        }
        self.exact_moments = 0;
        let exact = self.servers.values().map(|s| s.waiting.exact_len() + s.answered.exact_len()).sum::<usize>()
            + self.ports.values().map(Moments::exact_len).sum::<usize>();
        self.spend(exact);
    }

    /// Sorts every server's waits and answers in place, once, for the queries that count them
    /// (`waiting_at`, `answered_between`).
    pub fn sort_moments(&mut self) {
        if self.sorted {
            return;
        }
        for s in self.servers.values_mut() {
            s.waiting.sort();
            s.answered.sort();
        }
        self.sorted = true;
    }

    /// The stats of `server`, if it had connections.
    pub fn get(&self, server: &Endpoint) -> Option<&ServerStats> {
        self.servers.get(server)
    }

    /// Per server endpoint, in order of address (borrowed: their moments can be tens of MB).
    pub fn stats(&self) -> Vec<&ServerStats> {
        let mut out: Vec<&ServerStats> = self.servers.values().collect();
        out.sort_by_key(|s| s.server);
        out
    }
}

/// Folds the largest of `series` (again while it stays the largest) until `exact`, the moments
/// kept exactly, is down to half of `EXACT_MOMENTS`; returns what is left of `exact`.
fn fold_largest(mut series: Vec<&mut Moments>, mut exact: usize) -> usize {
    let mut largest: std::collections::BinaryHeap<(usize, usize)> =
        series.iter().enumerate().map(|(i, m)| (m.exact_len(), i)).filter(|&(n, _)| n > 0).collect();
    while exact > EXACT_MOMENTS / 2 {
        let Some((_, i)) = largest.pop() else { break };
        exact -= series[i].fold();
        if series[i].exact_len() > 0 {
            largest.push((series[i].exact_len(), i));
        }
    }
    exact
}

/// Is this connection worth keeping for the findings when records are not kept?
pub fn has_problem(outcome: Outcome, symptoms: Symptoms) -> bool {
    !symptoms.is_empty() || !matches!(outcome, Outcome::Completed | Outcome::Open)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn test_spent_budget_folds_the_largest_series_first() {
        let server = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        let (busy, quiet): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.3".parse().unwrap());
        let mut book = ServerBook::default();
        let n_busy = EXACT_MOMENTS as i64 / 2 + 1000;
        for (client, n) in [(busy, n_busy), (quiet, 2)] {
            let pair = book.ports.entry((client, server)).or_default();
            for i in 0..n {
                pair.push(i * S / 100, Kind::Begins);
                pair.push(i * S / 100 + TIME_WAIT_NS, Kind::Ends);
            }
        }
        book.spend(2 * n_busy as usize + 4);
        assert!(book.ports[&(busy, server)].binned_through().is_some());
        assert_eq!(book.ports[&(quiet, server)].binned_through(), None);
        let busy_pressure = book.port_pressure().into_iter().find(|p| p.client == busy).unwrap();
        // 100 new ports a second, each held 60 s: 6,000 at once, counted per second at most a
        // second's frees too high.
        assert!(busy_pressure.peak >= 6000 && busy_pressure.peak as u64 - 6000 <= busy_pressure.error.max(1));
    }

    #[test]
    fn test_port_is_held_through_time_wait_only_when_the_client_closed_first() {
        use crate::flow::connection::RstFacts;
        use crate::flow::{FrameRef, Side};
        let client = Endpoint { ip: "10.0.0.1".parse().unwrap(), port: 40_000 };
        let server = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        let closed = |client_fin: Option<i64>, server_fin: Option<i64>| {
            let mut c = Connection::new(0, client, server, false, FrameRef::default(), 0);
            c.last_time_ns = 3 * S;
            c.milestones.client_closed_ns.set(client_fin);
            c.milestones.server_closed_ns.set(server_fin);
            c
        };
        let port_free_ns_closed = |c: &Connection| port_free_ns(c, Outcome::Completed);
        // The client's FIN first: its TIME-WAIT holds the port.
        assert_eq!(port_free_ns_closed(&closed(Some(2 * S), Some(2 * S + 1))), 3 * S + TIME_WAIT_NS);
        // The server's FIN first: the TIME-WAIT is the server's, the port free at the end.
        assert_eq!(port_free_ns_closed(&closed(Some(2 * S + 1), Some(2 * S))), 3 * S);
        // The server closed and the client has not (CLOSE-WAIT), or neither did: still held.
        assert_eq!(port_free_ns_closed(&closed(None, Some(2 * S))), 3 * S + TIME_WAIT_NS);
        assert_eq!(port_free_ns_closed(&closed(None, None)), 3 * S + TIME_WAIT_NS);
        // A connect() that never connected: no TIME-WAIT; one still trying at the end: held.
        let syn_only = Connection::new(0, client, server, false, FrameRef::default(), 0);
        assert_eq!(port_free_ns(&syn_only, Outcome::Abandoned), 0);
        assert_eq!(port_free_ns(&syn_only, Outcome::TimedOut), 0);
        assert_eq!(port_free_ns(&syn_only, Outcome::Open), TIME_WAIT_NS);
        // An RST ends the 4-tuple on both sides, a TIME-WAIT too.
        let mut reset = closed(Some(2 * S), None);
        reset.milestones.set_first_rst(Some(RstFacts { from: Side::Server, time_ns: 3 * S, at: FrameRef::default(), answers: None, answers_frame: None, after_ns: None }));
        assert_eq!(port_free_ns(&reset, Outcome::ResetByServer), 3 * S);
    }

    #[test]
    fn test_port_pressure_counts_time_wait_and_finds_the_peak() {
        let client: IpAddr = "10.0.0.1".parse().unwrap();
        let server = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        let mut book = ServerBook::default();
        // Three short connections 10 s apart: each port stays held 60 s after its end.
        let mut span = |from: i64, until: i64| {
            let pair = book.ports.entry((client, server)).or_default();
            pair.push(from, Kind::Begins);
            pair.push(until, Kind::Ends);
        };
        for start in [0, 10, 20] {
            span(start * S, start * S + S + TIME_WAIT_NS);
        }
        // One more, 100 s later, when the first three are free again.
        span(100 * S, 101 * S + TIME_WAIT_NS);
        let p = book.port_pressure();
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].peak, p[0].at_ns, p[0].error), (3, 20 * S, 0));
    }
}
