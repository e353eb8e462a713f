//! Joining a proxy's log lines to the connections they describe (docs/evidence.md).
//!
//! A line says when the proxy gave up (or finished), on which upstream, and how: a connect
//! timeout, a read timeout, a refused connect, a reset, an early close, a success. Each
//! connection has a shape from the capture (no handshake, request unanswered, refused, ...) and
//! the moment the proxy gave up on it when the capture shows it (its FIN or RST). A line ties to
//! one connection of a matching shape on the same upstream whose give-up moment falls in the
//! line's second, or, when the capture does not show that moment, which was still waiting then;
//! lines are taken in time order and the earliest waiting connection first (a proxy's timeouts
//! expire in the order the connections began). A line that names the proxy's source port ties
//! to the connection from that port open in its second, whatever its shape.
//!
//! The log's clock is not the capture's: nginx writes local time with 1 s resolution. The
//! offset is searched in steps of a quarter hour (time zones) among those that put the lines
//! over the capture, keeping the one that ties most lines; the remaining skew is the median
//! distance between a tied line's second and the give-up moment the capture shows.

use crate::detect::{classify, Outcome};
use crate::flow::{Connection, Endpoint, EventKind, Side};

const NS: i64 = 1_000_000_000;
/// How far outside its second a line's moment may be from the packet that shows it.
pub const SLACK_NS: i64 = 250_000_000;
/// A FIN this soon after the ACK of a re-sent request had waited for it in the send queue.
pub const QUEUED_FIN_NS: i64 = 500_000_000;
/// A connection still waiting when the capture ended was given up at most this long after it
/// (nginx's default proxy_read_timeout is 60 s).
pub const AFTER_END_NS: i64 = 300 * NS;
/// Step of the clock-offset search: time zones differ by multiples of a quarter hour.
pub const ZONE_STEP_NS: i64 = 15 * 60 * NS;
/// The largest time-zone offset searched (UTC-12 to UTC+14).
pub const ZONE_MAX_NS: i64 = 14 * 3600 * NS;
/// Two connections a line fits whose distances from what the line says differ by less than its
/// resolution and this are the same to the log.
pub const SAME_NS: i64 = 2_000_000;
/// The connections a tie is ambiguous with, kept.
pub const AMBIGUOUS_KEPT: usize = 5;

crate::slugs::slug_enum! {
    /// What a log line says happened.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum LineKind {
        /// "upstream timed out (110) while connecting to upstream"
        ConnectTimeout => "connect_timeout",
        /// "upstream timed out (110) while reading response header from upstream"
        ReadTimeout => "read_timeout",
        /// "upstream timed out (110) while sending request to upstream"
        SendTimeout => "send_timeout",
        /// "connect() failed (111: Connection refused)"
        Refused => "refused",
        /// "recv() failed (104: Connection reset by peer)"
        Reset => "reset",
        /// "upstream prematurely closed connection"
        PrematureClose => "premature_close",
        /// An access-log 504 that does not say which timeout.
        GatewayTimeout => "gateway_timeout",
        /// An access-log 502 that does not say which failure.
        BadGateway => "bad_gateway",
        /// The connect failed, without saying how (Envoy's `UF`: refused, timed out or reset).
        ConnectFailure => "connect_failure",
        /// The upstream closed or reset the connection before its answer was complete, without
        /// saying which (HAProxy's `SH`, `SD`; Envoy's `UC`).
        UpstreamClosed => "upstream_closed",
        /// An access-log line whose upstream answered.
        Answered => "answered",
    }
}

impl LineKind {
    /// The connection shapes a line of this kind can describe.
    pub fn fits(self, shape: Shape) -> bool {
        match self {
            LineKind::ConnectTimeout => matches!(shape, Shape::NoHandshake | Shape::ClosedAtConnect),
            LineKind::ReadTimeout | LineKind::SendTimeout => shape == Shape::Unanswered,
            LineKind::Refused => shape == Shape::Refused,
            LineKind::Reset => shape == Shape::Reset,
            LineKind::PrematureClose => shape == Shape::ServerClosed,
            LineKind::GatewayTimeout => matches!(shape, Shape::NoHandshake | Shape::ClosedAtConnect | Shape::Unanswered),
            LineKind::BadGateway => matches!(shape, Shape::Refused | Shape::Reset | Shape::ServerClosed),
            LineKind::ConnectFailure => matches!(shape, Shape::NoHandshake | Shape::ClosedAtConnect | Shape::Refused),
            LineKind::UpstreamClosed => matches!(shape, Shape::Reset | Shape::ServerClosed),
            LineKind::Answered => shape == Shape::Answered,
        }
    }
}

crate::slugs::slug_enum! {
    /// What the capture shows a connection went through, as a proxy would log it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Shape {
        /// No SYN-ACK reached the client: its connect() could only time out.
        NoHandshake => "no_handshake",
        /// A SYN-ACK came as the client gave up: it closed (or its kernel reset the late SYN-ACK,
        /// tcp_rcv_state_process() on a closed socket) without sending a byte. A connect() timing
        /// out as a re-sent SYN is answered.
        ClosedAtConnect => "closed_at_connect",
        /// Connected, the request sent, no answer before the client closed (or the capture ended).
        Unanswered => "unanswered",
        /// The server's RST answered the SYN.
        Refused => "refused",
        /// The server reset the connection after the handshake.
        Reset => "reset",
        /// The server closed before answering.
        ServerClosed => "server_closed",
        /// The server answered.
        Answered => "answered",
    }
}

impl Shape {
    /// A proxy logs an error for a connection of this shape.
    pub fn is_failure(self) -> bool {
        self != Shape::Answered
    }
}

/// One connection as the join sees it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    pub index: u32,
    pub id: u64,
    pub server: Endpoint,
    /// The proxy's source port: a line that names it ties exactly.
    pub client_port: u16,
    pub shape: Shape,
    /// From the first SYN to the handshake's ACK (the proxy's connect() returned), and to the
    /// server's first byte, when the capture shows them.
    pub connect_ns: Option<i64>,
    pub first_byte_ns: Option<i64>,
    pub first_ns: i64,
    pub last_ns: i64,
    /// When the client gave up or the exchange ended, if a packet shows it.
    pub end_ns: Option<i64>,
    /// Otherwise, the span the moment must lie in: not before the last packet sent before it
    /// (the request, the last SYN), not after a packet that shows it had passed (a FIN queued
    /// behind an unacknowledged request goes out with the next retransmission).
    pub earliest_ns: i64,
    pub latest_ns: i64,
}

fn first_event(c: &Connection, from: Side, kinds: &[EventKind]) -> Option<i64> {
    c.events.iter().find(|e| e.from == from && kinds.contains(&e.kind)).map(|e| e.time_ns)
}

/// The connection's shape and the moment that ends it, or None for one no proxy line describes
/// (its SYN was not captured).
pub fn candidate(c: &Connection, index: u32, end_ns: i64) -> Option<Candidate> {
    let (outcome, _) = classify(c, end_ns);
    let rst = c.milestones.first_rst();
    let client_fin = first_event(c, Side::Client, &[EventKind::Fin]);
    let client_rst = first_event(c, Side::Client, &[EventKind::Rst]).or_else(|| rst.filter(|r| r.from == Side::Client).map(|r| r.time_ns));
    let client_close = match (client_fin, client_rst) {
        (Some(f), Some(r)) => Some(f.min(r)),
        (f, r) => f.or(r),
    };
    let server_data = c.milestones.server_data_ns.get();
    // A moment no packet shows lies between these; None: open until the capture's end.
    let waited = (c.last_time_ns - c.first_time_ns).max(NS);
    let ongoing = c.last_time_ns + NS >= end_ns;
    let after_last_syn = if ongoing { end_ns + AFTER_END_NS } else { c.last_time_ns + waited + 2 * NS };
    let (shape, end, span) = match outcome {
        Outcome::Partial => return None,
        Outcome::Refused => (Shape::Refused, rst.map(|r| r.time_ns), None),
        Outcome::ResetByServer => (Shape::Reset, rst.map(|r| r.time_ns), None),
        // Its last request unanswered when the server closed, though earlier ones on a kept-alive
        // connection were answered.
        Outcome::ClosedByServer => (Shape::ServerClosed, c.milestones.server_closed_ns.get(), None),
        // connect() timed out: the SYNs stop when the proxy gives up, so after the last one and
        // before the next the backoff would have sent.
        _ if c.synack_count == 0 => (Shape::NoHandshake, None, Some((c.last_time_ns, after_last_syn))),
        _ => {
            let server_fin = c.milestones.server_closed_ns.get();
            let answered_in_time = match (server_data, client_close) {
                (Some(data), Some(close)) => data <= close,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if answered_in_time {
                (Shape::Answered, Some(c.last_time_ns), None)
            } else if let Some(fin) = server_fin.filter(|&f| client_close.is_none_or(|close| f <= close)) {
                (Shape::ServerClosed, Some(fin), None)
            } else if let (None, Some(close)) = (c.milestones.client_data_ns.get(), client_close) {
                if client_rst == Some(close) && c.handshake_ack_time_ns.get().is_none() {
                    // The RST answered a SYN-ACK that came after the socket was closed: the
                    // give-up lies between the first SYN and it.
                    (Shape::ClosedAtConnect, None, Some((c.syn_time_ns.get().unwrap_or(c.first_time_ns), close)))
                } else {
                    (Shape::ClosedAtConnect, Some(close), None)
                }
            } else if c.milestones.client_data_ns.get().is_some() || client_close.is_some() {
                let request = c.milestones.client_data_ns.get().unwrap_or(c.first_time_ns);
                // The request acknowledged before the FIN, and not just before it after re-sends (a
                // FIN that waited for the re-sent request's ACK follows it within a round trip).
                let resent_before = |acked: i64| {
                    c.events.iter().any(|e| e.from == Side::Client && e.kind == EventKind::DataRetransmit && e.time_ns <= acked)
                };
                let acked_before_close = match (c.milestones.client_data_acked_ns.get(), client_close) {
                    (Some(acked), Some(close)) => acked <= close && !(close - acked < QUEUED_FIN_NS && resent_before(acked)),
                    _ => false,
                };
                if client_rst.is_some_and(|r| client_close == Some(r)) || acked_before_close {
                    // An RST leaves at once, and so does a FIN with nothing unacknowledged before it.
                    (Shape::Unanswered, client_close, None)
                } else {
                    // A FIN queued behind the unacknowledged request leaves with its next re-send.
                    (Shape::Unanswered, None, Some((request, client_close.unwrap_or(end_ns + AFTER_END_NS))))
                }
            } else {
                (Shape::NoHandshake, None, Some((c.last_time_ns, after_last_syn)))
            }
        }
    };
    let (earliest_ns, latest_ns) = match (end, span) {
        (Some(e), _) => (e, e),
        (None, Some(span)) => span,
        (None, None) => (c.last_time_ns, if ongoing { end_ns + AFTER_END_NS } else { c.last_time_ns + waited + 2 * NS }),
    };
    let syn = c.syn_time_ns.get();
    let since_syn = |t: Option<i64>| syn.zip(t).map(|(s, t)| t - s).filter(|d| *d >= 0);
    Some(Candidate {
        index,
        id: c.id,
        server: c.server,
        client_port: c.client.port,
        shape,
        connect_ns: since_syn(c.handshake_ack_time_ns.get()),
        first_byte_ns: since_syn(server_data),
        first_ns: c.first_time_ns,
        last_ns: c.last_time_ns,
        end_ns: end,
        earliest_ns,
        latest_ns,
    })
}

/// One log line: when (the start of its second on the log's clock), where, what.
#[derive(Clone, Copy, Debug)]
pub struct Line {
    pub time_ns: i64,
    /// How long the line's time stands for (1 s for nginx's `$time_local`).
    pub resolution_ns: i64,
    /// None: any upstream (an access log without `$upstream_addr`).
    pub upstream: Option<Endpoint>,
    /// The proxy's source port when the line says it (HAProxy's `%bp`, Envoy's
    /// `%UPSTREAM_LOCAL_ADDRESS%`): the tie is then exact, whatever the shape.
    pub local_port: Option<u16>,
    /// The attempt's connect time and time to the response's first byte as the proxy measured
    /// them (nginx's `$upstream_connect_time`, `$upstream_header_time`; HAProxy's `%Tc`,
    /// `%Tc + %Tr`): a connection whose own times differ is tied only when no other fits.
    pub connect_ns: Option<i64>,
    pub header_ns: Option<i64>,
    /// When the attempt began (the proxy's connect()), on the log's clock, when the line says
    /// it to the millisecond (an access line's time less `$request_time`; HAProxy's date plus
    /// `%TR` and `%Tw`): set against the connection's first SYN.
    pub start_ns: Option<i64>,
    pub kind: LineKind,
}

/// Two measures of one span, the proxy's and the capture's, agree: within 10 ms and a tenth
/// (a capture point between the hosts moves each end by less than a round trip).
pub fn times_agree(logged_ns: i64, seen_ns: i64) -> bool {
    (logged_ns - seen_ns).abs() <= 10_000_000 + logged_ns.max(seen_ns) / 10
}

impl Line {
    /// How many of the line's timings the candidate's own contradict.
    fn timings_differ(&self, c: &Candidate) -> i64 {
        let differ = |logged: Option<i64>, seen: Option<i64>| logged.zip(seen).is_some_and(|(l, s)| !times_agree(l, s));
        i64::from(differ(self.connect_ns, c.connect_ns)) + i64::from(differ(self.header_ns, c.first_byte_ns))
    }
}

/// A line tied to a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tie {
    pub line: usize,
    pub candidate: usize,
}

/// The join of one log file's lines.
#[derive(Clone, Debug, Default)]
pub struct Join {
    pub ties: Vec<Tie>,
    /// Per tied line: the other connections the line fits as well as the one it is tied to (the
    /// log cannot tell them apart), at most `AMBIGUOUS_KEPT`.
    pub ambiguous: rustc_hash::FxHashMap<usize, Vec<usize>>,
    /// Log clock minus capture clock, the time-zone part.
    pub zone_ns: i64,
    /// The rest: the median distance between a tied line's second and the packet that shows
    /// the moment it describes (None when no tied connection shows that moment).
    pub skew_ns: Option<i64>,
    /// How many ties the skew rests on.
    pub skew_pairs: usize,
}

/// Candidates of one upstream and shape, in order of `earliest_ns`; those before `live` are
/// taken or over for every later line.
struct Group {
    server: Endpoint,
    shape: Shape,
    members: Vec<usize>,
    live: usize,
}

fn groups(candidates: &[Candidate]) -> Vec<Group> {
    let mut by: rustc_hash::FxHashMap<(Endpoint, Shape), Vec<usize>> = Default::default();
    for (i, c) in candidates.iter().enumerate() {
        by.entry((c.server, c.shape)).or_default().push(i);
    }
    let mut out: Vec<Group> = by
        .into_iter()
        .map(|((server, shape), mut members)| {
            members.sort_by_key(|&i| candidates.get(i).map_or(0, |c| c.earliest_ns));
            Group { server, shape, members, live: 0 }
        })
        .collect();
    out.sort_by_key(|g| (g.server, g.shape.slug()));
    out
}

fn by_client_port(candidates: &[Candidate]) -> rustc_hash::FxHashMap<u16, Vec<usize>> {
    let mut by: rustc_hash::FxHashMap<u16, Vec<usize>> = Default::default();
    for (i, c) in candidates.iter().enumerate() {
        by.entry(c.client_port).or_default().push(i);
    }
    by
}

/// The connection from the line's source port to its upstream that was open in the line's
/// second (a port is used again by later connections: the one whose span holds the line, else
/// the nearest within `SLACK_NS`).
fn exact(
    line: &Line, port: u16, start: i64, stop: i64, by_port: &rustc_hash::FxHashMap<u16, Vec<usize>>, candidates: &[Candidate],
    taken: &[bool],
) -> Option<usize> {
    let mut best: Option<(i64, usize)> = None;
    for &ci in by_port.get(&port)? {
        let Some(c) = candidates.get(ci) else { continue };
        if taken.get(ci).copied().unwrap_or(true) || line.upstream.is_some_and(|u| u != c.server) {
            continue;
        }
        let (from, to) = (c.first_ns, c.latest_ns.max(c.last_ns));
        let distance = if stop < from { from - stop } else if start > to { start - to } else { 0 };
        if distance <= SLACK_NS && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, ci));
        }
    }
    best.map(|(_, ci)| ci)
}

/// What a line says against a candidate; the smallest wins, field by field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Fit {
    /// The proxy's timings contradicted, or a shape that fits only when nothing else does.
    penalty: i64,
    /// How much further than the line's resolution its first SYN is from when the line says the
    /// attempt began.
    mismatch: i64,
    /// From the packet that shows the moment to the middle of the line's second; where no packet
    /// shows it, after every shown one, in the order the connections began waiting.
    distance: i64,
    /// Only that order tells it from others.
    by_order: bool,
}

fn fit(line: &Line, c: &Candidate, start: i64, stop: i64, offset_ns: i64, base: i64) -> Fit {
    let mismatch = line.start_ns.map_or(0, |s| ((c.first_ns - (s - offset_ns)).abs() - line.resolution_ns - SAME_NS).max(0));
    let (distance, by_order) = match c.end_ns {
        Some(end) => ((end - (start + stop) / 2).abs(), false),
        // A proxy's timeouts expire in the order they were set (nginx's timer tree, HAProxy's
        // task queue): the earliest set first, a connect's at its first SYN, a read's at the
        // request.
        None => {
            let set = if matches!(c.shape, Shape::NoHandshake | Shape::ClosedAtConnect) { c.first_ns } else { c.earliest_ns };
            (NS * 3600 + (set - base).max(0) / 1000, true)
        }
    };
    let penalty = line.timings_differ(c) * NS * 7200
        // A handshake completed as the client closed is a connect timeout's only when no
        // connection without one fits (a health check also connects and closes).
        + i64::from(c.shape == Shape::ClosedAtConnect) * NS * 7200;
    Fit { penalty, mismatch, distance, by_order }
}

/// Ties lines to candidates for one clock offset (log minus capture). Lines in time order;
/// `preset` (line, candidate): ties already made (through another file's line of the same request).
fn tie(lines: &[Line], order: &[usize], candidates: &[Candidate], offset_ns: i64, preset: &[Tie]) -> (Vec<Tie>, rustc_hash::FxHashMap<usize, Vec<usize>>) {
    let base = candidates.iter().map(|c| c.earliest_ns).min().unwrap_or(0);
    let mut taken = vec![false; candidates.len()];
    let mut groups = groups(candidates);
    let by_port = by_client_port(candidates);
    let mut ties = Vec::new();
    let mut ambiguous: rustc_hash::FxHashMap<usize, Vec<usize>> = Default::default();
    let mut done = vec![false; lines.len()];
    for t in preset {
        if let (Some(x), Some(d)) = (taken.get_mut(t.candidate), done.get_mut(t.line)) {
            if !*x && !*d {
                (*x, *d) = (true, true);
                ties.push(*t);
            }
        }
    }
    for &li in order {
        let Some(line) = lines.get(li) else { continue };
        if done.get(li).copied().unwrap_or(true) {
            continue;
        }
        let start = line.time_ns - offset_ns;
        let stop = start + line.resolution_ns;
        if let Some(port) = line.local_port {
            if let Some(ci) = exact(line, port, start, stop, &by_port, candidates, &taken) {
                if let Some(t) = taken.get_mut(ci) {
                    *t = true;
                }
                ties.push(Tie { line: li, candidate: ci });
            }
            continue;
        }
        // Every candidate the line fits: (its fit, its index).
        let mut fitting: Vec<(Fit, usize)> = Vec::new();
        for g in groups.iter_mut() {
            if !line.kind.fits(g.shape) || line.upstream.is_some_and(|u| u != g.server) {
                continue;
            }
            // Lines come in time order: a candidate taken, or whose span ended before this
            // line's second, is over for every later line too.
            while let Some(&ci) = g.members.get(g.live) {
                let over = candidates.get(ci).is_none_or(|c| c.latest_ns < start - SLACK_NS);
                if !(taken.get(ci).copied().unwrap_or(true) || over) {
                    break;
                }
                g.live += 1;
            }
            for &ci in g.members.get(g.live..).unwrap_or_default() {
                let Some(c) = candidates.get(ci) else { continue };
                if c.earliest_ns > stop + SLACK_NS {
                    break;
                }
                if taken.get(ci).copied().unwrap_or(true) || c.latest_ns < start - SLACK_NS {
                    continue;
                }
                fitting.push((fit(line, c, start, stop, offset_ns, base), ci));
            }
        }
        // The best fit, the first found of equals.
        let Some(&(best_fit, best)) = fitting.iter().enumerate().min_by_key(|(at, (f, _))| (*f, *at)).map(|(_, f)| f) else {
            continue;
        };
        if let Some(t) = taken.get_mut(best) {
            *t = true;
        }
        ties.push(Tie { line: li, candidate: best });
        // The others the log cannot tell from it: the same penalties, and the same distances
        // within the line's resolution, or only the order between them.
        let close = |a: i64, b: i64| (a - b).abs() <= line.resolution_ns + SAME_NS;
        let same: Vec<usize> = fitting
            .iter()
            .filter(|(f, ci)| {
                *ci != best && f.penalty == best_fit.penalty && close(f.mismatch, best_fit.mismatch)
                    && (f.by_order && best_fit.by_order || !f.by_order && !best_fit.by_order && close(f.distance, best_fit.distance))
            })
            .map(|(_, ci)| *ci)
            .take(AMBIGUOUS_KEPT)
            .collect();
        if !same.is_empty() {
            ambiguous.insert(li, same);
        }
    }
    (ties, ambiguous)
}

/// Joins one file's lines. `zone_ns`: the offset when the file says its time zone; otherwise
/// searched. Candidates in order of first packet.
pub fn join(lines: &[Line], candidates: &[Candidate], zone_ns: Option<i64>, capture: (i64, i64)) -> Join {
    join_with(lines, candidates, zone_ns, capture, &[])
}

/// `join`, with `preset` ties made before the others (an error line tied through the access
/// line of its request).
pub fn join_with(lines: &[Line], candidates: &[Candidate], zone_ns: Option<i64>, capture: (i64, i64), preset: &[Tie]) -> Join {
    let mut order: Vec<usize> = (0..lines.len()).collect();
    order.sort_by_key(|&i| lines.get(i).map_or(0, |l| l.time_ns));
    let (Some(first), Some(last)) = (order.first().and_then(|&i| lines.get(i)), order.last().and_then(|&i| lines.get(i))) else {
        return Join::default();
    };
    let offsets: Vec<i64> = match zone_ns {
        Some(z) => vec![z],
        None => {
            let mut o: Vec<i64> = (-(ZONE_MAX_NS / ZONE_STEP_NS)..=ZONE_MAX_NS / ZONE_STEP_NS)
                .map(|k| k * ZONE_STEP_NS)
                // The lines, moved by this offset, overlap the capture.
                .filter(|off| first.time_ns - off <= capture.1 + 60 * NS && last.time_ns + NS - off >= capture.0 - 60 * NS)
                .collect();
            o.sort_by_key(|off| off.abs());
            o
        }
    };
    let mut best = Join::default();
    let mut best_count = 0;
    for off in offsets {
        let (ties, ambiguous) = tie(lines, &order, candidates, off, preset);
        if ties.len() > best_count || best_count == 0 && best.ties.is_empty() && off == 0 {
            best_count = ties.len();
            best = Join { ties, ambiguous, zone_ns: off, skew_ns: None, skew_pairs: 0 };
        }
    }
    let mut skews: Vec<i64> = best
        .ties
        .iter()
        .filter_map(|t| {
            let line = lines.get(t.line)?;
            let end = candidates.get(t.candidate)?.end_ns?;
            Some(line.time_ns - best.zone_ns + line.resolution_ns / 2 - end)
        })
        .collect();
    skews.sort_unstable();
    best.skew_pairs = skews.len();
    best.skew_ns = skews.get(skews.len() / 2).copied();
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn upstream() -> Endpoint {
        Endpoint { ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), port: 9000 }
    }

    fn cand(index: u32, shape: Shape, first_s: f64, last_s: f64, end_s: Option<f64>) -> Candidate {
        let ns = |s: f64| (s * 1e9) as i64;
        let waited = (ns(last_s) - ns(first_s)).max(NS);
        Candidate {
            index,
            id: index as u64,
            server: upstream(),
            client_port: 40_000 + index as u16,
            shape,
            connect_ns: None,
            first_byte_ns: None,
            first_ns: ns(first_s),
            last_ns: ns(last_s),
            end_ns: end_s.map(ns),
            earliest_ns: end_s.map_or(ns(last_s), ns),
            latest_ns: end_s.map_or(ns(last_s) + waited + 2 * NS, ns),
        }
    }

    fn line(second: i64, kind: LineKind) -> Line {
        Line { time_ns: second * NS, resolution_ns: NS, upstream: Some(upstream()), local_port: None, connect_ns: None, header_ns: None, start_ns: None, kind }
    }

    // ---- Tests for lines whose moment the capture shows ----

    #[test]
    fn test_refused_line_ties_to_rst_in_its_second() {
        let c = [cand(0, Shape::Refused, 100.2, 100.2, Some(100.2)), cand(1, Shape::Refused, 103.5, 103.5, Some(103.5))];
        let j = join(&[line(103, LineKind::Refused)], &c, Some(0), (100 * NS, 110 * NS));
        assert_eq!(j.ties, vec![Tie { line: 0, candidate: 1 }]);
        assert_eq!(j.skew_pairs, 1);
    }

    #[test]
    fn test_read_timeout_line_does_not_tie_to_refused_connection() {
        let c = [cand(0, Shape::Refused, 100.2, 100.2, Some(100.2))];
        assert!(join(&[line(100, LineKind::ReadTimeout)], &c, Some(0), (100 * NS, 110 * NS)).ties.is_empty());
    }

    // ---- Tests for connect timeouts (no packet shows the moment) ----

    #[test]
    fn test_connect_timeouts_tie_earliest_first() {
        let c = [
            cand(0, Shape::NoHandshake, 100.0, 101.0, None),
            cand(1, Shape::NoHandshake, 100.1, 101.1, None),
        ];
        let lines = [line(102, LineKind::ConnectTimeout), line(102, LineKind::ConnectTimeout)];
        let j = join(&lines, &c, Some(0), (100 * NS, 110 * NS));
        assert_eq!(j.ties.len(), 2);
        assert_eq!(j.ties.first().map(|t| t.candidate), Some(0));
    }

    #[test]
    fn test_connect_timeout_line_before_the_last_syn_does_not_tie() {
        let c = [cand(0, Shape::NoHandshake, 100.0, 105.0, None)];
        assert!(join(&[line(102, LineKind::ConnectTimeout)], &c, Some(0), (100 * NS, 120 * NS)).ties.is_empty());
    }

    #[test]
    fn test_many_lines_and_connections_join_in_one_pass() {
        // 20,000 refused connections 5 ms apart and a line for each: every line tied, quickly
        // (each line looks only at the connections whose moment can fall in its second).
        let n = 20_000;
        let c: Vec<Candidate> = (0..n).map(|i| cand(i, Shape::Refused, 100.0 + i as f64 * 0.005, 100.0 + i as f64 * 0.005, Some(100.0 + i as f64 * 0.005))).collect();
        let lines: Vec<Line> = (0..n).map(|i| line(100 + (i as i64 * 5) / 1000, LineKind::Refused)).collect();
        let j = join(&lines, &c, Some(0), (100 * NS, 201 * NS));
        assert_eq!(j.ties.len(), n as usize);
    }

    // ---- Tests for the clock offset ----

    #[test]
    fn test_read_timeout_ties_inside_the_span_before_a_queued_fin() {
        // Request at 100.0, never acknowledged; the FIN left with the re-send at 106.9.
        let mut c = cand(0, Shape::Unanswered, 99.9, 107.0, None);
        c.earliest_ns = 100 * NS;
        c.latest_ns = 106_900_000_000;
        assert_eq!(join(&[line(103, LineKind::ReadTimeout)], &[c], Some(0), (99 * NS, 108 * NS)).ties.len(), 1);
        assert!(join(&[line(108, LineKind::ReadTimeout)], &[c], Some(0), (99 * NS, 110 * NS)).ties.is_empty());
    }

    // ---- Tests for lines that name the proxy's source port ----

    #[test]
    fn test_source_port_ties_exactly_whatever_the_order() {
        // Two connect timeouts waiting at once: ports tie each line to its own connection,
        // though the earliest-first rule would pick the other.
        let c = [cand(0, Shape::NoHandshake, 100.0, 101.0, None), cand(1, Shape::NoHandshake, 100.1, 101.1, None)];
        let mut l = line(102, LineKind::ConnectTimeout);
        l.local_port = Some(40_001);
        let j = join(&[l], &c, Some(0), (100 * NS, 110 * NS));
        assert_eq!(j.ties, vec![Tie { line: 0, candidate: 1 }]);
    }

    #[test]
    fn test_source_port_ties_a_line_whose_kind_the_capture_contradicts() {
        // The log says connect timeout; the capture shows an answer: tied all the same, for the
        // finding to weigh.
        let c = [cand(0, Shape::Answered, 100.0, 100.5, Some(100.5))];
        let mut l = line(100, LineKind::ConnectTimeout);
        l.local_port = Some(40_000);
        assert_eq!(join(&[l], &c, Some(0), (100 * NS, 110 * NS)).ties.len(), 1);
    }

    #[test]
    fn test_source_port_used_again_ties_the_connection_open_then() {
        let mut c = [cand(0, Shape::Answered, 100.0, 100.5, Some(100.5)), cand(1, Shape::Answered, 200.0, 200.5, Some(200.5))];
        c[1].client_port = 40_000;
        let mut l = line(200, LineKind::Answered);
        l.local_port = Some(40_000);
        assert_eq!(join(&[l], &c, Some(0), (100 * NS, 210 * NS)).ties, vec![Tie { line: 0, candidate: 1 }]);
        l.time_ns = 150 * NS;
        assert!(join(&[l], &c, Some(0), (100 * NS, 210 * NS)).ties.is_empty());
    }

    #[test]
    fn test_the_proxys_timings_pick_the_connection_they_describe() {
        // Two answers ending in one second: the line's connect time of 0 s is the connection
        // whose handshake took no time, not the one that waited 1 s for a re-sent SYN, though
        // that one ended nearer the line's time.
        let mut slow = cand(0, Shape::Answered, 100.0, 102.45, Some(102.45));
        slow.connect_ns = Some(1_030_000_000);
        let mut quick = cand(1, Shape::Answered, 101.0, 102.6, Some(102.6));
        quick.connect_ns = Some(100_000);
        let mut l = line(102, LineKind::Answered);
        l.resolution_ns = 1_000_000;
        l.time_ns = 102_450_000_000;
        l.connect_ns = Some(0);
        assert_eq!(join(&[l], &[slow, quick], Some(0), (100 * NS, 110 * NS)).ties, vec![Tie { line: 0, candidate: 1 }]);
        l.connect_ns = None;
        assert_eq!(join(&[l], &[slow, quick], Some(0), (100 * NS, 110 * NS)).ties, vec![Tie { line: 0, candidate: 0 }]);
    }

    #[test]
    fn test_attempt_start_picks_the_connection_begun_then_and_says_when_it_cannot() {
        // Two connect timeouts waiting at once, begun 20 ms apart: a line to the millisecond
        // that says when its attempt began ties to that one; begun in the same millisecond, the
        // tie is ambiguous with the other.
        let mut c = [cand(0, Shape::NoHandshake, 100.0, 101.0, None), cand(1, Shape::NoHandshake, 100.02, 101.02, None)];
        let mut l = line(102, LineKind::ConnectTimeout);
        l.resolution_ns = 1_000_000;
        l.time_ns = 102_020_000_000;
        l.start_ns = Some(100_020_000_000);
        let j = join(&[l], &c, Some(0), (100 * NS, 110 * NS));
        assert_eq!((j.ties, j.ambiguous.get(&0).cloned()), (vec![Tie { line: 0, candidate: 1 }], None));
        c[1].first_ns = 100_000_500_000;
        let j = join(&[l], &c, Some(0), (100 * NS, 110 * NS));
        assert_eq!(j.ambiguous.get(&0).map(Vec::len), Some(1));
    }

    #[test]
    fn test_preset_ties_are_kept_and_their_connections_taken() {
        let c = [cand(0, Shape::Refused, 100.2, 100.2, Some(100.2)), cand(1, Shape::Refused, 100.6, 100.6, Some(100.6))];
        let lines = [line(100, LineKind::Refused), line(100, LineKind::Refused)];
        let j = join_with(&lines, &c, Some(0), (100 * NS, 110 * NS), &[Tie { line: 1, candidate: 0 }]);
        assert_eq!(j.ties, vec![Tie { line: 1, candidate: 0 }, Tie { line: 0, candidate: 1 }]);
    }

    #[test]
    fn test_offset_search_finds_the_time_zone() {
        let c = [cand(0, Shape::Refused, 100.2, 100.2, Some(100.2)), cand(1, Shape::Refused, 101.6, 101.6, Some(101.6))];
        let lines = [line(100 + 3600, LineKind::Refused), line(101 + 3600, LineKind::Refused)];
        let j = join(&lines, &c, None, (100 * NS, 110 * NS));
        assert_eq!(j.zone_ns, 3600 * NS);
        assert_eq!(j.ties.len(), 2);
    }

    // ---- Tests for a handshake completed as the client gave up ----

    /// The shape and span of the only connection a wire carried, its capture ending at `end_ms`.
    fn shape_of(w: &crate::flow::wire::Wire, end_ms: i64) -> (Shape, Option<i64>, i64, i64) {
        let c = candidate(w.conn(), 0, end_ms * 1_000_000).expect("a candidate");
        (c.shape, c.end_ns, c.earliest_ns, c.latest_ns)
    }

    #[test]
    fn test_handshake_then_client_fin_without_a_byte_is_closed_at_connect() {
        use crate::flow::wire::*;
        // SYN dropped, the re-sent one answered at 1.03 s as the proxy's 1 s connect timeout
        // fired late: it closes at once.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1030, C, SYN, CISN, 0, 0);
        w.send(1030, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1030, C, ACK, CISN + 1, SISN + 1, 0);
        w.send(1031, C, FIN | ACK, CISN + 1, SISN + 1, 0);
        w.send(1032, S, ACK, SISN + 1, CISN + 2, 0);
        assert_eq!(shape_of(&w, 5000), (Shape::ClosedAtConnect, Some(1031 * MS), 1031 * MS, 1031 * MS));
    }

    #[test]
    fn test_late_synack_reset_by_the_client_spans_from_its_syn() {
        use crate::flow::wire::*;
        // The SYN-ACK came 1.5 s after the SYN, the socket closed: the client's kernel resets it.
        let mut w = Wire::new();
        w.send(0, C, SYN, CISN, 0, 0);
        w.send(1500, S, SYN | ACK, SISN, CISN + 1, 0);
        w.send(1500, C, RST, CISN + 1, 0, 0);
        assert_eq!(shape_of(&w, 5000), (Shape::ClosedAtConnect, None, 0, 1500 * MS));
    }

    #[test]
    fn test_request_sent_then_closed_stays_unanswered() {
        use crate::flow::wire::*;
        let mut w = Wire::new();
        w.handshake_plain();
        w.request(10, &[]);
        w.send(20, S, ACK, SISN + 1, CISN + 101, 0);
        w.send(3010, C, FIN | ACK, CISN + 101, SISN + 1, 0);
        assert_eq!(shape_of(&w, 5000).0, Shape::Unanswered);
    }

    #[test]
    fn test_connect_timeout_takes_a_closed_at_connect_only_when_no_handshakeless_fits() {
        let quick_close = cand(0, Shape::ClosedAtConnect, 100.0, 102.0, Some(102.0));
        let no_handshake = cand(1, Shape::NoHandshake, 100.0, 101.0, None);
        let lines = [line(102, LineKind::ConnectTimeout)];
        assert_eq!(join(&lines, &[quick_close, no_handshake], Some(0), (100 * NS, 110 * NS)).ties, vec![Tie { line: 0, candidate: 1 }]);
        assert_eq!(join(&lines, &[quick_close], Some(0), (100 * NS, 110 * NS)).ties, vec![Tie { line: 0, candidate: 0 }]);
        assert!(join(&[line(102, LineKind::ReadTimeout)], &[quick_close], Some(0), (100 * NS, 110 * NS)).ties.is_empty());
    }
}
