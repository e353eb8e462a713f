"""A path with latency, reordering or loss, for kernels without netem (sch_netem): a bridge in
user space between two interfaces of a middle namespace (NetnsDelayed), run inside it:

    python -m pcapq.lab.delayline IF_CLIENT IF_SERVER --delay-cs S --delay-sc S
        [--hold-every N --hold-for S --hold-dir sc] [--drop-every N --drop-dir sc]
        [--step-after N --step-cs S] [--deadline S]

Each frame read on one interface (an AF_PACKET socket; the middle namespace has no addresses
and does not forward) is written unchanged on the other one `--delay-cs` (client to server) or
`--delay-sc` (server to client) seconds later, in order. Only first transmissions of TCP data
segments are counted for the two impairments (a segment whose sequence range the flow has
already sent is a re-send): `--hold-every N` delays each Nth of them `--hold-for` s more
(the segments behind it overtake it: reordering, nothing lost), `--drop-every N` drops each Nth
(loss). `--step-after N --step-cs S`: after N frames from the client, the client-to-server
delay becomes S (a queue building up on the client's uplink; it only grows, so the order
holds). TCP and UDP checksums are recomputed (the end hosts' veths offload them: their frames
carry the pseudo-header sum only, which the receiving kernel would reject once the frame came
through a packet socket).

Prints "ready" once both sockets are bound; on SIGTERM, SIGINT or at `--deadline`, one JSON line
of counters: {"frames": {"cs": n, "sc": n}, "held": [...], "dropped": [...]} where held and
dropped list (direction, source port, destination port, relative sequence number, length).
"""

from __future__ import annotations

import argparse
import heapq
import json
import selectors
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    words: tuple[int, ...] = struct.unpack(f"!{len(data) // 2}H", data)
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def fix_checksum(frame: bytes) -> bytes:
    """The frame with its IPv4 TCP or UDP checksum computed."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return frame
    ihl = (frame[14] & 0x0F) * 4
    total = struct.unpack("!H", frame[16:18])[0]
    proto = frame[23]
    l4 = 14 + ihl
    end = 14 + total
    if proto == 6:
        offset = l4 + 16
    elif proto == 17:
        offset = l4 + 6
    else:
        return frame
    if end > len(frame) or offset + 2 > end:
        return frame
    buf = bytearray(frame)
    buf[offset:offset + 2] = b"\0\0"
    pseudo = frame[26:34] + struct.pack("!BBH", 0, proto, end - l4)
    value = checksum(pseudo + bytes(buf[l4:end]))
    if proto == 17 and value == 0:
        value = 0xFFFF
    buf[offset:offset + 2] = struct.pack("!H", value)
    return bytes(buf)


class Flows:
    """The highest sequence number each TCP flow has sent, to tell first transmissions."""

    def __init__(self) -> None:
        # Per flow (source address, port, destination address, port).
        self.sent: dict[tuple[bytes, int, bytes, int], int] = {}
        self.isn: dict[tuple[bytes, int, bytes, int], int] = {}

    def first_data(self, frame: bytes) -> tuple[int, int, int, int] | None:
        """(sport, dport, relative seq, length) of a TCP segment carrying bytes its flow has not
        sent before; None for anything else."""
        if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
            return None
        ihl = (frame[14] & 0x0F) * 4
        total = struct.unpack("!H", frame[16:18])[0]
        l4 = 14 + ihl
        sport: int
        dport: int
        seq: int
        sport, dport, seq = struct.unpack("!HHI", frame[l4:l4 + 8])
        doff = (frame[l4 + 12] >> 4) * 4
        flags = frame[l4 + 13]
        key = (frame[26:30], sport, frame[30:34], dport)
        if flags & 0x02:  # SYN
            self.isn[key] = seq
            self.sent[key] = 0
            return None
        length = total - ihl - doff
        if length <= 0 or key not in self.isn:
            return None
        rel = (seq - self.isn[key]) % 2**32
        end = rel + length
        if end <= self.sent[key]:
            return None
        self.sent[key] = end
        return sport, dport, rel, length


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("client_if")
    p.add_argument("server_if")
    p.add_argument("--delay-cs", type=float, default=0.0)
    p.add_argument("--delay-sc", type=float, default=0.0)
    p.add_argument("--hold-every", type=int, default=0)
    p.add_argument("--hold-for", type=float, default=0.0)
    p.add_argument("--hold-dir", choices=["cs", "sc"], default="sc")
    p.add_argument("--drop-every", type=int, default=0)
    p.add_argument("--drop-dir", choices=["cs", "sc"], default="sc")
    p.add_argument("--step-after", type=int, default=0)
    p.add_argument("--step-cs", type=float, default=0.0)
    p.add_argument("--deadline", type=float, default=60.0)
    args = p.parse_args()

    socks = {}
    for name in (args.client_if, args.server_if):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.bind((name, 0))
        s.setblocking(False)
        socks[name] = s
    # direction -> (socket to read, socket to write, delay)
    route = {
        "cs": (socks[args.client_if], socks[args.server_if], args.delay_cs),
        "sc": (socks[args.server_if], socks[args.client_if], args.delay_sc),
    }
    sel = selectors.DefaultSelector()
    for direction, (rx, _tx, _delay) in route.items():
        sel.register(rx, selectors.EVENT_READ, direction)
    flows = Flows()
    counts = {"cs": 0, "sc": 0}
    data_seen = {"cs": 0, "sc": 0}
    # [direction, sport, dport, relative seq, length] of each segment held back or dropped.
    held: list[list[str | int]] = []
    dropped: list[list[str | int]] = []
    queue: list[tuple[float, int, socket.socket, bytes]] = []
    serial = 0
    stop = False

    def on_signal(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    deadline = time.monotonic() + args.deadline
    print("ready", flush=True)
    while not stop and time.monotonic() < deadline:
        now = time.monotonic()
        timeout = min(0.2, max(0.0, queue[0][0] - now)) if queue else 0.2
        for key, _mask in sel.select(timeout):
            direction = key.data
            rx, tx, delay = route[direction]
            while True:
                try:
                    frame, addr = rx.recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                counts[direction] += 1
                if direction == "cs" and args.step_after and counts["cs"] > args.step_after:
                    delay = args.step_cs
                due = time.monotonic() + delay
                first = flows.first_data(frame)
                if first is not None:
                    data_seen[direction] += 1
                    n = data_seen[direction]
                    if direction == args.drop_dir and args.drop_every and n % args.drop_every == 0:
                        dropped.append([direction, *first])
                        continue
                    if direction == args.hold_dir and args.hold_every and n % args.hold_every == 0:
                        held.append([direction, *first])
                        due += args.hold_for
                serial += 1
                heapq.heappush(queue, (due, serial, tx, fix_checksum(frame)))
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _due, _n, tx, frame = heapq.heappop(queue)
            try:
                tx.send(frame)
            except OSError as e:
                print(f"delayline: {e}", file=sys.stderr, flush=True)
    print(json.dumps({"frames": counts, "data_segments": data_seen, "held": held, "dropped": dropped}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
