#!/usr/bin/env python3
"""Writes a large, deterministic classic-pcap capture of nginx -> php-fpm traffic.

Four proxy hosts open connections from ephemeral ports to four php-fpm upstreams on port 9000,
5-20 k new connections a second. The capture point is the proxy side: the proxy answers within
microseconds, the upstream one RTT (0.1-1 ms) later. Each connection is

    SYN, SYN-ACK, ACK, request (300-700 B), [upstream ACK], response (1-8 segments of up to
    1448 B) with client ACKs, upstream FIN, client FIN, upstream ACK

and some connections carry the failures pcapq exists for (rates in KINDS and SYN_RETRY):

    syn_retry        the first SYN lost: the same SYN again 1 s (and rarely 3 s) later
    accept_overflow  the upstream's accept queue is full: the client's ACK and its request are
                     dropped; the upstream resends its SYN-ACK at +1 s and +3 s (the client ACKs
                     each), the client resends the request after RTO, 2 RTO, 4 RTO ... until one
                     gets through
    request_rto      the request lost after the capture point: resent after the RTO (>= 200 ms)
    response_loss    the first response segment lost before the capture point: the client sends
                     a duplicate ACK for each later segment, then the fast retransmission arrives
    server_rst       the upstream resets the connection instead of answering
    client_rst       the proxy gives up after 1-3 s and resets the connection

Frames are Ethernet/IPv4/TCP with the options Linux sends (MSS, SACK-permitted, timestamps,
window scale on SYNs; timestamps on the rest). IP and TCP checksums are zero. Sequence and
acknowledgement numbers are consistent, so retransmissions are exactly the ones listed above.
Pure Python (struct, heapq); the same --seed gives the same bytes.

    python bench/generate.py --packets 1000000 --out bench/out/nginx-php-1000000.pcap

With --rate, connections begin at that steady rate (a second of capture time then holds far fewer
packets: 200 a second make 30 minutes of capture about 4M packets), and every EPISODE_EVERY_S an
accept queue overflow episode of EPISODE_S gives EPISODE_OVERFLOW of the connections the full
queue's signs; --seconds stops at that much capture time instead of a packet count
(bench/soak.py).

    python bench/generate.py --rate 200 --seconds 1800 --out - | pcapq watch --keep 5m -
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import random
import struct
import sys
import time
from pathlib import Path

START_US = 1_700_000_000 * 1_000_000
PROXIES = [bytes([10, 10, 0, 11 + i]) for i in range(4)]
UPSTREAMS = [bytes([10, 20, 0, 21 + i]) for i in range(4)]
UPSTREAM_PORT = 9000
PORT_LOW, PORT_HIGH = 32768, 61000  # net.ipv4.ip_local_port_range

SYN_RETRY = 0.03  # connections whose first SYN is lost
SYN_RETRY_TWICE = 0.1  # of those, the second SYN is lost too
KINDS = [  # (kind, probability); the rest are normal
    ("accept_overflow", 0.02),
    ("request_rto", 0.01),
    ("response_loss", 0.01),
    ("server_rst", 0.005),
    ("client_rst", 0.003),
]
# With --rate: an accept queue overflow episode this long, this often, in this share of connections.
EPISODE_EVERY_S = 300
EPISODE_S = 20
EPISODE_OVERFLOW = 0.3
RESPONSE_SEGMENTS: list[tuple[int, float]] = [(1, 35), (2, 25), (3, 15), (4, 10), (5, 7), (6, 5), (8, 3)]
MSS = 1448  # 1460 less the 12-byte timestamp option

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

REC = struct.Struct("<IIII")
# Ethernet (14 bytes, precomputed), IPv4 (20), TCP (20) and its options as 32-bit words.
HDR = struct.Struct(">14sBBHHHBBH4s4sHHIIBBHHH")
TS_OPT = struct.Struct(">III")  # NOP, NOP, TS: 0x0101080a, TSval, TSecr
SYN_OPT = struct.Struct(">IIIII")  # MSS 1460, SACK-permitted + TS kind, TSval, TSecr, NOP + WS 7
MASK = 0xFFFFFFFF


def _payloads() -> tuple[bytes, bytes]:
    """A FastCGI-looking request (params) and response (stdout) to cut payloads from."""
    params = b"".join(
        bytes([len(k), len(v)]) + k + v
        for k, v in [
            (b"SCRIPT_FILENAME", b"/var/www/app/public/index.php"),
            (b"REQUEST_METHOD", b"GET"),
            (b"QUERY_STRING", b"page=2&sort=price&filter=in-stock&lang=en"),
            (b"REQUEST_URI", b"/catalog/items?page=2&sort=price&filter=in-stock&lang=en"),
            (b"SERVER_PROTOCOL", b"HTTP/1.1"),
            (b"REMOTE_ADDR", b"203.0.113.77"),
            (b"HTTP_USER_AGENT", b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"),
            (b"HTTP_ACCEPT", b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
            (b"HTTP_ACCEPT_LANGUAGE", b"en-US,en;q=0.5"),
            (b"HTTP_COOKIE", b"session=" + b"0123456789abcdef" * 8),
        ]
    )
    begin = struct.pack(">BBHHBx", 1, 1, 1, 8, 0) + struct.pack(">HB5x", 1, 0)
    request = begin + struct.pack(">BBHHBx", 1, 4, 1, len(params), 0) + params
    request = (request * (1 + 1400 // len(request)))[:1400]
    html = b"<tr><td class='item'>Item</td><td class='price'>12.50</td></tr>\n" * 40
    stdout = b"Content-type: text/html; charset=UTF-8\r\n\r\n<!DOCTYPE html><html><body><table>\n" + html
    response = struct.pack(">BBHHBx", 1, 6, 1, 8184, 0) + stdout
    return request, (response * (1 + 2 * MSS // len(response)))[: 2 * MSS]


REQUEST, RESPONSE = _payloads()


class Capture:
    """Packets waiting to be written, ordered by time; connections push, the writer pops."""

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, bytes, str]] = []
        self.order = itertools.count()

    def push(self, t: int, frame: bytes, retransmit: str = "") -> None:
        """Queues a frame; `retransmit` names the kind of a retransmission, for the counts."""
        heapq.heappush(self.heap, (t, next(self.order), REC.pack(t // 1_000_000, t % 1_000_000, len(frame), len(frame)) + frame, retransmit))


class Side:
    """One end of a connection: what it puts in every header it sends."""

    __slots__ = ("eth", "ip", "peer_ip", "port", "peer_port", "seq", "ipid", "ts_off", "peer_ts_off", "win")

    def __init__(self, eth: bytes, ip: bytes, peer_ip: bytes, port: int, peer_port: int, isn: int, ipid: int, ts_off: int, win: int) -> None:
        self.eth, self.ip, self.peer_ip, self.port, self.peer_port = eth, ip, peer_ip, port, peer_port
        self.seq, self.ipid, self.ts_off, self.win = isn, ipid, ts_off, win
        self.peer_ts_off = 0


def frame(s: Side, t: int, flags: int, seq: int, ack: int, payload: bytes = b"", syn_win: int = 0) -> bytes:
    ms = t // 1000
    tsval = (ms + s.ts_off) & MASK
    tsecr = (ms + s.peer_ts_off) & MASK  # TSecr: the peer's clock (millisecond ticks)
    s.ipid = (s.ipid + 1) & 0xFFFF
    if flags & SYN:
        opts = SYN_OPT.pack(0x020405B4, 0x0402080A, tsval, tsecr if flags & ACK else 0, 0x01030307)
        win = syn_win
    else:
        opts = TS_OPT.pack(0x0101080A, tsval, tsecr)
        win = s.win
    tcp_len = 20 + len(opts)
    return (
        HDR.pack(
            s.eth, 0x45, 0, 20 + tcp_len + len(payload), s.ipid, 0x4000, 64, 6, 0, s.ip, s.peer_ip,
            s.port, s.peer_port, seq & MASK, ack & MASK, tcp_len << 2, flags, win, 0, 0,
        )
        + opts
        + payload
    )


def pick(rng: random.Random, weighted: list[tuple[int, float]]) -> int:
    x = rng.random() * sum(w for _, w in weighted)
    for value, w in weighted:
        x -= w
        if x < 0:
            return value
    return weighted[-1][0]


def connection(cap: Capture, rng: random.Random, t0: int, client: Side, server: Side, kind: str, syn_tries: int) -> None:
    """Pushes every packet of one connection, starting with its first SYN at t0 (microseconds)."""
    push = cap.push
    rtt = max(100, min(1000, int(rng.lognormvariate(math.log(300), 0.5))))
    rto = 200_000 + rtt  # Linux: max(200 ms, srtt + 4 rttvar)
    quick = lambda: rng.randint(5, 40)  # the proxy's reaction time  # noqa: E731
    ic, is_ = client.seq, server.seq

    # Handshake. A lost SYN is sent again after 1 s, then 2 s more (Linux's SYN timer).
    t = t0
    for attempt in range(syn_tries):
        push(t, frame(client, t, SYN, ic, 0, syn_win=64240), "syn" if attempt else "")
        if attempt + 1 < syn_tries:
            t += 1_000_000 << attempt
    t_synack = t + rtt
    push(t_synack, frame(server, t_synack, SYN | ACK, is_, ic + 1, syn_win=65160))
    t = t_synack + quick()
    push(t, frame(client, t, ACK, ic + 1, is_ + 1))

    request = REQUEST[: rng.randint(300, 700)]
    r = len(request)
    t_req = t + rng.randint(3, 30)
    push(t_req, frame(client, t_req, ACK | PSH, ic + 1, is_ + 1, request))
    c_next = ic + 1 + r

    # When the upstream has the request.
    if kind == "accept_overflow":
        resends = pick(rng, [(3, 0.5), (4, 0.35), (5, 0.15)])
        sends = [t_req + rto * ((1 << k) - 1) for k in range(1, resends + 1)]
        t_in = sends[-1] + rtt // 2
        resent = [t_synack + 1_000_000, t_synack + 3_000_000, t_synack + 7_000_000]
        for ts in resent:
            if ts < t_in:
                push(ts, frame(server, ts, SYN | ACK, is_, ic + 1, syn_win=65160), "synack")
                ta = ts + quick()
                push(ta, frame(client, ta, ACK, c_next, is_ + 1))
        for ts in sends:
            push(ts, frame(client, ts, ACK | PSH, ic + 1, is_ + 1, request), "request")
        t_ack = sends[-1] + rtt
    elif kind == "request_rto":
        ts = t_req + rto
        push(ts, frame(client, ts, ACK | PSH, ic + 1, is_ + 1, request), "request")
        t_ack = ts + rtt
    else:
        t_ack = t_req + rtt
    work = max(300, min(5_000_000, int(rng.lognormvariate(math.log(100_000), 1.0))))
    if work > 1000 or kind == "client_rst":
        push(t_ack, frame(server, t_ack, ACK, is_ + 1, c_next))
    t = t_ack + work

    if kind == "server_rst":
        push(t, frame(server, t, RST | ACK, is_ + 1, c_next))
        return
    if kind == "client_rst":
        t = t_ack + rng.randint(1_000_000, 3_000_000)
        push(t, frame(client, t, RST | ACK, c_next, is_ + 1))
        return

    # The response, then the upstream closes (php-fpm without keep-alive).
    n = pick(rng, RESPONSE_SEGMENTS)
    if kind == "response_loss" and n < 3:
        n = 3
    sizes = [MSS] * (n - 1) + [rng.randint(60, MSS)]
    s_seq = is_ + 1
    segs = []  # (time, seq, payload)
    for i, size in enumerate(sizes):
        segs.append((t, s_seq, RESPONSE[(i & 1) * MSS:][:size]))
        s_seq += size
        t += rng.randint(2, 12)
    fin_seq = s_seq
    t_fin = t + rng.randint(2, 20)

    if kind == "response_loss":
        # Segment 1 never reaches the capture point: a duplicate ACK for each later segment
        # (and the FIN), then the fast retransmission one RTT after the third duplicate.
        dups = []
        for ts, seq, payload in segs[1:]:
            push(ts, frame(server, ts, ACK | PSH, seq, c_next, payload))
            dups.append(ts + quick())
        push(t_fin, frame(server, t_fin, FIN | ACK, fin_seq, c_next))
        dups.append(t_fin + quick())
        for td in dups:
            push(td, frame(client, td, ACK, c_next, is_ + 1))
        t = dups[min(2, len(dups) - 1)] + rtt
        ts, seq, payload = segs[0]
        push(t, frame(server, t, ACK | PSH, seq, c_next, payload), "response")
        t += quick()
        push(t, frame(client, t, ACK, c_next, fin_seq + 1))
    else:
        for i, (ts, seq, payload) in enumerate(segs):
            push(ts, frame(server, ts, ACK | PSH, seq, c_next, payload))
            if i & 1:
                ta = ts + quick()
                push(ta, frame(client, ta, ACK, c_next, seq + len(payload)))
        push(t_fin, frame(server, t_fin, FIN | ACK, fin_seq, c_next))
        t = t_fin
    t += rng.randint(20, 200)
    push(t, frame(client, t, FIN | ACK, c_next, fin_seq + 1))
    t += rtt
    push(t, frame(server, t, ACK, fin_seq + 1, c_next + 1))


class _Counted:
    """A binary file that counts what is written to it (a pipe cannot `tell()`)."""

    def __init__(self, f) -> None:
        self.f = f
        self.sizes: list[int] = []

    def write(self, data: bytes) -> None:
        self.f.write(data)
        self.sizes.append(len(data))

    def __enter__(self) -> "_Counted":
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()


def generate(packets: int, out: Path | None, seed: int, steady_rate: float | None = None, seconds: float | None = None) -> dict:
    """Writes the capture to `out`, or to standard output for None. With `steady_rate`,
    connections begin at that rate, with overflow episodes (see the module's comment); with
    `seconds`, the capture ends at that much capture time (or `packets`, whichever first)."""
    rng = random.Random(seed)
    cap = Capture()
    eth = {}
    for i, p in enumerate(PROXIES):
        for j, u in enumerate(UPSTREAMS):
            mac_p, mac_u = bytes([0x52, 0x54, 0, 0, 1, i]), bytes([0x52, 0x54, 0, 0, 2, j])
            eth[i, j] = (mac_u + mac_p + b"\x08\x00", mac_p + mac_u + b"\x08\x00")
    next_port = {pair: rng.randrange(PORT_LOW, PORT_HIGH) for pair in eth}
    used = {pair: 0 for pair in eth}
    kinds = dict.fromkeys([k for k, _ in KINDS] + ["normal"], 0)
    retransmits = {"syn": 0, "synack": 0, "request": 0, "response": 0}
    syn_retry_conns = port_reuse = connections = written = 0
    chunk: list[bytes] = []
    heap = cap.heap
    pop = heapq.heappop

    t = START_US
    rate = steady_rate if steady_rate is not None else rng.uniform(5000, 20000)
    next_rate_change = t + 1_000_000 if steady_rate is None else math.inf
    end_us = START_US + int(seconds * 1e6) if seconds is not None else math.inf
    episodes = 0
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
    with _Counted(open(out, "wb") if out is not None else open(sys.stdout.fileno(), "wb", closefd=False)) as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        while written < packets:
            t += max(1, int(rng.expovariate(rate) * 1e6))
            if t >= end_us:
                break
            if t >= next_rate_change:
                rate = rng.uniform(5000, 20000)
                next_rate_change += 1_000_000
            while heap and heap[0][0] <= t and written < packets:
                _, _, record, retransmit = pop(heap)
                chunk.append(record)
                if retransmit:
                    retransmits[retransmit] += 1
                written += 1
                if len(chunk) >= 65536:
                    f.write(b"".join(chunk))
                    chunk.clear()
            if written >= packets:
                break
            pair = (rng.randrange(4), rng.randrange(4))
            port = next_port[pair]
            next_port[pair] = PORT_LOW if port + 1 >= PORT_HIGH else port + 1
            used[pair] += 1
            port_reuse += used[pair] > PORT_HIGH - PORT_LOW
            to_server, to_client = eth[pair]
            proxy, upstream = PROXIES[pair[0]], UPSTREAMS[pair[1]]
            client = Side(to_server, proxy, upstream, port, UPSTREAM_PORT, rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(32), 502)
            server = Side(to_client, upstream, proxy, UPSTREAM_PORT, port, rng.getrandbits(32), 0, rng.getrandbits(32), 509)
            client.peer_ts_off, server.peer_ts_off = server.ts_off, client.ts_off
            x = rng.random()
            kind = "normal"
            in_episode = steady_rate is not None and (t - START_US) // 1_000_000 % EPISODE_EVERY_S >= EPISODE_EVERY_S - EPISODE_S
            if in_episode and rng.random() < EPISODE_OVERFLOW:
                x = 0.0  # the first kind: accept_overflow
                episodes += 1
            for name, share in KINDS:
                if x < share:
                    kind = name
                    break
                x -= share
            syn_tries = 1
            if rng.random() < SYN_RETRY:
                syn_tries = 3 if rng.random() < SYN_RETRY_TWICE else 2
                syn_retry_conns += 1
            kinds[kind] += 1
            connections += 1
            connection(cap, rng, t, client, server, kind, syn_tries)
        # The packets of connections begun before the end, up to it (a steady run's last second).
        while heap and written < packets and heap[0][0] < end_us:
            chunk.append(pop(heap)[2])
            written += 1
        f.write(b"".join(chunk))
        size = sum(f.sizes)
    return {
        "file": str(out) if out is not None else "-",
        "bytes": size,
        "packets": written,
        "seed": seed,
        "connections_started": connections,
        "connections_by_kind": kinds,
        "connections_with_syn_retransmits": syn_retry_conns,
        "connections_on_reused_4tuple": port_reuse,
        "retransmissions_written": retransmits,
        "retransmissions_written_total": sum(retransmits.values()),
        "unwritten_packets": len(heap),
        "capture_seconds": round((min(t, end_us) - START_US) / 1e6, 3),
        "steady_rate": steady_rate,
        "connections_in_overflow_episodes": episodes,
        "note": "connection counts are of connections started, some of which the end of the capture cuts short "
        "(unwritten_packets); retransmissions are those in the file",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=1_000_000, help="packets to write (default 1,000,000)")
    ap.add_argument("--out", help="capture to write, - for standard output (default bench/out/nginx-php-N.pcap)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--rate", type=float, metavar="CONNECTIONS_PER_S", help="connections begun per second of capture time, steadily, "
                    "with an accept queue overflow episode every 5 min (default: 5-20 k a second, changing every second)")
    ap.add_argument("--seconds", type=float, help="end at this much capture time (or --packets, whichever comes first)")
    args = ap.parse_args(argv)
    if args.packets < 1:
        ap.error("--packets must be at least 1")
    if args.rate is not None and not args.rate > 0:
        ap.error("--rate must be above 0")
    if args.seconds is not None:
        if not args.seconds > 0:
            ap.error("--seconds must be above 0")
        if "--packets" not in (argv if argv is not None else sys.argv):
            args.packets = 10**12
    name = f"nginx-php-{args.packets}.pcap" if args.seed == 1 else f"nginx-php-{args.packets}-seed{args.seed}.pcap"
    if args.rate is not None or args.seconds is not None:
        name = f"nginx-php-rate{args.rate or 'var'}-{args.seconds or args.packets}s.pcap"
    out = None if args.out == "-" else Path(args.out) if args.out else Path(__file__).resolve().parent / "out" / name
    started = time.perf_counter()
    info = generate(args.packets, out, args.seed, args.rate, args.seconds)
    info["generate_seconds"] = round(time.perf_counter() - started, 2)
    if out is None:
        # The capture went to standard output: the summary goes to standard error.
        print(json.dumps(info, indent=2), file=sys.stderr)
        return 0
    Path(str(out) + ".json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
