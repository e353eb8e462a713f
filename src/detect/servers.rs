//! Per server endpoint: how its connections went, how its handshakes were timed at the capture
//! point, and when its clients' connections waited for it.

use rustc_hash::FxHashMap;

use super::{Outcome, Symptoms};
use crate::flow::connection::Connection;
use crate::flow::{Endpoint, Side};

/// Handshake gaps kept per server to take medians from.
const MAX_GAP_SAMPLES: usize = 4096;

#[derive(Clone, Debug)]
pub struct ServerStats {
    pub server: Endpoint,
    pub connections: u64,
    pub outcomes: [u64; 8],
    pub symptoms: [u64; 9],
    pub first_ns: i64,
    pub last_ns: i64,
    /// Handshakes without retransmission: SYN to SYN-ACK, and SYN-ACK to the client's ACK, as
    /// seen at the capture point (the first is the round trip on the client's side, the second
    /// on the server's side).
    pub syn_to_synack_ns: Vec<i64>,
    pub synack_to_ack_ns: Vec<i64>,
    /// When each connection the client considered established (its handshake ACK) began to
    /// wait for the server, and when the wait ended (the server's first data, or the
    /// connection's end). Both sorted by `finish`.
    pub waiting_from_ns: Vec<i64>,
    pub waiting_until_ns: Vec<i64>,
    /// First server data of each connection: the service rate.
    pub answered_ns: Vec<i64>,
}

impl ServerStats {
    fn new(server: Endpoint) -> ServerStats {
        ServerStats {
            server,
            connections: 0,
            outcomes: [0; 8],
            symptoms: [0; 9],
            first_ns: i64::MAX,
            last_ns: i64::MIN,
            syn_to_synack_ns: Vec::new(),
            synack_to_ack_ns: Vec::new(),
            waiting_from_ns: Vec::new(),
            waiting_until_ns: Vec::new(),
            answered_ns: Vec::new(),
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
        median(&self.syn_to_synack_ns)
    }

    pub fn median_synack_to_ack_ns(&self) -> Option<i64> {
        median(&self.synack_to_ack_ns)
    }
}

/// Every server's stats, filled one connection at a time.
#[derive(Clone, Debug, Default)]
pub struct ServerBook {
    servers: FxHashMap<Endpoint, ServerStats>,
}

impl ServerBook {
    pub fn add(&mut self, c: &Connection, outcome: Outcome, symptoms: Symptoms) {
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
            if s.syn_to_synack_ns.len() < MAX_GAP_SAMPLES {
                s.syn_to_synack_ns.push(synack - syn);
                s.synack_to_ack_ns.push(ack - synack);
            }
        }
        if let Some(established) = c.handshake_ack_time_ns {
            let answered = c.milestones.server_data_ns;
            let ended = c.milestones.first_rst.map(|r| r.time_ns);
            let client_fin = c.counts[Side::Client.index()].fin.then_some(c.last_time_ns);
            let until = answered.or(ended).or(client_fin).unwrap_or(c.last_time_ns);
            s.waiting_from_ns.push(established);
            s.waiting_until_ns.push(until.max(established));
        }
        if let Some(answered) = c.milestones.server_data_ns {
            s.answered_ns.push(answered);
        }
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
            s.syn_to_synack_ns.extend(theirs.syn_to_synack_ns);
            s.synack_to_ack_ns.extend(theirs.synack_to_ack_ns);
            s.waiting_from_ns.extend(theirs.waiting_from_ns);
            s.waiting_until_ns.extend(theirs.waiting_until_ns);
            s.answered_ns.extend(theirs.answered_ns);
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
