//! What ICMP errors tied to a connection (src/flow/icmp.rs) mean for its verdict: a connect
//! attempt ended by an error, and a path MTU black hole.

use crate::decode::icmp::{IcmpClass, IcmpKind};
use crate::flow::connection::DataSeries;
use crate::flow::icmp::IcmpAnswer;
use super::{Symptom, Symptoms};
use crate::flow::{Connection, Side};

/// A re-sent segment at least this long can be a path MTU victim: below it, the IPv6 minimum
/// MTU (1280, RFC 8200 §5) and every IPv4 path worth the name carry it.
pub const MIN_BLACK_HOLE_LEN: u32 = 1200;
/// Sends of one segment, all full-size and unacknowledged, before it is a black hole: the first
/// send and at least two timer re-sends (one loss is loss).
const MIN_BLACK_HOLE_SENDS: usize = 3;

/// The error that ended the client's connect(): one that answered the client's SYN (its quoted
/// sequence number is the ISN), of a kind Linux treats as fatal in SYN-SENT, after which no
/// SYN-ACK came and the client sent no other SYN. We model Linux here (Linux v6.6
/// net/ipv4/tcp_ipv4.c: tcp_v4_err(), net/ipv6/tcp_ipv6.c: tcp_v6_err(): in SYN-SENT the
/// error is given to connect() and the socket closed, tcp_done()). A client that re-sends its
/// SYN after each error (Windows does) and is answered again ends the same way.
pub fn connect_error(c: &Connection) -> Option<&IcmpAnswer> {
    if c.partial || c.synack_count > 0 {
        return None;
    }
    let isn = c.base_seq[Side::Client.index()]?;
    let last_syn_ns = c.retransmits.as_ref().and_then(|log| log.syn.last()).map(|s| s.time_ns).or(c.syn_time_ns.get())?;
    let v6 = c.client.ip.is_ipv6();
    c.icmp_answers()
        .iter()
        .rev()
        .find(|a| a.answers == Side::Client && a.seq == isn && a.kind.connect_errno(v6).is_some())
        .filter(|a| a.time_ns >= last_syn_ns)
}

/// The classes of the errors that answered the connection's packets (too-big ones aside).
pub fn classes(c: &Connection) -> impl Iterator<Item = IcmpClass> + '_ {
    c.icmp_answers().iter().map(|a| a.kind.class()).filter(|&k| k != IcmpClass::TooBig)
}

/// Path MTU discovery working (RFC 1191 §3, RFC 8201 §4): a too-big error answered the
/// connection's packets and no black hole followed. The smallest MTU such an error gave, if any.
pub fn pmtu_discovered(c: &Connection, symptoms: Symptoms) -> Option<Option<u32>> {
    if symptoms.contains(Symptom::MtuBlackHole) {
        return None;
    }
    let too_big: Vec<&IcmpAnswer> = c.icmp_answers().iter().filter(|a| a.kind.class() == IcmpClass::TooBig).collect();
    if !too_big.is_empty() {
        return Some(too_big.iter().filter_map(|a| a.mtu).min());
    }
    resegmented(c).map(|len| Some(len + headers(c)))
}

/// Path MTU discovery seen where the too-big error is not (at the receiver, or with the error
/// filtered before the capture point): the sender re-sent a full-size segment cut in two, a
/// smaller one and the rest, adjacent. After an MTU drop Linux re-sends what was in flight at the
/// new size (Linux v6.6 net/ipv4/tcp_output.c: tcp_fragment() from tcp_simple_retransmit()),
/// and the full-size originals never reached the capture point. A loss re-sends whole segments.
/// The new segment size, if so.
pub(crate) fn resegmented(c: &Connection) -> Option<u32> {
    let log = c.retransmits.as_ref()?;
    log.data.iter().find_map(|a| {
        let full = full_size(c, a.from)?;
        let first = a.last_len;
        let cut = first > 0 && first < full;
        let rest = log.data.iter().find(|b| b.from == a.from && b.seq == a.seq.wrapping_add(first))?;
        (cut && first + rest.last_len == full).then_some(first)
    })
}

/// The largest payload `from` may send: the MSS the peer's SYN (SYN-ACK) announced, less the
/// timestamp option every segment carries once both SYNs offered it (RFC 7323 §3).
fn full_size(c: &Connection, from: Side) -> Option<u32> {
    let mss = u32::from(c.options[from.other().index()]?.mss?);
    let timestamps = c.options.iter().all(|o| o.is_some_and(|o| o.timestamps));
    Some(mss.saturating_sub(if timestamps { 12 } else { 0 }))
}

/// A path MTU black hole: a full-size data segment sent again and again and never
/// acknowledged, while the connection's smaller packets got through (the peer had acknowledged
/// everything before it), or while a router said the segment was too big and it was not sent
/// smaller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlackHole {
    pub from: Side,
    /// The payload length that never got through.
    pub len: u32,
    /// The IP packet that carried it: IP and TCP headers, and the timestamp option every segment
    /// carries once both SYNs offered it (RFC 7323 §3: 10 bytes and two NOPs).
    pub ip_len: u32,
    /// The MTU a router announced for it, if any error came back.
    pub mtu: Option<u32>,
    pub frag_needed: bool,
    /// Seen from the receiver's side (`vanished_full_size`): the bytes that never arrived, and
    /// the largest payload that did.
    pub vanished: Option<u32>,
    pub largest_through: Option<u32>,
}

/// A hole this long lasted past any re-send a loss would get: the initial RTO (RFC 6298 §2.1,
/// Linux's TCP_TIMEOUT_INIT) and the first back-offs after Linux's 200 ms minimum.
const HOLE_OPEN_NS: i64 = 1_000_000_000;

pub fn black_hole(c: &Connection) -> Option<BlackHole> {
    let stuck = c.retransmits.as_ref().and_then(|log| log.data.iter().find_map(|d| stuck_full_size(c, d)));
    stuck.or_else(|| vanished_full_size(c))
}

/// A path MTU black hole seen from the receiver's side: after a completed handshake whose MSS
/// allows full-size segments, a segment (data, FIN, RST) came whose sequence number is past at
/// least a full-size segment's worth of bytes that never arrived, nor were acknowledged, for a
/// second or more, while nothing of that sender's as large as `MIN_BLACK_HOLE_LEN` ever got
/// through. Loss would have been repaired by a re-send within that time (RFC 6298 §5); a link
/// that cannot carry full-size packets lets only the small ones through (RFC 1191 §1).
fn vanished_full_size(c: &Connection) -> Option<BlackHole> {
    let v = c.vanished.as_deref().filter(|v| !v.filled)?;
    let full = full_size(c, v.from)?;
    let hole = v.end.wrapping_sub(v.start);
    let lasted = v.quiet_before_ns >= HOLE_OPEN_NS || c.last_time_ns - v.time_ns >= HOLE_OPEN_NS;
    let small_through = v.largest_through < MIN_BLACK_HOLE_LEN;
    if c.partial || !c.handshake_completed() || full < MIN_BLACK_HOLE_LEN || hole < MIN_BLACK_HOLE_LEN
        || !lasted || !small_through
    {
        return None;
    }
    Some(BlackHole {
        from: v.from,
        len: full,
        ip_len: full + headers(c),
        mtu: None,
        frag_needed: false,
        vanished: Some(hole),
        largest_through: Some(v.largest_through),
    })
}

fn stuck_full_size(c: &Connection, d: &DataSeries) -> Option<BlackHole> {
    if d.acked || d.sends.len() < MIN_BLACK_HOLE_SENDS || d.last_len < MIN_BLACK_HOLE_LEN {
        return None;
    }
    let too_big = c.icmp_answers().iter().find(|a| a.answers == d.from && matches!(a.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig));
    // Smaller packets got through: the handshake completed and the peer had acknowledged
    // everything the sender sent before this segment (at least its SYN or SYN-ACK).
    let smaller_through = c.handshake_completed() && d.peer_ack == Some(d.seq);
    if !smaller_through && too_big.is_none() {
        return None;
    }
    Some(BlackHole {
        from: d.from,
        len: d.last_len,
        ip_len: d.last_len + headers(c),
        mtu: too_big.and_then(|a| a.mtu),
        frag_needed: too_big.is_some(),
        vanished: None,
        largest_through: None,
    })
}

/// IP and TCP header bytes around a segment's payload (IPv4 and IPv6 without extension headers).
fn headers(c: &Connection) -> u32 {
    let ip = if c.client.ip.is_ipv6() { 40 } else { 20 };
    let timestamps = c.options.iter().all(|o| o.is_some_and(|o| o.timestamps));
    ip + 20 + if timestamps { 12 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::connection::Send;
    use crate::flow::FrameRef;

    fn conn() -> Connection {
        let ep = |s: &str| crate::flow::Endpoint { ip: "10.0.0.1".parse().unwrap(), port: s.parse().unwrap() };
        let mut c = Connection::new(0, ep("40000"), ep("9000"), false, FrameRef::default(), 0);
        c.base_seq = [Some(100), Some(5000)];
        c.syn_count = 1;
        c.syn_time_ns.set(Some(0));
        c
    }

    fn answer(kind: IcmpKind, seq: u32, time_ns: i64, answers: Side) -> IcmpAnswer {
        IcmpAnswer {
            at: FrameRef { file: 0, frame: 2 },
            time_ns,
            sender: "192.0.2.1".parse().unwrap(),
            kind,
            mtu: Some(1400),
            answers,
            seq,
            quoted_len: 60,
            dont_fragment: true,
            answers_role: None,
            answers_frame: None,
        }
    }

    fn with_icmp(mut c: Connection, a: IcmpAnswer) -> Connection {
        c.icmp.get_or_insert_with(Box::default).answers.push(a);
        c
    }

    #[test]
    fn test_syn_sent_fatal_error_quoting_the_syn_ends_the_connect() {
        let c = with_icmp(conn(), answer(IcmpKind::HostProhibited, 100, 10, Side::Client));
        assert_eq!(connect_error(&c).map(|a| a.kind), Some(IcmpKind::HostProhibited));
    }

    #[test]
    fn test_syn_sent_frag_needed_or_late_syn_does_not_end_the_connect() {
        let c = with_icmp(conn(), answer(IcmpKind::FragNeeded, 100, 10, Side::Client));
        assert_eq!(connect_error(&c), None);
        let mut c = with_icmp(conn(), answer(IcmpKind::PortUnreachable, 100, 10, Side::Client));
        let send = |t| Send { at: FrameRef::default(), time_ns: t, triggered: false };
        c.retransmits_mut().syn = vec![send(0), send(1_000_000_000)];
        assert_eq!(connect_error(&c), None);
        c.synack_count = 1;
        assert_eq!(connect_error(&c), None);
    }

    #[test]
    fn test_resend_fitting_the_mtu_after_a_too_big_error_is_path_mtu_discovery() {
        let c = with_icmp(conn(), answer(IcmpKind::FragNeeded, 101, 10, Side::Client));
        assert!(c.resent_smaller_after_too_big(Side::Client, 1348, 11));
        assert!(!c.resent_smaller_after_too_big(Side::Client, 1448, 11), "still larger than the MTU");
        assert!(!c.resent_smaller_after_too_big(Side::Client, 1348, 9), "before the error");
        assert!(!c.resent_smaller_after_too_big(Side::Server, 1348, 11), "the other side's");
        assert_eq!(pmtu_discovered(&c, Symptoms::default()), Some(Some(1400)));
        let mut hole = Symptoms::default();
        hole.insert(Symptom::MtuBlackHole);
        assert_eq!(pmtu_discovered(&c, hole), None);
        let c = with_icmp(conn(), answer(IcmpKind::HostUnreachable, 101, 10, Side::Client));
        assert!(!c.resent_smaller_after_too_big(Side::Client, 1348, 11));
        assert_eq!(pmtu_discovered(&c, Symptoms::default()), None);
    }

    #[test]
    fn test_established_full_size_segment_never_acked_after_smaller_ones_is_a_black_hole() {
        let mut c = conn();
        let send = |t| Send { at: FrameRef::default(), time_ns: t, triggered: false };
        let log = c.retransmits_mut();
        log.data(Side::Server, 5101, Some(send(0)), send(1), false);
        log.data(Side::Server, 5101, None, send(2), false);
        log.sized(Side::Server, 5101, 1448, Some(5101));
        c.handshake_ack_time_ns.set(Some(1));
        let hole = black_hole(&c).unwrap();
        assert_eq!((hole.from, hole.len, hole.ip_len, hole.mtu), (Side::Server, 1448, 1488, None));
        c.retransmits_mut().acknowledged(Side::Server, 5101 + 1448, 0, None);
        assert_eq!(black_hole(&c), None);
    }

    #[test]
    fn test_established_segment_stuck_with_data_unacknowledged_before_it_needs_a_too_big_error() {
        let mut c = conn();
        let send = |t| Send { at: FrameRef::default(), time_ns: t, triggered: false };
        let log = c.retransmits_mut();
        log.data(Side::Server, 5001, Some(send(0)), send(1), false);
        log.data(Side::Server, 5001, None, send(2), false);
        log.sized(Side::Server, 5001, 1448, Some(4000));
        assert_eq!(black_hole(&c), None);
        let c = with_icmp(c, answer(IcmpKind::FragNeeded, 5001, 3, Side::Server));
        assert_eq!(black_hole(&c).map(|h| (h.mtu, h.frag_needed)), Some((Some(1400), true)));
    }

    /// The client's stream seen at the server, its full-size segments (1,448 bytes) dropped on
    /// the way: `segments` of (first byte, length) in the order they arrived.
    fn receiver_side(segments: &[(u32, u32)]) -> Connection {
        use crate::decode::TcpOptions;
        use crate::flow::wire::*;
        let ts = TcpOptions { timestamp: Some((1, 0)), ..plain() };
        let mut w = Wire::new();
        w.handshake_with(ts, ts);
        for (i, &(seq, len)) in segments.iter().enumerate() {
            w.send(3 + i as i64, C, ACK, CISN + seq, SISN + 1, len);
        }
        w.conn().clone()
    }

    #[test]
    fn test_full_size_segments_resent_cut_in_two_at_the_receiver_are_pmtu_discovery() {
        // After the router's error the client re-sent each 1,448-byte segment as 1,148 + 300.
        let c = receiver_side(&[(1, 1148), (1149, 300), (14481, 1148), (1449, 1148), (2597, 300)]);
        assert_eq!(pmtu_discovered(&c, Symptoms::default()), Some(Some(1148 + 52)));
        assert!(crate::detect::checks::of(&c).failed(crate::detect::checks::Check::ResentWhole));
    }

    #[test]
    fn test_full_size_segments_resent_whole_at_the_receiver_are_loss() {
        let c = receiver_side(&[(1, 1448), (2897, 1448), (1449, 1448)]);
        assert_eq!(pmtu_discovered(&c, Symptoms::default()), None);
        let checks = crate::detect::checks::of(&c);
        assert!(checks.held(crate::detect::checks::Check::ResentWhole) && checks.held(crate::detect::checks::Check::ResendNotDsacked));
    }
}
