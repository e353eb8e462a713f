//! A capture kept to the first packets of each flow (a flow-sampling tap, a dataset cut for
//! size): every flow longer than the limit stops at the same frame count, mid-exchange, while the
//! capture goes on. What such a flow did not show afterwards was not seen, not unsent
//! (`checks::Check::FlowNotTrimmed`).

use crate::flow::{Connection, Side};

/// Connections stopped at the longest count before the capture is taken as trimmed there: two
/// alike connections that happen to be the longest are common; three alike and unclosed, with
/// one of them cut in a two-way exchange, are a limit.
const MIN_CUT: u32 = 3;
/// A limit below this would cut handshakes, which no tool meant to keep flows does.
const MIN_LIMIT: u32 = 4;

/// The longest connections of a capture, in frames (copies included: a trimmer counts frames).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowLengths {
    /// The most frames any connection had.
    pub longest: u32,
    /// Connections of `longest` frames that never closed (no FIN nor RST from either side).
    pub unclosed_at_longest: u32,
    /// Whether one of those had carried data both ways: a working exchange, cut.
    pub two_way_at_longest: bool,
}

/// The frames of a connection that never closed; none for one that closed.
pub fn unclosed_frames(c: &Connection) -> Option<u32> {
    let closed = c.counts.iter().any(|d| d.fin || d.rst);
    (!closed).then(|| frames(c))
}

fn frames(c: &Connection) -> u32 {
    let frames = c.counts.iter().map(|d| d.packets).sum::<u64>() + u64::from(c.duplicates);
    u32::try_from(frames).unwrap_or(u32::MAX)
}

impl FlowLengths {
    pub fn add(&mut self, c: &Connection) {
        let frames = frames(c);
        let two_way = c.counts[Side::Client.index()].payload_bytes > 0 && c.counts[Side::Server.index()].payload_bytes > 0;
        self.take(FlowLengths { longest: frames, unclosed_at_longest: u32::from(unclosed_frames(c).is_some()), two_way_at_longest: two_way && unclosed_frames(c).is_some() });
    }

    /// Adds the lengths of another run (a merge of two analyses).
    pub fn merge(&mut self, other: FlowLengths) {
        self.take(other);
    }

    fn take(&mut self, other: FlowLengths) {
        if other.longest > self.longest {
            *self = other;
        } else if other.longest == self.longest {
            self.unclosed_at_longest += other.unclosed_at_longest;
            self.two_way_at_longest |= other.two_way_at_longest;
        }
    }

    /// The frame count every long flow was cut at, if the capture was trimmed.
    pub fn trimmed_at(&self) -> Option<u32> {
        (self.longest >= MIN_LIMIT && self.unclosed_at_longest >= MIN_CUT && self.two_way_at_longest).then_some(self.longest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::flags::{ACK, FIN};
    use crate::flow::wire::*;

    /// A connection of a handshake, a request and its answer, and `acks` more ACKs from the
    /// client; closed with FINs when `close`.
    fn exchange(acks: u32, close: bool) -> Connection {
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(3, &[]);
        w.send(10, S, ACK, SISN + 1, CISN + 101, 300);
        for i in 0..acks {
            w.send(20 + i64::from(i), C, ACK, CISN + 101, SISN + 301, 0);
        }
        if close {
            w.send(100, C, FIN | ACK, CISN + 101, SISN + 301, 0);
            w.send(101, S, FIN | ACK, SISN + 301, CISN + 102, 0);
        }
        w.conn().clone()
    }

    fn lengths(conns: &[Connection]) -> FlowLengths {
        let mut l = FlowLengths::default();
        conns.iter().for_each(|c| l.add(c));
        l
    }

    #[test]
    fn test_three_unclosed_two_way_flows_at_the_longest_count_are_a_trim() {
        let cut = exchange(2, false);
        let n = frames(&cut);
        let l = lengths(&[cut.clone(), exchange(0, true), cut.clone(), cut]);
        assert_eq!(l.trimmed_at(), Some(n));
    }

    #[test]
    fn test_a_longer_flow_or_a_closed_one_is_no_trim() {
        let cut = exchange(2, false);
        // One flow went past the count: nothing was cut there.
        assert_eq!(lengths(&[cut.clone(), cut.clone(), cut.clone(), exchange(3, false)]).trimmed_at(), None);
        // Two at the count are two alike connections.
        assert_eq!(lengths(&[cut.clone(), cut]).trimmed_at(), None);
        // Closed flows ended themselves.
        let closed = exchange(0, true);
        assert_eq!(lengths(&[closed.clone(), closed.clone(), closed]).trimmed_at(), None);
    }

    #[test]
    fn test_merged_runs_add_at_the_same_longest_count() {
        let cut = exchange(2, false);
        let mut a = lengths(&[cut.clone(), cut.clone()]);
        a.merge(lengths(&[cut.clone()]));
        assert_eq!(a.trimmed_at(), Some(frames(&cut)));
    }
}
