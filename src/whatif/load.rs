//! The offered load of one listener, taken from a capture: per connection its first SYN, the
//! round trip, and, for the connections the server answered, how long a worker took over it.

use super::Outcome;
use crate::flow::{Connection, Endpoint, Side};
use std::collections::VecDeque;

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

/// When each of `served` began its service, by replaying `slots` workers over the capture's own
/// times: a worker takes the connections in the order their requests arrived (the accept queue is
/// a FIFO, and a request comes with or just after the ACK that made its child), starting one when
/// it is free and the request is in; it is free again at its connection's answer. An answer seen
/// from a connection still queued in that order means the kernel took it earlier than its place:
/// it takes the place of the connection started last, which goes back to the head of the queue.
fn service_begins(served: &[Answered], slots: usize) -> Vec<i64> {
    let mut by_request: Vec<usize> = (0..served.len()).collect();
    by_request.sort_by_key(|&i| (served[i].request_ns, served[i].index));
    let mut by_answer: Vec<usize> = (0..served.len()).collect();
    by_answer.sort_by_key(|&i| (served[i].answer_ns, served[i].index));
    let mut workers = Workers { begin: vec![None; served.len()], state: vec![State::Unseen; served.len()], ..Workers::default() };
    let mut arrivals = by_request.into_iter().peekable();
    for x in by_answer {
        let now = served[x].answer_ns;
        // Requests that arrived by this answer join the queue and start on free workers.
        while let Some(j) = arrivals.next_if(|&j| served[j].request_ns <= now) {
            workers.state[j] = State::Queued;
            workers.queue.push_back(j);
            workers.start_free(served, slots, served[j].request_ns);
        }
        if workers.state[x] == State::Queued {
            // Served out of the order assumed: in the place of the connection begun last.
            match workers.last_begun() {
                Some(last) => {
                    workers.begin[x] = workers.begin[last].map(|b| b.max(served[x].request_ns));
                    workers.begin[last] = None;
                    workers.state[last] = State::Queued;
                    workers.queue.push_front(last);
                    workers.busy -= 1;
                }
                None => workers.begin[x] = Some(served[x].request_ns),
            }
        } else if workers.state[x] == State::Busy {
            workers.busy -= 1;
        }
        workers.state[x] = State::Done;
        workers.start_free(served, slots, now);
    }
    served.iter().zip(workers.begin).map(|(a, b)| b.unwrap_or(a.request_ns).clamp(a.request_ns, a.answer_ns)).collect()
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Unseen,
    Queued,
    Busy,
    Done,
}

/// `service_begins()`'s workers: the queue and the services begun, both with entries of
/// connections since done left in place and skipped.
#[derive(Default)]
struct Workers {
    begin: Vec<Option<i64>>,
    state: Vec<State>,
    queue: VecDeque<usize>,
    /// The connections begun, in order.
    begun: Vec<usize>,
    busy: usize,
}

impl Workers {
    /// Free workers take the head of the queue at `now` (or when its request arrives, if later).
    fn start_free(&mut self, served: &[Answered], slots: usize, now: i64) {
        while self.busy < slots {
            let Some(j) = self.queue.pop_front() else { return };
            if self.state[j] != State::Queued {
                continue;
            }
            self.begin[j] = Some(now.max(served[j].request_ns));
            self.state[j] = State::Busy;
            self.begun.push(j);
            self.busy += 1;
        }
    }

    /// The connection in service that began last.
    fn last_begun(&mut self) -> Option<usize> {
        while let Some(j) = self.begun.pop() {
            if self.state[j] == State::Busy {
                return Some(j);
            }
        }
        None
    }
}

impl Load {
    /// The load offered to `listener`: each connection whose first SYN the capture shows.
    /// With `workers` known, a service time excludes the wait for a worker: it begins where
    /// `service_begins()`'s replay of those workers starts it; without it, a service time runs
    /// from the request's arrival.
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
        let slots = workers.map_or(served.len(), |w| w.max(1) as usize);
        for (a, begin) in served.iter().zip(service_begins(&served, slots)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn answered(times_ms: &[(i64, i64)]) -> Vec<Answered> {
        times_ms.iter().enumerate().map(|(index, &(r, a))| Answered { index, request_ns: r * MS, answer_ns: a * MS }).collect()
    }

    #[test]
    fn test_service_begins_one_worker_in_request_order() {
        // Requests at 0, 10 and 20 ms, answers at 50, 100, 150: each begins at the answer before.
        let served = answered(&[(0, 50), (10, 100), (20, 150)]);
        assert_eq!(service_begins(&served, 1), vec![0, 50 * MS, 100 * MS]);
    }

    #[test]
    fn test_service_begins_two_workers_take_the_first_free() {
        // Four requests at once; two workers; answers at 20, 80, 100, 110: the third begins at 20,
        // the fourth at 80.
        let served = answered(&[(0, 20), (0, 80), (0, 100), (0, 110)]);
        assert_eq!(service_begins(&served, 2), vec![0, 0, 20 * MS, 80 * MS]);
    }

    #[test]
    fn test_service_begins_answer_out_of_request_order_takes_the_place_of_the_last_begun() {
        // One worker: A's request at 0, B's at 1 ms, but B answered first (at 30) and A at 60: the
        // worker served B from 1 ms, then A from 30 ms. Never more services at once than workers.
        let served = answered(&[(0, 60), (1, 30)]);
        assert_eq!(service_begins(&served, 1), vec![30 * MS, MS]);
    }

    #[test]
    fn test_service_begins_without_workers_known_each_begins_at_its_request() {
        let served = answered(&[(0, 50), (10, 100), (20, 150)]);
        assert_eq!(service_begins(&served, served.len()), vec![0, 10 * MS, 20 * MS]);
    }
}
