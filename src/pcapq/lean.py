"""The compact shapes of `Analysis.connections(lean=True)`: what the findings read of a
connection, without one dict per retransmission. The core builds these named tuples
(src/bindings/mod.rs), so this module sits below it and imports nothing of pcapq; the two
words of the core's vocabulary its fields take are declared here and re-exported by the stub
(tools/stub_literals.py writes them from `VOCABULARY`)."""

from __future__ import annotations

from typing import Literal, NamedTuple, Optional

Schedule = Literal["syn_linear", "syn_exponential", "syn_legacy", "synack", "data_rto"]
SeriesKind = Literal["syn", "synack", "data"]


class Send(NamedTuple):
    file: int
    frame: int
    time: float
    interval: Optional[float]  # seconds since the previous send


class Series(NamedTuple):
    kind: SeriesKind
    side: Literal["client", "server"]  # who sent it
    schedule: Schedule
    # Sends, the first included (not `count`: that would hide tuple.count).
    send_count: int
    timed_retries: int  # sends after the first that a timer made (not triggered by a SYN)
    first_time: float
    second: Optional[Send]  # the first re-send
    last: Send
