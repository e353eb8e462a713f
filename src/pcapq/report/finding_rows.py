"""A finding as rows (label, text): the one model the terminal (`report.findings`), Markdown
(`report.markdown`) and HTML (`report.html`) renderers draw, each in its own form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from pcapq.causes.registry import title
from pcapq.diagnose import Diagnosis, Finding
from pcapq.finding import Evidence
from pcapq.report.clock import utc_clock
from pcapq.report.evidence import finding_rows as evidence_rows

# Connection ids listed before "...".
IDS_SHOWN = 12


@dataclass(frozen=True)
class Row:
    """One labelled line of a finding in a report."""

    label: str  # lower case: "when", "open in Wireshark", "proxy log", ...
    text: str
    # "text"; "code" (a line as a program writes it: the proxy log); "frames" (`frames` holds
    # the evidence, (file, frame, what), in file and frame order).
    kind: str = "text"
    frames: tuple[tuple[int, int, str], ...] = ()


def in_frame_order(f: Finding) -> list[Evidence]:
    """The evidence in the order Wireshark lists frames (the finding keeps its rule's order:
    the most telling first, as JSON gives it)."""
    return sorted(f.evidence, key=lambda e: (e["file"], e["frame"]))


def frame_list(f: Finding) -> str:
    """'36, 37, 40 (file 1)': the evidence's frames, in frame order."""
    return ", ".join(f"{e['frame']}" + (f" (file {e['file']})" if e["file"] else "") for e in in_frame_order(f))


def finding_rows(f: Finding, capture_start: Optional[float], clock: Callable[[float], str] = utc_clock) -> list[Row]:
    offset = f" (+{f.first - capture_start:.3f} s into the capture)" if capture_start is not None else ""
    ids = ", ".join(str(i) for i in f.connections[:IDS_SHOWN]) + (" ..." if len(f.connections) > IDS_SHOWN else "")
    frames = frame_list(f)
    rows = [
        Row("when", f"{clock(f.first)} to {clock(f.last)} UTC{offset}"),
        Row("connections", f"{f.connection_count:,} (ids {ids})" if ids else f"{f.connection_count:,}"),
        Row("confidence", f"{f.confidence:.2f}: {f.confidence_reason}"),
        # `pcapq annotate` writes the capture with pcapq's words on these frames (docs/wireshark.md).
        Row("open in Wireshark", f"frames {frames} (with pcapq's words on them: pcapq annotate --cause {f.cause})"
            if frames else "-", "frames",
            tuple((e["file"], e["frame"], e["what"]) for e in in_frame_order(f))),
    ]
    if f.rests_on:
        rows.append(Row("rests on", "; ".join(f.rests_on)))
    if f.disproved_by:
        rows.append(Row("would disprove it", "; ".join(f.disproved_by)))
    if f.between_points is not None:
        rows.append(Row("between the points", f.between_points["says"]))
    for key, label in (("estimate_note", "queue"), ("suggestion_note", "sizing")):
        if key in f.details:
            rows.append(Row(label, f.details[key]))
    rows += [Row("proxy log", line, "code") for line in f.proxy_log]
    rows += [Row(label, text) for label, text in evidence_rows(f)]
    rows.append(Row("what to do", f.advice))
    return rows


# The columns of the table of minor observations, in every report.
MINOR_HEADER = ("cause", "where", "connections", "why minor")


def minor_rows(d: Diagnosis) -> list[tuple[str, str, str, str]]:
    """One line per minor observation: the cause's title, where, how many connections, why it is
    minor (`Finding.minor`)."""
    return [(title(f.cause), f.server, f"{f.connection_count:,}", f.minor or "") for f in d.minor_observations]
