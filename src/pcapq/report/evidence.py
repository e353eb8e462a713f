"""What the proxy's logs and the upstream's counters said (`Diagnosis.evidence`), in words shared
by the text, Markdown and HTML reports: one list of (label, sentence) rows per part."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pcapq.diagnose import Diagnosis, Finding
from pcapq.evidence.counters import KEY_COUNTERS

if TYPE_CHECKING:
    from pcapq.evidence.section import LogFileSection

SHOWN = 10


def finding_rows(f: Finding) -> list[tuple[str, str]]:
    """Rows a finding adds when evidence was given: confirmed by, contradicted by, logged."""
    if not f.checked:
        return []
    rows = []
    if f.logged:
        rows.append(("logged", ", ".join(f"{n} {k}" for k, n in f.logged.items()) + " (lines tied to its connections)"))
    rows.append(("confirmed by", "; ".join(f.confirmed_by) or "-"))
    rows.append(("contradicted by", "; ".join(f.contradicted_by) or "-"))
    return rows


def _offset(x: LogFileSection) -> str:
    clock = x.get("clock") or {}
    if x.get("clock_offset") is None:
        return "clock offset unknown (no line tied)"
    zone = clock.get("zone", 0.0)
    where = "from its time zone" if not clock.get("zone_searched") else "searched by quarter hours"
    skew = clock.get("skew")
    if skew is None:
        return f"log clock = capture clock {zone / 3600:+.2f} h ({where}); no tied packet shows the moment, so no finer estimate"
    return (f"log clock = capture clock {zone / 3600:+.2f} h ({where}) {skew:+.1f} s (median of {clock.get('skew_pairs', 0)} "
            "tied lines; the log's 1 s resolution leaves ±0.5 s)")


def section_rows(d: Diagnosis) -> list[tuple[str, str]]:
    """The evidence section: per log file its tally, clock and untied lines; connections with no
    line; the counters that moved; the listeners."""
    ev = d.evidence
    if not ev:
        return []
    rows: list[tuple[str, str]] = []
    logs = ev.get("logs")
    if logs:
        share = f" ({100 * logs['matched'] / logs['lines']:.0f} %)" if logs["lines"] else ""
        rows.append(("proxy logs", f"{logs['matched']} of {logs['lines']} upstream error lines tied to a connection{share}"))
        for x in logs["files"]:
            kinds = ", ".join(f"{n} {k}" for k, n in x["by_kind"].items()) or "no upstream line"
            rows.append((x["path"], f"{x['format']} format, {x['lines']} lines: {kinds}; {x['matched']} of "
                         f"{x['upstream_lines']} upstream error lines tied" +
                         (f" ({x['exact']} lines tied by the proxy's source port)" if x.get("exact") else "") +
                         (f", {x['answered_matched']} answered requests tied" if x["answered_matched"] else "")))
            rows.append(("  clock", _offset(x)))
            if x["unreadable"]:
                ex = "; ".join(f"line {e['line']}: {e['text']!r}" for e in x["unreadable_examples"][:3])
                rows.append(("  unreadable", f"{x['unreadable']} lines not in the {x['format']} format ({ex})"))
            if x["untied_count"]:
                which = ", ".join(f"line {u['line']} ({u['kind']})" for u in x["untied"][:SHOWN])
                rows.append(("  tied to nothing", f"{x['untied_count']}: {which}" + (" ..." if x["untied_count"] > SHOWN else "")))
        for measure, c in logs.get("timings", {}).items():
            what = {"connect": "connect times", "header": "times to the first byte"}.get(measure, measure)
            differ = "; ".join(f"connection {e['connection']}: {e['logged']:.3f} s logged, {e['seen']:.3f} s seen" for e in c["examples"])
            rows.append(("  timings", f"the proxy's {what} agree with the capture on {c['agree']} of {c['pairs']} tied connections"
                         + (f" ({differ})" if differ else "")))
        for kind, n in logs.get("not_tied_by_nature", {}).items():
            rows.append(("  not in the capture", f"{n} {kind} (no TCP connection of the capture can show it)"))
        for shape, s in logs.get("no_line", {}).items():
            ids = ", ".join(str(i) for i in s["ids"])
            rows.append(("no line for", f"{s['count']} failed connections ({shape.replace('_', ' ')}): ids {ids}" +
                         (" ..." if s["count"] > len(s["ids"]) else "")))
    counters = ev.get("counters")
    if counters:
        moved = counters["moved"]
        key = ", ".join(f"{k} {moved[k]:+,}" for k in KEY_COUNTERS if k in moved) or "no listen-queue or loss counter moved"
        span = "over the capture" if counters["window"] else "since boot (one snapshot)"
        rows.append(("counters", f"{', '.join(counters['files'])} ({counters['format']}), {span}: {key}"))
    for listener in ev.get("listeners", []):
        rows.append(("listener", f"{listener['local']}: Recv-Q {listener['recv_q']} waiting, Send-Q {listener['send_q']} backlog"))
    return rows
