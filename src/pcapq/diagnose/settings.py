"""Kernel settings the retransmission timings reveal (docs/diagnosis.md, schedules)."""

from __future__ import annotations

from statistics import median

SYN_SCHEDULES = {
    "syn_linear": "client SYN retries follow net.ipv4.tcp_syn_linear_timeouts=4 (1 s steps first: Linux 6.5+)",
    "syn_exponential": "client SYN retries double from 1 s (Linux 3.1 to 6.4, or tcp_syn_linear_timeouts=0)",
    "syn_legacy": "client SYN retries double from 3 s (the initial RTO before Linux 3.1)",
}


def infer(problems: list[dict]) -> list[str]:
    """Sentences about the settings the capture shows, most certain first."""
    out: list[str] = []
    syn = [s for c in problems for s in c["series"] if s["kind"] == "syn"]
    telling = [s["schedule"] for s in syn if len(s["sends"]) >= 3]
    if telling:
        schedule = max(set(telling), key=telling.count)
        out.append(f"{SYN_SCHEDULES[schedule]}: {telling.count(schedule)} of {len(telling)} SYN series")
    elif syn:
        out.append(f"the first SYN retry came 1 s after the SYN (Linux 3.1+): {len(syn)} SYN series, too short to tell the schedule")
    synack = [s for c in problems for s in c["series"] if s["kind"] == "synack"]
    if synack:
        retries = max(sum(1 for t in s["sends"][1:] if not t["triggered"]) for s in synack)
        out.append(f"server net.ipv4.tcp_synack_retries >= {retries} (up to {retries} SYN-ACK timer retries seen)")
        pruned = [c for c in problems if _synack_cut_short(c)]
        if pruned:
            out.append(
                f"SYN-ACK retries cut short to 2 in {len(pruned)} connection(s): the SYN queue was more than half full of "
                "old requests (inet_connection_sock.c: reqsk_timer_handler() lowers the retries then)"
            )
    first_rto = [
        s["sends"][1]["interval"]
        for c in problems
        for s in c["series"]
        if s["kind"] == "data" and len(s["sends"]) > 1 and s["sends"][1]["interval"] is not None
    ]
    if first_rto:
        out.append(f"data re-sent first after {median(first_rto) * 1000:.0f} ms (median of {len(first_rto)}): the loss probe / RTO")
    return out


def _synack_cut_short(c: dict) -> bool:
    """Two SYN-ACK timer retries (at 1 and 3 s), then none while the request was still unanswered
    7 s after the first SYN-ACK, when a third (at 7 s) was due."""
    for s in c["series"]:
        if s["kind"] != "synack":
            continue
        timed = [t for t in s["sends"] if not t["triggered"]]
        if len(timed) == 3 and not c["handshake"]["completed"] and c["last_time"] - timed[0]["time"] > 7.5:
            return True
        if len(timed) == 3 and "reset_after_expiry" in c["symptoms"]:
            return True
    return False
