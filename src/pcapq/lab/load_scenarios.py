"""One seeded offered load against a prefork server, under listen settings that change from run to
run (captures/whatif_runs/, make.py there): what the same load does with another backlog, another
worker count, a somaxconn clamp, syncookies off, fewer SYN-ACK re-sends.

The server (load_peers.py prefork) listens with listen(backlog) and forks its workers; the client
(load_peers.py load) opens the connections of a seeded schedule on time, each with a 5 s timeout.
Each run records, beside the capture, the truth a capture is judged against: the settings as set,
each connection's outcome as its client saw it (connected? answered? after how long? how many
SYNs re-sent?), what the workers took, and the kernel's counters in both namespaces."""

from __future__ import annotations

import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pcapq.lab.errors import LabError
from pcapq.lab.namespaces import NetnsPair
from pcapq.lab.scenarios import PORT, Run, _run, parse_clients

# The server and client programs, run by path: they need nothing of pcapq.
LOAD_PEERS = [str(Path(__file__).with_name("load_peers.py"))]
# Counters of the server namespace that say what the listener did (nstat names).
LISTEN_COUNTERS = ("TcpExtListenOverflows", "TcpExtListenDrops", "TcpExtTCPReqQFullDrop",
                   "TcpExtTCPReqQFullDoCookies", "TcpExtSyncookiesSent", "TcpExtSyncookiesRecv",
                   "TcpExtSyncookiesFailed", "TcpExtTCPSynRetrans", "TcpExtTCPAbortOnData", "TcpOutRsts",
                   "TcpExtTCPTimeouts", "TcpPassiveOpens", "TcpAttemptFails")
# How a connection of the load may fail: given up at the timeout, or reset (tcp_abort_on_overflow).
CLIENT_ERRORS = ("timeout", "ECONNRESET")
# A request that reaches its worker this long after accept() came with the client's re-send: its
# handshake ACK and first request segment were dropped, a later bare ACK created the connection
# (tcp_check_req()), and the worker waited for the request (the fastest re-send is about 200 ms).
LATE_REQUEST_S = 0.5
# How long the capture goes on after the last client has given up.
TAIL_S = 4.0
CLIENT_COUNTERS = ("TcpExtTCPSynRetrans", "TcpActiveOpens", "TcpAttemptFails", "TcpEstabResets")


def prefork_load(
    net: NetnsPair,
    pcap: Path,
    pattern: str = "steady_bursts",
    seed: int = 1,
    backlog: int = 16,
    workers: int = 2,
    somaxconn: int = 4096,
    syncookies: int = 1,
    synack_retries: int = 5,
    abort_on_overflow: int = 0,
    timeout: float = 5.0,
    request: int = 64,
    response: int = 200,
    snaplen: int = 128,
) -> Run:
    """The load `pattern` (seed `seed`) against `workers` prefork workers on listen(`backlog`), the
    server namespace's net.core.somaxconn, net.ipv4.tcp_syncookies, tcp_synack_retries and
    tcp_abort_on_overflow set as given. tcpdump (snaplen `snaplen`) on the capture point.
    run.extra["truth"]: the settings and counts; run.extra["workers_log"]: what the workers took."""
    net.sysctl(net.server_ns, "net.core.somaxconn", somaxconn)
    net.sysctl(net.server_ns, "net.ipv4.tcp_syncookies", syncookies)
    net.sysctl(net.server_ns, "net.ipv4.tcp_synack_retries", synack_retries)
    net.sysctl(net.server_ns, "net.ipv4.tcp_abort_on_overflow", abort_on_overflow)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    client_before = net.nstat(net.client_ns)
    net.say(f"prefork server on {net.server_ip}:{PORT}: listen({backlog}), {workers} workers")
    workers_log = pcap.with_suffix(".workers.jsonl")
    workers_log.unlink(missing_ok=True)
    # The server stops by itself (--deadline) well after the load's 8 s and the clients' 5 s timeout.
    server = net.popen(
        net.server_ns,
        [sys.executable, *LOAD_PEERS, "prefork", net.server_ip, str(PORT), "--workers", str(workers),
         "--backlog", str(backlog), "--response", str(response), "--deadline", "40", "--log", str(workers_log)],
        stdout=subprocess.PIPE, text=True,
    )
    _wait_ready(net, server)
    try:
        with net.capture(pcap, bpf=["tcp", "port", str(PORT)], snaplen=snaplen) as cap:
            net.say(f"client load {pattern} (seed {seed}) from {net.client_ip}, {timeout:g} s timeout")
            out = net.run(
                net.client_ns,
                [sys.executable, *LOAD_PEERS, "load", net.server_ip, str(PORT), "--pattern", pattern,
                 "--seed", str(seed), "--timeout", str(timeout), "--request", str(request),
                 "--response", str(response)],
                timeout=60,
            ).stdout
            # A connection given up on may still hold a worker, and its FIN may wait in the client's
            # kernel behind its request's re-sends (cwnd 1 after an RTO): capture them too.
            time.sleep(TAIL_S)
    finally:
        net.stop(server)
    workers_out = workers_log.read_text() if workers_log.exists() else ""
    workers_log.unlink(missing_ok=True)
    effective = min(backlog, somaxconn)
    setup = [
        f"server: prefork, {workers} worker processes calling accept() on one listen({backlog}) socket "
        f"(effective backlog {effective}); each reads the request, sleeps the service time it names, answers "
        f"{response} bytes, closes",
        f"client: load {pattern} seed {seed}, open loop, {request}-byte requests, gives up {timeout:g} s "
        "after connect()",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    client_after = net.nstat(net.client_ns)
    run.extra["workers_log"] = parse_clients(workers_out)
    run.extra["truth"] = truth(
        run, client_before, client_after, run.extra["workers_log"], pattern=pattern, seed=seed, backlog=backlog,
        workers=workers, somaxconn=somaxconn, syncookies=syncookies, synack_retries=synack_retries,
        abort_on_overflow=abort_on_overflow, timeout=timeout)
    return run


def _wait_ready(net: NetnsPair, server: subprocess.Popen[Any], timeout: float = 10) -> None:
    assert server.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(server.stdout, selectors.EVENT_READ)
    if not sel.select(timeout) or server.stdout.readline().strip() != "ready":
        net.stop(server)
        raise LabError("the prefork server did not start")


def truth(run: Run, client_before: dict[str, int], client_after: dict[str, int], workers_log: list[dict[str, Any]],
          *, pattern: str, seed: int, backlog: int, workers: int, somaxconn: int, syncookies: int,
          synack_retries: int, abort_on_overflow: int, timeout: float) -> dict[str, Any]:
    """What a run did, from its clients, its workers and the kernel: the settings as set, the
    counts of outcomes, the counters that say what the listener did."""
    clients = run.clients
    answered = [c for c in clients if c["error"] is None]
    waits = sorted(c["answered"] for c in answered)
    errors: dict[str, int] = {}
    for c in clients:
        if c["error"] is not None:
            errors[c["error"]] = errors.get(c["error"], 0) + 1
    sysctls = run.sysctls
    return {
        "load": {"pattern": pattern, "seed": seed, "connections": len(clients)},
        "settings": {
            "backlog": min(backlog, somaxconn),
            "listen_backlog": backlog,
            "somaxconn": somaxconn,
            "workers": workers,
            "syncookies": syncookies,
            "synack_retries": synack_retries,
            "abort_on_overflow": abort_on_overflow,
            "syn_retries": int(sysctls.get("client:net.ipv4.tcp_syn_retries", "0") or 0),
            "syn_linear_timeouts": _int_or_none(sysctls.get("client:net.ipv4.tcp_syn_linear_timeouts")),
            "client_timeout_s": timeout,
        },
        "outcome": {
            "connections": len(clients),
            "answered": len(answered),
            "failed": len(clients) - len(answered),
            "connected": sum(1 for c in clients if c["connected"] is not None),
            "errors": errors,
            "syn_retransmitted": sum(1 for c in clients if c["syn_retransmits"]),
            "syn_retransmits": sum(c["syn_retransmits"] for c in clients),
            "wait_p50_s": _quantile(waits, 0.5),
            "wait_p99_s": _quantile(waits, 0.99),
        },
        "server": {
            "accepted": len(workers_log),
            "max_busy_workers": max_busy(workers_log),
            "late_requests": sum(1 for w in workers_log
                                 if w["request_at"] is not None and w["request_at"] - w["accepted"] > LATE_REQUEST_S),
        },
        "server_counters": {name: run.delta(name) for name in LISTEN_COUNTERS},
        "client_counters": {name: client_after.get(name, 0) - client_before.get(name, 0) for name in CLIENT_COUNTERS},
    }


def max_busy(workers_log: list[dict[str, Any]]) -> int:
    """The most connections the workers held at once, from accept() to close()."""
    edges = sorted([(w["accepted"], 1) for w in workers_log] + [(w["closed"], -1) for w in workers_log])
    busy = most = 0
    for _at, step in edges:
        busy += step
        most = max(most, busy)
    return most


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _quantile(values: list[float], q: float) -> float | None:
    """The nearest-rank quantile of sorted `values`."""
    if not values:
        return None
    return values[min(len(values) - 1, max(0, round(q * len(values) + 0.5) - 1))]
