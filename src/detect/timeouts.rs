//! The proxy's timeouts, inferred from when its connections gave up: an nginx
//! `proxy_connect_timeout` (`fastcgi_connect_timeout`) ends connect() after the same delay for
//! every connection, and `proxy_read_timeout` closes every connection whose request went
//! unanswered the same delay after the request was sent. Give-ups cluster tightly around each.
//!
//! Over the connections the analysis kept (every connection, or those with a problem: a give-up
//! is always one).
//!
//! - **read**: the handshake completed, the client sent data, the server sent none, and the
//!   client closed (FIN or RST). The delay runs from the client's first data to its last
//!   packet (its FIN, or RST, and the answer to it). Delays are put in `BUCKET_NS` buckets; the
//!   fullest bucket and its two neighbours are the cluster. A timer fires at its deadline or
//!   later (a loaded proxy runs it tens of milliseconds late), never early, so the timeout is
//!   the cluster's earliest delay rounded down to a tenth of a second, after `EARLY_SLACK_NS`
//!   for the capture seeing the request a little after the proxy started its timer.
//! - **connect**: connect() giving up leaves no packet: the client stops re-sending its SYN
//!   before its schedule ran out (outcome abandoned, never a SYN-ACK answered), after re-sending
//!   it at least once (a lone SYN is a scan or a flood as often as a connect()). Each such
//!   connection bounds the timeout between its last SYN and the SYN that was due next (or an RST
//!   it sent to a late SYN-ACK). The timeout is the first whole second inside the bounds of most
//!   connections: a guess, said as one ("probably").

use crate::flow::{Connection, Side};

use super::{outcome, schedule, syn_sends, intervals, Outcome};

const SECOND: i64 = 1_000_000_000;
/// Width of the read give-up histogram's buckets.
const BUCKET_NS: i64 = 50_000_000;
/// A send due at a time is seen up to this much later (timer slack, the capture point).
const DUE_SLACK_NS: i64 = 50_000_000;
/// Fewer give-ups than this say nothing about a timeout.
const MIN_CONNECTIONS: usize = 2;
/// A read give-up seen this much before a tenth of a second still counts as on it.
const EARLY_SLACK_NS: i64 = 5_000_000;

/// What the give-ups of one kind say about the proxy's timeout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Inferred {
    pub seconds: f64,
    /// Connections that gave up at it.
    pub connections: usize,
    /// Connections that gave up, at it or not.
    pub gave_up: usize,
    /// The delay was seen (read) rather than bounded and rounded (connect).
    pub measured: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProxyTimeouts {
    pub connect: Option<Inferred>,
    pub read: Option<Inferred>,
}

pub fn infer(connections: &[Connection], end_ns: i64) -> ProxyTimeouts {
    let mut read_delays = Vec::new();
    let mut connect_bounds = Vec::new();
    for c in connections {
        if c.partial {
            continue;
        }
        if let Some(delay) = read_give_up_ns(c) {
            read_delays.push(delay);
        } else if let Some(bounds) = connect_give_up_ns(c, end_ns) {
            connect_bounds.push(bounds);
        }
    }
    ProxyTimeouts { connect: connect_timeout(&connect_bounds), read: read_timeout(&mut read_delays) }
}

fn read_give_up_ns(c: &Connection) -> Option<i64> {
    let sent = c.milestones.client_data_ns.get()?;
    if !c.handshake_completed() || c.milestones.server_data_ns.get().is_some() {
        return None;
    }
    let client = &c.counts[Side::Client.index()];
    let reset = c.milestones.first_rst().filter(|r| r.from == Side::Client);
    let closed_at = match reset {
        Some(r) => r.time_ns,
        None if client.fin => c.last_time_ns,
        None => return None,
    };
    Some(closed_at - sent).filter(|d| *d > 0)
}

/// (lower, upper) bounds of the delay after the first SYN at which the client gave up.
fn connect_give_up_ns(c: &Connection, end_ns: i64) -> Option<(i64, i64)> {
    if c.handshake_completed() || outcome(c, end_ns) != Outcome::Abandoned {
        return None;
    }
    let sends = syn_sends(c);
    // A lone SYN is a scan or a flood as often as a connect(): a give-up needs a SYN re-sent.
    if sends.len() < 2 {
        return None;
    }
    let (first, last) = (sends.first()?, sends.last()?);
    let schedule = schedule::fit_syn(&intervals(&sends));
    let mut upper = last.time_ns + schedule.interval_ns(c.syn_count.max(1)) + DUE_SLACK_NS;
    if let Some(r) = c.milestones.first_rst().filter(|r| r.from == Side::Client) {
        upper = upper.min(r.time_ns);
    }
    Some((last.time_ns - first.time_ns, upper - first.time_ns))
}

fn read_timeout(delays: &mut [i64]) -> Option<Inferred> {
    if delays.len() < MIN_CONNECTIONS {
        return None;
    }
    delays.sort_unstable();
    // The fullest bucket (the earliest of equals), with its neighbours.
    let bucket = |d: i64| d / BUCKET_NS;
    let mut best = (0usize, 0i64);
    let mut i = 0;
    while i < delays.len() {
        let b = bucket(delays[i]);
        let n = delays[i..].iter().take_while(|d| bucket(**d) == b).count();
        if n > best.0 {
            best = (n, b);
        }
        i += n;
    }
    let cluster: Vec<i64> = delays.iter().copied().filter(|d| (bucket(*d) - best.1).abs() <= 1).collect();
    if cluster.len() < MIN_CONNECTIONS {
        return None;
    }
    let tenths = (cluster[0] + EARLY_SLACK_NS) / (SECOND / 10);
    Some(Inferred { seconds: tenths as f64 / 10.0, connections: cluster.len(), gave_up: delays.len(), measured: true })
}

fn connect_timeout(bounds: &[(i64, i64)]) -> Option<Inferred> {
    if bounds.len() < MIN_CONNECTIONS {
        return None;
    }
    // The whole second inside the most connections' bounds (the smallest of equals).
    let longest = bounds.iter().map(|b| b.1).max()?;
    let (mut best, mut best_n) = (None, 0);
    for s in 1..=(longest / SECOND).min(600) {
        let at = s * SECOND;
        let n = bounds.iter().filter(|(lo, hi)| *lo < at && at <= *hi).count();
        if n > best_n {
            (best, best_n) = (Some(s), n);
        }
    }
    let s = best?;
    (best_n >= MIN_CONNECTIONS).then_some(Inferred { seconds: s as f64, connections: best_n, gave_up: bounds.len(), measured: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    // ---- read give-ups ----

    #[test]
    fn test_read_give_ups_cluster_at_the_timeout() {
        let mut delays = vec![3_002 * MS, 3_004 * MS, 3_001 * MS, 2_998 * MS, 7_500 * MS];
        let t = read_timeout(&mut delays).unwrap();
        assert_eq!((t.seconds, t.connections, t.gave_up), (3.0, 4, 5));
    }

    #[test]
    fn test_read_timer_fired_late_by_a_loaded_proxy_is_the_earlier_tenth() {
        let mut delays = vec![2_054 * MS, 2_061 * MS, 2_064 * MS, 2_058 * MS];
        assert_eq!(read_timeout(&mut delays).unwrap().seconds, 2.0);
        let mut delays = vec![2_497 * MS, 2_503 * MS];
        assert_eq!(read_timeout(&mut delays).unwrap().seconds, 2.5);
    }

    #[test]
    fn test_read_one_give_up_says_nothing() {
        assert_eq!(read_timeout(&mut [3_000 * MS]), None);
    }

    #[test]
    fn test_read_scattered_give_ups_say_nothing() {
        assert_eq!(read_timeout(&mut [1_000 * MS, 2_000 * MS, 5_000 * MS]), None);
    }

    // ---- connect give-ups ----

    #[test]
    fn test_connect_bounds_give_the_whole_second_inside_them() {
        // SYNs at 0 and 1 s, the next due at 2 s (linear): gave up in (1, 2.05].
        let bounds = vec![(1_013 * MS, 2_063 * MS); 3];
        let t = connect_timeout(&bounds).unwrap();
        assert_eq!((t.seconds, t.connections, t.measured), (2.0, 3, false));
    }

    #[test]
    fn test_connect_most_connections_win() {
        let mut bounds = vec![(1_013 * MS, 2_063 * MS); 3];
        bounds.push((3_010 * MS, 4_060 * MS));
        assert_eq!(connect_timeout(&bounds).unwrap().seconds, 2.0);
    }
}
