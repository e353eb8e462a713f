"""The compact shapes of `Analysis.connections(lean=True)`: what the findings read of a
connection, without one dict per retransmission."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple, Optional

if TYPE_CHECKING:
    from pcapq._core import Schedule, SeriesKind


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
