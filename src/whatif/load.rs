//! The offered load of one listener, taken from a capture: per connection its first SYN, the
//! round trip, and, for the connections the server answered, how long a worker took over it.

use super::Outcome;
use crate::flow::{Connection, Endpoint, Side};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The round trip assumed for a connection whose handshake does not show one.
const DEFAULT_RTT_NS: i64 = 1_000_000;

/// One connection of the load, as the capture showed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offered {
    /// The client's first SYN, from the load's first.
    pub syn_ns: i64,
    /// From the SYN-ACK to the client's handshake ACK.
    pub rtt_ns: i64,
    /// How long a worker took from having the request to the answer's first byte (answered
    /// connections only).
    pub service_ns: Option<i64>,
    pub seen: Seen,
}

/// What became of a connection in the capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub answered: bool,
    pub got_synack: bool,
    pub server_reset: bool,
    pub syn_retransmitted: bool,
    /// From the first SYN until a worker had the request (answered connections only).
    pub wait_ns: Option<i64>,
    /// Segments the capture shows the accept queue dropped: SYNs never answered, and SYN-ACKs
    /// re-sent after the client's ACK.
    pub overflows: u64,
}

/// The load offered to one listener: its connections in the order of their first SYN.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Load {
    pub connections: Vec<Offered>,
}

/// A connection of the capture, before service times are worked out.
struct Answered {
    index: usize,
    /// When the request reached the server: the server's first ACK of it.
    request_ns: i64,
    answer_ns: i64,
}

impl Load {
    /// The load offered to `listener`: each connection whose first SYN the capture shows.
    /// With `workers` known, a service time excludes the wait for a worker: the answered
    /// connections are given, in the order their requests arrived, to the worker free first
    /// (a worker is free again at its answer); without it, a service time runs from the
    /// request's arrival.
    pub fn of(connections: &[Connection], listener: &Endpoint, workers: Option<u32>) -> Load {
        let mut mine: Vec<&Connection> = connections
            .iter()
            .filter(|c| c.server == *listener && !c.partial && c.syn_time_ns.get().is_some())
            .collect();
        mine.sort_by_key(|c| (c.syn_time_ns.get(), c.id));
        let Some(start) = mine.first().and_then(|c| c.syn_time_ns.get()) else {
            return Load::default();
        };
        let mut offered = Vec::with_capacity(mine.len());
        let mut served = Vec::new();
        for (index, c) in mine.iter().enumerate() {
            let syn = c.syn_time_ns.get().unwrap_or(start);
            let synack = c.synack_time_ns.get();
            let ack = c.handshake_ack_time_ns.get();
            let rtt_ns = match (synack, ack) {
                (Some(s), Some(a)) if c.synack_count == 1 && a >= s => a - s,
                _ => DEFAULT_RTT_NS,
            };
            let answer = c.milestones.server_data_ns.get();
            // An answer after the client closed (it gave up) is no answer to it.
            let answered = match (answer, c.milestones.client_closed_ns.get()) {
                (Some(a), Some(closed)) => a <= closed,
                (answer, _) => answer.is_some(),
            };
            let request = c.milestones.client_data_acked_ns.get().or(c.milestones.client_data_ns.get());
            if let (Some(answer_ns), Some(request_ns)) = (answer, request) {
                served.push(Answered { index, request_ns: request_ns.min(answer_ns), answer_ns });
            }
            let syns_unanswered = if synack.is_some() { c.syn_count.saturating_sub(1) } else { c.syn_count };
            let synacks_after_ack = if ack.is_some() { c.synack_count.saturating_sub(1) } else { 0 };
            let seen = Seen {
                answered,
                got_synack: synack.is_some(),
                server_reset: c.milestones.first_rst().is_some_and(|r| r.from == Side::Server) && !answered,
                syn_retransmitted: c.syn_count > 1,
                wait_ns: None,
                overflows: u64::from(syns_unanswered) + u64::from(synacks_after_ack),
            };
            offered.push(Offered { syn_ns: syn - start, rtt_ns, service_ns: None, seen });
        }
        served.sort_by_key(|a| (a.request_ns, a.index));
        let slots = workers.map_or(served.len(), |w| w.max(1) as usize);
        // Each worker's next free moment, earliest first.
        let mut free: BinaryHeap<Reverse<i64>> = (0..slots).map(|_| Reverse(i64::MIN)).collect();
        for a in &served {
            let Reverse(worker_free) = free.pop().unwrap_or(Reverse(i64::MIN));
            let begin = a.request_ns.max(worker_free).min(a.answer_ns);
            free.push(Reverse(a.answer_ns));
            if let Some(o) = offered.get_mut(a.index) {
                o.service_ns = Some(a.answer_ns - begin);
                o.seen.wait_ns = Some(begin - start - o.syn_ns);
            }
        }
        Load { connections: offered }
    }

    /// The answered connections' service times, sorted: what a replay draws from for the others.
    pub fn service_times(&self) -> Vec<i64> {
        let mut out: Vec<i64> = self.connections.iter().filter_map(|c| c.service_ns).collect();
        out.sort_unstable();
        out
    }

    /// The capture's own outcome, counted as a replay counts its own.
    pub fn observed(&self) -> Outcome {
        let mut out = Outcome { connections: self.connections.len() as u64, ..Outcome::default() };
        let mut waits = Vec::new();
        for c in &self.connections {
            let seen = &c.seen;
            out.tally(seen.answered, seen.server_reset, seen.got_synack);
            if seen.answered {
                waits.extend(seen.wait_ns);
            }
            out.syn_retransmitted += u64::from(seen.syn_retransmitted);
            out.listen_overflows += seen.overflows;
        }
        out.finish(&mut waits);
        out
    }
}
