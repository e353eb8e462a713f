//! When the clients (a proxy, a load balancer) gave up: their timeout over the request
//! (`proxy_read_timeout`) or over the whole exchange from the first SYN, whichever the give-ups
//! cluster on more tightly (detect::timeouts infers each).

use super::estimate::{plural, Bound, Estimate, Value};
use super::gather::Shown;

pub fn client_timeout(shown: &Shown) -> Option<Estimate> {
    let after_request = shown.give_ups_after_request.infer();
    let after_syn = shown.give_ups_after_syn.infer();
    let measured = [(after_request.read, "their request"), (after_syn.read, "their first SYN")]
        .into_iter()
        .filter_map(|(t, from)| t.map(|t| (t, from)))
        .max_by_key(|(t, _)| t.connections);
    if let Some((t, from)) = measured {
        let evidence = vec![format!(
            "{} of {} that gave up before an answer closed {:.1} s after {from}, or a little later (a timer fires \
             late, never early)",
            plural(t.connections as u64, "client", "clients"),
            t.gave_up,
            t.seconds
        )];
        let confidence = if t.connections >= 5 { 0.8 } else { 0.6 };
        return Some(Estimate {
            value: Value::Seconds(t.seconds),
            low: Some(Bound::Seconds(t.seconds)),
            high: Some(Bound::Seconds(t.seconds + 0.1)),
            confidence,
            evidence,
        });
    }
    let t = after_syn.connect?;
    let evidence = vec![format!(
        "{} of {} stopped re-sending their SYN between {:.0} and {:.0} s after the first, before their kernel's \
         schedule ran out: a guess to the second",
        plural(t.connections as u64, "client", "clients"),
        t.gave_up,
        t.seconds - 1.0,
        t.seconds
    )];
    Some(Estimate {
        value: Value::Seconds(t.seconds),
        low: Some(Bound::Seconds(t.seconds - 1.0)),
        high: Some(Bound::Seconds(t.seconds)),
        confidence: 0.5,
        evidence,
    })
}
