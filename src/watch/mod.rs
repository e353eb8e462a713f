//! A capture watched live (`tcpdump -w - port 9000 | pcapq watch -`): per listener, what happened
//! since the last look, and its episodes as they open and recover, kept up to date as segments
//! arrive so that a look (`Watch::take`) costs nothing in proportion to the connections.
//!
//! Each segment that moves a connection on (`flow::stage::Change`) is read for signs: the
//! symptoms of `detect::classify` as the one packet that first shows them (a SYN sent again, a
//! SYN-ACK sent again after the client's ACK, ...). They are signs, not a diagnosis: the rules
//! that name a cause run on the whole capture at the end.
//!
//! An episode of a listener opens with its first sign (data re-sent alone does not open one: a
//! busy path re-sends some data all the time) and recovers once `RECOVERY_QUIET_NS` of capture
//! time passed without a sign while the listener answered connections again.

pub mod metrics;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::decode::icmp::IcmpKind;
use crate::detect::{Symptom, Symptoms};
use crate::flow::stage::{Change, Stage};
use crate::flow::{Connection, Endpoint, PacketRole, Side};
use metrics::{Metrics, Snapshot};

/// An episode recovers after this long without a sign, with answers in between.
pub const RECOVERY_QUIET_NS: i64 = 5 * 1_000_000_000;
/// Episode events kept between two looks; more are counted, not kept.
pub const MAX_EVENTS: usize = 64;
/// Connections an open episode remembers by id, to count each once; beyond, `Open::beyond`.
pub const MAX_EPISODE_CONNECTIONS: usize = 1024;
/// Episodes open at once. An episode recovers only once its listener answers again, so one of a
/// port that never answers (a closed port probed, a listener gone) stays open: past this, the
/// one whose last sign is oldest is forgotten (`Look::forgotten`).
pub const MAX_OPEN_EPISODES: usize = 4096;

/// The symptoms a watch reads from single segments, in the core's order.
pub const SIGNS: [Symptom; 7] = [
    Symptom::SynRetransmitted,
    Symptom::SynackRetransmitted,
    Symptom::FinalAckDropped,
    Symptom::RequestUnacked,
    Symptom::DataRetransmitted,
    Symptom::ResetAfterAck,
    Symptom::Rejected,
];

/// What one listener saw between two looks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    /// Connections whose first SYN arrived.
    pub connections: u64,
    /// Connections the server answered for the first time (its first data).
    pub answered: u64,
    /// Connections that ended without the server's answer: refused, reset, or closed by the client.
    pub failed: u64,
    /// Segments showing each sign, by `SIGNS` position.
    pub signs: [u64; SIGNS.len()],
}

impl Interval {
    fn activity(&self) -> u64 {
        self.connections + self.answered + self.failed + self.signs.iter().sum::<u64>()
    }
}

/// An episode still open.
#[derive(Clone, Debug)]
struct Open {
    first_ns: i64,
    last_sign_ns: i64,
    answered_since_sign: u64,
    signs: Symptoms,
    connections: FxHashSet<u64>,
    /// Connections counted once `connections` was full: one whose id is above every id
    /// counted before (ids follow the order connections began), so that none counts twice;
    /// one that shows its first sign after a later one began is missed.
    beyond: u64,
    beyond_above: Option<u64>,
}

impl Open {
    fn add_connection(&mut self, id: u64) {
        if self.connections.len() < MAX_EPISODE_CONNECTIONS || self.connections.contains(&id) {
            self.connections.insert(id);
            return;
        }
        let above = *self.beyond_above.get_or_insert_with(|| self.connections.iter().copied().max().unwrap_or(0));
        if id > above {
            self.beyond += 1;
            self.beyond_above = Some(id);
        }
    }

    fn connections(&self) -> u64 {
        self.connections.len() as u64 + self.beyond
    }
}

crate::slugs::slug_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum EpisodeEventKind {
        Opened => "opened",
        /// An open episode showed signs it had not shown before (`signs` holds those only).
        NewSigns => "new_signs",
        Recovered => "recovered",
        /// Still open when the input ended (`Watch::take` at the end).
        StillOpen => "still_open",
    }
}

/// An episode that opened or recovered, with what it showed so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpisodeEvent {
    pub kind: EpisodeEventKind,
    pub server: Endpoint,
    /// When it was seen to open (its first sign), to recover, or to be still open.
    pub at_ns: i64,
    /// Its first sign.
    pub first_ns: i64,
    /// Its last sign so far.
    pub last_ns: i64,
    pub signs: Symptoms,
    /// Connections that showed a sign or failed while it was open.
    pub connections: u64,
}

/// What a look hands over: bounded by `max_servers` and `MAX_EVENTS`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Look {
    /// The busiest listeners of the interval, busiest first.
    pub servers: Vec<(Endpoint, Interval)>,
    /// Listeners active in the interval beyond those.
    pub more_servers: u64,
    pub events: Vec<EpisodeEvent>,
    pub events_dropped: u64,
    /// Episodes open now.
    pub open: u64,
    /// Open episodes forgotten since the last look, the oldest of more than `MAX_OPEN_EPISODES`.
    pub forgotten: u64,
    /// The latest packet's time.
    pub latest_ns: Option<i64>,
    /// TCP segments tracked so far.
    pub segments: u64,
}

#[derive(Debug, Default)]
pub struct Watch {
    interval: FxHashMap<Endpoint, Interval>,
    open: FxHashMap<Endpoint, Open>,
    events: Vec<EpisodeEvent>,
    events_dropped: u64,
    forgotten: u64,
    latest_ns: Option<i64>,
    segments: u64,
    /// Counts since the start, per listener (`enable_metrics`): what `pcapq watch --metrics`
    /// serves.
    metrics: Option<Metrics>,
}

/// The signs one segment showed, and whether it ended its connection without an answer.
fn signs_of(before: &Stage, after: &Stage) -> (Symptoms, bool) {
    let mut s = Symptoms::default();
    // A SYN again with the same ISN; one after the server's RST is a retry of a refused
    // connect (`syn_after_rst`), not a sign.
    if after.syn_count > before.syn_count && before.syn_count >= 1 && before.rst.is_none() {
        s.insert(Symptom::SynRetransmitted);
    }
    // A SYN-ACK again: by its timer after the client's ACK, the server's kernel dropped that
    // ACK (Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_check_req(), accept queue full).
    if after.synack_count > before.synack_count && before.synack_count >= 1 {
        let timer = !after.synack_triggered;
        s.insert(if timer && before.handshake_acked { Symptom::FinalAckDropped } else { Symptom::SynackRetransmitted });
    }
    let client = Side::Client.index();
    if after.data_retransmits[client] > before.data_retransmits[client] && !before.request_acked {
        s.insert(Symptom::RequestUnacked);
    } else if after.data_retransmits != before.data_retransmits {
        s.insert(Symptom::DataRetransmitted);
    }
    if before.rst.is_none() {
        match after.rst {
            Some((Side::Server, Some(PacketRole::Syn))) => s.insert(Symptom::Rejected),
            // The server reset the handshake ACK or first request of a connection it had neither
            // answered nor acknowledged: net.ipv4.tcp_abort_on_overflow=1 and a full accept queue.
            Some((Side::Server, Some(PacketRole::HandshakeAck | PacketRole::Data)))
                if !before.answered && !before.request_acked && before.handshake_acked =>
            {
                s.insert(Symptom::ResetAfterAck)
            }
            _ => {}
        }
    }
    let ended = (after.rst.is_some() && before.rst.is_none()) || (after.client_fin && !before.client_fin);
    (s, ended && !after.answered)
}

fn sign_index(s: Symptom) -> Option<usize> {
    SIGNS.iter().position(|&x| x == s)
}

impl Watch {
    /// A segment was tracked at `time_ns`.
    pub fn seen(&mut self, time_ns: i64) {
        self.segments += 1;
        self.latest_ns = Some(self.latest_ns.map_or(time_ns, |t| t.max(time_ns)));
        if let Some(m) = &mut self.metrics {
            m.seen(time_ns);
        }
    }

    /// From now on, keeps per-listener metrics too, naming at most `max_listeners` listeners.
    pub fn enable_metrics(&mut self, max_listeners: usize) {
        self.metrics.get_or_insert_with(|| Metrics::new(max_listeners));
    }

    /// A connection left the tracker's hot table at `now_ns` (a copy of its record): its
    /// outcome then is counted (`enable_metrics` only).
    pub fn ended(&mut self, conn: &Connection, now_ns: i64) {
        if let Some(m) = self.metrics.as_mut().filter(|m| m.follows(conn.id)) {
            m.ended(conn, crate::detect::classify(conn, now_ns).0);
        }
    }

    /// The input ended: every connection still followed ends with the capture (its latest
    /// packet), as the analysis counts it. `records` holds them, among others.
    pub fn end_input(&mut self, records: &[Connection]) {
        let end_ns = self.latest_ns.unwrap_or(0);
        for conn in records {
            self.ended(conn, end_ns);
        }
    }

    /// An ICMP error tied to a connection of `server`.
    pub fn icmp(&mut self, server: Endpoint, kind: IcmpKind) {
        if let Some(m) = &mut self.metrics {
            m.icmp(server, kind);
        }
    }

    /// The capture said `n` packets were dropped (pcapng Interface Statistics Blocks).
    pub fn add_dropped(&mut self, n: u64) {
        if let Some(m) = &mut self.metrics {
            m.add_dropped(n);
        }
    }

    /// The metrics as a scrape reads them: O(listeners). Without `enable_metrics`, no listener.
    pub fn metrics(&self) -> Snapshot {
        let open: FxHashMap<Endpoint, Symptoms> = self.open.iter().map(|(s, o)| (*s, o.signs)).collect();
        let empty = Metrics::new(0);
        self.metrics.as_ref().unwrap_or(&empty).snapshot(self.segments, self.latest_ns, &open)
    }

    /// Reads one change for signs, counts it, and opens or feeds its listener's episode.
    pub fn note(&mut self, c: &Change) {
        let (signs, failed) = signs_of(&c.before, &c.after);
        if let Some(m) = &mut self.metrics {
            m.note(c, signs);
        }
        self.recover(c.server, c.time_ns);
        let interval = self.interval.entry(c.server).or_default();
        if c.opened && !c.partial && c.after.syn_count > 0 {
            interval.connections += 1;
        }
        let answered = c.after.answered && !c.before.answered;
        if answered {
            interval.answered += 1;
        }
        if failed {
            interval.failed += 1;
        }
        for s in signs.iter() {
            if let Some(i) = sign_index(s) {
                interval.signs[i] += 1;
            }
        }
        let opens = signs.iter().any(|s| s != Symptom::DataRetransmitted);
        if let Some(open) = self.open.get_mut(&c.server) {
            if answered {
                open.answered_since_sign += 1;
            }
            let mut new = Symptoms::default();
            for s in signs.iter().filter(|&s| !open.signs.contains(s) && s != Symptom::DataRetransmitted) {
                new.insert(s);
            }
            if !signs.is_empty() {
                open.last_sign_ns = open.last_sign_ns.max(c.time_ns);
                open.answered_since_sign = 0;
                open.signs = union(open.signs, signs);
            }
            if !signs.is_empty() || failed {
                open.add_connection(c.id);
            }
            // Signs the episode had not shown yet, once its opening was handed over (until
            // then, the opening tells them).
            let said = EpisodeEvent { kind: EpisodeEventKind::NewSigns, signs: new, ..event(EpisodeEventKind::NewSigns, c.server, open, c.time_ns) };
            let opening_pending = self.events.iter().any(|e| e.kind == EpisodeEventKind::Opened && e.server == c.server && e.first_ns == said.first_ns);
            if !new.is_empty() && !opening_pending {
                self.push(said);
            }
        } else if opens {
            // No episode open (or one just recovered: this sign opens the next).
            let mut connections = FxHashSet::default();
            connections.insert(c.id);
            let open = Open { first_ns: c.time_ns, last_sign_ns: c.time_ns, answered_since_sign: 0, signs, connections, beyond: 0, beyond_above: None };
            self.push(event(EpisodeEventKind::Opened, c.server, &open, c.time_ns));
            if self.open.len() >= MAX_OPEN_EPISODES {
                self.forget_oldest_episode();
            }
            self.open.insert(c.server, open);
        }
    }

    /// Forgets the open episode whose last sign is the oldest (ties: the lowest listener).
    fn forget_oldest_episode(&mut self) {
        let oldest = self.open.iter().min_by_key(|(server, o)| (o.last_sign_ns, **server)).map(|(server, _)| *server);
        if let Some(server) = oldest {
            self.open.remove(&server);
            self.forgotten += 1;
        }
    }

    /// Closes `server`'s episode if it has recovered by `now_ns`.
    fn recover(&mut self, server: Endpoint, now_ns: i64) {
        let Some(open) = self.open.get(&server) else { return };
        if now_ns - open.last_sign_ns < RECOVERY_QUIET_NS || open.answered_since_sign == 0 {
            return;
        }
        let (now, recovered) = (event(EpisodeEventKind::Opened, server, open, now_ns), event(EpisodeEventKind::Recovered, server, open, now_ns));
        self.refresh_opened(now);
        self.open.remove(&server);
        self.push(recovered);
    }

    /// An `Opened` event not handed over yet tells what its episode showed until now (`now`),
    /// not only its first sign.
    fn refresh_opened(&mut self, now: EpisodeEvent) {
        let same = |e: &&mut EpisodeEvent| e.kind == EpisodeEventKind::Opened && e.server == now.server && e.first_ns == now.first_ns;
        if let Some(e) = self.events.iter_mut().find(same) {
            *e = EpisodeEvent { at_ns: e.at_ns, ..now };
        }
    }

    fn push(&mut self, e: EpisodeEvent) {
        if self.events.len() < MAX_EVENTS {
            self.events.push(e);
        } else {
            self.events_dropped += 1;
        }
    }

    /// What happened since the last look: the `max_servers` busiest listeners of the interval,
    /// the episodes that opened or recovered (an opened one with the signs it showed since),
    /// and, at the end of the input (`end`), the episodes still open. Starts a new interval.
    pub fn take(&mut self, max_servers: usize, end: bool) -> Look {
        if let Some(now) = self.latest_ns {
            let mut servers: Vec<Endpoint> = self.open.keys().copied().collect();
            servers.sort();
            for server in servers {
                self.recover(server, now);
            }
        }
        let now = self.latest_ns.unwrap_or(0);
        let open: Vec<EpisodeEvent> = self.open.iter().map(|(s, o)| event(EpisodeEventKind::Opened, *s, o, now)).collect();
        for e in open {
            self.refresh_opened(e);
        }
        let mut events = std::mem::take(&mut self.events);
        if end {
            let mut still: Vec<EpisodeEvent> = self.open.iter().map(|(s, o)| event(EpisodeEventKind::StillOpen, *s, o, now)).collect();
            still.sort_by_key(|e| (e.first_ns, e.server));
            events.extend(still);
        }
        let mut servers: Vec<(Endpoint, Interval)> = self.interval.drain().filter(|(_, i)| i.activity() > 0).collect();
        servers.sort_by(|a, b| b.1.activity().cmp(&a.1.activity()).then(a.0.cmp(&b.0)));
        let more_servers = servers.len().saturating_sub(max_servers) as u64;
        servers.truncate(max_servers);
        Look {
            servers,
            more_servers,
            events,
            events_dropped: std::mem::take(&mut self.events_dropped),
            open: self.open.len() as u64,
            forgotten: std::mem::take(&mut self.forgotten),
            latest_ns: self.latest_ns,
            segments: self.segments,
        }
    }
}

fn union(a: Symptoms, b: Symptoms) -> Symptoms {
    let mut out = a;
    for s in b.iter() {
        out.insert(s);
    }
    out
}

fn event(kind: EpisodeEventKind, server: Endpoint, open: &Open, at_ns: i64) -> EpisodeEvent {
    EpisodeEvent {
        kind,
        server,
        at_ns,
        first_ns: open.first_ns,
        last_ns: open.last_sign_ns,
        signs: open.signs,
        connections: open.connections(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn server() -> Endpoint {
        Endpoint { ip: "10.0.0.2".parse().unwrap(), port: 9000 }
    }

    fn change(id: u64, time_ns: i64, before: Stage, after: Stage) -> Change {
        Change { id, server: server(), time_ns, opened: before == Stage::default(), partial: false, before, after }
    }

    fn syn(n: u32) -> Stage {
        Stage { syn_count: n, ..Stage::default() }
    }

    fn answered() -> Stage {
        Stage { syn_count: 1, synack_count: 1, handshake_acked: true, request_acked: true, answered: true, ..Stage::default() }
    }

    // ---- signs of one segment ----

    #[test]
    fn test_signs_synack_again_after_the_ack_is_final_ack_dropped() {
        let before = Stage { syn_count: 1, synack_count: 1, handshake_acked: true, ..Stage::default() };
        let after = Stage { synack_count: 2, ..before };
        let (s, failed) = signs_of(&before, &after);
        assert!(s.contains(Symptom::FinalAckDropped) && !s.contains(Symptom::SynackRetransmitted));
        assert!(!failed);
        // Sent at once on a re-sent SYN, it says nothing of the ACK.
        let (s, _) = signs_of(&before, &Stage { synack_triggered: true, ..after });
        assert!(s.contains(Symptom::SynackRetransmitted) && !s.contains(Symptom::FinalAckDropped));
    }

    #[test]
    fn test_signs_syn_again_after_an_rst_is_no_sign() {
        let before = Stage { rst: Some((Side::Server, Some(PacketRole::Syn))), ..syn(1) };
        assert!(signs_of(&before, &Stage { syn_count: 2, ..before }).0.is_empty());
        assert!(signs_of(&syn(1), &syn(2)).0.contains(Symptom::SynRetransmitted));
    }

    #[test]
    fn test_signs_rst_to_the_syn_is_rejected_and_failed() {
        let after = Stage { rst: Some((Side::Server, Some(PacketRole::Syn))), ..syn(1) };
        let (s, failed) = signs_of(&syn(1), &after);
        assert!(s.contains(Symptom::Rejected) && failed);
    }

    #[test]
    fn test_signs_request_resent_unacknowledged_and_client_close_unanswered() {
        let before = Stage { syn_count: 1, synack_count: 1, handshake_acked: true, ..Stage::default() };
        let mut after = before;
        after.data_retransmits[Side::Client.index()] = 1;
        assert!(signs_of(&before, &after).0.contains(Symptom::RequestUnacked));
        let (_, failed) = signs_of(&before, &Stage { client_fin: true, ..before });
        assert!(failed);
        let (_, failed) = signs_of(&answered(), &Stage { client_fin: true, ..answered() });
        assert!(!failed);
    }

    // ---- episodes ----

    #[test]
    fn test_episode_opens_on_a_sign_and_recovers_after_quiet_with_answers() {
        let mut w = Watch::default();
        w.note(&change(1, 0, Stage::default(), syn(1)));
        w.note(&change(1, S, syn(1), syn(2)));
        w.note(&change(2, 3 * S, syn(1), syn(2)));
        let look = w.take(8, false);
        assert_eq!(look.events.len(), 1);
        assert_eq!(look.events[0].kind, EpisodeEventKind::Opened);
        assert_eq!((look.events[0].first_ns, look.events[0].last_ns, look.events[0].connections), (S, 3 * S, 2));
        assert_eq!(look.servers[0].1.connections, 1);
        assert_eq!(look.servers[0].1.signs[0], 2);
        assert_eq!(look.open, 1);
        // Quiet for 5 s, but nothing answered: not recovered.
        w.seen(9 * S);
        assert!(w.take(8, false).events.is_empty());
        // An answer, then 5 s after the last sign: recovered.
        w.note(&change(3, 9 * S, syn(1), answered()));
        let look = w.take(8, false);
        assert_eq!(look.events.len(), 1);
        assert_eq!(look.events[0].kind, EpisodeEventKind::Recovered);
        assert_eq!(look.open, 0);
    }

    #[test]
    fn test_episode_new_signs_are_said_once_its_opening_was_handed_over() {
        let mut w = Watch::default();
        w.note(&change(1, 0, syn(1), syn(2)));
        let acked = Stage { syn_count: 1, synack_count: 1, handshake_acked: true, ..Stage::default() };
        // Before the look: the opening tells both signs.
        w.note(&change(2, S / 2, acked, Stage { synack_count: 2, ..acked }));
        let look = w.take(8, false);
        assert_eq!(look.events.len(), 1);
        assert!(look.events[0].signs.contains(Symptom::FinalAckDropped));
        // After it: a new sign is an event of its own, holding that sign only; a known one is not.
        w.note(&change(3, S, syn(1), syn(2)));
        let mut resent = acked;
        resent.data_retransmits[Side::Client.index()] = 1;
        w.note(&change(4, S, acked, resent));
        let look = w.take(8, false);
        assert_eq!(look.events.len(), 1);
        assert_eq!(look.events[0].kind, EpisodeEventKind::NewSigns);
        assert_eq!(look.events[0].signs.iter().collect::<Vec<_>>(), vec![Symptom::RequestUnacked]);
    }

    #[test]
    fn test_episode_data_resent_alone_opens_none_and_the_end_lists_open_ones() {
        let mut w = Watch::default();
        let before = answered();
        let mut after = before;
        after.data_retransmits[Side::Server.index()] = 1;
        w.note(&change(1, 0, before, after));
        assert_eq!(w.take(8, false).open, 0);
        w.note(&change(2, S, syn(1), syn(2)));
        let look = w.take(8, true);
        let kinds: Vec<EpisodeEventKind> = look.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec![EpisodeEventKind::Opened, EpisodeEventKind::StillOpen]);
    }

    #[test]
    fn test_episode_remembers_a_bounded_number_of_connections_and_counts_the_rest_once() {
        let mut w = Watch::default();
        let n = MAX_EPISODE_CONNECTIONS as u64 + 10;
        for id in 0..n {
            // Each connection shows two signs: counted once.
            w.note(&change(id, 0, syn(1), syn(2)));
            w.note(&change(id, 0, syn(2), syn(3)));
        }
        assert_eq!(w.open[&server()].connections.len(), MAX_EPISODE_CONNECTIONS);
        assert_eq!(w.take(8, true).events[0].connections, n);
    }

    #[test]
    fn test_episodes_of_listeners_that_never_answer_stay_bounded() {
        // A scan of closed ports: every port refuses one SYN and never answers again.
        let mut w = Watch::default();
        let refused = Stage { rst: Some((Side::Server, Some(PacketRole::Syn))), ..syn(1) };
        let ports = MAX_OPEN_EPISODES as u16 + 10;
        for port in 1..=ports {
            let mut c = change(u64::from(port), i64::from(port) * S, syn(1), refused);
            c.server.port = port;
            w.note(&c);
        }
        let look = w.take(8, false);
        assert_eq!((look.open, look.forgotten), (MAX_OPEN_EPISODES as u64, 10));
        // The oldest went: ports 1 to 10.
        assert!(!w.open.keys().any(|s| s.port <= 10) && w.open.keys().any(|s| s.port == 11));
        assert_eq!(w.take(8, false).forgotten, 0);
    }

    #[test]
    fn test_take_keeps_the_busiest_servers_and_counts_the_rest() {
        let mut w = Watch::default();
        for port in 1..=5u16 {
            for id in 0..u64::from(port) {
                let mut c = change(id, 0, Stage::default(), syn(1));
                c.server.port = port;
                w.note(&c);
            }
        }
        let look = w.take(2, false);
        assert_eq!(look.servers.iter().map(|(s, _)| s.port).collect::<Vec<_>>(), vec![5, 4]);
        assert_eq!(look.more_servers, 3);
        assert!(w.take(2, false).servers.is_empty());
    }
}
