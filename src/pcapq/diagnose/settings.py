"""Kernel settings the retransmission timings reveal (docs/diagnosis.md, schedules), in words,
from the core's aggregate of the problem connections' series (`Problems.timings()`); and which
listener's inferred settings (`Analysis.inferred_settings()`, src/detect/settings) a report
shows first."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pcapq._core import Schedule, _InferredSettings, _Timings

SYN_SCHEDULES: dict[Schedule, str] = {
    "syn_linear": "client SYN retries follow net.ipv4.tcp_syn_linear_timeouts=4 (1 s steps first: Linux 6.5+)",
    "syn_exponential": "client SYN retries double from 1 s (Linux 3.1 to 6.4, or tcp_syn_linear_timeouts=0)",
    "syn_legacy": "client SYN retries double from 3 s (the initial RTO before Linux 3.1)",
}

# Linux's shortest retransmission timer: the tail loss probe waits at least TCP_TIMEOUT_MIN
# (2 jiffies, 8 ms at HZ=250) and the RTO at least 200 ms (TCP_RTO_MIN); a re-send sooner
# than this answered duplicate ACKs or SACK blocks.
FASTER_THAN_ANY_TIMER_S = 0.005


def sentences(t: _Timings) -> list[str]:
    """Sentences about the settings the capture shows, most certain first."""
    out: list[str] = []
    telling = t["syn_schedules"]
    if telling:
        total = sum(telling.values())
        schedule = max(telling, key=lambda s: (telling[s], s))
        out.append(f"{SYN_SCHEDULES[schedule]}: {telling[schedule]} of {total} SYN series")
    elif t["first_syn_retry"] is not None:
        out.append(_first_syn_retry(t["first_syn_retry"], t["syn_series"]))
    if t["synack_series"]:
        n = t["synack_retries"]
        out.append(f"server net.ipv4.tcp_synack_retries >= {n} (up to {n} SYN-ACK timer retries seen)")
        if t["synack_cut_short"]:
            out.append(
                f"SYN-ACK retries cut short to 2 in {t['synack_cut_short']:,} connection{'' if t['synack_cut_short'] == 1 else 's'}: the SYN queue was more than "
                "half full of old requests (inet_connection_sock.c: reqsk_timer_handler() lowers the retries then)"
            )
    if t["first_rto"] is not None:
        first = t["first_rto"]
        why = (
            "a fast retransmit (duplicate ACKs or SACK: tcp_fastretrans_alert(), RACK), not a timer"
            if first < FASTER_THAN_ANY_TIMER_S
            else "the loss probe / RTO"
        )
        shown = f"{first * 1000:.0f} ms" if first >= 0.01 else f"{first * 1000:.2f} ms"
        out.append(f"data re-sent first after {shown} (median of {t['first_rto_series']}): {why}")
    if t["pmtu_discovered"]:
        out.append(_pmtu_discovered(t["pmtu_discovered"], t["pmtu_mtu"]))
    return out


def _pmtu_discovered(connections: int, mtu: int | None) -> str:
    """A note, not a failure: senders told their packets were too big re-sent smaller and got
    through (RFC 1191 §3, RFC 8201 §4)."""
    announced = f"an MTU of {mtu:,}" if mtu else "a smaller MTU"
    which = "1 connection" if connections == 1 else f"{connections:,} connections"
    return (
        f"path MTU discovery worked on {which}: a router announced {announced} (ICMP fragmentation needed / packet "
        "too big) and the sender re-sent smaller at once (tcp_v4_mtu_reduced(); tcp_v6_mtu_reduced() for IPv6), which got "
        "through; "
        "those re-sends are not loss"
    )


def _first_syn_retry(seconds: float, series: int) -> str:
    """What the wait before the first SYN retry says, from a series too short to tell the
    schedule."""
    tail = f"{series} SYN series, too short to tell the schedule"
    if 0.8 <= seconds <= 1.6:
        return f"the first SYN retry came {seconds:.2f} s after the SYN: the 1 s initial RTO of Linux 3.1+ ({tail})"
    if 2.5 <= seconds <= 3.8:
        return f"the first SYN retry came {seconds:.2f} s after the SYN: the 3 s initial RTO of kernels before 3.1 ({tail})"
    if seconds < 0.8:
        return (
            f"the SYN was sent again {seconds * 1000:.0f} ms after the first, sooner than the client's 1 s SYN "
            f"timer (TCP_TIMEOUT_INIT): something made the client send it at once, not a timeout ({tail})"
        )
    return f"the first SYN retry came {seconds:.2f} s after the SYN ({tail})"


def settings_shown(by_listener: dict[str, _InferredSettings], finding_servers: list[str]) -> _InferredSettings | None:
    """The inferred settings of the listener the findings are about (the first finding's that
    shows any), or of the only listener that shows any; None otherwise."""
    for server in finding_servers:
        if server in by_listener:
            return by_listener[server]
    if len(by_listener) == 1:
        return next(iter(by_listener.values()))
    return None
