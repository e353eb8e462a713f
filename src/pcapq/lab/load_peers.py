"""A prefork server and an open-loop load client for the lab's offered-load scenarios, run inside
a namespace:

    python -m pcapq.lab.load_peers prefork HOST PORT --workers N --backlog B [--deadline S]
    python -m pcapq.lab.load_peers load HOST PORT --pattern NAME --seed N [--timeout S]

The server listens once with listen(backlog) and forks `--workers` processes that each call a
blocking accept() on that socket, read the request up to its newline, sleep the service time the
request names, answer and close: a prefork server (php-fpm, gunicorn's sync workers, Apache's
prefork MPM), whose concurrency is its worker count.

The client opens connections on a schedule drawn from `--pattern` and `--seed` (schedule()), each
at its time whatever became of the earlier ones (an open loop, as a reverse proxy passes its
clients' requests on), sends its request as soon as connect() is done and reads the answer to
EOF. A connection not answered `--timeout` s after its connect() began is given up (a proxy's
timeout): closed, and counted failed.

Protocol: the request is `--request` bytes: the service time in milliseconds, padded, ending in a
newline; the answer is `--response` bytes. Timestamps are the wall clock (time.time()), as in a
capture. The server prints "ready" once listening and appends one JSON line per connection a worker
took to `--log`; the client one JSON line per connection (ConnectionOutcome). Both stop by themselves.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import random
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass
from typing import Callable, TypedDict

# The offered loads: name -> how its arrivals are drawn (schedule()).
PATTERNS = ("steady_bursts", "waves")
# Service times in seconds and their shares: mostly quick requests, some slow, a few very slow.
SERVICE_MIX = ((0.02, 0.6), (0.08, 0.3), (0.3, 0.1))
# Linux's struct tcp_info (include/uapi/linux/tcp.h): 8 one-byte fields, then 32-bit ones;
# tcpi_total_retrans is the 24th of those.
TCP_INFO_BYTES = 104
TOTAL_RETRANS_OFFSET = 8 + 23 * 4


@dataclass(frozen=True)
class Arrival:
    at: float
    """Seconds after the load's start when connect() is called."""
    service: float
    """Seconds the worker spends on the request."""


def schedule(pattern: str, seed: int) -> list[Arrival]:
    """The offered load `pattern`, the same for the same seed.

    steady_bursts: 8 s of Poisson arrivals at 30/s, with bursts of 40 connections within 50 ms
    at 1.5 s, 4 s and 6.5 s. waves: 8 s of Poisson arrivals whose rate alternates between 10/s
    and 90/s every 2 s. Each connection's service time is drawn from SERVICE_MIX."""
    rng = random.Random(f"{pattern}:{seed}")
    times: list[float] = []
    if pattern == "steady_bursts":
        times += _poisson(rng, lambda _t: 30.0, 8.0)
        for start in (1.5, 4.0, 6.5):
            times += [start + rng.uniform(0.0, 0.05) for _ in range(40)]
    elif pattern == "waves":
        times += _poisson(rng, lambda t: 10.0 if int(t // 2) % 2 == 0 else 90.0, 8.0)
    else:
        raise ValueError(f"no load pattern {pattern!r}: one of {', '.join(PATTERNS)}")
    services = [value for value, _share in SERVICE_MIX]
    weights = [share for _value, share in SERVICE_MIX]
    return [Arrival(round(t, 6), rng.choices(services, weights)[0]) for t in sorted(times)]


def _poisson(rng: random.Random, rate: Callable[[float], float], duration: float) -> list[float]:
    """Arrival times of a Poisson process whose rate may change with time (thinning)."""
    top = max(rate(t / 10) for t in range(int(duration * 10)))
    times: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(top)
        if t >= duration:
            return times
        if rng.random() < rate(t) / top:
            times.append(t)


def request_bytes(service: float, size: int) -> bytes:
    head = b"%d " % round(service * 1000)
    return head + b"q" * (size - len(head) - 1) + b"\n"


# -- the server


def prefork(args: argparse.Namespace) -> int:
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((args.host, args.port))
    lsock.listen(args.backlog)
    print("ready", flush=True)
    children = []
    for worker in range(args.workers):
        pid = os.fork()
        if pid == 0:
            # The worker ends by itself at the deadline (SIGALRM's default action).
            signal.alarm(max(1, round(args.deadline)))
            work(lsock, worker, args.response, args.log)
            os._exit(0)
        children.append(pid)

    def stop(_signum: int, _frame: object) -> None:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(max(1, round(args.deadline)))
    for pid in children:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return 0


def work(lsock: socket.socket, worker: int, response_size: int, log: str) -> None:
    """One worker: accept(), read the request, sleep its service time, answer, close; again.
    Appends one JSON line per connection to `log`."""
    response = b"r" * response_size
    log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    while True:
        conn, (_addr, port) = lsock.accept()
        accepted = time.time()
        with conn:
            conn.settimeout(10)
            line = {"worker": worker, "port": port, "accepted": accepted, "request_at": None,
                    "service": None, "error": None}
            try:
                request = read_line(conn)
                line["request_at"] = time.time()
                service = int(request.split(b" ", 1)[0]) / 1000
                line["service"] = service
                time.sleep(service)
                conn.sendall(response)
            except (OSError, ValueError) as e:
                line["error"] = repr(e)
            line["closed"] = time.time()
        # One write() per line to a file opened O_APPEND: the workers' lines do not mix.
        os.write(log_fd, (json.dumps(line) + "\n").encode())


def read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            raise ConnectionError("the client closed before its request ended")
        data += chunk
    return data


# -- the client


class ConnectionOutcome(TypedDict):
    """What the client prints of one connection, as a JSON line."""

    index: int
    port: int | None
    start: float
    """Wall-clock time of connect()."""
    service: float
    connected: float | None
    """Seconds from connect() until it completed, or None."""
    answered: float | None
    """Seconds from connect() until the whole answer had arrived, or None."""
    syn_retransmits: int
    """SYNs the client's kernel sent again for it (tcpi_total_retrans once connected, or when given up)."""
    error: str | None
    """None when answered; "timeout" when given up; else the errno name (ECONNRESET, ...)."""


def load(args: argparse.Namespace) -> int:
    arrivals = schedule(args.pattern, args.seed)
    sel = selectors.DefaultSelector()
    outcomes: list[ConnectionOutcome] = []
    sockets: dict[int, socket.socket] = {}
    received: dict[int, int] = {}
    requests = {i: request_bytes(a.service, args.request) for i, a in enumerate(arrivals)}
    began = time.monotonic()
    wall_began = time.time()
    deadline = began + arrivals[-1].at + args.timeout + 2

    def finish(i: int, error: str | None) -> None:
        s = sockets.pop(i)
        outcome = outcomes[i]
        if outcome["connected"] is None:
            outcome["syn_retransmits"] = total_retrans(s)
        elif error is None:
            outcome["answered"] = round(time.time() - outcome["start"], 6)
        outcome["error"] = error
        sel.unregister(s)
        s.close()

    next_arrival = 0
    while (next_arrival < len(arrivals) or sockets) and time.monotonic() < deadline:
        now = time.monotonic() - began
        while next_arrival < len(arrivals) and arrivals[next_arrival].at <= now:
            i, arrival = next_arrival, arrivals[next_arrival]
            next_arrival += 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            start = time.time()
            rc = s.connect_ex((args.host, args.port))
            outcomes.append({"index": i, "port": s.getsockname()[1], "start": start, "service": arrival.service,
                             "connected": None, "answered": None, "syn_retransmits": 0, "error": None})
            sockets[i] = s
            received[i] = 0
            sel.register(s, selectors.EVENT_WRITE, i)
            if rc not in (0, errno.EINPROGRESS):
                finish(i, errno.errorcode.get(rc, str(rc)))
        # Give up on connections past their timeout.
        for i in [i for i in sockets if time.time() - outcomes[i]["start"] >= args.timeout]:
            finish(i, "timeout")
        wait = arrivals[next_arrival].at - (time.monotonic() - began) if next_arrival < len(arrivals) else 0.05
        for key, mask in sel.select(timeout=min(max(wait, 0.0), 0.05)):
            i, s = key.data, sockets[key.data]
            outcome = outcomes[i]
            try:
                if mask & selectors.EVENT_WRITE:
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise OSError(err, os.strerror(err))
                    outcome["connected"] = round(time.time() - outcome["start"], 6)
                    outcome["syn_retransmits"] = total_retrans(s)
                    s.send(requests[i])
                    sel.modify(s, selectors.EVENT_READ, i)
                    continue
                chunk = s.recv(65536)
                received[i] += len(chunk)
                if chunk:
                    continue
                finish(i, None if received[i] >= args.response else "closed before the answer")
            except OSError as e:
                finish(i, errno.errorcode.get(e.errno or 0, repr(e)))
    for i in list(sockets):
        finish(i, "timeout")
    for outcome in outcomes:
        print(json.dumps(outcome), flush=True)
    print(json.dumps({"began": wall_began, "connections": len(arrivals)}), file=sys.stderr, flush=True)
    return 0


def total_retrans(s: socket.socket) -> int:
    """tcpi_total_retrans: before any data was sent, the SYNs sent again."""
    try:
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_BYTES)
    except OSError:
        return 0
    return int(struct.unpack_from("I", info, TOTAL_RETRANS_OFFSET)[0])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["prefork", "load"])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--workers", type=int, default=2, help="prefork: worker processes")
    p.add_argument("--backlog", type=int, default=16, help="prefork: listen() backlog")
    p.add_argument("--pattern", choices=PATTERNS, default="steady_bursts", help="load: the offered load")
    p.add_argument("--seed", type=int, default=1, help="load: the seed of its arrivals and service times")
    p.add_argument("--timeout", type=float, default=5.0, help="load: seconds from connect() to giving up")
    p.add_argument("--request", type=int, default=64)
    p.add_argument("--response", type=int, default=200)
    p.add_argument("--deadline", type=float, default=30.0, help="prefork: seconds until the server stops")
    p.add_argument("--log", default=os.devnull, help="prefork: the file each worker appends its connections to")
    args = p.parse_args()
    return prefork(args) if args.role == "prefork" else load(args)


if __name__ == "__main__":
    sys.exit(main())
