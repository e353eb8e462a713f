"""What the `analyze` report shows, gathered once from the core and the diagnosis, for every
renderer (terminal, Markdown, HTML). Bounded: at most `table_max` connection rows and
`ladders_max` ladders, whatever the size of the capture."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from pcapq._core import Analysis
from pcapq.diagnose import Diagnosis
from pcapq.endpoint import parse

if TYPE_CHECKING:
    from pcapq._core import _CaptureInfo, _LeanConnection, _Summary
    from pcapq.report.aggregate import Aggregate
    from pcapq.report.timeline import ConnectionTimeline

# Rows of the worst-connections table in the terminal and Markdown.
WORST_ROWS = 10
# Rows of the HTML connection table: every connection up to this many, else the problem
# connections, worst first, up to this many.
TABLE_MAX = 20_000
# Ladder diagrams in the HTML report: the worst problem connections, up to this many.
LADDERS_MAX = 200


@dataclass(frozen=True)
class ConnectionRow:
    """One connection as a row of the reports' tables."""

    # Slots: the HTML report holds up to TABLE_MAX rows (no dict per row).
    __slots__ = ("id", "client", "server", "outcome", "symptoms", "first_time", "last_time", "added_latency", "file", "frame")
    id: int
    client: str
    server: str
    outcome: str
    symptoms: tuple[str, ...]
    first_time: float
    last_time: float
    added_latency: float
    file: int
    frame: int

    @property
    def client_port(self) -> str:
        return str(parse(self.client).port)

    @staticmethod
    def of(c: _LeanConnection) -> "ConnectionRow":
        return ConnectionRow(
            c["id"], c["client"], c["server"], c["outcome"], tuple(c["symptoms"]), c["first_time"], c["last_time"],
            c["added_latency"], c["first_file"], c["first_frame"],
        )


@dataclass
class AnalyzeReport:
    """What every renderer of `pcapq analyze` draws from."""

    captures: Sequence[_CaptureInfo]
    summary: _Summary
    skipped: dict[str, tuple[int, str]]
    warnings: list[str]
    diagnosis: Diagnosis
    start: Optional[float]  # the capture's first packet, epoch seconds
    problems: int  # connections with a problem (outcome or symptom), also those beyond the records kept
    worst: list[ConnectionRow]
    aggregate: Optional[Aggregate]  # None when not asked for (the terminal's report has none)
    table: list[ConnectionRow] = field(default_factory=list)
    table_note: Optional[str] = None
    ladders: list[ConnectionTimeline] = field(default_factory=list)
    ladders_note: Optional[str] = None


def _worst(analysis: Analysis, n: int) -> tuple[int, list[_LeanConnection]]:
    """How many connections have a problem, and the `n` worst of the records kept: ranked in the
    core, so only those `n` become dicts."""
    count, worst = analysis.worst(n)
    return count, worst


def _aggregate(analysis: Analysis, diagnosis: Diagnosis, max_buckets: int) -> Aggregate:
    """The capture's timeline, its buckets marked by the findings' episodes."""
    from pcapq.report.aggregate import Episode, capture_aggregate

    episodes = [Episode(f.cause, f.server, f.first, f.last) for f in diagnosis.findings]
    return capture_aggregate(analysis, episodes, max_buckets=max_buckets)


def build(
    analysis: Analysis,
    diagnosis: Diagnosis,
    *,
    with_table: bool = False,
    with_ladders: bool = False,
    with_aggregate: bool = True,
    worst_rows: int = WORST_ROWS,
    table_max: int = TABLE_MAX,
    ladders_max: int = LADDERS_MAX,
    max_buckets: int = 60,
) -> AnalyzeReport:
    """Ladders need an analysis that kept events (`keep_events`); the table lists every
    connection only when every record was kept. The capture's timeline (`aggregate`), which the
    Markdown and HTML reports show and the terminal's does not, only `with_aggregate`."""
    captures = analysis.captures()
    starts = [c["first_time"] for c in captures if c["first_time"] is not None]
    summary = analysis.summary()
    keeps_all = len(analysis) == summary["connections"]
    if with_table or with_ladders:
        # Ranked in the core, as rows (tuples, not dicts): a large capture keeps tens of
        # thousands of connections with a problem, and the table embeds up to `table_max`.
        count, ranked = analysis.worst_rows(max(worst_rows, table_max if with_table else 0, ladders_max if with_ladders else 0))
        problems = [(row[0], ConnectionRow(*row[1:])) for row in ranked]
        worst_shown = [r for _, r in problems[:worst_rows]]
    else:
        count, worst = _worst(analysis, worst_rows)
        worst_shown = [ConnectionRow.of(c) for c in worst]
    report = AnalyzeReport(
        captures=captures,
        summary=summary,
        skipped=analysis.skipped(),
        warnings=analysis.warnings(),
        diagnosis=diagnosis,
        start=min(starts) if starts else None,
        problems=count,
        worst=worst_shown,
        aggregate=_aggregate(analysis, diagnosis, max_buckets) if with_aggregate else None,
    )
    if with_table:
        if keeps_all and summary["connections"] <= table_max:
            report.table = [ConnectionRow.of(c) for c in analysis.connections(lean=True)]
        else:
            report.table = [r for _, r in problems[:table_max]]
            shown = len(report.table)
            if count <= shown:
                which = ""
            elif shown < table_max:
                # Fewer records than rows: the core kept the first problem connections whole.
                which = f" (the worst {shown:,} of {count:,}, among those kept whole: the first ones of a large capture)"
            else:
                which = f" (the worst {shown:,} of {count:,}; at most {table_max:,} rows are embedded)"
            report.table_note = (
                f"{summary['connections']:,} connections: the table lists the {shown:,} with a problem"
                + which
                + ". `pcapq analyze --format json` has every connection."
            )
    if with_ladders:
        from pcapq.report.timeline import connection_timeline  # the text report draws no ladders

        report.ladders = [connection_timeline(analysis, index) for index, _ in problems[:ladders_max]]
        # Most telling first: the most kinds of packets (a SYN sent again and again says little
        # that the first such ladder did not), then the most symptoms, then the most packets.
        report.ladders.sort(key=lambda t: (-len({r.kind for r in t.rows}), -len(t.symptoms), -len(t.rows), t.id))
        if count > ladders_max:
            report.ladders_note = (
                f"Ladders for the {ladders_max} worst of {count:,} connections with a problem; "
                "`pcapq timeline --failed` shows any of them."
            )
    return report
