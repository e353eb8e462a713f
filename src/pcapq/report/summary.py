"""The compact terminal summary of `pcapq analyze`."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Sequence

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from pcapq._core import Analysis
from pcapq.report.notes import note_rows

if TYPE_CHECKING:
    from pcapq._core import _AllTime, _CaptureInfo


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def _count(n: int, of: int | None = None) -> Text:
    text = Text(f"{n:,}")
    if of:
        text.append(f"  ({100.0 * n / of:.1f}%)", style="dim")
    return text


def _name(c: _CaptureInfo) -> str:
    return "standard input" if c["path"] == "-" else c["path"]


def render_notes(captures: Sequence[_CaptureInfo]) -> Table | None:
    """What pcapng files say about themselves. Each string goes into a Text, so rich shows
    "[bold]" or "<script>" as the characters they are."""
    rows = note_rows(captures)
    if not rows:
        return None
    table = Table(title="\nCapture notes", title_justify="left", show_header=False, show_edge=False, pad_edge=False, box=None)
    table.add_column("what", style="bold")
    table.add_column("text", overflow="fold")
    for what, text in rows:
        table.add_row(Text(what), Text(text))
    return table


# Paths up to this long fit the captures table at 100 columns.
SHORT_PATH = 24


def render_summary(analysis: Analysis) -> Group:
    """Captures read, then connection counts, then what was skipped."""
    s = analysis.summary()
    parts: list[RenderableType] = []

    captures = analysis.captures()
    # Long paths (a 100-column pipe) are listed above the table, numbered, rather than folded
    # across its rows: a path stays one string to copy.
    numbered = max((len(_name(c)) for c in captures), default=0) > SHORT_PATH
    if numbered:
        parts.append(Text("Captures", style="italic"))
        for i, c in enumerate(captures, 1):
            parts.append(Text(f"{i}  ") + Text(_name(c)))
    files = Table(title=None if numbered else "Captures", title_justify="left", show_edge=False, pad_edge=False)
    files.add_column("#" if numbered else "file", overflow="fold", justify="right" if numbered else "left")
    files.add_column("format")
    files.add_column("packets", justify="right")
    files.add_column("TCP", justify="right")
    files.add_column("from", no_wrap=True)
    files.add_column("to", no_wrap=True)
    for i, c in enumerate(captures, 1):
        fmt = (c["format"] or "?") + (" (gzip)" if c["gzip"] else "")
        # Text, not a str: rich would read "[...]" in a file name as markup.
        name = Text(str(i)) if numbered else Text(_name(c))
        files.add_row(name, fmt, f"{c['packets']:,}", f"{c['tcp_segments']:,}", _when(c["first_time"]), _when(c["last_time"]))
    parts.append(files)
    notes = render_notes(captures)
    if notes is not None:
        parts.append(notes)

    all_time = s.get("all_time")
    if all_time is not None:
        parts.append(Text("\n" + all_time_line(all_time, captures)))
    total = s["connections"]
    conns = Table(title="\nConnections", title_justify="left", show_header=False, show_edge=False, pad_edge=False, box=None)
    conns.add_column("what", style="bold")
    conns.add_column("count", justify="right")
    conns.add_row("connections", _count(total))
    conns.add_row("handshakes completed", _count(s["handshakes_completed"], total))
    rows = [
        ("with SYN retransmits", s["with_syn_retransmits"], "yellow"),
        ("with SYN-ACK retransmits", s["with_synack_retransmits"], "yellow"),
        ("with data retransmits", s["with_data_retransmits"], "yellow"),
        ("with duplicate ACKs", s["with_dup_acks"], ""),
        ("with a zero window", s["with_zero_window"], ""),
        ("reset (RST)", s["reset"], "red"),
        ("partial (began before the capture)", s["partial"], "dim"),
        ("new connection on a reused 4-tuple", s["port_reuse"], ""),
    ]
    for label, n, style in rows:
        conns.add_row(Text(label, style=style if n else ""), _count(n, total))
    parts.append(conns)

    outcomes = {k: v for k, v in s["outcomes"].items() if v}
    symptoms = {k: v for k, v in s["symptoms"].items() if v}
    if outcomes or symptoms:
        verdicts = Table(title="\nOutcomes and symptoms", title_justify="left", show_header=False, show_edge=False, pad_edge=False, box=None)
        verdicts.add_column("what", style="bold")
        verdicts.add_column("count", justify="right")
        for outcome, n in outcomes.items():
            style = "" if outcome in ("completed", "open") else "red"
            verdicts.add_row(Text(outcome.replace("_", " "), style=style), _count(n, total))
        for symptom, n in symptoms.items():
            verdicts.add_row(Text(symptom.replace("_", " "), style="yellow"), _count(n, total))
        parts.append(verdicts)

    skipped = analysis.skipped()
    if skipped:
        skip = Table(title="\nNot analysed", title_justify="left", show_header=False, show_edge=False, pad_edge=False, box=None)
        skip.add_column("count", justify="right")
        skip.add_column("why")
        for _slug, (n, meaning) in sorted(skipped.items(), key=lambda kv: -kv[1][0]):
            skip.add_row(f"{n:,}", meaning)
        parts.append(skip)
    if s.get("duplicate_frames"):
        parts.append(Text(f"\n{s['duplicate_frames']:,} frames were copies of an earlier frame (a span port, -i any or a bridge, or "
                          "a file that holds packets twice); each was counted once.", style="dim"))
    if s["snaplen_cut_segments"]:
        parts.append(Text(f"\n{s['snaplen_cut_segments']:,} segments were cut by the snaplen; their lengths come from the IP header.", style="dim"))
    return Group(*parts)


def duration_words(seconds: float) -> str:
    """"3 d 4 h", "2 h 5 min", "5 min", "40 s": the two largest units."""
    seconds = max(0, int(round(seconds)))
    units = [("d", 86400), ("h", 3600), ("min", 60), ("s", 1)]
    parts: list[str] = []
    for name, size in units:
        if seconds >= size or (name == "s" and not parts):
            parts.append(f"{seconds // size} {name}")
            seconds %= size
        if len(parts) == 2 or (parts and seconds == 0):
            break
    return " ".join(parts)


def all_time_line(all_time: _AllTime, captures: Sequence[_CaptureInfo]) -> str:
    """'Since the watch began (3 d 4 h): N connections, M failed; this report covers the last
    1 h' (a watch with --keep: the report covers its window, this line every connection)."""
    from pcapq.report.aggregate import FAILED_OUTCOMES

    last = max((c["last_time"] for c in captures if c["last_time"] is not None), default=all_time["since"])
    failed = sum(all_time["outcomes"].get(o, 0) for o in FAILED_OUTCOMES)
    return (
        f"Since the watch began ({duration_words(last - all_time['since'])}): {all_time['connections']:,} connections, "
        f"{failed:,} failed; this report covers the last {duration_words(all_time['keep_seconds'])}"
    )


def print_summary(analysis: Analysis, console: Console) -> None:
    console.print(render_summary(analysis))
