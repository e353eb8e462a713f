//! The retries the series show: the server's SYN-ACK retries (net.ipv4.tcp_synack_retries), the
//! clients' SYN retries (net.ipv4.tcp_syn_retries) and linear SYN timeouts
//! (net.ipv4.tcp_syn_linear_timeouts).

use super::estimate::{plural, Estimate};
use super::gather::{Shown, Span};

/// A send due this long before the capture's end and not seen was not sent.
const DUE_SLACK_NS: i64 = 500_000_000;
/// reqsk_timer_handler() lowers a request's retries only when the SYN queue holds more than
/// half of max(8, backlog) requests.
const PRUNE_FLOOR: u64 = 8;

/// Half-open requests held at `t`.
fn half_open_at(half_open: &[Span], t: i64) -> u64 {
    half_open.iter().filter(|s| s.from_ns < t && s.until_ns >= t).count() as u64
}

/// The server's SYN-ACK retries: at least the most timer re-sends of a series; exactly those of
/// a series that stopped with the request half-open while the capture went on past its next send
/// (the request dropped: net/ipv4/inet_connection_sock.c: reqsk_timer_handler() gives up after
/// max_syn_ack_retries), when the SYN queue was too short then for the handler to have lowered
/// the retries.
pub fn synack_retries(shown: &Shown, end_ns: i64, backlog_low: Option<u64>) -> Option<Estimate> {
    if shown.synack_series == 0 {
        return None;
    }
    let seen = u64::from(shown.synack_resends);
    let mut evidence = vec![format!(
        "{} timer re-sends of a SYN-ACK at most, in {}",
        seen,
        plural(shown.synack_series, "series", "series")
    )];
    let prune_above = PRUNE_FLOOR.max(backlog_low.unwrap_or(0)) / 2;
    let ran_out: Vec<u64> = shown.stopped.iter().filter(|s| s.next_due_ns + DUE_SLACK_NS < end_ns).map(|s| u64::from(s.resends)).collect();
    let exact: Vec<u64> = shown
        .stopped
        .iter()
        .filter(|s| s.next_due_ns + DUE_SLACK_NS < end_ns && half_open_at(&shown.half_open, s.next_due_ns) <= prune_above)
        .map(|s| u64::from(s.resends))
        .collect();
    let low = seen.max(ran_out.iter().copied().max().unwrap_or(0));
    if let Some(&value) = exact.iter().max() {
        if value >= low {
            evidence.push(format!(
                "{} stopped after {value} re-sends with the request still half-open and the capture going on: \
                 the server gave the request up (reqsk_timer_handler()), its SYN queue too short to have cut the \
                 retries",
                plural(exact.len() as u64, "series", "series")
            ));
            return Some(Estimate::count(Some(value), Some(value), Some(value), 0.8, evidence));
        }
    }
    if !ran_out.is_empty() {
        evidence.push(format!(
            "{} stopped with the request half-open, the SYN queue then long enough for reqsk_timer_handler() \
             to have cut its retries: a lower bound",
            plural(ran_out.len() as u64, "series", "series")
        ));
    } else {
        evidence.push("no series ran out within the capture: a lower bound".into());
    }
    Some(Estimate::count(None, Some(low), None, 0.7, evidence))
}

/// The clients' linear SYN timeouts: a SYN series re-sends after 1 s while they last, then
/// doubles (net/ipv4/tcp_timer.c: tcp_retransmit_timer(): icsk_rto stays TCP_TIMEOUT_INIT for
/// the first tcp_syn_linear_timeouts re-sends). Exactly the 1 s intervals less one where a
/// series shows the doubling after them; at least that where none does.
pub fn syn_linear_timeouts(shown: &Shown) -> Option<Estimate> {
    let series: u64 = shown.syn_shapes.iter().map(|(_, n)| n).sum();
    if series == 0 {
        return None;
    }
    let low = shown.syn_shapes.iter().map(|(s, _)| u64::from(s.one_second) - 1).max()?;
    let exact = shown
        .syn_shapes
        .iter()
        .filter(|(s, _)| s.doubled)
        .max_by_key(|(s, n)| (*n, s.one_second))
        .map(|(s, n)| (u64::from(s.one_second) - 1, *n));
    match exact {
        Some((value, n)) if value >= low => {
            let evidence = vec![format!(
                "{} of {} re-sent the SYN {} after 1 s, then after 2 s",
                plural(n, "SYN series", "SYN series"),
                series,
                plural(value + 1, "time", "times")
            )];
            Some(Estimate::count(Some(value), Some(value), Some(value), if n >= 2 { 0.8 } else { 0.6 }, evidence))
        }
        _ if low >= 1 => {
            let evidence = vec![format!(
                "SYNs re-sent after 1 s up to {} in a row ({} SYN series), none seen doubling after them: a lower bound",
                plural(low + 1, "time", "times"),
                series
            )];
            Some(Estimate::count(None, Some(low), None, 0.6, evidence))
        }
        _ => None,
    }
}

/// The clients' SYN retries: a connect() re-sends its SYN tcp_syn_retries plus
/// tcp_syn_linear_timeouts times before it fails (net/ipv4/tcp_timer.c: tcp_write_timeout()),
/// so the longest series less the linear timeouts, when those are known, is a lower bound.
pub fn syn_retries(shown: &Shown, linear: Option<&Estimate>) -> Option<Estimate> {
    let linear = match linear.map(|e| e.value) {
        Some(super::estimate::Value::Count(n)) => n,
        _ => return None,
    };
    let seen = u64::from(shown.syn_resends);
    let low = seen.checked_sub(linear).filter(|&n| n > 0)?;
    let evidence = vec![format!(
        "a client re-sent its SYN {} ({} of them linear timeouts): a lower bound, as no series is seen to run out",
        plural(seen, "time", "times"),
        linear
    )];
    Some(Estimate::count(None, Some(low), None, 0.6, evidence))
}
