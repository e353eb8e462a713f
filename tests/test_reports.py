"""The reports: formats of `analyze` and `timeline`, annotations, the aggregate timeline,
escaping of text from the capture, and the exit code for problems found."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess

import pytest
from conftest import REPO, run_pcapq

import pcapq
from pcapq.diagnose import diagnose
from pcapq.exitcodes import ExitCode
from pcapq.report import html, markdown, model
from pcapq.report import timeline as tl
from pcapq.report.escape import md_code, md_text, script_json

CAPTURES = REPO / "captures"
ACCEPT = CAPTURES / "accept_queue_overflow.pcap"


# ---- escaping ----


def test_script_json_cannot_end_the_script_element():
    value = {"name": "</script><script>alert(1)</script><!-- & \u2028\u2029", "n": [1, 2.5, None]}
    text = script_json(value)
    assert not re.search(r"[<>&\u2028\u2029]", text)
    assert json.loads(text) == value


def test_markdown_text_cannot_make_markup():
    text = md_text("a|b `code` <img src=x onerror=alert(1)> [link](http://x) *em* &amp;\nnext")
    assert "|" not in text.replace("\\|", "")
    assert "<" not in text and "\n" not in text
    assert "\\`code\\`" in text and "\\[link\\]" in text and "&amp;amp;" in text
    assert md_code("a`b|c") == "``a`b\\|c``"


def _strange_copy(tmp_path):
    """The accept-queue capture under a name that is HTML and Markdown."""
    name = tmp_path / "x<img src=x onerror=alert(1)>|`y`&.pcap"
    shutil.copy(ACCEPT, name)
    return name


def test_html_report_escapes_the_file_name(tmp_path):
    path = _strange_copy(tmp_path)
    proc = run_pcapq("analyze", "--format", "html", str(path))
    assert proc.returncode == ExitCode.PROBLEMS, proc.stderr
    page = proc.stdout.decode()
    assert "<img" not in page
    assert "x&lt;img src=x onerror=alert(1)&gt;|`y`&amp;.pcap" in page
    # No fetch of anything: no external URL in any attribute, a CSP that forbids them.
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "default-src 'none'" in page


def test_markdown_report_escapes_the_file_name(tmp_path):
    path = _strange_copy(tmp_path)
    proc = run_pcapq("analyze", "--format", "markdown", str(path))
    text = proc.stdout.decode()
    assert "<img" not in text and "x&lt;img src=x onerror=alert(1)>\\|\\`y\\`&amp;.pcap" in text


# ---- analyze in every format ----


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "json"])
def test_analyze_formats_to_file_and_stdout_agree(tmp_path, fmt):
    out = tmp_path / f"report.{fmt}"
    to_file = run_pcapq("analyze", "--format", fmt, "-o", str(out), str(ACCEPT))
    to_stdout = run_pcapq("analyze", "--format", fmt, "--no-color", str(ACCEPT))
    assert to_file.returncode == to_stdout.returncode == ExitCode.PROBLEMS
    assert to_file.stdout == b""
    if fmt != "text":  # the terminal report's width differs between a file and a pipe
        assert out.read_bytes() == to_stdout.stdout


def test_text_report_lists_the_worst_connections():
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # a pipe: 100 columns
    proc = subprocess.run(["pcapq", "analyze", "--no-color", str(ACCEPT)], capture_output=True, env=env, timeout=60)
    text = proc.stdout.decode()
    findings, worst, totals = text.index("Accept queue overflow"), text.index("Worst connections"), text.index("Captures")
    assert findings < worst < totals
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if re.match(r"\s*2\s*│\s*52206\b", line))
    # The row, and the lines its symptoms wrapped onto (an empty id cell).
    row = [lines[at]] + [line for line in lines[at + 1:at + 4] if re.match(r"\s+│", line)]
    symptoms = " ".join(line.split("│")[4].strip() for line in row)
    assert "final ack dropped" in symptoms and "9.246 s" in row[0]


def test_markdown_report_has_findings_worst_connections_and_totals():
    text = run_pcapq("analyze", "--format", "markdown", str(ACCEPT)).stdout.decode()
    assert "### Accept queue overflow on 10.231.1.2:9000" in text
    assert "| 2 | 52206 | 10.231.1.2:9000 | `completed` |" in text
    assert "## Totals" in text and "| connections | 8 |" in text


# ---- exit codes ----


@pytest.mark.parametrize(
    "name, code",
    [("healthy", ExitCode.OK), ("accept_queue_overflow", ExitCode.PROBLEMS), ("closed_port", ExitCode.PROBLEMS)],
)
def test_exit_code_says_whether_problems_were_found(name, code):
    proc = run_pcapq("analyze", "--format", "json", str(CAPTURES / f"{name}.pcap"))
    assert proc.returncode == code, proc.stderr
    assert bool(json.loads(proc.stdout)["findings"]) == (code == ExitCode.PROBLEMS)


def test_damage_takes_precedence_over_problems(tmp_path):
    damaged = tmp_path / "damaged.pcap"
    # A record header claiming more than a record can hold, after every good record.
    damaged.write_bytes(ACCEPT.read_bytes() + struct.pack("<IIII", 0, 0, 0x7FFFFFF0, 0x7FFFFFF0) + b"\0" * 64)
    proc = run_pcapq("analyze", str(damaged))
    assert proc.returncode == ExitCode.DAMAGED, proc.stderr
    assert b"Accept queue overflow" in proc.stdout


def test_timeline_does_not_exit_with_problems():
    assert run_pcapq("timeline", str(ACCEPT)).returncode == ExitCode.OK


# ---- annotations ----


def _timeline(path, client_port: str) -> tl.ConnectionTimeline:
    analysis = pcapq.analyze([str(path)])
    ids, _ = tl.select(analysis, tl.Selection(conn=client_port))
    return tl.connection_timeline(analysis, ids[0])


def test_spurious_synack_names_the_dropped_ack():
    t = _timeline(ACCEPT, "52206")
    notes = {r.frame: r.note for r in t.rows}
    assert notes[47] == "SYN-ACK #2, spurious: the client already ACKed in frame 23, so the server dropped that ACK (accept queue full)"
    assert notes[35].startswith("request re-sent, attempt 2: waited 0.23 s, the RTO schedule predicts 0.25 s")
    assert notes[48] == "duplicate ACK #1 of frame 23: the client answers the re-sent SYN-ACK"
    assert [r.arrow for r in t.rows[:2]] == ["→", "←"]


def test_slots_follow_the_schedule_from_the_first_send():
    t = _timeline(ACCEPT, "52210")
    data = [s for s in t.slots if s.series == "data"]
    assert [s.attempt for s in data] == [2, 3, 4, 5, 6, 7]
    conn = json.loads(pcapq.analyze([str(ACCEPT)]).connection_json(3))
    sends = conn["series"][0]["sends"]
    due = sends[0]["time"] + sum(s["expected"] for s in sends[1:4]) - conn["first_time"]
    assert data[2].offset == pytest.approx(due)


@pytest.mark.parametrize(
    "capture, port, frame_note",
    [
        ("closed_port", None, "RST from the server answers the SYN: connection refused, nothing listens on the port"),
        ("syn_queue_overflow", None, "SYN #2, same ISN: no SYN-ACK came; waited"),
    ],
)
def test_annotations_on_shipped_captures(capture, port, frame_note):
    analysis = pcapq.analyze([str(CAPTURES / f"{capture}.pcap")])
    ids, _ = tl.select(analysis, tl.Selection(failed=True, limit=1000))
    notes = [r.note for i in ids for r in tl.connection_timeline(analysis, i).rows]
    assert any(n.startswith(frame_note) for n in notes), notes[:40]


# ---- the aggregate timeline ----


def test_aggregate_rebuckets_and_carries_the_waiting_level():
    per_second = {
        "seconds": [100, 101, 107],
        "new": {"completed": [2, 0, 1], "timed_out": [1, 0, 0]},
        "retransmissions": [0, 4, 1],
        "waiting_in": [3, 0, 0],
        "waiting_out": [0, 1, 2],
    }
    agg = tl.aggregate(per_second, width=5)
    assert [b.start for b in agg.buckets] == [100, 105]
    assert [b.connections for b in agg.buckets] == [3, 1]
    assert [b.retransmissions for b in agg.buckets] == [4, 1]
    # 3 waiting from second 100, one leaves in 101; the 2 left are still waiting in 105-106.
    assert [b.waiting_peak for b in agg.buckets] == [3, 2]


def test_aggregate_chooses_at_most_the_buckets_asked():
    per_second = {"seconds": [0, 3599], "new": {"completed": [1, 1]}, "retransmissions": [0, 0], "waiting_in": [0, 0], "waiting_out": [0, 0]}
    agg = tl.aggregate(per_second, max_buckets=60)
    assert agg.width == 60 and len(agg.buckets) == 60


# ---- bounded HTML ----


def test_html_bounds_table_and_ladders_and_says_so():
    analysis = pcapq.analyze([str(ACCEPT)])
    report = model.build(analysis, diagnose(analysis), with_table=True, with_ladders=True, table_max=3, ladders_max=2)
    assert len(report.table) == 3 and len(report.ladders) == 2
    page = html.render_analyze(report)
    assert "the table lists the 3 with a problem (the worst 3 of 6; at most 3 rows are embedded)" in page
    assert "Ladders for the 2 worst of 6 connections with a problem" in page
    assert page.count('class="ladder"') == 2
    data = json.loads(re.search(r'id="connections-data">(.*?)</script>', page).group(1))
    assert len(data["rows"]) == 3 and data["ladders"] == [t.id for t in report.ladders]


def test_html_table_note_says_when_the_records_kept_bound_it():
    # Two problem connections kept whole of six: the table is bounded by the records, not its rows.
    analysis = pcapq.analyze([str(ACCEPT)], keep_connections=False, keep_events=False, max_kept_problems=2)
    report = model.build(analysis, diagnose(analysis), with_table=True, table_max=50)
    assert len(report.table) == 2
    assert "the table lists the 2 with a problem (the worst 2 of 6, among those kept whole" in report.table_note
    assert "rows are embedded" not in report.table_note


def test_markdown_timeline_of_one_connection():
    proc = run_pcapq("timeline", "--conn", "10.231.1.1:52206", "--format", "markdown", str(ACCEPT))
    text = proc.stdout.decode()
    assert "### Connection 2: 10.231.1.1:52206 → 10.231.1.2:9000" in text
    assert "| 47 | 1.016954 | ← | `S.` | 0 | 1 | 0 | SYN-ACK #2, spurious" in text


# ---- the timeline command ----


def test_timeline_json_selects_by_cause_and_limit():
    proc = run_pcapq("timeline", "--cause", "accept_queue_overflow", "--limit", "2", "--format", "json", str(ACCEPT))
    doc = json.loads(proc.stdout)
    assert doc["matched"] == 6 and [c["id"] for c in doc["connections"]] == [2, 3]
    assert doc["aggregate"] is None
    assert doc["connections"][0]["rows"][0]["arrow"] == "→"


def test_timeline_aggregate_alone():
    proc = run_pcapq("timeline", "--aggregate", "--format", "json", str(ACCEPT))
    doc = json.loads(proc.stdout)
    assert doc["connections"] == [] and doc["aggregate"]["bucket_seconds"] == 1
    assert sum(sum(b["new"].values()) for b in doc["aggregate"]["buckets"]) == 8
    assert doc["aggregate"]["episodes"][0]["cause"] == "accept_queue_overflow"


@pytest.mark.parametrize(
    "args, ids",
    [
        (["--since", "5"], [2, 3, 4, 5, 6, 7]),  # still going 5 s in: the ones waiting for an answer
        (["--until", "0.07"], [0, 1]),
        (["--until", "06:36:10.437"], [0, 1]),
        (["--until", "2026-11-21T06:36:10.437Z"], [0, 1]),
        (["--outcome", "completed", "--limit", "3"], [0, 1, 2]),
        (["--server", "10.231.1.2:9000", "--conn", "52256"], [7]),
    ],
)
def test_timeline_filters(args, ids):
    proc = run_pcapq("timeline", *args, "--limit", "50", "--format", "json", str(ACCEPT)) if "--limit" not in args else run_pcapq(
        "timeline", *args, "--format", "json", str(ACCEPT)
    )
    assert proc.returncode == 0, proc.stderr
    assert [c["id"] for c in json.loads(proc.stdout)["connections"]] == ids


@pytest.mark.parametrize("args", [["--conn", "70000"], ["--conn", "nohost:1"], ["--server", "10.0.0.1"], ["--since", "yesterday"]])
def test_timeline_bad_selection_is_a_usage_error(args):
    proc = run_pcapq("timeline", *args, str(ACCEPT))
    assert proc.returncode == ExitCode.USAGE
    assert proc.stdout == b"" and b"Traceback" not in proc.stderr


def test_fast_retransmit_is_not_timed_against_the_rto():
    analysis = pcapq.analyze([str(CAPTURES / "packet_loss.pcap")])
    ids, _ = tl.select(analysis, tl.Selection(failed=True, limit=1))
    notes = {r.frame: r.note for r in tl.connection_timeline(analysis, ids[0]).rows}
    assert notes[29] == "data re-sent by the server, attempt 2: a fast retransmit after 7 duplicate ACKs, 0.106 ms after the previous send (no timeout)"
    assert notes[32] == "FIN re-sent by the server, attempt 2: waited 0.20 s"


# ---- the progress bar's total ----


def test_progress_total_from_file_sizes(tmp_path):
    import gzip as gz

    from pcapq.report.progress import _record_bytes

    plain = ACCEPT.read_bytes()
    packed = tmp_path / "a.pcap.gz"
    packed.write_bytes(gz.compress(plain))
    assert _record_bytes(str(ACCEPT)) == len(plain) - 24
    assert _record_bytes(str(packed)) == len(plain) - 24  # from the gzip trailer
    assert _record_bytes("-") is None
    # What the core reports at the end is the same count.
    seen: list[int] = []
    pcapq.analyze([str(packed)], progress=seen.append)
    assert seen[-1] == len(plain) - 24


def test_ladder_draws_a_bounded_number_of_packets():
    from dataclasses import replace

    t = _timeline(ACCEPT, "52206")
    long = replace(t, rows=[replace(t.rows[4], frame=100 + i, offset=0.3 + i * 0.01) for i in range(400)])
    svg = html.ladder_svg(long)
    assert svg.count("marker-end=") == html.LADDER_MAX_ROWS
    assert svg.count("<svg") == 1


def test_aggregate_between_since_and_until():
    proc = run_pcapq("timeline", "--aggregate", "--since", "2", "--until", "4", "--format", "json", str(CAPTURES / "syn_queue_overflow.pcap"))
    buckets = json.loads(proc.stdout)["aggregate"]["buckets"]
    whole = json.loads(run_pcapq("timeline", "--aggregate", "--format", "json", str(CAPTURES / "syn_queue_overflow.pcap")).stdout)
    assert [b["start"] for b in buckets] == [b["start"] for b in whole["aggregate"]["buckets"]][2:5]
    assert buckets == whole["aggregate"]["buckets"][2:5]


def test_html_without_every_record_draws_ladders_from_the_problem_connections(tmp_path):
    """Large inputs: only the connections with a problem are kept, with their events."""
    analysis = pcapq.analyze([str(ACCEPT)], keep_connections=False, keep_events=True)
    assert len(analysis) == 6
    report = model.build(analysis, diagnose(analysis), with_table=True, with_ladders=True)
    assert [r.id for r in report.table] == [2, 3, 7, 4, 5, 6]
    assert report.table_note.startswith("8 connections: the table lists the 6 with a problem.")
    everything = pcapq.analyze([str(ACCEPT)])
    whole = model.build(everything, diagnose(everything), with_table=True, with_ladders=True)
    assert [t.to_json() for t in report.ladders] == [t.to_json() for t in whole.ladders]
    assert report.aggregate == whole.aggregate


@pytest.mark.parametrize("name", ["accept_queue_overflow", "syn_queue_overflow", "packet_loss", "client_timeout_rst"])
def test_timeline_of_problem_connections_same_without_every_record(name):
    """`timeline --failed` keeps only the problem connections; what it shows is what a full
    analysis shows."""
    path = CAPTURES / f"{name}.pcap"
    doc = json.loads(run_pcapq("timeline", "--failed", "--limit", "100", "--format", "json", str(path)).stdout)
    every = pcapq.analyze([str(path)])
    ids, matched = tl.select(every, tl.Selection(failed=True, limit=100))
    assert doc["matched"] == matched
    assert doc["connections"] == [tl.connection_timeline(every, i).to_json() for i in ids]


def test_timeline_outcomes_with_and_without_problems():
    # A failed outcome asked for with `completed`: the healthy connections 0 and 1 match too.
    proc = run_pcapq("timeline", "--outcome", "completed", "--outcome", "refused", "--limit", "100", "--format", "json", str(ACCEPT))
    assert [c["id"] for c in json.loads(proc.stdout)["connections"]] == list(range(8))


def test_r14_finding_rows_are_one_model_in_three_renderers():
    """Issue 14, item 8: text, Markdown and HTML draw the same rows (pcapq.report.finding_rows),
    and the frames to open are in frame order."""
    from pcapq.report.finding_rows import finding_rows

    text = run_pcapq("analyze", "--no-color", str(ACCEPT)).stdout.decode()
    markdown = run_pcapq("analyze", "--format", "markdown", str(ACCEPT)).stdout.decode()
    html = run_pcapq("analyze", "--format", "html", str(ACCEPT)).stdout.decode()
    doc = json.loads(run_pcapq("analyze", "--format", "json", str(ACCEPT)).stdout)
    frames = sorted(e["frame"] for e in doc["findings"][0]["evidence"])  # shown in frame order
    assert "frames " + ", ".join(map(str, frames)) in text
    assert "- **Open in Wireshark:** frames " + ", ".join(map(str, frames)) in markdown
    labels = [r.label for r in finding_rows(_finding(doc), None)]
    for label in labels:
        assert label in text
        assert f"**{label[0].upper() + label[1:]}:**" in markdown
        assert f"<dt>{'evidence' if label == 'open in Wireshark' else label}</dt>" in html


def _finding(doc: dict):
    from pcapq.diagnose import Finding

    f = doc["findings"][0]
    return Finding(f["cause"], f["server"], f["confidence"], f["confidence_reason"], f["first"], f["last"],
                   f["connections"]["ids"], f["evidence"], f["advice"], f["proxy_log"], f["details"],
                   rests_on=f["rests_on"], disproved_by=f["disproved_by"])


def test_r14_chart_ticks_sit_on_bucket_edges_and_retransmissions_have_their_own_colour():
    """Issue 14, item 7: x-axis labels under the bars they start; retransmission bars in no
    outcome's colour (they shared abandoned's orange)."""
    from pcapq.report import html
    from pcapq.report import timeline as tl

    width, left, right = 1100, 70, 20
    buckets = [tl.Bucket(1_700_000_000 + 5 * i, {o: (i % 3) for o in tl.OUTCOMES}, i, i) for i in range(13)]
    svg = html.chart_svg(tl.Aggregate(5, buckets), width=width)
    bw = (width - left - right) / 13
    edges = {round(left + i * bw, 1) for i in range(14)}
    ticks = [float(x) for x in re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="(?:start|middle|end)" font-size="11" fill="#555">\d\d:\d\d', svg)]
    assert ticks and all(round(t, 1) in edges for t in ticks), ticks
    assert html.RETRANSMIT_COLOUR not in html.OUTCOME_COLOURS.values()
    assert f'fill="{html.RETRANSMIT_COLOUR}"' in svg


def test_r14_html_table_separates_symptoms():
    text = run_pcapq("analyze", "--format", "html", str(ACCEPT)).stdout.decode()
    assert "final_ack_dropped, request_unacked" in text or "request_unacked, syncookie_suspected" in text
