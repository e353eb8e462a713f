//! ICMP errors tied to the connection and the packet they answer.
//!
//! The quoted segment went from one endpoint of the connection to the other, so its 4-tuple,
//! read in the quote's direction, finds the flow, and its sender is the side whose packet was
//! refused. Like Linux, an error whose quoted sequence number lies outside the sender's window
//! (from the oldest unacknowledged byte to the next one to send) is not that connection's
//! (Linux v6.6 net/ipv4/tcp_ipv4.c: tcp_v4_err(): !between(seq, snd_una, snd_nxt) counts
//! LINUX_MIB_OUTOFWINDOWICMPS and drops it). The quote never counts as a packet of the
//! connection.

use super::tracker::Tracker;
use crate::decode::icmp::{IcmpMessage, Quote};
use crate::flow::event::{FrameRef, Side};
use crate::flow::icmp::{IcmpAnswer, IcmpMatch};
use crate::flow::key::{Endpoint, FlowKey};
use crate::flow::seq::SeqNumber;
use crate::flow::store::Counter;

impl<C: Counter> Tracker<C> {
    /// Ties one ICMP error to the live connection and packet it answers.
    pub fn on_icmp(&mut self, msg: &IcmpMessage, at: FrameRef, time_ns: i64) -> IcmpMatch {
        let q = match msg.quote {
            Quote::Tcp(q) => q,
            Quote::TcpTruncated => return IcmpMatch::Truncated,
            Quote::Other(_) | Quote::Unreadable => return IcmpMatch::NotTcp,
        };
        let (src, dst) = (Endpoint { ip: q.src, port: q.src_port }, Endpoint { ip: q.dst, port: q.dst_port });
        let (key, src_is_low) = FlowKey::oriented(src, dst);
        let key = key.with_vlan(msg.vlan);
        let Some(flow) = self.table.live_mut(&key) else { return IcmpMatch::NoConnection };
        let side = if src_is_low == flow.client_is_low { Side::Client } else { Side::Server };
        let conn = self.store.get_mut(flow.slot());
        let dir = &flow.direction[side.index()];
        // snd_una: the peer's latest ACK, or the sender's ISN before any; snd_nxt: nextseq.
        let una = flow.direction[side.other().index()].last_ack.or(conn.base_seq[side.index()]);
        let (Some(una), Some(next)) = (una, dir.next_seq) else { return IcmpMatch::OutOfWindow };
        let seq = SeqNumber(q.seq);
        if seq.before(SeqNumber(una)) || seq.after(next) {
            return IcmpMatch::OutOfWindow;
        }
        let (answers_role, answers_frame) = match dir.last_packet() {
            Some((role, frame, _)) => (Some(role), Some(frame)),
            None => (None, None),
        };
        conn.add_icmp(IcmpAnswer {
            at,
            time_ns,
            sender: msg.sender,
            kind: msg.kind,
            mtu: msg.mtu,
            answers: side,
            seq: q.seq,
            quoted_len: q.ip_len,
            dont_fragment: q.dont_fragment,
            answers_role,
            answers_frame,
        });
        IcmpMatch::Tied(side)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::icmp::{IcmpKind, QuotedTcp};
    use crate::flow::event::PacketRole;
    use crate::flow::icmp::IcmpSummary;
    use std::net::IpAddr;
    use crate::decode::{flags, Segment, TcpOptions};
    use crate::census::Census;
    use crate::flow::TrackerOptions;

    fn syn(seq: u32) -> Segment {
        Segment {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            src_port: 40000,
            dst_port: 9000,
            seq,
            ack: 0,
            flags: flags::SYN,
            window: 64240,
            payload_len: 0,
            options: TcpOptions::default(),
            snaplen_cut: false,
            ip_id: 1,
            checksum: 0,
            vlan: 0,
            ttl: 64,
        }
    }

    fn error(kind: IcmpKind, seq: u32, quote_from_client: bool) -> IcmpMessage {
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let (src, dst, sp, dp) = if quote_from_client { (a, b, 40000, 9000) } else { (b, a, 9000, 40000) };
        let quote = Quote::Tcp(QuotedTcp { src, dst, src_port: sp, dst_port: dp, seq, ip_len: 60, dont_fragment: true });
        IcmpMessage { sender: "192.0.2.1".parse().unwrap(), dst: a, kind, mtu: None, quote, vlan: 0 }
    }

    fn frame(n: u64) -> FrameRef {
        FrameRef { file: 0, frame: n }
    }

    // --- SYN-SENT ---

    #[test]
    fn test_syn_sent_icmp_quoting_the_syn_is_tied_to_the_client() {
        let mut t = Tracker::<Census>::new(TrackerOptions::default());
        t.on_segment(&syn(1000), frame(1), 0);
        assert_eq!(t.on_icmp(&error(IcmpKind::AdminProhibited, 1000, true), frame(2), 1_000), IcmpMatch::Tied(Side::Client));
        let c = &t.connections()[0];
        let a = c.icmp_answers()[0];
        assert_eq!((a.kind, a.answers, a.answers_role, a.answers_frame), (IcmpKind::AdminProhibited, Side::Client, Some(PacketRole::Syn), Some(frame(1))));
        // The quote is not a packet of the connection.
        assert_eq!(c.counts[0].packets + c.counts[1].packets, 1);
    }

    #[test]
    fn test_syn_sent_icmp_quoting_another_isn_is_out_of_window() {
        let mut t = Tracker::<Census>::new(TrackerOptions::default());
        t.on_segment(&syn(1000), frame(1), 0);
        assert_eq!(t.on_icmp(&error(IcmpKind::HostUnreachable, 5000, true), frame(2), 1_000), IcmpMatch::OutOfWindow);
        assert!(t.connections()[0].icmp_answers().is_empty());
    }

    #[test]
    fn test_syn_sent_icmp_for_unknown_tuple_or_truncated_or_udp() {
        let mut t = Tracker::<Census>::new(TrackerOptions::default());
        assert_eq!(t.on_icmp(&error(IcmpKind::PortUnreachable, 1000, true), frame(1), 0), IcmpMatch::NoConnection);
        let mut m = error(IcmpKind::PortUnreachable, 1000, true);
        m.quote = Quote::TcpTruncated;
        assert_eq!(t.on_icmp(&m, frame(2), 0), IcmpMatch::Truncated);
        m.quote = Quote::Other(17);
        assert_eq!(t.on_icmp(&m, frame(3), 0), IcmpMatch::NotTcp);
        let mut s = IcmpSummary::default();
        s.count(IcmpKind::PortUnreachable, IcmpMatch::NotTcp);
        s.count(IcmpKind::PortUnreachable, IcmpMatch::Tied(Side::Client));
        assert_eq!((s.total(), s.tied, s.not_tcp, s.by_slug()), (2, 1, 1, vec![("port_unreachable", 2)]));
    }

    #[test]
    fn test_syn_sent_icmp_quoting_the_server_side_is_tied_to_the_server() {
        let mut t = Tracker::<Census>::new(TrackerOptions::default());
        t.on_segment(&syn(1000), frame(1), 0);
        let mut synack = syn(7000);
        std::mem::swap(&mut synack.src, &mut synack.dst);
        std::mem::swap(&mut synack.src_port, &mut synack.dst_port);
        synack.flags = flags::SYN | flags::ACK;
        synack.ack = 1001;
        t.on_segment(&synack, frame(2), 10);
        assert_eq!(t.on_icmp(&error(IcmpKind::HostUnreachable, 7000, false), frame(3), 20), IcmpMatch::Tied(Side::Server));
    }
}
