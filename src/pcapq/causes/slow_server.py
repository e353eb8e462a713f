"""The server took the request, did not answer it, and the client gave up waiting."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.causes.cause import Connections, EpisodeCause
from pcapq.causes.context import UNSEEN, EpisodeContext, checks_failed, checks_held, plural
from pcapq.causes.client_gave_up import gave_up_evidence
from pcapq.finding import Finding

if TYPE_CHECKING:
    from pcapq._core import Mark


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Connections(at_least=3, share=0.2, reason=(
    "one or two requests outliving their client's timeout among many answered are outliers; three are a server "
    "too slow for the timeout; a fifth of the capture's connections or more is a failure rate no service lives "
    "with, however few they are"
))


# The client waited for the answer to a request the server had taken, then gave up.
WAITED_ANY: list[Mark] = ["abandoned", "reset_by_client"]
WAITED_ALL: list[Mark] = ["request_acked", "request_unanswered", "client_waited"]


def rule(ctx: EpisodeContext) -> Finding | None:
    # An unanswered request needs the server's direction, and the rest of the flow (UNSEEN).
    unanswered = ctx.select(all_of=WAITED_ALL, any_of=WAITED_ANY, none_of=["scan_probe", "stray_ack_reset", *UNSEEN])
    weighed = ctx.checks(ctx.select(all_of=WAITED_ALL, any_of=WAITED_ANY, none_of=["scan_probe", "stray_ack_reset"]),
                         "nothing_followed")
    # The answer came, but too late: the client's close had acknowledged none of it.
    crossed = ctx.select(all_of=["answer_crossed_close"], none_of=["scan_probe"])
    slow = ctx.union(unanswered, crossed)
    if not slow:
        return None
    reason = (
        f"the server took {plural(len(slow), 'request')} and did not answer in time: the client waited, then gave up"
    )
    timeout = ctx.capture.proxy_timeouts.get("read")
    known = timeout.phrase() if timeout is not None and timeout.sure else "the client's read timeout"
    rests_on = []
    if unanswered:
        rests_on += [
            f"{plural(len(unanswered), 'request')} acknowledged by the server and not answered before the client's FIN "
            "or RST, at least 0.2 s after the request",
        ]
    if crossed:
        reason += (
            f"; in {plural(len(crossed), 'connection')} the answer crossed the client's close (its FIN acknowledged none "
            f"of it, and the client's kernel answered the late answer with RST): {known}"
        )
        rests_on.append(
            f"{plural(len(crossed), 'close')} of the client at least 0.2 s after its request acknowledging none of the "
            "server's answer (RFC 9293 §3.10.7.4: data for a closed socket is answered with RST)"
        )
    evidence = [e for c in ctx.examples(slow) for e in gave_up_evidence(c)]
    ctx.claim(slow)
    reason += checks_failed(weighed)
    return ctx.finding(CAUSE, slow, 0.75, reason, evidence, rests_on=rests_on + checks_held(weighed), checks=weighed)


CAUSE = EpisodeCause(
    slug="slow_server",
    title="Server too slow for the client's timeout",
    phrase="a server too slow for the client's timeout",
    advice=(
        "The server took the request but answered after the client's timeout. Profile the slow "
        "requests, or raise the proxy's read timeout if the wait is expected."
    ),
    scope="episode",
    precedence=60,
    rule=rule,
    materiality=MATERIALITY,
    evidence=(
        "the server acknowledged the client's request, sent no data after the client's last request, and the client "
        "closed or reset at least 0.2 s after that request (it waited)"
    ),
    exclusions=(
        "a server that answered (sent data) after the last request: answered keep-alive requests reset later",
        "a client that closed right after sending (within 0.2 s): a one-way upload, not a wait",
        "a scanner's probes",
        "a capture that misses the server's direction, or cut the flow where its answer would follow (checks "
        "both_directions_seen, flow_not_trimmed)",
    ),
    disproved_by=("the proxy's access log showing these requests answered (upstream_status 200)",),
    proxy_log=("read_timeout", "client_gone"),
    confidence="0.75",
    kernel="the client's application timeout (nginx proxy_read_timeout), not a kernel timer",
)
