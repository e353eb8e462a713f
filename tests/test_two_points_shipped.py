"""pcapq analyze and explain of the shipped two-point captures (captures/two_points/README.md),
set against each run's truth (the router's nftables counters, the server's kernel counters),
and the way two points are told apart from one."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, run_pcapq

RUNS = REPO / "captures" / "two_points"
LISTENER = {"accept_queue_overflow", "syn_queue_overflow", "listen_drops"}


def analyze(*args: str | Path) -> dict:
    proc = run_pcapq("analyze", "--format", "json", *map(str, args))
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return json.loads(proc.stdout)


def run(name: str) -> tuple[dict, dict]:
    folder = RUNS / name
    return analyze(folder / "proxy.pcap", folder / "server.pcap"), json.loads((folder / "truth.json").read_text())


def findings(doc: dict, point: str) -> dict[str, dict]:
    """The point's findings, material or minor, by cause."""
    report = next(p["report"] for p in doc["capture_points"] if p["name"] == point)
    return {f["cause"]: f for f in report["findings"] + report["minor_observations"]}


def vanished(path: dict) -> list[dict]:
    return [v for c in path["connections"] for v in c["vanished"]]


@pytest.mark.parametrize("name", ["path_loss", "synack_loss", "nat", "firewall", "accept_overflow", "pmtu_black_hole"])
def test_shipped_two_points_vanished_are_what_the_router_dropped(name):
    doc, truth = run(name)
    (path,) = doc["paths"]
    assert path["points"] == ["proxy.pcap", "server.pcap"]
    assert path["client_side"] == "proxy.pcap"
    listed = vanished(path)
    ways = {"client_to_server": ("proxy.pcap", "server.pcap"), "server_to_client": ("server.pcap", "proxy.pcap")}
    assert all((v["seen_at"], v["missing_at"]) == ways[v["direction"]] for v in listed)
    # The router is between the points: every one of them vanished there.
    assert all(v["vanished"] == "between_points" for v in listed)
    assert path["vanished_packets"] == {"client_to_server": truth["dropped_to_server"], "server_to_client": truth["dropped_to_client"]}
    assert len(listed) == truth["dropped_to_server"] + truth["dropped_to_client"]
    # One clock on both points (one kernel): the offset is nil within its uncertainty.
    assert abs(path["clock_offset"]) <= max(path["offset_uncertainty"], 50e-6)
    # The ids are those of each point's connections[], and the frames listed are the point's own:
    # the connection with that id there began at or before them.
    reports = {p["name"]: p["report"] for p in doc["capture_points"]}
    for c in path["connections"]:
        for point, cid in c["ids"].items():
            if cid is not None:
                record = reports[point]["connections"][cid]
                assert (record["id"], record["client"], record["server"]) == (cid, c["client"][point], c["server"][point])
        for v in c["vanished"]:
            cid = c["ids"][v["seen_at"]]
            assert cid is not None
            assert reports[v["seen_at"]]["connections"][cid]["first_frame"] <= v["frame"]


def test_shipped_two_points_path_loss_is_never_the_listener():
    doc, _ = run("path_loss")
    for point in ("proxy.pcap", "server.pcap"):
        assert not set(findings(doc, point)) & LISTENER
    loss = findings(doc, "proxy.pcap")["network_loss"]
    check = next(c for c in loss["checks"] if c["check"] == "vanished_between_points")
    assert check["held"] > 0 and check["failed"] == 0
    # A connection whose packets all crossed is no loss of the path.
    (path,) = doc["paths"]
    lost_ids = {c["ids"]["proxy.pcap"] for c in path["connections"]}
    assert set(loss["connections"]["ids"]) <= lost_ids


def test_shipped_two_points_nat_translated():
    doc, _ = run("nat")
    (path,) = doc["paths"]
    assert path["translated"]
    both = [c for c in path["connections"] if None not in c["client"].values()]
    assert both and all(c["client"]["proxy.pcap"] != c["client"]["server.pcap"] for c in both)


def test_shipped_two_points_firewall_syns_never_reached_the_server():
    doc, truth = run("firewall")
    (path,) = doc["paths"]
    assert {v["flags"] for v in vanished(path)} == {"S"}
    assert all(c["ids"]["server.pcap"] is None and c["server"]["server.pcap"] is None for c in path["connections"])
    assert not set(findings(doc, "proxy.pcap")) & LISTENER
    loss = findings(doc, "proxy.pcap")["network_loss"]
    assert "swallowed every try" in loss["confidence_reason"]
    assert set(loss["connections"]["ids"]) == {c["ids"]["proxy.pcap"] for c in path["connections"]}


def test_shipped_two_points_accept_overflow_is_the_servers_kernel():
    doc, truth = run("accept_overflow")
    assert truth["nstat"].get("TcpExtListenOverflows", 0) > 0
    (path,) = doc["paths"]
    assert vanished(path) == []
    overflow = findings(doc, "server.pcap")["accept_queue_overflow"]
    check = next(c for c in overflow["checks"] if c["check"] == "reached_server_point")
    assert check["held"] > 0 and check["failed"] == 0
    for point in ("proxy.pcap", "server.pcap"):
        assert "network_loss" not in findings(doc, point)


LOST = {"lost_to_server", "lost_to_client", "lost_both_ways"}


@pytest.mark.parametrize("name", ["path_loss", "synack_loss", "nat", "firewall", "accept_overflow", "pmtu_black_hole"])
def test_shipped_two_points_verdicts_blame_what_the_truth_dropped(name):
    """Each finding's `between_points` verdict: the path where the router dropped packets (the
    direction it dropped them), the server's side where it dropped none; a listener's finding
    is never the path's, a loss never the server's."""
    doc, truth = run(name)
    verdicts = {(point, cause): f["between_points"] for point in ("proxy.pcap", "server.pcap")
                for cause, f in findings(doc, point).items() if "between_points" in f}
    assert verdicts
    for (point, cause), v in verdicts.items():
        # Every connection is counted once among reached, missed and lost (either way or both).
        lost = v["connections"] - v["reached_server"] - v["missed_first_point"]
        assert 0 <= max(v["lost_to_server"], v["lost_to_client"]) <= lost <= v["lost_to_server"] + v["lost_to_client"]
        if cause in LISTENER:
            assert v["verdict"] == "reached_server", (point, cause, v)
        if cause == "network_loss":
            assert v["verdict"] in LOST, (point, cause, v)
        if not truth["dropped_to_server"]:
            assert v["lost_to_server"] == 0
        if not truth["dropped_to_client"]:
            assert v["lost_to_client"] == 0
    if name == "accept_overflow":
        assert verdicts[("server.pcap", "accept_queue_overflow")]["verdict"] == "reached_server"
    if name == "firewall":
        assert verdicts[("proxy.pcap", "network_loss")]["verdict"] == "lost_to_server"
    text = run_pcapq("analyze", "--no-color", str(RUNS / name / "proxy.pcap"), str(RUNS / name / "server.pcap")).stdout.decode()
    assert "between the points" in text


def test_shipped_two_points_mtu_black_hole_is_the_path_not_the_server():
    doc, truth = run("pmtu_black_hole")
    (path,) = doc["paths"]
    listed = vanished(path)
    # The full-size segments of one request: the router could not forward them.
    assert len(listed) == truth["dropped_to_server"] > 0
    assert {v["direction"] for v in listed} == {"client_to_server"} and {v["len"] for v in listed} == {1448}
    hole = findings(doc, "proxy.pcap")["mtu_black_hole"]
    assert hole["between_points"]["verdict"] == "lost_to_server"
    # The server's point saw none of it: nothing there to blame the server for.
    assert findings(doc, "server.pcap") == {}


def shifted(source: Path, target: Path, seconds: float) -> Path:
    """`editcap -t seconds`: the capture with every timestamp later (classic pcap, µs)."""
    data = source.read_bytes()
    assert struct.unpack_from("<I", data, 0)[0] == 0xA1B2C3D4
    out, at = bytearray(data[:24]), 24
    while at + 16 <= len(data):
        sec, usec, incl, orig = struct.unpack_from("<IIII", data, at)
        total = sec * 1_000_000 + usec + round(seconds * 1_000_000)
        out += struct.pack("<IIII", total // 1_000_000, total % 1_000_000, incl, orig) + data[at + 16 : at + 16 + incl]
        at += 16 + incl
    target.write_bytes(bytes(out))
    return target


def test_shipped_two_points_clock_shift_recovered_within_a_millisecond(tmp_path):
    late = shifted(RUNS / "path_loss" / "server.pcap", tmp_path / "server.pcap", 2.5)
    (path,) = analyze(RUNS / "path_loss" / "proxy.pcap", late)["paths"]
    assert abs(path["clock_offset"] - 2.5) < 0.001
    assert path["offset_uncertainty"] < 0.001
    _, truth = run("path_loss")
    assert path["vanished_packets"]["client_to_server"] == truth["dropped_to_server"]


@pytest.mark.parametrize("seconds, aligned", [(60, True), (-120, True), (250, True), (400, False), (-3600, False)])
def test_shipped_two_points_clocks_apart_within_five_minutes_are_aligned(tmp_path, seconds, aligned):
    """A 3.4 s capture shifted by whole minutes: within 5 minutes of the other by its own clock
    the offset is still found; further apart, the two are two moments, not one seen twice."""
    late = shifted(RUNS / "path_loss" / "server.pcap", tmp_path / "server.pcap", seconds)
    paths = analyze(RUNS / "path_loss" / "proxy.pcap", late).get("paths")
    if not aligned:
        assert paths is None
        return
    (path,) = paths
    assert abs(path["clock_offset"] - seconds) < 0.001


def test_shipped_two_points_text_and_markdown_have_the_section():
    folder = RUNS / "path_loss"
    text = run_pcapq("analyze", "--no-color", str(folder / "proxy.pcap"), str(folder / "server.pcap")).stdout.decode()
    assert "Between the two points: proxy.pcap and server.pcap" in text
    assert "Vanished between the points:" in text
    md = run_pcapq("analyze", "--format", "markdown", str(folder / "proxy.pcap"), str(folder / "server.pcap")).stdout.decode()
    assert md.startswith("# Between the two points")


def test_shipped_two_points_html_report_has_the_section(tmp_path):
    """The HTML page of two aligned points: the point nearer the clients, with the section
    between the two points after its findings, each finding's verdict, and the other point's
    findings in a line."""
    folder = RUNS / "synack_loss"
    page = tmp_path / "two.html"
    proc = run_pcapq("analyze", "--format", "html", "-o", str(page), str(folder / "proxy.pcap"), str(folder / "server.pcap"))
    assert proc.returncode in (0, 1), proc.stderr.decode()
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and f"<h1>pcapq: {folder / 'proxy.pcap'}</h1>" in html
    assert html.index('id="findings"') < html.index('id="between"') < html.index('id="timeline"')
    assert "Vanished between the points: " in html and "At the other point: server.pcap: " in html
    assert "<dt>between the points</dt>" in html
    # Two points that share nothing still want --merge or one point.
    other = run_pcapq("analyze", "--format", "html", "-o", str(tmp_path / "x.html"), str(folder / "proxy.pcap"),
                      str(RUNS / "firewall" / "server.pcap"))
    assert other.returncode == 2 and b"an HTML report shows one capture point" in other.stderr


def test_shipped_two_points_explain_tells_where_it_vanished():
    folder = RUNS / "firewall"
    proc = run_pcapq("explain", "--format", "json", "--conn", str(9001), str(folder / "proxy.pcap"), str(folder / "server.pcap"))
    assert proc.returncode == 0, proc.stderr.decode()
    story = json.loads(proc.stdout)
    whys = " ".join(s["why"] for s in story["steps"])
    assert "never reached server.pcap" in whys


def test_shipped_one_point_has_no_paths():
    doc = analyze(RUNS / "path_loss" / "proxy.pcap")
    assert "paths" not in doc


def test_shipped_two_points_unrelated_are_not_aligned():
    doc = analyze(RUNS / "path_loss" / "proxy.pcap", RUNS / "firewall" / "server.pcap")
    assert "paths" not in doc


def test_shipped_two_points_bad_input_one_line(tmp_path):
    bad = tmp_path / "server.pcap"
    bad.write_text("not a capture\n")
    proc = run_pcapq("analyze", str(RUNS / "path_loss" / "proxy.pcap"), str(bad))
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert err.startswith("pcapq: ") and err.count("\n") == 1 and "Traceback" not in err


def split(source: Path, folder: Path, per_file: int) -> None:
    """The capture cut into files of `per_file` packets, as tcpdump -C leaves a ring: dump.pcap,
    dump.pcap1, ..."""
    folder.mkdir()
    data = source.read_bytes()
    head, at, records = data[:24], 24, []
    while at + 16 <= len(data):
        incl = struct.unpack_from("<I", data, at + 8)[0]
        records.append(data[at : at + 16 + incl])
        at += 16 + incl
    for n, start in enumerate(range(0, len(records), per_file)):
        (folder / ("dump.pcap" + (str(n) if n else ""))).write_bytes(head + b"".join(records[start : start + per_file]))


def test_shipped_two_points_ring_buffers_of_each_point(tmp_path):
    split(RUNS / "path_loss" / "proxy.pcap", tmp_path / "proxy", 120)
    split(RUNS / "path_loss" / "server.pcap", tmp_path / "server", 100)
    doc = analyze(tmp_path / "proxy", tmp_path / "server")
    (path,) = doc["paths"]
    truth = json.loads((RUNS / "path_loss" / "truth.json").read_text())
    assert path["vanished_packets"] == {"client_to_server": truth["dropped_to_server"], "server_to_client": truth["dropped_to_client"]}
    # `file` indexes the files of the point that saw the packet, as its captures[] does.
    files = {p["name"]: p["files"] for p in doc["capture_points"]}
    assert all(len(f) > 1 for f in files.values())
    seen = {(v["seen_at"], v["file"]) for c in path["connections"] for v in c["vanished"]}
    assert all(0 <= file < len(files[point]) for point, file in seen)
    assert len({file for _, file in seen}) > 1


def test_shipped_two_points_timeline_on_four_lines():
    folder = RUNS / "path_loss"
    args = ("timeline", "--failed", str(folder / "proxy.pcap"), str(folder / "server.pcap"))
    doc = json.loads(run_pcapq(*args[:1], "--format", "json", *args[1:]).stdout)
    (path,) = analyze(folder / "proxy.pcap", folder / "server.pcap")["paths"]
    lost = {(v["file"], v["frame"]) for c in path["connections"] for v in c["vanished"] if v["seen_at"] == "proxy.pcap"}
    drawn = 0
    for t in doc["connections"]:
        assert len(t["path"]) == len(t["rows"])
        for row, lanes in zip(t["rows"], t["path"]):
            stopped = "✕" in lanes
            if row["kind"] == "vanished":
                # Only the server's point saw it: its frame is not this capture's.
                assert stopped and row["frame"] == 0
            else:
                assert stopped == ((row["file"], row["frame"]) in lost), row
            drawn += stopped
    assert drawn
    text = run_pcapq(*args[:1], "--no-color", *args[1:]).stdout.decode()
    assert "│──▶│──✕│   │" in text or "│   │✕──│◀──│" in text


def test_shipped_two_points_html_ladder_has_four_lines(tmp_path):
    folder = RUNS / "path_loss"
    out = tmp_path / "ladders.html"
    proc = run_pcapq("timeline", "--failed", "--format", "html", "-o", str(out), str(folder / "proxy.pcap"), str(folder / "server.pcap"))
    assert proc.returncode == 0, proc.stderr.decode()
    page = out.read_text()
    # The two points' lines, named, and a packet stopped between them.
    assert ">proxy.pcap</text>" in page and ">server.pcap</text>" in page
    assert ">✕</text>" in page


def test_shipped_two_points_lost_synacks_are_not_the_listener():
    folder = RUNS / "synack_loss"
    alone = analyze(folder / "proxy.pcap")
    # One point cannot tell: the SYNs whose SYN-ACK the path lost look unanswered there.
    assert {f["cause"] for f in alone["findings"] + alone["minor_observations"]} & LISTENER
    doc, _ = run("synack_loss")
    (path,) = doc["paths"]
    assert any(v["flags"] == "S." and v["seen_at"] == "server.pcap" for v in vanished(path))
    for point in ("proxy.pcap", "server.pcap"):
        assert not set(findings(doc, point)) & LISTENER
    assert "network_loss" in findings(doc, "proxy.pcap")


@pytest.mark.parametrize("command", ["explain", "timeline"])
def test_shipped_two_points_bad_input_one_line_explain_and_timeline(tmp_path, command):
    bad = tmp_path / "server.pcap"
    bad.write_text("not a capture\n")
    proc = run_pcapq(command, str(RUNS / "firewall" / "proxy.pcap"), str(bad))
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert err.startswith("pcapq: ") and err.count("\n") == 1 and "Traceback" not in err


def test_shipped_two_points_relative_and_absolute_paths_named():
    # A relative and an absolute path together used to stop the naming of the points (commonpath).
    proc = subprocess.run(["pcapq", "analyze", "--format", "json", "captures/two_points/firewall/proxy.pcap",
                           str(RUNS / "firewall" / "server.pcap")], cwd=REPO, capture_output=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    doc = json.loads(proc.stdout)
    assert [p["name"] for p in doc["capture_points"]] == ["proxy.pcap", "server.pcap"]
    assert doc["paths"][0]["points"] == ["proxy.pcap", "server.pcap"]
