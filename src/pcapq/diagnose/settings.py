"""Kernel settings the retransmission timings reveal (docs/diagnosis.md, schedules)."""

from __future__ import annotations

from statistics import median

SYN_SCHEDULES = {
    "syn_linear": "client SYN retries follow net.ipv4.tcp_syn_linear_timeouts=4 (1 s steps first: Linux 6.5+)",
    "syn_exponential": "client SYN retries double from 1 s (Linux 3.1 to 6.4, or tcp_syn_linear_timeouts=0)",
    "syn_legacy": "client SYN retries double from 3 s (the initial RTO before Linux 3.1)",
}


class Timings:
    """What the retransmission series of the problem connections show, gathered a batch at a time
    (series as `Analysis.connections(lean=True)` summarises them)."""

    def __init__(self) -> None:
        self.syn_schedules: list[str] = []
        self.syn_series = 0
        self.synack_series = 0
        self.synack_retries = 0
        self.cut_short = 0
        self.first_rto: list[float] = []
        self.first_syn_retry: list[float] = []

    def add(self, problems: list[dict]) -> None:
        for c in problems:
            for s in c["series"]:
                if s.kind == "syn":
                    self.syn_series += 1
                    if s.count >= 3:
                        self.syn_schedules.append(s.schedule)
                    if s.second and s.second.interval is not None:
                        self.first_syn_retry.append(s.second.interval)
                elif s.kind == "synack":
                    self.synack_series += 1
                    self.synack_retries = max(self.synack_retries, s.timed_retries)
                elif s.second and s.second.interval is not None:
                    self.first_rto.append(s.second.interval)
            self.cut_short += _synack_cut_short(c)

    def sentences(self) -> list[str]:
        """Sentences about the settings the capture shows, most certain first."""
        out: list[str] = []
        telling = self.syn_schedules
        if telling:
            schedule = max(set(telling), key=telling.count)
            out.append(f"{SYN_SCHEDULES[schedule]}: {telling.count(schedule)} of {len(telling)} SYN series")
        elif self.first_syn_retry:
            out.append(_first_syn_retry(median(self.first_syn_retry), self.syn_series))
        if self.synack_series:
            n = self.synack_retries
            out.append(f"server net.ipv4.tcp_synack_retries >= {n} (up to {n} SYN-ACK timer retries seen)")
            if self.cut_short:
                out.append(
                    f"SYN-ACK retries cut short to 2 in {self.cut_short} connection(s): the SYN queue was more than "
                    "half full of old requests (inet_connection_sock.c: reqsk_timer_handler() lowers the retries then)"
                )
        if self.first_rto:
            first = median(self.first_rto)
            why = (
                "a fast retransmit (duplicate ACKs or SACK: tcp_fastretrans_alert(), RACK), not a timer"
                if first < FASTER_THAN_ANY_TIMER_S
                else "the loss probe / RTO"
            )
            shown = f"{first * 1000:.0f} ms" if first >= 0.01 else f"{first * 1000:.2f} ms"
            out.append(f"data re-sent first after {shown} (median of {len(self.first_rto)}): {why}")
        return out


# Linux's shortest retransmission timer: the tail loss probe waits at least TCP_TIMEOUT_MIN
# (2 jiffies, 8 ms at HZ=250) and the RTO at least 200 ms (TCP_RTO_MIN); a re-send sooner
# than this answered duplicate ACKs or SACK blocks.
FASTER_THAN_ANY_TIMER_S = 0.005


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


def infer(problems: list[dict]) -> list[str]:
    """Sentences about the settings the capture shows, most certain first."""
    timings = Timings()
    timings.add(problems)
    return timings.sentences()


def _synack_cut_short(c: dict) -> bool:
    """Two SYN-ACK timer retries (at 1 and 3 s), then none while the request was still unanswered
    7 s after the first SYN-ACK, when a third (at 7 s) was due."""
    for s in c["series"]:
        if s.kind != "synack":
            continue
        if s.timed_retries == 2 and not c["completed"] and c["last_time"] - s.first_time > 7.5:
            return True
        if s.timed_retries == 2 and "reset_after_expiry" in c["symptoms"]:
            return True
    return False
