"""The tests' IPv4/TCP packer (craft.ipv4_tcp) builds what scapy builds, byte for byte."""

from __future__ import annotations

import random

import pytest
from scapy.layers.inet import IP, TCP
from scapy.packet import Raw

from craft import Conversation, ipv4_tcp

OPTIONS = [
    (),
    (("MSS", 1460), ("SAckOK", b""), ("WScale", 7)),
    (("MSS", 1460),),
    (("NOP", None), ("WScale", 14), ("SAckOK", b""), ("EOL", None)),
    (("MSS", 1460), ("SAckOK", b""), ("Timestamp", (2000, 0)), ("WScale", 7)),
    (("NOP", None), ("NOP", None), ("SAck", (1000, 1100))),
]


@pytest.mark.parametrize("seed", range(4))
def test_packed_ipv4_tcp_equals_scapys(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        flags = "".join(f for f in "FSRPAUECN" if rng.random() < 0.3) or "A"
        options = rng.choice(OPTIONS)
        payload = rng.randbytes(rng.choice([0, 1, 2, 7, 100, 1448]))
        args = dict(sport=rng.randrange(65536), dport=rng.randrange(65536), seq=rng.randrange(2**32),
                    ack=rng.randrange(2**32), flags=flags, window=rng.randrange(65536))
        src, dst, ip_id = f"10.{rng.randrange(256)}.0.1", f"192.168.{rng.randrange(256)}.2", rng.randrange(65536)
        pkt = IP(src=src, dst=dst, id=ip_id) / TCP(**args, options=list(options))
        expected = bytes(pkt / Raw(payload) if payload else pkt)
        assert ipv4_tcp(src, dst, ip_id, args["sport"], args["dport"], args["seq"], args["ack"], flags, args["window"],
                        options, payload) == expected, (flags, options, len(payload))


def test_conversation_packets_parse_back_as_scapy_reads_them() -> None:
    c = Conversation()
    c.handshake()
    c.send("client", 0.01, b"GET / HTTP/1.1\r\n\r\n")
    pkt = IP(c.packets[-1].ip)
    assert (pkt[TCP].sport, pkt[TCP].dport, str(pkt[TCP].flags), bytes(pkt[TCP].payload)) == (40000, 9000, "PA", b"GET / HTTP/1.1\r\n\r\n")
    assert pkt[TCP].seq == 1001
    # Both checksums as scapy computes them afresh.
    del pkt.chksum, pkt[TCP].chksum
    assert bytes(pkt) == c.packets[-1].ip
