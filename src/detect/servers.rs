//! Per server endpoint: how its connections went, how its handshakes were timed at the capture
//! point, and when its clients' connections waited for it.

use rustc_hash::FxHashMap;

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
    pub outcomes: [u64; Outcome::ALL.len()],
    pub symptoms: [u64; Symptom::ALL.len()],
    pub first_ns: i64,
    pub last_ns: i64,
    /// Handshakes without retransmission: SYN to SYN-ACK, and SYN-ACK to the client's ACK, as
    /// seen at the capture point (the first is the round trip on the client's side, the second
    /// on the server's side).
    pub gaps: GapSample,
    /// When each connection the client considered established (its handshake ACK) began to
    /// wait for the server, and when the wait ended (the server's first data, or the
    /// connection's end). Both sorted by `finish`.
    pub waiting_from_ns: Vec<i64>,
    pub waiting_until_ns: Vec<i64>,
    /// First server data of each connection: the service rate.
    pub answered_ns: Vec<i64>,
    /// Connections that were one client SYN and nothing more (see `probes`).
    pub one_syn: u64,
    /// Connections in which the server sent at least one packet.
    #[serde(default)]
    pub spoke: u64,
}

impl ServerStats {
    fn new(server: Endpoint) -> ServerStats {
        ServerStats {
            server,
            connections: 0,
            outcomes: [0; Outcome::ALL.len()],
            symptoms: [0; Symptom::ALL.len()],
            first_ns: i64::MAX,
            last_ns: i64::MIN,
            gaps: GapSample::default(),
            waiting_from_ns: Vec::new(),
            waiting_until_ns: Vec::new(),
            answered_ns: Vec::new(),
            one_syn: 0,
            spoke: 0,
        }
    }

    /// Connections the client considered established and the server had not answered at `t`.
    pub fn waiting_at(&self, t_ns: i64) -> usize {
        let began = self.waiting_from_ns.partition_point(|&x| x <= t_ns);
        let ended = self.waiting_until_ns.partition_point(|&x| x <= t_ns);
        began.saturating_sub(ended)
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

/// How many source ports one client address had in use (or in TIME-WAIT) towards one server
/// endpoint at once, at most, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortPressure {
    pub client: IpAddr,
    pub server: Endpoint,
    pub peak: usize,
    pub at_ns: i64,
}

/// Every server's stats, filled one connection at a time.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ServerBook {
    servers: FxHashMap<Endpoint, ServerStats>,
    /// Per (client address, server endpoint): when each connection began, and when its port
    /// became free again (its end plus TIME-WAIT).
    ports: FxHashMap<(IpAddr, Endpoint), Vec<(i64, i64)>>,
    /// Connections that were one client SYN and nothing more (a flood or a scan), in aggregate.
    one_syn: OneSynTally,
    /// Connections of (client, server) pairs beyond `MAX_PORT_PAIRS`, not in `ports`.
    pub untracked_port_pairs: u64,
    /// One-SYN connections to endpoints beyond `MAX_SERVERS_FOR_ONE_SYN`, not in `servers`.
    pub one_syn_without_server: u64,
}

/// Past this many server endpoints, a one-SYN connection to a new endpoint makes no entry.
pub const MAX_SERVERS_FOR_ONE_SYN: usize = 4096;

/// (client address, server endpoint) pairs whose ports are followed, at most.
pub const MAX_PORT_PAIRS: usize = 65_536;

impl ServerBook {
    pub fn add(&mut self, c: &Connection, outcome: Outcome, symptoms: Symptoms) {
        let one_syn = probes::is_one_syn(c);
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
        if let (true, Some(syn), Some(synack), Some(ack)) = (clean, c.syn_time_ns, c.synack_time_ns, c.handshake_ack_time_ns) {
            s.gaps.add(Gaps { id: c.id, syn_to_synack_ns: synack - syn, synack_to_ack_ns: ack - synack });
        }
        if let Some((established, until)) = crate::flow::connection::waiting_span(c) {
            s.waiting_from_ns.push(established);
            s.waiting_until_ns.push(until);
        }
        if let Some(answered) = c.milestones.server_data_ns {
            s.answered_ns.push(answered);
        }
        if c.counts[crate::flow::Side::Server.index()].packets > 0 {
            s.spoke += 1;
        }
        if one_syn {
            s.one_syn += 1;
            self.one_syn.add(c);
        }
        self.add_spans((c.client.ip, c.server), vec![(c.first_time_ns, c.last_time_ns + TIME_WAIT_NS)]);
    }

    /// Adds port spans to a pair's; a new pair beyond `MAX_PORT_PAIRS` is only counted (a flood
    /// from spoofed addresses brings a new pair with every SYN; no proxy has this many).
    fn add_spans(&mut self, pair: (IpAddr, Endpoint), spans: Vec<(i64, i64)>) {
        if let Some(mine) = self.ports.get_mut(&pair) {
            mine.extend(spans);
        } else if self.ports.len() >= MAX_PORT_PAIRS {
            self.untracked_port_pairs += spans.len() as u64;
        } else {
            self.ports.insert(pair, spans);
        }
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
                // +1 where a connection begins, -1 where its port is free again; ends first on ties.
                let mut moments: Vec<(i64, i32)> = spans.iter().flat_map(|&(from, until)| [(from, 1), (until, -1)]).collect();
                moments.sort_unstable();
                let (mut held, mut peak, mut at_ns) = (0i64, 0i64, 0i64);
                for (t, change) in moments {
                    held += i64::from(change);
                    if held > peak {
                        (peak, at_ns) = (held, t);
                    }
                }
                PortPressure { client, server, peak: peak as usize, at_ns }
            })
            .collect();
        out.sort_by_key(|p| (std::cmp::Reverse(p.peak), p.client, p.server));
        out
    }

    pub fn merge(&mut self, other: ServerBook) {
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
            s.waiting_from_ns.extend(theirs.waiting_from_ns);
            s.waiting_until_ns.extend(theirs.waiting_until_ns);
            s.answered_ns.extend(theirs.answered_ns);
            s.one_syn += theirs.one_syn;
            s.spoke += theirs.spoke;
        }
        self.one_syn.merge(&other.one_syn);
        self.untracked_port_pairs += other.untracked_port_pairs;
        self.one_syn_without_server += other.one_syn_without_server;
        for (pair, spans) in other.ports {
            self.add_spans(pair, spans);
        }
    }

    /// Sorts the time lists; servers in order of their address.
    pub fn finish(self) -> Vec<ServerStats> {
        let mut out: Vec<ServerStats> = self.servers.into_values().collect();

        for s in &mut out {
            s.waiting_from_ns.sort_unstable();
            s.waiting_until_ns.sort_unstable();
            s.answered_ns.sort_unstable();
        }
        out.sort_by_key(|s| s.server);
        out
    }
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
    fn test_port_pressure_counts_time_wait_and_finds_the_peak() {
        let client: IpAddr = "10.0.0.1".parse().unwrap();
        let server = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        let mut book = ServerBook::default();
        // Three short connections 10 s apart: each port stays held 60 s after its end.
        for start in [0, 10, 20] {
            book.ports.entry((client, server)).or_default().push((start * S, start * S + S + TIME_WAIT_NS));
        }
        // One more, 100 s later, when the first three are free again.
        book.ports.entry((client, server)).or_default().push((100 * S, 101 * S + TIME_WAIT_NS));
        let p = book.port_pressure();
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].peak, p[0].at_ns), (3, 20 * S));
    }
}
