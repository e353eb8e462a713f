"""Timeline notes never contradict the verdict (issue 14, item 5). The notes are the core's
labels (src/output/labels.rs, whose unit tests build the rarer shapes)."""

from __future__ import annotations

import json

import pytest

import pcapq
from conftest import REPO, run_pcapq
from pcapq.report.timeline import ConnectionTimeline, connection_timeline

CAPTURES = REPO / "captures"


def _timeline(capture: str, index: int) -> ConnectionTimeline:
    return connection_timeline(pcapq.analyze([str(CAPTURES / capture)]), index)


def test_labels_are_one_per_event_then_one_per_icmp_error() -> None:
    analysis = pcapq.analyze([str(CAPTURES / "pmtu_discovery.pcap")])
    conn = json.loads(analysis.connection_json(0))
    packets = [(p["file"], p["frame"]) for p in [*conn["events"], *conn["icmp"]]]
    assert conn["icmp"] and [(file, frame) for file, frame, _ in analysis.connection_labels(0)] == packets
    with pytest.raises(IndexError):
        analysis.connection_labels(len(analysis))


def test_r14_syn_cookie_connection_holds_no_half_open_request() -> None:
    t = _timeline("accept_queue_overflow.pcap", 3)
    assert t.id == 3 and "syncookie_suspected" in t.symptoms
    notes = " | ".join(r.note for r in t.rows)
    assert "holds a half-open request" not in notes and "sent into a half-open connection" not in notes
    assert "probably with a SYN cookie" in notes
    assert "has no connection for it" in notes


def test_r14_kernel_rst_on_a_connection_that_went_on_is_not_a_give_up() -> None:
    """The client's kernel refused the late answer of a request its application had given up:
    the RST is no give-up of its own."""
    t = _timeline("nginx_php_fpm_slow.pcap", 0)
    note = next(r.note for r in t.rows if r.note.startswith("RST from the client"))
    assert "gave up" not in note
    assert "the client's kernel refused a segment it did not expect; the connection went on (abandoned)" in note


def test_r14_text_report_explains_the_symptoms_it_shows() -> None:
    text = run_pcapq("analyze", "--no-color", str(REPO / "captures" / "accept_queue_overflow.pcap")).stdout.decode()
    legend = text[text.index("Worst connections"):text.index("Captures")]
    assert "syncookie suspected   the request went unacknowledged" in legend
    assert "final ack dropped     the server re-sent its SYN-ACK" in legend
