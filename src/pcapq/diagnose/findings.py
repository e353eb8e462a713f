"""Findings: failing connections grouped per server endpoint into episodes, each explained by a
cause, with how sure pcapq is and why, the frames to open in Wireshark, and what to change.

Reads only connections with a problem and per-server statistics from the core; never one
object per packet or per healthy connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pcapq._core import Analysis
from pcapq.diagnose import settings
from pcapq.diagnose.advice import ADVICE, PROXY_LOG
from pcapq.diagnose.capture_point import CapturePoint, infer

# Problem connections further apart than this (seconds) are separate episodes.
EPISODE_GAP_S = 30.0
# How many clients' SYNs must go unanswered together to blame the listener, not the path.
LISTEN_DROP_MIN = 3
# Half-open requests (SYN-ACK sent, never completed) that point to a full SYN queue: a small
# backlog (net.ipv4.tcp_max_syn_backlog, or the listen backlog) fills with a handful.
HALF_OPEN_MIN = 3
# nginx proxy_connect_timeout / proxy_read_timeout default (seconds).
PROXY_TIMEOUT_S = 60.0
# TIME-WAIT lasts 60 s on Linux (TCP_TIMEWAIT_LEN).
TIME_WAIT_S = 60.0
# Share of the ephemeral port range held at once that counts as running out of ports.
PORT_EXHAUSTION_SHARE = 0.9
MAX_EVIDENCE = 6


@dataclass
class Episode:
    server: str
    connections: list[dict] = field(default_factory=list)

    @property
    def first(self) -> float:
        return min(c["first_time"] for c in self.connections)

    @property
    def last(self) -> float:
        return max(c["last_time"] for c in self.connections)


@dataclass
class Finding:
    cause: str
    server: str
    confidence: float
    confidence_reason: str
    first: float
    last: float
    connections: list[int]
    evidence: list[dict]
    advice: str
    proxy_log: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    # How many connections it covers, when that is more than the ids listed (a flood's).
    count: int | None = None

    @property
    def connection_count(self) -> int:
        return len(self.connections) if self.count is None else self.count

    def to_json(self) -> dict:
        return {
            "cause": self.cause,
            "server": self.server,
            "confidence": round(self.confidence, 2),
            "confidence_reason": self.confidence_reason,
            "first": self.first,
            "last": self.last,
            "connections": {"count": self.connection_count, "ids": self.connections},
            "evidence": self.evidence,
            "advice": self.advice,
            "proxy_log": self.proxy_log,
            "details": self.details,
        }


@dataclass
class Diagnosis:
    capture_point: CapturePoint
    findings: list[Finding]
    settings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "capture_point": self.capture_point.to_json(),
            "settings": self.settings,
            "findings": [f.to_json() for f in self.findings],
        }


def episodes(problems: list[dict]) -> list[Episode]:
    """Per server, problem connections in time order, split where nothing failed for a while."""
    by_server: dict[str, list[dict]] = {}
    for c in sorted(problems, key=lambda c: (c["first_time"], c["id"])):
        by_server.setdefault(c["server"], []).append(c)
    out: list[Episode] = []
    for server, conns in sorted(by_server.items()):
        current, current_end = Episode(server), float("-inf")
        for c in conns:
            if current.connections and c["first_time"] - current_end > EPISODE_GAP_S:
                out.append(current)
                current, current_end = Episode(server), float("-inf")
            current.connections.append(c)
            current_end = max(current_end, c["last_time"])
        out.append(current)
    return out


def diagnose(analysis: Analysis) -> Diagnosis:
    """One server at a time, so only one server's problem connections are in Python at once."""
    servers = analysis.servers()
    capture_point = infer(servers)
    pressure = [p for p in analysis.port_pressure() if p["peak"] >= PORT_EXHAUSTION_SHARE * p["range"]]
    timings = settings.Timings()
    from pcapq.diagnose.flood import find_floods

    flood = find_floods(analysis)
    findings: list[Finding] = list(flood.findings)
    for server in servers:
        if not _any_problem(server):
            continue
        held = [p for p in pressure if p["server"] == server["server"]]
        if flood.explains_all_of(server):
            # Every connection to it is the flood's or the scan's, already reported.
            findings.extend(_port_exhaustion(held, []))
            continue
        problems = analysis.connections(problems_only=True, lean=True, server=server["server"])
        if flood.explains(server):
            problems = [c for c in problems if not flood.explains_connection(c)]
        for episode in episodes(problems):
            findings.extend(_explain(episode, analysis, capture_point))
        findings.extend(_port_exhaustion(held, problems))
        timings.add(problems)
        del problems  # before the next server's batch is made
    findings.sort(key=lambda f: (f.first, f.server, f.cause))
    return Diagnosis(capture_point, findings, timings.sentences())


def _any_problem(server: dict) -> bool:
    failed = sum(n for outcome, n in server["outcomes"].items() if outcome not in ("completed", "open"))
    return failed + sum(server["symptoms"].values()) > 0


def _has(c: dict, *symptoms: str) -> bool:
    return any(s in c["symptoms"] for s in symptoms)


def _syns_unanswered(c: dict) -> bool:
    """The client re-sent its SYN and no SYN-ACK came before the re-send."""
    if not _has(c, "syn_retransmitted"):
        return False
    synack = c["synack_time"]
    second_syn = next((s.second.time for s in c["series"] if s.kind == "syn" and s.second), None)
    return synack is None or (second_syn is not None and synack > second_syn)


def _half_open(c: dict) -> bool:
    return c["synack_attempts"] > 0 and not c["completed"] and c["outcome"] != "partial"


def _stray_ack_reset(c: dict) -> bool:
    """The client's RST answered an ACK that came instead of a SYN-ACK: a TIME-WAIT socket's
    answer to a SYN on its 4-tuple. The client's kernel resets it and sends its SYN again."""
    r, synack = c["reset"], c["synack_time"]
    return bool(r) and r["from"] == "client" and r["answers"] == "ack" and (synack is None or r["time"] < synack)


def _gave_up_evidence(c: dict) -> list[dict]:
    """The client's RST; without one, if it never connected, its last SYN."""
    if c["reset"]:
        return _evidence(c["reset"], f"the client's RST (connection {c['id']})")
    if c["completed"]:
        return []
    syn = next((s for s in c["series"] if s.kind == "syn"), None)
    last = {"file": syn.last.file, "frame": syn.last.frame} if syn else {"file": c["first_file"], "frame": c["first_frame"]}
    return _evidence(last, f"the client's last SYN, none after it (connection {c['id']})")


def _evidence(frame: dict | None, what: str) -> list[dict]:
    if not frame:
        return []
    return [{"file": frame["file"], "frame": frame["frame"], "what": what}]


def _series_frames(c: dict, kind: str, what: str) -> list[dict]:
    for s in c["series"]:
        if s.kind == kind and s.second:
            return _evidence({"file": s.second.file, "frame": s.second.frame}, f"{what} (connection {c['id']})")
    return []


def _finding(cause: str, episode: Episode, conns: list[dict], confidence: float, reason: str, evidence: list[dict], **kw) -> Finding:
    return Finding(
        cause=cause,
        server=episode.server,
        confidence=confidence,
        confidence_reason=reason,
        first=min(c["first_time"] for c in conns),
        last=max(c["last_time"] for c in conns),
        connections=sorted(c["id"] for c in conns),
        evidence=evidence[:MAX_EVIDENCE],
        advice=ADVICE[cause],
        **kw,
    )


def _explain(episode: Episode, analysis: Analysis, cp: CapturePoint) -> list[Finding]:
    conns = episode.connections
    out: list[Finding] = []

    refused = [c for c in conns if c["outcome"] == "refused" or _has(c, "rejected")]
    if refused:
        evidence = [e for c in refused for e in _evidence(c["reset"], f"RST answering the SYN (connection {c['id']})")]
        reason = f"{len(refused)} SYN(s) answered with RST: nothing listened on {episode.server}"
        out.append(_finding("closed_port", episode, refused, 0.95, reason, evidence, proxy_log=[PROXY_LOG["refused"]]))

    overflow = [c for c in conns if _has(c, "final_ack_dropped", "reset_after_ack", "syncookie_suspected")]
    unanswered = [c for c in conns if _syns_unanswered(c)]
    # Connections a listen-queue finding explains: not reported again as clients giving up.
    explained: set[int] = set()
    if overflow:
        out.append(_accept_queue(episode, overflow, unanswered, analysis, cp))
        explained.update(c["id"] for c in overflow + unanswered)
    else:
        half_open = [c for c in conns if _half_open(c)]
        if len(half_open) >= HALF_OPEN_MIN and unanswered:
            # SYNs that got nothing and were never sent again belong to the same flood.
            silent = [c for c in conns if c["outcome"] == "abandoned" and c["synack_attempts"] == 0
                      and c["syn_attempts"] == 1]
            reason = (
                f"{len(half_open)} half-open requests (SYN-ACK sent, handshake never completed) filled the SYN "
                f"queue while {len(unanswered)} other clients' SYNs went unanswered and were sent again"
            )
            evidence = [e for c in half_open for e in _series_frames(c, "synack", "SYN-ACK sent again, never answered")]
            evidence = [e for c in unanswered for e in _series_frames(c, "syn", "SYN sent again, unanswered")] + evidence
            involved = half_open + silent + unanswered
            out.append(_finding("syn_queue_overflow", episode, involved, 0.8, reason, evidence,
                                proxy_log=[PROXY_LOG["timed_out"]]))
            explained.update(c["id"] for c in involved)
        elif len(unanswered) >= LISTEN_DROP_MIN:
            reason = (
                f"{len(unanswered)} clients' SYNs went unanswered and were sent again on the backoff; "
                "the capture cannot tell which queue dropped them"
            )
            evidence = [e for c in unanswered for e in _series_frames(c, "syn", "SYN sent again, unanswered")]
            out.append(_finding("listen_drops", episode, unanswered, 0.6, reason, evidence, proxy_log=[PROXY_LOG["timed_out"]]))
            explained.update(c["id"] for c in unanswered)

    # A reused 4-tuple that met TIME-WAIT: its SYN re-send and RST are port_reuse, not loss or a give-up.
    collided = [c for c in conns if c["follows"] is not None and _stray_ack_reset(c)]
    explained.update(c["id"] for c in collided)

    # Re-sends that no listen-queue finding explains: the path lost packets.
    loose = [c for c in conns if c["id"] not in explained]
    lost = [c for c in loose if _has(c, "data_retransmitted", "syn_retransmitted", "request_unacked")]
    if lost:
        reason = f"{len(lost)} connection(s) re-sent data or handshake packets with no sign of a full listen queue"
        evidence = [e for c in lost for e in (_series_frames(c, "data", "data sent again") or _series_frames(c, "syn", "SYN sent again"))]
        out.append(_finding("network_loss", episode, lost, 0.6, reason, evidence))
        explained.update(c["id"] for c in lost if c["outcome"] not in ("abandoned", "reset_by_client"))

    # A source that got a SYN-ACK and neither answered nor sent its SYN again never was a
    # client waiting for the server (a spoofed or scanning SYN): not a client giving up.
    gave_up = [
        c for c in conns
        if c["outcome"] in ("abandoned", "reset_by_client") and c["id"] not in explained
        and not (_half_open(c) and c["syn_attempts"] == 1)
    ]
    slow = [c for c in gave_up if c["request_acked"] is not None]
    impatient = [c for c in gave_up if c not in slow]
    if slow:
        reason = f"the server took {len(slow)} request(s) (acknowledged them) but the client gave up before an answer"
        evidence = [e for c in slow for e in _gave_up_evidence(c)]
        out.append(_finding("slow_server", episode, slow, 0.75, reason, evidence,
                            proxy_log=[PROXY_LOG["read_timeout"], PROXY_LOG["client_gone"]]))
    if impatient:
        reason = f"{len(impatient)} client(s) stopped before their kernel would have (connect or read timeout)"
        evidence = [e for c in impatient for e in _gave_up_evidence(c)]
        out.append(_finding("client_gave_up", episode, impatient, 0.7, reason, evidence, proxy_log=[PROXY_LOG["client_gone"]]))

    # Reused while the earlier connection's 4-tuple was still in TIME-WAIT.
    reused = [c for c in conns if c["follows"] is not None and (c["follows_after"] is None or c["follows_after"] < TIME_WAIT_S)]
    if reused:
        reason = f"{len(reused)} failing connection(s) reused the 4-tuple of an earlier connection within TIME-WAIT's {TIME_WAIT_S:.0f} s"
        evidence = []
        for c in reused:
            evidence.append({"file": c["first_file"], "frame": c["first_frame"], "what": f"SYN on a reused 4-tuple (connection {c['id']})"})
            if c in collided:
                evidence += _evidence(c["reset"]["answers_frame"], f"the old connection's ACK answering that SYN (connection {c['id']})")
        out.append(_finding("port_reuse", episode, reused, 0.5, reason, evidence))
    return out


def _accept_queue(episode: Episode, overflow: list[dict], unanswered: list[dict], analysis: Analysis, cp: CapturePoint) -> Finding:
    dropped = [c for c in overflow if _has(c, "final_ack_dropped")]
    resets = [c for c in overflow if _has(c, "reset_after_ack")]
    cookies = [c for c in overflow if _has(c, "syncookie_suspected")]
    if resets:
        confidence, reason = 0.9, (
            f"the server answered {len(resets)} handshake ACK(s) or first requests with RST: "
            "net.ipv4.tcp_abort_on_overflow=1 and a full accept queue"
        )
    elif dropped and cp.proves_kernel_drops:
        confidence, reason = 0.95, (
            f"captured at the server: in {len(dropped)} connection(s) the client's ACK arrived and the server "
            "sent its SYN-ACK again, so its kernel dropped the ACK (tcp_check_req(): accept queue full)"
        )
    elif dropped:
        at_once = len(dropped) + len(cookies)
        confidence = 0.8 if at_once > 1 else 0.6
        reason = (
            f"in {len(dropped)} connection(s) the server sent its SYN-ACK again after the client's ACK; "
            f"seen from {cp.side}, a lost ACK would look the same"
            + (f", but {at_once} at once point to the queue" if at_once > 1 else "")
        )
    else:
        confidence, reason = 0.7, (
            f"{len(cookies)} connection(s) completed the handshake but their requests went unacknowledged and no "
            "SYN-ACK was sent again: SYN cookies answered while the accept queue was full"
        )
    evidence: list[dict] = []
    for c in overflow:
        evidence += _series_frames(c, "synack", "SYN-ACK sent again after the client's ACK")
        if _has(c, "reset_after_ack"):
            answered = "handshake ACK" if c["reset"]["answers"] == "handshake_ack" else "first request"
            evidence += _evidence(c["reset"], f"RST answering the {answered} (connection {c['id']})")
        evidence += _series_frames(c, "data", "request sent again, never acknowledged") if _has(c, "syncookie_suspected") else []
    involved = {c["id"]: c for c in overflow + unanswered}
    details = _queue_estimate(episode.server, overflow, analysis)
    # Dropped ACKs and cookies leave requests waiting (504); resets end them at once (502); a
    # client that gave up while its SYNs were dropped never connected (504 while connecting).
    never_connected = [c for c in unanswered if c["synack_time"] is None and c["outcome"] in ("timed_out", "abandoned")]
    proxy_log = (
        ([PROXY_LOG["read_timeout"]] if dropped or cookies else [])
        + ([PROXY_LOG["reset_by_server"]] if resets else [])
        + ([PROXY_LOG["timed_out"]] if never_connected else [])
    )
    return _finding("accept_queue_overflow", episode, list(involved.values()), confidence, reason, evidence,
                    proxy_log=proxy_log, details=details)


def _queue_estimate(server: str, overflow: list[dict], analysis: Analysis) -> dict:
    """Connections waiting when the first drop came, the service rate, a backlog suggestion."""
    acks = [c["ack_time"] for c in overflow if c["ack_time"] is not None]
    first_drop = min(acks) if acks else min(c["first_time"] for c in overflow)
    waiting = analysis.waiting_at(server, [first_drop - 1e-6])[0]
    start, end = min(c["first_time"] for c in overflow), max(c["last_time"] for c in overflow)
    answered = analysis.answered_between(server, start, end)
    rate = answered / max(end - start, 1.0)
    return {
        "first_drop": first_drop,
        "waiting_at_first_drop": waiting,
        "estimated_backlog": max(waiting - 1, 0),
        "estimate_note": (
            f"{waiting} connections were established and waiting for an answer when the first ACK was "
            f"dropped; the accept queue holds backlog+1, so the effective backlog is about {max(waiting - 1, 0)} "
            "(an upper bound: connections already accepted and being served count too)"
        ),
        "service_rate_per_s": round(rate, 2),
        "suggested_backlog": max(round(rate * PROXY_TIMEOUT_S), 1),
        "suggestion_note": (
            f"at {rate:.1f} answers/s, a queue deeper than {max(round(rate * PROXY_TIMEOUT_S), 1)} makes requests wait "
            f"past the proxy's {PROXY_TIMEOUT_S:.0f} s timeout: a deeper queue only turns 502s into 504s"
        ),
    }


def _port_exhaustion(pressure: list[dict], problems: list[dict]) -> list[Finding]:
    """A client address that held nearly all of its ephemeral ports towards one server at once
    (`pressure`: such pairs for the server of `problems`)."""
    out = []
    for p in pressure:
        client_ip = p["client"]
        mine = [c for c in problems if c["server"] == p["server"] and c["client"].rsplit(":", 1)[0].strip("[]") == client_ip]
        reason = (
            f"{client_ip} held {p['peak']:,} of its {p['range']:,} ephemeral ports towards {p['server']} at once "
            f"(in use, or in TIME-WAIT for {TIME_WAIT_S:.0f} s after closing)"
        )
        evidence = [{"file": c["first_file"], "frame": c["first_frame"], "what": f"a failing connection from {client_ip}"} for c in mine]
        first = min([c["first_time"] for c in mine] or [p["at"]])
        last = max([c["last_time"] for c in mine] or [p["at"]])
        out.append(Finding(
            cause="port_exhaustion",
            server=p["server"],
            confidence=0.8,
            confidence_reason=reason,
            first=first,
            last=last,
            connections=sorted(c["id"] for c in mine),
            evidence=evidence[:MAX_EVIDENCE],
            advice=ADVICE["port_exhaustion"],
            proxy_log=[PROXY_LOG["no_port"]],
            details={"client": client_ip, "peak_ports": p["peak"], "port_range": p["range"], "at": p["at"]},
        ))
    return out
