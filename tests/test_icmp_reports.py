"""Issue 18: an ICMP error is a step of the story at its place in the exchange (`pcapq explain`),
a row of the text timeline and of the HTML ladders: who sent it, what it quotes, what the kernel
of the side it answers does with it (Linux v6.6 tcp_v4_err() / tcp_v6_err(), icmp_err_convert[],
tcp_req_err(), tcp_v4_mtu_reduced()). Real captures from `pcapq lab` and crafted ones."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import REPO, run_pcapq

CAPTURES = REPO / "captures"
CRAFTED = CAPTURES / "crafted"
SVG = "{http://www.w3.org/2000/svg}"


def explain(path: Path) -> dict:
    proc = run_pcapq("explain", "--format", "json", str(path))
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


def icmp_steps(doc: dict) -> list[dict]:
    return [s for s in doc["steps"] if not s["actor"].endswith("kernel")]


def test_router_answering_the_syn_is_the_step_after_it_and_ends_connect() -> None:
    doc = explain(CAPTURES / "icmp_host_unreachable.pcap")
    assert [s["frames"] for s in doc["steps"]] == [[1], [2]]
    (step,) = icmp_steps(doc)
    assert step["actor"] == "router or firewall 10.231.1.2"
    assert step["what"] == "answers the client's SYN (frame 1) with ICMP host unreachable."
    assert "SYN-SENT" in step["why"] and "errno 113 (No route to host)" in step["why"]
    assert step["kernel"] == "tcp_v4_err() -> tcp_done(); icmp_err_convert[]"
    assert 'connect() failed (113: No route to host)' in step["application"] and "502" in step["application"]
    assert "ICMP" in step["terms"]


def test_ipv6_router_names_tcp_v6_err_and_its_errno() -> None:
    (step,) = icmp_steps(explain(CRAFTED / "icmpv6_no_route.pcap"))
    assert step["actor"] == "router or firewall 2001:db8::fe"
    assert "tcp_v6_err()" in step["why"] and "errno 101 (Network is unreachable)" in step["why"]
    assert "icmpv6_err_convert()" in step["kernel"]


def test_pmtu_discovery_frag_needed_then_smaller_resends_no_timer() -> None:
    doc = explain(CAPTURES / "pmtu_discovery.pcap")
    steps = doc["steps"]
    first_icmp = next(i for i, s in enumerate(steps) if not s["actor"].endswith("kernel"))
    # After the first full-size segment (frame 4), the router's ten errors (frames 5, 7, ... 23).
    assert steps[first_icmp - 1]["frames"] == [4]
    step = steps[first_icmp]
    assert step["frames"] == list(range(5, 24, 2)) and step["actor"] == "router or firewall 10.231.1.254"
    assert step["what"].startswith("answers 10 of the client's segments (seq 1 to 13,033) with ICMP fragmentation needed")
    assert "1,500 bytes with DF set; the next hop takes 1,200" in step["why"]
    assert "TCP_MTU_REDUCED_DEFERRED" in step["why"] and "not a failure" in step["why"]
    assert step["kernel"].startswith("tcp_v4_err() -> tcp_v4_mtu_reduced()")
    assert {"ICMP", "MTU", "DF"} <= set(step["terms"])
    resend = steps[first_icmp + 1]
    assert resend["frames"][0] == 24 and "gave an MTU of 1,200" in resend["why"]
    assert resend["kernel"].endswith("tcp_simple_retransmit()")
    # None of its re-sends is told as a timer's.
    assert not any("tcp_retransmit_timer()" in (s["kernel"] or "") for s in steps)
    assert doc["ending"][0].startswith("What the applications saw: connect() returned, the request was answered")


def test_frag_needed_that_never_reached_the_sender_is_told_as_a_black_hole() -> None:
    doc = explain(CRAFTED / "mtu_black_hole_icmp_ignored.pcap")
    assert doc["finding"]["cause"] == "mtu_black_hole"
    steps = icmp_steps(doc)
    assert steps and steps[0]["what"] == ("answers the server's data segment at seq 301 (frame 8) with ICMP "
                                          "fragmentation needed and DF set.")
    assert "never got the error" in steps[0]["why"] and "1,400" in steps[0]["why"]
    # Each error follows the re-send it answers.
    frames = [s["frames"][0] for s in doc["steps"]]
    assert frames == sorted(frames)


def test_windows_syn_after_icmp_is_not_a_listener_drop() -> None:
    doc = explain(CRAFTED / "windows_syn_after_icmp.pcap")
    again = next(s for s in doc["steps"] if "SYN again" in s["what"])
    assert "not dropped by a listener" in again["why"] and "Windows" in again["why"]


def test_text_timeline_has_the_icmp_row_between_the_segment_and_the_next() -> None:
    out = run_pcapq("timeline", "--conn", "#0", str(CAPTURES / "pmtu_discovery.pcap")).stdout.decode()
    rows = {int(m[1]): line for line in out.splitlines() if (m := re.match(r"\s*(\d+)\s+\d+\.\d{6}\s", line))}
    assert list(rows)[:6] == [1, 2, 3, 4, 5, 7]
    assert rows[5].split()[3] == "ICMP" and rows[4].split()[3] == "."
    assert "fragmentation needed" in rows[5] and "10.231.1.254" in out
    assert "next-hop MTU 1,200, the packet was 1,500 bytes" in " ".join(out.split())



def test_ladder_notes_resends_after_frag_needed_as_at_once_never_an_empty_timing() -> None:
    from pcapq import analyze
    from pcapq.report.timeline import connection_timeline

    analysis = analyze([str(CAPTURES / "pmtu_discovery.pcap")])
    (conn,) = analysis.connections()
    notes = {r.frame: r.note for r in connection_timeline(analysis, 0).rows if r.kind == "data_retransmit"}
    assert notes and not [n for n in notes.values() if n.rstrip().endswith(":")]
    triggered = {t["frame"] for s in conn["series"] for t in s["sends"] if t["triggered"]}
    assert triggered and all(("at once and smaller, after the too-big ICMP error" in n) == (f in triggered)
                             for f, n in notes.items())

def test_html_ladders_show_the_icmp_answer_at_its_place() -> None:
    svg = run_pcapq("explain", "--format", "svg", str(CAPTURES / "icmp_host_unreachable.pcap")).stdout.decode()
    root = ET.fromstring(svg.split("\n", 1)[1])
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    labels = [t for t in texts if t.startswith(("S ", "ICMP "))]
    assert labels[0].startswith("S seq=0") and labels[1].startswith("ICMP seq=0")
    assert any("ICMP host unreachable from 10.231.1.2" in t for t in texts)
    page = run_pcapq("analyze", "--format", "html", str(CRAFTED / "mtu_black_hole_icmp_ignored.pcap")).stdout.decode()
    assert "ICMP fragmentation needed and DF set from 10.0.0.254" in page


def test_pmtu_discovery_is_a_note_in_every_report_and_no_failure() -> None:
    capture = str(CAPTURES / "pmtu_discovery.pcap")
    for fmt in ("text", "markdown", "html"):
        proc = run_pcapq("analyze", "--format", fmt, capture)
        # Exit 0: no finding (docs/exit-codes.md).
        assert proc.returncode == 0, proc.stderr
        out = " ".join(proc.stdout.decode().split())
        assert "path MTU discovery worked on 1 connection: a router announced an MTU of 1,200" in out
        assert "No failures found" in out
