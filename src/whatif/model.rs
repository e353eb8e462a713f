//! A discrete-event model of one Linux listener and the prefork server behind it, driven by an
//! offered load. We model Linux here (v6.x): each rule below names the kernel function it
//! follows. Times are in nanoseconds from the load's first SYN.
//!
//! Not modelled: loss on the path, a service time that grows with load, the proxy retrying on
//! another upstream, `net.ipv4.tcp_max_syn_backlog`'s last quarter kept for proven peers
//! (`tcp_conn_request()`, without syncookies), a client's FIN reaching a request sock.

use super::load::Load;
use super::Outcome;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

const SECOND_NS: i64 = 1_000_000_000;
/// include/net/tcp.h: TCP_TIMEOUT_INIT, the first SYN and SYN-ACK timeout.
const TIMEOUT_INIT_NS: i64 = SECOND_NS;
/// include/net/tcp.h: TCP_RTO_MAX, the longest any retransmission timer runs.
const RTO_MAX_NS: i64 = 120 * SECOND_NS;
/// include/net/tcp.h: TCP_RTO_MIN; a data RTO is the round trip plus this when the round trip
/// varies little (`tcp_set_rto()`: srtt + 4·rttvar, rttvar at least tcp_rto_min).
const RTO_MIN_NS: i64 = SECOND_NS / 5;
/// A jiffy at CONFIG_HZ=250, the tick the kernel's timers count in.
const JIFFY_NS: i64 = SECOND_NS / 250;
/// kernel/time/timer.c: the timer wheel's levels of 64 buckets, each level's 8 times as wide.
const LVL_CLK_SHIFT: u32 = 3;
const LVL_SIZE: i64 = 64;
const LVL_DEPTH: u32 = 9;

/// The settings of the listener, the server and its clients that the model takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The effective backlog: listen()'s backlog after the `net.core.somaxconn` clamp.
    pub backlog: u32,
    /// How many requests the server serves at once (prefork workers).
    pub workers: u32,
    /// `net.ipv4.tcp_syncookies`: 0 off, 1 when the SYN queue is full, 2 always.
    pub syncookies: u8,
    /// `net.ipv4.tcp_synack_retries`.
    pub synack_retries: u32,
    /// The client's `net.ipv4.tcp_syn_retries`.
    pub syn_retries: u32,
    /// The client's `net.ipv4.tcp_syn_linear_timeouts`.
    pub syn_linear_timeouts: u32,
    /// When the client gives up, from its first SYN; None: never.
    pub client_timeout_ns: Option<i64>,
    /// `net.ipv4.tcp_abort_on_overflow`.
    pub abort_on_overflow: bool,
}

impl Default for Settings {
    /// Linux's defaults (Documentation/networking/ip-sysctl.rst) with listen()'s usual 511.
    fn default() -> Self {
        Settings {
            backlog: 511,
            workers: 1,
            syncookies: 1,
            synack_retries: 5,
            syn_retries: 6,
            syn_linear_timeouts: 4,
            client_timeout_ns: None,
            abort_on_overflow: false,
        }
    }
}

/// Where a connection is, as the server holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// The client's SYN sent; no SYN-ACK answered it yet.
    Connecting,
    /// A request sock in the SYN queue (SYN-RECEIVED).
    Requested,
    /// Answered with a syncookie: no request sock, no SYN-ACK timer.
    Cookie,
    /// The request sock expired: the client's next segment is answered with an RST.
    Expired,
    /// A child in the accept queue.
    Queued,
    /// Accepted by a worker: serving, or waiting for the request.
    Accepted,
    /// Answered, given up or reset: nothing more happens to it.
    Over,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A SYN (first or re-sent) reaches the listener.
    Syn,
    /// The client's handshake ACK, or a later ACK, reaches the server; `with_request` when it
    /// carries the request.
    Ack { with_request: bool },
    /// The request sock's SYN-ACK timer fires.
    SynAckTimer,
    /// The client's data retransmission timer fires.
    RequestResend,
    /// The worker serving the connection sends the answer.
    Answer,
    /// The client's timeout.
    GiveUp,
}

#[derive(Clone, Copy, Debug)]
struct Conn {
    stage: Stage,
    syn_sends: u32,
    /// SYN-ACK re-sends so far (the request sock's num_timeout).
    num_timeout: u32,
    /// `reqsk_queue_len_young()` counts it: no SYN-ACK timeout yet.
    young: bool,
    /// The child has the request.
    request_in: bool,
    /// The client's data RTO, doubled on each re-send after the loss probe.
    rto_ns: i64,
    /// The first re-send of the request was the tail loss probe.
    probed: bool,
    gave_up: bool,
    answered: bool,
    reset: bool,
    got_synack: bool,
    /// A worker had the request.
    served_from_ns: Option<i64>,
    service_ns: i64,
}

struct Sim<'a> {
    settings: Settings,
    load: &'a Load,
    conns: Vec<Conn>,
    events: BinaryHeap<Reverse<(i64, u64, usize, Event)>>,
    sequence: u64,
    /// Request socks in the SYN queue (`inet_csk_reqsk_queue_len()`), and the young ones.
    syn_queue: u32,
    young: u32,
    accept_queue: VecDeque<usize>,
    idle_workers: u32,
    listen_overflows: u64,
    /// Where the load's first SYN fell within a jiffy.
    jiffy_phase_ns: i64,
}

/// Replays `load` with `settings`: every connection's first SYN at its time, its service time
/// its own where the capture answered it, else drawn (with `seed`) from the answered ones'.
pub fn replay(load: &Load, settings: &Settings, seed: u64) -> Outcome {
    simulate(load, settings, seed).outcome()
}

fn simulate<'a>(load: &'a Load, settings: &Settings, seed: u64) -> Sim<'a> {
    let pool = load.service_times();
    let mut rng = SplitMix64(seed);
    let conns = load
        .connections
        .iter()
        .map(|o| {
            let drawn = if pool.is_empty() { 0 } else { pool.get((rng.next() % pool.len() as u64) as usize).copied().unwrap_or(0) };
            Conn {
                stage: Stage::Connecting,
                syn_sends: 0,
                num_timeout: 0,
                young: false,
                request_in: false,
                rto_ns: o.rtt_ns + RTO_MIN_NS,
                probed: false,
                gave_up: false,
                answered: false,
                reset: false,
                got_synack: false,
                served_from_ns: None,
                service_ns: o.service_ns.unwrap_or(drawn),
            }
        })
        .collect();
    let mut sim = Sim {
        settings: *settings,
        load,
        conns,
        events: BinaryHeap::new(),
        sequence: 0,
        syn_queue: 0,
        young: 0,
        accept_queue: VecDeque::new(),
        idle_workers: settings.workers.max(1),
        listen_overflows: 0,
        jiffy_phase_ns: (rng.next() % JIFFY_NS as u64) as i64,
    };
    for (c, o) in load.connections.iter().enumerate() {
        sim.at(o.syn_ns, c, Event::Syn);
        if let Some(timeout) = settings.client_timeout_ns {
            sim.at(o.syn_ns + timeout, c, Event::GiveUp);
        }
    }
    while let Some(Reverse((now, _, c, event))) = sim.events.pop() {
        sim.handle(now, c, event);
    }
    sim
}

impl Sim<'_> {
    fn at(&mut self, time_ns: i64, c: usize, event: Event) {
        self.sequence += 1;
        self.events.push(Reverse((time_ns, self.sequence, c, event)));
    }

    /// When a kernel timer armed at `armed_ns` for `delay_ns` fires: on the timer wheel
    /// (kernel/time/timer.c: calc_wheel_index(), calc_index()), a timer due `delta` jiffies ahead
    /// goes to the level whose buckets are 8^level jiffies wide (level 0 below 63 jiffies, 1 below
    /// 504, ...), and fires at the end of its bucket, rounded up, never early. So timers armed
    /// a few milliseconds apart for a second fire together: the SYNs a burst had dropped are re-sent
    /// at one moment.
    fn timer(&self, armed_ns: i64, delay_ns: i64) -> i64 {
        let now = (armed_ns - self.jiffy_phase_ns).div_euclid(JIFFY_NS);
        let delta = (delay_ns + JIFFY_NS - 1) / JIFFY_NS;
        let expires = now + delta;
        let level = (1..LVL_DEPTH).find(|&l| delta < (LVL_SIZE - 1) << (LVL_CLK_SHIFT * (l - 1))).map_or(LVL_DEPTH - 1, |l| l - 1);
        let shift = LVL_CLK_SHIFT * level;
        let bucket = ((expires + (1 << shift)) >> shift) << shift;
        bucket * JIFFY_NS + self.jiffy_phase_ns
    }

    fn conn(&mut self, c: usize) -> &mut Conn {
        &mut self.conns[c]
    }

    fn rtt(&self, c: usize) -> i64 {
        self.load.connections.get(c).map_or(0, |o| o.rtt_ns)
    }

    /// include/net/sock.h: sk_acceptq_is_full() is `sk_ack_backlog > sk_max_ack_backlog`, so
    /// backlog + 1 children fit.
    fn accept_queue_full(&self) -> bool {
        self.accept_queue.len() > self.settings.backlog as usize
    }

    /// include/net/inet_connection_sock.h: inet_csk_reqsk_queue_is_full(), the SYN queue held
    /// to the same backlog.
    fn syn_queue_full(&self) -> bool {
        self.syn_queue > self.settings.backlog
    }

    fn handle(&mut self, now: i64, c: usize, event: Event) {
        if self.conns[c].stage == Stage::Over && event != Event::Answer {
            return;
        }
        match event {
            Event::Syn => self.syn(now, c),
            Event::Ack { with_request } => self.ack(now, c, with_request),
            Event::SynAckTimer => self.synack_timer(now, c),
            Event::RequestResend => self.request_resend(now, c),
            Event::Answer => self.answer(now, c),
            Event::GiveUp => self.give_up(c),
        }
    }

    /// net/ipv4/tcp_input.c: tcp_conn_request().
    fn syn(&mut self, now: i64, c: usize) {
        if self.conns[c].stage != Stage::Connecting || self.conns[c].gave_up {
            return;
        }
        self.conn(c).syn_sends += 1;
        // With syncookies 2, or the SYN queue full, tcp_syn_flood_action() answers with a
        // cookie when syncookies are on, else the SYN is dropped.
        let mut want_cookie = false;
        if self.settings.syncookies == 2 || self.syn_queue_full() {
            if self.settings.syncookies == 0 {
                self.resend_syn(now, c);
                return;
            }
            want_cookie = true;
        }
        // A full accept queue drops the SYN before any SYN-ACK (LINUX_MIB_LISTENOVERFLOWS).
        if self.accept_queue_full() {
            self.listen_overflows += 1;
            self.resend_syn(now, c);
            return;
        }
        let rtt = self.rtt(c);
        if want_cookie {
            // A cookie SYN-ACK keeps no request sock and is never re-sent.
            self.conn(c).stage = Stage::Cookie;
        } else {
            self.syn_queue += 1;
            self.young += 1;
            let conn = self.conn(c);
            conn.stage = Stage::Requested;
            conn.young = true;
            conn.num_timeout = 0;
            // net/ipv4/inet_connection_sock.c: reqsk_queue_hash_req() arms the SYN-ACK timer
            // at TCP_TIMEOUT_INIT.
            let fires = self.timer(now, TIMEOUT_INIT_NS);
            self.at(fires, c, Event::SynAckTimer);
        }
        // The client, established on the SYN-ACK, sends its ACK and its request at once, and
        // arms its data retransmission timer.
        let conn = self.conn(c);
        conn.got_synack = true;
        let rto = conn.rto_ns;
        self.at(now + rtt, c, Event::Ack { with_request: true });
        let fires = self.timer(now + rtt, rto);
        self.at(fires, c, Event::RequestResend);
    }

    /// The client's SYN timer (net/ipv4/tcp_timer.c: tcp_retransmit_timer()): the first
    /// `tcp_syn_linear_timeouts` + 1 waits are TCP_TIMEOUT_INIT, then each doubles, up to
    /// `tcp_syn_retries` re-sends; after the last the connect fails.
    fn resend_syn(&mut self, now: i64, c: usize) {
        let sends = self.conns[c].syn_sends;
        if sends > self.settings.syn_retries {
            self.conn(c).stage = Stage::Over;
            return;
        }
        let wait = syn_wait(sends, self.settings.syn_linear_timeouts);
        let fires = self.timer(now, wait);
        self.at(fires, c, Event::Syn);
    }

    /// net/ipv4/tcp_minisocks.c: tcp_check_req(), the segment that completes the handshake,
    /// and net/ipv4/tcp_ipv4.c: tcp_v4_syn_recv_sock().
    fn ack(&mut self, now: i64, c: usize, with_request: bool) {
        let stage = self.conns[c].stage;
        match stage {
            Stage::Requested | Stage::Cookie => {
                if self.accept_queue_full() {
                    // tcp_v4_syn_recv_sock(): sk_acceptq_is_full() → exit_overflow.
                    self.listen_overflows += 1;
                    if self.settings.abort_on_overflow {
                        // tcp_check_req(): listen_overflow → embryonic_reset, an RST.
                        self.unlink_request(c);
                        let conn = self.conn(c);
                        conn.reset = true;
                        conn.stage = Stage::Over;
                    }
                    // Otherwise the segment is dropped (`inet_rsk(req)->acked = 1`) and the
                    // request sock stays with its SYN-ACK timer.
                    return;
                }
                if stage == Stage::Requested {
                    self.unlink_request(c);
                }
                let conn = self.conn(c);
                conn.stage = Stage::Queued;
                conn.request_in = with_request;
                self.accept_queue.push_back(c);
                self.dispatch(now);
            }
            Stage::Queued | Stage::Accepted => {
                if with_request && !self.conns[c].request_in {
                    self.conn(c).request_in = true;
                    if stage == Stage::Accepted {
                        self.serve(now, c);
                    }
                }
            }
            // net/ipv4/tcp_input.c: tcp_rcv_state_process() in LISTEN answers an ACK with an RST
            // (RFC 9293 §3.10.7.2).
            Stage::Expired => {
                let conn = self.conn(c);
                conn.reset = true;
                conn.stage = Stage::Over;
            }
            Stage::Connecting | Stage::Over => {}
        }
    }

    /// The client's re-sends of its request, until the server has it: first the tail loss
    /// probe (net/ipv4/tcp_output.c: tcp_schedule_loss_probe(), with one segment in flight two
    /// round trips plus TCP_RTO_MIN, at most the RTO), which re-arms the RTO
    /// (tcp_send_loss_probe()); then each retransmission timeout doubles it
    /// (tcp_retransmit_timer()), up to TCP_RTO_MAX.
    fn request_resend(&mut self, now: i64, c: usize) {
        if self.conns[c].request_in {
            return;
        }
        self.ack(now, c, true);
        let conn = self.conn(c);
        if conn.stage == Stage::Over || conn.request_in {
            return;
        }
        if conn.probed {
            conn.rto_ns = (conn.rto_ns * 2).min(RTO_MAX_NS);
        }
        conn.probed = true;
        let rto = conn.rto_ns;
        let fires = self.timer(now, rto);
        self.at(fires, c, Event::RequestResend);
    }

    /// net/ipv4/inet_connection_sock.c: reqsk_timer_handler() and syn_ack_recalc().
    fn synack_timer(&mut self, now: i64, c: usize) {
        if self.conns[c].stage != Stage::Requested {
            return;
        }
        // When more than half the queue is taken (qlen·2 > max(8, backlog)), old requests get
        // fewer retries: one fewer each time the young ones are no more than half, a quarter...
        let mut max_retries = self.settings.synack_retries;
        if self.syn_queue << 1 > self.settings.backlog.max(8) {
            let mut young = self.young << 1;
            while max_retries > 2 {
                if self.syn_queue < young {
                    break;
                }
                max_retries -= 1;
                young <<= 1;
            }
        }
        // syn_ack_recalc() without TCP_DEFER_ACCEPT: expire once num_timeout reaches the
        // retries, else re-send.
        if self.conns[c].num_timeout >= max_retries {
            self.unlink_request(c);
            self.conn(c).stage = Stage::Expired;
            return;
        }
        // The client, established, answers the re-sent SYN-ACK with an ACK (RFC 5961 §4.2 via
        // tcp_validate_incoming()): a bare ACK that may create the child.
        let rtt = self.rtt(c);
        self.at(now + rtt, c, Event::Ack { with_request: false });
        let conn = self.conn(c);
        if conn.young {
            conn.young = false;
            self.young -= 1;
        }
        let conn = self.conn(c);
        conn.num_timeout += 1;
        // reqsk_timeout(): TCP_TIMEOUT_INIT << num_timeout, at most TCP_RTO_MAX.
        let wait = doubled(TIMEOUT_INIT_NS, conn.num_timeout);
        let fires = self.timer(now, wait);
        self.at(fires, c, Event::SynAckTimer);
    }

    /// inet_csk_reqsk_queue_removed(): the request sock leaves the SYN queue.
    fn unlink_request(&mut self, c: usize) {
        if self.conns[c].stage != Stage::Requested {
            return;
        }
        self.syn_queue -= 1;
        if self.conns[c].young {
            self.conn(c).young = false;
            self.young -= 1;
        }
    }

    /// The client gives up: a connection not yet answered has failed. A client still in
    /// SYN-SENT stops there. Any other keeps re-sending its request after close(): the FIN
    /// waits behind the unacknowledged request (tcp_send_fin() queues it after the data), so
    /// the request still reaches a worker, who serves it for nobody.
    fn give_up(&mut self, c: usize) {
        if self.conns[c].answered {
            return;
        }
        let conn = self.conn(c);
        conn.gave_up = true;
        if conn.stage == Stage::Connecting {
            conn.stage = Stage::Over;
        }
    }

    fn answer(&mut self, now: i64, c: usize) {
        let conn = self.conn(c);
        conn.answered = !conn.gave_up && !conn.reset;
        conn.stage = Stage::Over;
        self.idle_workers += 1;
        self.dispatch(now);
    }

    /// Idle workers accept children in the order they were queued (inet_csk_accept() takes the
    /// head of the accept queue).
    fn dispatch(&mut self, now: i64) {
        while self.idle_workers > 0 {
            let Some(c) = self.accept_queue.pop_front() else { return };
            self.idle_workers -= 1;
            self.conn(c).stage = Stage::Accepted;
            let conn = self.conns[c];
            if conn.request_in {
                self.serve(now, c);
            }
        }
    }

    fn serve(&mut self, now: i64, c: usize) {
        let conn = self.conn(c);
        conn.served_from_ns = Some(now);
        let service = conn.service_ns;
        self.at(now + service, c, Event::Answer);
    }

    fn outcome(&self) -> Outcome {
        let mut out = Outcome { connections: self.conns.len() as u64, listen_overflows: self.listen_overflows, ..Outcome::default() };
        let mut waits = Vec::new();
        for (conn, offered) in self.conns.iter().zip(&self.load.connections) {
            out.syn_retransmitted += u64::from(conn.syn_sends > 1);
            out.tally(conn.answered, conn.reset, conn.got_synack);
            if conn.answered {
                waits.extend(conn.served_from_ns.map(|t| t - offered.syn_ns));
            }
        }
        out.finish(&mut waits);
        out
    }
}

/// The client's wait after its `sends`-th SYN: TCP_TIMEOUT_INIT for the first `linear` + 1,
/// then doubling, at most TCP_RTO_MAX.
fn syn_wait(sends: u32, linear: u32) -> i64 {
    let linear = linear.saturating_add(1);
    if sends <= linear {
        return TIMEOUT_INIT_NS;
    }
    doubled(TIMEOUT_INIT_NS, sends - linear)
}

/// `base` doubled `times` times, at most TCP_RTO_MAX.
fn doubled(base: i64, times: u32) -> i64 {
    base.saturating_mul(1 << times.min(16)).min(RTO_MAX_NS)
}

/// A small seeded generator (Steele, Lea and Flood's SplitMix64): the same seed, the same draws.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::whatif::load::{Offered, Seen};

    const MS: i64 = 1_000_000;

    fn offered(syn_ns: i64, service_ns: i64) -> Offered {
        Offered { syn_ns, rtt_ns: MS, service_ns: Some(service_ns), seen: Seen::default() }
    }

    fn settings(backlog: u32, workers: u32) -> Settings {
        Settings { backlog, workers, ..Settings::default() }
    }

    // ---- the client's SYN schedule ----

    #[test]
    fn test_syn_wait_linear_then_doubling() {
        let waits: Vec<i64> = (1..=7).map(|n| syn_wait(n, 4) / SECOND_NS).collect();
        assert_eq!(waits, [1, 1, 1, 1, 1, 2, 4]);
        let waits: Vec<i64> = (1..=4).map(|n| syn_wait(n, 0) / SECOND_NS).collect();
        assert_eq!(waits, [1, 2, 4, 8]);
        assert_eq!(syn_wait(40, 0), RTO_MAX_NS);
    }

    // ---- the accept queue ----

    #[test]
    fn test_accept_queue_burst_larger_than_backlog_drops_exactly_the_rest() {
        // 20 handshakes at once, one worker, backlog 4: the worker takes one, backlog + 1 = 5
        // wait in the queue, the other 14 ACKs (with their requests) are dropped, and their
        // first re-send (the loss probe) comes after the clients' 100 ms timeout: 6 answered, 14
        // failed. The re-sends still come (on the timer wheel, a few ms late): at about 0.21 s 6
        // of 14 get in (8 dropped), at the RTO, about 0.42 s, 6 of 8 (2 dropped), and the last 2
        // at the doubled RTO, about 0.83 s.
        let load = Load { connections: (0..20).map(|_| offered(0, MS)).collect() };
        let s = Settings { client_timeout_ns: Some(100 * MS), ..settings(4, 1) };
        let out = replay(&load, &s, 1);
        assert_eq!((out.answered, out.failed, out.failed_waiting), (6, 14, 14));
        assert_eq!(out.listen_overflows, 14 + 8 + 2);
        assert_eq!(out.syn_retransmitted, 0);
    }

    #[test]
    fn test_accept_queue_backlog_plus_one_children_fit() {
        // One worker busy for long: backlog + 1 children queue behind it without a drop, the
        // next is dropped.
        let fits = Load { connections: (0..6).map(|i| offered(i * MS, 10 * SECOND_NS)).collect() };
        assert_eq!(replay(&fits, &settings(4, 1), 1).listen_overflows, 0);
        let one_more = Load { connections: (0..7).map(|i| offered(i * MS, 10 * SECOND_NS)).collect() };
        assert!(replay(&one_more, &settings(4, 1), 1).listen_overflows >= 1);
    }

    #[test]
    fn test_accept_queue_abort_on_overflow_resets() {
        let load = Load { connections: (0..20).map(|_| offered(0, MS)).collect() };
        let s = Settings { abort_on_overflow: true, ..settings(4, 1) };
        let out = replay(&load, &s, 1);
        assert_eq!((out.answered, out.failed_reset), (6, 14));
    }

    #[test]
    fn test_accept_queue_full_drops_syn_then_client_resends_after_a_second() {
        // backlog 1: A is served, B and C queue (2 fit); D's SYN at 30 ms finds the queue full,
        // is dropped, and D's re-sent SYN, a second later on the timer wheel, gets in once A and
        // B are done.
        let load = Load {
            connections: vec![offered(0, 500 * MS), offered(10 * MS, 100 * MS), offered(20 * MS, 100 * MS), offered(30 * MS, 100 * MS)],
        };
        let sim = simulate(&load, &settings(1, 1), 1);
        let d = &sim.conns[3];
        assert_eq!(d.syn_sends, 2);
        let resent = sim.timer(30 * MS, SECOND_NS);
        assert!((1030 * MS..1070 * MS).contains(&resent), "{resent}");
        assert_eq!(d.served_from_ns, Some(resent + MS));
        assert_eq!(sim.listen_overflows, 1);
        assert_eq!(sim.outcome().answered, 4);
    }

    #[test]
    fn test_timer_wheel_rounds_up_to_its_level_bucket() {
        let load = Load { connections: vec![offered(0, MS)] };
        let mut sim = simulate(&load, &settings(1, 1), 1);
        sim.jiffy_phase_ns = 0;
        // 1 s is 250 jiffies: level 1, buckets of 8 jiffies (32 ms), rounded up past the expiry.
        assert_eq!(sim.timer(0, SECOND_NS), 1024 * MS);
        assert_eq!(sim.timer(10 * MS, SECOND_NS), 1024 * MS);
        assert_eq!(sim.timer(40 * MS, SECOND_NS), 1056 * MS);
        // 200 ms is 50 jiffies: level 0, one jiffy later.
        assert_eq!(sim.timer(0, 200 * MS), 204 * MS);
        // 4 s is 1000 jiffies: level 2, buckets of 64 jiffies (256 ms).
        assert_eq!(sim.timer(0, 4 * SECOND_NS), 4096 * MS);
        // A phase shifts the ticks.
        sim.jiffy_phase_ns = MS;
        assert_eq!(sim.timer(MS, SECOND_NS), 1025 * MS);
    }

    // ---- the SYN queue ----

    #[test]
    fn test_syn_queue_without_syncookies_drops_beyond_backlog() {
        // backlog 4, syncookies off: request socks beyond the backlog are dropped
        // (inet_csk_reqsk_queue_is_full), and the clients' re-sends come after their timeout.
        let load = Load { connections: (0..20).map(|_| offered(0, MS)).collect() };
        let s = Settings { syncookies: 0, client_timeout_ns: Some(500 * MS), ..settings(4, 1) };
        let out = replay(&load, &s, 1);
        assert_eq!((out.answered, out.failed_connecting), (5, 15));
        assert_eq!(out.listen_overflows, 0);
    }

    #[test]
    fn test_syn_queue_with_syncookies_answers_every_syn() {
        let load = Load { connections: (0..20).map(|_| offered(0, MS)).collect() };
        let s = Settings { client_timeout_ns: Some(500 * MS), ..settings(4, 1) };
        assert_eq!(replay(&load, &s, 1).failed_connecting, 0);
    }

    // ---- the SYN-ACK timer and the bare ACK ----

    #[test]
    fn test_synack_timer_bare_ack_creates_child_worker_waits_for_request() {
        // backlog 1, one worker. A is served until 0.901 s; B and C fill the queue; D's SYN
        // (20.5 ms) is answered, its ACK and request (21.5 ms) and the request's re-sends (the
        // loss probe about 0.2 s later, then RTOs of about 0.2 and 0.4 s) are dropped. The
        // SYN-ACK re-sent about a second later draws a bare ACK that creates D's child; the
        // worker accepts it once C is done and waits for the request's next re-send, about
        // 0.8 s after the last.
        let load = Load {
            connections: vec![
                offered(0, 900 * MS),
                offered(10 * MS, 100 * MS),
                offered(20 * MS, 30 * MS),
                Offered { syn_ns: 20 * MS + MS / 2, ..offered(0, 100 * MS) },
            ],
        };
        let sim = simulate(&load, &settings(1, 1), 1);
        let (c, d) = (&sim.conns[2], &sim.conns[3]);
        let c_done = c.served_from_ns.unwrap() + c.service_ns;
        let synack_resent = sim.timer(20 * MS + MS / 2, SECOND_NS);
        assert!(synack_resent < c_done, "the bare ACK came before the worker was free");
        let served = d.served_from_ns.unwrap();
        assert!(served - c_done > 500 * MS, "the worker waited for the request: {c_done} → {served}");
        assert_eq!(d.num_timeout, 1);
        assert!(d.answered);
        assert_eq!(sim.listen_overflows, 4);
    }

    #[test]
    fn test_synack_timer_expires_after_retries_then_reset() {
        // backlog 1, one worker busy for 200 s: B and C fill the queue, D's SYN comes before
        // C's ACK, so D's ACK is dropped, and every later one. With tcp_synack_retries 2 its
        // request sock expires at 7 s; its next data re-send (12.68 s) is answered with an RST.
        let load = Load {
            connections: vec![
                offered(0, 200 * SECOND_NS),
                offered(10 * MS, MS),
                offered(20 * MS, MS),
                Offered { syn_ns: 20 * MS + MS / 2, ..offered(0, MS) },
            ],
        };
        let s = Settings { synack_retries: 2, ..settings(1, 1) };
        let sim = simulate(&load, &s, 1);
        let d = &sim.conns[3];
        assert!(d.reset);
        assert_eq!(d.num_timeout, 2);
        assert_eq!(sim.outcome().failed_reset, 1);
    }

    #[test]
    fn test_synack_timer_old_requests_lose_retries() {
        // backlog 7, one worker busy: five children and then three more fill the accept queue
        // (8 fit); five request socks whose ACKs came later stay. Five of a backlog of 7 is
        // more than half (qlen·2 > max(8, backlog)) and none is young after its first timeout,
        // so reqsk_timer_handler() cuts the first one's retries from 5 to 2: it expires at 7 s.
        // Four left are no longer more than half: the others keep their 5 retries.
        let mut connections = vec![offered(0, 1000 * SECOND_NS)];
        connections.extend((0..5).map(|_| offered(2 * MS, MS)));
        connections.extend((0..3).map(|_| offered(4 * MS, MS)));
        connections.extend((0..5).map(|_| Offered { rtt_ns: 2 * MS, ..offered(4 * MS, MS) }));
        let load = Load { connections };
        let sim = simulate(&load, &settings(7, 1), 1);
        let retries: Vec<u32> = sim.conns[9..].iter().map(|c| c.num_timeout).collect();
        assert_eq!(retries, [2, 5, 5, 5, 5]);
        assert!(sim.conns[9..].iter().all(|c| c.reset));
        assert!(sim.conns[1..9].iter().all(|c| !c.reset));
    }

    // ---- workers ----

    #[test]
    fn test_workers_md1_mean_wait() {
        // Poisson arrivals at half the service rate into one worker with a fixed 10 ms service
        // and a queue that never fills (M/D/1): the mean wait is ρ·D / (2(1 − ρ)) = 5 ms.
        let mut rng = SplitMix64(7);
        let mut t = 0i64;
        let mean_gap = 20.0 * MS as f64;
        let connections: Vec<Offered> = (0..20_000)
            .map(|_| {
                let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
                t += (-(1.0 - u).ln() * mean_gap) as i64;
                Offered { rtt_ns: 0, ..offered(t, 10 * MS) }
            })
            .collect();
        let load = Load { connections };
        let sim = simulate(&load, &settings(100_000, 1), 1);
        let waits: Vec<i64> = sim.conns.iter().zip(&load.connections).filter_map(|(c, o)| c.served_from_ns.map(|s| s - o.syn_ns)).collect();
        assert_eq!(waits.len(), 20_000);
        let mean = waits.iter().sum::<i64>() as f64 / waits.len() as f64 / MS as f64;
        assert!((mean - 5.0).abs() < 0.5, "mean wait {mean} ms");
    }

    #[test]
    fn test_workers_serve_in_fifo_order() {
        let load = Load { connections: (0..5).map(|i| offered(i * MS, 100 * MS)).collect() };
        let sim = simulate(&load, &settings(16, 1), 1);
        let starts: Vec<i64> = sim.conns.iter().filter_map(|c| c.served_from_ns).collect();
        assert!(starts.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn test_replay_same_seed_same_outcome() {
        let mut connections: Vec<Offered> = (0..50).map(|i| offered(i * MS, (i % 7 + 1) * 30 * MS)).collect();
        connections.extend((0..50).map(|i| Offered { service_ns: None, ..offered(i * MS, 0) }));
        let load = Load { connections };
        let s = Settings { client_timeout_ns: Some(3 * SECOND_NS), ..settings(8, 2) };
        assert_eq!(replay(&load, &s, 3), replay(&load, &s, 3));
    }
}
