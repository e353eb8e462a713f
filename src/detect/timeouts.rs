//! The proxy's timeouts, inferred from when its connections gave up: an nginx
//! `proxy_connect_timeout` (`fastcgi_connect_timeout`) ends connect() after the same delay for
//! every connection, and `proxy_read_timeout` closes every connection whose request went
//! unanswered the same delay after the request was sent. Give-ups cluster tightly around each.
//!
//! Over every connection counted (`GiveUps`, in the census as each finishes), whether or not
//! its record was kept.
//!
//! - **read**: the handshake completed, the client sent data, the server sent none, and the
//!   client closed (FIN or RST). The delay runs from the client's first data to what the proxy
//!   did first: its RST, or its FIN. An RST leaves at once, and so does a FIN with nothing
//!   unacknowledged before it; a FIN queued behind an unacknowledged request leaves only once
//!   the kernel may send it (the request acknowledged: tcp_write_xmit() sends nothing past the
//!   congestion window a retransmission timeout shrank to one segment), so its delay is only
//!   an upper bound. Delays are put in `BUCKET_NS` buckets; the fullest bucket and its two
//!   neighbours are the cluster. A timer fires at its deadline or later (a loaded proxy runs it
//!   tens of milliseconds late), never early, so the timeout is the cluster's earliest delay
//!   rounded down to a tenth of a second, after `EARLY_SLACK_NS` for the capture seeing the
//!   request a little after the proxy started its timer. When every FIN of the cluster was held
//!   back, the timeout is a range: above the longest the proxy waited for an answer that came
//!   (it had not given up then), at most the cluster's earliest delay; it is said as the lower
//!   end, the tenth above that longest wait.
//! - **connect**: connect() giving up leaves no packet: the client stops re-sending its SYN
//!   before its schedule ran out (outcome abandoned, never a SYN-ACK answered), after re-sending
//!   it at least once (a lone SYN is a scan or a flood as often as a connect()). Each such
//!   connection bounds the timeout between its last SYN and the SYN that was due next (or an RST
//!   it sent to a late SYN-ACK). The timeout is the first whole second inside the bounds of most
//!   connections: a guess, said as one ("probably").

use std::collections::BTreeMap;

use crate::flow::{Connection, Side};

use super::{schedule, syn_sends, intervals, Outcome};

const SECOND: i64 = 1_000_000_000;
/// Width of the read give-up histogram's buckets.
const BUCKET_NS: i64 = 50_000_000;
/// A send due at a time is seen up to this much later (timer slack, the capture point).
const DUE_SLACK_NS: i64 = 50_000_000;
/// Fewer give-ups than this say nothing about a timeout.
const MIN_CONNECTIONS: usize = 2;
/// A read give-up seen this much before a tenth of a second still counts as on it.
const EARLY_SLACK_NS: i64 = 5_000_000;
/// A FIN this soon after the ACK of a re-sent request had waited for it in the send queue.
const QUEUED_FIN_NS: i64 = 500_000_000;
/// Connect timeouts are looked for up to this many seconds.
const MAX_CONNECT_S: i64 = 600;
/// Read delays kept in this many buckets at most; a give-up in a bucket not yet seen past it is
/// counted in `gave_up` only (give-ups at a timeout fill a few buckets early on).
const MAX_READ_BUCKETS: usize = 65_536;

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
    /// Where the capture cannot tell the delay (every FIN held back): (above, at most) seconds.
    pub range: Option<(f64, f64)>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProxyTimeouts {
    pub connect: Option<Inferred>,
    pub read: Option<Inferred>,
}

/// The give-ups of the connections counted, in the form the inference reads, so that it needs
/// no record: read delays as a histogram of `BUCKET_NS` buckets (each with its earliest
/// delay), connect bounds as how many hold each whole second.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GiveUps {
    /// Per bucket of read delay: give-ups, and the earliest delay among them.
    read: BTreeMap<i64, (u64, i64)>,
    read_gave_up: u64,
    /// Per bucket of read delay: the earliest delay of a give-up whose FIN was not held back
    /// (its delay is the give-up's own), where there is one.
    #[serde(default)]
    read_shown: BTreeMap<i64, i64>,
    /// The longest a connection waited from its request to an answer that came before it closed.
    #[serde(default)]
    answered_longest: i64,
    /// Index s (1 to `MAX_CONNECT_S`): connect give-ups whose bounds hold the second s.
    connect_at: Vec<u64>,
    connect_gave_up: u64,
    /// From the first SYN (`add_seen_close` over the whole exchange): the earliest close before
    /// an answer, its FIN held back or not, and how many closed so.
    #[serde(default)]
    exchange_closed_earliest: Option<i64>,
    #[serde(default)]
    exchange_closes: u64,
    /// From the first SYN: the longest a client waited for an answer that came before it closed.
    #[serde(default)]
    exchange_answered_longest: i64,
}

/// The bounds of a timeout over the whole exchange: every client that closed before its answer
/// did so at its timeout or later (a FIN held behind an unacknowledged request leaves later,
/// never earlier: tcp_send_fin()), and every client answered had not given up by then.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExchangeBounds {
    /// The longest exchange answered, in seconds: the timeout is above it.
    pub above: f64,
    /// The earliest close before an answer, in seconds: the timeout is at most it.
    pub at_most: f64,
    pub closes: u64,
}

impl GiveUps {
    /// Counts `c`, judged `outcome`, if it gave up: a read or a connect.
    pub fn add(&mut self, c: &Connection, outcome: Outcome) {
        if c.partial {
            return;
        }
        if let Some((delay, held)) = read_give_up_ns(c) {
            self.add_read(delay, held);
        } else if let Some(waited) = answered_after_ns(c) {
            self.answered_longest = self.answered_longest.max(waited);
        } else if let Some(bounds) = connect_give_up_ns(c, outcome) {
            self.add_connect(bounds);
        }
    }

    /// Counts `c` as `add` does, a read give-up only when its close was seen when it was made:
    /// the request acknowledged before it and never re-sent (a FIN queued behind unacknowledged
    /// data leaves only with its next re-send: net/ipv4/tcp.c: tcp_send_fin()); the delay to the
    /// client's first FIN or RST, from its first SYN (`since_first_syn`: a timeout over the whole
    /// exchange) or from its request.
    pub fn add_seen_close(&mut self, c: &Connection, outcome: Outcome, since_first_syn: bool) {
        if c.partial {
            return;
        }
        let m = &c.milestones;
        let client_rst = m.first_rst().filter(|r| r.from == Side::Client).map(|r| r.time_ns);
        let closed = [m.client_closed_ns.get(), client_rst].into_iter().flatten().min();
        let resent = c.retransmits.as_ref().is_some_and(|log| log.data.iter().any(|d| d.from == Side::Client));
        let seen_when_made = |closed: i64| !resent && m.client_data_acked_ns.get().is_some_and(|acked| acked <= closed);
        let first_syn = syn_sends(c).first().map(|s| s.time_ns);
        if read_give_up_ns(c).is_some() {
            let from = if since_first_syn { first_syn } else { m.client_data_ns.get() };
            if let (Some(closed), Some(from)) = (closed, from) {
                if since_first_syn {
                    let delay = closed - from;
                    self.exchange_closed_earliest = Some(self.exchange_closed_earliest.map_or(delay, |e| e.min(delay)));
                    self.exchange_closes += 1;
                }
                if seen_when_made(closed) {
                    self.add_read(closed - from, false);
                }
            }
        } else if let (true, Some(_), Some(first_syn), Some(answered)) =
            (since_first_syn, answered_after_ns(c), first_syn, m.server_data_ns.get())
        {
            self.exchange_answered_longest = self.exchange_answered_longest.max(answered - first_syn);
        } else if let Some(bounds) = connect_give_up_ns(c, outcome) {
            self.add_connect(bounds);
        }
    }

    /// A read give-up `delay` after the request; `held`: its FIN waited for the request's ACK,
    /// so the give-up was at most `delay`.
    fn add_read(&mut self, delay: i64, held: bool) {
        self.read_gave_up += 1;
        self.add_to_bucket(delay / BUCKET_NS, 1, delay);
        if !held && self.read.contains_key(&(delay / BUCKET_NS)) {
            let shown = self.read_shown.entry(delay / BUCKET_NS).or_insert(delay);
            *shown = (*shown).min(delay);
        }
    }

    /// `n` give-ups in `bucket`, the earliest after `earliest`; none past `MAX_READ_BUCKETS`.
    fn add_to_bucket(&mut self, bucket: i64, n: u64, earliest: i64) {
        if self.read.len() >= MAX_READ_BUCKETS && !self.read.contains_key(&bucket) {
            return;
        }
        let entry = self.read.entry(bucket).or_insert((0, earliest));
        entry.0 += n;
        entry.1 = entry.1.min(earliest);
    }

    /// The whole seconds s with `lo < s` and `s <= hi` (`connect_timeout`'s test), up to
    /// `MAX_CONNECT_S`.
    fn add_connect(&mut self, (lo, hi): (i64, i64)) {
        self.connect_gave_up += 1;
        let from = lo.div_euclid(SECOND) + 1;
        let to = hi.div_euclid(SECOND).min(MAX_CONNECT_S);
        if from > to {
            return;
        }
        let counts = self.connect_counts();
        for s in from.max(1)..=to {
            counts[s as usize] += 1;
        }
    }

    /// The counts per second of connect give-ups, made at the first.
    fn connect_counts(&mut self) -> &mut Vec<u64> {
        if self.connect_at.is_empty() {
            self.connect_at = vec![0; MAX_CONNECT_S as usize + 1];
        }
        &mut self.connect_at
    }

    /// Adds another run's give-ups (a merge).
    pub fn merge(&mut self, other: &GiveUps) {
        for (&bucket, &(n, earliest)) in &other.read {
            self.add_to_bucket(bucket, n, earliest);
        }
        for (&bucket, &delay) in &other.read_shown {
            if self.read.contains_key(&bucket) {
                let shown = self.read_shown.entry(bucket).or_insert(delay);
                *shown = (*shown).min(delay);
            }
        }
        self.answered_longest = self.answered_longest.max(other.answered_longest);
        self.read_gave_up += other.read_gave_up;
        if !other.connect_at.is_empty() {
            for (mine, theirs) in self.connect_counts().iter_mut().zip(&other.connect_at) {
                *mine += theirs;
            }
        }
        self.connect_gave_up += other.connect_gave_up;
        self.exchange_closed_earliest = match (self.exchange_closed_earliest, other.exchange_closed_earliest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.exchange_closes += other.exchange_closes;
        self.exchange_answered_longest = self.exchange_answered_longest.max(other.exchange_answered_longest);
    }

    /// The bounds of a timeout over the whole exchange, where at least `MIN_CONNECTIONS`
    /// clients closed before their answer and the longest answered exchange came before the
    /// earliest such close.
    pub fn exchange_bounds(&self) -> Option<ExchangeBounds> {
        let earliest = self.exchange_closed_earliest?;
        let longest = self.exchange_answered_longest;
        (self.exchange_closes >= MIN_CONNECTIONS as u64 && longest < earliest).then(|| ExchangeBounds {
            above: longest as f64 / 1e9,
            at_most: earliest as f64 / 1e9,
            closes: self.exchange_closes,
        })
    }

    /// The proxy's timeouts these give-ups point to.
    pub fn infer(&self) -> ProxyTimeouts {
        ProxyTimeouts { connect: self.connect_timeout(), read: self.read_timeout() }
    }

    /// `read_timeout` over the histogram: the fullest bucket (the earliest of equals) and its
    /// neighbours are the cluster; the timeout is its earliest delay, to the tenth below.
    fn read_timeout(&self) -> Option<Inferred> {
        if self.read_gave_up < MIN_CONNECTIONS as u64 {
            return None;
        }
        let mut best = (0u64, 0i64);
        for (&bucket, &(n, _)) in &self.read {
            if n > best.0 {
                best = (n, bucket);
            }
        }
        let (mut connections, mut earliest) = (0u64, i64::MAX);
        for (_, &(n, first)) in self.read.range(best.1 - 1..=best.1 + 1) {
            connections += n;
            earliest = earliest.min(first);
        }
        if connections < MIN_CONNECTIONS as u64 {
            return None;
        }
        let shown = self.read_shown.range(best.1 - 1..=best.1 + 1).map(|(_, &d)| d).min();
        let tenth = SECOND / 10;
        let inferred = |seconds: i64, range: Option<(f64, f64)>| Inferred {
            seconds: seconds as f64 / 10.0,
            connections: connections as usize,
            gave_up: self.read_gave_up as usize,
            measured: true,
            range,
        };
        if let Some(shown) = shown {
            return Some(inferred((shown + EARLY_SLACK_NS) / tenth, None));
        }
        // Every FIN held back: the give-up came after the longest wait answered, by the
        // earliest held FIN.
        let above = Some(self.answered_longest).filter(|&w| w > 0 && w < earliest).unwrap_or(0);
        let seconds = if above > 0 { above / tenth + 1 } else { (earliest + EARLY_SLACK_NS) / tenth };
        Some(inferred(seconds.min((earliest + EARLY_SLACK_NS) / tenth), Some((above as f64 / 1e9, earliest as f64 / 1e9))))
    }

    /// `connect_timeout` over the counts per second: the first second held by most bounds.
    fn connect_timeout(&self) -> Option<Inferred> {
        if self.connect_gave_up < MIN_CONNECTIONS as u64 {
            return None;
        }
        let (mut best, mut best_n) = (None, 0u64);
        for (s, &n) in self.connect_at.iter().enumerate().skip(1) {
            if n > best_n {
                (best, best_n) = (Some(s), n);
            }
        }
        let s = best?;
        (best_n >= MIN_CONNECTIONS as u64).then_some(Inferred { seconds: s as f64, connections: best_n as usize, gave_up: self.connect_gave_up as usize, measured: false, range: None })
    }
}

/// The delay from the client's request to its give-up, and whether its FIN was held back behind
/// the unacknowledged request (the delay is then an upper bound).
fn read_give_up_ns(c: &Connection) -> Option<(i64, bool)> {
    let sent = c.milestones.client_data_ns.get()?;
    if !c.handshake_completed() {
        return None;
    }
    // The answer came too late: the client closed at its timeout, before it arrived.
    if c.milestones.server_data_ns.get().is_some() && !super::facts::answer_crossed_close(c) {
        return None;
    }
    let client = &c.counts[Side::Client.index()];
    let reset = c.milestones.first_rst().filter(|r| r.from == Side::Client).map(|r| r.time_ns);
    let closed = c.milestones.client_closed_ns.get().or(reset)?;
    let (closed_at, held) = if reset.is_some_and(|r| r <= closed) || !client.fin {
        // An RST leaves at once.
        (reset.unwrap_or(closed), false)
    } else {
        // The FIN left at once if nothing was unacknowledged before it, and not just after the
        // ACK of a request re-sent (it had waited for that ACK).
        let acked = c.milestones.client_data_acked_ns.get();
        let at_once = acked.is_some_and(|a| a <= closed && !(closed - a < QUEUED_FIN_NS && client.data_retransmits > 0));
        (closed, !at_once)
    };
    Some((closed_at - sent, held)).filter(|(d, _)| *d > 0)
}

/// How long the client waited for an answer that came before it closed: a read timeout is at
/// least this long.
fn answered_after_ns(c: &Connection) -> Option<i64> {
    let sent = c.milestones.client_data_ns.get()?;
    let answered = c.milestones.server_data_ns.get()?;
    if !c.handshake_completed() || super::facts::answer_crossed_close(c) {
        return None;
    }
    let closed = c.milestones.client_closed_ns.get();
    (answered > sent && closed.is_none_or(|closed| answered <= closed)).then_some(answered - sent)
}

/// (lower, upper) bounds of the delay after the first SYN at which the client gave up.
fn connect_give_up_ns(c: &Connection, outcome: Outcome) -> Option<(i64, i64)> {
    // Without a retransmission log the SYN was sent once (`syn_sends` would make one send).
    if c.handshake_completed() || outcome != Outcome::Abandoned || c.retransmits.is_none() {
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

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn reads(delays: &[i64]) -> Option<Inferred> {
        let mut give_ups = GiveUps::default();
        delays.iter().for_each(|&d| give_ups.add_read(d, false));
        give_ups.read_timeout()
    }

    #[test]
    fn test_exchange_bounds_lie_between_the_longest_answer_and_the_earliest_close() {
        let mut give_ups = GiveUps {
            exchange_answered_longest: 4_707 * MS,
            exchange_closed_earliest: Some(5_010 * MS),
            exchange_closes: 41,
            ..GiveUps::default()
        };
        assert_eq!(give_ups.exchange_bounds(), Some(ExchangeBounds { above: 4.707, at_most: 5.01, closes: 41 }));
        // Merged with another part: the earliest close and the longest answer of both.
        let other = GiveUps { exchange_answered_longest: 4_800 * MS, exchange_closed_earliest: Some(6_000 * MS), exchange_closes: 2, ..GiveUps::default() };
        give_ups.merge(&other);
        assert_eq!(give_ups.exchange_bounds(), Some(ExchangeBounds { above: 4.8, at_most: 5.01, closes: 43 }));
        // An answer after the earliest close: no one timeout fits every client.
        give_ups.exchange_answered_longest = 5_500 * MS;
        assert_eq!(give_ups.exchange_bounds(), None);
        // One close alone says nothing.
        let one = GiveUps { exchange_closed_earliest: Some(5_010 * MS), exchange_closes: 1, ..GiveUps::default() };
        assert_eq!(one.exchange_bounds(), None);
    }

    fn connects(bounds: &[(i64, i64)]) -> Option<Inferred> {
        let mut give_ups = GiveUps::default();
        bounds.iter().for_each(|&b| give_ups.add_connect(b));
        give_ups.connect_timeout()
    }

    // ---- read give-ups ----

    #[test]
    fn test_read_give_ups_cluster_at_the_timeout() {
        let t = reads(&[3_002 * MS, 3_004 * MS, 3_001 * MS, 2_998 * MS, 7_500 * MS]).unwrap();
        assert_eq!((t.seconds, t.connections, t.gave_up), (3.0, 4, 5));
    }

    #[test]
    fn test_read_timer_fired_late_by_a_loaded_proxy_is_the_earlier_tenth() {
        assert_eq!(reads(&[2_054 * MS, 2_061 * MS, 2_064 * MS, 2_058 * MS]).unwrap().seconds, 2.0);
        assert_eq!(reads(&[2_497 * MS, 2_503 * MS]).unwrap().seconds, 2.5);
    }

    #[test]
    fn test_read_one_give_up_says_nothing() {
        assert_eq!(reads(&[3_000 * MS]), None);
    }

    #[test]
    fn test_read_scattered_give_ups_say_nothing() {
        assert_eq!(reads(&[1_000 * MS, 2_000 * MS, 5_000 * MS]), None);
    }

    /// The cluster as first written: the delays sorted, the fullest bucket, its neighbours.
    fn reads_sorted(delays: &[i64]) -> Option<(f64, usize)> {
        let mut delays = delays.to_vec();
        delays.sort_unstable();
        let bucket = |d: i64| d / BUCKET_NS;
        let mut best = (0usize, 0i64);
        for chunk in delays.chunk_by(|a, b| bucket(*a) == bucket(*b)) {
            if chunk.len() > best.0 {
                best = (chunk.len(), bucket(chunk[0]));
            }
        }
        let cluster: Vec<i64> = delays.iter().copied().filter(|d| (bucket(*d) - best.1).abs() <= 1).collect();
        (cluster.len() >= MIN_CONNECTIONS).then(|| (((cluster[0] + EARLY_SLACK_NS) / (SECOND / 10)) as f64 / 10.0, cluster.len()))
    }

    proptest::proptest! {
        #[test]
        fn test_read_histogram_finds_the_cluster_of_the_sorted_delays(delays in proptest::collection::vec(1i64..4_000_000_000, 0..60)) {
            proptest::prop_assert_eq!(reads(&delays).map(|t| (t.seconds, t.connections)), reads_sorted(&delays));
        }

        #[test]
        fn test_give_ups_of_two_parts_merged_are_those_of_the_whole(
            delays in proptest::collection::vec(1i64..4_000_000_000, 0..40),
            bounds in proptest::collection::vec((0i64..5_000_000_000, 0i64..3_000_000_000), 0..20),
            split in 0usize..40,
        ) {
            let bounds: Vec<(i64, i64)> = bounds.iter().map(|&(lo, extra)| (lo, lo + extra)).collect();
            let mut whole = GiveUps::default();
            let mut parts = [GiveUps::default(), GiveUps::default()];
            for (i, &d) in delays.iter().enumerate() {
                whole.add_read(d, i % 3 == 0);
                parts[usize::from(i >= split)].add_read(d, i % 3 == 0);
            }
            for (i, &b) in bounds.iter().enumerate() {
                whole.add_connect(b);
                parts[usize::from(i >= split / 2)].add_connect(b);
            }
            let [mut first, second] = parts;
            first.merge(&second);
            proptest::prop_assert_eq!(first.infer(), whole.infer());
        }
    }

    #[test]
    fn test_read_buckets_are_bounded() {
        let mut give_ups = GiveUps::default();
        for i in 0..(MAX_READ_BUCKETS as i64 + 10) {
            give_ups.add_read((i + 1) * BUCKET_NS, false);
        }
        give_ups.add_read(BUCKET_NS + 1, false);
        assert_eq!(give_ups.read.len(), MAX_READ_BUCKETS);
        assert_eq!(give_ups.read_gave_up, MAX_READ_BUCKETS as u64 + 11);
        // The bucket seen twice is the fullest; its earliest delay gives the timeout.
        assert_eq!(give_ups.read_timeout().map(|t| (t.seconds, t.connections)), Some((0.0, 3)));
    }

    #[test]
    fn test_read_give_ups_whose_fins_were_held_give_a_range_above_the_longest_answer() {
        // Three FINs released at 3.33 s by the ACK of the re-sent request; an answer came after
        // 2.48 s: the timeout is above 2.48 s and at most 3.33 s.
        let mut give_ups = GiveUps::default();
        (0..3).for_each(|i| give_ups.add_read(3_327 * MS + i * MS, true));
        give_ups.answered_longest = 2_477 * MS;
        let t = give_ups.read_timeout().unwrap();
        assert_eq!((t.seconds, t.range), (2.5, Some((2.477, 3.327))));
        // One FIN that left at once in the cluster says the delay itself.
        give_ups.add_read(3_302 * MS, false);
        let t = give_ups.read_timeout().unwrap();
        assert_eq!((t.seconds, t.range), (3.3, None));
    }

    #[test]
    fn test_read_give_ups_all_held_without_an_answer_say_at_most() {
        let mut give_ups = GiveUps::default();
        (0..3).for_each(|i| give_ups.add_read(3_327 * MS + i * MS, true));
        let t = give_ups.read_timeout().unwrap();
        assert_eq!((t.seconds, t.range), (3.3, Some((0.0, 3.327))));
    }

    // ---- connect give-ups ----

    #[test]
    fn test_connect_bounds_give_the_whole_second_inside_them() {
        // SYNs at 0 and 1 s, the next due at 2 s (linear): gave up in (1, 2.05].
        let bounds = vec![(1_013 * MS, 2_063 * MS); 3];
        let t = connects(&bounds).unwrap();
        assert_eq!((t.seconds, t.connections, t.measured), (2.0, 3, false));
    }

    #[test]
    fn test_connect_most_connections_win() {
        let mut bounds = vec![(1_013 * MS, 2_063 * MS); 3];
        bounds.push((3_010 * MS, 4_060 * MS));
        assert_eq!(connects(&bounds).unwrap().seconds, 2.0);
    }
}
