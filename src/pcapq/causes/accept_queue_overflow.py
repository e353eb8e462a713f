"""The listener's accept queue was full: the kernel dropped the handshake's final ACK (or, with
net.ipv4.tcp_abort_on_overflow=1, reset it), and dropped new SYNs while full."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.causes.cause import Always, CounterSigns, EpisodeCause, ListenerSign
from pcapq.causes.context import EpisodeContext, checks_held, plural, reset_frame, series_frame, span
from pcapq.causes.listen_drops import LISTEN_DROP_MIN, LISTENER_DROPPED_SYNS
from pcapq.causes.syn_queue_overflow import HALF_OPEN_MIN
from pcapq.finding import Evidence, Finding
from pcapq.finding.timeouts import or_default

if TYPE_CHECKING:
    from pcapq._core import Mark, Selection
    from pcapq.evidence.counters import Listener

# Failing share of the connections begun in the overflow's seconds below which one full queue
# among several listeners (SO_REUSEPORT) is worth naming.
SHARE_FOR_ONE_OF_SEVERAL = 0.5
# Answers while the queue overflowed below which a service rate is noise.
MIN_ANSWERS_FOR_RATE = 2


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(reason=(
    "one dropped handshake ACK or overflow reset proves the queue was full, and a full queue drops every connect "
    "that arrives while it is: the failure pcapq exists to find"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    # A listener that closed (an upstream restarting) resets the ACKs that complete a handshake
    # after the close, as tcp_abort_on_overflow would, but it also refuses SYNs: a full queue
    # never answers a SYN with RST (Linux v6.6 net/ipv4/tcp_ipv4.c: tcp_v4_rcv(), no socket).
    restart = ctx.count(all_of=["refused"], claimed=True) > 0
    not_restart: list[Mark] = ["reset_after_ack"] if restart else []
    signs = ctx.select(all_of=["queue_sign"], none_of=not_restart)
    if not signs:
        return _stalled(ctx)
    # Two capture points aligned: a handshake ACK that vanished between them was the path's.
    signs, between = ctx.between_points(signs, "reached_server_point")
    signs, crossed = ctx.between_points(signs, "synack_reached_client_point")
    between += crossed
    if not signs:
        return None
    window, _ = ctx.between_points(ctx.select(all_of=["in_queue_window"], none_of=not_restart), "reached_server_point")
    involved = ctx.union(signs, window)
    dropped = ctx.count(all_of=["final_ack_dropped"])
    resets = 0 if restart else ctx.count(all_of=["reset_after_ack"])
    cookies = ctx.count(all_of=["syncookie_suspected"])
    # The checks of every SYN-ACK re-sent after the ACK, also those a competitor explained.
    weighed = between + ctx.checks(ctx.select(all_of=["synack_after_ack"], claimed=True), "synack_after_ack")
    held_back = next((c["held"] for c in weighed if c["check"] == "request_held_back"), 0)
    cp = ctx.capture_point
    if resets:
        confidence, reason = 0.9, (
            f"the server answered {plural(resets, 'handshake ACK')} or first requests with RST before it had "
            "acknowledged or sent anything: net.ipv4.tcp_abort_on_overflow=1 and a full accept queue"
        )
    elif dropped and cp.proves_kernel_drops:
        confidence, reason = 0.95, (
            f"captured at the server: in {plural(dropped, 'connection')} the client's ACK arrived and the server "
            "sent its SYN-ACK again, so its kernel dropped the ACK (tcp_check_req(): accept queue full)"
        )
    elif dropped:
        at_once = dropped + cookies
        confidence = 0.8 if at_once > 1 else 0.6
        reason = (
            f"in {plural(dropped, 'connection')} the server sent its SYN-ACK again after the client's ACK; "
            f"{cp.phrase}, a lost ACK would look the same"
            + (f", but {at_once} at once point to the queue" if at_once > 1 else "")
        )
    else:
        confidence, reason = 0.7, (
            f"{plural(cookies, 'connection')} completed the handshake but their requests went unacknowledged and no "
            "SYN-ACK was sent again: SYN cookies answered while the accept queue was full"
        )
    if dropped and not resets and not cookies and not held_back:
        # No connection showed its later segments held back: one ACK lost on the way survives.
        confidence = min(confidence, 0.6)
        reason += (
            "; but no client sent anything after its ACK that the capture could see held back, so one ACK lost on the "
            "way (or dropped after the capture point) explains it as well: TcpExtListenOverflows tells them apart"
        )
    failed = [c for c in weighed if c["failed"] and c["competes"]]
    if failed:
        reason += "; " + "; ".join(f"{plural(c['failed'], 'connection')}: {c['says_failed']}" for c in failed)
    if window:
        reason += (
            f"; {plural(len(window), 'other connection')} whose SYNs or requests were re-sent while that queue was "
            "full belong to it (a full accept queue drops SYNs too)"
        )
    evidence: list[Evidence] = []
    for c in ctx.examples(signs):
        evidence += series_frame(c, "synack", "SYN-ACK sent again after the client's ACK")
        if "reset_after_ack" in c["symptoms"]:
            r = c["reset"]
            answered = "handshake ACK" if r is not None and r["answers"] == "handshake_ack" else "first request"
            evidence += reset_frame(c, f"RST answering the {answered}")
        if "syncookie_suspected" in c["symptoms"]:
            evidence += series_frame(c, "data", "request sent again, never acknowledged")
    rests_on: list[str] = []
    if dropped:
        rests_on.append(f"{plural(dropped, 'SYN-ACK')} re-sent after the client's handshake ACK (spurious: the ACK was dropped)")
    if resets:
        rests_on.append(f"{plural(resets, 'RST')} answering a handshake ACK or first request of a never-established connection")
    if cookies:
        rests_on.append(f"{plural(cookies, 'request')} unacknowledged for over 1 s with no SYN-ACK timer re-send (SYN cookies)")
    if window:
        rests_on.append(f"{plural(len(window), 'connection')} whose SYN or request was re-sent within 1 s of those, on the same listener")
    details = _queue_estimate(ctx, signs)
    share = _share_failed(ctx, involved)
    if share:
        begun, served, note = share
        details.update({"connections_begun": begun, "connections_served": served, "share_note": note})
        reason += "; " + note
    ctx.claim(involved)
    never_connected = ctx.count(all_of=["never_connected", "in_queue_window"], claimed=True)
    proxy_log: list[str] = (["read_timeout"] if dropped or cookies else []) + (["reset_by_server"] if resets else []) + (
        ["timed_out"] if never_connected else [])
    rests_on += checks_held(weighed)
    return ctx.finding(CAUSE, involved, confidence, reason, evidence, rests_on=rests_on,
                       details=details, proxy_log=proxy_log, checks=weighed)


NOT_THE_LISTENER: list[Mark] = ["one_way", "scan_probe", "icmp_answered", "silent_host"]


def _stalled(ctx: EpisodeContext) -> Finding | None:
    """No dropped ACK, overflow reset or cookie, but SYNs dropped while connections the listener
    had taken waited with their requests acknowledged and unanswered (fact listener_stalled): its
    accept queue full of connections the application did not accept. A steady arrival into a
    full queue looks so: each new SYN finds it full (tcp_conn_request()), none reaches the ACK."""
    drops = ctx.select(all_of=["syn_unanswered", "listener_stalled"], none_of=NOT_THE_LISTENER)
    held = ctx.select(all_of=["request_acked", "listener_stalled"], none_of=NOT_THE_LISTENER)
    # Two capture points aligned: only the SYNs that reached the server's point unanswered, and
    # the connections that waited with nothing lost on the way.
    drops, reached = ctx.between_points(drops, "reached_server_point")
    drops, answered = ctx.between_points(drops, "synack_reached_client_point")
    held, intact = ctx.between_points(held, "nothing_lost_between_points")
    # As many clients' SYNs as blame a listener rather than the path (listen_drops).
    if len(drops) < LISTEN_DROP_MIN or not held:
        return None
    if ctx.count(all_of=["half_open"]) >= HALF_OPEN_MIN:
        # Requests held half-open fill the SYN queue: that finding explains the drops better.
        return None
    involved = ctx.union(drops, held)
    first_drop, _ = span(drops)
    waiting = ctx.capture.analysis.waiting_at(ctx.server, [first_drop - 1e-6])[0]
    reason = (
        f"{plural(len(drops), 'client')}' SYNs were dropped while {plural(len(held), 'connection')} the listener had "
        "taken (their requests acknowledged by its kernel) waited unanswered: its accept queue was full of "
        "connections the application did not accept, and a full accept queue drops new SYNs; a firewall dropping "
        "SYNs while the application stalled would look the same: TcpExtListenOverflows tells them apart"
    )
    details: dict[str, float | str] = {"first_drop": first_drop, "waiting_at_first_drop": waiting}
    if waiting >= 1:
        details["estimated_backlog"] = waiting - 1
        details["estimate_note"] = (
            f"{plural(waiting, 'connection was', 'connections were')} established and waiting for an answer when the "
            f"first SYN was dropped; the accept queue holds backlog+1, so the effective backlog is about {waiting - 1}"
        )
    evidence = [e for c in ctx.examples(drops) for e in series_frame(c, "syn", "SYN sent again while the queue was full")]
    ctx.claim(involved)
    return ctx.finding(CAUSE, involved, 0.7, reason, evidence, rests_on=[
        f"{plural(len(drops), 'SYN')} re-sent with nothing back, each while an earlier connection waited",
        f"{plural(len(held), 'request')} acknowledged by the server's kernel and not answered before the client gave up",
    ], details=details, proxy_log=["timed_out", "read_timeout"], checks=reached + answered + intact)


def _queue_estimate(ctx: EpisodeContext, signs: Selection) -> dict[str, float | str]:
    """Connections waiting when the first drop came, the service rate, a backlog suggestion;
    each only with the evidence it needs, else a note saying what is missing."""
    analysis = ctx.capture.analysis
    first_ack = ctx.capture.problems.earliest_ack(signs)
    start, end = span(signs)
    first_drop = first_ack if first_ack is not None else start
    waiting = analysis.waiting_at(ctx.server, [first_drop - 1e-6])[0]
    answered = analysis.answered_between(ctx.server, start, end)
    out: dict[str, float | str] = {"first_drop": first_drop, "waiting_at_first_drop": waiting}
    stats = ctx.capture.server(ctx.server)
    binned = stats["binned_through"] if stats is not None else None
    if waiting >= 1:
        out["estimated_backlog"] = waiting - 1
        note = (
            f"{plural(waiting, 'connection was', 'connections were')} established and waiting for an answer when the "
            f"first ACK was dropped; the accept queue holds backlog+1, so the effective backlog is about {waiting - 1} "
            "(an upper bound: connections already accepted and being served count too)"
        )
    else:
        note = (
            "no backlog estimate: no connection the capture shows was waiting for an answer when the first ACK was "
            "dropped, so those filling the queue began before the capture did; a capture started before the "
            "overflow shows them"
        )
    if binned is not None and min(first_drop, start) < binned + 1:
        # A capture with more waits and answers than the core keeps exactly (docs/performance.md).
        note += (
            f"; an estimate: this server's waits and answers up to {binned + 1:.0f} (epoch seconds) are counted per "
            "second, so a count at an instant spreads that second's evenly, off by up to the waits that began or "
            "ended in it"
        )
    out["estimate_note"] = note
    if answered < MIN_ANSWERS_FOR_RATE:
        out["suggestion_note"] = (
            f"no sizing: the server answered {plural(answered, 'connection')} while the queue overflowed "
            f"({end - start:.1f} s); its service rate needs at least {MIN_ANSWERS_FOR_RATE} answers"
        )
        return out
    rate = answered / max(end - start, 1.0)
    # A request queued behind a full accept queue waits against the proxy's read timeout: the
    # client's connect() returned when its handshake ACK left.
    timeout = or_default(ctx.capture.proxy_timeouts, "read")
    suggested = max(round(rate * timeout.seconds), 1)
    out["service_rate_per_s"] = round(rate, 2)
    out["suggested_backlog"] = suggested
    out["suggestion_note"] = (
        f"at {rate:.1f} answers/s, a queue deeper than {suggested} makes requests wait "
        f"past {timeout.phrase()}: a deeper queue only turns 502s into 504s"
    )
    return out


def _share_failed(ctx: EpisodeContext, involved: Selection) -> tuple[int, int, str] | None:
    """How many of the connections begun in the overflow's seconds were served all the same, and a
    note saying so: (begun, served, note). A few failing among many served at once is what one
    full queue among several looks like."""
    timeline = ctx.capture.analysis.timeline(ctx.server)
    first, last = span(involved)
    lo, hi = int(first), int(last)
    begun = 0
    completed = 0
    for i, second in enumerate(timeline["seconds"]):
        if lo <= second <= hi:
            begun += sum(column[i] for column in timeline["new"].values())
            completed += timeline["new"]["completed"][i]
    failed = len(involved)
    if begun == 0 or completed == 0 or failed / begun >= SHARE_FOR_ONE_OF_SEVERAL:
        return None
    return begun, completed, (
        f"only {failed:,} of the {begun:,} connections begun in those seconds failed and {completed:,} were served: "
        "a queue that drains between bursts does this, and so does one stuck listener of a SO_REUSEPORT group "
        "(nginx `reuseport` with one worker busy) while the others serve; `ss -lnt` lists one line per listener"
    )


def weigh_listener(f: Finding, listener: Listener, said: str) -> None:
    """What `ss -lnt` says of the listener: its queue full when ss ran, and its backlog (Send-Q)
    against pcapq's estimate (`_queue_estimate`)."""
    full = listener.recv_q > listener.send_q
    estimate = f.details.get("estimated_backlog")
    f.details["ss_backlog"] = listener.send_q
    f.details["ss_waiting"] = listener.recv_q
    if full:
        f.confirmed_by.append(f"{said}: the accept queue was full when ss ran")
    if isinstance(estimate, int):
        if estimate >= listener.send_q:
            f.confirmed_by.append(
                f"ss: backlog {listener.send_q}; pcapq's estimate {estimate} is at or above it, as it should be "
                "(accepted connections count too)"
            )
        else:
            f.contradicted_by.append(
                f"{said}: pcapq's estimate {estimate} is below it: a queue of {listener.send_q} was not full with {estimate} waiting"
            )
    elif not full:
        f.confirmed_by.append(said)


CAUSE = EpisodeCause(
    slug="accept_queue_overflow",
    title="Accept queue overflow",
    phrase="an accept queue overflow",
    advice=(
        "The server accepts connections slower than they arrive. Add workers or make them faster "
        "(php-fpm pm.max_children), then size the backlog: listen.backlog and net.core.somaxconn "
        "(the effective backlog is the smaller). A backlog deeper than service rate x the proxy's "
        "timeout only makes requests wait until the proxy gives up: 502s become 504s."
    ),
    scope="episode",
    precedence=20,
    rule=rule,
    materiality=MATERIALITY,
    evidence=(
        "a queue sign on the listener: a SYN-ACK re-sent by its timer after the client's handshake ACK "
        "(`final_ack_dropped`), an RST answering the handshake ACK or first request of a connection the server "
        "never acknowledged nor answered (`reset_after_ack`), or a cookie's stall (`syncookie_suspected`); "
        "connections whose SYN or request was re-sent within 1 s of a span where the same listener showed a sign "
        "belong to it (`in_queue_window`)"
    ),
    exclusions=(
        "TCP_DEFER_ACCEPT: a bare ACK dropped and the SYN-ACK re-sent once (at 1 s with nginx's `deferred`), with no "
        "client data before it",
        "an application reset: the server acknowledged or answered before its RST",
        "VLAN copies of one flow: VLAN tags are part of a connection's identity",
        "duplicate frames: dropped before they count as re-sends",
    ),
    disproved_by=(
        "TcpExtListenOverflows unchanged over the capture (`nstat -az TcpExtListenOverflows` on the server)",
        "`ss -lnt` showing Recv-Q well below Send-Q on the listener during the episode",
    ),
    proxy_log=("read_timeout",),
    confidence=(
        "0.9 with a reset (tcp_abort_on_overflow=1); 0.95 with a dropped final ACK captured at the server; "
        "0.8 with two or more signs elsewhere, 0.6 with one; 0.7 with cookies only"
    ),
    kernel="Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_check_req(); net/ipv4/tcp_ipv4.c: tcp_v4_syn_recv_sock(); sk_acceptq_is_full()",
    live_signs=("final_ack_dropped", "reset_after_ack"),
    counters=CounterSigns(rise=("TcpExtListenOverflows",), none_rose="the accept queue never overflowed"),
    listener=ListenerSign(listening=True, weigh=weigh_listener),
    narration=LISTENER_DROPPED_SYNS,
)
