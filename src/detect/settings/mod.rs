//! The settings a capture shows of one listener and its clients: the effective backlog (the
//! listen() backlog after the net.core.somaxconn clamp), the workers serving it, SYN cookies, the
//! SYN-ACK retries, the clients' SYN retries and linear SYN timeouts, and when the clients gave
//! up. Each is gathered per connection as it finishes (`gather`), inferred at the end (`infer`):
//! a value where the capture shows one, a range as narrow as it shows, and none where it shows
//! nothing; each says what it rests on.

pub mod estimate;
pub mod gather;
pub mod give_up;
pub mod queue;
pub mod retries;

use estimate::{plural, Bound, Estimate, Value};
use gather::{Dropped, Shown};

/// Every setting's name, in the order they are written.
pub const SETTINGS: [&str; 7] =
    ["backlog", "workers", "syncookies", "synack_retries", "syn_retries", "syn_linear_timeouts", "client_timeout_s"];

/// SYNs dropped while the accept queue had room and the SYN queue was full, fewer than this, are
/// the path's losses as likely as the listener's.
const MIN_COOKIELESS_DROPS: u64 = 3;

/// What `shown` shows of the listener's settings, for a capture that ended at `end_ns`, in the
/// order of `SETTINGS`; a setting it does not show is left out.
pub fn infer(shown: &Shown, end_ns: i64) -> Vec<(&'static str, Estimate)> {
    let mut out = Vec::new();
    let shown_workers = queue::workers(&shown.spans);
    let workers = shown_workers.map(|w| w.estimate());
    let mut backlog = queue::backlog(&shown.spans, &shown.drops, shown_workers.as_ref());
    if shown.unkept > 0 {
        let note = format!("from the first {} connections only", shown.spans.len());
        if let Some(b) = backlog.as_mut() {
            b.evidence.push(note);
        }
    }
    let backlog_low = backlog.as_ref().and_then(|b| count(b.low));
    if let Some(b) = backlog.clone() {
        out.push(("backlog", b));
    }
    if let Some(w) = workers {
        out.push(("workers", w));
    }
    if let Some(c) = syncookies(shown, backlog.as_ref()) {
        out.push(("syncookies", c));
    }
    if let Some(r) = retries::synack_retries(shown, end_ns, backlog_low) {
        out.push(("synack_retries", r));
    }
    let linear = retries::syn_linear_timeouts(shown);
    if let Some(r) = retries::syn_retries(shown, linear.as_ref()) {
        out.push(("syn_retries", r));
    }
    if let Some(l) = linear {
        out.push(("syn_linear_timeouts", l));
    }
    if let Some(t) = give_up::client_timeout(shown) {
        out.push(("client_timeout_s", t));
    }
    out
}

fn count(b: Option<Bound>) -> Option<u64> {
    match b {
        Some(Bound::Count(n)) => Some(n),
        _ => None,
    }
}

/// SYN cookies on: requests that stalled after a SYN-ACK no timer re-sent (a cookie keeps no
/// request to re-send from: net/ipv4/syncookies.c). Off: SYNs dropped while the SYN queue was
/// full and the accept queue had room (net/ipv4/tcp_input.c: tcp_conn_request() sends a cookie
/// then, with net.ipv4.tcp_syncookies = 1, and drops the SYN without).
fn syncookies(shown: &Shown, backlog: Option<&Estimate>) -> Option<Estimate> {
    if shown.cookies > 0 {
        let evidence = vec![format!(
            "{} completed the handshake, then had the request go unacknowledged with no SYN-ACK re-sent by a timer: \
             the SYN-ACK was a cookie",
            plural(shown.cookies, "connection", "connections")
        )];
        return Some(Estimate::flag(true, if shown.cookies >= 3 { 0.8 } else { 0.6 }, evidence));
    }
    let b = backlog.and_then(|b| match b.value {
        Value::Count(n) => Some(n),
        _ => None,
    })?;
    let mut froms: Vec<i64> = shown.spans.iter().map(|s| s.settled_ns).collect();
    let mut untils: Vec<i64> = shown.spans.iter().map(|s| s.until_ns).collect();
    froms.sort_unstable();
    untils.sort_unstable();
    let established = |t: i64| froms.partition_point(|&f| f < t).saturating_sub(untils.partition_point(|&u| u < t)) as u64;
    let half_open = |t: i64| shown.half_open.iter().filter(|s| s.from_ns < t && s.until_ns >= t).count() as u64;
    let cookieless = shown
        .drops
        .iter()
        .filter(|d| d.what == Dropped::Syn && established(d.time_ns) < b + 1 && half_open(d.time_ns) >= b.max(1))
        .count() as u64;
    if cookieless < MIN_COOKIELESS_DROPS {
        return None;
    }
    let evidence = vec![format!(
        "{} dropped while the server held {} or more half-open requests (its SYN queue full) and fewer than {} \
         established ones (its accept queue not full): without SYN cookies",
        plural(cookieless, "SYN was", "SYNs were"),
        b.max(1),
        b + 1
    )];
    Some(Estimate::flag(false, 0.7, evidence))
}
