"""The `evidence` section of a diagnosis (`Diagnosis.evidence`, the JSON `evidence` of
docs/json.md): what the logs, counters and listeners said, as the reports read it."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from pcapq._core import LogShape, _JoinFile


class LineText(TypedDict):
    line: int
    text: str


class UntiedLine(TypedDict):
    line: int
    kind: str
    upstream: str | None


class _LogFileSection(TypedDict):
    path: str
    format: str
    lines: int
    unreadable: int
    unreadable_examples: list[LineText]
    upstream_lines: int
    matched: int
    exact: int
    answered_matched: int
    by_kind: dict[str, int]
    untied: list[UntiedLine]
    untied_count: int
    clock_offset: float | None
    clock: _JoinFile


class LogFileSection(_LogFileSection, total=False):
    """One log: its lines, how many were tied, and its clock against the capture's."""

    # Every line lies far from the capture's time: a sentence saying so.
    warning: str


class TimingExample(TypedDict):
    connection: int
    logged: float
    seen: float


class TimingsSection(TypedDict):
    """One of the proxy's timings (connect, header) against the capture's (pcapq.evidence.timings)."""

    pairs: int
    agree: int
    differ: int
    examples: list[TimingExample]


class Silent(TypedDict):
    count: int
    ids: list[int]


class LogsSection(TypedDict):
    """The proxy's logs joined to the capture's connections."""

    lines: int
    matched: int
    by_kind: dict[str, int]
    files: list[LogFileSection]
    connections_tied: int
    timings: dict[str, TimingsSection]
    no_line: dict[LogShape, Silent]
    not_tied_by_nature: dict[str, int]


class CountersSection(TypedDict):
    """The upstream host's counters (--nstat): those that moved."""

    files: list[str]
    format: str
    window: bool
    moved: dict[str, int]


class ListenerRow(TypedDict):
    """A listener `ss -lnt` showed (--ss)."""

    local: str
    recv_q: int
    send_q: int
    unix: bool


class EvidenceSection(TypedDict, total=False):
    """What the evidence given said; a part is there when its evidence was given."""

    logs: LogsSection
    counters: CountersSection
    listeners: list[ListenerRow]
