//! Per-second counts over every connection, for the aggregate timeline of a capture: new
//! connections by outcome, retransmissions, and connections waiting for the server's answer.
//!
//! Filled as each connection is counted (so also when records are not kept) and added up by
//! summing, second by second: two analyses' timelines merge by `add`. Reports re-bucket the
//! seconds into wider buckets.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::detect::Outcome;
use crate::flow::connection::waiting_span;
use crate::flow::{Connection, Endpoint};

const NS_PER_S: i64 = 1_000_000_000;

/// What happened in one second of the capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Second {
    /// Connections whose first packet fell in this second, by outcome (`Outcome::ALL` order).
    pub new: [u64; Outcome::COUNT],
    /// SYN, SYN-ACK and data retransmissions sent in this second.
    pub retransmissions: u64,
    /// Connections that began waiting in this second: the client's handshake ACK made them
    /// established for the client, and the server had not answered yet.
    pub waiting_in: u64,
    /// Connections that stopped waiting in this second (see `waiting_span`).
    pub waiting_out: u64,
}

/// Per server endpoint, the seconds (Unix epoch, rounded down) that saw anything. Kept per
/// server because a listen queue is per listener: the waiting counts of two servers are two
/// queues. A hash map: every finished connection adds to three or more seconds, and an ordered
/// map's comparisons of addresses cost 850 instructions a connection; the order is made when
/// the seconds are read.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Timeline {
    seconds: FxHashMap<(Endpoint, i64), Second>,
}

fn second_of(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_S)
}

impl Second {
    fn add(&mut self, other: &Second) {
        for (m, t) in self.new.iter_mut().zip(other.new) {
            *m += t;
        }
        self.retransmissions += other.retransmissions;
        self.waiting_in += other.waiting_in;
        self.waiting_out += other.waiting_out;
    }
}

impl Timeline {
    fn at(&mut self, server: Endpoint, ns: i64) -> &mut Second {
        self.seconds.entry((server, second_of(ns))).or_default()
    }

    /// Where a moment at `ns` of a connection to `server` is counted: in `first` (the
    /// connection's first second and its counts, gathered) if it falls in that second, else in
    /// its own second.
    fn second_for<'a>(&'a mut self, first: &'a mut (i64, Second), server: Endpoint, ns: i64) -> &'a mut Second {
        if second_of(ns) == first.0 {
            &mut first.1
        } else {
            self.at(server, ns)
        }
    }

    /// Counts one finished connection whose outcome is `outcome`.
    pub fn add_connection(&mut self, c: &Connection, outcome: Outcome) {
        let server = c.server;
        // Most of a connection's moments fall in its first second: their counts are gathered
        // and that second looked up once, not once a moment.
        let mut first = (second_of(c.first_time_ns), Second::default());
        first.1.new[outcome.index()] += 1;
        if let Some((from, until)) = waiting_span(c) {
            self.second_for(&mut first, server, from).waiting_in += 1;
            self.second_for(&mut first, server, until).waiting_out += 1;
        }
        // Retransmissions at the time of each logged send; the log keeps a bounded number of
        // sends per series, so those beyond it are put at the connection's last packet.
        let mut logged = 0u64;
        if let Some(log) = &c.retransmits {
            let series = [&log.syn, &log.synack].into_iter().chain(log.data.iter().map(|d| &d.sends));
            for sends in series {
                for send in sends.iter().skip(1) {
                    self.second_for(&mut first, server, send.time_ns).retransmissions += 1;
                    logged += 1;
                }
            }
        }
        let data: u64 = c.counts.iter().map(|d| u64::from(d.data_retransmits)).sum();
        let total = u64::from(c.syn_count.saturating_sub(1)) + u64::from(c.synack_count.saturating_sub(1)) + data;
        if total > logged {
            self.second_for(&mut first, server, c.last_time_ns).retransmissions += total - logged;
        }
        self.at(server, c.first_time_ns).add(&first.1);
    }

    /// Adds another timeline's counts, second by second.
    pub fn add(&mut self, other: &Timeline) {
        for (key, theirs) in &other.seconds {
            self.seconds.entry(*key).or_default().add(theirs);
        }
    }

    /// (epoch second, counts) in time order: of connections to `server`, or of all of them.
    pub fn seconds(&self, server: Option<Endpoint>) -> Vec<(i64, Second)> {
        let mut by_second: BTreeMap<i64, Second> = BTreeMap::new();
        for ((s, second), counts) in &self.seconds {
            if server.is_none_or(|wanted| wanted == *s) {
                by_second.entry(*second).or_default().add(counts);
            }
        }
        by_second.into_iter().collect()
    }

    /// The server endpoints counted, in order.
    pub fn servers(&self) -> Vec<Endpoint> {
        let mut out: Vec<Endpoint> = self.seconds.keys().map(|(s, _)| *s).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    pub fn is_empty(&self) -> bool {
        self.seconds.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::connection::{RetransmitLog, Send};
    use crate::flow::{Endpoint, FrameRef, Side};

    fn conn(first_s: i64) -> Connection {
        let client = Endpoint { ip: "10.0.0.1".parse().unwrap(), port: 40000 };
        let server = Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 };
        let mut c = Connection::revived(0, client, server, crate::flow::ConnState::SynSent, Default::default(), Default::default(), first_s * NS_PER_S);
        c.first_time_ns = first_s * NS_PER_S;
        c.last_time_ns = first_s * NS_PER_S;
        c
    }

    fn send(ns: i64) -> Send {
        Send { at: FrameRef::default(), time_ns: ns, triggered: false }
    }

    // ---- counting one connection ----

    #[test]
    fn test_timeline_new_connection_counted_in_its_first_second() {
        let mut t = Timeline::default();
        t.add_connection(&conn(100), Outcome::TimedOut);
        t.add_connection(&conn(100), Outcome::Completed);
        let (s, counts) = t.seconds(None)[0];
        assert_eq!(s, 100);
        assert_eq!(counts.new[Outcome::TimedOut.index()], 1);
        assert_eq!(counts.new[Outcome::Completed.index()], 1);
    }

    #[test]
    fn test_timeline_syn_retransmissions_at_their_send_times() {
        let mut c = conn(10);
        c.syn_count = 3;
        c.last_time_ns = 13 * NS_PER_S;
        let log = c.retransmits_mut();
        log.syn = vec![send(10 * NS_PER_S), send(11 * NS_PER_S + 5), send(13 * NS_PER_S)];
        let mut t = Timeline::default();
        t.add_connection(&c, Outcome::TimedOut);
        let got: Vec<(i64, u64)> = t.seconds(None).iter().map(|(s, c)| (*s, c.retransmissions)).collect();
        assert_eq!(got, vec![(10, 0), (11, 1), (13, 1)]);
    }

    #[test]
    fn test_timeline_unlogged_retransmissions_at_last_packet() {
        let mut c = conn(10);
        c.counts[Side::Client.index()].data_retransmits = 20;
        c.last_time_ns = 50 * NS_PER_S;
        c.retransmits = Some(Box::new(RetransmitLog::default()));
        let mut t = Timeline::default();
        t.add_connection(&c, Outcome::TimedOut);
        assert_eq!(t.seconds(None).last().map(|(s, c)| (*s, c.retransmissions)), Some((50, 20)));
    }

    #[test]
    fn test_timeline_waiting_from_handshake_ack_to_answer() {
        let mut c = conn(10);
        c.handshake_ack_time_ns.set(Some(10 * NS_PER_S + 1));
        c.milestones.server_data_ns.set(Some(14 * NS_PER_S));
        let mut t = Timeline::default();
        t.add_connection(&c, Outcome::Completed);
        let got: Vec<(i64, u64, u64)> = t.seconds(None).iter().map(|(s, c)| (*s, c.waiting_in, c.waiting_out)).collect();
        assert_eq!(got, vec![(10, 1, 0), (14, 0, 1)]);
    }

    // ---- merging ----

    #[test]
    fn test_timeline_add_sums_second_by_second() {
        let (mut a, mut b) = (Timeline::default(), Timeline::default());
        a.add_connection(&conn(5), Outcome::Refused);
        b.add_connection(&conn(5), Outcome::Refused);
        b.add_connection(&conn(7), Outcome::Completed);
        a.add(&b);
        let got: Vec<(i64, u64)> = a.seconds(None).iter().map(|(s, c)| (*s, c.new.iter().sum())).collect();
        assert_eq!(got, vec![(5, 2), (7, 1)]);
    }

    #[test]
    fn test_timeline_kept_per_server() {
        let mut other = conn(5);
        other.server.port = 9001;
        let mut t = Timeline::default();
        t.add_connection(&conn(5), Outcome::Completed);
        t.add_connection(&other, Outcome::Refused);
        assert_eq!(t.servers().len(), 2);
        let only = t.seconds(Some(other.server));
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].1.new[Outcome::Refused.index()], 1);
        assert_eq!(only[0].1.new[Outcome::Completed.index()], 0);
        assert_eq!(t.seconds(None)[0].1.new.iter().sum::<u64>(), 2);
    }

    #[test]
    fn test_timeline_before_1970_rounds_down() {
        assert_eq!(second_of(-1), -1);
        assert_eq!(second_of(NS_PER_S - 1), 0);
    }
}
