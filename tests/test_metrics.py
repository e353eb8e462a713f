"""`pcapq watch --metrics HOST:PORT -` (issue 30): the collector on snapshots shaped like the core's
(`LiveInput.metrics()`), the exposition promtool accepts, the alert rules and their tests, the
dashboard's queries, docs/monitoring.md's table, the address and its errors, and a scrape of a
running `pcapq watch` once the core counts."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import REPO
from test_watch import REPLAY

import pcapq._core as core
from pcapq.exitcodes import ExitCode
from pcapq.metrics import (
    BY_NAME, METRICS, SIGN_METRICS, MetricsAddressError, MetricsServer, WatchCollector, markdown_table, parse_address,
)
from pcapq.watch import Watcher

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
BUCKETS = [0.001, 0.01, 0.1, 1.0, 3.0]


def _histogram(counts: list[int], total: float) -> dict:
    return {"counts": counts, "sum": total, "count": sum(counts)}


def _listener(name: str, **overrides) -> dict:
    entry = {
        "listener": name, "connections": 10, "answered": 7,
        "ended": {"completed": 6, "reset_by_client": 2},
        "signs": {s: 0 for s in core.VOCABULARY["live_signs"]},
        "resets": [{"side": "client", "answered": "data", "count": 2}],
        "icmp": {},
        "handshake_seconds": _histogram([1, 5, 2, 1, 0, 0], 1.5),
        "first_byte_seconds": _histogram([0, 0, 3, 4, 0, 0], 2.0),
        "retransmission_delay_seconds": _histogram([0, 0, 0, 2, 1, 0], 4.0),
        "waiting": 0, "episode_open": False, "episode_signs": [],
    }
    entry.update(overrides)
    return entry


def snapshot() -> dict:
    """An overflowing listener, a healthy one and `other`, as the core would give them."""
    overflowing = _listener(
        "10.0.0.2:9000", connections=40, answered=12, waiting=9, episode_open=True,
        episode_signs=["final_ack_dropped", "request_unacked"], icmp={"host_unreachable": 1},
        signs={**{s: 0 for s in core.VOCABULARY["live_signs"]}, "final_ack_dropped": 5, "request_unacked": 11, "syn_retransmitted": 3},
    )
    return {
        "segments": 1200, "latest_time": 1_700_000_000.0, "dropped": 2, "listeners_other": 3, "buckets": BUCKETS,
        "listeners": [overflowing, _listener("[2001:db8::3]:9000"), _listener("other", connections=4, answered=4)],
    }


class FakeLive:
    def __init__(self, snap: dict, packets: int | None = 1300) -> None:
        self.snap = snap
        self.packets = packets

    def metrics(self) -> dict:
        return self.snap


def scrape(snap: dict | None, packets: int | None = 1300, now: float = 1_700_000_004.5) -> str:
    collector = WatchCollector(clock=lambda: now)
    if snap is not None:
        collector.attach(FakeLive(snap, packets))  # type: ignore[arg-type]
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of an exposition."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, tuple(sorted(labels.items())))]


# ---- the table


def test_every_sign_of_the_core_has_a_metric() -> None:
    assert set(SIGN_METRICS) == set(core.VOCABULARY["live_signs"])
    for sign, name in SIGN_METRICS.items():
        assert BY_NAME[name].source == f"listeners[].signs.{sign}"
        assert BY_NAME[name].type == "counter"
    assert SIGN_METRICS["final_ack_dropped"] == "pcapq_synack_after_ack_total"


def test_names_follow_prometheus_conventions() -> None:
    assert len(BY_NAME) == len(METRICS)
    for m in METRICS:
        assert re.fullmatch(r"pcapq_[a-z0-9_]+", m.name), m.name
        assert m.type in ("counter", "gauge", "histogram"), m.name
        assert m.name.endswith("_total") == (m.type == "counter"), m.name
        if m.unit:
            assert m.name.endswith(f"_{m.unit}"), m.name
        assert m.help.endswith((".", "...")) and "\n" not in m.help, m.name
        assert (m.labels[:1] == ("listener",)) == m.per_listener, m.name
    assert BY_NAME["pcapq_resets_total"].labels == ("listener", "side", "answered")
    assert BY_NAME["pcapq_episode_sign"].labels == ("listener", "sign")


# ---- the collector on snapshots


def test_exposition_has_every_metric_with_its_help_type_and_labels() -> None:
    text = scrape(snapshot())
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for m in METRICS:
        # The parser names a counter's family without its _total.
        family = families[m.name[: -len("_total")] if m.type == "counter" else m.name]
        assert family.type == m.type and family.documentation == m.help, m.name
        assert family.samples, m.name
        for s in family.samples:
            assert set(s.labels) - {"le"} == set(m.labels), (m.name, s.labels)
    assert f"# HELP pcapq_synack_after_ack_total {BY_NAME['pcapq_synack_after_ack_total'].help}\n" in text


def test_values_come_from_their_place_in_the_snapshot() -> None:
    text = scrape(snapshot())
    assert value(text, "pcapq_build_info", version=core.__version__) == 1
    assert value(text, "pcapq_packets_read_total") == 1300
    assert value(text, "pcapq_tcp_segments_total") == 1200
    assert value(text, "pcapq_capture_dropped_packets_total") == 2
    assert value(text, "pcapq_last_packet_age_seconds") == 4.5
    assert value(text, "pcapq_listeners_other") == 3
    ip = "10.0.0.2:9000"
    assert value(text, "pcapq_connections_total", listener=ip) == 40
    assert value(text, "pcapq_connections_answered_total", listener=ip) == 12
    assert value(text, "pcapq_synack_after_ack_total", listener=ip) == 5
    assert value(text, "pcapq_requests_resent_unacked_total", listener=ip) == 11
    assert value(text, "pcapq_syn_resent_total", listener=ip) == 3
    assert value(text, "pcapq_synack_after_ack_total", listener="[2001:db8::3]:9000") == 0
    assert value(text, "pcapq_connections_total", listener="other") == 4
    assert value(text, "pcapq_connections_waiting", listener=ip) == 9
    assert value(text, "pcapq_episode_open", listener=ip) == 1
    assert value(text, "pcapq_episode_open", listener="other") == 0
    assert value(text, "pcapq_episode_sign", listener=ip, sign="final_ack_dropped") == 1
    assert not [k for k in samples(text) if k[0] == "pcapq_episode_sign" and ("listener", "other") in k[1]]
    assert value(text, "pcapq_resets_total", listener=ip, side="client", answered="data") == 2
    assert value(text, "pcapq_icmp_errors_total", listener=ip, kind="host_unreachable") == 1
    # Every outcome of the core's vocabulary, 0 included: increase() sees a first failure.
    for outcome in core.VOCABULARY["outcomes"]:
        expected = {"completed": 6, "reset_by_client": 2}.get(outcome, 0)
        assert value(text, "pcapq_connections_ended_total", listener=ip, outcome=outcome) == expected


def test_a_sign_the_snapshot_leaves_out_is_zero() -> None:
    snap = snapshot()
    snap["listeners"][1]["signs"] = {"final_ack_dropped": 1}
    text = scrape(snap)
    listener = "[2001:db8::3]:9000"
    assert value(text, "pcapq_synack_after_ack_total", listener=listener) == 1
    for name in SIGN_METRICS.values():
        assert (name, (("listener", listener),)) in samples(text), name


def test_histograms_are_cumulative_with_inf_equal_to_count() -> None:
    text = scrape(snapshot())
    ip = "10.0.0.2:9000"
    buckets = [value(text, "pcapq_handshake_seconds_bucket", listener=ip, le=le) for le in ("0.001", "0.01", "0.1", "1.0", "3.0", "+Inf")]
    # The core's per-bucket counts [1, 5, 2, 1, 0, 0], summed.
    assert buckets == [1, 6, 8, 9, 9, 9]
    assert value(text, "pcapq_handshake_seconds_count", listener=ip) == 9
    assert value(text, "pcapq_handshake_seconds_sum", listener=ip) == 1.5
    for m in METRICS:
        if m.type != "histogram":
            continue
        for listener in ("10.0.0.2:9000", "[2001:db8::3]:9000", "other"):
            counts = [v for (name, labels), v in samples(text).items() if name == f"{m.name}_bucket" and ("listener", listener) in labels]
            assert counts == sorted(counts) and len(counts) == len(BUCKETS) + 1, (m.name, counts)
            assert counts[-1] == value(text, f"{m.name}_count", listener=listener)


def test_a_histogram_with_the_wrong_number_of_counts_is_an_error() -> None:
    snap = snapshot()
    snap["listeners"][0]["handshake_seconds"] = _histogram([1, 2, 3], 0.1)
    with pytest.raises(ValueError, match="3 counts for 5 bounds"):
        scrape(snap)


def test_counters_only_grow_between_scrapes() -> None:
    first = snapshot()
    later = copy.deepcopy(first)
    entry = later["listeners"][0]
    entry["connections"] += 5
    entry["ended"]["timed_out"] = 1
    entry["signs"]["final_ack_dropped"] += 2
    entry["handshake_seconds"]["counts"][4] += 1
    entry["handshake_seconds"]["sum"] += 2.5
    later["segments"] += 100
    before, after = samples(scrape(first, 1300)), samples(scrape(later, 1400))
    counters = {m.name for m in METRICS if m.type == "counter"} | {
        f"{m.name}_{part}" for m in METRICS if m.type == "histogram" for part in ("bucket", "count", "sum")
    }
    grew = [k for k in before if k[0] in counters and after[k] > before[k]]
    assert all(after[k] >= before[k] for k in before if k[0] in counters)
    assert {k[0] for k in grew} >= {
        "pcapq_connections_total", "pcapq_connections_ended_total", "pcapq_synack_after_ack_total",
        "pcapq_handshake_seconds_bucket", "pcapq_handshake_seconds_count", "pcapq_tcp_segments_total", "pcapq_packets_read_total",
    }


def test_before_the_input_only_build_info_and_nothing_for_what_the_capture_does_not_say() -> None:
    names = {k[0] for k in samples(scrape(None))}
    assert names == {"pcapq_build_info"}
    snap = dict(snapshot(), dropped=None, latest_time=None)
    names = {k[0] for k in samples(scrape(snap, packets=None))}
    assert not names & {"pcapq_capture_dropped_packets_total", "pcapq_last_packet_age_seconds", "pcapq_packets_read_total"}
    assert "pcapq_tcp_segments_total" in names


@needs_promtool
def test_promtool_accepts_the_exposition() -> None:
    for text in (scrape(snapshot()), scrape(None)):
        proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- the server and the watcher


def test_server_serves_the_attached_input_until_stopped() -> None:
    server = MetricsServer("127.0.0.1", 0)
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        before = urllib.request.urlopen(server.url, timeout=5).read().decode()
        assert {k[0] for k in samples(before)} == {"pcapq_build_info"}
        watcher = Watcher(60.0, metrics=server)
        watcher.tick(FakeLive(snapshot()), lambda line: None)  # type: ignore[arg-type]
        text = urllib.request.urlopen(server.url, timeout=5).read().decode()
        assert value(text, "pcapq_synack_after_ack_total", listener="10.0.0.2:9000") == 5
    finally:
        server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.url, timeout=5)


def test_a_port_in_use_is_an_address_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsAddressError, match=rf"^--metrics 127.0.0.1:{port}: cannot listen there: the port is in use"):
            MetricsServer("127.0.0.1", port)


@pytest.mark.parametrize(
    "text, address",
    [("127.0.0.1:9465", ("127.0.0.1", 9465)), (":9465", ("::", 9465)), ("[::1]:9465", ("::1", 9465)),
     ("proxy-1.internal:9465", ("proxy-1.internal", 9465)), ("0.0.0.0:0", ("0.0.0.0", 0))],
)
def test_addresses(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["9465", "localhost", "::1:9465", "[::1]", "127.0.0.1:", "127.0.0.1:70000", "a b:1", "[::1]9465"])
def test_bad_addresses(text: str) -> None:
    with pytest.raises(MetricsAddressError, match=r"^--metrics "):
        parse_address(text)


def _one_line_usage_error(proc: subprocess.CompletedProcess, starts: str) -> None:
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), lines


def test_cli_bad_metrics_value_is_one_line_and_exit_2() -> None:
    proc = subprocess.run(["pcapq", "watch", "--metrics", "9465", "-"], input=b"", capture_output=True, timeout=30)
    _one_line_usage_error(proc, "pcapq: --metrics '9465': give HOST:PORT")


def test_cli_port_in_use_is_one_line_and_exit_2_before_reading() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        capture = (REPO / "captures" / "healthy.pcap").read_bytes()
        proc = subprocess.run(["pcapq", "watch", "--metrics", f"127.0.0.1:{port}", "-"], input=capture, capture_output=True, timeout=30)
    _one_line_usage_error(proc, f"pcapq: --metrics 127.0.0.1:{port}: cannot listen there: the port is in use")
    assert proc.stdout == b""


# ---- rules, dashboard, docs


RULES = REPO / "deploy" / "prometheus" / "pcapq.rules.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "pcapq.json"


def _metric_names(expr: str) -> set[str]:
    """The pcapq metrics an expression reads, a histogram's _bucket/_sum/_count as the histogram."""
    names = set()
    for name in re.findall(r"\bpcapq_[a-z0-9_]+", expr):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        names.add(base if base in BY_NAME and BY_NAME[base].type == "histogram" else name)
    return names


@needs_promtool
def test_promtool_checks_the_rules_and_the_configuration() -> None:
    for argv in (["check", "rules", str(RULES)], ["check", "config", str(RULES.parent / "prometheus.yml")]):
        proc = subprocess.run([PROMTOOL, *argv], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_promtool
def test_promtool_rule_tests_fire_each_alert_and_spare_healthy_listeners() -> None:
    proc = subprocess.run([PROMTOOL, "test", "rules", "pcapq.rules.test.yml"], cwd=RULES.parent, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tests = yaml.safe_load((RULES.parent / "pcapq.rules.test.yml").read_text())["tests"]
    alerts = [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    fired = {t["alertname"] for test in tests for t in test["alert_rule_test"] if t["exp_alerts"]}
    assert fired == set(alerts)


def test_rules_and_dashboard_name_only_metrics_the_table_defines() -> None:
    exprs = [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    dashboard = json.loads(DASHBOARD.read_text())
    exprs += [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    exprs.append(variables["listener"]["query"]["query"])
    named = set().union(*map(_metric_names, exprs))
    assert named and named <= set(BY_NAME), named - set(BY_NAME)
    assert {"pcapq_synack_after_ack_total", "pcapq_connections_waiting", "pcapq_handshake_seconds"} <= named


def test_dashboard_shape() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] == 39
    listener = {v["name"]: v for v in dashboard["templating"]["list"]}["listener"]
    assert listener["query"]["query"] == "label_values(pcapq_connections_total, listener)"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            # Per-listener panels follow the variable.
            if any(BY_NAME[n].per_listener for n in _metric_names(target["expr"])):
                assert 'listener=~"$listener"' in target["expr"], target["expr"]


def test_docs_table_is_the_metrics_table() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "docs" / "metrics.py"), "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert markdown_table() in (REPO / "docs" / "monitoring.md").read_text()


# ---- a running `pcapq watch --metrics`




class Pipeline:
    """`replay CAPTURE | pcapq watch --metrics 127.0.0.1:0 -` in a process group of their own."""

    def __init__(self, tmp_path: Path, capture: Path, speed: float) -> None:
        script = tmp_path / "replay.py"
        script.write_text(REPLAY)
        self.done = tmp_path / f"{capture.stem}.done"
        self.writer = subprocess.Popen([sys.executable, str(script), str(capture), str(self.done), str(speed)], stdout=subprocess.PIPE, process_group=0)
        assert self.writer.stdout is not None
        self.reader = subprocess.Popen(
            ["pcapq", "watch", "--every", "60", "--metrics", "127.0.0.1:0", "-"], stdin=self.writer.stdout,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=self.writer.pid,
        )
        self.writer.stdout.close()
        assert self.reader.stderr is not None
        first = self.reader.stderr.readline().decode()
        match = re.fullmatch(r"pcapq: serving metrics on (http://127\.0\.0\.1:\d+/metrics)\n", first)
        assert match, first
        self.url = match.group(1)

    def scrape(self) -> str:
        return urllib.request.urlopen(self.url, timeout=5).read().decode()

    def wait_done(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.done.exists():
            assert time.monotonic() < deadline, "the replay did not finish"
            time.sleep(0.05)

    def interrupt(self) -> tuple[int, str]:
        os.killpg(self.writer.pid, signal.SIGINT)
        try:
            out, err = self.reader.communicate(timeout=60)
        finally:
            self.writer.kill()
            self.writer.wait()
        return self.reader.returncode, err.decode()

    def kill(self) -> None:
        for proc in (self.reader, self.writer):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_r30_a_running_watch_serves_the_accept_queue_sign_of_its_listener(tmp_path: Path) -> None:
    overflow = Pipeline(tmp_path, REPO / "captures" / "accept_queue_overflow.pcap", speed=2.0)
    healthy = Pipeline(tmp_path, REPO / "captures" / "healthy.pcap", speed=4.0)
    listener = "10.231.1.2:9000"
    try:
        # While the capture arrives (9.4 s of it in about 4.7 s), the counters climb.
        seen = []
        deadline = time.monotonic() + 30
        while not overflow.done.exists() and time.monotonic() < deadline:
            text = overflow.scrape()
            seen.append(samples(text).get(("pcapq_tcp_segments_total", ()), 0))
            time.sleep(0.2)
        assert len(seen) > 3 and seen == sorted(seen) and seen[0] < seen[-1], seen
        overflow.wait_done()
        healthy.wait_done()
        time.sleep(0.5)  # a tick after the last record
        text = overflow.scrape()
        assert value(text, "pcapq_synack_after_ack_total", listener=listener) > 0
        assert value(text, "pcapq_connections_total", listener=listener) == 8
        assert value(text, "pcapq_packets_read_total") == 118
        calm = healthy.scrape()
        assert value(calm, "pcapq_synack_after_ack_total", listener=listener) == 0
        assert value(calm, "pcapq_connections_total", listener=listener) == 20
        assert value(calm, "pcapq_connections_answered_total", listener=listener) == 20
        if PROMTOOL:
            proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        code, err = overflow.interrupt()
        assert code == 1, err
        assert "Traceback" not in err
        # The report is written: the server has stopped.
        with pytest.raises(urllib.error.URLError):
            overflow.scrape()
        assert healthy.interrupt()[0] == 0
    finally:
        overflow.kill()
        healthy.kill()



# The core's own snapshot of a capture on standard input, as JSON.
SNAPSHOT = textwrap.dedent(
    """
    import json
    import pcapq._core as core
    live = core.LiveInput()
    core.analyze_stdin(live, keep_connections=False, keep_events=False, watch=True, metrics_listeners=20)
    print(json.dumps(live.metrics()))
    """
)


def test_r30_the_core_snapshot_has_the_shape_the_collector_reads() -> None:
    capture = (REPO / "captures" / "accept_queue_overflow.pcap").read_bytes()
    proc = subprocess.run([sys.executable, "-c", SNAPSHOT], input=capture, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    snap = json.loads(proc.stdout)
    assert snap["segments"] > 0 and snap["listeners_other"] == 0
    assert snap["buckets"] == core.VOCABULARY["metric_buckets"] == sorted(snap["buckets"])
    (entry,) = snap["listeners"]
    assert entry["listener"] == "10.231.1.2:9000" and entry["connections"] == 8
    # Every sign the core counts has a metric; every outcome is one of the vocabulary's.
    assert set(entry["signs"]) <= set(SIGN_METRICS), set(entry["signs"]) - set(SIGN_METRICS)
    assert entry["signs"]["final_ack_dropped"] > 0
    assert set(entry["ended"]) <= set(core.VOCABULARY["outcomes"])
    assert {r["answered"] for r in entry["resets"]} <= set(core.VOCABULARY["reset_answers"])
    for m in METRICS:
        if m.type == "histogram":
            h = entry[m.source[len("listeners[]."):]]
            assert len(h["counts"]) == len(snap["buckets"]) + 1 and sum(h["counts"]) == h["count"], m.name
    # The whole snapshot goes through the collector.
    assert value(scrape(snap), "pcapq_synack_after_ack_total", listener="10.231.1.2:9000") == entry["signs"]["final_ack_dropped"]
