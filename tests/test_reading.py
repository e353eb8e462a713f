"""Every capture variant pcapq must read, checked against exact values in the JSON output.

Captures are written record by record with integer nanosecond times, so expected event times,
offsets, frame numbers and relative sequence numbers are exact. A few variants are also
cross-checked against tshark.
"""

from __future__ import annotations

import gzip
import json
import shutil
import struct
import subprocess
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
from scapy.packet import Raw

import craft
from conftest import analyze_json, run_pcapq

BASE_NS = 1_700_000_000 * 10**9
CLIENT4, SERVER4 = ("10.0.0.1", 40000), ("10.0.0.2", 9000)
CLIENT6, SERVER6 = ("2001:db8::1", 40000), ("2001:db8::2", 9000)

SYN_OPTIONS = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 7)]
SYNACK_OPTIONS = [("MSS", 1400), ("SAckOK", b""), ("Timestamp", (2, 1)), ("NOP", None), ("WScale", 9)]

# The standard conversation: handshake, 100 bytes up, 300 bytes down, an ACK, FIN/FIN/ACK.
STD_COUNT = 9
# Microseconds after the first packet.
STD_TIMES_US = [0, 100, 200, 1000, 2000, 2100, 3000, 3100, 3200]


def std_packets(ipv6: bool = False) -> list[bytes]:
    """The IP packets of the standard conversation."""
    client, server = (CLIENT6, SERVER6) if ipv6 else (CLIENT4, SERVER4)
    conv = craft.Conversation(client=client, server=server, start=0.0)
    conv.syn(options=SYN_OPTIONS)
    conv.synack(options=SYNACK_OPTIONS)
    conv.ack("client")
    conv.send("client", 0, 100)
    conv.send("server", 0, 300)
    conv.ack("client")
    conv.close(0)
    assert len(conv.packets) == STD_COUNT
    return [p.ip for p in conv.packets]


def std_times(base_ns: int = BASE_NS, step_ns: int = 1000, pattern: list[int] = STD_TIMES_US) -> list[int]:
    return [base_ns + k * step_ns for k in pattern]


def std_events(up: int = 100, down: int = 300) -> list[tuple]:
    """Events of the standard conversation when `up` and `down` payload bytes are seen:
    (packet index, kind, from, flags, relative seq, relative ack, len)."""
    return [
        (0, "syn", "client", "S", 0, None, 0),
        (1, "synack", "server", "S.", 0, 1, 0),
        (2, "handshake_ack", "client", ".", 1, 1, 0),
        (3, "data_first", "client", "P.", 1, 1, up),
        (4, "data_first", "server", "P.", 1, up + 1, down),
        (6, "fin", "client", "F.", up + 1, down + 1, 0),
        (7, "fin", "server", "F.", down + 1, up + 2, 0),
    ]


def epoch(ns: int) -> float:
    """Event times in the JSON: Unix seconds rounded half up to the microsecond."""
    return ((ns + 500) // 1000) / 1e6


def check_std(doc: dict, frames: list[int], times: list[int], ipv6: bool = False, lens: tuple[int, int] = (100, 300)) -> dict:
    """Asserts the one connection of `doc` is the standard conversation, with packet i at
    frame `frames[i]` and time `times[i]` (ns). Returns the connection."""
    assert len(doc["connections"]) == 1, doc["connections"]
    conn = doc["connections"][0]
    if ipv6:
        assert (conn["client"], conn["server"], conn["ip_version"]) == ("[2001:db8::1]:40000", "[2001:db8::2]:9000", 6)
    else:
        assert (conn["client"], conn["server"], conn["ip_version"]) == ("10.0.0.1:40000", "10.0.0.2:9000", 4)
    assert conn["isn"] == {"client": 1000, "server": 5000}
    assert conn["first_frame"] == frames[0]
    assert conn["handshake"]["completed"] is True
    assert conn["first_time"] == epoch(times[0])
    assert conn["last_time"] == epoch(times[-1])
    assert conn["duration"] == (times[-1] - times[0]) / 1e9
    assert conn["state"] == "closed"
    want = [
        {
            "frame": frames[i],
            "time": epoch(times[i]),
            "offset": (times[i] - times[0]) / 1e9,
            "kind": kind,
            "from": side,
            "flags": flags,
            "seq": seq,
            "ack": ack,
            "len": length,
        }
        for i, kind, side, flags, seq, ack, length in std_events(*lens)
    ]
    got = [{k: e[k] for k in want[0]} for e in conn["events"]]
    assert got == want
    assert all(e["file"] == 0 and e["win"] == 64240 for e in conn["events"])
    client, server = conn["sides"]["client"], conn["sides"]["server"]
    assert (client["packets"], client["payload_bytes"], client["fin"]) == (6, lens[0], True)
    assert (server["packets"], server["payload_bytes"], server["fin"]) == (3, lens[1], True)
    assert client["options"] == {"mss": 1460, "window_scale": 7, "sack_permitted": True, "timestamps": True}
    assert server["options"] == {"mss": 1400, "window_scale": 9, "sack_permitted": True, "timestamps": True}
    return conn


# ---------------------------------------------------------------------------------------------
# Link layers


def _null_be(ip: bytes) -> bytes:
    # A big-endian capturing host; FreeBSD's AF_INET6 is 28.
    return struct.pack(">I", 28 if ip[0] >> 4 == 6 else 2) + ip


# name: (LINKTYPE number, name in the JSON, frame builder)
LINKS = {
    "ethernet": (1, "ETHERNET", lambda ip: craft.link_frame(ip, "ethernet")),
    "ethernet_vlan": (1, "ETHERNET", lambda ip: craft.link_frame(ip, "ethernet", vlan=[100])),
    "ethernet_qinq": (1, "ETHERNET", lambda ip: craft.link_frame(ip, "ethernet", vlan=[10, 20])),
    "sll": (113, "LINUX_SLL", lambda ip: craft.link_frame(ip, "sll")),
    "sll2": (276, "LINUX_SLL2", lambda ip: craft.link_frame(ip, "sll2")),
    "raw": (101, "RAW", lambda ip: ip),
    "raw12": (12, "RAW", lambda ip: ip),
    "raw14": (14, "RAW", lambda ip: ip),
    "ipv4": (228, "IPV4", lambda ip: ip),
    "ipv6": (229, "IPV6", lambda ip: ip),
    "null_le": (0, "NULL", lambda ip: craft.link_frame(ip, "null")),
    "null_be": (0, "NULL", _null_be),
    "loop": (108, "LOOP", lambda ip: craft.link_frame(ip, "loop")),
}


def arp_frame() -> bytes:
    """An Ethernet ARP request (not IP)."""
    arp = struct.pack(">HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, b"\x00\x11\x22\x33\x44\x55", bytes([10, 0, 0, 1]), bytes(6), bytes([10, 0, 0, 2]))
    return b"\xff" * 6 + b"\x00\x11\x22\x33\x44\x55" + b"\x08\x06" + arp


def udp_packet(ipv6: bool = False) -> bytes:
    ip = IPv6(src=CLIENT6[0], dst=SERVER6[0]) if ipv6 else IP(src=CLIENT4[0], dst=SERVER4[0])
    return bytes(ip / UDP(sport=5353, dport=53) / Raw(b"query"))


# ---------------------------------------------------------------------------------------------
# Writers: every record with an integer nanosecond time


@dataclass
class Rec:
    time_ns: int
    frame: bytes
    caplen: int | None = None  # captured bytes; None: the whole frame (up to the snaplen)
    iface: int = 0


def pcap_file(recs: list[Rec], linktype: int, nano: bool = False, big_endian: bool = False, snaplen: int = 262144) -> bytes:
    e = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = bytearray(struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))
    for r in recs:
        seconds, fraction = divmod(r.time_ns, 10**9)
        if not nano:
            assert fraction % 1000 == 0, "a microsecond capture cannot hold this time"
            fraction //= 1000
        data = r.frame[: min(snaplen, r.caplen if r.caplen is not None else len(r.frame))]
        out += struct.pack(e + "IIII", seconds, fraction, len(data), len(r.frame)) + data
    return bytes(out)


def units(tsresol: int | None) -> int:
    if tsresol is None:
        return 10**6
    return 2 ** (tsresol & 0x7F) if tsresol & 0x80 else 10**tsresol


def ticks(time_ns: int, tsresol: int | None, tsoffset: int = 0) -> int:
    scaled = (time_ns - tsoffset * 10**9) * units(tsresol)
    assert scaled % 10**9 == 0, "time not representable in this resolution"
    return scaled // 10**9


def ng_idb(linktype: int, big_endian: bool = False, tsresol: int | None = None, tsoffset: int | None = None, snaplen: int = 0) -> bytes:
    e = ">" if big_endian else "<"
    opts = b""
    if tsresol is not None:
        opts += craft._option(e, 9, bytes([tsresol]))
    if tsoffset is not None:
        opts += craft._option(e, 14, struct.pack(e + "q", tsoffset))
    if opts:
        opts += craft._option(e, 0, b"")
    return craft._block(e, 1, struct.pack(e + "HHI", linktype, 0, snaplen) + opts)


def ng_epb(r: Rec, big_endian: bool = False, tsresol: int | None = None, tsoffset: int = 0) -> bytes:
    e = ">" if big_endian else "<"
    t = ticks(r.time_ns, tsresol, tsoffset)
    data = r.frame if r.caplen is None else r.frame[: r.caplen]
    return craft._block(e, 6, struct.pack(e + "IIIII", r.iface, t >> 32, t & 0xFFFFFFFF, len(data), len(r.frame)) + data)


def ng_spb(r: Rec, big_endian: bool = False) -> bytes:
    e = ">" if big_endian else "<"
    data = r.frame if r.caplen is None else r.frame[: r.caplen]
    return craft._block(e, 3, struct.pack(e + "I", len(r.frame)) + data)


def ng_opb(r: Rec, big_endian: bool = False, tsresol: int | None = None) -> bytes:
    e = ">" if big_endian else "<"
    t = ticks(r.time_ns, tsresol)
    body = struct.pack(e + "HHIIII", r.iface, 0, t >> 32, t & 0xFFFFFFFF, len(r.frame), len(r.frame)) + r.frame
    return craft._block(e, 2, body)


def write(path: Path, data: bytes, compress: bool = False) -> Path:
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)
    return path


def analyze_bytes(data: bytes) -> dict:
    """The JSON document for a capture piped to `pcapq analyze -`."""
    proc = run_pcapq("analyze", "--format", "json", "-", input=data)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    doc = json.loads(proc.stdout)
    assert proc.returncode == (1 if doc["findings"] else 0)
    return doc


# ---------------------------------------------------------------------------------------------
# tshark cross-check


def tshark_frames(path: Path) -> dict[int, tuple[str, int | None, int | None]]:
    """frame.number -> (frame.time_epoch, tcp.seq, tcp.ack) as tshark shows them."""
    proc = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch", "-e", "tcp.seq", "-e", "tcp.ack"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = {}
    for line in proc.stdout.splitlines():
        number, time, seq, ack = (line.split("\t") + ["", "", ""])[:4]
        out[int(number)] = (time, int(seq) if seq else None, int(ack) if ack else None)
    return out


def check_against_tshark(path: Path, doc: dict) -> None:
    shark = tshark_frames(path)
    assert len(shark) == sum(c["packets"] for c in doc["captures"])
    events = [e for c in doc["connections"] for e in c["events"]]
    assert events
    for e in events:
        time, seq, ack = shark[e["frame"]]
        us = (Decimal(time) * 1_000_000).to_integral_value(rounding="ROUND_HALF_UP")
        assert e["time"] == int(us) / 1e6, (e, time)
        assert e["seq"] == seq, (e, seq)
        if e["ack"] is None:
            assert "." not in e["flags"]
        else:
            assert e["ack"] == ack, (e, ack)


needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


# ---------------------------------------------------------------------------------------------
# Classic pcap


@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
@pytest.mark.parametrize("nano", [False, True], ids=["usec", "nsec"])
def test_classic_pcap_byte_order_and_resolution(tmp_path, big_endian, nano):
    if nano:
        # 1 ns apart, across a second boundary.
        times = std_times(BASE_NS + 999_999_996, 1, list(range(STD_COUNT)))
    else:
        times = std_times(BASE_NS + 999_998_000, 1000, list(range(STD_COUNT)))
    recs = [Rec(t, craft.link_frame(ip, "ethernet")) for t, ip in zip(times, std_packets())]
    path = write(tmp_path / "x.pcap", pcap_file(recs, 1, nano=nano, big_endian=big_endian))
    doc = analyze_json(path)
    cap = doc["captures"][0]
    assert (cap["format"], cap["gzip"], cap["packets"], cap["tcp_segments"]) == ("pcap", False, 9, 9)
    assert (cap["sections"], cap["interfaces"], cap["link_types"], cap["read_stop"]) == (1, 1, {"ETHERNET": 9}, "end")
    assert (cap["first_time"], cap["last_time"]) == (epoch(times[0]), epoch(times[-1]))
    assert doc["skipped"] == {} and doc["warnings"] == []
    conn = check_std(doc, list(range(1, 10)), times)
    if nano:
        assert [e["offset"] for e in conn["events"]] == [0.0, 1e-9, 2e-9, 3e-9, 4e-9, 6e-9, 7e-9]
        assert conn["handshake"]["duration"] == 2e-9


@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
def test_classic_pcap_nanosecond_fractions_round_to_microseconds(tmp_path, big_endian):
    # Sub-microsecond parts: 499 rounds down, 500 rounds up; offsets keep the nanoseconds.
    pattern = [0, 123_456_499, 123_456_500, 123_457_001, 200_000_000, 200_000_001, 300_000_000, 300_000_999, 999_999_999]
    times = std_times(BASE_NS, 1, pattern)
    recs = [Rec(t, craft.link_frame(ip, "sll2")) for t, ip in zip(times, std_packets())]
    path = write(tmp_path / "ns.pcap", pcap_file(recs, 276, nano=True, big_endian=big_endian))
    doc = analyze_json(path)
    conn = check_std(doc, list(range(1, 10)), times)
    assert [e["time"] for e in conn["events"]][:3] == [1700000000.0, 1700000000.123456, 1700000000.123457]
    assert conn["events"][2]["offset"] == 0.1234565


# ---------------------------------------------------------------------------------------------
# pcapng


# Per if_tsresol: the spacing between packets, in ns, that the resolution holds exactly.
TSRESOL_STEP = {None: 1000, 6: 1000, 9: 1, 0x80 | 20: 1_953_125, 0x80 | 10: 1_953_125}


@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
@pytest.mark.parametrize("tsresol", list(TSRESOL_STEP), ids=["default", "dec6", "dec9", "bin20", "bin10"])
def test_pcapng_section_byte_order_and_tsresol(tmp_path, big_endian, tsresol):
    times = std_times(BASE_NS + 500_000_000, TSRESOL_STEP[tsresol], [0, 1, 2, 5, 10, 11, 20, 21, 22])
    recs = [Rec(t, craft.link_frame(ip, "ethernet")) for t, ip in zip(times, std_packets())]
    data = craft.shb(big_endian) + ng_idb(1, big_endian, tsresol) + b"".join(ng_epb(r, big_endian, tsresol) for r in recs)
    doc = analyze_json(write(tmp_path / "x.pcapng", data))
    cap = doc["captures"][0]
    assert (cap["format"], cap["packets"], cap["sections"], cap["interfaces"]) == ("pcapng", 9, 1, 1)
    check_std(doc, list(range(1, 10)), times)


@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
@pytest.mark.parametrize("tsoffset", [1_699_999_000, -86_400], ids=["positive", "negative"])
@pytest.mark.parametrize("tsresol", [None, 9, 0x80 | 10], ids=["default", "dec9", "bin10"])
def test_pcapng_if_tsoffset(tmp_path, big_endian, tsoffset, tsresol):
    times = std_times(BASE_NS + 250_000_000, TSRESOL_STEP[tsresol], [0, 3, 4, 8, 9, 10, 50, 51, 52])
    recs = [Rec(t, craft.link_frame(ip, "ethernet")) for t, ip in zip(times, std_packets())]
    data = craft.shb(big_endian) + ng_idb(1, big_endian, tsresol, tsoffset)
    data += b"".join(ng_epb(r, big_endian, tsresol, tsoffset) for r in recs)
    path = write(tmp_path / "off.pcapng", data)
    doc = analyze_json(path)
    check_std(doc, list(range(1, 10)), times)
    assert doc["captures"][0]["first_time"] == epoch(times[0])


def test_pcapng_sections_of_both_byte_orders_renumber_interfaces(tmp_path):
    ips = std_packets()
    times = std_times(BASE_NS, 15_625_000, [0, 1, 2, 4, 8, 9, 16, 17, 18])
    # (big endian, [(link, tsresol)]) per section; each section restarts interface ids at 0.
    sections = [
        (False, [("ethernet", 6), ("sll2", 9)]),
        # One connection across interfaces: untagged everywhere (a VLAN tag would make it another
        # connection, docs/json.md).
        (True, [("raw", 0x80 | 20), ("ethernet", None)]),
        (False, [("null_le", 0x80 | 10)]),
    ]
    # packet index -> (section, interface)
    placement = [(0, 0), (0, 1), (0, 1), (1, 0), (1, 1), (1, 0), (2, 0), (2, 0), (2, 0)]
    data = b""
    for s, (be, ifaces) in enumerate(sections):
        data += craft.shb(be)
        data += b"".join(ng_idb(LINKS[link][0], be, tsresol) for link, tsresol in ifaces)
        for i, (ps, pi) in enumerate(placement):
            if ps == s:
                link, tsresol = ifaces[pi]
                data += ng_epb(Rec(times[i], LINKS[link][2](ips[i]), iface=pi), be, tsresol)
    path = write(tmp_path / "sections.pcapng", data)
    doc = analyze_json(path)
    cap = doc["captures"][0]
    assert (cap["packets"], cap["sections"], cap["interfaces"]) == (9, 3, 5)
    assert cap["link_types"] == {"ETHERNET": 2, "LINUX_SLL2": 2, "RAW": 2, "NULL": 3}
    assert doc["skipped"] == {}
    check_std(doc, list(range(1, 10)), times)


@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
def test_pcapng_simple_packet_blocks_use_interface_zero(tmp_path, big_endian):
    # Interface 0 is Ethernet, interface 1 raw IP. The SYN is an EPB on interface 1; the rest
    # are SPBs, which belong to interface 0 and carry no time (pcapq keeps the previous time).
    ips = std_packets()
    t0 = BASE_NS + 42_000_000
    data = craft.shb(big_endian) + ng_idb(1, big_endian) + ng_idb(101, big_endian, tsresol=9)
    data += ng_epb(Rec(t0, ips[0], iface=1), big_endian, 9)
    data += b"".join(ng_spb(Rec(0, craft.link_frame(ip, "ethernet")), big_endian) for ip in ips[1:])
    doc = analyze_json(write(tmp_path / "spb.pcapng", data))
    assert doc["captures"][0]["link_types"] == {"RAW": 1, "ETHERNET": 8}
    check_std(doc, list(range(1, 10)), [t0] * 9)


def test_pcapng_only_simple_packet_blocks(tmp_path):
    recs = [Rec(0, craft.link_frame(ip, "sll")) for ip in std_packets(ipv6=True)]
    data = craft.shb() + ng_idb(113) + b"".join(ng_spb(r) for r in recs)
    doc = analyze_json(write(tmp_path / "spb-only.pcapng", data))
    assert doc["captures"][0]["packets"] == 9
    conn = doc["connections"][0]
    assert conn["client"] == "[2001:db8::1]:40000"
    assert [(e["frame"], e["kind"], e["seq"], e["ack"], e["len"]) for e in conn["events"]] == [
        (i + 1, kind, seq, ack, length) for i, kind, _, _, seq, ack, length in std_events()
    ]


@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
def test_pcapng_obsolete_packet_blocks(tmp_path, big_endian):
    # OPBs (block type 2) on interface 0 (Ethernet, microseconds) and 1 (SLL, nanoseconds).
    ips = std_packets()
    times = std_times(BASE_NS, 1000, STD_TIMES_US)
    times[3] += 7  # a nanosecond part only interface 1 can hold
    data = craft.shb(big_endian) + ng_idb(1, big_endian) + ng_idb(113, big_endian, tsresol=9)
    for i, (t, ip) in enumerate(zip(times, ips)):
        if i % 2:
            data += ng_opb(Rec(t, craft.link_frame(ip, "sll"), iface=1), big_endian, 9)
        else:
            data += ng_opb(Rec(t, craft.link_frame(ip, "ethernet")), big_endian)
    doc = analyze_json(write(tmp_path / "opb.pcapng", data))
    assert doc["captures"][0]["link_types"] == {"ETHERNET": 5, "LINUX_SLL": 4}
    conn = check_std(doc, list(range(1, 10)), times)
    assert conn["events"][3]["offset"] == 0.001000007


def _nrb(e: str) -> bytes:
    record = struct.pack(e + "HH", 1, 4 + 10) + _pad(bytes([10, 0, 0, 2]) + b"upstream\x00\x00")
    return craft._block(e, 4, record + struct.pack(e + "HH", 0, 0))


def _isb(e: str) -> bytes:
    return craft._block(e, 5, struct.pack(e + "III", 0, 0, 0))


def _dsb(e: str) -> bytes:
    secret = b"CLIENT_RANDOM 00 00\n"
    return craft._block(e, 10, struct.pack(e + "II", 0x544C534B, len(secret)) + secret)


def _pad(b: bytes) -> bytes:
    return b + b"\x00" * (-len(b) % 4)


@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
def test_pcapng_non_packet_and_unknown_blocks_are_skipped(tmp_path, big_endian):
    e = ">" if big_endian else "<"
    ips = std_packets()
    times = std_times()
    # Before packet i: blocks that are not frames in Wireshark.
    extra = {
        0: _nrb(e),
        2: craft._block(e, 0x1234, b"unknown"),
        3: _isb(e),
        5: _dsb(e) + craft._block(e, 0x80000001, b"\x00" * 8),
        8: craft._block(e, 0x00000ACE, b""),
    }
    data = craft.shb(big_endian) + ng_idb(1, big_endian)
    for i, (t, ip) in enumerate(zip(times, ips)):
        data += extra.get(i, b"") + ng_epb(Rec(t, craft.link_frame(ip, "ethernet")), big_endian)
    data += _isb(e)
    path = write(tmp_path / "blocks.pcapng", data)
    doc = analyze_json(path)
    assert doc["captures"][0]["packets"] == 9
    assert doc["captures"][0]["read_stop"] == "end"
    check_std(doc, list(range(1, 10)), times)
    if shutil.which("tshark"):
        check_against_tshark(path, doc)


def _custom_block(e: str, copiable: bool = True) -> bytes:
    # Custom block: Private Enterprise Number, then data.
    return craft._block(e, 0x00000BAD if copiable else 0x40000BAD, struct.pack(e + "I", 32473) + b"note")


def _journal_block(e: str) -> bytes:
    entry = b"__REALTIME_TIMESTAMP=1700000000000000\nMESSAGE=upstream reset\n"
    return craft._block(e, 9, entry)


@needs_tshark
@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
def test_pcapng_custom_and_journal_blocks_take_frame_numbers(tmp_path, big_endian):
    # Wireshark shows custom blocks and systemd journal export blocks as frames of their own.
    e = ">" if big_endian else "<"
    ips = std_packets()
    times = std_times()
    extra = {2: _custom_block(e), 4: _journal_block(e), 5: _custom_block(e, copiable=False)}
    data = craft.shb(big_endian) + ng_idb(1, big_endian)
    for i, (t, ip) in enumerate(zip(times, ips)):
        data += extra.get(i, b"") + ng_epb(Rec(t, craft.link_frame(ip, "ethernet")), big_endian)
    path = write(tmp_path / "custom.pcapng", data)
    doc = analyze_json(path)
    check_std(doc, [1, 2, 4, 5, 7, 9, 10, 11, 12], times)
    assert doc["captures"][0]["tcp_segments"] == 9
    check_against_tshark(path, doc)


def test_pcapng_interfaces_of_different_link_types_in_one_section(tmp_path):
    # One connection: no VLAN tags (a tagged frame would belong to another connection).
    names = ["ethernet", "ethernet", "sll", "sll2", "raw", "ipv4", "null_le", "loop", "raw14"]
    ips = std_packets()
    times = std_times(BASE_NS, 1, list(range(STD_COUNT)))
    data = craft.shb() + b"".join(ng_idb(LINKS[n][0], tsresol=9) for n in names)
    # Packet i goes out on interface (i * 4) % 9: the order differs from the IDB order.
    for i, (t, ip) in enumerate(zip(times, ips)):
        iface = (i * 4) % 9
        data += ng_epb(Rec(t, LINKS[names[iface]][2](ip), iface=iface), tsresol=9)
    doc = analyze_json(write(tmp_path / "ifaces.pcapng", data))
    cap = doc["captures"][0]
    assert cap["interfaces"] == 9
    assert cap["link_types"] == {"ETHERNET": 2, "LINUX_SLL": 1, "LINUX_SLL2": 1, "RAW": 2, "IPV4": 1, "NULL": 1, "LOOP": 1}
    check_std(doc, list(range(1, 10)), times)


# ---------------------------------------------------------------------------------------------
# gzip and standard input


def _std_capture(fmt: str) -> tuple[bytes, list[int]]:
    times = std_times()
    recs = [Rec(t, craft.link_frame(ip, "ethernet")) for t, ip in zip(times, std_packets())]
    if fmt == "pcap":
        return pcap_file(recs, 1), times
    return craft.shb(True) + ng_idb(1, True) + b"".join(ng_epb(r, True) for r in recs), times


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_gzip_is_transparent(tmp_path, fmt):
    data, times = _std_capture(fmt)
    doc = analyze_json(write(tmp_path / f"x.{fmt}.gz", data, compress=True))
    cap = doc["captures"][0]
    assert (cap["format"], cap["gzip"], cap["packets"]) == (fmt, True, 9)
    check_std(doc, list(range(1, 10)), times)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_standard_input(fmt, compress):
    data, times = _std_capture(fmt)
    doc = analyze_bytes(gzip.compress(data, mtime=0) if compress else data)
    cap = doc["captures"][0]
    assert (cap["path"], cap["format"], cap["gzip"], cap["packets"]) == ("-", fmt, compress, 9)
    check_std(doc, list(range(1, 10)), times)


def test_standard_input_larger_than_the_first_read(tmp_path):
    # More than the 64 KiB read up front, gzip on stdin: the stream continues past it.
    conv = craft.Conversation(start=0.0)
    conv.handshake()
    for k in range(200):
        conv.send("client", 0, 1000)
    conv.close(0)
    recs = [Rec(BASE_NS + 1000 * k, craft.link_frame(p.ip, "ethernet")) for k, p in enumerate(conv.packets)]
    data = pcap_file(recs, 1)
    assert len(data) > 3 * 64 * 1024
    doc = analyze_bytes(gzip.compress(data, mtime=0))
    assert doc["captures"][0]["packets"] == 206
    conn = doc["connections"][0]
    assert conn["sides"]["client"]["payload_bytes"] == 200_000
    assert [(e["frame"], e["kind"], e["seq"]) for e in conn["events"]][-2:] == [(204, "fin", 200_001), (205, "fin", 1)]


# ---------------------------------------------------------------------------------------------
# Link types


LINK_CASES = [(name, v6) for name in LINKS for v6 in (False, True) if not (name == "ipv4" and v6) and not (name == "ipv6" and not v6)]


@pytest.mark.parametrize("link,ipv6", LINK_CASES, ids=[f"{n}-{'v6' if v else 'v4'}" for n, v in LINK_CASES])
def test_link_types(tmp_path, link, ipv6):
    number, name, frame = LINKS[link]
    times = std_times()
    recs = [Rec(t, frame(ip)) for t, ip in zip(times, std_packets(ipv6))]
    doc = analyze_json(write(tmp_path / f"{link}.pcap", pcap_file(recs, number)))
    assert doc["captures"][0]["link_types"] == {name: 9}
    assert doc["skipped"] == {}
    conn = check_std(doc, list(range(1, 10)), times, ipv6=ipv6)
    assert conn.get("vlan") == {"ethernet_vlan": [100], "ethernet_qinq": [10, 20]}.get(link)


def test_unknown_link_type_is_skipped_and_reported(tmp_path):
    ips = std_packets()
    times = std_times()
    data = craft.shb() + ng_idb(1) + ng_idb(147)
    frames = []
    frame = 0
    for i, (t, ip) in enumerate(zip(times, ips)):
        if i in (1, 4, 5):
            frame += 1
            data += ng_epb(Rec(t, b"\x00\x01" + ip, iface=1))
        frame += 1
        frames.append(frame)
        data += ng_epb(Rec(t, craft.link_frame(ip, "ethernet")))
    proc = run_pcapq("analyze", "--format", "json", str(write(tmp_path / "147.pcapng", data)))
    assert proc.returncode == 0, proc.stderr.decode()
    doc = json.loads(proc.stdout)
    assert doc["skipped"] == {"unknown_link_type": 3}
    assert doc["summary"]["skipped"] == 3
    assert doc["captures"][0]["link_types"] == {"ETHERNET": 9, "LINKTYPE_147": 3}
    assert doc["warnings"] == ["3 packets of link type 147 (LINKTYPE_147) were not decoded"]
    assert "link type 147" in proc.stderr.decode()
    check_std(doc, frames, times)


def test_only_unknown_link_type_is_no_tcp(tmp_path):
    recs = [Rec(t, ip) for t, ip in zip(std_times(), std_packets())]
    proc = run_pcapq("analyze", "--format", "json", str(write(tmp_path / "147.pcap", pcap_file(recs, 147))))
    assert proc.returncode == 5
    assert b"9 link type pcapq does not decode" in proc.stderr


# ---------------------------------------------------------------------------------------------
# IP layer


def _ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack(f">{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_with(ip: bytes, options: bytes = b"", fragment: int | None = None, payload: bytes | None = None) -> bytes:
    """The IPv4 packet with `options` added, and optionally a new fragment field and payload."""
    assert len(options) % 4 == 0
    body = ip[20:] if payload is None else payload
    head = bytearray(ip[:20])
    head[0] = 0x40 | (5 + len(options) // 4)
    head[2:4] = struct.pack(">H", 20 + len(options) + len(body))
    if fragment is not None:
        head[6:8] = struct.pack(">H", fragment)
    head[10:12] = b"\x00\x00"
    head = bytes(head) + options
    return head[:10] + struct.pack(">H", _ipv4_checksum(head)) + head[12:] + body


@pytest.mark.parametrize(
    "options",
    [
        b"\x94\x04\x00\x00",  # router alert: IHL 6
        b"\x07\x27\x04" + b"\x00" * 36 + b"\x00",  # record route, 9 slots: IHL 15
    ],
    ids=["ihl6", "ihl15"],
)
def test_ipv4_options(tmp_path, options):
    times = std_times()
    recs = [Rec(t, craft.link_frame(ipv4_with(ip, options), "ethernet")) for t, ip in zip(times, std_packets())]
    path = write(tmp_path / "opts.pcap", pcap_file(recs, 1))
    doc = analyze_json(path)
    check_std(doc, list(range(1, 10)), times)
    if shutil.which("tshark"):
        check_against_tshark(path, doc)


def test_ipv4_non_first_fragment_is_skipped(tmp_path):
    ips = std_packets()
    # The client's 100 bytes of data split in two: the first fragment keeps the TCP header and
    # 44 bytes (IP length 84), the second (offset 64 bytes) holds the remaining 56.
    tcp = ips[3][20:]
    first = ipv4_with(ips[3], fragment=0x2000, payload=tcp[:64])
    second = ipv4_with(ips[3], fragment=64 // 8, payload=tcp[64:])
    packets = ips[:3] + [first, second] + ips[4:]
    recs = [Rec(BASE_NS + 1000 * k, craft.link_frame(ip, "ethernet")) for k, ip in enumerate(packets)]
    path = write(tmp_path / "frag.pcap", pcap_file(recs, 1))
    doc = analyze_json(path)
    assert doc["skipped"] == {"ip_fragment": 1}
    assert (doc["summary"]["packets"], doc["summary"]["tcp_segments"]) == (10, 9)
    conn = doc["connections"][0]
    events = [(e["frame"], e["kind"], e["from"], e["seq"], e["ack"], e["len"]) for e in conn["events"]]
    assert events[:5] == [
        (1, "syn", "client", 0, None, 0),
        (2, "synack", "server", 0, 1, 0),
        (3, "handshake_ack", "client", 1, 1, 0),
        (4, "data_first", "client", 1, 1, 44),
        (6, "data_first", "server", 1, 101, 300),
    ]


def ipv6_with_extensions(ip: bytes) -> bytes:
    """The IPv6 packet with hop-by-hop, destination options and an atomic fragment header
    (offset 0, no more fragments) between the fixed header and TCP."""
    pkt = IPv6(ip)
    tcp = pkt[TCP]
    del tcp.chksum
    chain = IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / IPv6ExtHdrFragment(offset=0, m=0, id=0x1234)
    return bytes(IPv6(src=pkt.src, dst=pkt.dst) / chain / tcp)


@pytest.mark.parametrize("link", ["ethernet", "raw", "null_be"])
def test_ipv6_extension_headers_before_tcp(tmp_path, link):
    number, _, frame = LINKS[link]
    times = std_times()
    packets = [ipv6_with_extensions(ip) for ip in std_packets(ipv6=True)]
    assert packets[0][6] == 0 and len(packets[0]) == 40 + 24 + 40
    recs = [Rec(t, frame(ip)) for t, ip in zip(times, packets)]
    path = write(tmp_path / "v6ext.pcap", pcap_file(recs, number))
    doc = analyze_json(path)
    check_std(doc, list(range(1, 10)), times, ipv6=True)
    if shutil.which("tshark"):
        check_against_tshark(path, doc)


def test_ipv6_non_first_fragment_is_skipped(tmp_path):
    ips = std_packets(ipv6=True)
    pkt = IPv6(ips[3])
    tcp = bytes(pkt[TCP])
    first = bytes(IPv6(src=pkt.src, dst=pkt.dst) / IPv6ExtHdrFragment(nh=6, offset=0, m=1, id=9) / Raw(tcp[:64]))
    second = bytes(IPv6(src=pkt.src, dst=pkt.dst) / IPv6ExtHdrFragment(nh=6, offset=8, m=0, id=9) / Raw(tcp[64:]))
    packets = ips[:3] + [first, second] + ips[4:]
    recs = [Rec(BASE_NS + 1000 * k, ip) for k, ip in enumerate(packets)]
    doc = analyze_json(write(tmp_path / "frag6.pcap", pcap_file(recs, 229)))
    assert doc["skipped"] == {"ip_fragment": 1}
    events = [(e["frame"], e["kind"], e["len"]) for e in doc["connections"][0]["events"]]
    assert events[3:5] == [(4, "data_first", 44), (6, "data_first", 300)]


# ---------------------------------------------------------------------------------------------
# TCP options


def test_tcp_options_absent_ones_are_null(tmp_path):
    conv = craft.Conversation(start=0.0)
    conv.syn(options=[("MSS", 8960)])
    conv.synack(options=[("NOP", None), ("WScale", 14), ("SAckOK", b""), ("EOL", None)])
    conv.ack("client")
    recs = [Rec(BASE_NS + k, p.ip) for k, p in enumerate(conv.packets)]
    doc = analyze_json(write(tmp_path / "o.pcap", pcap_file(recs, 101, nano=True)))
    sides = doc["connections"][0]["sides"]
    assert sides["client"]["options"] == {"mss": 8960, "window_scale": None, "sack_permitted": False, "timestamps": False}
    assert sides["server"]["options"] == {"mss": None, "window_scale": 14, "sack_permitted": True, "timestamps": False}


# ---------------------------------------------------------------------------------------------
# Snaplen


@pytest.mark.parametrize("ipv6", [False, True], ids=["v4", "v6"])
@pytest.mark.parametrize("fmt", ["pcap", "epb", "spb"])
def test_snaplen_cut_lengths_come_from_ip_header(tmp_path, fmt, ipv6):
    ips = std_packets(ipv6)
    times = std_times()
    recs = [Rec(t, craft.link_frame(ip, "ethernet"), caplen=96) for t, ip in zip(times, ips)]
    # A segment of another connection cut inside its TCP header (14 + 20|40 + 10 bytes).
    client, server = (CLIENT6, SERVER6) if ipv6 else (CLIENT4, SERVER4)
    conv = craft.Conversation(client=(client[0], 41000), server=server, start=0.0)
    cut = Rec(times[4] + 50_000, craft.link_frame(conv.send("client", 0, 500).ip, "ethernet"), caplen=14 + (40 if ipv6 else 20) + 10)
    recs.insert(5, cut)
    frames = [1, 2, 3, 4, 5, 7, 8, 9, 10]
    if fmt == "pcap":
        data = pcap_file(recs, 1, snaplen=96)
    elif fmt == "epb":
        data = craft.shb() + ng_idb(1, snaplen=96) + b"".join(ng_epb(r) for r in recs)
    else:
        data = craft.shb() + ng_idb(1, snaplen=96) + b"".join(ng_spb(r) for r in recs)
        times = [0] * 9  # SPBs carry no time
    doc = analyze_json(write(tmp_path / f"cut.{fmt}", data))
    assert doc["skipped"] == {"tcp_header_cut": 1}
    assert (doc["summary"]["packets"], doc["summary"]["tcp_segments"]) == (10, 9)
    # The data segments (100 and 300 bytes) are cut; the SYNs with options still fit.
    assert doc["summary"]["snaplen_cut_segments"] == 2
    conn = check_std(doc, frames, times, ipv6=ipv6)
    assert conn["snaplen_cut"] == 2


def test_snaplen_cut_inside_tcp_options(tmp_path):
    # SLL2 (20) + IPv6 (40) + 24 bytes of extension headers + 28 of a SYN's 40-byte TCP header:
    # the fixed header and the options that fit (MSS, SACK-permitted) are read, the cut
    # timestamp and window-scale options are not.
    packets = [ipv6_with_extensions(ip) for ip in std_packets(ipv6=True)]
    times = std_times()
    recs = [Rec(t, craft.link_frame(ip, "sll2")) for t, ip in zip(times, packets)]
    doc = analyze_json(write(tmp_path / "cut6.pcap", pcap_file(recs, 276, snaplen=20 + 40 + 24 + 28)))
    conn = doc["connections"][0]
    assert [(e["frame"], e["kind"], e["seq"], e["ack"], e["len"]) for e in conn["events"]] == [
        (i + 1, kind, seq, ack, length) for i, kind, _, _, seq, ack, length in std_events()
    ]
    assert conn["sides"]["client"]["options"] == {"mss": 1460, "window_scale": None, "sack_permitted": True, "timestamps": False}
    assert conn["sides"]["server"]["options"] == {"mss": 1400, "window_scale": None, "sack_permitted": True, "timestamps": False}
    assert (conn["sides"]["client"]["payload_bytes"], conn["sides"]["server"]["payload_bytes"]) == (100, 300)
    assert conn["snaplen_cut"] == 2


def test_every_frame_cut_inside_tcp_header_is_no_tcp(tmp_path):
    packets = [ipv6_with_extensions(ip) for ip in std_packets(ipv6=True)]
    recs = [Rec(t, craft.link_frame(ip, "sll2")) for t, ip in zip(std_times(), packets)]
    proc = run_pcapq("analyze", "--format", "json", str(write(tmp_path / "cut.pcap", pcap_file(recs, 276, snaplen=96))))
    assert proc.returncode == 5
    assert b"9 TCP header cut by the snaplen" in proc.stderr


# ---------------------------------------------------------------------------------------------
# Frame numbers, times and relative sequence numbers against tshark


def _tshark_variant(name: str) -> tuple[bytes, list[int], list[int], bool]:
    """(capture bytes, frame of each standard packet, its time in ns, IPv6) for a variant with
    non-TCP frames (ARP, or UDP where the link has no ARP) before packets 2, 5 and 6."""
    ipv6 = name.endswith("v6")
    if "usec" in name:
        times = std_times(BASE_NS + 999_000, 1000, STD_TIMES_US)
    else:
        times = std_times(BASE_NS + 123_456_789, 1, [0, 1, 2, 1_000, 2_500, 2_501, 7_000_003, 7_000_004, 9_000_000])
    arp = "null" not in name
    items: list[tuple[int, bytes | None]] = []  # (time, IP packet), None for ARP
    frames = []
    for i, (t, ip) in enumerate(zip(times, std_packets(ipv6))):
        if i in (2, 5, 6):
            items.append((t, None if i == 2 and arp else udp_packet(ipv6)))
        items.append((t, ip))
        frames.append(len(items))

    def frame(ip: bytes | None, link: str) -> bytes:
        if ip is None:
            arp_body = arp_frame()[14:]
            if link == "sll":
                return struct.pack(">HHH8sH", 0, 1, 6, b"\x00\x11\x22\x33\x44\x55\x00\x00", 0x0806) + arp_body
            return arp_frame()
        return LINKS[link][2](ip)

    if name.startswith("pcap-le-usec-ethernet"):
        data = pcap_file([Rec(t, frame(ip, "ethernet")) for t, ip in items], 1)
    elif name.startswith("pcap-be-nsec-sll"):
        data = pcap_file([Rec(t, frame(ip, "sll")) for t, ip in items], 113, nano=True, big_endian=True)
    elif name.startswith("pcap-le-nsec-null"):
        data = pcap_file([Rec(t, frame(ip, "null_be")) for t, ip in items], 0, nano=True)
    elif name.startswith("pcapng-sections"):
        # Section 1 (LE): Ethernet. Section 2 (BE), from the 7th record: raw IP as interface 0,
        # Ethernet as interface 1, alternating (untagged: a VLAN tag would make another connection).
        data = craft.shb() + ng_idb(1, tsresol=9)
        for k, (t, ip) in enumerate(items):
            if k < 6:
                data += ng_epb(Rec(t, frame(ip, "ethernet")), tsresol=9)
                continue
            if k == 6:
                data += craft.shb(True) + ng_idb(101, True, tsresol=9) + ng_idb(1, True, tsresol=9)
            link, iface = ("raw", 0) if k % 2 else ("ethernet", 1)
            data += ng_epb(Rec(t, frame(ip, link), iface=iface), True, 9)
    else:
        raise ValueError(name)
    return data, frames, times, ipv6


TSHARK_VARIANTS = ["pcap-le-usec-ethernet-v4", "pcap-le-usec-ethernet-v6", "pcap-be-nsec-sll-v4", "pcap-le-nsec-null-v6", "pcapng-sections-v4", "pcapng-sections-v6"]


@needs_tshark
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("name", TSHARK_VARIANTS)
def test_frame_numbers_times_and_seq_match_tshark(tmp_path, name, compress):
    data, frames, times, ipv6 = _tshark_variant(name)
    path = write(tmp_path / ("x.cap.gz" if compress else "x.cap"), data, compress)
    doc = analyze_json(path)
    assert doc["captures"][0]["packets"] == 12
    assert doc["summary"]["tcp_segments"] == 9
    check_std(doc, frames, times, ipv6=ipv6)
    check_against_tshark(path, doc)
