"""The self-contained HTML report: one file, no fetches, inline CSS, JavaScript and SVG.

Findings with their evidence; the aggregate timeline as a chart (new connections by outcome,
retransmissions, connections waiting for the server, findings' episodes shaded); a ladder
diagram per problem connection (bounded, see `model.LADDERS_MAX`) with the kernel's expected
retransmission slots as guide lines; a sortable, filterable, paginated table of connections
(bounded, see `model.TABLE_MAX`) fed from an embedded JSON array, linking to the ladders.

Every string from the capture goes through `escape.html_text` (markup) or `escape.script_json`
(the embedded data); the script never inserts data as HTML (textContent only).

Pieces other reports can render with: `page()` (a whole document with the stylesheet and a CSP
that forbids fetches), `chart_svg()` (an `timeline.Aggregate`), `ladder_svg()` (a
`timeline.ConnectionTimeline`), and `render_timelines()`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Optional

from pcapq import _core
from pcapq.report import inferred
from pcapq.report import timeline as tl
from pcapq.report.finding_rows import MINOR_HEADER, finding_rows, minor_rows
from pcapq.report.escape import html_text as h
from pcapq.report.escape import script_json
from pcapq.causes.registry import title
from pcapq.report.notes import note_rows
from pcapq.report.model import AnalyzeReport
from pcapq.report.clock import utc_clock

if TYPE_CHECKING:
    from pcapq.evidence.logs import ProxyLogNote

OUTCOME_COLOURS = {
    "completed": "#4e9a5b",
    "open": "#9aa5b1",
    "refused": "#8e44ad",
    "timed_out": "#d64541",
    "abandoned": "#e67e22",
    "reset_by_server": "#a93226",
    "reset_by_client": "#f1948a",
    "partial": "#c8ccd0",
    "unreachable": "#5b2c6f",
    "closed_by_server": "#6e2c00",
}
SERIES_COLOURS = {"syn": "#d64541", "synack": "#8e44ad", "data": "#e67e22"}
# The chart's retransmission bars: no outcome's colour (abandoned's orange was mistaken for it).
RETRANSMIT_COLOUR = "#34495e"
# Waiting counts of each server, when there are several.
SERVER_COLOURS = ["#117a65", "#b9770e", "#6c3483", "#a93226", "#1f618d", "#7b7d7d"]

CSS = """
:root { --fg:#1d2327; --muted:#5f6b76; --line:#d9dee3; --bg:#fff; --panel:#f6f8fa; --bad:#b03a2e; --warn:#b9770e; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); margin: 0; }
main { max-width: 1280px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 0 0 6px; }
.muted { color: var(--muted); } code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
nav a { margin-right: 14px; }
.finding { border: 1px solid var(--line); border-left: 5px solid var(--warn); border-radius: 4px; padding: 10px 14px; margin: 10px 0; background: var(--panel); }
.finding.sure { border-left-color: var(--bad); }
.finding dl { display: grid; grid-template-columns: 150px 1fr; gap: 3px 12px; margin: 0; }
.finding dt { font-weight: 600; } .finding dd { margin: 0; }
.totals { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0; }
.totals div { background: var(--panel); border: 1px solid var(--line); border-radius: 4px; padding: 6px 10px; }
.totals b { display: block; font-size: 18px; }
.chart svg, .ladder svg { display: block; }
.ladder { border: 1px solid var(--line); border-radius: 4px; margin: 14px 0; padding: 10px; overflow-x: auto; }
.ladder:target { outline: 3px solid #3b82f6; }
details.more-ladders > summary { cursor: pointer; margin: 14px 0; font-weight: 600; }
.note { background: #fff8e1; border: 1px solid #f3d27a; padding: 6px 10px; border-radius: 4px; margin: 8px 0; }
table.conns { border-collapse: collapse; width: 100%; margin-top: 8px; }
table.conns th, table.conns td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; white-space: nowrap; }
table.conns th { cursor: pointer; background: var(--panel); user-select: none; position: sticky; top: 0; }
table.conns th[aria-sort=ascending]::after { content: " \\25B2"; } table.conns th[aria-sort=descending]::after { content: " \\25BC"; }
table.captures th { cursor: default; position: static; }
table.notes th { text-align: left; padding-right: 1em; font-weight: 600; }
table.notes td { overflow-wrap: anywhere; }
table.conns td.wrap { white-space: normal; min-width: 420px; }
table.conns td.file { white-space: normal; overflow-wrap: anywhere; }
table.conns td.num { text-align: right; font-variant-numeric: tabular-nums; }
.controls { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; }
.controls input[type=search] { width: 260px; padding: 4px 6px; }
.pager { margin-top: 8px; display: flex; gap: 8px; align-items: center; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin: 0 4px 0 10px; vertical-align: middle; }
.outcome { font-weight: 600; }
tr.bad td { color: var(--bad); font-weight: 600; }
"""

SCRIPT = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("connections-data").textContent);
  var columns = data.columns, rows = data.rows, ladders = new Set(data.ladders);
  var col = {}; columns.forEach(function (c, i) { col[c] = i; });
  var failed = new Set(data.failed_outcomes);
  var state = { sort: "severity", dir: 1, page: 0, size: 50, text: "", outcome: "", problems: false };
  var body = document.getElementById("conn-body"), info = document.getElementById("conn-info");
  var search = document.getElementById("conn-search"), outcomeSel = document.getElementById("conn-outcome");
  var problemsBox = document.getElementById("conn-problems");
  function text(r) { return (r[col.client] + " " + r[col.server] + " " + r[col.outcome] + " " + r[col.symptoms] + " " + r[col.id]).toLowerCase(); }
  var haystack = rows.map(text);
  function visible() {
    var out = [];
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      if (state.outcome && r[col.outcome] !== state.outcome) continue;
      if (state.problems && !failed.has(r[col.outcome]) && !r[col.symptoms]) continue;
      if (state.text && haystack[i].indexOf(state.text) < 0) continue;
      out.push(r);
    }
    var k = col[state.sort], d = state.dir;
    out.sort(function (a, b) { var x = a[k], y = b[k]; return (x < y ? -1 : x > y ? 1 : a[col.id] - b[col.id]) * d; });
    return out;
  }
  function cell(tr, value, cls) { var td = document.createElement("td"); td.textContent = value; if (cls) td.className = cls; tr.appendChild(td); return td; }
  function render() {
    var list = visible(), pages = Math.max(1, Math.ceil(list.length / state.size));
    if (state.page >= pages) state.page = pages - 1;
    var start = state.page * state.size, page = list.slice(start, start + state.size);
    body.textContent = "";
    page.forEach(function (r) {
      var tr = document.createElement("tr");
      cell(tr, r[col.id], "num");
      cell(tr, r[col.client], "mono"); cell(tr, r[col.server], "mono");
      cell(tr, r[col.start].toFixed(3), "num");
      var o = cell(tr, r[col.outcome].replace(/_/g, " "), "outcome"); o.style.color = data.colours[r[col.outcome]] || "";
      cell(tr, r[col.symptoms].replace(/_/g, " "));
      cell(tr, r[col.latency] ? r[col.latency].toFixed(3) : "-", "num");
      cell(tr, r[col.frame], "num");
      var td = cell(tr, "");
      if (ladders.has(r[col.id])) { var a = document.createElement("a"); a.href = "#ladder-" + r[col.id]; a.textContent = "ladder"; td.appendChild(a); }
      body.appendChild(tr);
    });
    info.textContent = list.length ? ("rows " + (start + 1) + "\\u2013" + (start + page.length) + " of " + list.length + " (page " + (state.page + 1) + " of " + pages + ")") : "no connection matches";
    document.getElementById("conn-prev").disabled = state.page === 0;
    document.getElementById("conn-next").disabled = state.page >= pages - 1;
    document.querySelectorAll("table.conns th[data-key]").forEach(function (th) {
      th.setAttribute("aria-sort", th.dataset.key === state.sort ? (state.dir > 0 ? "ascending" : "descending") : "none");
    });
  }
  document.querySelectorAll("table.conns th[data-key]").forEach(function (th) {
    th.addEventListener("click", function () {
      var key = th.dataset.key;
      if (state.sort === key) { state.dir = -state.dir; } else { state.sort = key; state.dir = th.dataset.desc ? -1 : 1; }
      state.page = 0; render();
    });
  });
  search.addEventListener("input", function () { state.text = search.value.trim().toLowerCase(); state.page = 0; render(); });
  outcomeSel.addEventListener("change", function () { state.outcome = outcomeSel.value; state.page = 0; render(); });
  problemsBox.addEventListener("change", function () { state.problems = problemsBox.checked; state.page = 0; render(); });
  document.getElementById("conn-prev").addEventListener("click", function () { state.page--; render(); });
  document.getElementById("conn-next").addEventListener("click", function () { state.page++; render(); });
  render();
  // A link to a folded ladder opens its <details> first.
  function openLadder() {
    var target = location.hash && document.getElementById(location.hash.slice(1));
    var fold = target && target.closest("details");
    if (fold && !fold.open) { fold.open = true; target.scrollIntoView(); }
  }
  window.addEventListener("hashchange", openLadder);
  openLadder();
})();
"""


def _file_note(file: int) -> str:
    return f" (file {file})" if file else ""


def _findings(report: AnalyzeReport) -> list[str]:
    d = report.diagnosis
    out = ['<h2 id="findings">Findings</h2>']
    if not d.findings:
        out.append(f"<p>{h(d.nothing_found())}</p>")
    for f in d.findings:
        rows = ""
        for row in finding_rows(f, report.start):
            if row.kind == "frames":
                evidence = "".join(
                    f"<li><code>frame {frame}</code>{_file_note(file)}: {h(what)}</li>" for file, frame, what in row.frames
                )
                if evidence:
                    evidence += f"<li>with pcapq's words on them in Wireshark: <code>pcapq annotate --cause {h(f.cause)}</code></li>"
                rows += f"<dt>evidence</dt><dd><ul>{evidence or '<li>-</li>'}</ul></dd>"
            elif row.kind == "code":
                rows += f"<dt>{h(row.label)}</dt><dd><code>{h(row.text)}</code></dd>"
            else:
                rows += f"<dt>{h(row.label)}</dt><dd>{h(row.text)}</dd>"
        sure = " sure" if f.confidence >= 0.7 else ""
        heading = f"{title(f.cause)} on {f.server}"
        out.append(f'<section class="finding{sure}"><h3>{h(heading)}</h3><dl>{rows}</dl></section>')
    if d.minor_observations:
        head = "".join(f"<th>{h(name)}</th>" for name in MINOR_HEADER)
        body = "".join(
            f"<tr><td>{h(cause)}</td><td>{h(where)}</td><td class=num>{h(n)}</td><td class=wrap>{h(why)}</td></tr>"
            for cause, where, n, why in minor_rows(d)
        )
        out.append(f'<h3 id="minor">Minor observations</h3><table class="conns minor"><thead><tr>{head}</tr></thead>'
                   f"<tbody>{body}</tbody></table>")
    out.append(f'<p class="muted">Capture point: {h(d.capture_point.side)} ({h(d.capture_point.reason)})</p>')
    for sentence in d.settings:
        out.append(f'<p class="muted">Kernel: {h(sentence)}</p>')
    if d.inferred_settings is not None:
        head = "".join(f"<th>{h(name)}</th>" for name in inferred.HEADER)
        body = "".join(
            f"<tr><td>{h(setting)}</td><td>{h(value)}</td><td class=num>{h(confidence)}</td><td class=wrap>{h(rests_on)}</td></tr>"
            for setting, value, confidence, rests_on in inferred.rows(d.inferred_settings)
        )
        out.append(f'<h3 id="settings">{h(inferred.title(d.inferred_settings))}</h3><table class="conns settings">'
                   f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    from pcapq.report.evidence import section_rows

    beyond = section_rows(d)
    if beyond:
        rows = "".join(f"<dt>{h(label.strip())}</dt><dd>{h(text)}</dd>" for label, text in beyond)
        out.append(f'<h2 id="evidence">Evidence beyond the capture</h2><dl>{rows}</dl>')
    return out


def _captures(report: AnalyzeReport) -> list[str]:
    rows = []
    for c in report.captures:
        name = "standard input" if c["path"] == "-" else c["path"]
        fmt = (c["format"] or "?") + (" (gzip)" if c["gzip"] else "")
        first = utc_clock(c["first_time"], True) if c["first_time"] is not None else "-"
        last = utc_clock(c["last_time"], True) if c["last_time"] is not None else "-"
        rows.append(
            f"<tr><td class=file>{h(name)}</td><td>{h(fmt)}</td><td class=num>{c['packets']:,}</td>"
            f"<td class=num>{c['tcp_segments']:,}</td><td>{first}</td><td>{last}</td><td>{h(c['read_stop'])}</td></tr>"
        )
    head = "<tr><th>file</th><th>format</th><th>packets</th><th>TCP</th><th>first packet (UTC)</th><th>last packet (UTC)</th><th>read</th></tr>"
    out = [f'<table class="conns captures"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>']
    notes = note_rows(report.captures)
    if notes:
        cells = "".join(f"<tr><th>{h(what)}</th><td>{h(text)}</td></tr>" for what, text in notes)
        out.append(f'<h3>Capture notes</h3><table class="notes"><tbody>{cells}</tbody></table>')
    return out


def _totals(report: AnalyzeReport) -> list[str]:
    s = report.summary
    cells = [
        ("packets", s["packets"]),
        ("connections", s["connections"]),
        ("handshakes completed", s["handshakes_completed"]),
        ("with a problem", report.problems),
        ("SYN retransmits", s["with_syn_retransmits"]),
        ("SYN-ACK retransmits", s["with_synack_retransmits"]),
        ("data retransmits", s["with_data_retransmits"]),
        ("reset", s["reset"]),
    ]
    cells += [(o.replace("_", " "), n) for o, n in s["outcomes"].items() if n and o != "completed"]
    inner = "".join(f"<div><b>{n:,}</b>{h(label)}</div>" for label, n in cells)
    return [f'<div class="totals">{inner}</div>']


def _shaded(episodes: list[tl.Episode]) -> list[tuple[float, float, list[str]]]:
    """Episodes joined where they overlap, so that shading does not stack: (first, last, what)."""
    out: list[tuple[float, float, list[str]]] = []
    for e in sorted(episodes, key=lambda e: e.first):
        label = f"{title(e.cause)} on {e.server}"
        if out and e.first <= out[-1][1]:
            first, last, labels = out[-1]
            out[-1] = (first, max(last, e.last), labels + [label])
        else:
            out.append((e.first, e.last, [label]))
    return out


def chart_svg(agg: tl.Aggregate, width: int = 1200) -> str:
    """Three panels over the same time axis: new connections by outcome (stacked bars),
    retransmissions (bars), connections waiting for the server's answer (steps); findings'
    episodes shaded across all three."""
    buckets = agg.buckets
    if not buckets:
        return "<p>No connections.</p>"
    left, right, panel, gap, top = 70, 20, 90, 30, 22
    plot_w = width - left - right
    height = top + 3 * panel + 2 * gap + 40
    n = len(buckets)
    bw = plot_w / n
    t0, t1 = buckets[0].start, buckets[-1].start + agg.width

    def x(t: float) -> float:
        return left + (t - t0) / (t1 - t0) * plot_w

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="aggregate timeline">']
    ys = [top + i * (panel + gap) for i in range(3)]
    for first, last, labels in _shaded(agg.episodes):
        shade_from, shade_to = max(first, t0), min(last, t1)
        if shade_to < shade_from:
            continue
        w = max(2.0, x(shade_to) - x(shade_from))
        parts.append(
            f'<rect x="{x(shade_from):.1f}" y="{top}" width="{w:.1f}" height="{3 * panel + 2 * gap}" fill="#f5b7b1" opacity="0.3">'
            f"<title>{h('; '.join(labels))}</title></rect>"
        )
    max_new = max(b.connections for b in buckets) or 1
    max_rtx = max(b.retransmissions for b in buckets) or 1
    max_wait = max(b.waiting_peak for b in buckets) or 1
    titles = ["new connections", "retransmissions", "waiting for answer"]
    maxima = [max_new, max_rtx, max_wait]
    for y0, label, m in zip(ys, titles, maxima):
        parts.append(f'<line x1="{left}" y1="{y0 + panel}" x2="{left + plot_w}" y2="{y0 + panel}" stroke="#999"/>')
        parts.append(f'<text x="{left - 6}" y="{y0 + 10}" text-anchor="end" font-size="11" fill="#555">{m:,}</text>')
        parts.append(f'<text x="{left - 6}" y="{y0 + panel}" text-anchor="end" font-size="11" fill="#555">0</text>')
        parts.append(f'<text x="{left}" y="{y0 - 6}" font-size="12" font-weight="600" fill="#333">{h(label)}</text>')
    for i, b in enumerate(buckets):
        bx = left + i * bw
        w = max(1.0, bw - (1 if bw > 3 else 0))
        base = float(ys[0] + panel)
        for outcome in tl.OUTCOMES:
            count = b.new[outcome]
            if not count:
                continue
            bh = count / max_new * panel
            base -= bh
            tip = f"{utc_clock(b.start)} UTC: {count:,} {outcome.replace('_', ' ')}"
            parts.append(
                f'<rect x="{bx:.1f}" y="{base:.1f}" width="{w:.1f}" height="{bh:.1f}" fill="{OUTCOME_COLOURS[outcome]}">'
                f"<title>{h(tip)}</title></rect>"
            )
        if b.retransmissions:
            bh = b.retransmissions / max_rtx * panel
            tip = f"{utc_clock(b.start)} UTC: {b.retransmissions:,} retransmissions"
            parts.append(
                f'<rect x="{bx:.1f}" y="{ys[1] + panel - bh:.1f}" width="{w:.1f}" height="{bh:.1f}" fill="{RETRANSMIT_COLOUR}">'
                f"<title>{h(tip)}</title></rect>"
            )
    def step_line(values: list[int], colour: str, label: str, width: float) -> str:
        steps = []
        for i, v in enumerate(values):
            y = ys[2] + panel - v / max_wait * panel
            steps.append(f"{left + i * bw:.1f},{y:.1f} {left + (i + 1) * bw:.1f},{y:.1f}")
        return (
            f'<polyline points="{" ".join(steps)}" fill="none" stroke="{colour}" stroke-width="{width}">'
            f"<title>{h(label)}</title></polyline>"
        )

    parts.append(step_line([b.waiting_peak for b in buckets], "#2e86c1", "waiting, every server", 2))
    for colour, (server, values) in zip(SERVER_COLOURS, agg.waiting_by_server.items()):
        parts.append(step_line(values, colour, f"waiting at {server}", 1.3))
    def tick_label(t: float) -> str:
        return utc_clock(t, with_date=t1 - t0 > 86400)[:-4]

    # Ticks on bucket boundaries (every `step` buckets), so that each label sits under the left
    # edge of the bar it starts.
    step = max(1, -(-n // 8))
    for i in range(0, n + 1, step):
        t = t0 + i * agg.width
        tx = x(t)
        parts.append(f'<line x1="{tx:.1f}" y1="{ys[2] + panel}" x2="{tx:.1f}" y2="{ys[2] + panel + 5}" stroke="#999"/>')
        anchor = "start" if i == 0 else "end" if i == n else "middle"
        parts.append(f'<text x="{tx:.1f}" y="{ys[2] + panel + 18}" text-anchor="{anchor}" font-size="11" fill="#555">{h(tick_label(t))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _legend(agg: tl.Aggregate) -> str:
    items = "".join(
        f'<span class="swatch" style="background:{c}"></span>{h(o.replace("_", " "))}' for o, c in OUTCOME_COLOURS.items()
    )
    servers = "".join(
        f'<span class="swatch" style="background:{c}"></span>waiting at {h(server)}'
        for c, server in zip(SERVER_COLOURS, agg.waiting_by_server)
    )
    every = " (every server)" if agg.waiting_by_server else ""
    return (
        f'<p class="muted">{items}<span class="swatch" style="background:#f5b7b1"></span>a finding\'s episode'
        f'<span class="swatch" style="background:{RETRANSMIT_COLOUR}"></span>retransmissions'
        f'<span class="swatch" style="background:#2e86c1"></span>waiting{every}: established for the client, not yet '
        "answered by the server (an estimate of the accept queue: the most at the end of any second of the bucket)"
        f"{servers}</p>"
    )


# Ladder geometry (pixels).
LADDER_LEFT = 150  # time and frame labels to the left of the client line
LADDER_CLIENT_X = 250
LADDER_SERVER_X = 520
LADDER_NOTE_X = 540
# Seen at two capture points: the lines of the point nearer the clients and of the other.
LADDER_POINT_XS = (LADDER_CLIENT_X + 90, LADDER_SERVER_X - 90)
NOTE_CHAR_PX = 6.6  # average width of a character of the notes' 11.5 px font
LADDER_MAX_ROWS = 150
ROW_MIN_GAP = 22
LADDER_TIME_PX = 520  # the connection's duration spans about this many pixels
# Notes wrap at this many characters, so that a ladder (about 1,030 px) fits the page's 1,180.
NOTE_MAX_CHARS = 72
NOTE_LINE_PX = 13
# Ladders shown open; the others, less telling, are folded under one <details>.
LADDERS_OPEN = 6


def _note_lines(note: str) -> list[str]:
    import textwrap

    return textwrap.wrap(note, NOTE_MAX_CHARS, break_long_words=False, break_on_hyphens=False) or [""]


def _ladder_scale(t: tl.ConnectionTimeline) -> tuple[list[float], Callable[[float], float]]:
    """y of each row: proportional to time, but never closer than ROW_MIN_GAP to the row before;
    and a function mapping any offset to y by the same stretch (for the schedule's slots)."""
    span = max([r.offset for r in t.rows] + [s.offset for s in t.slots] + [1e-3])
    per_s = LADDER_TIME_PX / span
    points: list[tuple[float, float]] = []
    y = 40.0
    prev_offset = 0.0
    previous_lines = 1
    for i, r in enumerate(t.rows):
        # A wrapped note needs room for its lines before the next row.
        gap = ROW_MIN_GAP + NOTE_LINE_PX * (previous_lines - 1)
        y = y + max(gap if i else 0, (r.offset - prev_offset) * per_s)
        prev_offset = r.offset
        previous_lines = len(_note_lines(r.note))
        points.append((r.offset, y))

    def at(offset: float) -> float:
        if not points:
            return 40.0 + offset * per_s
        before = [p for p in points if p[0] <= offset]
        after = [p for p in points if p[0] > offset]
        if before and after:
            (o0, y0), (o1, y1) = before[-1], after[0]
            return y0 + (offset - o0) / (o1 - o0) * (y1 - y0)
        if before:
            o0, y0 = before[-1]
            return y0 + (offset - o0) * per_s
        o1, y1 = after[0]
        return max(20.0, y1 - (o1 - offset) * per_s)

    return [p[1] for p in points], at


def ladder_svg(t: tl.ConnectionTimeline) -> str:
    """The ladder of one connection: its first `LADDER_MAX_ROWS` packets (a long transfer's
    duplicate ACKs would make a diagram nobody reads; the caller says how many were left out)."""
    if len(t.rows) > LADDER_MAX_ROWS:
        last = t.rows[LADDER_MAX_ROWS - 1].offset
        t = replace(t, rows=t.rows[:LADDER_MAX_ROWS], slots=[s for s in t.slots if s.offset <= last])
    ys, at = _ladder_scale(t)
    slot_ys = [(s, at(s.offset)) for s in t.slots]
    notes = [_note_lines(r.note) for r in t.rows]
    last_lines = len(notes[-1]) if notes else 1
    bottom = max([y + NOTE_LINE_PX * (last_lines - 1) for y in ys[-1:]] + ys + [y for _, y in slot_ys] + [60.0]) + 30
    width = LADDER_NOTE_X + NOTE_CHAR_PX * max([len(line) for lines in notes for line in lines] + [40]) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{bottom:.0f}" role="img" '
        f'aria-label="ladder diagram of connection {t.id}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs>',
        f'<text x="{LADDER_CLIENT_X}" y="16" text-anchor="middle" font-size="12" font-weight="600">client {h(t.client)}</text>',
        f'<text x="{LADDER_SERVER_X}" y="16" text-anchor="middle" font-size="12" font-weight="600">server {h(t.server)}</text>',
        f'<text x="4" y="16" font-size="11" fill="#555">time (s) · frame</text>',
    ]
    for x in (LADDER_CLIENT_X, LADDER_SERVER_X):
        parts.append(f'<line x1="{x}" y1="24" x2="{x}" y2="{bottom - 10:.0f}" stroke="#333" stroke-width="1.5"/>')
    if t.path is not None and t.path_points is not None:
        # Seen at two capture points (pcapq.report.four_lines): their two lines between the
        # client's and the server's, and each packet stops where it vanished.
        for x, name in zip(LADDER_POINT_XS, t.path_points):
            parts.append(f'<line x1="{x}" y1="30" x2="{x}" y2="{bottom - 10:.0f}" stroke="#888" stroke-width="1" stroke-dasharray="3 3"/>')
            parts.append(f'<text x="{x}" y="28" text-anchor="middle" font-size="9.5" fill="#555">{h(name)}</text>')
    for s, y in slot_ys:
        colour = SERIES_COLOURS.get(s.series, "#888")
        label = f"{s.series} #{s.attempt} due ({tl.SCHEDULE_NAMES.get(s.schedule, s.schedule)})"
        parts.append(
            f'<line x1="{LADDER_CLIENT_X - 40}" y1="{y:.1f}" x2="{LADDER_SERVER_X + 10}" y2="{y:.1f}" stroke="{colour}" '
            f'stroke-dasharray="4 3" stroke-width="1" opacity="0.8"><title>{h(label)} at +{s.offset:.3f} s</title></line>'
        )
        parts.append(
            f'<text x="{LADDER_CLIENT_X - 44}" y="{y + 3:.1f}" text-anchor="end" font-size="9.5" fill="{colour}">'
            f"{h(s.series)} #{s.attempt} due</text>"
        )
    for i, (r, y, lines) in enumerate(zip(t.rows, ys, notes)):
        x1, x2 = (LADDER_CLIENT_X, LADDER_SERVER_X) if r.side == "client" else (LADDER_SERVER_X, LADDER_CLIENT_X)
        colour = "#b03a2e" if r.kind in ("rst", "vanished") else "#d35400" if "retransmit" in r.kind else "#1f4e79"
        if t.path is not None and "✕" in t.path[i]:
            # Vanished between the two points: the arrow stops between their lines.
            between = sum(LADDER_POINT_XS) / 2
            yy = y - 6 + 12 * (between - x1) / (LADDER_SERVER_X - LADDER_CLIENT_X) * (1 if r.side == "client" else -1)
            parts.append(f'<line x1="{x1}" y1="{y - 6:.1f}" x2="{between:.0f}" y2="{yy:.1f}" stroke="#b03a2e" stroke-width="1.6"/>')
            parts.append(f'<text x="{between:.0f}" y="{yy + 4:.1f}" text-anchor="middle" font-size="13" fill="#b03a2e">✕</text>')
        else:
            parts.append(
                f'<line x1="{x1}" y1="{y - 6:.1f}" x2="{x2}" y2="{y + 6:.1f}" stroke="{colour}" stroke-width="1.6" marker-end="url(#arrow)"/>'
            )
        label = f"{r.flags} seq={r.seq if r.seq is not None else '-'} ack={r.ack if r.ack is not None else '-'} len={r.length}"
        parts.append(
            f'<text x="{(LADDER_CLIENT_X + LADDER_SERVER_X) / 2:.0f}" y="{y - 5:.1f}" text-anchor="middle" font-size="10" '
            f'fill="#333" font-family="monospace">{h(label)}</text>'
        )
        parts.append(f'<text x="4" y="{y + 4:.1f}" font-size="11" font-family="monospace">{r.offset:9.6f} · {r.frame}</text>')
        spans = "".join(
            f'<tspan x="{LADDER_NOTE_X}" dy="{0 if k == 0 else NOTE_LINE_PX}">{h(line)}</tspan>' for k, line in enumerate(lines)
        )
        parts.append(f'<text x="{LADDER_NOTE_X}" y="{y + 4:.1f}" font-size="11.5" fill="{colour}">{spans}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _ladders(report: AnalyzeReport) -> list[str]:
    out = ['<h2 id="ladders">Ladders of the connections with a problem</h2>']
    if not report.ladders:
        out.append("<p>No connection with a problem.</p>")
        return out
    out.append(
        '<p class="muted">One arrow per packet pcapq labelled, client on the left; time runs down, proportional '
        "where the gaps are long. Dashed lines: when the kernel's retransmission schedule says the next send is due "
        "(SYN, SYN-ACK or RTO backoff), counted from the series' first send.</p>"
    )
    if report.ladders_note:
        out.append(f'<p class="note">{h(report.ladders_note)}</p>')
    sections = [_ladder_section(t) for t in report.ladders]
    out += sections[:LADDERS_OPEN]
    if len(sections) > LADDERS_OPEN:
        rest = len(sections) - LADDERS_OPEN
        out.append(
            f'<details class="more-ladders"><summary>{rest:,} more ladder{"s" if rest != 1 else ""}, less telling '
            "(fewer kinds of packets: most are a SYN sent again and again)</summary>"
            + "".join(sections[LADDERS_OPEN:]) + "</details>"
        )
    return out


def _ladder_section(t: tl.ConnectionTimeline) -> str:
    symptoms = ", ".join(s.replace("_", " ") for s in t.symptoms) or "no symptom"
    head = (
        f"Connection {t.id}: {t.client} → {t.server}: {t.outcome.replace('_', ' ')}, {symptoms}; "
        f"{t.duration:.3f} s" + (f", {t.added_latency:.3f} s added by retransmissions" if t.added_latency else "")
    )
    not_drawn = max(0, len(t.rows) - LADDER_MAX_ROWS)
    dropped = (
        f'<p class="muted">{not_drawn:,} later packets not drawn (`pcapq timeline --conn {h(t.client)}` lists '
        "them).</p>"
        if not_drawn
        else ""
    )
    if t.events_dropped:
        dropped += f'<p class="muted">{t.events_dropped} later events not kept.</p>'
    return f'<section class="ladder" id="ladder-{t.id}"><h3>{h(head)}</h3>{ladder_svg(t)}{dropped}</section>'


def _table(report: AnalyzeReport) -> list[str]:
    start = report.start or 0.0
    columns = ["id", "client", "server", "start", "outcome", "symptoms", "latency", "frame", "severity"]
    ordered = sorted(report.table, key=lambda r: tl.severity(
        {"outcome": r.outcome, "symptoms": r.symptoms, "added_latency": r.added_latency, "first_time": r.first_time, "id": r.id}
    ))
    rank = {r.id: i for i, r in enumerate(ordered)}
    rows = [
        [r.id, r.client, r.server, round(r.first_time - start, 6), r.outcome, ", ".join(r.symptoms), round(r.added_latency, 6),
         r.frame if not r.file else f"{r.frame} (file {r.file})", rank[r.id]]
        for r in report.table
    ]
    data = {
        "columns": columns,
        "rows": rows,
        "ladders": [t.id for t in report.ladders],
        "failed_outcomes": list(tl.FAILED_OUTCOMES),
        "colours": OUTCOME_COLOURS,
    }
    options = "".join(f'<option value="{o}">{o.replace("_", " ")}</option>' for o in tl.OUTCOMES)
    headers = [
        ("id", "id", ""), ("client", "client", ""), ("server", "server", ""), ("start", "start (s)", ""),
        ("outcome", "outcome", ""), ("symptoms", "symptoms", ""), ("latency", "added latency (s)", "1"),
        ("frame", "first frame", ""),
    ]
    ths = "".join(f'<th data-key="{k}"{" data-desc=1" if d else ""}>{h(label)}</th>' for k, label, d in headers) + "<th></th>"
    out = ['<h2 id="connections">Connections</h2>']
    if report.table_note:
        out.append(f'<p class="note">{h(report.table_note)}</p>')
    out += [
        '<div class="controls"><input type="search" id="conn-search" placeholder="filter: address, port, outcome, symptom" aria-label="filter">',
        f'<select id="conn-outcome" aria-label="outcome"><option value="">every outcome</option>{options}</select>',
        '<label><input type="checkbox" id="conn-problems"> only with a problem</label>',
        '<span class="muted">sorted worst first; click a column to sort</span></div>',
        f'<table class="conns"><thead><tr>{ths}</tr></thead><tbody id="conn-body"></tbody></table>',
        '<div class="pager"><button id="conn-prev" type="button">previous</button><button id="conn-next" type="button">next</button>'
        '<span id="conn-info" class="muted"></span></div>',
        f'<script type="application/json" id="connections-data">{script_json(data)}</script>',
    ]
    return out


def render_analyze(report: AnalyzeReport) -> str:
    return "".join(render_analyze_parts(report))


def render_analyze_parts(report: AnalyzeReport, between: Optional[list[str]] = None) -> list[str]:
    """`render_analyze` in pieces, to be written one after the other: a large capture's table
    is megabytes of embedded JSON, and joining the page copies it again. `between`: the parts
    of the section "Between the two points" (report.between.render_html), after the findings."""
    names = ", ".join("standard input" if c["path"] == "-" else c["path"] for c in report.captures)
    when = ""
    if report.start is not None:
        ends = [c["last_time"] for c in report.captures if c["last_time"] is not None]
        when = f"{utc_clock(report.start, True)} to {utc_clock(max(ends), True)} UTC" if ends else ""
    body = [
        f"<h1>pcapq: {h(names)}</h1>",
        f'<p class="muted">{h(when)} · pcapq {h(_core.__version__)}</p>',
        '<nav><a href="#findings">Findings</a>' + ('<a href="#between">Between the points</a>' if between else '')
        + '<a href="#timeline">Timeline</a><a href="#connections">Connections</a><a href="#ladders">Ladders</a></nav>',
    ]
    body += _totals(report)
    body += _captures(report)
    if report.diagnosis.interrupted is not None:
        body.append(f'<p class="note">{h(report.diagnosis.interrupted.sentence())}.</p>')
    for w in report.warnings:
        body.append(f'<p class="note">warning: {h(w)}</p>')
    body += _findings(report)
    body += between or []
    if report.aggregate is not None:
        body += [
            f'<h2 id="timeline">Timeline <span class="muted">(buckets of {report.aggregate.width} s)</span></h2>',
            f'<div class="chart">{chart_svg(report.aggregate)}</div>',
            _legend(report.aggregate),
        ]
    body += _table(report)
    body += _ladders(report)
    return page_parts(f"pcapq: {names}", body, SCRIPT)


def page(title: str, body: str, script: Optional[str] = None) -> str:
    """A whole document: inline CSS and script, a Content-Security-Policy that forbids any fetch."""
    return "".join(page_parts(title, [body], script))


def page_parts(title: str, body: list[str], script: Optional[str] = None) -> list[str]:
    """`page` in pieces: the body's parts are joined by newlines."""
    csp = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
    script_tag = f"<script>{script}</script>" if script else ""
    head = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{h(title)}</title><style>{CSS}</style></head>\n"
        "<body><main>\n"
    )
    parts = [head]
    for i, part in enumerate(body):
        parts += [part, "\n"] if i < len(body) - 1 else [part]
    parts.append(f"\n</main>{script_tag}</body></html>\n")
    return parts


def _proxy_log(note: ProxyLogNote) -> str:
    """The proxy's line tied to a connection, above its ladder: where, status and kind, the line
    as written, and the proxy's times against the capture's."""
    from pcapq.report.proxy_line import timing_sentence, verdict, where

    rows = f"<tr><th>proxy log</th><td>{h(where(note))}, {h(verdict(note))}<br><code>{h(note['text'])}</code></td></tr>"
    sentence = timing_sentence(note)
    if sentence is not None:
        rows += f"<tr><th>timings</th><td>{h(sentence)}</td></tr>"
    return f'<table class="notes"><tbody>{rows}</tbody></table>'


def render_timelines(
    timelines: list[tl.ConnectionTimeline], aggregate: Optional[tl.Aggregate], matched: int, source: str
) -> str:
    body = [f"<h1>pcapq timeline: {h(source)}</h1>"]
    if aggregate is not None and aggregate.buckets:
        body += [f"<h2>Across the capture <span class=\"muted\">(buckets of {aggregate.width} s)</span></h2>",
                 f'<div class="chart">{chart_svg(aggregate)}</div>', _legend(aggregate)]
    if timelines or aggregate is None:
        body.append(f"<h2>Connections ({len(timelines)} of {matched} matching)</h2>")
    for t in timelines:
        symptoms = ", ".join(s.replace("_", " ") for s in t.symptoms) or "no symptom"
        head = f"Connection {t.id}: {t.client} → {t.server}: {t.outcome.replace('_', ' ')}, {symptoms}"
        rows = "".join(
            f"<tr><td class=num>{r.frame}</td><td class=num>{r.offset:.6f}</td><td>{r.arrow}</td><td><code>{h(r.flags)}</code></td>"
            f"<td class=num>{'' if r.seq is None else r.seq}</td><td class=num>{'' if r.ack is None else r.ack}</td>"
            f"<td class=num>{r.length}</td><td class=wrap>{h(r.note)}</td></tr>"
            for r in t.rows
        )
        logged = _proxy_log(t.proxy_log) if t.proxy_log is not None else ""
        body.append(
            f'<section class="ladder" id="ladder-{t.id}"><h3>{h(head)}</h3>{logged}{ladder_svg(t)}'
            '<table class="conns"><thead><tr><th>frame</th><th>time (s)</th><th>dir</th><th>flags</th><th>seq</th>'
            f"<th>ack</th><th>len</th><th>what it means</th></tr></thead><tbody>{rows}</tbody></table></section>"
        )
    return page(f"pcapq timeline: {source}", "\n".join(body))
