"""A host that sent packets is not silent (cause silent_host): every packet from its address
counts, also the SYNs it sent as a client; on loopback client and server are one address."""

from __future__ import annotations

import json

from conftest import run_pcapq
from craft import Captured, Conversation, write_pcap

# Linux's SYN schedule with tcp_syn_linear_timeouts=4: 1 s steps, then doubling.
SYN_LINEAR = (0, 1, 2, 3, 4, 5, 7, 11)


def _causes(tmp_path, packets: list[Captured]) -> set[str]:
    path = write_pcap(tmp_path / "capture.pcap", sorted(packets, key=lambda p: p.time))
    doc = json.loads(run_pcapq("analyze", "--format", "json", str(path)).stdout)
    return {f["cause"] for f in doc["findings"] + doc["minor_observations"]}


def test_loopback_syns_unanswered_are_no_silent_host(tmp_path) -> None:
    """Three clients on 127.0.0.1 call 127.0.0.1:9000 and get no answer: the address sent their
    SYNs, it is up; a local filter or the listener drops them."""
    packets: list[Captured] = []
    for k in range(3):
        c = Conversation(client=("127.0.0.1", 41000 + k), server=("127.0.0.1", 9000), client_isn=10_000 * k,
                         packets=packets, new_ip_ids=True)
        for t in SYN_LINEAR:
            c.syn(0.1 * k + t)
    assert "silent_host" not in _causes(tmp_path, packets)


def test_a_host_that_never_sent_a_packet_is_silent(tmp_path) -> None:
    """The twin: the SYNs come from other hosts, and 10.0.0.3 sends nothing at all."""
    packets: list[Captured] = []
    for k in range(3):
        c = Conversation(client=(f"10.0.0.{k + 4}", 41000), server=("10.0.0.3", 9000), client_isn=10_000 * k,
                         packets=packets, new_ip_ids=True)
        for t in SYN_LINEAR:
            c.syn(0.1 * k + t)
    assert "silent_host" in _causes(tmp_path, packets)
