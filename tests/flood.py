"""Captures of a SYN flood or port scan: millions of one-packet connections, written fast.

scapy builds about 10,000 packets a second; these files need millions, so one Ethernet + IPv4 +
TCP SYN frame is patched in place with struct for every record. Checksums are left at zero, as
captures taken on a host with checksum offload show them; pcapq does not check them.

    python tests/flood.py /tmp/flood.pcap 2000000      # 2M SYNs from 1,000 sources
"""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

from craft import START

_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
_ETHERNET = bytes(6) + bytes.fromhex("020000000001") + b"\x08\x00"
_FRAME_LEN = 14 + 20 + 20


def syn_flood(
    path: Path | str,
    syns: int,
    sources: int = 1000,
    server: tuple[str, int] = ("10.0.0.2", 9000),
    seconds: float = 10.0,
    scan_ports: bool = False,
    seed: int = 1,
) -> Path:
    """Writes a pcap of `syns` SYNs, each opening its own connection: from `sources` addresses
    (10.128.0.0 + i) and random source ports to `server`, spread evenly over `seconds`. With
    `scan_ports`, one source probes a new destination port with every SYN instead (a port scan).
    Nothing is answered. Returns `path`."""
    rng = random.Random(seed)
    dst = bytes(int(x) for x in server[0].split("."))
    step_us = max(1, int(seconds * 1e6 / max(syns, 1)))
    start_us = int(START * 1e6)
    record = struct.Struct("<IIII")
    ip_tcp = struct.Struct(">BBHHHBBH4s4sHHIIBBHHH")
    chunk = bytearray()
    with open(path, "wb") as out:
        out.write(_PCAP_HEADER)
        for i in range(syns):
            t = start_us + i * step_us
            source = 0x0A800000 + (0 if scan_ports else i % sources)
            sport = rng.randrange(1024, 65536)
            dport = 1 + i % 65535 if scan_ports else server[1]
            chunk += record.pack(t // 1_000_000, t % 1_000_000, _FRAME_LEN, _FRAME_LEN)
            chunk += _ETHERNET
            chunk += ip_tcp.pack(
                0x45, 0, 40, i & 0xFFFF, 0x4000, 64, 6, 0,
                source.to_bytes(4, "big"), dst,
                sport, dport, rng.getrandbits(32), 0, 5 << 4, 0x02, 64240, 0, 0,
            )  # fmt: skip
            if len(chunk) >= 1 << 20:
                out.write(chunk)
                chunk.clear()
        out.write(chunk)
    return Path(path)


if __name__ == "__main__":
    syn_flood(sys.argv[1], int(sys.argv[2]), sources=int(sys.argv[3]) if len(sys.argv) > 3 else 1000)
