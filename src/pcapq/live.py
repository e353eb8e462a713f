"""Standard input read live (`tcpdump -w - port 9000 | pcapq analyze -`), or a capture file
tcpdump is still writing (`pcapq watch --follow dump.pcap`).

The core reads on a worker thread with the GIL released; this thread waits for it, shows what
has arrived (bytes and packets, counted by the core as they come), and turns Ctrl-C into a stop
of the input: the core drains what the writer still sends (tcpdump flushes its buffer when the
same Ctrl-C reaches it), ends the stream there and settles the analysis of what was read, as at
the end of a file. A second Ctrl-C stops at once. SIGTERM (a container stopping) is taken as
Ctrl-C: the report is written and the exit code is analyze's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Protocol

from pcapq import _core

# How often the progress line is redrawn.
TICK_S = 0.25
# A Ctrl-C this soon after the input ended is taken as the one that ended it.
SAME_CTRL_C_S = 0.2


@dataclass(frozen=True)
class StdinRead:
    """How reading standard input (or a followed file) ended."""

    interrupted: bool  # Ctrl-C or SIGTERM stopped it (rather than the writer closing it)
    bytes: int
    packets: Optional[int]  # None for a compressed stream
    source: str = "standard input"
    signal_name: str = "Ctrl-C"

    def sentence(self) -> str:
        packets = f"{self.packets:,} packets, " if self.packets is not None else ""
        return (
            f"Interrupted ({self.signal_name}) after {packets}{self.bytes:,} bytes from {self.source}: "
            "this report covers what was read until then"
        )

    def to_json(self) -> dict[str, object]:
        return {"interrupted": self.interrupted, "bytes": self.bytes, "packets": self.packets}


def progress_text(live: "_core.LiveInput", source: str = "standard input") -> str:
    """'reading standard input: 1,234 packets, 5.6 MB' (what arrived so far)."""
    mb = live.bytes / 1e6
    packets = f"{live.packets:,} packets, " if live.packets is not None else ""
    return f"reading {source}: {packets}{mb:,.1f} MB"


class _Stderr:
    """Standard error while standard input is read: `say` writes a line, `redraw` redraws
    the progress line (on a terminal only, where the lines go above it)."""

    def __init__(self, live: "_core.LiveInput", line: object = None, source: str = "standard input") -> None:
        self.live = live
        self.line = line  # rich.live.Live on a terminal
        self.source = source

    def redraw(self) -> None:
        if self.line is not None:
            from rich.text import Text

            self.line.update(Text(progress_text(self.live, self.source)), refresh=True)  # type: ignore[attr-defined]

    def say(self, text: str) -> None:
        if self.line is not None:
            from rich.text import Text

            self.line.console.print(Text(text), soft_wrap=True)  # type: ignore[attr-defined]
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()


@contextlib.contextmanager
def _progress_line(live: "_core.LiveInput", source: str) -> Iterator[_Stderr]:
    """A line on standard error redrawn with what arrived, on a terminal only."""
    if not sys.stderr.isatty() or os.environ.get("TERM") == "dumb":
        yield _Stderr(live, source=source)
        return
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    with Live(Text(progress_text(live, source)), console=Console(stderr=True), transient=True, auto_refresh=False) as line:
        yield _Stderr(live, line, source)


class Watching(Protocol):
    """What follows standard input while it is read (`pcapq.watch.Watcher`)."""

    def tick(self, live: "_core.LiveInput", say: Callable[[str], None]) -> None: ...

    def end(self, live: "_core.LiveInput", say: Callable[[str], None]) -> None: ...


class _CtrlC:
    """SIGINT or SIGTERM while standard input is read: the first stops the input after a
    drain, the second at once. A handler, not KeyboardInterrupt, so that the signal cannot land
    outside the wait (and end pcapq with 130) when the input ends at the same moment."""

    def __init__(self, live: "_core.LiveInput") -> None:
        self.live = live
        self.presses = 0
        self.reading_ended: Optional[float] = None
        self.first: Optional[int] = None  # the first signal's number

    def handle(self, signum: int, frame: object) -> None:
        if self.reading_ended is not None and time.monotonic() - self.reading_ended > SAME_CTRL_C_S:
            raise KeyboardInterrupt
        self.live.stop(now=self.presses > 0)
        self.presses += 1
        if self.first is None:
            self.first = signum

    def signal_name(self) -> str:
        return "SIGTERM" if self.first == signal.SIGTERM else "Ctrl-C"


def analyze_stdin(
    *,
    keep_connections: bool,
    keep_events: bool,
    max_connections: int = 0,
    watch: Optional[Watching] = None,
    spill_dir: Optional[str] = None,
    metrics_listeners: int = 20,
    follow: Optional[str] = None,
    keep: Optional[float] = None,
) -> tuple[_core.Analysis, StdinRead]:
    """Analyses standard input, or with `follow` the capture file tcpdump is writing there,
    until its end or Ctrl-C (SIGINT) or SIGTERM. With `watch`, each segment is tracked as it
    arrives (the core's watch), `watch.tick` is called every tick and `watch.end` once the input
    ended. With `spill_dir`, every connection goes, as it finishes, to a temporary file there
    instead of memory (`_core.analyze_stdin`). `metrics_listeners`: the listeners named in
    `LiveInput.metrics()`, the rest counted as "other". With `keep` (seconds), the analysis
    covers the last `keep` of capture time plus the totals since the start. A followed file that
    tcpdump replaced (started over) ends the input, said in one line. Raises _core.CaptureError
    (also when Ctrl-C came before a capture header arrived)."""
    live = _core.LiveInput()
    source = follow if follow is not None else "standard input"
    outcome: dict[str, object] = {}
    done = threading.Event()

    def work() -> None:
        try:
            outcome["analysis"] = _core.analyze_stdin(
                live,
                keep_connections=keep_connections,
                keep_events=keep_events,
                max_connections=max_connections,
                watch=watch is not None,
                spill_dir=spill_dir,
                metrics_listeners=metrics_listeners,
                follow=follow,
                keep_s=keep,
            )
        except BaseException as e:  # handed to the waiting thread, raised there
            outcome["error"] = e
        finally:
            done.set()

    reader = threading.Thread(target=work, name="pcapq-analyze-stdin", daemon=True)
    ctrl_c = _CtrlC(live)
    previous = signal.signal(signal.SIGINT, ctrl_c.handle)
    previous_term = signal.signal(signal.SIGTERM, ctrl_c.handle)
    try:
        with _progress_line(live, source) as stderr:
            reader.start()
            while not done.wait(TICK_S):
                stderr.redraw()
                if watch is not None:
                    watch.tick(live, stderr.say)
        ctrl_c.reading_ended = time.monotonic()
        # A Ctrl-C already on its way when the input ended is the one that ended it (the
        # writer exited on it): let it arrive here, not as KeyboardInterrupt later.
        time.sleep(SAME_CTRL_C_S)
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
    interrupted = ctrl_c.presses > 0
    reader.join()
    if "error" in outcome:
        error = outcome["error"]
        if interrupted and live.bytes == 0 and isinstance(error, _core.CaptureError):
            raise _core.CaptureError(f"{source}: interrupted ({ctrl_c.signal_name()}) before any capture arrived")
        raise error  # type: ignore[misc]
    analysis = outcome["analysis"]
    assert isinstance(analysis, _core.Analysis)
    if watch is not None:
        watch.end(live, _Stderr(live).say)
    if live.replaced and not interrupted:
        _Stderr(live).say(f"pcapq: {source} was replaced (tcpdump restarted?): the report covers what was read until then")
    return analysis, StdinRead(interrupted, live.bytes, live.packets, source, ctrl_c.signal_name())
