"""`pcapq watch --metrics` scraped by a real Prometheus while the kernel overflows an accept queue
(issue 30): two namespaces joined by a veth, a listener on port 9000 with listen(1) that does not
accept() and a healthy one on 9001, tcpdump on the server's veth piped into pcapq watch, and
Prometheus (scraping every second) asked through its HTTP API for
increase(pcapq_synack_after_ack_total[1m]): above 0 for the overflowing listener, 0 for the
healthy one.

Needs root, ip, tc, tcpdump and prometheus; skipped otherwise. Everything runs in the namespaces
or on 127.0.0.1, every loop has a deadline, and only the processes started here are stopped."""

from __future__ import annotations

import json
import re
import selectors
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from netns import NetnsPair, unavailable_reason

from pcapq.lab.scenarios import PEERS, PORT, SHAPE_BURST, SHAPE_RATE, start_server

PROMETHEUS = shutil.which("prometheus")
NEEDS = ("ip", "tc", "tcpdump")
HEALTHY_PORT = PORT + 1

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(unavailable_reason(NEEDS) is not None, reason=str(unavailable_reason(NEEDS))),
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """A Prometheus of our own: scrapes `target` every second, its data in `tmp`."""

    def __init__(self, tmp: Path, target: str) -> None:
        config = tmp / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            f"scrape_configs:\n  - job_name: pcapq\n    static_configs:\n      - targets: ['{target}']\n"
        )
        self.api = f"http://127.0.0.1:{_free_port()}/api/v1"
        self.log = (tmp / "prometheus.log").open("w")
        assert PROMETHEUS is not None
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address={self.api.split('/')[2]}"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )

    def query(self, expr: str) -> dict[str, float]:
        """{listener (or ""): value} of an instant query."""
        url = f"{self.api}/query?" + urllib.parse.urlencode({"query": expr})
        doc = json.loads(urllib.request.urlopen(url, timeout=5).read())
        assert doc["status"] == "success", doc
        return {r["metric"].get("listener", ""): float(r["value"][1]) for r in doc["data"]["result"]}

    def wait(self, expr: str, until, timeout: float, what: str) -> dict[str, float]:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"prometheus exited ({self.proc.returncode})"
            try:
                result = self.query(expr)
                if until(result):
                    return result
            except OSError:
                result = None  # not listening yet
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: {expr} gave {result} after {timeout} s")
            time.sleep(0.25)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


def _first_line(stream, timeout: float) -> str:
    """A process's first line on `stream`, waited for at most `timeout` s."""
    assert stream is not None
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    assert sel.select(timeout), "no line in time"
    line = stream.readline()
    return (line.decode() if isinstance(line, bytes) else line).strip()


def _metrics_url(watch: subprocess.Popen) -> str:
    """The address pcapq says it serves, from its first line on standard error."""
    line = _first_line(watch.stderr, 10) + "\n"
    match = re.fullmatch(r"pcapq: serving metrics on http://(127\.0\.0\.1:\d+)/metrics\n", line)
    assert match, line
    return match.group(1)


def test_r30_prometheus_sees_the_accept_queue_overflow_of_one_listener_and_not_the_other(tmp_path: Path) -> None:
    started = time.monotonic()
    prometheus = watch = None
    with NetnsPair(tools=NEEDS) as net:
        try:
            # The lab's accept_queue_overflow (pcapq.lab.scenarios): SYN cookies on, no RST on
            # overflow, and the client's SYNs queued behind each other on a shaped link so that
            # they reach the listener before the handshake ACKs.
            net.sysctl(net.server_ns, "net.ipv4.tcp_syncookies", 1)
            net.sysctl(net.server_ns, "net.ipv4.tcp_abort_on_overflow", 0)
            net.shape_egress(net.client_ns, net.client_if, SHAPE_RATE, burst=SHAPE_BURST)
            # listen(1), and no accept() for the whole test.
            start_server(net, "--backlog", "1", "--accept-delay", "40", "--count", "8", "--deadline", "45")
            healthy = net.popen(
                net.server_ns, [*PEERS, "server", net.server_ip, str(HEALTHY_PORT), "--count", "0", "--response", "200", "--deadline", "45"],
                stdout=subprocess.PIPE, text=True,
            )
            assert _first_line(healthy.stdout, 10) == "ready"

            capture = net.capture("-", bpf=["tcp"], snaplen=96, stdout=subprocess.PIPE).start()
            assert capture.proc is not None and capture.proc.stdout is not None
            watch = subprocess.Popen(
                ["pcapq", "watch", "--every", "60", "--metrics", "127.0.0.1:0", "-"], stdin=capture.proc.stdout,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
            capture.proc.stdout.close()
            target = _metrics_url(watch)
            prometheus = Prometheus(tmp_path, target)
            prometheus.wait('up{job="pcapq"}', lambda r: r.get("") == 1, 20, "Prometheus did not scrape pcapq")

            net.run(net.client_ns, [*PEERS, "client", net.server_ip, str(HEALTHY_PORT), "--count", "10", "--request", "24", "--deadline", "10"])
            net.popen(
                net.client_ns,
                [*PEERS, "client", net.server_ip, str(PORT), "--concurrent", "--count", "8", "--lead", "1", "--filler", "8",
                 "--request", "24", "--deadline", "30"],
                stdout=subprocess.DEVNULL,
            )
            overflowing, calm = f"{net.server_ip}:{PORT}", f"{net.server_ip}:{HEALTHY_PORT}"
            expr = "increase(pcapq_synack_after_ack_total[1m])"
            result = prometheus.wait(expr, lambda r: r.get(overflowing, 0) > 0 and calm in r, 25, "no accept queue sign")
            assert result[calm] == 0, result
            answered = prometheus.query("pcapq_connections_answered_total")
            assert answered[calm] == 10 and answered.get(overflowing, 0) == 0, answered
            alive = prometheus.query("pcapq_connections_waiting")
            assert alive[overflowing] > 0, alive
        finally:
            if prometheus is not None:
                prometheus.stop()
            # tcpdump ends on SIGINT, and pcapq writes its report at the end of its input.
            net.close()
            if watch is not None:
                try:
                    out, err = watch.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    watch.kill()
                    watch.communicate()
                    raise
    assert watch.returncode == 1, err.decode()
    assert f"Accept queue overflow on {overflowing}" in out.decode()
    assert time.monotonic() - started < 60
