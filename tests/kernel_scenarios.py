"""Real-traffic scenarios on a NetnsPair, shared by test_kernel.py and captures/make_real.py.

Each scenario starts tcp_peers.py as server (server namespace) and client (client namespace),
captures on the server's side, and returns what happened: the client's per-connection results,
the server namespace's `nstat` counters before and after, tcpdump's counters, the sysctls.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from netns import NetnsPair

PORT = 9000
PEERS = str(Path(__file__).with_name("tcp_peers.py"))

SERVER_SYSCTLS = (
    "net.core.somaxconn",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.tcp_synack_retries",
    "net.ipv4.tcp_abort_on_overflow",
)
CLIENT_SYSCTLS = ("net.ipv4.tcp_syn_retries", "net.ipv4.tcp_syn_linear_timeouts")


@dataclass
class Run:
    pcap: Path
    server: str
    clients: list[dict]
    nstat_before: dict[str, int]
    nstat_after: dict[str, int]
    tcpdump: str
    tcpdump_dropped: int | None
    elapsed: float
    sysctls: dict[str, str] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)

    def delta(self, counter: str) -> int:
        return self.nstat_after.get(counter, 0) - self.nstat_before.get(counter, 0)

    def changed(self) -> dict[str, tuple[int, int]]:
        """Counters that moved: name -> (before, after)."""
        names = sorted(set(self.nstat_before) | set(self.nstat_after))
        return {
            n: (self.nstat_before.get(n, 0), self.nstat_after.get(n, 0))
            for n in names
            if self.nstat_before.get(n, 0) != self.nstat_after.get(n, 0)
        }

    def nstat_report(self) -> str:
        lines = [f"{'counter':<34}{'before':>10}{'after':>10}{'delta':>10}"]
        for name, (before, after) in self.changed().items():
            lines.append(f"{name:<34}{before:>10}{after:>10}{after - before:>10}")
        return "\n".join(lines)


def _read_sysctls(net: NetnsPair) -> dict[str, str]:
    values = {}
    for ns, keys, where in ((net.server_ns, SERVER_SYSCTLS, "server"), (net.client_ns, CLIENT_SYSCTLS, "client")):
        for key in keys:
            values[f"{where}:{key}"] = net.run(ns, ["sysctl", "-n", key], check=False).stdout.strip() or "n/a"
    return values


def start_server(net: NetnsPair, *options: str, timeout: float = 10) -> subprocess.Popen:
    """tcp_peers.py server in the server namespace, returned once it listens."""
    proc = net.popen(
        net.server_ns,
        [sys.executable, PEERS, "server", net.server_ip, str(PORT), *options],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout) or proc.stdout.readline().strip() != "ready":
        net.stop(proc)
        raise RuntimeError("test server did not start")
    return proc


def parse_clients(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def healthy(
    net: NetnsPair,
    pcap: Path,
    connections: int = 20,
    request: int = 100,
    response: int = 1000,
    iface: str | None = None,
    snaplen: int | None = None,
    linktype: str | None = None,
) -> Run:
    """`connections` sequential request/response exchanges to a server that accepts at once.
    iface, snaplen, linktype: for tcpdump (-i, -s, -y)."""
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    server = start_server(net, "--count", str(connections), "--response", str(response), "--deadline", "30")
    try:
        with net.capture(pcap, bpf=["tcp"], iface=iface, snaplen=snaplen, linktype=linktype) as cap:
            out = net.run(
                net.client_ns,
                [sys.executable, PEERS, "client", net.server_ip, str(PORT), "--count", str(connections),
                 "--request", str(request), "--deadline", "20"],
            ).stdout
        server.wait(10)
    finally:
        net.stop(server)
    setup = [
        f"server listen() backlog 128, accepts at once; client: {connections} sequential connections, "
        f"{request}-byte request, {response}-byte response, server closes first"
    ]
    return _run(net, pcap, out, cap, before, started, setup)


def _run(net, pcap, out: str, cap, before: dict, started: float, setup: list[str]) -> Run:
    """What a scenario leaves behind: the capture, what the clients saw, the counters."""
    return Run(
        pcap=pcap,
        server=f"{net.server_ip}:{PORT}",
        clients=parse_clients(out),
        nstat_before=before,
        nstat_after=net.nstat(net.server_ns),
        tcpdump=cap.stderr,
        tcpdump_dropped=cap.dropped(),
        elapsed=time.monotonic() - started,
        sysctls=_read_sysctls(net),
        setup=setup,
    )


# The client's egress goes through tbf: 100 kbit/s with a 100-byte bucket. Packets leave one by
# one, about 6 ms apart, so a burst of SYNs reaches the listener before the handshake ACKs, as
# on a path with latency (this kernel has no netem). Every client packet must fit the bucket:
# 66 bytes of headers + the request. FILLER datagrams (92 bytes each) queue ahead of the burst:
# ~60 ms for the client to issue all its connects.
SHAPE_RATE = "100kbit"
SHAPE_BURST = 100
FILLER = 8


def accept_queue_overflow(
    net: NetnsPair,
    pcap: Path,
    connections: int = 8,
    backlog: int = 1,
    accept_delay: float = 5.0,
    request: int = 24,
    response: int = 1000,
) -> Run:
    """listen(backlog) and no accept() for `accept_delay` s while `connections` clients connect at
    once, each sending its request as soon as connect() returns."""
    assert 66 + request <= SHAPE_BURST
    net.sysctl(net.server_ns, "net.ipv4.tcp_syncookies", 1)
    net.sysctl(net.server_ns, "net.ipv4.tcp_abort_on_overflow", 0)
    net.shape_egress(net.client_ns, net.client_if, SHAPE_RATE, burst=SHAPE_BURST)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    server = start_server(
        net, "--backlog", str(backlog), "--accept-delay", str(accept_delay), "--count", str(connections),
        "--response", str(response), "--deadline", "20",
    )
    try:
        with net.capture(pcap, bpf=["tcp"]) as cap:
            out = net.run(
                net.client_ns,
                [sys.executable, PEERS, "client", net.server_ip, str(PORT), "--concurrent", "--count",
                 str(connections), "--first-alone", "--filler", str(FILLER), "--request", str(request),
                 "--deadline", "15"],
                timeout=30,
            ).stdout
        server.wait(10)
    finally:
        net.stop(server)
    setup = [
        f"server listen() backlog {backlog}, first accept() {accept_delay:g} s after listen()",
        f"client: 1 connection, then {connections - 1} non-blocking connects at once; "
        f"{request}-byte request each, {response}-byte response",
        f"client egress: tc tbf rate {SHAPE_RATE} burst {SHAPE_BURST}, {FILLER} UDP datagrams ahead "
        "of the burst (SYNs reach the listener before the handshake ACKs)",
    ]
    return _run(net, pcap, out, cap, before, started, setup)
