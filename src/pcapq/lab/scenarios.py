"""Real-traffic scenarios on a NetnsPair: what `pcapq lab` runs, and the kernel tests with it.

Each scenario starts peers.py as server (server namespace) and client (client namespace),
captures on the server's side, and returns what happened: the client's per-connection results,
the server namespace's `nstat` counters before and after, tcpdump's counters, the sysctls.
"""

from __future__ import annotations

import contextlib
import json
import re
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pcapq.lab import counters
from pcapq.lab.errors import LabError
from pcapq.lab.namespaces import Capture, NetnsPair

PORT = 9000
# The server and client programs (peers.py), run inside the namespaces by this interpreter.
PEERS = [sys.executable, "-m", "pcapq.lab.peers"]

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
    clients: list[dict[str, Any]]  # peers.py client's JSON lines
    nstat_before: dict[str, int]
    nstat_after: dict[str, int]
    tcpdump: str
    tcpdump_dropped: int | None
    elapsed: float
    sysctls: dict[str, str] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)
    # Scenario-specific facts (e.g. the half-open SYNs sent, packets nftables dropped).
    extra: dict[str, Any] = field(default_factory=dict)

    def delta(self, counter: str) -> int:
        return self.nstat_after.get(counter, 0) - self.nstat_before.get(counter, 0)

    def changed(self) -> dict[str, tuple[int, int]]:
        """Counters that moved: name -> (before, after)."""
        return counters.changed(self.nstat_before, self.nstat_after)

    def nstat_report(self) -> str:
        return counters.report(self.nstat_before, self.nstat_after)


def _read_sysctls(net: NetnsPair) -> dict[str, str]:
    values = {}
    for ns, keys, where in ((net.server_ns, SERVER_SYSCTLS, "server"), (net.client_ns, CLIENT_SYSCTLS, "client")):
        for key in keys:
            values[f"{where}:{key}"] = net.run(ns, ["sysctl", "-n", key], check=False).stdout.strip() or "n/a"
    return values


def start_server(net: NetnsPair, *options: str, timeout: float = 10, port: int = PORT) -> subprocess.Popen[Any]:
    """peers.py server in the server namespace on `port`, returned once it listens."""
    net.say(f"server listening on {net.server_ip}:{port} ({' '.join(options)})")
    proc = net.popen(
        net.server_ns,
        [*PEERS, "server", net.server_ip, str(port), *options],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout) or proc.stdout.readline().strip() != "ready":
        net.stop(proc)
        raise LabError("the scenario's server did not start")
    return proc


def parse_clients(stdout: str) -> list[dict[str, Any]]:
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
                [*PEERS, "client", net.server_ip, str(PORT), "--count", str(connections),
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


def _run(net: NetnsPair, pcap: Path, out: str, cap: Capture, before: dict[str, int], started: float,
         setup: list[str]) -> Run:
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
    net.sysctl(net.server_ns, "net.ipv4.tcp_syncookies", 1)
    net.sysctl(net.server_ns, "net.ipv4.tcp_abort_on_overflow", 0)
    return _burst(net, pcap, connections, backlog, accept_delay, request, response, lead=1)


def abort_on_overflow(
    net: NetnsPair,
    pcap: Path,
    connections: int = 9,
    backlog: int = 3,
    accept_delay: float = 2.0,
    request: int = 24,
    response: int = 1000,
) -> Run:
    """accept_queue_overflow with net.ipv4.tcp_abort_on_overflow=1: a handshake ACK that finds
    the accept queue full is answered with an RST instead of being dropped. `backlog` connections
    go first and wait in the accept queue (it holds backlog + 1), leaving one place for the burst."""
    net.sysctl(net.server_ns, "net.ipv4.tcp_syncookies", 1)
    net.sysctl(net.server_ns, "net.ipv4.tcp_abort_on_overflow", 1)
    return _burst(net, pcap, connections, backlog, accept_delay, request, response, lead=backlog, server_wait=1.0)


def _burst(
    net: NetnsPair,
    pcap: Path,
    connections: int,
    backlog: int,
    accept_delay: float,
    request: int,
    response: int,
    lead: int,
    server_wait: float = 10.0,
) -> Run:
    """`lead` connections one by one, then the others at once, their SYNs ahead of their ACKs;
    the server listens with `backlog` and calls accept() only after `accept_delay` s."""
    assert 66 + request <= SHAPE_BURST
    net.shape_egress(net.client_ns, net.client_if, SHAPE_RATE, burst=SHAPE_BURST)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    server = start_server(
        net, "--backlog", str(backlog), "--accept-delay", str(accept_delay), "--count", str(connections),
        "--response", str(response), "--deadline", "20",
    )
    try:
        with net.capture(pcap, bpf=["tcp"]) as cap:
            net.say(f"client load from {net.client_ip}: {lead} connection{'' if lead == 1 else 's'} first, then "
                    f"{connections - lead} at once, each sending a {request}-byte request")
            out = net.run(
                net.client_ns,
                [*PEERS, "client", net.server_ip, str(PORT), "--concurrent", "--count",
                 str(connections), "--lead", str(lead), "--filler", str(FILLER), "--request", str(request),
                 "--deadline", "15"],
                timeout=30,
            ).stdout
        # Reset connections never reach accept(): the server may still wait for them.
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(server_wait)
    finally:
        net.stop(server)
    first = "1 connection" if lead == 1 else f"{lead} connections one by one"
    setup = [
        f"server listen() backlog {backlog}, first accept() {accept_delay:g} s after listen()",
        f"client: {first}, then {connections - lead} non-blocking connects at once; "
        f"{request}-byte request each, {response}-byte response",
        f"client egress: tc tbf rate {SHAPE_RATE} burst {SHAPE_BURST}, {FILLER} UDP datagrams ahead "
        "of the burst (SYNs reach the listener before the handshake ACKs)",
    ]
    return _run(net, pcap, out, cap, before, started, setup)


def _serve_and_load(
    net: NetnsPair, pcap: Path, snaplen: int | None, server: tuple[str, ...], client: tuple[str, ...], wait: float = 5,
    role: str = "client",
) -> tuple[str, Capture]:
    """Starts peers.py's server with `server`, runs the client (peers.py `role`) with `client`
    while tcpdump writes `pcap`, waits up to `wait` s for the server to finish (a client that
    failed leaves it waiting; the run's clients say so) and stops it. The client's stdout and
    the capture."""
    proc = start_server(net, *server)
    try:
        with net.capture(pcap, bpf=["tcp"], snaplen=snaplen) as cap:
            out = _client(net, *client, role=role)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)
    finally:
        net.stop(proc)
    return out, cap


def _client(net: NetnsPair, *options: str, timeout: float = 30, role: str = "client") -> str:
    """peers.py client (or another client `role`) in the client namespace; its stdout."""
    shown = options if role == "client" else (role, *options)
    net.say(f"client load from {net.client_ip}: {' '.join(shown)}")
    argv = [*PEERS, role, net.server_ip, str(PORT), *options]
    return net.run(net.client_ns, argv, timeout=timeout).stdout


def closed_port(net: NetnsPair, pcap: Path, connections: int = 5) -> Run:
    """`connections` sequential connects to a port nobody listens on."""
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    with net.capture(pcap, bpf=["tcp"]) as cap:
        out = _client(net, "--count", str(connections), "--timeout", "2", "--deadline", "10")
    setup = [f"no listener on port {PORT}; client: {connections} sequential connects"]
    return _run(net, pcap, out, cap, before, started, setup)


def client_timeout_rst(
    net: NetnsPair,
    pcap: Path,
    connections: int = 3,
    timeout: float = 1.0,
    reply_delay: float = 1.5,
    pause: float = 0.6,
    request: int = 100,
    response: int = 1000,
) -> Run:
    """The server reads each request but answers only after `reply_delay` s; the client gives up
    after `timeout` s and closes with SO_LINGER 0, an RST. `pause` between connections lets the
    server finish with the previous one (it serves one at a time)."""
    assert reply_delay > timeout and timeout + pause > reply_delay
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    server = start_server(net, "--count", str(connections), "--reply-delay", str(reply_delay),
                          "--response", str(response), "--deadline", "20")
    try:
        with net.capture(pcap, bpf=["tcp"]) as cap:
            out = _client(net, "--count", str(connections), "--request", str(request), "--timeout", str(timeout),
                          "--rst-on-timeout", "--pause", str(pause), "--deadline", "15")
            # The server's write after the RST, if any, is in the capture too.
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(reply_delay + 1)
    finally:
        net.stop(server)
    setup = [
        f"server accepts at once, reads the {request}-byte request, answers {reply_delay:g} s later "
        f"({response} bytes), one connection at a time",
        f"client: {connections} sequential connections, {timeout:g} s read timeout, then close() with "
        f"SO_LINGER 0 (an RST); {pause:g} s pause between connections",
    ]
    return _run(net, pcap, out, cap, before, started, setup)


DARK_HOST = 3  # 10.231.N.3: routed to the client's veth, owned by no one


def syn_queue_overflow(
    net: NetnsPair,
    pcap: Path,
    backlog: int = 3,
    half_open: int = 6,
    connections: int = 3,
    synack_retries: int = 1,
    client_delay: float = 0.5,
    request: int = 100,
    response: int = 1000,
) -> Run:
    """tcp_syncookies=0, listen(backlog). `half_open` raw SYNs from an address no one owns fill
    the SYN queue (their SYN-ACKs go unanswered); `client_delay` s later `connections` clients
    connect at once. Their SYNs are dropped until the half-open requests expire
    (tcp_synack_retries: 1 s + 2 s + ... after the SYN)."""
    net.sysctl(net.server_ns, "net.ipv4.tcp_syncookies", 0)
    net.sysctl(net.server_ns, "net.ipv4.tcp_synack_retries", synack_retries)
    dark = net.server_ip.rsplit(".", 1)[0] + f".{DARK_HOST}"
    client_mac = net.run(net.client_ns, ["ip", "-br", "link", "show", net.client_if]).stdout.split()[2]
    # The SYN-ACKs to the dark address reach the client's veth, where the kernel drops them
    # (not its address, no forwarding): no RST comes back.
    net.run(net.server_ns, ["ip", "neigh", "replace", dark, "lladdr", client_mac, "dev", net.server_if,
                            "nud", "permanent"])
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    server = start_server(net, "--backlog", str(backlog), "--count", str(connections),
                          "--response", str(response), "--deadline", "20")
    try:
        with net.capture(pcap, bpf=["tcp"]) as cap:
            syns = net.run(net.client_ns, [*PEERS, "half-open", net.server_ip, str(PORT),
                                           "--source", dark, "--count", str(half_open)]).stdout
            time.sleep(client_delay)
            out = _client(net, "--concurrent", "--count", str(connections), "--request", str(request),
                          "--deadline", "12")
        server.wait(10)
    finally:
        net.stop(server)
    setup = [
        f"server: tcp_syncookies=0, tcp_synack_retries={synack_retries}, listen() backlog {backlog}, "
        "accepts at once",
        f"{half_open} SYNs (scapy, raw socket in the client namespace) from {dark}, an address no host "
        "owns: their SYN-ACKs are never answered",
        f"{client_delay:g} s later: {connections} non-blocking connects at once; {request}-byte request, "
        f"{response}-byte response",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra["half_open"] = parse_clients(syns)
    run.extra["dark"] = dark
    return run


LOSS_TABLE = "pcapq_loss"


def packet_loss(
    net: NetnsPair,
    pcap: Path,
    connections: int = 20,
    loss_percent: int = 4,
    request: int = 100,
    response: int = 16000,
    snaplen: int = 96,
) -> Run:
    """healthy() with random loss: nftables in the client namespace drops `loss_percent` % of the
    server's packets on input, after tcpdump on the server's veth saw them. The server's veth
    sends one MSS per packet (gso_max_segs 1), as a NIC puts them on the wire."""
    net.run(net.server_ns, ["ip", "link", "set", "dev", net.server_if, "gso_max_segs", "1"])
    match = f"ip saddr {net.server_ip} tcp sport {PORT}"
    rules = (
        f"table inet {LOSS_TABLE} {{\n"
        "  chain input {\n"
        "    type filter hook input priority 0; policy accept;\n"
        f"    {match} counter\n"
        f"    {match} numgen random mod 100 < {loss_percent} counter drop\n"
        "  }\n"
        "}\n"
    )
    net.run(net.client_ns, ["nft", "-f", "-"], input=rules)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    out, cap = _serve_and_load(
        net, pcap, snaplen,
        ("--count", str(connections), "--response", str(response), "--deadline", "30"),
        ("--count", str(connections), "--request", str(request), "--deadline", "20"), wait=10,
    )
    seen, dropped = _nft_counters(net, net.client_ns, LOSS_TABLE)
    setup = [
        f"server listen() backlog 128, accepts at once; client: {connections} sequential connections, "
        f"{request}-byte request, {response}-byte response, server closes first",
        f"server veth gso_max_segs 1 (one MSS per packet); tcpdump -s {snaplen}",
        f"client namespace, nftables input: `{match} numgen random mod 100 < {loss_percent} drop`: "
        f"dropped {dropped} of the server's {seen} packets",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra.update(server_packets=seen, dropped=dropped)
    return run


def _nft_counters(net: NetnsPair, ns: str, table: str) -> list[int]:
    """Packet counts of the table's counters, in rule order."""
    doc = json.loads(net.run(ns, ["nft", "-j", "list", "table", "inet", table]).stdout)
    counts = []
    for item in doc["nftables"]:
        for expr in item.get("rule", {}).get("expr", []):
            if "counter" in expr:
                counts.append(int(expr["counter"]["packets"]))
    return counts


def time_wait_reuse(
    net: NetnsPair,
    pcap: Path,
    connections: int = 2,
    source_port: int = 50000,
    request: int = 8_000_000,
    response: int = 1000,
    pause: float = 0.05,
    snaplen: int = 128,
) -> Run:
    """`connections` sequential connections from the same source port. The server closes first,
    so it keeps each 4-tuple in TIME-WAIT (60 s). The client sends a large request and has TCP
    timestamps off, so the next SYN's ISN (a clock ticking every 64 ns plus a hash of the
    4-tuple, Linux secure_tcp_seq()) is below the sequence number the TIME-WAIT socket expects:
    tcp_timewait_state_process() does not take the SYN as a new connection and answers with an
    ACK; the client, in SYN-SENT, resets that ACK and re-arms its SYN timer to the minimum
    (tcp_rcv_synsent_state_process(): TCP_TIMEOUT_MIN), the RST ends the TIME-WAIT socket
    (net.ipv4.tcp_rfc1337=0), and the SYN sent again a few ms later is accepted."""
    net.sysctl(net.client_ns, "net.ipv4.tcp_timestamps", 0)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    out, cap = _serve_and_load(
        net, pcap, snaplen,
        ("--count", str(connections), "--response", str(response), "--deadline", "20"),
        ("--count", str(connections), "--request", str(request), "--source-port", str(source_port), "--pause", str(pause),
         "--deadline", "15"),
    )
    setup = [
        f"server accepts at once, answers {response} bytes and closes first (it keeps TIME-WAIT)",
        f"client: tcp_timestamps=0, {connections} sequential connections all from port {source_port} "
        f"(SO_REUSEADDR), {request}-byte request, {pause:g} s apart; tcpdump -s {snaplen}",
    ]
    return _run(net, pcap, out, cap, before, started, setup)


# nginx in front of php-fpm: nginx in the client namespace (the proxy), php-fpm in the server
# namespace (the upstream), each with its own configuration in a temporary directory.
NGINX_PORT = 8080

NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
user root;
pid {tmp}/nginx.pid;
error_log {error_log} error;{debug_log}
events {{ worker_connections 256; }}
http {{
    {log_format}access_log {access_log}{format_name};
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    {upstream_block}server {{
        listen 127.0.0.1:{port};
        location / {{
            fastcgi_pass {pass_to};{keep_conn}{bind}
            fastcgi_param SCRIPT_FILENAME {tmp}/www/slow.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_connect_timeout {connect_timeout}s;
            fastcgi_read_timeout {read_timeout}s;
        }}
    }}
}}
"""

PHP_FPM_CONF = """\
[global]
pid = {tmp}/php-fpm.pid
error_log = {tmp}/php-fpm.log
daemonize = no

[www]
user = nobody
group = nogroup
listen = {listen}
listen.backlog = {backlog}
pm = static
pm.max_children = {children}
{extra}"""

PHP_SCRIPT = "<?php usleep({usec}); echo \"ok\\n\";\n"

# A usual custom access-log format with the upstream's address, status and timings
# (docs/evidence.md lists the names pcapq reads).
UPSTREAM_LOG_FORMAT = (
    "log_format upstream '$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent "
    "\"$http_referer\" \"$http_user_agent\" rt=$request_time ua=\"$upstream_addr\" us=\"$upstream_status\" "
    "uct=\"$upstream_connect_time\" uht=\"$upstream_header_time\" urt=\"$upstream_response_time\"';\n    "
)


def nginx_php_fpm(
    net: NetnsPair,
    pcap: Path,
    logs: Path,
    backlog: int = 2,
    children: int = 2,
    service_time: float = 0.5,
    requests: int = 40,
    concurrency: int = 20,
    connect_timeout: float = 2.0,
    read_timeout: float = 3.0,
    snaplen: int = 128,
    upstream_log: bool = False,
    access_logs: Mapping[str, str] | None = None,
    terminate_after: int | None = None,
    keepalive: int = 0,
    max_requests: int = 0,
    debug_log: bool = False,
    http_extra: str = "",
    bind_client_port: bool = False,
    linger: float = 0.0,
) -> Run:
    """php-fpm (`children` workers, each request taking `service_time` s) listening with
    listen.backlog `backlog` in the server namespace; nginx in the client namespace passing every
    request to it (fastcgi_connect_timeout, fastcgi_read_timeout); `ab` sends `requests`
    requests, `concurrency` at a time. php-fpm answers children / service_time requests a second,
    the rest wait in its listen queues or overflow them: nginx logs 504 (timed out) or 502.
    nginx's error.log and access.log are copied to `logs`.error.log / `logs`.access.log; with
    `upstream_log`, the access log has the upstream's address, status and timings. Each of
    `access_logs` (a name -> a log_format directive's arguments after its name: "'$msec $status
    ...'" or "escape=json '{...}'") is one more access log of the same requests in that format,
    `logs`.NAME.access.log, the name nginx itself wrote it under (nginx.conf, which says which
    format each file has, is copied to `logs`.nginx.conf). With
    `terminate_after`, php-fpm's request_terminate_timeout: its master kills a worker whose
    request has run that many seconds. With `keepalive`, nginx keeps that many idle connections
    to php-fpm open for the next requests (an upstream block's `keepalive`, `fastcgi_keep_conn
    on`); with `max_requests`, php-fpm's pm.max_requests: a worker exits after that many. With
    `debug_log`, nginx also writes its debug log (`error_log ... debug`: each request's steps,
    its upstream connection's among them) to `logs`.debug.log. `http_extra`: more directives in
    nginx's http block (the `map`s a log_format's own variables are made with). With
    `bind_client_port`, nginx connects to php-fpm from the port its own client came from
    (`fastcgi_bind` to `$remote_port`): an access log with `$connection $remote_port` then names
    each request's upstream connection, and an error line's `*N` its request. The capture goes
    on `linger` s after the load ends: the FINs nginx's closes queued behind unacknowledged
    requests leave once the requests are acknowledged."""
    import shutil
    import tempfile

    def custom_log(name: str) -> str:
        return f"{logs.name}.{name}.access.log"

    php_fpm = next((p for p in ("php-fpm", *(f"php-fpm{v}" for v in ("8.4", "8.3", "8.2", "8.1", "8.0", "7.4")))
                    if shutil.which(p)), None)
    if php_fpm is None:
        raise LabError("php-fpm is not installed; install with: apt-get install php-fpm")
    upstream = f"{net.server_ip}:{PORT}"
    with tempfile.TemporaryDirectory(prefix="pcapq-lab-") as tmp_name:
        tmp = Path(tmp_name)
        tmp.chmod(0o755)  # php-fpm's workers (nobody) read the script
        (tmp / "www").mkdir(mode=0o755)
        (tmp / "www" / "slow.php").write_text(PHP_SCRIPT.format(usec=int(service_time * 1e6)))
        extra = (f"request_terminate_timeout = {terminate_after}s\n" if terminate_after else "") + (
            f"pm.max_requests = {max_requests}\n" if max_requests else "")
        (tmp / "php-fpm.conf").write_text(PHP_FPM_CONF.format(tmp=tmp, listen=upstream, backlog=backlog,
                                                              children=children, extra=extra))
        error_log, access_log = tmp / "error.log", tmp / "access.log"
        (tmp / "nginx.conf").write_text(NGINX_CONF.format(
            tmp=tmp, error_log=error_log, access_log=access_log, port=NGINX_PORT,
            debug_log=f"\nerror_log {tmp / 'debug.log'} debug;" if debug_log else "",
            upstream_block=f"upstream php {{ server {upstream}; keepalive {keepalive}; }}\n    " if keepalive else "",
            pass_to="php" if keepalive else upstream, keep_conn="\n            fastcgi_keep_conn on;" if keepalive else "",
            bind=f"\n            fastcgi_bind {net.client_ip}:$remote_port;" if bind_client_port else "",
            log_format=http_extra + "".join(f"log_format {name} {fmt};\n    access_log {tmp / custom_log(name)} {name};\n    "
                               for name, fmt in (access_logs or {}).items()) + (UPSTREAM_LOG_FORMAT if upstream_log else ""),
            format_name=" upstream" if upstream_log else "",
            connect_timeout=f"{connect_timeout:g}", read_timeout=f"{read_timeout:g}"))
        started = time.monotonic()
        before = net.nstat(net.server_ns)
        net.say(f"php-fpm in the server namespace on {upstream}: listen.backlog {backlog}, "
                f"{children} workers, {service_time:g} s per request")
        fpm = net.popen(net.server_ns, [php_fpm, "-R", "-F", "-y", str(tmp / "php-fpm.conf")],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        net.say(f"nginx in the client namespace on 127.0.0.1:{NGINX_PORT}, fastcgi_pass {upstream}, "
                f"fastcgi_connect_timeout {connect_timeout:g}s, fastcgi_read_timeout {read_timeout:g}s")
        nginx = net.popen(net.client_ns, ["nginx", "-c", str(tmp / "nginx.conf"), "-p", str(tmp)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_listening(net, net.server_ns, PORT, fpm, php_fpm)
            _wait_listening(net, net.client_ns, NGINX_PORT, nginx, "nginx")
            with net.capture(pcap, bpf=["tcp", "port", str(PORT)], snaplen=snaplen) as cap:
                net.say(f"ab: {requests} requests, {concurrency} at a time, through nginx; `ss -lnt` in the "
                        "server namespace every 0.2 s meanwhile")
                ab = net.popen(net.client_ns, ["ab", "-n", str(requests), "-c", str(concurrency), "-s", "30",
                                               f"http://127.0.0.1:{NGINX_PORT}/slow.php"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                ss_text = _fullest_listener(net, ab, deadline=time.monotonic() + 120)
                ab_out, _ = ab.communicate(timeout=10)
                time.sleep(linger)
        finally:
            net.stop(nginx)
            net.stop(fpm)
        logs.with_name(logs.name + ".ss.txt").write_text(ss_text)
        shutil.copyfile(error_log, logs.with_name(logs.name + ".error.log"))
        shutil.copyfile(access_log, logs.with_name(logs.name + ".access.log"))
        for name in access_logs or {}:
            shutil.copyfile(tmp / custom_log(name), logs.with_name(custom_log(name)))
        shutil.copyfile(tmp / "nginx.conf", logs.with_name(logs.name + ".nginx.conf"))
        if debug_log:
            shutil.copyfile(tmp / "debug.log", logs.with_name(logs.name + ".debug.log"))
        statuses = [line.split('" ', 1)[1].split()[0] for line in access_log.read_text().splitlines() if '" ' in line]
    setup = [
        f"server: php-fpm, listen {upstream}, listen.backlog {backlog}, pm static, {children} workers, "
        f"{service_time:g} s per request (usleep)"
        + (f", request_terminate_timeout {terminate_after}s" if terminate_after else "")
        + (f", pm.max_requests {max_requests}" if max_requests else "") + "; namespace defaults otherwise",
        f"client: nginx on 127.0.0.1:{NGINX_PORT}, fastcgi_pass {upstream}, fastcgi_connect_timeout "
        f"{connect_timeout:g}s, fastcgi_read_timeout {read_timeout:g}s"
        + (f"; upstream keepalive {keepalive}, fastcgi_keep_conn on" if keepalive else "")
        + ("; fastcgi_bind to the client's port ($remote_port)" if bind_client_port else ""),
        f"load: ab -n {requests} -c {concurrency} in the client namespace; tcpdump -s {snaplen} port {PORT}"
        + (f", {linger:g} s past the load" if linger else ""),
    ]
    run = _run(net, pcap, "", cap, before, started, setup)
    run.extra.update(statuses={s: statuses.count(s) for s in sorted(set(statuses))}, ab=ab_out)
    return run


# httplog's fields and the backend connection's source (%bi:%bp) and target (%si:%sp).
HAPROXY_EXACT_LOG = ("%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq "
                     "%bi:%bp %si:%sp %{+Q}r")

HAPROXY_CFG = """\
global
    log stdout format raw local0
defaults
    mode {mode}
    log global
    {log}
    retries 0
    timeout connect {connect_timeout}s
    timeout client 30s
    timeout server {server_timeout}s
frontend in
    bind 127.0.0.1:{port}
    default_backend app
backend app
    server app1 {upstream}
"""


def haproxy_overflow(
    net: NetnsPair,
    pcap: Path,
    logs: Path,
    backlog: int = 1,
    accept_delay: float = 6.0,
    connections: int = 10,
    connect_timeout: float = 2.0,
    server_timeout: float = 3.0,
    request: int = 100,
    response: int = 1000,
    snaplen: int = 128,
    mode: str = "tcp",
    log_format: str | None = None,
    server_options: tuple[str, ...] | None = (),
) -> Run:
    """HAProxy (`mode` tcp or http, option tcplog or httplog unless `log_format` is given,
    retries 0) in the client namespace in front of a server that listens with `backlog` and
    calls accept() only after `accept_delay` s, while `connections` clients connect through it
    at once: the accept queue overflows; HAProxy gives up at its `timeout connect` (state sC)
    or `timeout server` (sD, sH). `server_options` are the server's further options (peers.py
    server); None: no server at all, so the kernel refuses each connect (SC). Its log (to
    stdout, raw) is copied to `logs`.haproxy.log and its configuration to `logs`.haproxy.cfg."""
    import shutil
    import tempfile

    if shutil.which("haproxy") is None:
        raise LabError("haproxy is not installed; install with: apt-get install haproxy")
    upstream = f"{net.server_ip}:{PORT}"
    with tempfile.TemporaryDirectory(prefix="pcapq-haproxy-") as tmp_name:
        tmp = Path(tmp_name)
        cfg = tmp / "haproxy.cfg"
        log = f'log-format "{log_format}"' if log_format else f"option {mode}log"
        cfg.write_text(HAPROXY_CFG.format(mode=mode, log=log, connect_timeout=f"{connect_timeout:g}",
                                          server_timeout=f"{server_timeout:g}", port=NGINX_PORT, upstream=upstream))
        log_path = tmp / "haproxy.log"
        http = ["--http"] if mode == "http" else []
        started = time.monotonic()
        before = net.nstat(net.server_ns)
        server = None if server_options is None else start_server(
            net, "--backlog", str(backlog), "--accept-delay", str(accept_delay), "--count", str(connections),
            "--response", str(response), "--deadline", "25", *http, *server_options)
        with open(log_path, "w") as out:
            proxy = net.popen(net.client_ns, ["haproxy", "-db", "-f", str(cfg)], stdout=out, stderr=subprocess.DEVNULL)
        try:
            _wait_listening(net, net.client_ns, NGINX_PORT, proxy, "haproxy")
            with net.capture(pcap, bpf=["tcp", "port", str(PORT)], snaplen=snaplen) as cap:
                net.say(f"client load: {connections} connections at once through haproxy on 127.0.0.1:{NGINX_PORT}")
                clients = net.run(net.client_ns, [*PEERS, "client", "127.0.0.1", str(NGINX_PORT), "--concurrent", "--count",
                                                  str(connections), "--request", str(request), "--deadline", "15", *http],
                                  timeout=30).stdout
        finally:
            net.stop(proxy)
            if server is not None:
                net.stop(server)
        shutil.copyfile(log_path, logs.with_name(logs.name + ".haproxy.log"))
        shutil.copyfile(cfg, logs.with_name(logs.name + ".haproxy.cfg"))
    serving = (f"server listen() backlog {backlog}, first accept() {accept_delay:g} s after listen(); {response}-byte response"
               + (f" ({' '.join(server_options)})" if server_options else "")) if server_options is not None else "no server listening"
    setup = [
        serving,
        f"client: haproxy 2 (mode {mode}, " + (f"log-format {log_format!r}" if log_format else f"option {mode}log")
        + f", retries 0, timeout connect {connect_timeout:g}s, timeout server "
        f"{server_timeout:g}s) on 127.0.0.1:{NGINX_PORT}, server app1 {upstream}; {connections} connections at once "
        f"through it, {request}-byte request each",
        f"tcpdump -s {snaplen} port {PORT}",
    ]
    run = _run(net, pcap, clients, cap, before, started, setup)
    return run


# Two frontends in one configuration, each writing its own log: `web` with option httplog to
# stdout, in front of a listener whose accept queue overflows; `api` with the log-format that names
# the backend connection's source (%bi:%bp) to stderr, in front of a server that resets each
# request. `web` also sends each line as RFC 5424 syslog, its structured data carrying %bp, to a
# collector: what its httplog lines are checked against.
HAPROXY_FRONTENDS_CFG = """\
defaults
    mode http
    retries 0
    timeout connect {connect_timeout}s
    timeout client 30s
    timeout server {server_timeout}s
frontend web
    bind 127.0.0.1:{web_port}
    log stdout format raw local0
    log 127.0.0.1:{collector_port} format rfc5424 local0
    option httplog
    log-format-sd "[source@1 bp=\\"%bp\\"]"
    default_backend overflowing
frontend api
    bind 127.0.0.1:{api_port}
    log stderr format raw local0
    log-format "{exact_log}"
    default_backend resetting
backend overflowing
    server app1 {upstream}
backend resetting
    server app2 {resetting}
"""
# Writes each syslog datagram on 127.0.0.1:PORT to FILE, one a line, until stopped.
COLLECTOR = ("import socket, sys\n"
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
             "out = open(sys.argv[2], 'wb', buffering=0)\n"
             "print('ready', flush=True)\n"
             "while True:\n"
             "    out.write(s.recv(65535).rstrip(b'\\n') + b'\\n')\n")
COLLECTOR_PORT = 5514
API_PORT = 8081
SOURCE_PORT_SD = re.compile(r'\[source@1 bp="(\d+)"\] (\S+):(\d+) ')


def haproxy_frontends(
    net: NetnsPair,
    pcap: Path,
    logs: Path,
    web_connections: int = 10,
    api_connections: int = 5,
    backlog: int = 1,
    accept_delay: float = 6.0,
    connect_timeout: float = 2.0,
    server_timeout: float = 3.0,
    interval: float = 0.01,
    snaplen: int = 128,
) -> Run:
    """HAProxy (HAPROXY_FRONTENDS_CFG) with two frontends, each with its own log: `web` (option
    httplog) passes `web_connections`, `interval` s apart, to a listener of `backlog` that calls
    accept() only after `accept_delay` s (its accept queue overflows: sC, sH); `api` (the log-format with
    %bi:%bp) passes `api_connections` to a server on port PORT+1 that resets each request (SH).
    Copied beside `logs`: .web.log, .api.log, .haproxy.cfg, and .web.truth (each web line's
    client port and the backend source port its RFC 5424 copy said, "client_port source_port")."""
    import shutil
    import tempfile

    if shutil.which("haproxy") is None:
        raise LabError("haproxy is not installed; install with: apt-get install haproxy")
    upstream, resetting = f"{net.server_ip}:{PORT}", f"{net.server_ip}:{PORT + 1}"
    with tempfile.TemporaryDirectory(prefix="pcapq-haproxy-") as tmp_name:
        tmp = Path(tmp_name)
        cfg = tmp / "haproxy.cfg"
        cfg.write_text(HAPROXY_FRONTENDS_CFG.format(
            connect_timeout=f"{connect_timeout:g}", server_timeout=f"{server_timeout:g}", web_port=NGINX_PORT,
            api_port=API_PORT, collector_port=COLLECTOR_PORT, exact_log=HAPROXY_EXACT_LOG, upstream=upstream,
            resetting=resetting))
        web_log, api_log, collected = tmp / "web.log", tmp / "api.log", tmp / "collected.log"
        started = time.monotonic()
        before = net.nstat(net.server_ns)
        overflowing = start_server(net, "--backlog", str(backlog), "--accept-delay", str(accept_delay), "--count",
                                   str(web_connections), "--response", "1000", "--deadline", "25", "--http")
        resets = start_server(net, "--backlog", "16", "--count", str(api_connections), "--rst-before-reply", "--threads",
                              "--deadline", "25", "--http", port=PORT + 1)
        collector = net.popen(net.client_ns, [sys.executable, "-c", COLLECTOR, str(COLLECTOR_PORT), str(collected)],
                              stdout=subprocess.PIPE, text=True)
        assert collector.stdout is not None
        collector.stdout.readline()
        with open(web_log, "w") as out, open(api_log, "w") as err:
            proxy = net.popen(net.client_ns, ["haproxy", "-db", "-f", str(cfg)], stdout=out, stderr=err)
        try:
            _wait_listening(net, net.client_ns, NGINX_PORT, proxy, "haproxy")
            _wait_listening(net, net.client_ns, API_PORT, proxy, "haproxy")
            bpf = ["tcp", "and", "(", "port", str(PORT), "or", "port", str(PORT + 1), ")"]
            with net.capture(pcap, bpf=bpf, snaplen=snaplen) as cap:
                net.say(f"client load: {web_connections} connections at once to web (127.0.0.1:{NGINX_PORT}), "
                        f"{api_connections} to api (127.0.0.1:{API_PORT})")
                api = net.popen(net.client_ns, [*PEERS, "client", "127.0.0.1", str(API_PORT), "--concurrent", "--count",
                                                str(api_connections), "--request", "100", "--deadline", "15", "--http"],
                                stdout=subprocess.PIPE, text=True)
                clients = net.run(net.client_ns, [*PEERS, "client", "127.0.0.1", str(NGINX_PORT), "--concurrent", "--count",
                                                  str(web_connections), "--interval", str(interval), "--request", "100",
                                                  "--deadline", "15", "--http"], timeout=30).stdout
                clients += api.communicate(timeout=30)[0]
        finally:
            net.stop(proxy)
            net.stop(collector)
            net.stop(overflowing)
            net.stop(resets)
        # haproxy's own notices on stderr (not log lines) stay out of the api log.
        api_lines = [line for line in api_log.read_text().splitlines() if re.match(r"[0-9A-Fa-f:.]+:\d+ \[", line)]
        logs.with_name(logs.name + ".api.log").write_text("".join(f"{line}\n" for line in api_lines))
        shutil.copyfile(web_log, logs.with_name(logs.name + ".web.log"))
        shutil.copyfile(cfg, logs.with_name(logs.name + ".haproxy.cfg"))
        truth = [f"{m.group(3)} {m.group(1)}" for m in map(SOURCE_PORT_SD.search, collected.read_text().splitlines()) if m]
        logs.with_name(logs.name + ".web.truth").write_text("".join(f"{line}\n" for line in truth))
    setup = [
        f"servers: {upstream} listen() backlog {backlog}, first accept() {accept_delay:g} s after listen(); "
        f"{resetting} resets each request (SO_LINGER 0)",
        f"client: haproxy 2 (mode http, retries 0, timeout connect {connect_timeout:g}s, timeout server {server_timeout:g}s), "
        f"frontend web (option httplog, to stdout) -> {upstream}, frontend api (log-format with %bi:%bp, to stderr) -> "
        f"{resetting}; {web_connections} connections {interval:g} s apart through web, {api_connections} at once through api",
        f"tcpdump -s {snaplen} port {PORT} or port {PORT + 1}",
    ]
    return _run(net, pcap, clients, cap, before, started, setup)


def _fullest_listener(net: NetnsPair, load: subprocess.Popen[Any], deadline: float) -> str:
    """`ss -lnt` on the upstream's port every 0.2 s while `load` runs: the snapshot whose Recv-Q
    (connections waiting to be accepted) was highest, with its time in a comment."""
    best, best_waiting = "", -1
    while load.poll() is None and time.monotonic() < deadline:
        out = net.run(net.server_ns, ["ss", "-lnt", f"sport = :{PORT}"], check=False).stdout
        waiting = max((int(line.split()[1]) for line in out.splitlines()[1:] if line.startswith("LISTEN")), default=0)
        if waiting > best_waiting:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
            best, best_waiting = f"# `ss -lnt sport = :{PORT}` in the server namespace at {stamp} UTC, the fullest of the run\n{out}", waiting
        time.sleep(0.2)
    if load.poll() is None:
        load.kill()
    return best


def nginx_php_fpm_slow(net: NetnsPair, pcap: Path, logs: Path) -> Run:
    """nginx in front of php-fpm whose script takes longer than nginx's read timeout, with workers
    and backlog enough for the load: no listen queue overflows, every request is accepted, and
    nginx gives up on each after fastcgi_read_timeout (504, "upstream timed out (110) while
    reading response header"), closing its side while php-fpm still works. The access log has
    the upstream's address, status and timings."""
    return nginx_php_fpm(net, pcap, logs, backlog=128, children=8, service_time=3.5, requests=16,
                         concurrency=8, connect_timeout=2.0, read_timeout=2.0, upstream_log=True)


def nginx_php_fpm_killed(net: NetnsPair, pcap: Path, logs: Path) -> Run:
    """nginx in front of php-fpm whose script takes longer than php-fpm's
    request_terminate_timeout, and nginx waits longer still: php-fpm's master kills each worker
    mid-request, its kernel resets the worker's connection before any answer (part of the request
    unread: tcp_close()), and nginx logs "recv() failed (104: Connection reset by peer) while
    reading response header from upstream" (502)."""
    return nginx_php_fpm(net, pcap, logs, backlog=128, children=4, service_time=4.0, requests=8,
                         concurrency=4, connect_timeout=2.0, read_timeout=10.0, upstream_log=True,
                         terminate_after=1)


# Access logs of one run, each a way nginx is told to write times to the millisecond, and the
# connection's number with the client's port (the upstream connection's own, `bind_client_port`).
MS_ACCESS_LOGS = {
    "json": "escape=json '{\"msec\":\"$msec\",\"status\":\"$status\",\"request\":\"$request\","
            "\"upstream_addr\":\"$upstream_addr\",\"upstream_status\":\"$upstream_status\","
            "\"upstream_connect_time\":\"$upstream_connect_time\",\"upstream_header_time\":\"$upstream_header_time\","
            "\"request_time\":\"$request_time\"}'",
    "key_value": "'$msec $status rt=$request_time ua=$upstream_addr us=$upstream_status uct=$upstream_connect_time "
                 "uht=$upstream_header_time urt=$upstream_response_time'",
    "iso_ms": "'$iso_date.$iso_ms$iso_zone $status request=\"$request\" ua=$upstream_addr us=$upstream_status "
              "uct=$upstream_connect_time rt=$request_time'",
    "source": "'$msec $connection $remote_port $status'",
}
# `$time_iso8601` with milliseconds, as nginx configurations make it (its own has none).
ISO_MS_MAPS = ("map $time_iso8601 $iso_date { ~^(?<d>[^+]+) $d; }\n    "
               "map $time_iso8601 $iso_zone { ~(?<z>[+-]\\d\\d:\\d\\d)$ $z; }\n    "
               "map $msec $iso_ms { ~\\.(?<m>\\d+)$ $m; }\n    ")


def nginx_php_fpm_logs(net: NetnsPair, pcap: Path, logs: Path, requests: int = 160, concurrency: int = 40) -> Run:
    """nginx_php_fpm under more load, its access log written in each of MS_ACCESS_LOGS's formats
    (`logs`.NAME.access.log), the capture going on 5 s after the load: many requests fail in each
    second, so an error line's second alone does not say which connection it was about. nginx connects to php-fpm from its client's port
    (`bind_client_port`): the `source` log (`$connection $remote_port`) says each request's
    connection, and the error line's `*N` its request."""
    return nginx_php_fpm(net, pcap, logs, requests=requests, concurrency=concurrency, upstream_log=True,
                         access_logs=MS_ACCESS_LOGS, http_extra=ISO_MS_MAPS, bind_client_port=True, linger=5.0)


def nginx_php_fpm_read_timeout(net: NetnsPair, pcap: Path, logs: Path, read_timeout: float) -> Run:
    """nginx_php_fpm with `fastcgi_read_timeout` `read_timeout` (the connect timeout a second
    longer) under load enough that some requests wait longer: 6 per second of the timeout, and 6
    more, at a time, twice as many in all; the capture goes on past the load for the FINs nginx's
    closes queued behind unacknowledged requests."""
    concurrency = int(6 * read_timeout) + 6
    return nginx_php_fpm(net, pcap, logs, requests=2 * concurrency, concurrency=concurrency, read_timeout=read_timeout,
                         connect_timeout=read_timeout + 1, linger=read_timeout + 2)


def nginx_php_fpm_max_requests(net: NetnsPair, pcap: Path, logs: Path) -> Run:
    """nginx keeping its connections to php-fpm alive for the next requests, and php-fpm's
    workers exiting after 3 requests each (pm.max_requests): a worker closes its connection
    after its third answer, often just as nginx sends the fourth on it. nginx logs "upstream
    prematurely closed connection while reading response header from upstream" and sends the
    request again on another connection (a GET is idempotent): its clients get 200."""
    return nginx_php_fpm(net, pcap, logs, backlog=511, children=4, service_time=0.005, requests=200,
                         concurrency=8, connect_timeout=2.0, read_timeout=5.0, upstream_log=True,
                         keepalive=8, max_requests=3)


def _wait_listening(net: NetnsPair, ns: str, port: int, proc: subprocess.Popen[Any], name: str,
                    timeout: float = 10) -> None:
    """Waits until something listens on `port` in `ns` (ss -lnt)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"{name} exited with status {proc.returncode} before listening")
        out = net.run(ns, ["ss", "-Hlnt", f"sport = :{port}"], check=False).stdout
        if out.strip():
            return
        time.sleep(0.05)
    raise LabError(f"nothing listens on port {port} after {timeout:g} s")


def defer_accept(
    net: NetnsPair,
    pcap: Path,
    defer: int = 2,
    preconnects: int = 3,
    idle: float = 4.5,
    connections: int = 5,
    request: int = 100,
    response: int = 1000,
    snaplen: int = 128,
) -> Run:
    """A listener with TCP_DEFER_ACCEPT `defer` s (Apache's AcceptFilter, nginx's `deferred`)
    and accept() at once. `preconnects` clients connect and send nothing for `idle` s; meanwhile
    `connections` ordinary exchanges. The listener drops a bare handshake ACK and keeps the
    request socket (Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_check_req()); its SYN-ACK timer
    re-sends nothing while the ACK is noted, except once at the end of the defer period
    (net/ipv4/inet_connection_sock.c: syn_ack_recalc()), whose ACK then creates the connection.
    The accept queue never fills."""
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    total = preconnects + connections
    server = start_server(net, "--defer-accept", str(defer), "--count", str(total), "--response", str(response),
                          "--deadline", "30")
    try:
        with net.capture(pcap, bpf=["tcp"], snaplen=snaplen) as cap:
            net.say(f"client load from {net.client_ip}: {preconnects} preconnects, idle {idle:g} s before their "
                    f"request, and {connections} ordinary exchanges meanwhile")
            idle_clients = net.popen(
                net.client_ns,
                [*PEERS, "preconnect", net.server_ip, str(PORT), "--count", str(preconnects), "--idle", str(idle),
                 "--request", str(request)],
                stdout=subprocess.PIPE, text=True,
            )
            time.sleep(0.3)
            out = _client(net, "--count", str(connections), "--request", str(request), "--pause", "0.1",
                          "--deadline", "15")
            idle_out, _ = idle_clients.communicate(timeout=idle + 15)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(5)
    finally:
        net.stop(server)
    setup = [
        f"server: TCP_DEFER_ACCEPT {defer} s, listen() backlog 128, accepts at once, one connection at a time",
        f"client: {preconnects} connections opened at once that send their {request}-byte request only after "
        f"{idle:g} s; 0.3 s later {connections} sequential exchanges ({request}-byte request, {response}-byte "
        f"response); tcpdump -s {snaplen}",
    ]
    return _run(net, pcap, idle_out + out, cap, before, started, setup)


def reuseport_stuck_listener(
    net: NetnsPair,
    pcap: Path,
    listeners: int = 4,
    backlog: int = 3,
    prefill: int = 2,
    stuck_for: float = 4.0,
    connections: int = 32,
    request: int = 24,
    response: int = 1000,
) -> Run:
    """`listeners` SO_REUSEPORT sockets on one port in one server process (as nginx's or
    envoy's workers). Listener 0 has listen(`backlog`) and is stuck: its first accept() comes
    `stuck_for` s after listen(); the others serve at once. Before the capture, listener 0
    listens alone and `prefill` connections (request sent, answer awaited) wait in its accept
    queue. Then `connections` clients connect at once, their SYNs ahead of their ACKs (the tbf
    shaping of _burst()). The kernel picks a listener by a hash of the 4-tuple (Linux v6.6
    net/core/sock_reuseport.c: reuseport_select_sock()), so about one connection in
    `listeners` meets the stuck listener: the first few fill its accept queue, the handshake
    ACKs and requests of the rest are dropped and its SYN-ACKs re-sent, while the other
    connections are answered in the same second."""
    assert 66 + request <= SHAPE_BURST and prefill <= backlog
    net.sysctl(net.server_ns, "net.ipv4.tcp_syncookies", 1)
    net.sysctl(net.server_ns, "net.ipv4.tcp_abort_on_overflow", 0)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    net.say(f"server: {listeners} SO_REUSEPORT listeners on {net.server_ip}:{PORT}; listener 0 listen({backlog}) "
            f"accepts only after {stuck_for:g} s, the others at once")
    server = net.popen(
        net.server_ns,
        [*PEERS, "reuseport", net.server_ip, str(PORT), "--listeners", str(listeners), "--backlog", str(backlog),
         "--prefill", "--accept-delay", str(stuck_for), "--response", str(response),
         "--deadline", str(stuck_for + 15)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout is not None and server.stdin is not None
        sel = selectors.DefaultSelector()
        sel.register(server.stdout, selectors.EVENT_READ)
        if not sel.select(10) or server.stdout.readline().strip() != "ready0":
            raise LabError("the scenario's server did not start")
        net.say(f"{prefill} connections wait in listener 0's accept queue (before the capture)")
        waiting = net.popen(net.client_ns, [*PEERS, "preconnect", net.server_ip, str(PORT), "--count", str(prefill),
                                            "--idle", "0", "--request", str(request), "--timeout", "20"],
                            stdout=subprocess.DEVNULL)
        _wait_accept_queue(net, PORT, prefill, waiting)
        server.stdin.write("go\n")
        server.stdin.flush()
        if not sel.select(10) or server.stdout.readline().strip() != "ready":
            raise LabError("the scenario's other listeners did not start")
        net.shape_egress(net.client_ns, net.client_if, REUSEPORT_RATE, burst=SHAPE_BURST)
        with net.capture(pcap, bpf=["tcp"]) as cap:
            out = _client(net, "--concurrent", "--count", str(connections), "--filler", str(REUSEPORT_FILLER),
                          "--request", str(request), "--deadline", str(stuck_for + 10), timeout=stuck_for + 25)
        with contextlib.suppress(subprocess.TimeoutExpired):
            waiting.wait(5)
    finally:
        net.stop(server)
    setup = [
        f"server: {listeners} SO_REUSEPORT listeners on port {PORT} in one process; listener 0 listen({backlog}), "
        f"first accept() {stuck_for:g} s after listen(), {prefill} connections already waiting in its accept "
        "queue when the capture starts; the others listen(128) and serve at once",
        f"client: {connections} non-blocking connects at once, {request}-byte request each, {response}-byte response",
        f"client egress: tc tbf rate {REUSEPORT_RATE} burst {SHAPE_BURST}, {REUSEPORT_FILLER} UDP datagrams ahead "
        "of the burst (SYNs reach the listeners before the handshake ACKs)",
    ]
    return _run(net, pcap, out, cap, before, started, setup)


# Faster than SHAPE_RATE: with 32 connections, 100 kbit/s queues the clients' ACKs for longer
# than the server's retransmission timeout (spurious re-sends). 30 filler datagrams (~25 ms at
# 1 Mbit/s) still put every SYN ahead of the handshake ACKs.
REUSEPORT_RATE = "1mbit"
REUSEPORT_FILLER = 30


def _wait_accept_queue(net: NetnsPair, port: int, count: int, proc: subprocess.Popen[Any], timeout: float = 10) -> None:
    """Waits until the listener on `port` has `count` connections in its accept queue (ss -lnt:
    Recv-Q of a listener)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"the connections to fill the accept queue ended early ({proc.returncode})")
        for line in net.run(net.server_ns, ["ss", "-Hlnt", f"sport = :{port}"], check=False).stdout.splitlines():
            if int(line.split()[1]) >= count:
                return
        time.sleep(0.05)
    raise LabError(f"the accept queue on port {port} did not reach {count}")


FIREWALL_TABLE = "pcapq_firewall"


def firewall_drop(
    net: NetnsPair,
    pcap: Path,
    connections: int = 10,
    every: int = 2,
    request: int = 100,
    response: int = 1000,
    snaplen: int = 128,
) -> Run:
    """A healthy listener behind a firewall: nftables in the server namespace drops one SYN to
    the port in `every` (numgen inc, so the same SYNs on every run) on input, after tcpdump on
    the server's veth saw it. `connections` clients connect at once; a dropped SYN is sent again
    after 1 s. The listener never sees those SYNs: nstat's TcpExtListenDrops stays 0, the nft
    counter has them."""
    match = f"ip daddr {net.server_ip} tcp dport {PORT} tcp flags & (syn | ack) == syn"
    rules = (
        f"table inet {FIREWALL_TABLE} {{\n"
        "  chain input {\n"
        "    type filter hook input priority 0; policy accept;\n"
        f"    {match} counter\n"
        f"    {match} numgen inc mod {every} == 0 counter drop\n"
        "  }\n"
        "}\n"
    )
    net.run(net.server_ns, ["nft", "-f", "-"], input=rules)
    net.say(f"nftables in the server namespace drops one SYN to port {PORT} in {every}")
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    out, cap = _serve_and_load(
        net, pcap, snaplen,
        ("--count", str(connections), "--response", str(response), "--deadline", "20"),
        ("--concurrent", "--count", str(connections), "--request", str(request), "--deadline", "15"),
    )
    seen, dropped = _nft_counters(net, net.server_ns, FIREWALL_TABLE)
    setup = [
        f"server listen() backlog 128, accepts at once; client: {connections} non-blocking connects at once, "
        f"{request}-byte request, {response}-byte response; tcpdump -s {snaplen}",
        f"server namespace, nftables input: `{match} numgen inc mod {every} == 0 drop`: "
        f"nft counters: {seen} SYNs seen, {dropped} dropped",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra.update(syns=seen, dropped=dropped)
    return run


def tfo_fallback(
    net: NetnsPair,
    pcap: Path,
    connections: int = 5,
    request: int = 200,
    response: int = 1000,
    snaplen: int = 128,
) -> Run:
    """TCP Fast Open refused by the server: the client (net.ipv4.tcp_fastopen=0x5, client on and
    data in the SYN without a cookie: TFO_CLIENT_NO_COOKIE) puts its request in the SYN; the
    server has TFO off (tcp_fastopen=0), so it drops the SYN's data and its SYN-ACK acknowledges
    only the SYN. The client sends the data again right after its ACK (RFC 7413 §4.2.2; Linux
    v6.6 net/ipv4/tcp_input.c: tcp_rcv_fastopen_synack()). Nothing is lost."""
    net.sysctl(net.client_ns, "net.ipv4.tcp_fastopen", 5)
    net.sysctl(net.server_ns, "net.ipv4.tcp_fastopen", 0)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    client_before = net.nstat(net.client_ns)
    out, cap = _serve_and_load(
        net, pcap, snaplen,
        ("--count", str(connections), "--response", str(response), "--deadline", "20"),
        ("--count", str(connections), "--fastopen", "--request", str(request), "--pause", "0.05", "--deadline", "15"),
    )
    client_after = net.nstat(net.client_ns)
    fails = client_after.get("TcpExtTCPFastOpenActiveFail", 0) - client_before.get("TcpExtTCPFastOpenActiveFail", 0)
    setup = [
        f"client: net.ipv4.tcp_fastopen=0x5; {connections} sequential connections, the {request}-byte request "
        f"sent with MSG_FASTOPEN (in the SYN); {response}-byte response; tcpdump -s {snaplen}",
        "server: net.ipv4.tcp_fastopen=0 (TFO off), listen() backlog 128, accepts at once",
        f"client namespace: TcpExtTCPFastOpenActiveFail +{fails} (SYN data not acknowledged)",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra["tfo_active_fail"] = fails
    return run


SCAN_PORTS = "8500-9499"  # 1,000 ports, PORT and PORT + 1 among them


def port_scan(net: NetnsPair, pcap: Path, technique: str = "-sS", snaplen: int = 128) -> Run:
    """nmap (`technique`: -sS SYN scan with raw packets, -sT connect scan with the kernel's
    connect()) from the client namespace against the server namespace's address, 1,000 ports
    (SCAN_PORTS), two of them open (a listener that never accepts: the kernel completes the
    handshakes). -Pn -n: no host discovery, no DNS."""
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    net.say(f"server: listeners on {net.server_ip} ports {PORT} and {PORT + 1}")
    server = net.popen(net.server_ns, [*PEERS, "listen", net.server_ip, str(PORT), "--also", str(PORT + 1),
                                       "--deadline", "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(server.stdout, selectors.EVENT_READ)
        if not sel.select(10) or server.stdout.readline().strip() != "ready":
            raise LabError("the scenario's server did not start")
        argv = ["nmap", technique, "-Pn", "-n", "-T4", "--max-retries", "1", "--host-timeout", "60s",
                "-p", SCAN_PORTS, net.server_ip]
        with net.capture(pcap, bpf=["tcp"], snaplen=snaplen) as cap:
            net.say(f"client: {' '.join(argv)}")
            nmap = net.run(net.client_ns, argv, timeout=90)
    finally:
        net.stop(server)
    open_ports = [line.split("/")[0] for line in nmap.stdout.splitlines() if "/tcp" in line and " open " in line]
    setup = [
        f"server: listeners on ports {PORT} and {PORT + 1} (listen() backlog 128, never accept()); "
        "nothing else listens",
        f"client: {' '.join(argv)}; tcpdump -s {snaplen}",
        f"nmap found open: {', '.join(open_ports) or 'none'}",
    ]
    run = _run(net, pcap, "", cap, before, started, setup)
    run.extra.update(open_ports=open_ports, nmap=nmap.stdout)
    return run


def keepalive_race(
    net: NetnsPair,
    pcap: Path,
    connections: int = 3,
    keep_alive: float = 0.5,
    idle: float = 1.0,
    request: int = 100,
    response: int = 1000,
    snaplen: int = 128,
) -> Run:
    """A server that closes a keep-alive connection after `keep_alive` s without a request, and a
    client that sends its second request on the connection `idle` s after the first answer, after
    the server's FIN: the server's application has closed the socket, which waits in FIN-WAIT-2
    as a timewait socket, so its kernel answers the request with an RST (Linux v6.6
    net/ipv4/tcp_minisocks.c: tcp_timewait_state_process(), "new data after half-duplex close").
    The client reads the FIN first: end of file before the answer. What a proxy whose upstream
    keep-alive timeout is longer than the upstream's own meets."""
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    out, cap = _serve_and_load(
        net, pcap, snaplen,
        ("--count", str(connections), "--keep-alive", str(keep_alive), "--response", str(response), "--deadline", "30"),
        ("--count", str(connections), "--idle", str(idle), "--request", str(request), "--response", str(response),
         "--timeout", "5"),
        role="reuse",
    )
    setup = [
        f"server: answers {response} bytes per request, closes a connection idle for {keep_alive:g} s (FIN)",
        f"client: {connections} sequential connections, a {request}-byte request each, its answer, {idle:g} s "
        f"idle, a second request on the same connection; tcpdump -s {snaplen}",
    ]
    return _run(net, pcap, out, cap, before, started, setup)


def app_reset(
    net: NetnsPair,
    pcap: Path,
    connections: int = 3,
    reply_delay: float = 0.1,
    request: int = 100,
    response: int = 200,
    snaplen: int = 128,
) -> Run:
    """The application takes the connection, reads the request, waits `reply_delay` s (the
    kernel's delayed ACK acknowledges the request meanwhile), writes its answer and closes with
    SO_LINGER 0: an RST right after its data (as sshd answering an HTTP request with its banner
    and a reset). The listen queues have nothing to do with it."""
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    out, cap = _serve_and_load(
        net, pcap, snaplen,
        ("--count", str(connections), "--reply-delay", str(reply_delay), "--rst-after-reply", "--response", str(response),
         "--deadline", "20"),
        ("--count", str(connections), "--request", str(request), "--delayed-ack", "--pause", "0.1", "--deadline", "15"),
    )
    setup = [
        f"server: accepts at once, reads the {request}-byte request, {reply_delay:g} s later writes "
        f"{response} bytes and closes with SO_LINGER 0 (an RST)",
        f"client: {connections} sequential connections, TCP_QUICKACK 0 (the answer's ACK waits for the "
        f"delayed-ACK timer, so the RST comes first), reads to the end; tcpdump -s {snaplen}",
    ]
    return _run(net, pcap, out, cap, before, started, setup)
