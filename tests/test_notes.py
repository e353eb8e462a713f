"""Timeline notes never contradict the verdict (issue 14, item 5)."""

from __future__ import annotations

import copy
import json

from conftest import REPO, run_pcapq
from pcapq.report.timeline import annotate

GOLDEN = REPO / "tests" / "golden"


def _notes(conn: dict) -> dict[str, str]:
    t = annotate(conn)
    return {f"{r.kind}@{r.frame}": r.note for r in t.rows}


def test_r14_syn_cookie_connection_holds_no_half_open_request() -> None:
    doc = json.loads((GOLDEN / "accept_queue_overflow.json").read_text())
    (conn,) = [c for c in doc["connections"] if c["id"] == 3]
    assert "syncookie_suspected" in conn["symptoms"]
    notes = " | ".join(_notes(conn).values())
    assert "holds a half-open request" not in notes and "sent into a half-open connection" not in notes
    assert "probably with a SYN cookie" in notes
    assert "has no connection for it" in notes


def test_r14_kernel_rst_on_a_connection_that_went_on_is_not_a_give_up() -> None:
    """A client RST answering a stray SYN-ACK, then the connection completed: the client's
    kernel refused one segment; the application did not give up."""
    doc = json.loads((GOLDEN / "healthy.json").read_text())
    conn = copy.deepcopy(next(c for c in doc["connections"] if c["outcome"] == "completed"))
    synack = next(e for e in conn["events"] if e["kind"] == "synack")
    rst = {**synack, "kind": "rst", "from": "client", "flags": "R", "frame": synack["frame"] + 1000,
           "time": synack["time"] + 0.001, "answers": "synack", "answers_frame": {"file": 0, "frame": synack["frame"]},
           "after": 0.001}
    conn["events"].insert(conn["events"].index(synack) + 1, rst)
    note = next(n for n in _notes(conn).values() if n.startswith("RST from the client"))
    assert "gave up" not in note
    assert "the client's kernel refused a segment it did not expect; the connection went on (completed)" in note


def test_r14_text_report_explains_the_symptoms_it_shows() -> None:
    text = run_pcapq("analyze", "--no-color", str(REPO / "captures" / "accept_queue_overflow.pcap")).stdout.decode()
    legend = text[text.index("Worst connections"):text.index("Captures")]
    assert "syncookie suspected   the request went unacknowledged" in legend
    assert "final ack dropped     the server re-sent its SYN-ACK" in legend
