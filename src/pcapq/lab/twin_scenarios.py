"""Competing explanations, each run as a pair in which one setting changes, so that a
prediction holds in one run and fails in the other (captures/kernel_runs/, make.py there):

- lost_ack: one handshake ACK lost while the accept queue has room (twin: accept_queue_overflow);
- crossed_synack: an RTT longer than the 1 s SYN-ACK timer, nothing lost (twin: a shorter RTT);
- listener_restart: an upstream that closes its listening socket and listens again (twin:
  abort_on_overflow);
- proxy_read_timeout: the proxy's read timeout crosses the answer (twin: the answer in time);
- reordering: re-sends that the receiver D-SACKs, nothing lost (twin: loss).

Latency, reordering and loss come from NetnsDelayed's user-space delay line (this kernel has no
netem). Each scenario checks that the kernel did what it is meant to show and puts what it
missed in run.extra["not_as_meant"] (runner.py refuses such a run)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

from pcapq.lab.errors import LabError
from pcapq.lab.namespaces import Capture, NetnsDelayed, NetnsPair
from pcapq.lab.scenarios import (
    PEERS,
    PORT,
    Run,
    _client,
    _nft_counters,
    _run,
    _wait_accept_queue,
    parse_clients,
    start_server,
)

LOST_ACK_TABLE = "pcapq_lost_ack"
# A bare ACK from the client: 20 bytes of IP, 20 of TCP and 12 of timestamp option.
BARE_ACK_LENGTH = 52
LOST_SYNACK_TABLE = "pcapq_lost_synack"
# A Linux SYN-ACK with MSS, SACK, timestamps and window scale: 20 + 40 bytes.
SYNACK_LENGTH = 60


def _need_path(net: NetnsPair) -> NetnsDelayed:
    if not isinstance(net, NetnsDelayed):
        raise LabError("this scenario needs a path with latency: run it in NetnsDelayed (the catalog's `network`)")
    return net


def _delta(before: dict[str, int], after: dict[str, int], counter: str) -> int:
    return after.get(counter, 0) - before.get(counter, 0)


def _expect(run: Run, *checks: tuple[bool, str]) -> Run:
    """Notes in run.extra["not_as_meant"] each check that failed."""
    run.extra["not_as_meant"] = [why for ok, why in checks if not ok]
    return run


def lost_ack(
    net: NetnsPair,
    pcap: Path,
    where: str = "server",
    acks: int = 1,
    connections: int = 3,
    idle: float = 1.5,
    source_port: int = 50001,
    request: int = 100,
    response: int = 1000,
    snaplen: int = 128,
) -> Run:
    """The first `acks` bare ACKs of one connection (from `source_port`) are lost; its handshake
    ACK is the first. `connections` clients connect at once (the first from `source_port`) and
    send their request `idle` s later, as a proxy's pre-opened connections do. The server's
    SYN-ACK timer (1 s) fires for the connection whose ACK was lost and re-sends; the ACK that
    answers it, or the request, completes the handshake and the request is acknowledged at
    once: the accept queue (listen(128), accept() at once) had room all along.

    where "server": nftables drops the ACK on the server's input, after tcpdump on the server's
    veth saw it (a firewall, or a capture taken before the loss). "client": on the client's
    output, before the path: the server's capture never sees it (lost on the way)."""
    if where == "server":
        ns, hook = net.server_ns, "input"
    elif where == "client":
        ns, hook = net.client_ns, "output"
    else:
        raise LabError(f"lost_ack: where is 'server' or 'client', not {where!r}")
    match = (f"ip saddr {net.client_ip} ip daddr {net.server_ip} tcp sport {source_port} tcp dport {PORT} "
             f"tcp flags == ack ip length {BARE_ACK_LENGTH}")
    # nft's quota: a packet matches while the bytes counted so far, itself included, stay under it.
    quota = BARE_ACK_LENGTH * acks + 1
    rules = (f"table inet {LOST_ACK_TABLE} {{\n  chain {hook} {{\n    type filter hook {hook} priority 0; policy accept;\n"
             f"    {match} counter quota until {quota} bytes counter drop\n  }}\n}}\n")
    net.run(ns, ["nft", "-f", "-"], input=rules)
    net.say(f"nftables in the {where}'s {hook} chain drops the first {acks} bare ACK{'s' if acks > 1 else ''} "
            f"from port {source_port}")
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    server = start_server(net, "--count", str(connections), "--response", str(response), "--deadline", "20",
                          "--threads")
    try:
        with net.capture(pcap, bpf=["tcp"], snaplen=snaplen) as cap:
            out = _client(net, "--count", str(connections), "--idle", str(idle), "--request", str(request),
                          "--source-port", str(source_port), "--timeout", "5", role="preconnect")
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(5)
    finally:
        net.stop(server)
    seen, dropped = _nft_counters(net, ns, LOST_ACK_TABLE)
    place = ("the server's input, after tcpdump on its veth saw them" if where == "server"
             else "the client's output, before the path: the server's veth never sees them")
    setup = [
        f"server listen() backlog 128, accepts at once, a thread per connection; client: {connections} connections "
        f"opened at once (the first "
        f"from port {source_port}), each sends its {request}-byte request {idle:g} s later; {response}-byte response; "
        f"tcpdump -s {snaplen}",
        f"nftables on {place}: `{match} quota until {quota} bytes drop`: {seen} bare ACKs from port {source_port} "
        f"seen, {dropped} dropped",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra.update(acks_seen=seen, acks_dropped=dropped)
    return _expect(
        run,
        (dropped == acks, f"nftables dropped {dropped} bare ACKs, not {acks}"),
        (run.delta("TcpExtTCPSynRetrans") >= 1, "the server re-sent no SYN-ACK (TcpExtTCPSynRetrans 0)"),
        (run.delta("TcpExtListenOverflows") == 0, "the accept queue overflowed (TcpExtListenOverflows moved)"),
    )


def _sequential_over_path(
    net: NetnsPair, path: NetnsDelayed, pcap: Path, connections: int, request: int, response: int, snaplen: int,
    settle: float | None, client: tuple[str, ...] = ("--timeout", "10", "--deadline", "25"),
) -> tuple[str, Capture, dict[str, int], float, dict[str, Any], int]:
    """`connections` sequential clients (peers.py client with `client`'s options) over the delay
    line `path` (started), to a server that accepts at once, while tcpdump writes `pcap`;
    `settle` s more (and 0.2) for the last packets still on the path, if given; then the path
    stopped. (client output, capture, server counters before, start, the path's counts, the
    client's SYNs sent again)."""
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    client_before = net.nstat(net.client_ns)
    try:
        server = start_server(net, "--count", str(connections), "--response", str(response), "--deadline", "30")
        try:
            with net.capture(pcap, bpf=["tcp"], snaplen=snaplen) as cap:
                out = _client(net, "--count", str(connections), "--request", str(request), *client)
                if settle is not None:
                    # The client's last ACK and FIN are still on the path.
                    time.sleep(settle + 0.2)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(3)
        finally:
            net.stop(server)
    finally:
        stats = path.stop_path()
    syn_resends = _delta(client_before, net.nstat(net.client_ns), "TcpExtTCPSynRetrans")
    return out, cap, before, started, stats, syn_resends


def crossed_synack(
    net: NetnsPair,
    pcap: Path,
    one_way: float = 0.7,
    connections: int = 2,
    step_cs: float = 0.0,
    request: int = 100,
    response: int = 1000,
    snaplen: int = 128,
) -> Run:
    """A path with `one_way` s of latency each way and nothing lost. With an RTT over 1 s the
    server's SYN-ACK timer (TCP_TIMEOUT_INIT) fires before the client's ACK can arrive: the
    re-sent SYN-ACK crosses the ACK. The client's SYN timer (also 1 s) fires too, so its SYN is
    sent again as well. With an RTT under 1 s nothing is re-sent. The listener accepts at once.

    step_cs: the client-to-server latency rises to `step_cs` s right after the first SYN (a queue
    building on the client's uplink), so the SYN's round trip (2 * one_way) stays under 1 s, the
    client sends no SYN twice, and only the server's SYN-ACK timer fires (one_way + step_cs > 1)."""
    path = _need_path(net)
    path.start_path(delay_cs=one_way, delay_sc=one_way, step_after=1 if step_cs else 0, step_cs=step_cs, deadline=40)
    done = _sequential_over_path(net, path, pcap, connections, request, response, snaplen, settle=max(one_way, step_cs))
    out, cap, before, started, stats, syn_resends = done
    setup = [
        f"path: {path.path_settings} (RTT {2 * one_way:g} s"
        + (f", {one_way + step_cs:g} s after the SYN" if step_cs else "")
        + f"); nothing dropped by the delay line ({len(stats.get('dropped', []))})",
        f"server listen() backlog 128, accepts at once; client: {connections} sequential connections, {request}-byte "
        f"request, {response}-byte response; tcpdump -s {snaplen}",
        f"client namespace: TcpExtTCPSynRetrans +{syn_resends} (SYNs sent again)",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra.update(path=stats, client_syn_resends=syn_resends)
    long_rtt = one_way + (step_cs or one_way) > 1.0
    synack_resends = run.delta("TcpExtTCPSynRetrans")
    return _expect(
        run,
        (not stats.get("dropped"), "the delay line dropped segments"),
        (synack_resends >= 1 if long_rtt else synack_resends == 0,
         f"TcpExtTCPSynRetrans +{synack_resends} in the server namespace with an RTT of {2 * one_way:g} s"),
        (run.delta("TcpExtListenOverflows") == 0, "the accept queue overflowed (TcpExtListenOverflows moved)"),
        (syn_resends == 0 if step_cs else True, f"the client sent {syn_resends} SYNs again"),
    )


def lost_synack(
    net: NetnsPair,
    pcap: Path,
    one_way: float = 0.3,
    connections: int = 2,
    request: int = 100,
    response: int = 1000,
    snaplen: int = 128,
) -> Run:
    """The first SYN-ACK is lost on a path of `one_way` s each way: nftables on the server's
    output drops it, before the path and the client's capture point. The client sends its SYN
    again after 1 s; the server answers it (and its own timer re-sends): that SYN-ACK reaches the
    client a round trip after the second SYN. The twin of crossed_synack at the client, where
    the first SYN-ACK was only late."""
    path = _need_path(net)
    match = (f"ip saddr {net.server_ip} ip daddr {net.client_ip} tcp sport {PORT} "
             f"tcp flags & (syn | ack) == syn | ack")
    rules = (f"table inet {LOST_SYNACK_TABLE} {{\n  chain output {{\n    type filter hook output priority 0; "
             f"policy accept;\n    {match} counter quota until {SYNACK_LENGTH + 1} bytes counter drop\n  }}\n}}\n")
    net.run(net.server_ns, ["nft", "-f", "-"], input=rules)
    net.say("nftables in the server's output chain drops its first SYN-ACK")
    path.start_path(delay_cs=one_way, delay_sc=one_way, deadline=40)
    out, cap, before, started, stats, syn_resends = _sequential_over_path(
        net, path, pcap, connections, request, response, snaplen, settle=one_way)
    seen, dropped = _nft_counters(net, net.server_ns, LOST_SYNACK_TABLE)
    setup = [
        f"path: {path.path_settings} (RTT {2 * one_way:g} s)",
        f"server listen() backlog 128, accepts at once; client: {connections} sequential connections, {request}-byte "
        f"request, {response}-byte response; tcpdump -s {snaplen}",
        f"nftables on the server's output: `{match} quota until {SYNACK_LENGTH + 1} bytes drop`: {seen} SYN-ACKs "
        f"seen, {dropped} dropped; client namespace: TcpExtTCPSynRetrans +{syn_resends}",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra.update(path=stats, client_syn_resends=syn_resends, synacks_dropped=dropped)
    return _expect(
        run,
        (dropped == 1, f"nftables dropped {dropped} SYN-ACKs, not 1"),
        (syn_resends >= 1, "the client sent no SYN again"),
        (run.delta("TcpExtListenOverflows") == 0, "the accept queue overflowed (TcpExtListenOverflows moved)"),
    )


def listener_restart(
    net: NetnsPair,
    pcap: Path,
    one_way: float = 0.05,
    backlog: int = 64,
    restart_after: float = 1.0,
    down_for: float = 1.5,
    connections: int = 40,
    interval: float = 0.08,
    request: int = 100,
    response: int = 1000,
    snaplen: int = 128,
) -> Run:
    """An upstream restarting: the server listens (backlog `backlog`, room for all) but accepts
    nothing for `restart_after` s, then closes its listening socket with connections in its
    queues and listens again `down_for` s later, serving at once from then on. The clients open
    one connection every `interval` s (`one_way` s of latency each way, so handshakes are in
    flight at any time). At the close the kernel resets the connections in the accept queue
    (inet_csk_listen_stop(): their requests unread); a handshake ACK arriving after the close
    finds no listener and is answered with an RST (its request socket goes with the listener);
    SYNs while nothing listens are refused (RST); then connections succeed again."""
    path = _need_path(net)
    path.start_path(delay_cs=one_way, delay_sc=one_way, deadline=40)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    try:
        server = start_server(net, "--backlog", str(backlog), "--restart-after", str(restart_after), "--down-for",
                              str(down_for), "--count", "0", "--response", str(response), "--deadline", "25")
        try:
            with net.capture(pcap, bpf=["tcp"], snaplen=snaplen) as cap:
                out = _client(net, "--concurrent", "--count", str(connections), "--interval", str(interval),
                              "--request", str(request), "--deadline", "15")
        finally:
            server_out = _stop_and_read(server)
            net.stop(server)
    finally:
        stats = path.stop_path()
    restart: dict[str, Any] = next((line["restart"] for line in parse_clients(server_out) if "restart" in line), {})
    clients = parse_clients(out)
    errors = [str(c.get("error") or "") for c in clients]
    reset = sum("ConnectionReset" in e for e in errors)
    refused = sum("ConnectionRefused" in e or "ECONNREFUSED" in e for e in errors)
    served = sum(not e and c.get("received") == response for c, e in zip(clients, errors))
    setup = [
        f"path: {path.path_settings}",
        f"server listen() backlog {backlog}, no accept() for {restart_after:g} s, then close() of the listening socket "
        f"with {restart.get('accept_queue', '?')} connections in its accept queue and {restart.get('syn_recv', '?')} "
        f"request sockets (SYN-RECV); listen() again {down_for:g} s later, serving at once",
        f"client: {connections} non-blocking connects, one every {interval:g} s, {request}-byte request each, "
        f"{response}-byte response; tcpdump -s {snaplen}",
        f"clients: {reset} reset, {refused} refused, {served} served, {len(clients) - reset - refused - served} other",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra.update(path=stats, restart=restart, reset=reset, refused=refused, served=served)
    return _expect(
        run,
        (restart.get("accept_queue", 0) >= 1, "no connection waited in the accept queue at the close"),
        (restart.get("syn_recv", 0) >= 1, "no handshake was half-way (SYN-RECV) at the close"),
        (reset >= 1 and refused >= 1 and served >= 1, f"clients: {reset} reset, {refused} refused, {served} served"),
        (run.delta("TcpExtListenOverflows") == 0, "the accept queue overflowed (TcpExtListenOverflows moved)"),
    )


def _stop_and_read(proc: subprocess.Popen[Any]) -> str:
    """Stops a peers.py process that serves until its deadline; what it printed."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
    return proc.stdout.read() if proc.stdout is not None and proc.poll() is not None else ""


def proxy_read_timeout(
    net: NetnsPair,
    pcap: Path,
    one_way: float = 0.05,
    timeout: float = 1.0,
    reply_delay: float = 0.97,
    connections: int = 3,
    pause: float = 0.3,
    request: int = 100,
    response: int = 1000,
    snaplen: int = 128,
) -> Run:
    """A proxy (the client) waits `timeout` s for the answer to its request, then closes its
    side with an ordinary close() (a FIN; nginx's proxy_read_timeout). The server answers
    `reply_delay` s after the request reached it, over a path of `one_way` s each way. When the
    answer reaches the client after its timeout (reply_delay + 2 * one_way > timeout), the FIN
    and the answer cross: the FIN acknowledges only the request, and the client's kernel answers
    the answer, data for a closed socket, with an RST (tcp_rcv_state_process():
    TcpExtTCPAbortOnData). When it comes in time, the client reads it and closes normally."""
    path = _need_path(net)
    path.start_path(delay_cs=one_way, delay_sc=one_way, deadline=40)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    client_before = net.nstat(net.client_ns)
    try:
        server = start_server(net, "--count", str(connections), "--reply-delay", str(reply_delay),
                              "--response", str(response), "--deadline", "20")
        try:
            with net.capture(pcap, bpf=["tcp"], snaplen=snaplen) as cap:
                out = _client(net, "--count", str(connections), "--request", str(request), "--timeout", str(timeout),
                              "--pause", str(pause), "--deadline", "15")
                with contextlib.suppress(subprocess.TimeoutExpired):
                    server.wait(reply_delay + 1)
        finally:
            net.stop(server)
    finally:
        stats = path.stop_path()
    client_after = net.nstat(net.client_ns)
    aborts = _delta(client_before, client_after, "TcpExtTCPAbortOnData")
    client_rsts = _delta(client_before, client_after, "TcpOutRsts")
    late = reply_delay + 2 * one_way > timeout
    setup = [
        f"path: {path.path_settings}",
        f"server accepts at once, reads the {request}-byte request, answers {reply_delay:g} s later ({response} bytes) "
        "and closes; one connection at a time",
        f"client (the proxy): {connections} sequential connections, read timeout {timeout:g} s, then close() (a FIN); "
        f"{pause:g} s pause between connections; tcpdump -s {snaplen}",
        f"the answer reaches the client {reply_delay + 2 * one_way:g} s after its request: "
        + ("after" if late else "before") + " its timeout",
        f"client namespace: TcpExtTCPAbortOnData +{aborts}, TcpOutRsts +{client_rsts}",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra.update(path=stats, client_abort_on_data=aborts, client_rsts=client_rsts)
    timed_out = sum("timed out" in str(c.get("error") or "") for c in run.clients)
    if late:
        return _expect(
            run,
            (timed_out == connections, f"{timed_out} of {connections} clients timed out"),
            (aborts >= 1, "the client's kernel reset no answer (TcpExtTCPAbortOnData 0 in its namespace)"),
        )
    return _expect(
        run,
        (timed_out == 0 and all(c.get("received") == response for c in run.clients), "a client missed its answer"),
        (client_rsts == 0, f"the client sent {client_rsts} RSTs"),
    )


def reordering(
    net: NetnsPair,
    pcap: Path,
    every: int = 12,
    hold_for: float = 0.03,
    drop: bool = False,
    one_way: float = 0.01,
    connections: int = 4,
    request: int = 100,
    response: int = 48000,
    snaplen: int = 96,
) -> Run:
    """Responses of `response` bytes over a path of `one_way` s each way (SACK and D-SACK on,
    the defaults). drop False: each `every`th new data segment of the server's is held
    `hold_for` s longer, so the ones behind it arrive first; the server's SACK-based recovery
    (RACK, 3 SACKed segments beyond it) takes it for lost and sends it again, and the client
    reports the second copy with a D-SACK: spurious re-sends, nothing lost. drop True: the same
    segments are dropped instead: each re-send repairs a real loss."""
    path = _need_path(net)
    if drop:
        path.start_path(delay_cs=one_way, delay_sc=one_way, drop_every=every, deadline=40)
    else:
        path.start_path(delay_cs=one_way, delay_sc=one_way, hold_every=every, hold_for=hold_for, deadline=40)
    out, cap, before, started, stats, _ = _sequential_over_path(
        net, path, pcap, connections, request, response, snaplen, settle=None, client=("--pause", "0.1", "--deadline", "20"))
    held, dropped = stats.get("held", []), stats.get("dropped", [])
    setup = [
        f"path: {path.path_settings}; the delay line {'dropped' if drop else 'held back'} "
        f"{len(dropped) if drop else len(held)} segments: "
        + ", ".join(f"port {d[1]}>{d[2]} seq {d[3]}+{d[4]}" for d in (dropped if drop else held)),
        f"server listen() backlog 128, accepts at once; client: {connections} sequential connections, {request}-byte "
        f"request, {response}-byte response; tcpdump -s {snaplen}",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra.update(path=stats)
    dsacks = run.delta("TcpExtTCPDSACKRecv")
    if drop:
        return _expect(
            run,
            (len(dropped) >= 1 and not held, f"the delay line dropped {len(dropped)} and held {len(held)} segments"),
            (run.delta("TcpRetransSegs") >= len(dropped), "fewer re-sends than segments dropped"),
        )
    return _expect(
        run,
        (len(held) >= 1 and not dropped, f"the delay line held {len(held)} and dropped {len(dropped)} segments"),
        (run.delta("TcpRetransSegs") >= 1, "the server re-sent nothing: the reordering was within RACK's window"),
        (dsacks >= 1, "the client sent no D-SACK (TcpExtTCPDSACKRecv 0 in the server namespace)"),
    )


def defer_accept_client(
    net: NetnsPair,
    pcap: Path,
    overflow: bool = False,
    one_way: float = 0.05,
    connections: int = 12,
    idle: float = 1.2,
    idle_step: float = 0.15,
    request: int = 100,
    response: int = 1000,
    snaplen: int = 128,
) -> Run:
    """`connections` clients connect at once over a path of `one_way` s each way and send their
    requests `idle`, `idle` + `idle_step`, ... s after connect() returned (up to about 3 s).

    overflow False: the listener has TCP_DEFER_ACCEPT 1 s (nginx's `listen ... deferred`) and
    accepts at once. It drops each bare handshake ACK and keeps the request socket (Linux v6.6
    net/ipv4/tcp_minisocks.c: tcp_check_req()); its SYN-ACK timer re-sends once, 1 s after the
    SYN-ACK (net/ipv4/inet_connection_sock.c: syn_ack_recalc(); a defer of 1 s is one
    retransmission, net/ipv4/tcp.c: secs_to_retrans()), and the ACK answering that re-send
    creates the connection; the request is acknowledged at once. Nothing overflows.

    overflow True (the twin): the same clients and path; the listener, listen(`connections`)
    without TCP_DEFER_ACCEPT, never accepts, and as many connections wait in its accept queue
    before the capture. The clients' SYNs find room (tcp_conn_request()); the first ACK fills
    the queue, the others' ACKs and requests are dropped (tcp_check_req(): listen_overflow) and
    their SYN-ACKs re-sent at 1 and 3 s."""
    path = _need_path(net)
    path.start_path(delay_cs=one_way, delay_sc=one_way, deadline=40)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    if overflow:
        listener: tuple[str, ...] = ("--backlog", str(connections), "--accept-delay", "60", "--deadline", "60")
        said = f"server listen() backlog {connections}, never accepts, {connections} connections waiting in its queue"
    else:
        listener = ("--defer-accept", "1", "--threads", "--deadline", "20")
        said = "server TCP_DEFER_ACCEPT 1 s, listen() backlog 128, accepts at once, a thread per connection"
    timeout = 4.0
    waiting: subprocess.Popen[Any] | None = None
    try:
        server = start_server(net, *listener, "--count", str(connections), "--response", str(response))
        try:
            if overflow:
                net.say(f"{connections} connections wait in the accept queue (before the capture)")
                waiting = net.popen(net.client_ns, [*PEERS, "preconnect", net.server_ip, str(PORT), "--count",
                                                    str(connections), "--idle", "0", "--request", str(request),
                                                    "--timeout", "20"], stdout=subprocess.DEVNULL)
                _wait_accept_queue(net, PORT, connections, waiting)
            with net.capture(pcap, bpf=["tcp"], snaplen=snaplen) as cap:
                out = _client(net, "--count", str(connections), "--idle", str(idle), "--idle-step", str(idle_step),
                              "--request", str(request), "--timeout", str(timeout), role="preconnect")
                # The last packets still on the path.
                time.sleep(2 * one_way + 0.2)
            if not overflow:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    server.wait(3)
        finally:
            if waiting is not None:
                net.stop(waiting)
            net.stop(server)
    finally:
        stats = path.stop_path()
    last = idle + (connections - 1) * idle_step
    setup = [
        f"path: {path.path_settings} (RTT {2 * one_way * 1000:g} ms)",
        f"{said}; client: {connections} connections opened at once, each sends its {request}-byte request "
        f"{idle:g} to {last:g} s after connect() ({idle_step:g} s apart), answers awaited {timeout:g} s; "
        f"{response}-byte response; tcpdump -s {snaplen} on the client's veth",
    ]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra.update(path=stats)
    served = sum(not c.get("error") and c.get("received") == response for c in run.clients)
    if overflow:
        return _expect(
            run,
            (run.delta("TcpExtListenOverflows") >= 1, "the accept queue never overflowed (TcpExtListenOverflows 0)"),
            (run.delta("TcpExtTCPSynRetrans") >= 1, "the server re-sent no SYN-ACK (TcpExtTCPSynRetrans 0)"),
            (run.delta("TcpExtSyncookiesSent") == 0, "the listener answered with SYN cookies"),
            (served == 0, f"{served} clients were served by a listener that never accepts"),
        )
    return _expect(
        run,
        (run.delta("TcpExtTCPDeferAcceptDrop") >= connections,
         f"TcpExtTCPDeferAcceptDrop +{run.delta('TcpExtTCPDeferAcceptDrop')}: not every bare handshake ACK was held"),
        (run.delta("TcpExtTCPSynRetrans") >= 1, "the server re-sent no SYN-ACK (TcpExtTCPSynRetrans 0)"),
        (run.delta("TcpExtListenOverflows") == 0, "the accept queue overflowed (TcpExtListenOverflows moved)"),
        (served == connections, f"{served} of {connections} clients served"),
    )
