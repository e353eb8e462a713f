//! When the clients (a proxy, a load balancer) gave up: their timeout over the whole exchange,
//! from the first SYN (connect and answer), or over the request (`proxy_read_timeout`), from the
//! give-ups detect::timeouts clusters.

use super::estimate::{plural, Bound, Estimate, Value};
use super::gather::Shown;
use crate::detect::timeouts::{ExchangeBounds, Inferred};

fn measured(t: Inferred, from: &str) -> Estimate {
    let evidence = vec![format!(
        "{} of {} that gave up before an answer closed {:.1} s after {from}, or a little later (a timer fires late, \
         never early)",
        plural(t.connections as u64, "client", "clients"),
        t.gave_up,
        t.seconds
    )];
    Estimate {
        value: Value::Seconds(t.seconds),
        low: Some(Bound::Seconds(t.seconds)),
        high: Some(Bound::Seconds(t.seconds + 0.1)),
        confidence: if t.connections >= 5 { 0.8 } else { 0.6 },
        evidence,
    }
}

/// Clients that stopped re-sending their SYN bound a timeout from the first SYN to a whole
/// second; a cluster of closes after an answered handshake inside that second gives it to the
/// tenth. Without SYN give-ups, the closes after the request (seen when made) or after the first
/// SYN, whichever cluster holds more.
pub fn client_timeout(shown: &Shown) -> Option<Estimate> {
    let after_syn = shown.give_ups_after_syn.infer();
    let after_request = shown.give_ups_after_request.infer().read;
    if let Some(connect) = after_syn.connect {
        let inside = after_syn.read.filter(|r| r.seconds > connect.seconds - 1.0 && r.seconds <= connect.seconds);
        let mut estimate = match inside {
            Some(read) => measured(read, "their first SYN"),
            None => Estimate {
                value: Value::Seconds(connect.seconds),
                low: Some(Bound::Seconds(connect.seconds - 1.0)),
                high: Some(Bound::Seconds(connect.seconds)),
                confidence: 0.6,
                evidence: Vec::new(),
            },
        };
        estimate.evidence.push(format!(
            "{} of {} stopped re-sending their SYN between {:.0} and {:.0} s after the first, before their kernel's \
             schedule ran out",
            plural(connect.connections as u64, "client", "clients"),
            connect.gave_up,
            connect.seconds - 1.0,
            connect.seconds
        ));
        return Some(estimate);
    }
    [(after_request, "their request"), (after_syn.read, "their first SYN")]
        .into_iter()
        .filter_map(|(t, from)| t.map(|t| (t, from)))
        .max_by_key(|(t, _)| t.connections)
        .map(|(t, from)| measured(t, from))
        .or_else(|| shown.give_ups_after_syn.exchange_bounds().map(bounded))
}

/// Without a cluster of closes seen when made (most FINs held behind a re-sent request): the
/// timeout over the whole exchange lies above the longest exchange answered and at most the
/// earliest close before an answer; said as that close, to the tenth below.
fn bounded(b: ExchangeBounds) -> Estimate {
    Estimate {
        value: Value::Seconds((b.at_most * 10.0).floor() / 10.0),
        low: Some(Bound::Seconds(b.above)),
        high: Some(Bound::Seconds(b.at_most)),
        confidence: 0.5,
        evidence: vec![
            format!(
                "{} closed before an answer, the earliest {:.2} s after its first SYN: a client closes at its timeout or \
                 later (a FIN held behind an unacknowledged request leaves later)",
                plural(b.closes, "client", "clients"),
                b.at_most
            ),
            format!("a client was answered {:.2} s after its first SYN: it had not given up by then", b.above),
        ],
    }
}
