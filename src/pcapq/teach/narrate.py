"""The story of one connection, step by step, from its events (docs/json.md) and the diagnosis:
for each packet or run of like packets, what the client and server kernels did and why, the
queue involved, the kernel function and sysctl behind it, and what the application saw.

Kernel functions are Linux's (v6.6 net/ipv4/: tcp_ipv4.c, tcp_input.c, tcp_minisocks.c,
tcp_timer.c, inet_connection_sock.c, syncookies.c).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, Callable, Literal, Sequence

from pcapq.causes.cause import Narration
from pcapq.causes.registry import CAUSES, phrase
from pcapq.diagnose import Diagnosis, Finding
from pcapq.endpoint import parse
from pcapq.teach.glossary import Glossary

if TYPE_CHECKING:
    from typing import TypedDict

    from pcapq._core import IcmpKind, PacketRole, Symptom, _Connection, _Event, _Frame, _Icmp, _Side
    from pcapq.evidence.logs import ProxyLogNote

    # An ICMP error of the connection (`_Icmp`, `connections[].icmp` of docs/json.md) set among its
    # events (`_events_and_icmp`): of kind "icmp", "from" its sender, its ICMP kind in "icmp_kind".
    _IcmpEvent = TypedDict("_IcmpEvent", {
        "file": int, "frame": int, "time": float, "offset": float, "sender": str, "kind": Literal["icmp"],
        "meaning": str, "mtu": int | None, "answers": _Side, "answers_role": PacketRole | None,
        "answers_frame": _Frame | None, "seq": int | None, "quoted_len": int, "dont_fragment": bool,
        "errno": int | None, "errno_text": str | None, "from": str, "icmp_kind": IcmpKind,
    })
    # What the story walks through: the events and the ICMP errors, in capture order.
    _Row = _Event | _IcmpEvent


@dataclass
class Step:
    frames: list[int]
    file: int
    offset: float
    """Seconds since the connection's first packet."""
    actor: str
    what: str
    why: str
    queue: str | None = None
    kernel: str | None = None
    application: str | None = None
    terms: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "frames": self.frames,
            "offset": round(self.offset, 6),
            "actor": self.actor,
            "what": self.what,
            "why": self.why,
            "queue": self.queue,
            "kernel": self.kernel,
            "application": self.application,
            "terms": self.terms,
        }


@dataclass
class Story:
    connection: _Connection
    """The connection's record, as in the JSON report (with its events)."""
    reason: str
    """Why this connection was chosen."""
    finding: Finding | None
    intro: list[str]
    steps: list[Step]
    ending: list[str]
    others: list[int] = field(default_factory=list)
    matched: int = 1
    proxy_log: ProxyLogNote | None = None
    """With --log: the proxy's line tied to this connection (`pcapq.evidence.Ties.by_id`)."""
    proxy_log_agrees: bool | None = None
    """Whether that line is the one pcapq predicted; None when it predicted none."""
    labels: list[tuple[int, int, str]] = field(default_factory=list)
    """The core's words on the connection's packets (`Analysis.connection_labels`), for its ladder."""

    def to_json(self) -> dict[str, object]:
        c = self.connection
        out: dict[str, object] = {
            "schema": "pcapq.explain",
            "schema_version": 1,
            "connection": {"id": c["id"], "client": c["client"], "server": c["server"], "outcome": c["outcome"],
                           "symptoms": c["symptoms"], "first_frame": c["first_frame"], "first_time": c["first_time"],
                           "duration": c["duration"]},
            "chosen_because": self.reason,
            "other_matches": self.others,
            "matches": self.matched,
            "finding": self.finding.to_json() if self.finding else None,
            "intro": self.intro,
            "steps": [s.to_json() for s in self.steps],
            "ending": self.ending,
        }
        if self.proxy_log is not None:
            out["proxy_log"] = self.proxy_log
            out["proxy_log_agrees"] = self.proxy_log_agrees
        return out


@dataclass
class _Context:
    conn: _Connection
    narration: Narration
    """What the finding's cause adds to the story (`Cause.narration`)."""
    capture_side: str
    seen: set[str] = field(default_factory=set)
    """Event kinds already told."""

    def has(self, symptom: Symptom) -> bool:
        return symptom in self.conn["symptoms"]

    @property
    def at_server(self) -> bool:
        return self.capture_side == "server"


def tell(conn: _Connection, diagnosis: Diagnosis, reason: str, others: list[int] | None = None, matched: int = 1,
         proxy_log: ProxyLogNote | None = None) -> Story:
    finding = next((f for f in diagnosis.every_finding() if conn["id"] in f.connections), None)
    ctx = _Context(conn, CAUSES[finding.cause].narration if finding else Narration(), diagnosis.capture_point.side)
    glossary = Glossary()
    intro = _intro(conn, finding, diagnosis)
    steps: list[Step] = []
    groups = groupby(_events_and_icmp(conn), key=_run_key)
    told: dict[str, int] = {}  # an explanation -> the step that gave it
    for (kind, _side, file, _icmp_kind), run in groups:
        events = list(run)
        # A run is all of one kind: ICMP errors, or events.
        answers = [e for e in events if e["kind"] == "icmp"]
        if answers:
            step, terms = _icmp(answers, ctx)
        else:
            narrator = NARRATORS.get(kind, _other)
            step, terms = narrator([e for e in events if e["kind"] != "icmp"], ctx)
        timing = _timing(events, conn)
        earlier = told.get(step.why)
        if earlier is not None:
            # Told already: say so instead of repeating the whole explanation.
            step.why = f"Again, for the same reason as in step {earlier}."
            step.kernel = step.application = None
        else:
            told[step.why] = len(steps) + 1
        if timing:
            step.why = f"{step.why} {timing}"
        step.frames = [e["frame"] for e in events]
        step.file = file
        step.offset = events[0]["offset"]
        step.terms = glossary.first_use(["frame", "kernel", *terms] if not steps else terms)
        steps.append(step)
        ctx.seen.add(kind)
    logged, agrees = _logged(conn, finding, proxy_log) if proxy_log is not None else ([], None)
    ending = _ending(conn, finding, ctx, logged)
    return Story(conn, reason, finding, intro, steps, ending, others or [], matched, proxy_log, agrees)


def _events_and_icmp(conn: _Connection) -> Sequence[_Row]:
    """The connection's events with its ICMP answers at their place (by file and frame, as the
    timeline orders them): each answer as an event of kind "icmp" from its sender, its ICMP kind
    in "icmp_kind"."""
    answers: list[_IcmpEvent] = [{**a, "kind": "icmp", "from": a["sender"], "icmp_kind": a["kind"]}
                                 for a in conn.get("icmp", ())]
    if not answers:
        return conn["events"]
    return sorted([*conn["events"], *answers], key=lambda e: (e["file"], e["frame"]))


def _run_key(e: _Row) -> tuple[str, str, int, IcmpKind | None]:
    """What the rows of one step share: kind, sender, file, and ICMP kind (None for an event)."""
    return e["kind"], e["from"], e["file"], e["icmp_kind"] if e["kind"] == "icmp" else None


def _timing(events: Sequence[_Row], conn: _Connection) -> str:
    """The waits of these re-sends against the kernel's schedule, from the connection's series."""
    sends = {(send["file"], send["frame"]): send for series in conn["series"] for send in series["sends"]}
    pairs: list[tuple[float, float]] = []
    for e in events:
        send = sends.get((e["file"], e["frame"]))
        if (send and (interval := send.get("interval")) is not None and (scheduled := send.get("expected")) is not None
                and not send.get("triggered")):
            pairs.append((interval, scheduled))
    if not pairs:
        return ""
    expected = ", ".join(f"{want:.3f} s" for _, want in pairs)
    return f"The kernel's schedule expected {'waits of' if len(pairs) > 1 else 'a wait of'} {expected}."


def _intro(conn: _Connection, finding: Finding | None, diagnosis: Diagnosis) -> list[str]:
    lines = [
        f"Connection {conn['id']}: the client {conn['client']} (here, the proxy) to the server "
        f"{conn['server']} (the upstream), from frame {conn['first_frame']}, over {conn['duration']:.3f} s. "
        f"pcapq's verdict: {conn['outcome'].replace('_', ' ')}"
        + (f", with {', '.join(s.replace('_', ' ') for s in conn['symptoms'])}." if conn["symptoms"] else "."),
    ]
    if finding:
        lines.append(
            f"It belongs to the finding \"{phrase(finding.cause)} on {finding.server}\" "
            f"(confidence {finding.confidence:.2f}: {finding.confidence_reason})."
            + (f" A minor observation: {finding.minor}." if finding.minor is not None else "")
        )
    cp = diagnosis.capture_point
    where = {"server": "next to the server", "client": "next to the client"}.get(cp.side)
    lines.append(
        f"The capture was taken {where}: {cp.reason}." if where else
        f"Where the capture was taken is not known ({cp.reason}); a packet seen here may still have been "
        "lost on the other side of the capture point."
    )
    return lines


def _ending(conn: _Connection, finding: Finding | None, ctx: _Context, logged: list[str]) -> list[str]:
    """`logged`: what the proxy did log (`_logged`), after what pcapq predicts it logs."""
    lines = [f"What the applications saw: {_application_outcome(conn, ctx)}"]
    if finding and finding.proxy_log:
        when = ("If such a wait passes the proxy's timeout, nginx logs: " if conn["outcome"] == "completed"
                else "What nginx logs in such a case: ")
        lines.append(when + "; ".join(finding.proxy_log) + ".")
    lines += logged
    if conn["added_latency"]:
        lines.append(f"Time lost to retransmissions: {conn['added_latency']:.3f} s.")
    if finding:
        lines.append(f"What to change: {finding.advice}")
    counters = ctx.narration.nstat
    if counters:
        lines.append(f"To confirm on the server: nstat -az {' '.join(counters)} (the counters move when this happens).")
    return lines


# The ending's sentence that quotes the proxy's line (Markdown escapes it: the log's text is no markup).
LOGGED = "What the proxy logged for this connection"


def _logged(conn: _Connection, finding: Finding | None, note: ProxyLogNote) -> tuple[list[str], bool | None]:
    """The proxy's line tied to the connection, and whether it is the one pcapq predicted: the
    sentences, and True, False, or None when pcapq predicted no line."""
    from pcapq.diagnose.weigh_evidence import predicted
    from pcapq.report.proxy_line import timing_sentence, verdict, where

    quoted = f'{LOGGED} ({where(note)}, {verdict(note)}): "{note["text"]}".'
    answered = conn["request"]["answered"] is not None
    agrees: bool | None
    if note["kind"] == "answered":
        agrees = answered
        said = ("As the capture shows: the server answered, and the proxy logged its answer." if answered else
                "Not what the capture shows: the proxy logged an answer, and the capture has none from the server.")
    elif finding and finding.proxy_log:
        agrees = predicted(finding, note["kind"])
        said = ("It is the line pcapq predicted above." if agrees else
                f"It is not the line pcapq predicted above: the proxy logged a line of kind {note['kind']}.")
    else:
        agrees = None
        said = "pcapq predicted no line for this connection to set it against."
    timing = timing_sentence(note)
    return [quoted, said + (f" {timing}" if timing else "")], agrees


def _application_outcome(conn: _Connection, ctx: _Context) -> str:
    said = ctx.narration.application_saw(conn) if ctx.narration.application_saw else None
    if said is not None:
        return said
    outcome = conn["outcome"]
    reset = conn.get("reset")
    if outcome == "completed":
        late = " late" if conn["added_latency"] >= 1 else ""
        return f"connect() returned, the request was answered{late} and both sides closed normally."
    if outcome == "refused":
        return "connect() failed with ECONNREFUSED: nginx logs \"connect() failed (111: Connection refused)\" and answers 502."
    if outcome == "reset_by_server":
        return ("connect() had returned, then the next read() failed with ECONNRESET: nginx logs "
                "\"recv() failed (104: Connection reset by peer)\" and answers 502.")
    if outcome == "closed_by_server":
        return ("the request was sent, then the next read() returned end of file (the server's FIN) before any "
                "answer to it: nginx logs \"upstream prematurely closed connection while reading response header "
                "from upstream\" and answers 502, or sends an idempotent request again on another connection (as it "
                "does when a kept-alive connection's server closes it).")
    if outcome == "reset_by_client":
        synacks = [ev["frame"] for ev in conn["events"] if ev["kind"] == "synack"]
        if reset and reset["answers"] == "ack" and (not synacks or reset["frame"] < synacks[0]):
            return ("connect() took longer: the first SYN met the old connection's TIME-WAIT, and the SYN sent "
                    "again got through" + (" and the request was answered." if conn["request"]["answered"] else "."))
        return "the client gave up first (its timeout) and reset the connection; the server's answer, if any, found no socket."
    if outcome == "timed_out":
        return "connect() never returned: the client gave up on its SYNs (ETIMEDOUT, or the proxy's connect timeout)."
    if outcome == "abandoned":
        return "the client gave up on a connection that never got an answer (the proxy's timeout)."
    if outcome == "open":
        return "the connection was still waiting when the capture ended."
    if outcome == "unreachable":
        hard = [a for a in conn.get("icmp", ()) if a["answers"] == "client" and a["errno"] is not None]
        if hard:
            a = hard[-1]
            return (f"{a['sender']} answered the SYN with ICMP {a['meaning']} (frame {a['frame']}): a Linux connect() "
                    f"fails at once with errno {a['errno']}, and nginx logs \"connect() failed ({a['errno']}: "
                    f"{a['errno_text']}) while connecting to upstream\" and answers 502.")
    if "mtu_black_hole" in conn["symptoms"]:
        return ("full-size segments never got through while small ones did (a path MTU black hole): the reader "
                "waits until its timeout, nginx logs \"upstream timed out (110: Connection timed out)\" and answers 504.")
    return f"{outcome.replace('_', ' ')}."


# ---------------------------------------------------------------------------------------------
# One narrator per event kind: (events of one run) -> (Step without frames, terms it uses)

Narrator = Callable[[list["_Event"], _Context], "tuple[Step, list[str]]"]


def _step(actor: str, what: str, why: str, queue: str | None = None, kernel: str | None = None,
          application: str | None = None) -> Step:
    return Step([], 0, 0.0, actor, what, why, queue=queue, kernel=kernel, application=application)


def _intervals(events: list[_Event]) -> str:
    gaps = [g for e in events if (g := e.get("since_previous")) is not None]
    return ", ".join(f"{g:.3f} s" for g in gaps)


def _syn(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    return _step(
        "client kernel",
        "sends a SYN, the first packet of the handshake, with its ISN.",
        "The client application called connect(). Its kernel picked a source port and an ISN "
        "(secure_tcp_seq()) and started the SYN timer.",
        queue="When the SYN reaches the listener, tcp_conn_request() puts a request socket in the SYN "
        "queue, unless that queue or the accept queue is full.",
        kernel="tcp_v4_connect() -> tcp_connect(); retries: net.ipv4.tcp_syn_retries",
        application="connect() is now waiting for the handshake (a non-blocking one returned EINPROGRESS).",
    ), ["SYN", "ISN", "handshake", "listener", "SYN queue", "request socket", "accept queue"]


def _syn_retransmit(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    n = len(events)
    attempts = f"{events[0]['attempt']}" + (f" to {events[-1]['attempt']}" if n > 1 else "")
    what = f"sends its SYN again (attempt {attempts}, {_intervals(events)} after the previous one), same ISN."
    terms = ["retransmission", "RTO"]
    gap = events[0].get("since_previous") or 0
    if ctx.conn["reset"] and ctx.conn["reset"]["from"] == "client" and "rst" in ctx.seen and gap < 0.5:
        why = ("Its first SYN met the server's TIME-WAIT socket for the same 4-tuple, which answered with an "
               "ACK instead of a SYN-ACK; the client reset that ACK and re-armed its SYN timer to the minimum "
               "(tcp_rcv_synsent_state_process(): TCP_TIMEOUT_MIN), so the SYN goes again at once. The RST "
               "ended the TIME-WAIT socket (net.ipv4.tcp_rfc1337=0), so this SYN opens the connection.")
        return _step("client kernel", what, why, kernel="tcp_rcv_synsent_state_process(), tcp_timewait_state_process()",
                     application="connect() is still waiting."), [*terms, "TIME-WAIT", "4-tuple"]
    if "synack" in ctx.seen:
        why = ("A SYN-ACK was sent but never reached the client (lost after the capture point), so the "
               "client's SYN timer fired.")
        queue = None
    elif "icmp" in ctx.seen and any(a["answers_role"] == "syn" and a["errno"] is not None for a in ctx.conn["icmp"]):
        why = ("An ICMP error answered the SYN before, and this client sends it again. Linux does so when the error "
               "came back while connect() still held the socket: tcp_v4_err() (tcp_v6_err()) then only records it "
               "(sk_err_soft) and the SYN timer fires; other stacks (Windows) re-send after every error on their own "
               "schedule. The SYN was answered, not dropped by a listener.")
        return _step("client kernel", what, why, kernel="tcp_v4_err(): sk_err_soft while sock_owned_by_user(); tcp_retransmit_timer()",
                     application="connect() is still waiting: the error did not end it."), terms
    elif ctx.narration.syn_dropped is not None:
        why, queue = ctx.narration.syn_dropped.why, ctx.narration.syn_dropped.queue
    else:
        why = "No SYN-ACK came back in time: the SYN or its answer was lost, or the server was not answering."
        queue = None
    schedule = _series(ctx, "syn")
    timer = {
        "syn_linear": "the first retries 1 s apart (net.ipv4.tcp_syn_linear_timeouts, Linux 6.5+), then doubling",
        "syn_exponential": "1 s, then doubling (the initial RTO of Linux 3.1+, RFC 6298 §2.1)",
        "syn_legacy": "3 s, then doubling: the initial RTO of kernels before 3.1 (RFC 2988)",
    }.get(schedule or "", "1 s, then doubling")
    return _step("client kernel", what, f"{why} Its timer: {timer}.", queue=queue,
                 kernel="tcp_retransmit_timer(); net.ipv4.tcp_syn_retries caps the tries",
                 application="connect() is still waiting; each retry adds its wait to the request's latency."), terms


def _series(ctx: _Context, kind: str) -> str | None:
    return next((s["schedule"] for s in ctx.conn["series"] if s["kind"] == kind), None)


def _synack(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    terms = ["SYN-ACK"]
    if ctx.has("syncookie_suspected"):
        why = ("The SYN queue was full, so the kernel answered with a SYN cookie and kept nothing "
               "(tcp_conn_request() -> cookie_v4_init_sequence(); net.ipv4.tcp_syncookies=1).")
        terms.append("SYN cookie")
        queue = "SYN queue: full; the cookie stands in for a request socket."
        kernel = "tcp_conn_request() -> cookie_v4_init_sequence(); net.ipv4.tcp_syncookies; no SYN-ACK timer"
    else:
        why = "The listener answers: it keeps a request socket in the SYN queue and starts the SYN-ACK timer."
        queue = "SYN queue: one more half-open request."
        kernel = "tcp_conn_request() -> inet_csk_reqsk_queue_hash_add(); retries: net.ipv4.tcp_synack_retries"
    return _step("server kernel", "answers with a SYN-ACK, carrying its own ISN.", why, queue=queue,
                 kernel=kernel,
                 application="The server application knows nothing yet: only accept() will show it the connection."), terms


def _handshake_ack(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    app = "connect() returns 0 in the client application: as far as it knows, the connection is open."
    reset = ctx.conn.get("reset")
    if ctx.has("defer_accept_suspected"):
        why = ("On the client the connection is established. The listener has TCP_DEFER_ACCEPT: a bare ACK "
               "without data does not complete the handshake there (tcp_check_req() drops it and marks the "
               "request acked, TcpExtTCPDeferAcceptDrop); it waits for the first data instead.")
        queue = "SYN queue: the request socket stays until data comes or the defer period ends."
        terms = ["half-open"]
    elif ctx.has("final_ack_dropped"):
        why = ("On the client the connection is established. At the server the ACK found the accept queue "
               "full: tcp_check_req() could not move the connection there (inet_csk_complete_hashdance() "
               "failed) and dropped the ACK, counted in TcpExtListenOverflows. The server re-sending its "
               "SYN-ACK later proves it never took this ACK.")
        queue = "accept queue: full, so the completed handshake is thrown away and the request socket stays."
        terms = ["half-open"]
    elif reset and reset["from"] == "server" and reset["answers"] == "handshake_ack":
        why = ("At the server the ACK found the accept queue full, and net.ipv4.tcp_abort_on_overflow=1: "
               "instead of dropping it, tcp_check_req() makes the listener answer with an RST.")
        queue = "accept queue: full."
        terms = []
    elif ctx.has("syncookie_suspected") and ctx.has("request_unacked"):
        why = ("The server kept nothing for this connection (SYN cookie). It can rebuild it from this ACK "
               "(cookie_v4_check()), but only if the accept queue has room; it had none, so the ACK was "
               "dropped (TcpExtListenOverflows) and nothing will re-send the SYN-ACK.")
        queue = "accept queue: full."
        terms = ["half-open"]
    else:
        why = ("The handshake is complete. The server kernel turns the request socket into a full socket and "
               "puts it in the accept queue for the application (tcp_check_req() -> inet_csk_reqsk_queue_add()).")
        queue = "accept queue: one more connection waiting for accept()."
        terms = []
    return _step("client kernel", "acknowledges the SYN-ACK: the ACK that completes the handshake.", why,
                 queue=queue, kernel="tcp_rcv_synsent_state_process() (client), tcp_check_req() (server)",
                 application=app), ["ACK", "backlog", *terms]


def _data_first(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    e = events[0]
    if e["from"] == "client":
        if ctx.has("request_unacked"):
            why = ("The client believes the connection is open, so it sends at once. The server has no "
                   "established socket for it: the listener sees a data segment for a connection not in its "
                   "accept queue and drops it like the ACK before it.")
            queue = "accept queue: still full."
        else:
            why = "The client application wrote its request; its kernel sends it and keeps a copy until it is acknowledged."
            queue = None
        return _step("client kernel", f"sends the request ({e['len']} bytes).", why, queue=queue,
                     kernel="tcp_sendmsg() -> tcp_write_xmit()",
                     application="write() returned at once: the bytes went to the send buffer, not yet to the server."), []
    after_accept = "has accept()ed the connection, read the request and written its answer" \
        if ctx.conn["request"]["sent"] else "has written"
    return _step("server kernel", f"sends the response ({e['len']} bytes).",
                 f"The server application {after_accept}.",
                 kernel="tcp_sendmsg()",
                 application="The proxy's read() returns the response: it can answer its own client."), []


def _data_retransmit(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    side = events[0]["from"]
    attempts = f"{events[0]['attempt']}" + (f" to {events[-1]['attempt']}" if len(events) > 1 else "")
    waits = _intervals(events)
    what = f"sends the same data again (attempt {attempts}" + (f"; waits {waits})." if waits else ").")
    fast = all((e.get("since_previous") or 1) < 0.1 for e in events) and "dup_ack" in ctx.seen
    if fast:
        why = ("Duplicate ACKs told the sender a segment was missing: it re-sends it at once without waiting "
               "for its timer (tcp_fastretrans_alert()).")
        return _step(f"{side} kernel", what, why, kernel="tcp_fastretrans_alert(); net.ipv4.tcp_reordering",
                     application="Nothing visible: a short delay."), ["fast retransmit", "retransmission"]
    too_big = _too_big_before(events, ctx)
    if too_big is not None:
        # An old router's error carries no MTU (None): no thousands separator for the words.
        mtu = f"{too_big['mtu']:,}" if too_big["mtu"] else "unknown size"
        why = (f"The router's ICMP {too_big['meaning']} (frame {too_big['frame']}) gave an MTU of "
               f"{mtu}; each of these fits it: the sender's kernel lowered its segment size to fit and re-sends "
               "what was lost at once, smaller, without waiting for its timer. Path MTU discovery working.")
        return _step(f"{side} kernel", what, why, kernel=f"{_mtu_reduced(ctx)} -> tcp_simple_retransmit()",
                     application="Nothing visible: a short delay."), ["retransmission", "MTU"]
    acked = ctx.conn["request"]["acked"]
    if side == "client" and acked is not None and 0 <= acked - events[-1]["time"] < 0.5:
        why = ("No ACK came for the request, so the client's RTO fired again. This copy arrives when the "
               "listener has room again (the application called accept()): it completes the connection "
               "(it carries the ACK flag, tcp_check_req()) and the server acknowledges the request.")
        return _step(f"{side} kernel", what, why, queue="accept queue: room again, the connection enters it.",
                     kernel="tcp_retransmit_timer() (client), tcp_check_req() (server)",
                     application="The client is still waiting for the answer; it comes now."), ["retransmission", "RTO"]
    if events[0].get("after_handshake_ack") and ctx.has("request_unacked"):
        why = ("No ACK came for the request, so the client's RTO fired: 200 ms at first (TCP_RTO_MIN), doubling "
               "each time. Each copy reaches a listener that still has no room in its accept queue and is "
               "dropped (TcpExtListenOverflows). Once the application calls accept() and frees a place, the "
               "next copy (it carries the ACK flag) completes the handshake and is acknowledged.")
        queue = "accept queue: full while these are dropped."
    else:
        why = ("No ACK came within the retransmission timeout, so the sender's timer fired: 200 ms at first "
               "(TCP_RTO_MIN) or the measured round trip, doubling each time.")
        queue = None
    return _step(f"{side} kernel", what, why, queue=queue,
                 kernel="tcp_retransmit_timer(); net.ipv4.tcp_retries2 caps the tries",
                 application="The application waits: its read() has no answer yet."), ["retransmission", "RTO"]


def _too_big_before(events: list[_Event], ctx: _Context) -> _Icmp | None:
    """The too-big error these re-sends follow, when each fits the MTU it gave: the sender's
    kernel re-sent them at once, smaller (tcp_v4_mtu_reduced(), not a timer; the core's rule,
    src/flow/connection.rs: resent_smaller_after_too_big())."""
    side, first = events[0]["from"], events[0]
    earlier = [a for a in ctx.conn.get("icmp", ()) if a["answers"] == side and a["kind"] in TOO_BIG
               and (a["file"], a["frame"]) < (first["file"], first["frame"])]
    if not earlier or not all(a["mtu"] is None or e["len"] < a["mtu"] for e in events for a in earlier[-1:]):
        return None
    return earlier[-1]


def _mtu_reduced(ctx: _Context) -> str:
    return "tcp_v6_err() -> tcp_v6_mtu_reduced()" if ctx.conn["ip_version"] == 6 else "tcp_v4_err() -> tcp_v4_mtu_reduced()"


# ICMP kinds that carry an MTU (src/decode/icmp.rs: IcmpClass::TooBig).
TOO_BIG = ("frag_needed", "packet_too_big")
# Errors answering a SYN-ACK that make the listener drop its request socket (Linux v6.6
# net/ipv4/tcp_ipv4.c: tcp_v4_err() passes abort to tcp_req_err() for time exceeded, net and host
# unreachable; net/ipv6/tcp_ipv6.c: tcp_v6_err() passes icmpv6_err_convert()'s `fatal`).
DROP_REQUEST = {4: {"ttl_exceeded", "reassembly_time_exceeded", "net_unreachable", "host_unreachable"},
                6: {"admin_prohibited", "port_unreachable", "source_policy_failed", "reject_route"}}


def _icmp(answers: list[_IcmpEvent], ctx: _Context) -> tuple[Step, list[str]]:
    """An ICMP error at its place: who sent it, what it quotes, what the kernel of the side it
    answers does with it (tcp_v4_err() / tcp_v6_err())."""
    a = answers[0]
    kind = a["icmp_kind"]
    conn = ctx.conn
    v6 = conn["ip_version"] == 6
    client_ip, server_ip = parse(conn["client"]).ip, parse(conn["server"]).ip
    actor = (f"server's host ({a['sender']})" if a["sender"] == server_ip
             else f"client's own host ({a['sender']})" if a["sender"] == client_ip
             else f"router or firewall {a['sender']}")
    # Several errors on one SYN or SYN-ACK (the segments' are counted by _quoted()).
    many = f" ({len(answers)} times)" if len(answers) > 1 and a["answers_role"] in ("syn", "synack") else ""
    what = f"answers {_quoted(answers)} with ICMP {a['meaning']}{many}."
    err = "tcp_v6_err()" if v6 else "tcp_v4_err()"
    if kind in TOO_BIG:
        mtu = f"{a['mtu']:,}" if a["mtu"] else "unknown (an old router's error carries none)"
        size = (f"The packet was {a['quoted_len']:,} bytes" + (" with DF set" if a["dont_fragment"] else "")
                + f"; the next hop takes {mtu}. ")
        if ctx.has("mtu_black_hole"):
            why = (size + "Given this error, the sender's kernel lowers its segment size and re-sends smaller at once "
                   f"({_mtu_reduced(ctx)}). This sender kept sending full-size segments: its kernel never got the "
                   "error (dropped between here and the sender, by a firewall on its input) or ignores it: a path "
                   "MTU black hole.")
            app = "The writer's data never arrives: the reader waits until its timeout."
        else:
            why = (size + "The sender's kernel records the MTU (tp->mtu_info), lowers the path MTU and its segment size "
                   "to fit and re-sends what was lost at once, smaller. While the application is inside send() the "
                   "socket is busy, so this waits until the call returns (TCP_MTU_REDUCED_DEFERRED, "
                   "tcp_release_cb()), and a few more full-size segments may leave meanwhile. Path MTU discovery "
                   "(RFC 1191, RFC 8201): not a failure.")
            app = "Nothing visible: a short delay."
        return _step(actor, what, why, kernel=f"{_mtu_reduced(ctx)} -> tcp_sync_mss(), tcp_simple_retransmit()",
                     application=app), ["ICMP", "MTU", "DF"]
    errno = f"errno {a['errno']} ({a['errno_text']})" if a["errno"] is not None else "an error"
    convert = "icmpv6_err_convert()" if v6 else "icmp_err_convert[]"
    if a["answers"] == "client" and a["answers_role"] == "syn" and a["errno"] is not None:
        why = (f"The client is in SYN-SENT: {err} hands the error to connect() at once and closes the socket "
               f"(tcp_done()); no SYN is sent again. {convert} maps this type and code to {errno}.")
        if ctx.has("syn_retransmitted"):
            why += (" This client sent its SYN again after an error all the same: Windows does; Linux does when an "
                    "error comes back while connect() still holds the socket (a fast local path), as it then only "
                    "records it (sk_err_soft) and the next SYN's error ends the connect. Each SYN was answered, none "
                    "dropped by a listener.")
        if a["sender"] == client_ip:
            why += (" The client's own host answered: a local routing failure (its route to the server is "
                    "unreachable or prohibit: `ip route get` on the proxy's host).")
        app = (f"connect() fails at once with {errno}: nginx logs \"connect() failed ({a['errno']}: {a['errno_text']}) "
               "while connecting to upstream\" and answers 502.")
        return _step(actor, what, why, kernel=f"{err} -> tcp_done(); {convert}", application=app), ["ICMP"]
    if a["answers"] == "server" and a["answers_role"] == "synack":
        if kind in DROP_REQUEST[6 if v6 else 4]:
            why = ("The server holds only a request socket for this connection (SYN-RECEIVED). For this kind "
                   "tcp_req_err() drops it from the SYN queue (inet_csk_reqsk_queue_drop()): the server forgets the "
                   "half-open connection.")
        else:
            why = ("The server holds only a request socket for this connection (SYN-RECEIVED). For this kind "
                   "tcp_req_err() keeps it: the SYN-ACK timer goes on (accept() never reports network errors).")
        return _step(actor, what, why, queue="SYN queue: the request socket this error answers.",
                     kernel=f"{err} -> tcp_req_err()",
                     application="Nothing on the server: the application never sees a half-open connection."), ["ICMP", "request socket"]
    why = (f"Past the handshake this is a soft error (RFC 1122 §4.2.3.9): {err} records it (sk_err_soft) and the "
           "kernel keeps re-sending on its timer; only if the retries run out does the read or write fail, with "
           f"{errno} instead of ETIMEDOUT (tcp_write_err()).")
    if kind in ("net_unreachable", "host_unreachable"):
        why += (" It also undoes the timer's backoff for the segment it quotes (RFC 6069: tcp_ld_RTO_revert()), so "
                "the next re-send comes sooner.")
    return _step(actor, what, why, kernel=f"{err}: sk_err_soft; tcp_write_err() at the timeout",
                 application="The application waits; if the kernel gives up, its call fails with the errno above."), ["ICMP"]


def _quoted(answers: list[_IcmpEvent]) -> str:
    """What the errors quote: "the client's SYN (frame 1)", "the client's data at seq 1 (frame 4)",
    "10 of the client's data segments (seq 1 to 13,033)"."""
    a = answers[0]
    side = a["answers"]
    # Relative, as in the events; None when the core knows no base for the side (it knows one
    # whenever it ties an error, src/flow/track/icmp.rs: on_icmp()).
    seqs = [x["seq"] for x in answers if x["seq"] is not None]
    role = a["answers_role"]
    if role == "syn":
        return f"the {side}'s SYN" + (f" (frame {a['answers_frame']['frame']})" if a["answers_frame"] else "")
    if role == "synack":
        return f"the {side}'s SYN-ACK"
    if len(answers) > 1:
        span = f" (seq {min(seqs):,} to {max(seqs):,})" if seqs else ""
        return f"{len(answers)} of the {side}'s segments{span}"
    kind = {"data": "data segment", "retransmit": "re-sent segment", "fin": "FIN", "ack": "ACK", "rst": "RST",
            "handshake_ack": "handshake ACK"}.get(role or "", "segment")
    where = f" (frame {a['answers_frame']['frame']})" if a["answers_frame"] else ""
    at = f" at seq {a['seq']:,}" if a["seq"] is not None else ""
    return f"the {side}'s {kind}{at}{where}"


def _synack_retransmit(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    attempts = f"{events[0]['attempt']}" + (f" to {events[-1]['attempt']}" if len(events) > 1 else "")
    what = f"sends its SYN-ACK again (attempt {attempts}, {_intervals(events)} after the previous one)."
    if events[0].get("after_handshake_ack") and ctx.has("defer_accept_suspected"):
        why = ("The client had acknowledged it but sent nothing, and the listener has TCP_DEFER_ACCEPT: it "
               "dropped the bare ACK on purpose and held back its SYN-ACK re-sends until the end of the defer "
               "period, then sent this one (syn_ack_recalc()). The ACK that answers it is taken.")
        queue = "SYN queue: the request socket waits for data; accept queue: not involved."
    elif events[0].get("after_handshake_ack"):
        why = ("The client had already acknowledged it, so this is the sign the server dropped that ACK. "
               "The request socket is still in the SYN queue; its timer re-sends the SYN-ACK 1 s, 2 s, 4 s ... "
               "apart, hoping a new ACK will find room in the accept queue.")
        queue = "SYN queue: the request socket waits; accept queue: full."
    elif any(e["kind"] == "synack_retransmit" for e in events) and not ctx.conn["handshake"]["completed"]:
        why = ("No ACK came back for the SYN-ACK: the client is gone, never existed (a spoofed SYN), or the "
               "packets were lost. The half-open request keeps its place in the SYN queue until its retries "
               "run out.")
        queue = "SYN queue: this half-open request holds a place."
    else:
        why = "No ACK came back in time for the SYN-ACK, so the request socket's timer fired."
        queue = "SYN queue: the request socket waits."
    return _step("server kernel", what, why, queue=queue,
                 kernel="reqsk_timer_handler(); net.ipv4.tcp_synack_retries (default 5: about 63 s)",
                 application="Nothing on the server: the application never sees a half-open connection."), ["half-open"]


def _dup_ack(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    side = events[0]["from"]
    times = "once" if len(events) == 1 else f"{len(events)} times"
    what = f"repeats its ACK ({times}): a duplicate ACK."
    if "synack_retransmit" in ctx.seen and side == "client":
        why = ("It answers a SYN-ACK it already acknowledged (Wireshark: 'Dup ACK'). When the accept queue "
               "has room again, this ACK is the one that completes the connection on the server.")
    else:
        why = ("A segment arrived after a hole in the sequence: the receiver acknowledges what it has in order "
               "again, so the sender learns something is missing (with SACK saying what arrived).")
    return _step(f"{side} kernel", what, why, kernel="tcp_send_dupack() / tcp_ack_snd_check()",
                 application="Nothing visible."), ["duplicate ACK"]


def _fin(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    side = events[0]["from"]
    first = "fin" not in ctx.seen
    if first:
        why = (f"The {side} application called close(): no more data from it. The side that closes first "
               "keeps the 4-tuple in TIME-WAIT for 60 s (TCP_TIMEWAIT_LEN).")
        terms = ["FIN", "TIME-WAIT", "4-tuple"]
    else:
        why = f"The {side} application read the end of the stream (read() returned 0) and closed too."
        terms = ["FIN"]
    if side == "client" and ctx.conn["outcome"] in ("abandoned", "open") and ctx.conn["request"]["answered"] is None:
        why = ("The client gave up waiting (the proxy's timeout, e.g. nginx's fastcgi_read_timeout) and closed "
               "the connection before any answer came.")
    return _step(f"{side} kernel", "sends a FIN.", why, kernel="tcp_close() -> tcp_send_fin()",
                 application=f"The {side} application closed its socket."), terms


def _fin_retransmit(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    side = events[0]["from"]
    return _step(f"{side} kernel", "sends its FIN again.",
                 "The FIN was not acknowledged in time, so the retransmission timer fired.",
                 kernel="tcp_retransmit_timer()", application="Nothing visible: close() already returned."), ["retransmission"]


def _rst(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    e = events[0]
    side, answers = e["from"], e.get("answers")
    terms = ["RST"]
    if side == "server" and answers == "syn":
        why = ("Nothing listens on this port: the kernel answers the SYN with an RST (tcp_v4_send_reset()).")
        app = "connect() fails at once with ECONNREFUSED."
        terms.append("ECONNREFUSED")
        kernel = "tcp_v4_rcv() -> tcp_v4_send_reset()"
    elif side == "server" and answers == "handshake_ack":
        why = ("The accept queue was full and net.ipv4.tcp_abort_on_overflow=1: the listener resets the "
               "connection instead of dropping the ACK (tcp_check_req(): 'embryonic' reset, TcpExtEmbryonicRsts).")
        app = "connect() had returned; the client's next read() or write() fails with ECONNRESET: nginx answers 502."
        terms.append("ECONNRESET")
        kernel = "tcp_check_req() -> tcp_v4_send_reset(); net.ipv4.tcp_abort_on_overflow"
    elif side == "server":
        why = (f"The server has no socket for this connection any more (it answers the client's {answers}): "
               "the request expired in the SYN queue, or it was reset before; any segment for it gets an RST.")
        app = "The client's read() or write() fails with ECONNRESET."
        terms.append("ECONNRESET")
        kernel = "tcp_v4_rcv() -> tcp_v4_send_reset()"
    elif answers == "ack" and "synack" not in ctx.seen:
        acked = e.get("answers_frame")
        why = (f"The client, still in SYN-SENT, got an ACK (frame {acked['frame'] if acked else '?'}) that acknowledged "
               "nothing it had sent: the server's TIME-WAIT socket for the same 4-tuple answering the SYN "
               "(tcp_timewait_state_process(): the SYN's sequence number was not above what TIME-WAIT expects, "
               "and it carried no newer timestamp). The client resets it; pcapq counts that ACK with the "
               "earlier connection.")
        app = "connect() keeps waiting."
        terms += ["TIME-WAIT", "4-tuple"]
        kernel = "tcp_rcv_synsent_state_process() -> tcp_send_active_reset() path"
    else:
        after = e.get("after")
        waited = f" {after:.3f} s after the server's last packet" if after is not None else ""
        why = (f"The client application gave up{waited} (its read timed out) and closed with SO_LINGER 0, "
               "which sends an RST instead of a FIN; the server's answer, when it comes, finds no connection.")
        app = "The client's read() timed out; the proxy answers 504 (upstream timed out)."
        kernel = "tcp_close() with linger 0 -> tcp_send_active_reset()"
    answered = {"ack": "an ACK", "syn": "the SYN", "synack": "the SYN-ACK", "handshake_ack": "the handshake's ACK",
                "data": "data", "retransmit": "a retransmission", "fin": "a FIN", "rst": "an RST"}
    return _step(f"{side} kernel", f"sends an RST (answering {answered.get(answers or '', 'nothing')}).", why,
                 kernel=kernel, application=app), terms


def _zero_window(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    side = events[0]["from"]
    return _step(f"{side} kernel", "advertises a zero window.",
                 f"The {side} application is not reading fast enough: its receive buffer is full.",
                 kernel="tcp_select_window()", application="The sender's write() blocks until there is room."), ["zero window"]


def _other(events: list[_Event], ctx: _Context) -> tuple[Step, list[str]]:
    e = events[0]
    return _step(f"{e['from']} kernel", f"sends {e['kind'].replace('_', ' ')} ({e['flags']}).", "", ), []


NARRATORS: dict[str, Narrator] = {
    "syn": _syn,
    "syn_retransmit": _syn_retransmit,
    "synack": _synack,
    "synack_retransmit": _synack_retransmit,
    "handshake_ack": _handshake_ack,
    "data_first": _data_first,
    "data_retransmit": _data_retransmit,
    "dup_ack": _dup_ack,
    "fin": _fin,
    "fin_retransmit": _fin_retransmit,
    "rst": _rst,
    "zero_window": _zero_window,
}
