"""`tcpdump -i any -U -w - port 9000 | pcapq watch -`: a capture followed as it arrives.

Every `--every` seconds, one line per listener about what happened since the last line (new
connections, answered, failed, and the signs: SYNs re-sent, SYN-ACKs re-sent after the client's
ACK, ...), and one line when a listener's episode opens or recovers. The counts and the episodes
come from the core (`LiveInput.look`, src/watch/mod.rs), which keeps them up to date as segments
arrive; this module only words them. Signs are named with the cause they point to alone
(`Cause.live_signs`), as signs: the diagnosis runs on the whole capture at the end. With
`--metrics`, the watcher also hands the live input to the metrics server (pcapq.metrics) at each
tick.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from pcapq import _core
from pcapq.causes.context import plural
from pcapq.causes.registry import CAUSES
from pcapq.report.clock import utc_clock

if TYPE_CHECKING:
    from pcapq.metrics import MetricsServer

# Listeners given a line of their own per interval; the others are counted in one more line.
MAX_SERVERS = 8

# What each sign is, counted: (one, several).
SIGN_WORDS: dict[str, tuple[str, str]] = {
    "syn_retransmitted": ("SYN re-sent", "SYNs re-sent"),
    "synack_retransmitted": ("SYN-ACK re-sent", "SYN-ACKs re-sent"),
    "final_ack_dropped": ("SYN-ACK re-sent after the client's ACK", "SYN-ACKs re-sent after the client's ACK"),
    "request_unacked": ("request re-sent unacknowledged", "requests re-sent unacknowledged"),
    "data_retransmitted": ("data segment re-sent", "data segments re-sent"),
    "reset_after_ack": ("handshake reset by the server", "handshakes reset by the server"),
    "rejected": ("SYN refused (RST)", "SYNs refused (RST)"),
}


def _clock(epoch: float | None) -> str:
    """"12:00:05" (UTC, the capture's clock), or the wall clock before any packet."""
    return utc_clock(epoch if epoch is not None else time.time())[:-4]


def signs_of_causes(signs: Sequence[str]) -> str:
    """" (signs of an accept queue overflow)" for the causes the signs point to alone, or ""."""
    phrases = [c.phrase for c in CAUSES.values() if set(c.live_signs) & set(signs)]
    return f" (signs of {' and '.join(phrases)})" if phrases else ""


def interval_line(clock: str, i: "_core._WatchInterval") -> str:
    """'12:00:05  10.0.0.2:9000  40 connections, 31 answered, 9 failed; 12 SYNs re-sent'."""
    parts = [plural(i["connections"], "connection"), f"{i['answered']:,} answered", f"{i['failed']:,} failed"]
    signs = [plural(n, *SIGN_WORDS[s]) for s, n in i["signs"].items()]
    return f"{clock}  {i['server']}  " + ", ".join(parts) + ("; " + ", ".join(signs) if signs else "")


def _lasted(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def event_line(e: "_core._WatchEvent") -> str:
    signs = ", ".join(SIGN_WORDS[s][1] for s in e["signs"]) + signs_of_causes(e["signs"])
    affected = plural(e["connections"], "connection")
    clock = _clock(e["time"])
    if e["kind"] == "opened":
        return f"{clock}  {e['server']}  episode opened: {signs}"
    if e["kind"] == "new_signs":
        return f"{clock}  {e['server']}  episode shows more: {signs}"
    if e["kind"] == "recovered":
        return f"{clock}  {e['server']}  recovered after {_lasted(e['last_time'] - e['first_time'])}; {affected} affected"
    return (
        f"{clock}  {e['server']}  episode still open at the end of the input: since {_clock(e['first_time'])}, "
        f"{affected} affected so far; {signs}"
    )


def look_lines(look: "_core._WatchLook", every: float) -> list[str]:
    """The lines one look gives: episode events, then one line per busy listener, or one saying
    that nothing happened."""
    clock = _clock(look["latest_time"])
    lines = [event_line(e) for e in look["events"]]
    if look["events_dropped"]:
        lines.append(f"{clock}  and {plural(look['events_dropped'], 'more episode event')} (too many listeners to list)")
    if look["episodes_forgotten"]:
        forgotten = plural(look["episodes_forgotten"], "open episode")
        lines.append(f"{clock}  {forgotten} of listeners that never answered again forgotten (too many open at once)")
    lines += [interval_line(clock, i) for i in look["servers"]]
    if look["more_servers"]:
        lines.append(f"{clock}  and {plural(look['more_servers'], 'more listener')} with connections")
    if not look["servers"]:
        open_now = f"; {plural(look['open'], 'episode')} open" if look["open"] else ""
        lines.append(f"{clock}  nothing new in the last {_lasted(every)} ({look['segments']:,} TCP segments so far{open_now})")
    return lines


class Watcher:
    """Says what happened every `every` seconds while standard input is read
    (`pcapq.live.analyze_stdin(watch=...)`), and what was still going on when it ended. With
    `metrics`, the server (already listening) serves the live input's counts from the first tick
    on; it goes on serving the final counts after `end`, until whoever made it stops it."""

    def __init__(
        self, every: float, clock: Callable[[], float] = time.monotonic, metrics: Optional[MetricsServer] = None
    ) -> None:
        self.every = every
        self.clock = clock
        self.last = clock()
        self.metrics = metrics

    def tick(self, live: _core.LiveInput, say: Callable[[str], None]) -> None:
        if self.metrics is not None:
            self.metrics.attach(live)
        now = self.clock()
        if now - self.last < self.every:
            return
        self.last = now
        for line in look_lines(live.look(MAX_SERVERS), self.every):
            say(line)

    def end(self, live: _core.LiveInput, say: Callable[[str], None]) -> None:
        # An input read within the first tick: the final counts are served all the same.
        if self.metrics is not None:
            self.metrics.attach(live)
        look = live.look(MAX_SERVERS, end=True)
        if look["segments"] == 0:
            return
        for line in look_lines(look, self.clock() - self.last):
            say(line)
