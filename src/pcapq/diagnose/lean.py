"""The compact shapes of `Analysis.connections(lean=True)`: what the findings read of a
connection, without one dict per retransmission."""

from __future__ import annotations

from typing import NamedTuple, Optional


class Send(NamedTuple):
    file: int
    frame: int
    time: float
    interval: Optional[float]  # seconds since the previous send


class Series(NamedTuple):
    kind: str  # "syn", "synack" or "data"
    side: str  # who sent it: "client" or "server"
    schedule: str
    count: int  # sends, the first included
    timed_retries: int  # sends after the first that a timer made (not triggered by a SYN)
    first_time: float
    second: Optional[Send]  # the first re-send
    last: Send
