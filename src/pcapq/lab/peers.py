"""A tiny request/response server and client for `pcapq lab` and the kernel tests, run inside a
namespace:

    python -m pcapq.lab.peers server HOST PORT [--backlog B] [--accept-delay S] [--count N] ...
    python -m pcapq.lab.peers server HOST PORT --restart-after S --down-for S   (an upstream restarting)
    python -m pcapq.lab.peers client HOST PORT [--count N] [--concurrent [--interval S]] ...
    python -m pcapq.lab.peers half-open HOST PORT --source ADDR [--count N]   (raw SYNs; scapy)
    python -m pcapq.lab.peers reuseport HOST PORT [--listeners N] [--backlog B] [--accept-delay S] ...
    python -m pcapq.lab.peers preconnect HOST PORT [--count N] [--idle S]
    python -m pcapq.lab.peers listen HOST PORT [--also PORT ...] [--deadline S]

Protocol: the client sends `--request` bytes ending in a newline; the server reads up to the
newline, waits `--reply-delay` seconds, writes `--response` bytes and closes; the client reads
to EOF and closes (`--timeout` for connect and each read; `--rst-on-timeout`: a timed-out
connection is closed with an RST).
The server prints "ready" once listening. The client prints one JSON line per connection:
{"port": local port, "sent": bytes, "received": bytes, "error": null or text}.
Both stop by themselves after `--count` connections or `--deadline` seconds.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import select
import selectors
import socket
import struct
import sys
import threading
import time
from typing import TypedDict, cast


class ClientResult(TypedDict, total=False):
    """What a client prints of one connection, as a JSON line."""

    port: int | None
    sent: int
    received: int
    error: str | None


def request_bytes(size: int, http: bool = False) -> bytes:
    if http:
        # An HTTP/1.0 GET padded to `size` bytes with a header; it ends with a newline too.
        head = b"GET / HTTP/1.0\r\nHost: upstream\r\nX-Pad: "
        return head + b"q" * max(size - len(head) - 4, 1) + b"\r\n\r\n"
    return b"q" * (size - 1) + b"\n"


def response_bytes(size: int, http: bool = False) -> bytes:
    if http:
        return b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"r" * size
    return b"r" * size


def serve(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.deadline
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if args.defer_accept:
        # The listener takes a bare handshake ACK as "not yet": the connection is accepted when
        # data arrives, or after the last SYN-ACK re-send of the period (tcp_check_req()).
        lsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, args.defer_accept)
    lsock.bind((args.host, args.port))
    lsock.listen(args.backlog)
    print("ready", flush=True)
    if args.restart_after:
        lsock = restart(lsock, args)
    if args.accept_delay:
        time.sleep(args.accept_delay)
    print("accepting", flush=True)
    served = 0
    response = response_bytes(args.response, args.http)
    workers: list[threading.Thread] = []
    while (args.count == 0 or served < args.count) and time.monotonic() < deadline:
        lsock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            conn, _ = lsock.accept()
        except socket.timeout:
            break
        if args.threads:
            # Each connection on its own thread: one whose request comes late holds up no other.
            worker = threading.Thread(target=answer, args=(conn, args, response), daemon=True)
            worker.start()
            workers.append(worker)
        else:
            answer(conn, args, response)
        served += 1
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    lsock.close()
    return 0


def answer(conn: socket.socket, args: argparse.Namespace, response: bytes) -> None:
    """Reads the request, answers (`--reply-delay`, `--rst-after-reply`, `--keep-alive`), closes."""
    with conn:
        conn.settimeout(10)
        try:
            read_request(conn)
            if args.reply_delay:
                time.sleep(args.reply_delay)
            if args.rst_before_reply:
                # SO_LINGER on, 0 s: close() sends an RST with the request unanswered.
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            if args.rst_after_reply:
                # SO_LINGER on, 0 s: close() sends an RST right after the response.
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.sendall(response)
            if args.keep_alive:
                keep_alive(conn, response, args.keep_alive)
        except OSError as e:
            print(f"server: {e}", file=sys.stderr, flush=True)


def restart(lsock: socket.socket, args: argparse.Namespace) -> socket.socket:
    """An upstream restarting: no accept() for `--restart-after` s, then close() of the listening
    socket with connections still in its queues (the kernel resets those in the accept queue:
    inet_csk_listen_stop()), `--down-for` s with nothing listening, and a new listener. Prints
    one JSON line with what the queues held at the close (/proc/net/tcp of this namespace: the
    listener's rx_queue is its accept queue; SYN-RECV entries are request sockets)."""
    time.sleep(args.restart_after)
    queues = listen_queues(args.port)
    lsock.close()
    closed = time.time()
    time.sleep(args.down_for)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((args.host, args.port))
    lsock.listen(args.backlog)
    print(json.dumps({"restart": {**queues, "closed": closed, "listening_again": time.time()}}), flush=True)
    return lsock


def listen_queues(port: int) -> dict[str, int]:
    """{"accept_queue": connections waiting for accept(), "syn_recv": request sockets} on `port`."""
    accept_queue = syn_recv = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) != port:
                continue
            if fields[3] == "0A":
                accept_queue += int(fields[4].split(":")[1], 16)
            elif fields[3] == "03":
                syn_recv += 1
    return {"accept_queue": accept_queue, "syn_recv": syn_recv}


def keep_alive(conn: socket.socket, response: bytes, idle: float) -> None:
    """Answers further requests on `conn` until none comes for `idle` s, then returns (the caller
    closes: a FIN), as an HTTP server's keep-alive timeout does."""
    conn.settimeout(idle)
    while True:
        try:
            if not conn.recv(1, socket.MSG_PEEK):
                return
        except socket.timeout:
            return
        read_request(conn)
        conn.sendall(response)


def reuse(args: argparse.Namespace) -> int:
    """`--count` connections in turn, each used twice as a proxy's keep-alive connection is: a request
    and its `--response`-byte answer, `--idle` s of nothing, then a second request."""
    request = request_bytes(args.request)
    for _ in range(args.count):
        result: ClientResult = {"port": None, "sent": 0, "received": 0, "error": None}
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                connect(s, args.host, args.port, args.timeout, result)
                for n in range(2):
                    if n:
                        time.sleep(args.idle)
                    s.sendall(request)
                    result["sent"] = int(result["sent"]) + len(request)
                    want = int(result["received"]) + args.response
                    while int(result["received"]) < want:
                        chunk = s.recv(65536)
                        if not chunk:
                            raise ConnectionError("the server closed the connection before answering")
                        result["received"] = int(result["received"]) + len(chunk)
            except OSError as e:
                result["error"] = repr(e)
        print(json.dumps(result), flush=True)
    return 0


def connect(s: socket.socket, host: str, port: int, timeout: float, result: ClientResult) -> None:
    """connect() with a timeout, noting the local port in `result` also when it fails."""
    s.setblocking(False)
    rc = s.connect_ex((host, port))
    result["port"] = s.getsockname()[1]
    if rc == errno.EINPROGRESS:
        if not select.select([], [s], [], timeout)[1]:
            raise socket.timeout("connect timed out")
        rc = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if rc:
        raise OSError(rc, os.strerror(rc))
    s.settimeout(timeout)


def sequential(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.deadline
    request = request_bytes(args.request)
    for _ in range(args.count):
        if time.monotonic() > deadline:
            break
        result: ClientResult = {"port": None, "sent": 0, "error": None}
        received = 0
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if args.source_port:
                # Every connection from the same port: the 4-tuple is reused (SO_REUSEADDR lets
                # bind() take a port whose previous socket is closing).
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("", args.source_port))
            if args.fastopen:
                # The request rides in the SYN (TCP Fast Open, net.ipv4.tcp_fastopen); a blocking
                # sendto() returns once the handshake is done.
                sent = s.sendto(request, socket.MSG_FASTOPEN, (args.host, args.port))
                result["port"] = s.getsockname()[1]
                s.settimeout(args.timeout)
                s.sendall(request[sent:])
            else:
                connect(s, args.host, args.port, args.timeout, result)
                if args.delayed_ack:
                    # Out of quick-ACK mode: the answer is acknowledged by the delayed-ACK timer.
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
                s.sendall(request)
            result["sent"] = len(request)
            while chunk := s.recv(65536):
                received += len(chunk)
        except OSError as e:
            result["error"] = repr(e)
            if isinstance(e, socket.timeout) and args.rst_on_timeout:
                # SO_LINGER on, 0 s: close() sends an RST instead of a FIN.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        finally:
            s.close()
        result["received"] = received
        print(json.dumps(result), flush=True)
        if args.pause:
            time.sleep(args.pause)
    return 0


def concurrent(args: argparse.Namespace) -> int:
    """All connects at once, non-blocking; each sends its request as soon as connect() is done.
    --lead N: the first N connections, one by one, complete their handshake and send their
    request before the others start (--first-alone: N = 1); --filler N: then N small UDP
    datagrams to the server's discard port go out first, so that the SYNs queue behind them on
    a shaped link."""
    deadline = time.monotonic() + args.deadline
    request = request_bytes(args.request, args.http)
    sel = selectors.DefaultSelector()
    results: list[ClientResult] = []

    def pump(timeout: float) -> None:
        for key, mask in sel.select(timeout=timeout):
            s, result = cast(socket.socket, key.fileobj), key.data
            try:
                if mask & selectors.EVENT_WRITE:
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise OSError(err, errno.errorcode.get(err, str(err)))
                    result["sent"] = s.send(request)
                    sel.modify(s, selectors.EVENT_READ, result)
                    continue
                chunk = s.recv(65536)
                result["received"] += len(chunk)
                if chunk:
                    continue
            except OSError as e:
                result["error"] = repr(e)
            sel.unregister(s)
            s.close()

    lead = max(args.lead, 1 if args.first_alone else 0)
    for i in range(args.count):
        if args.interval and i > lead:
            # Connections at a steady pace, the earlier ones served meanwhile.
            until = time.monotonic() + args.interval
            while time.monotonic() < until:
                pump(max(0.0, until - time.monotonic()))
        if 0 < i <= lead:
            wait_until = time.monotonic() + 2
            while not (results[-1]["sent"] or results[-1]["error"]) and time.monotonic() < wait_until:
                pump(0.01)
        if i == lead > 0:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                for _ in range(args.filler):
                    udp.sendto(b"f" * 40, (args.host, 9))
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex((args.host, args.port))
        result: ClientResult = {"port": s.getsockname()[1], "sent": 0, "received": 0, "error": None}
        results.append(result)
        if rc not in (0, errno.EINPROGRESS):
            result["error"] = errno.errorcode.get(rc, str(rc))
            s.close()
            continue
        sel.register(s, selectors.EVENT_WRITE, result)
    while sel.get_map() and time.monotonic() < deadline:
        pump(0.1)
    for key in list(sel.get_map().values()):
        key.data["error"] = "deadline"
        sel.unregister(key.fileobj)
        cast(socket.socket, key.fileobj).close()
    for result in results:
        print(json.dumps(result), flush=True)
    return 0


def half_open(args: argparse.Namespace) -> int:
    """`--count` SYNs from `--source` (ports 40000 and up, ISN 1000 * port) through a raw
    socket; nothing answers their SYN-ACKs if no host owns that address. Prints one JSON line
    per SYN: {"port": source port, "isn": ISN}."""
    from scapy.layers.inet import IP, TCP

    sent = []
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as raw:
        for i in range(args.count):
            port = 40000 + i
            syn = IP(src=args.source, dst=args.host) / TCP(
                sport=port, dport=args.port, flags="S", seq=1000 * port, window=64240,
                options=[("MSS", 1460), ("SAckOK", b""), ("WScale", 7)],
            )
            raw.sendto(bytes(syn), (args.host, 0))
            sent.append({"port": port, "isn": 1000 * port})
    for line in sent:
        print(json.dumps(line), flush=True)
    return 0


def read_request(conn: socket.socket) -> None:
    """Reads until the request's newline or the client's FIN. Only the last byte matters:
    requests may be megabytes."""
    last = b""
    while last != b"\n":
        chunk = conn.recv(65536)
        if not chunk:
            break
        last = chunk[-1:]


def serve_one(conn: socket.socket, response: bytes) -> None:
    """Reads a request up to its newline, answers and closes."""
    with conn:
        conn.settimeout(2)
        try:
            read_request(conn)
            conn.sendall(response)
        except OSError as e:
            print(f"server: {e}", file=sys.stderr, flush=True)


def reuseport(args: argparse.Namespace) -> int:
    """`--listeners` sockets on one port with SO_REUSEPORT: the kernel spreads connections over
    them by a hash of the 4-tuple. Listener 0 (listen(`--backlog`)) is stuck: it calls accept()
    only after `--accept-delay` s. The others (listen(128)) serve at once. Serves until
    `--deadline`. --prefill: listener 0 listens alone first ("ready0"), and the others join
    after a line on stdin, so that connections made meanwhile all wait in listener 0's queue."""
    deadline = time.monotonic() + args.deadline
    listeners = []
    for i in range(args.listeners):
        if i == 1 and args.prefill:
            print("ready0", flush=True)
            sys.stdin.readline()
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        lsock.bind((args.host, args.port))
        lsock.listen(args.backlog if i == 0 else 128)
        lsock.setblocking(False)
        listeners.append(lsock)
    sel = selectors.DefaultSelector()
    for lsock in listeners[1:]:
        sel.register(lsock, selectors.EVENT_READ)
    print("ready", flush=True)
    unstuck_at = time.monotonic() + args.accept_delay
    response = b"r" * args.response
    while time.monotonic() < deadline:
        if unstuck_at is not None and time.monotonic() >= unstuck_at:
            sel.register(listeners[0], selectors.EVENT_READ)
            unstuck_at = None
        for key, _ in sel.select(timeout=0.05):
            try:
                conn, _ = cast(socket.socket, key.fileobj).accept()
            except BlockingIOError:
                continue
            conn.setblocking(True)
            serve_one(conn, response)
    for lsock in listeners:
        lsock.close()
    return 0


def preconnect(args: argparse.Namespace) -> int:
    """`--count` connections opened at once that send nothing for `--idle` s (a browser's or a
    proxy's preconnect), then each in turn sends its request and reads the answer."""
    request = request_bytes(args.request)
    socks, results = [], []
    connected = [0.0] * args.count

    def open_one(i: int, s: socket.socket, result: ClientResult) -> None:
        try:
            if args.source_port and i == 0:
                # The first connection from a known port (a firewall rule can pick it out).
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("", args.source_port))
            connect(s, args.host, args.port, args.timeout, result)
        except OSError as e:
            result["error"] = repr(e)
        connected[i] = time.monotonic()

    openers = []
    for i in range(args.count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        result: ClientResult = {"port": None, "sent": 0, "received": 0, "error": None}
        socks.append(s)
        results.append(result)
        if args.idle_step:
            # Connects all at once, each on its own thread: the SYNs leave together.
            openers.append(threading.Thread(target=open_one, args=(i, s, result)))
            openers[-1].start()
        else:
            open_one(i, s, result)
    for opener in openers:
        opener.join()
    if args.idle_step:
        # The i-th connection sends `--idle` + i * `--idle-step` s after its connect() returned,
        # without waiting for the answers before; the answers are read afterwards.
        for i, (s, result) in enumerate(zip(socks, results)):
            time.sleep(max(0.0, connected[i] + args.idle + i * args.idle_step - time.monotonic()))
            if not result["error"]:
                try:
                    s.sendall(request)
                    result["sent"] = len(request)
                except OSError as e:
                    result["error"] = repr(e)
    else:
        time.sleep(args.idle)
    # With --idle-step the answers are awaited together: `--timeout` s in all from the last request.
    deadline = time.monotonic() + args.timeout
    for s, result in zip(socks, results):
        with s:
            if result["error"]:
                continue
            received = 0
            try:
                if args.idle_step:
                    s.settimeout(max(0.05, deadline - time.monotonic()))
                else:
                    s.sendall(request)
                    result["sent"] = len(request)
                while chunk := s.recv(65536):
                    received += len(chunk)
            except OSError as e:
                result["error"] = repr(e)
            result["received"] = received
    for result in results:
        print(json.dumps(result), flush=True)
    return 0


def listen_only(args: argparse.Namespace) -> int:
    """Listens on PORT and `--also` ports (backlog 128) and never accepts: the handshakes
    complete in the kernel. Until `--deadline`."""
    socks = []
    for port in (args.port, *args.also):
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((args.host, port))
        lsock.listen(128)
        socks.append(lsock)
    print("ready", flush=True)
    time.sleep(args.deadline)
    for lsock in socks:
        lsock.close()
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["server", "client", "half-open", "reuseport", "preconnect", "listen", "reuse"])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--backlog", type=int, default=128)
    p.add_argument("--accept-delay", type=float, default=0.0)
    p.add_argument("--count", type=int, default=1, help="connections; 0: server serves until the deadline")
    p.add_argument("--request", type=int, default=100)
    p.add_argument("--response", type=int, default=1000)
    p.add_argument("--concurrent", action="store_true")
    p.add_argument("--first-alone", action="store_true", help="concurrent client: --lead 1")
    p.add_argument("--lead", type=int, default=0, help="concurrent client: see concurrent()")
    p.add_argument("--filler", type=int, default=0, help="concurrent client: see concurrent()")
    p.add_argument("--pause", type=float, default=0.0, help="sequential client: sleep between connections")
    p.add_argument("--timeout", type=float, default=5.0, help="sequential client: connect and read timeout")
    p.add_argument("--rst-on-timeout", action="store_true",
                   help="sequential client: after a timeout, close with SO_LINGER 0 (an RST)")
    p.add_argument("--reply-delay", type=float, default=0.0, help="server: wait this long before answering")
    p.add_argument("--source", help="half-open: the SYNs' source address")
    p.add_argument("--source-port", type=int, default=0,
                   help="sequential client: bind every connection to this port; preconnect: the first one")
    p.add_argument("--defer-accept", type=int, default=0, help="server: TCP_DEFER_ACCEPT, in seconds")
    p.add_argument("--rst-after-reply", action="store_true",
                   help="server: close with SO_LINGER 0 after the response (an RST)")
    p.add_argument("--rst-before-reply", action="store_true",
                   help="server: close with SO_LINGER 0 after reading the request, without answering (an RST)")
    p.add_argument("--delayed-ack", action="store_true", help="sequential client: TCP_QUICKACK 0 after connect")
    p.add_argument("--fastopen", action="store_true", help="sequential client: request in the SYN (MSG_FASTOPEN)")
    p.add_argument("--listeners", type=int, default=4, help="reuseport: SO_REUSEPORT listeners on the port")
    p.add_argument("--prefill", action="store_true", help="reuseport: see reuseport()")
    p.add_argument("--idle", type=float, default=5.0,
                   help="preconnect: seconds before sending the request; reuse: between the two requests")
    p.add_argument("--idle-step", type=float, default=0.0,
                   help="preconnect: the i-th connection sends its request at --idle + i * this, answers read after")
    p.add_argument("--keep-alive", type=float, default=0.0,
                   help="server: answer more requests on a connection until it is idle this long, then close")
    p.add_argument("--also", type=int, nargs="*", default=[], help="listen: more ports")
    p.add_argument("--threads", action="store_true", help="server: each connection on its own thread")
    p.add_argument("--interval", type=float, default=0.0, help="concurrent client: seconds between connects")
    p.add_argument("--restart-after", type=float, default=0.0,
                   help="server: close the listening socket after this long without accept() (see restart())")
    p.add_argument("--down-for", type=float, default=1.5, help="server: seconds between close() and the new listen()")
    p.add_argument("--http", action="store_true",
                   help="server: answer with an HTTP/1.0 response; concurrent client: send an HTTP/1.0 GET")
    p.add_argument("--deadline", type=float, default=20.0)
    args = p.parse_args()
    if args.role == "server":
        return serve(args)
    if args.role == "half-open":
        return half_open(args)
    if args.role == "reuseport":
        return reuseport(args)
    if args.role == "preconnect":
        return preconnect(args)
    if args.role == "listen":
        return listen_only(args)
    if args.role == "reuse":
        return reuse(args)
    return concurrent(args) if args.concurrent else sequential(args)


if __name__ == "__main__":
    sys.exit(main())
