"""`pcapq explain`: which connection it picks, what each step says, its formats and refusals.

Most runs go through the CLI in this process (tests/inprocess.py); the console script itself is
run for the output file and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, run_pcapq
from inprocess import run_main
from pcapq.exitcodes import ExitCode
from pcapq.teach.glossary import TERMS

CRAFTED = REPO / "captures" / "crafted"
CATALOG = sorted((REPO / "captures").glob("*.pcap")) + sorted(CRAFTED.glob("*.pcap"))


def explain_json(path: Path, *args: str) -> dict:
    code, out, err = run_main("explain", "--format", "json", *args, str(path))
    assert code == 0, err
    return json.loads(out)


def step_text(doc: dict) -> list[str]:
    return [" ".join(str(s[k]) for k in ("actor", "what", "why", "queue", "kernel", "application")) for s in doc["steps"]]


@pytest.mark.parametrize("capture", CATALOG, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_catalog_capture_is_explained(capture: Path) -> None:
    doc = explain_json(capture)
    analysis = json.loads(run_main("analyze", "--format", "json", str(capture))[1])
    conn = analysis["connections"][doc["connection"]["id"]]
    icmp = {(a["file"], a["frame"]) for a in conn.get("icmp", ())}
    frames = [(e["file"], e["frame"]) for e in conn["events"]]
    if icmp:
        frames = sorted(frames + list(icmp))
    # Every event and every ICMP error answering the connection is told, in order, once.
    assert [(s["file"], f) for s in doc["steps"] for f in s["frames"]] == frames
    for step in doc["steps"]:
        assert step["what"] and step["why"]
        assert step["actor"].endswith("kernel") or {(step["file"], f) for f in step["frames"]} <= icmp
    # Each term is defined once, the first time it is used.
    defined = [t for s in doc["steps"] for t in s["terms"]]
    assert len(defined) == len(set(defined))
    assert set(defined) <= set(TERMS)
    assert "frame" in doc["steps"][0]["terms"]
    assert doc["ending"][0].startswith("What the applications saw:")
    for fmt in ("text", "markdown", "html", "svg"):
        code, _, err = run_main("explain", "--format", fmt, str(capture))
        assert code == 0 and err == ""


def test_default_is_the_richest_connection_of_the_most_certain_finding() -> None:
    doc = explain_json(CRAFTED / "accept_queue_overflow.pcap")
    assert doc["connection"]["client"] == "10.0.0.1:40002"
    assert doc["finding"]["cause"] == "accept_queue_overflow"
    assert doc["chosen_because"].startswith("the richest connection of the most certain finding")
    text = step_text(doc)
    ack = next(t for t, s in zip(text, doc["steps"]) if s["frames"] == [13])
    assert "tcp_check_req()" in ack and "TcpExtListenOverflows" in ack and "connect() returns 0" in ack
    synack_again = next(s for s in doc["steps"] if s["frames"] == [18])
    assert "dropped that ACK" in synack_again["why"] and "net.ipv4.tcp_synack_retries" in synack_again["kernel"]
    # Told once; the second time refers back.
    again = next(s for s in doc["steps"] if s["frames"] == [33])
    assert again["why"] == "Again, for the same reason as in step 6. The kernel's schedule expected a wait of 2.000 s."


def test_a_real_client_rather_than_a_spoofed_half_open_request() -> None:
    doc = explain_json(CRAFTED / "syn_queue_overflow.pcap")
    assert doc["connection"]["client"] == "10.0.0.1:40000"
    syn_again = doc["steps"][1]
    assert syn_again["frames"] == [11, 12, 13] or len(syn_again["frames"]) == 3
    assert "SYN queue was full" in syn_again["why"] and "tcp_syncookies is 0" in syn_again["why"]
    assert "1 s apart" in syn_again["why"]


def test_healthy_capture_explains_the_first_completed_connection() -> None:
    doc = explain_json(CRAFTED / "healthy.pcap")
    assert doc["connection"]["id"] == 0 and doc["finding"] is None
    assert doc["chosen_because"].startswith("nothing went wrong")
    assert "accept queue: one more connection waiting for accept()." in [s["queue"] for s in doc["steps"]]


@pytest.mark.parametrize(
    "capture, words",
    [
        ("crafted/closed_port", ["ECONNREFUSED", "tcp_v4_send_reset()"]),
        ("crafted/abort_on_overflow", ["net.ipv4.tcp_abort_on_overflow=1", "ECONNRESET"]),
        ("crafted/client_timeout_rst", ["SO_LINGER 0", "504"]),
        ("crafted/time_wait_reuse", ["TIME-WAIT", "tcp_timewait_state_process()", "TCP_TIMEOUT_MIN"]),
        ("crafted/legacy_initial_rto", ["3 s, then doubling", "before 3.1"]),
        ("crafted/packet_loss", ["tcp_fastretrans_alert()"]),
        ("crafted/nginx_php_fpm", ["fastcgi_read_timeout", "TcpExtListenOverflows"]),
        # A server closing first, told as nginx sees it.
        ("keepalive_race", ["the server had closed (its FIN, frame 8) when the request went out"]),
        ("nginx_php_fpm_max_requests", ["before any answer to it", "sends an idempotent request again"]),
    ],
)
def test_the_story_names_the_mechanism(capture: str, words: list[str]) -> None:
    doc = explain_json(REPO / "captures" / f"{capture}.pcap")
    everything = " ".join(step_text(doc) + doc["ending"])
    for word in words:
        assert word in everything, word


def test_conn_by_port_and_by_address() -> None:
    by_port = explain_json(CRAFTED / "accept_queue_overflow.pcap", "--conn", "40003")
    by_addr = explain_json(CRAFTED / "accept_queue_overflow.pcap", "--conn", "10.0.0.1:40003")
    assert by_port["connection"]["id"] == by_addr["connection"]["id"] == 3
    assert by_port["chosen_because"] == "--conn 40003 (the client endpoint)"
    reused = explain_json(CRAFTED / "time_wait_reuse.pcap", "--conn", "40000")
    assert reused["connection"]["id"] == 0 and reused["other_matches"] == [1] and reused["matches"] == 2
    server = explain_json(CRAFTED / "healthy.pcap", "--conn", "9000")
    assert server["chosen_because"] == "--conn 9000 (the server endpoint)"
    assert (server["connection"]["id"], server["other_matches"], server["matches"]) == (0, [1, 2], 3)


@pytest.mark.parametrize("conn, message", [
    ("9999", "pcapq: no connection from or to 9999 in the capture\n"),
    ("ten", "pcapq: --conn takes PORT or IP:PORT, not 'ten'\n"),
    ("10.0.0.9:40000", "pcapq: no connection from or to 10.0.0.9:40000 in the capture\n"),
])
def test_conn_that_matches_nothing_is_a_usage_error(conn: str, message: str) -> None:
    proc = run_pcapq("explain", "--conn", conn, str(CRAFTED / "healthy.pcap"))
    assert proc.returncode == ExitCode.USAGE
    assert proc.stderr.decode() == message
    assert proc.stdout == b""


def test_markdown_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "story.md"
    proc = run_pcapq("explain", "--format", "markdown", "-o", str(out), str(CRAFTED / "abort_on_overflow.pcap"))
    assert proc.returncode == 0 and proc.stdout == b""
    text = out.read_text()
    assert text.startswith("# Connection 2: 10.0.0.1:40002 to 10.0.0.2:9000\n")
    assert "## Step by step" in text and "- **RST**: reset" in text


def test_refuses_to_write_over_its_input(tmp_path: Path) -> None:
    capture = tmp_path / "x.pcap"
    capture.write_bytes((CRAFTED / "healthy.pcap").read_bytes())
    proc = run_pcapq("explain", "-o", str(capture), str(capture))
    assert proc.returncode == ExitCode.USAGE
    assert capture.read_bytes() == (CRAFTED / "healthy.pcap").read_bytes()


def test_unreadable_and_empty_inputs(tmp_path: Path) -> None:
    missing = run_pcapq("explain", str(tmp_path / "nope.pcap"))
    assert missing.returncode == ExitCode.UNREADABLE and missing.stderr.decode().startswith("pcapq: ")
    assert b"Traceback" not in missing.stderr


def test_svg_is_the_connection_ladder_and_html_holds_it_with_the_steps() -> None:
    import xml.etree.ElementTree as ET

    capture = CRAFTED / "abort_on_overflow.pcap"
    svg = run_pcapq("explain", "--format", "svg", str(capture)).stdout.decode()
    root = ET.fromstring(svg.split("\n", 1)[1])
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("aria-label") == "ladder diagram of connection 2"
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    # One row per packet of the story: frame numbers 7, 9, 13, 14, 15, 16.
    assert [t.split(" · ")[1] for t in texts if " · " in t and t.split(" · ")[1].isdigit()] == ["7", "9", "13", "14", "15", "16"]
    page = run_pcapq("explain", "--format", "html", str(capture)).stdout.decode()
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in page
    assert page.count("<li><p><strong>") == len(explain_json(capture)["steps"])
    assert "<dfn>RST</dfn>" in page
