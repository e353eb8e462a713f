"""Hostile and broken captures: each case of the robustness issue gets a file and a documented
outcome. None of them may crash pcapq, hang it, or grow its memory with a number the file made up.

Already covered elsewhere: lying pcapng block lengths and absurd pcap caplens mid-file
(test_cli.py), snaplen cuts and cut TCP headers (test_reading.py), sequence numbers crossing 0
in data (test_events_vs_tshark.py). Unit tests in src/decode/ cover the decoders' limits on
hand-made frames; here the same limits are reached through whole files.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_pcapq
from craft import START, Captured, Conversation, epb, idb, link_frame, pcap_bytes, shb
from test_cli import assert_no_crash, conversations, stderr_lines

from pcapq.exitcodes import ExitCode


# Analysed: exit 0, or 1 when pcapq found a problem (retransmissions, resets: findings).
ANALYSED = (ExitCode.OK, ExitCode.PROBLEMS)


def analyse(path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    proc = run_pcapq("analyze", "--format", "json", str(path))
    assert_no_crash(proc)
    assert proc.returncode in (ExitCode.OK, ExitCode.PROBLEMS, ExitCode.DAMAGED, ExitCode.NO_TCP), proc.stderr
    return proc, (json.loads(proc.stdout) if proc.stdout else {})


def pcap_records(records: list[tuple[float, bytes, int, int]], snaplen: int = 262144) -> bytes:
    """A little-endian Ethernet pcap of (time, captured bytes, caplen field, orig_len field)."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))
    for t, data, caplen, orig_len in records:
        out += struct.pack("<IIII", int(t), round((t - int(t)) * 1e6), caplen, orig_len) + data
    return bytes(out)


def frames_of(packets: list[Captured]) -> list[bytes]:
    return [link_frame(p.ip, "ethernet") for p in packets]


def kinds(doc: dict) -> list[str]:
    return [e["kind"] for c in doc["connections"] for e in c["events"]]


# ---------------------------------------------------------------------------------------------
# Lying length fields, zero-length and giant blocks


def test_pcap_caplen_larger_than_snaplen_is_read(tmp_path):
    # tcpdump never writes this, but a record is self-describing: Wireshark reads it, so do we.
    packets = conversations(2)
    path = tmp_path / "snap.pcap"
    path.write_bytes(pcap_records([(p.time, f, len(f), len(f)) for p, f in zip(packets, frames_of(packets))], snaplen=64))
    proc, doc = analyse(path)
    assert proc.returncode == ExitCode.OK
    assert doc["summary"]["tcp_segments"] == len(packets)
    assert [c["outcome"] for c in doc["connections"]] == ["completed", "completed"]


def test_pcap_caplen_larger_than_orig_len(tmp_path):
    packets = conversations(1)
    path = tmp_path / "orig.pcap"
    path.write_bytes(pcap_records([(p.time, f, len(f), 1) for p, f in zip(packets, frames_of(packets))]))
    proc, doc = analyse(path)
    assert proc.returncode == ExitCode.OK
    # Lengths come from the IP header, not from either record field.
    assert doc["connections"][0]["outcome"] == "completed"


def test_pcap_records_of_zero_bytes_are_counted_and_skipped(tmp_path):
    packets = conversations(1)
    records = [(p.time, f, len(f), len(f)) for p, f in zip(packets, frames_of(packets))]
    empty = [(START + 0.5, b"", 0, 0)] * 1000
    path = tmp_path / "zero.pcap"
    path.write_bytes(pcap_records(records[:3] + empty + records[3:]))
    proc, doc = analyse(path)
    assert proc.returncode == ExitCode.OK
    assert doc["summary"]["packets"] == len(packets) + 1000
    assert doc["skipped"] == {"link_header_cut": 1000}
    assert doc["connections"][0]["outcome"] == "completed"


def test_pcap_only_zero_length_records_is_no_tcp(tmp_path):
    path = tmp_path / "zeros.pcap"
    path.write_bytes(pcap_records([(START, b"", 0, 0)] * 10))
    proc = run_pcapq("analyze", str(path))
    assert_no_crash(proc)
    assert proc.returncode == ExitCode.NO_TCP
    assert "frame too short for its link-layer header" in proc.stderr.decode()


def test_pcap_caplen_shorter_than_the_frame_shifts_the_stream(tmp_path):
    # A record whose caplen is 10 bytes short: the next "record header" is 10 bytes of its frame,
    # and everything after is misread. pcapq reads on until the lengths are impossible.
    packets = conversations(4)
    frames = frames_of(packets)
    records = [(p.time, f, len(f), len(f)) for p, f in zip(packets, frames)]
    t, f, _, orig = records[5]
    records[5] = (t, f, len(f) - 10, orig)
    path = tmp_path / "short.pcap"
    path.write_bytes(pcap_records(records))
    proc, _ = analyse(path)
    assert proc.returncode in (ExitCode.OK, ExitCode.DAMAGED)
    assert len(stderr_lines(proc)) <= 2


def _epb_raw(caplen: int, data: bytes, orig_len: int | None = None, block_len: int | None = None) -> bytes:
    body = struct.pack("<IIIII", 0, 0, 0, caplen, len(data) if orig_len is None else orig_len) + data
    body += b"\x00" * (-len(body) % 4)
    length = 12 + len(body) if block_len is None else block_len
    return struct.pack("<II", 6, length) + body + struct.pack("<I", length)


@pytest.mark.parametrize("caplen", [0xFFFFFFFF, 0x7FFFFFFF, 1_000_000])
def test_pcapng_epb_caplen_beyond_its_block(tmp_path, caplen):
    packets = conversations(2)
    good = b"".join(epb(p) for p in packets)
    path = tmp_path / "lying-epb.pcapng"
    path.write_bytes(shb() + idb() + good + _epb_raw(caplen, b"\x00" * 60) + good)
    proc, doc = analyse(path)
    # pcap-parser refuses the block: the capture is damaged there, the packets before it count.
    assert proc.returncode == ExitCode.DAMAGED
    assert doc["captures"][0]["read_stop"] == "corrupt"
    assert doc["summary"]["tcp_segments"] == len(packets)


@pytest.mark.parametrize("block_len", [0, 4, 12])
def test_pcapng_zero_and_tiny_block_lengths(tmp_path, block_len):
    packets = conversations(2)
    tiny = struct.pack("<II", 6, block_len) + struct.pack("<I", block_len)
    path = tmp_path / "tiny.pcapng"
    path.write_bytes(shb() + idb() + b"".join(epb(p) for p in packets) + tiny + b"".join(epb(p) for p in packets))
    proc, doc = analyse(path)
    # Even 12 bytes (a block with no body) is too short for an EPB's fields: damage.
    assert proc.returncode == ExitCode.DAMAGED
    assert doc["captures"][0]["read_stop"] == "corrupt"
    assert doc["summary"]["tcp_segments"] == len(packets)


def test_pcapng_giant_block_under_the_limit_is_read_past(tmp_path):
    # A 3 MiB custom block (not a packet) between packets: read, skipped, and reading goes on.
    packets = conversations(2)
    body = struct.pack("<I", 32473) + b"\xab" * (3 << 20)
    giant = struct.pack("<II", 0x00000BAD, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))
    path = tmp_path / "giant.pcapng"
    path.write_bytes(shb() + idb() + b"".join(epb(p) for p in packets[:5]) + giant + b"".join(epb(p) for p in packets[5:]))
    proc, doc = analyse(path)
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert doc["summary"]["tcp_segments"] == len(packets)


def test_pcapng_giant_block_over_the_limit_is_damage(tmp_path):
    packets = conversations(2)
    claimed = (4 << 20) + 4096
    giant = struct.pack("<II", 0x00000BAD, claimed) + b"\x00" * 64
    path = tmp_path / "giant.pcapng"
    path.write_bytes(shb() + idb() + b"".join(epb(p) for p in packets) + giant)
    proc, doc = analyse(path)
    assert proc.returncode == ExitCode.DAMAGED
    assert f"a record claims {claimed} bytes" in proc.stderr.decode()


def test_pcapng_packet_before_any_interface_is_not_a_crash(tmp_path):
    packets = conversations(1)
    path = tmp_path / "no-idb.pcapng"
    path.write_bytes(shb() + b"".join(epb(p) for p in packets))
    proc = run_pcapq("analyze", str(path))
    assert_no_crash(proc)
    assert proc.returncode == ExitCode.NO_TCP


def test_pcapng_interface_id_out_of_range_is_skipped(tmp_path):
    packets = conversations(1)
    path = tmp_path / "bad-if.pcapng"
    path.write_bytes(shb() + idb() + b"".join(epb(p, interface=7 if i == 2 else 0) for i, p in enumerate(packets)))
    proc, doc = analyse(path)
    assert proc.returncode == ExitCode.OK
    assert doc["summary"]["tcp_segments"] == len(packets) - 1


# ---------------------------------------------------------------------------------------------
# Time and duplicates


def test_timestamps_going_backwards_warn_and_keep_file_order(tmp_path):
    packets = conversations(3)
    # The second connection's packets carry times an hour before the first's.
    shifted = [Captured(p.time - 3600 if 7 <= i < 14 else p.time, p.ip, p.side, p.flags) for i, p in enumerate(packets)]
    path = tmp_path / "backwards.pcap"
    path.write_bytes(pcap_bytes(shifted))
    proc, doc = analyse(path)
    assert proc.returncode == ExitCode.OK
    lines = stderr_lines(proc)
    assert len(lines) == 1 and "1 packet has an earlier timestamp than the packet before it" in lines[0], lines
    assert [c["outcome"] for c in doc["connections"]] == ["completed"] * 3
    assert doc["captures"][0]["first_time"] == pytest.approx(packets[0].time)


def test_timestamps_at_the_extremes(tmp_path):
    packets = conversations(1)
    times = [0.0, 0.000001, 4294967295.999999, 1.0, 2.0, 3.0, 4.0]
    path = tmp_path / "extremes.pcap"
    path.write_bytes(pcap_bytes([Captured(t, p.ip, p.side, p.flags) for t, p in zip(times, packets)]))
    proc, doc = analyse(path)
    assert proc.returncode == ExitCode.OK
    assert doc["captures"][0]["last_time"] == 4.0


def test_every_packet_twice(tmp_path):
    # tcpdump -i any on a bridge and its port: each packet captured twice, microseconds apart.
    packets = conversations(2)
    doubled = [q for p in packets for q in (p, Captured(p.time + 0.000002, p.ip, p.side, p.flags))]
    path = tmp_path / "doubled.pcap"
    path.write_bytes(pcap_bytes(doubled))
    proc, doc = analyse(path)
    assert proc.returncode in ANALYSED
    assert doc["summary"]["connections"] == 2
    assert [c["outcome"] for c in doc["connections"]] == ["completed", "completed"]
    # The copies are counted as such (tshark labels them retransmissions), never new connections.
    assert not {"syn_retransmit", "synack_retransmit", "data_retransmit", "dup_ack"} & set(kinds(doc)), kinds(doc)
    assert doc["summary"]["duplicate_frames"] == len(packets)
    assert [c["symptoms"] for c in doc["connections"]] == [[], []]


# ---------------------------------------------------------------------------------------------
# Link and IP layers


@pytest.mark.parametrize("tags, decoded", [(8, True), (9, False), (200, False)])
def test_vlan_stacks(tmp_path, tags, decoded):
    packets = conversations(1)
    path = tmp_path / "vlan.pcap"
    path.write_bytes(pcap_bytes(packets, vlan=list(range(1, tags + 1))))
    proc, doc = analyse(path)
    if decoded:
        assert proc.returncode == ExitCode.OK
        assert doc["connections"][0]["outcome"] == "completed"
    else:
        assert proc.returncode == ExitCode.NO_TCP
        assert "more than 8 VLAN tags" in proc.stderr.decode()


def _ipv6_with_extensions(headers: int, loop_type: int = 60) -> bytes:
    from scapy.layers.inet import TCP
    from scapy.layers.inet6 import IPv6

    tcp = bytes(TCP(sport=40000, dport=9000, flags="S", seq=1000))
    ext = b"".join(bytes([loop_type if i < headers - 1 else 6, 0, 1, 4, 0, 0, 0, 0]) for i in range(headers))
    base = bytearray(bytes(IPv6(src="fd00::1", dst="fd00::2", nh=loop_type)))
    base[4:6] = struct.pack(">H", len(ext) + len(tcp))
    return bytes(base) + ext + tcp


@pytest.mark.parametrize("headers, decoded", [(2, True), (16, False), (300, False)])
def test_ipv6_extension_header_chains(tmp_path, headers, decoded):
    frame = link_frame(_ipv6_with_extensions(headers), "ethernet")
    path = tmp_path / "ext.pcap"
    path.write_bytes(pcap_records([(START, frame, len(frame), len(frame))]))
    proc, doc = analyse(path)
    if decoded:
        assert proc.returncode == ExitCode.OK
        assert doc["summary"]["tcp_segments"] == 1
    else:
        assert proc.returncode == ExitCode.NO_TCP
        assert "IPv6 extension header chain too long" in proc.stderr.decode()


def test_ipv6_extension_header_length_past_the_packet(tmp_path):
    packet = bytearray(_ipv6_with_extensions(1))
    packet[40 + 1] = 255  # hdr ext len: 2048 bytes, the packet has 28
    frame = link_frame(bytes(packet), "ethernet")
    path = tmp_path / "ext-long.pcap"
    path.write_bytes(pcap_records([(START, frame, len(frame), len(frame))]))
    proc, _ = analyse(path)
    assert proc.returncode == ExitCode.NO_TCP
    assert "IP header with impossible lengths" in proc.stderr.decode()


@pytest.mark.parametrize("data_offset, skip", [(15, "malformed_tcp"), (0, "malformed_tcp"), (4, "malformed_tcp")])
def test_tcp_data_offset_outside_the_packet(tmp_path, data_offset, skip):
    packets = conversations(1)
    bad = bytearray(packets[3].ip)  # the request, 20-byte IP header
    bad[20 + 12] = data_offset << 4
    ip = [p.ip for p in packets]
    ip[3] = bytes(bad)
    # The same segment with its IP total length cut to the bare TCP header too.
    short = bytearray(bad[:40])
    short[2:4] = struct.pack(">H", 40)
    frames = [link_frame(x, "ethernet") for x in ip + [bytes(short)]]
    times = [p.time for p in packets] + [packets[-1].time + 1]
    path = tmp_path / "doff.pcap"
    path.write_bytes(pcap_records([(t, f, len(f), len(f)) for t, f in zip(times, frames)]))
    proc, doc = analyse(path)
    assert proc.returncode == ExitCode.OK
    assert doc["skipped"] == {skip: 2}
    assert doc["summary"]["tcp_segments"] == len(packets) - 1


# ---------------------------------------------------------------------------------------------
# TCP: flag combinations and sequence wrap


FLAG_SETS = ["SF", "SR", "SFR", "FR", "SFRPAUEC", "", "U", "SA", "SAR", "SAF"]


@pytest.mark.parametrize("flags", FLAG_SETS)
def test_impossible_flag_combinations_open_no_fake_handshake(tmp_path, flags):
    packets: list[Captured] = []
    odd = Conversation(client=("10.0.0.9", 50000), packets=packets)
    odd.segment("client", 0.0, flags)
    odd.segment("server", 0.001, flags)
    ok = Conversation(client=("10.0.0.1", 40000), start=START + 1, packets=packets)
    ok.handshake()
    ok.send("client", 0.01, b"GET / HTTP/1.1\r\n\r\n")
    ok.send("server", 0.02, b"HTTP/1.1 200 OK\r\n\r\n")
    ok.close(0.03)
    path = tmp_path / "flags.pcap"
    path.write_bytes(pcap_bytes(packets))
    proc, doc = analyse(path)
    assert proc.returncode in ANALYSED
    by_client = {c["client"]: c for c in doc["connections"]}
    assert by_client["10.0.0.1:40000"]["outcome"] == "completed"
    odd_conns = [c for c in doc["connections"] if c["client"] != "10.0.0.1:40000"]
    assert all(c["outcome"] != "completed" for c in odd_conns), odd_conns


def test_flag_soup_everywhere_in_a_connection(tmp_path):
    packets: list[Captured] = []
    c = Conversation(packets=packets)
    c.handshake()
    for i, flags in enumerate(FLAG_SETS):
        c.segment("client" if i % 2 else "server", 0.01 * (i + 1), flags, b"z" * (i % 3), advance=False)
    path = tmp_path / "soup.pcap"
    path.write_bytes(pcap_bytes(packets))
    proc, doc = analyse(path)
    assert proc.returncode in ANALYSED
    assert doc["summary"]["tcp_segments"] == len(packets)


@pytest.mark.parametrize("client_isn, server_isn", [(2**32 - 1, 5000), (1000, 2**32 - 1), (2**32 - 1, 2**32 - 1)])
def test_sequence_wrap_in_the_handshake(tmp_path, client_isn, server_isn):
    # The SYN takes the last sequence number: the SYN-ACK acknowledges 0 and data starts at 0.
    packets: list[Captured] = []
    c = Conversation(client_isn=client_isn, server_isn=server_isn, packets=packets)
    c.syn(0.0)
    c.syn(1.0)  # a SYN retransmission across the wrap
    c.synack(1.0001)
    c.resend("server", 2.0)  # and a SYN-ACK retransmission
    c.ack("client", 2.0001)
    assert c.sides["client"].next_seq == (client_isn + 1) % 2**32
    c.send("client", 2.01, b"GET / HTTP/1.1\r\n\r\n")
    c.send("server", 2.02, b"HTTP/1.1 200 OK\r\n\r\n")
    c.close(2.03)
    path = tmp_path / "wrap.pcap"
    path.write_bytes(pcap_bytes(packets))
    proc, doc = analyse(path)
    assert proc.returncode in ANALYSED
    (conn,) = doc["connections"]
    assert conn["outcome"] == "completed", conn
    assert conn["isn"] == {"client": client_isn, "server": server_isn}
    retransmits = [k for k in kinds(doc) if k.endswith("retransmit")]
    assert retransmits == ["syn_retransmit", "synack_retransmit"], kinds(doc)
    assert conn["sides"]["client"]["unseen_segments"] == 0


# ---------------------------------------------------------------------------------------------
# Memory: no allocation sized by a length the file made up

_PEAK_RSS = """
import resource, sys
from pcapq import _core
from pcapq.diagnose import diagnose
every = sys.argv[1] == "every"
try:
    diagnose(_core.analyze(sys.argv[2:], keep_connections=every, keep_events=every))
except _core.CaptureError:
    pass
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_kib(*paths: Path, every_connection: bool = True) -> int:
    """Peak resident memory of a fresh interpreter that analysed `paths` and diagnosed them, in
    KiB: keeping every connection with its events (JSON output), or not (the terminal report)."""
    keep = "every" if every_connection else "problems"
    proc = subprocess.run([sys.executable, "-c", _PEAK_RSS, keep, *map(str, paths)], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)


def _lying_files(tmp_path: Path) -> dict[str, bytes]:
    packets = conversations(2)
    good_ng = b"".join(epb(p) for p in packets)
    record = bytearray(pcap_bytes(packets[:1])[24:])
    record[8:12] = struct.pack("<I", (4 << 20) - 1)  # just under the cap, at the end: a cut
    ng_header = shb() + idb()
    huge_option = struct.pack("<II", 1, 28) + struct.pack("<HHI", 0, 0, 0) + struct.pack("<HH", 2, 0xFFFF) + struct.pack("<I", 28)
    return {
        "pcap_caplen_4g": pcap_bytes(packets[:3]) + struct.pack("<IIII", int(START), 0, 0xFFFFFFFF, 0xFFFFFFFF) + b"\x00" * 64,
        "pcap_caplen_under_cap_at_end": pcap_bytes(packets[:3]) + bytes(record),
        "pcapng_block_4g": ng_header + good_ng + struct.pack("<II", 6, 0xFFFFFFF0) + b"\x00" * 64,
        "pcapng_block_under_cap_at_end": ng_header + good_ng + struct.pack("<II", 6, (4 << 20) - 4) + b"\x00" * 64,
        "pcapng_epb_caplen_4g": ng_header + good_ng + _epb_raw(0xFFFFFFF0, b"\x00" * 60),
        "pcapng_idb_option_past_block": shb() + huge_option + good_ng,
        "pcapng_shb_section_length_huge": shb()[:16] + struct.pack("<q", 2**62) + shb()[24:] + idb() + good_ng,
    }


def test_lying_lengths_keep_memory_small(tmp_path):
    baseline = tmp_path / "baseline.pcap"
    baseline.write_bytes(pcap_bytes(conversations(2)))
    base = peak_rss_kib(baseline)
    for name, data in _lying_files(tmp_path).items():
        path = tmp_path / f"{name}.cap"
        path.write_bytes(data)
        proc = run_pcapq("analyze", str(path))
        assert_no_crash(proc)
        assert proc.returncode in (ExitCode.UNREADABLE, ExitCode.DAMAGED, ExitCode.NO_TCP, ExitCode.OK, ExitCode.PROBLEMS), (name, proc.stderr)
        # The reading buffer may grow to the 4 MiB record cap, and no further.
        assert peak_rss_kib(path) - base < 16 * 1024, name
