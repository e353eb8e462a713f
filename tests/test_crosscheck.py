"""`pcapq crosscheck`: pcapq's labels against tshark's, over every shipped capture, fresh
kernel captures and crafted ones; the exit codes; the JSON shape.

The comparisons go through the CLI in this process (tests/inprocess.py), with tshark's reading
of each capture made once per test process and shared by the reports of every format; the
console script itself is run for the output file, the refusals and --help.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, run_pcapq
from craft import Conversation, write_pcap
from inprocess import run_main
from lab_runs import KERNEL_SCENARIOS

from pcapq.crosscheck import tshark
from pcapq.exitcodes import ExitCode

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")

CATALOG = sorted((REPO / "captures").glob("*.pcap"))


# tshark's reading of a capture, by (path, packets, method): the slow half of a crosscheck,
# and the same for every report format and every test of the same capture.
_TSHARK_READS: dict[tuple[str, int, str], tshark.TsharkResult] = {}
_read_tshark = tshark.read_tshark


def _read_once(path: str, packets: int, method: str = "auto") -> tshark.TsharkResult:
    key = (str(path), packets, method)
    if key not in _TSHARK_READS:
        _TSHARK_READS[key] = _read_tshark(path, packets, method)
    # A copy: a test may doctor the frames it gets.
    return replace(_TSHARK_READS[key], frames=dict(_TSHARK_READS[key].frames))


@pytest.fixture(autouse=True)
def tshark_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tshark, "read_tshark", _read_once)


def crosscheck_json(path: Path, *args: str) -> dict:
    code, out, err = run_main("crosscheck", "--format", "json", *args, str(path))
    doc = json.loads(out)
    unexplained = [d for d in doc["disagreements"] if d["verdict"] == "unexplained"]
    assert code == (ExitCode.DISAGREE if unexplained else ExitCode.OK), err
    return doc


def assert_all_explained(path: Path, *args: str) -> dict:
    doc = crosscheck_json(path, *args)
    unexplained = [d for d in doc["disagreements"] if d["verdict"] == "unexplained"]
    assert not unexplained, json.dumps(unexplained, indent=1)
    return doc


# The kernel runs: several RSTs per connection (a closed socket answers each late segment),
# SYN-ACKs crossing ACKs, reordering, path MTU discovery. They are read with `tshark -T fields`,
# five times faster than pyshark on runs of a few thousand packets; both readers give the same
# result (test_both_tshark_readers_give_the_same_result), and the catalog goes through pyshark.
KERNEL_RUNS = sorted((REPO / "captures" / "kernel_runs").glob("*.pcap"))


@pytest.mark.parametrize("path", KERNEL_RUNS, ids=[p.stem for p in KERNEL_RUNS])
def test_kernel_runs_have_no_unexplained_disagreement(path):
    assert_all_explained(path, "--method", "fields")


@pytest.mark.parametrize("path", CATALOG, ids=[p.stem for p in CATALOG])
def test_catalog_captures_have_no_unexplained_disagreement(path):
    doc = assert_all_explained(path)
    assert doc["tshark"]["method"] == "pyshark"
    code, out, err = run_main("crosscheck", str(path))
    assert code == 0, err
    assert "0 unexplained" in out


def test_both_tshark_readers_give_the_same_result():
    path = REPO / "captures/packet_loss.pcap"
    via_pyshark = assert_all_explained(path, "--method", "pyshark")
    direct = assert_all_explained(path, "--method", "fields")
    assert direct["tshark"]["method"] == "tshark -T fields"
    assert via_pyshark["table"] == direct["table"]
    assert via_pyshark["disagreements"] == direct["disagreements"]
    assert "directly" in direct["tshark"]["note"]


def test_known_differences_are_explained():
    doc = assert_all_explained(REPO / "captures/accept_queue_overflow.pcap")
    rows = {t["label"]: t for t in doc["table"]}
    assert rows["synack_after_ack"]["explained"] == 3
    assert rows["request_resent"]["agree"] > 0 and rows["dup_ack"]["agree"] == 3
    reasons = {d["reason"] for d in doc["disagreements"]}
    assert any("never labels a SYN-ACK spurious" in r for r in reasons)
    loss = assert_all_explained(REPO / "captures/packet_loss.pcap")
    assert any("out of order" in d["reason"] for d in loss["disagreements"])


def test_json_shape():
    doc = assert_all_explained(REPO / "captures/accept_queue_overflow.pcap")
    assert doc["schema"] == "pcapq.crosscheck" and doc["schema_version"] == 1
    assert {"file", "packets", "tshark", "frames_compared", "table", "disagreements", "unexplained"} <= doc.keys()
    assert doc["tshark"]["version"].startswith("tshark ")
    for t in doc["table"]:
        assert set(t) == {"label", "pcapq", "tshark", "agree", "explained", "unexplained"}
    for d in doc["disagreements"]:
        assert set(d) == {"frame", "check", "label", "tshark", "pcapq", "verdict", "reason"}
        assert d["verdict"] in ("explained", "unexplained") and d["reason"]
    assert doc["unexplained"] == 0


def test_output_file(tmp_path):
    out = tmp_path / "x.json"
    proc = run_pcapq("crosscheck", "--format", "json", "-o", str(out), str(REPO / "captures/closed_port.pcap"))
    assert proc.returncode == 0 and proc.stdout == b""
    assert json.loads(out.read_text())["table"][0]["label"] == "rst"


# ---------------------------------------------------------------------------------------------
# Crafted captures with documented differences


def test_crafted_differences(tmp_path):
    packets: list = []
    # Zero window stall: tshark flags every zero-window segment, pcapq the first.
    a = Conversation(client=("10.0.0.1", 40000), packets=packets)
    a.handshake()
    a.send("client", 0.01, 1000)
    a.segment("server", 0.02, "A", window=0)
    a.segment("server", 0.03, "A", window=0)
    a.segment("server", 1.0, "A")
    # Data ending at sequence number 0, re-sent: tshark does not flag it.
    b = Conversation(client=("10.0.0.1", 40001), client_isn=2**32 - 101, packets=packets)
    b.handshake(0.5)
    b.send("client", 0.51, 100)
    b.resend("client", 0.81)
    path = write_pcap(tmp_path / "x.pcap", sorted(packets, key=lambda p: p.time))
    doc = assert_all_explained(path)
    reasons = " ".join(d["reason"] for d in doc["disagreements"])
    assert "every segment with window 0" in reasons
    assert "sequence number 0" in reasons


# ---------------------------------------------------------------------------------------------
# An unexplained disagreement, and missing tshark


def test_unexplained_disagreement_fails(monkeypatch):
    """A tshark result with a flag pcapq has no reason for: listed as such, exit code 6."""
    from pcapq.cli import cli

    real = tshark.read_tshark

    def doctored(path, packets, method="auto"):
        result = real(path, packets, method)
        first = min(result.frames)
        f = result.frames[first]
        result.frames[first] = replace(f, analysis=f.analysis | {"duplicate_ack"}, dup_num=1, dup_frame=first)
        return result

    monkeypatch.setattr(tshark, "read_tshark", doctored)
    path = str(REPO / "captures/healthy.pcap")
    res = CliRunner().invoke(cli, ["crosscheck", "--format", "json", path])
    assert res.exit_code == ExitCode.DISAGREE, res.output
    doc = json.loads(res.output)
    assert doc["unexplained"] == 1
    (d,) = doc["disagreements"]
    assert (d["frame"], d["verdict"], d["tshark"], d["pcapq"]) == (1, "unexplained", "Dup ACK #1 of frame 1", "syn")
    text = CliRunner().invoke(cli, ["crosscheck", "--no-color", path])
    assert text.exit_code == ExitCode.DISAGREE
    assert "UNEXPLAINED" in text.output and "1 unexplained" in text.output


def test_missing_tshark(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "pcapq.cli", "crosscheck", str(REPO / "captures/healthy.pcap")],
        env=env,
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == ExitCode.TSHARK_MISSING == 69
    assert proc.stdout == b""
    assert proc.stderr.decode() == (
        "pcapq: tshark is not installed; install it with: apt-get install tshark (Debian/Ubuntu)\n"
    )


def test_unreadable_capture(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_text("hello\n")
    proc = run_pcapq("crosscheck", str(bad))
    assert proc.returncode == ExitCode.UNREADABLE
    assert proc.stderr.decode().startswith("pcapq: ")


def test_help_lists_exit_codes():
    out = run_pcapq("crosscheck", "--help").stdout.decode()
    assert "$ pcapq crosscheck dump.pcap" in out
    for code in (0, 2, 3, 5, 6, 69, 70, 74):
        assert f"{code} " in out, code


# ---------------------------------------------------------------------------------------------
# Fresh captures from the kernel (pcapq.lab.scenarios)


@pytest.mark.kernel
@pytest.mark.parametrize("scenario", list(KERNEL_SCENARIOS))
def test_kernel_captures_have_no_unexplained_disagreement(kernel_run, scenario):
    # The runs tests/test_kernel.py checks, made once (tests/lab_runs.py).
    assert_all_explained(kernel_run(scenario).pcap, "--method", "fields")


def test_markdown_and_html_reports(tmp_path):
    capture = REPO / "captures/accept_queue_overflow.pcap"
    doc = crosscheck_json(capture)
    code, text, err = run_main("crosscheck", "--format", "markdown", str(capture))
    assert code == 0, err
    assert "## Agreement per label" in text and "## Disagreements" in text
    # One table row per label and per disagreement, as in the JSON.
    assert sum(line.startswith("| ") for line in text.splitlines()) == 2 + len(doc["table"]) + len(doc["disagreements"])
    assert "never labels a SYN-ACK spurious" in text
    out = tmp_path / "x.html"
    html = run_pcapq("crosscheck", "--format", "html", "-o", str(out), str(capture))
    assert html.returncode == 0 and html.stdout == b""
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page and "default-src 'none'" in page
    assert page.count("<tr") == 2 + len(doc["table"]) + len(doc["disagreements"])
    assert f"{doc['table'][0]['pcapq']}</td>" in page


def test_reports_escape_the_file_name(tmp_path):
    hostile = tmp_path / "a<b>|`c`.pcap"
    hostile.write_bytes((REPO / "captures/closed_port.pcap").read_bytes())
    md = run_main("crosscheck", "--format", "markdown", str(hostile))[1]
    assert "<b>" not in md and "|`c`" not in md
    html = run_main("crosscheck", "--format", "html", str(hostile))[1]
    assert "a<b>" not in html and "a&lt;b&gt;" in html
