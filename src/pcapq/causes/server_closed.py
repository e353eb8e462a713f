"""The server closed or reset connections with a request unanswered: its application closed the
socket or died mid-request, or it closed an idle keep-alive connection just as the client sent a
new request on it (or answered early and closed while the client was still sending)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.causes.cause import Connections, EpisodeCause, Narration
from pcapq.causes.context import EpisodeContext, frame, plural, reset_frame
from pcapq.finding import Evidence, Finding

if TYPE_CHECKING:
    from pcapq._core import Mark, _Connection, _LeanConnection

# Not a server closing on its client: a full accept queue's RST (`queue_sign` holds
# tcp_abort_on_overflow's `reset_after_ack`) or an expired request socket's, a scanner's probes, an
# ICMP error, a TIME-WAIT answer.
NOT_THIS: list[Mark] = ["queue_sign", "reset_after_expiry", "scan_probe", "probe", "icmp_answered",
                        "stray_ack_reset", "rst_unprovoked"]


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Connections(at_least=3, share=0.2, reason=(
    "one or two connections closed with a request unanswered among many answered are a worker's recycling or a "
    "client's oddity; three are a pattern (a keep-alive race, workers dying); a fifth of the capture's "
    "connections or more is a failure rate no service lives with, however few they are"
))


def close_evidence(c: _LeanConnection) -> list[Evidence]:
    """The server's FIN, or its RST."""
    if c["reset"] and c["reset"]["from"] == "server":
        return reset_frame(c, "the server's RST, the request unanswered")
    closed = c["server_closed"]
    if closed:
        return [frame(closed["file"], closed["frame"], f"the server's FIN, the request unanswered (connection {c['id']})")]
    return []


def rule(ctx: EpisodeContext) -> Finding | None:
    # Its FIN and the last request unanswered, before the client closed (closed_by_server).
    closed = ctx.select(all_of=["closed_by_server"], none_of=NOT_THIS)
    # Its RST came while the client waited for the answer to its last request (its kernel had
    # acknowledged client data: a socket was established).
    reset = ctx.select(all_of=["reset_by_server", "request_acked", "request_unanswered"],
                       none_of=NOT_THIS + ["request_after_close", "client_waited"])
    # The client's request came after the server's FIN: the server's kernel answers it with RST.
    reused = ctx.select(all_of=["reset_by_server", "request_after_close", "request_unanswered"], none_of=NOT_THIS)
    found = ctx.union(ctx.union(closed, reset), reused)
    if not found:
        return None
    parts = []
    if closed:
        parts.append(f"it closed {plural(len(closed), 'connection')} (FIN) with their last request unanswered")
    # Kept-alive connections whose earlier requests were answered: a worker that exits after so many
    # requests as the proxy sends the next. nginx retries such a request on another connection
    # (proxy_next_upstream error), but not a non-idempotent one (a POST): that one gets 502.
    kept_alive = ctx.select(all_of=["closed_by_server", "answered_before"], none_of=NOT_THIS)
    if kept_alive:
        which = "each" if len(kept_alive) == len(closed) else f"{len(kept_alive):,} of them"
        parts.append(f"{which} had earlier requests answered: a kept-alive "
                     "connection the server closed as the proxy sent its next request, as a worker does that exits "
                     "after a number of requests (php-fpm `pm.max_requests`); nginx sends such a request again on "
                     "another connection, unless it is not idempotent (a POST gets 502)")
    # The request came just after the FIN and no RST answered it: the server read on after shutting
    # its side down (php-fpm's fcgi_close()) and closed without answering.
    drained = ctx.select(all_of=["closed_by_server", "request_after_close"], none_of=NOT_THIS)
    if drained:
        them = "it" if len(drained) == 1 else "them"
        parts.append(f"{plural(len(drained), 'request')} came just after the FIN, and the server read {them} and "
                     "closed without answering (a FastCGI server reads on after shutting its side down)")
    if reset:
        parts.append(f"it reset {plural(len(reset), 'connection')} (RST) with their last request unanswered")
    if reused:
        parts.append(f"{plural(len(reused), 'request')} came after it had closed the connection (FIN) and got its RST: "
                     "an idle keep-alive connection reused as the server closed it, or a request still being sent "
                     "when the server answered early and closed")
    reason = "; ".join(parts)
    evidence = [e for c in ctx.examples(found) for e in close_evidence(c)]
    ctx.claim(found)
    rests_on = ["the client's request, then the server's FIN or RST before any data from the server after it"]
    if drained:
        rests_on.append("a request just after the server's FIN, acknowledged, then no data from the server")
    if reused:
        rests_on.append("client data after the server's FIN, answered by the server's RST")
    proxy_log = (["premature_close"] if closed or reused else []) + (["reset_by_server"] if reset or reused else [])
    details = {"closed": len(closed), "reset": len(reset), "request_after_close": len(reused),
               "answered_before": len(kept_alive)}
    confidence = 0.85 if reused and not (closed or reset) else 0.8
    return ctx.finding(CAUSE, found, confidence, reason, evidence, rests_on=rests_on, details=details,
                       proxy_log=proxy_log)


def application_saw(conn: _Connection) -> str | None:
    """For `pcapq explain`: a connection reset by the server after its FIN (the core found a
    request after the FIN, not a TLS alert) read end of file before the RST; else None."""
    reset = conn.get("reset")
    if conn["outcome"] != "reset_by_server" or not reset or reset["from"] != "server":
        return None
    fin = next((e for e in conn["events"] if e["kind"] == "fin" and e["from"] == "server"), None)
    if fin is None or fin["time"] >= reset["time"]:
        return None
    return ("the server had closed (its FIN, frame {}) when the request went out: the next read() returned end "
            "of file, nginx logs \"upstream prematurely closed connection while reading response header from "
            "upstream\" and answers 502 (or retries an idempotent request on another connection); the "
            "server's RST only confirms the socket was gone.").format(fin["frame"])


CAUSE = EpisodeCause(
    slug="server_closed",
    title="Server closed connections with a request unanswered",
    phrase="a server closing connections before answering",
    advice=(
        "The server's application closed the connection without answering. If the request came after the "
        "server had closed an idle keep-alive connection, make the upstream's idle timeout longer than the "
        "proxy's (nginx `keepalive_timeout` in the upstream block) or turn upstream keep-alive off. If the "
        "server took the request and then closed or reset, its worker died or was stopped mid-request "
        "(php-fpm `request_terminate_timeout`, `pm.max_requests`, a crash or the OOM killer), or it restarted: "
        "closing a listener resets the connections still waiting to be accepted, and refused SYNs follow. "
        "Its own log says which."
    ),
    scope="episode",
    precedence=55,
    rule=rule,
    materiality=MATERIALITY,
    evidence=(
        "the client sent a request and the server sent no data after it, then the server closed first (FIN, outcome "
        "`closed_by_server`; the request may follow answered ones on a kept-alive connection, fact "
        "`answered_before`, or come just after the FIN of a server that reads on before it closes) or reset (RST) "
        "after acknowledging the request, or the request came after the server's "
        "FIN and the server's RST answered it (fact `request_after_close`)"
    ),
    exclusions=(
        "a server that answered (sent data) after the last request: it closed or reset after answering",
        "an RST for the handshake ACK or first request before the server acknowledged or sent anything "
        "(tcp_abort_on_overflow: the accept queue finding), or for a request socket that had expired",
        "a client that closed first, 0.2 s or more after its request (its own timeout: a slow server)",
        "a scanner's probes, and connections an ICMP error answered",
        "85 bytes or less from the client after the server's FIN: a TLS close_notify answering the server's, "
        "not a request",
    ),
    disproved_by=("the proxy's access log showing these requests answered (upstream_status 200)",),
    proxy_log=("premature_close", "reset_by_server"),
    narration=Narration(nstat=("TcpExtTCPAbortOnClose", "TcpExtTCPAbortOnData", "TcpOutRsts"),
                        application_saw=application_saw),
    confidence="0.8; 0.85 when every connection sent its request after the server's FIN",
    kernel=(
        "Linux v6.6 net/ipv4/tcp.c: tcp_close() (FIN; RST when data was left unread or SO_LINGER is 0); "
        "data after the application closed is answered with RST (RFC 1122 §4.2.2.13): "
        "net/ipv4/tcp_minisocks.c: tcp_timewait_state_process() in FIN-WAIT-2, net/ipv4/tcp_input.c: "
        "tcp_rcv_state_process() before"
    ),
)
