"""The command-line contract of `pcapq`: errors, exit codes, output files, JSON shape, pipes.

Every run goes through the installed console script, as a user would run it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pty
import re
import select
import struct
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPO, run_pcapq
from craft import Captured, Conversation, START, epb, idb, pcap_bytes, pcapng_bytes, shb

import pcapq
from pcapq.exitcodes import ExitCode

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


# ---------------------------------------------------------------------------------------------
# Helpers


def conversations(n: int, spacing: float = 0.01, first_port: int = 40000, start: float = START) -> list[Captured]:
    """`n` complete conversations (handshake, request, response, close) on distinct client ports."""
    packets: list[Captured] = []
    for i in range(n):
        c = Conversation(client=("10.0.0.1", first_port + i), start=start + i * spacing, packets=packets)
        c.handshake()
        c.send("client", 0.001, b"GET / HTTP/1.1\r\n\r\n")
        c.send("server", 0.002, b"HTTP/1.1 200 OK\r\n\r\n")
        c.close(0.003)
    return packets


def troubled() -> list[Captured]:
    """One connection with a SYN retransmit, a data retransmit and a RST; one healthy."""
    packets: list[Captured] = []
    c = Conversation(packets=packets)
    c.syn(0.0)
    c.syn(1.0)
    c.synack(1.0001)
    c.ack("client", 1.0002)
    c.send("client", 1.01, b"GET")
    c.resend("client", 1.21)
    c.rst("server", 1.3)
    ok = Conversation(client=("10.0.0.1", 40001), start=START + 2, packets=packets)
    ok.handshake()
    ok.close(0.01)
    return packets


def _tcp_checksum(ip: bytearray, ihl: int) -> int:
    src, dst = bytes(ip[12:16]), bytes(ip[16:20])
    segment = bytes(ip[ihl:])
    data = src + dst + struct.pack(">BBH", 0, 6, len(segment)) + segment + b"\x00" * (len(segment) % 2)
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def with_client_port(packets: list[Captured], port: int, shift: float) -> list[Captured]:
    """IPv4 `packets` of one conversation again, on another client port and later in time.
    Much faster than building thousands of packets with scapy."""
    out = []
    for p in packets:
        ip = bytearray(p.ip)
        ihl = (ip[0] & 0x0F) * 4
        at = ihl if p.side == "client" else ihl + 2
        ip[at : at + 2] = struct.pack(">H", port)
        ip[ihl + 16 : ihl + 18] = b"\x00\x00"
        ip[ihl + 16 : ihl + 18] = struct.pack(">H", _tcp_checksum(ip, ihl))
        out.append(replace(p, time=p.time + shift, ip=bytes(ip)))
    return out


def many_conversations(n: int) -> list[Captured]:
    template = conversations(1)
    packets: list[Captured] = []
    for i in range(n):
        packets += with_client_port(template, 1024 + i, i * 0.01)
    return packets


def pcap_of_frames(frames: list[bytes], linktype: int = 1) -> bytes:
    """A little-endian pcap of raw link-layer frames, one second apart."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype))
    for i, frame in enumerate(frames):
        out += struct.pack("<IIII", int(START) + i, 0, len(frame), len(frame)) + frame
    return bytes(out)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def output_of(proc: subprocess.CompletedProcess) -> bytes:
    return (proc.stdout or b"") + (proc.stderr or b"")


def assert_no_crash(proc: subprocess.CompletedProcess) -> None:
    text = output_of(proc)
    assert b"Traceback" not in text, text.decode(errors="replace")
    assert b"panicked" not in text, text.decode(errors="replace")


def stderr_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return proc.stderr.decode().splitlines()


def assert_one_error(proc: subprocess.CompletedProcess, code: ExitCode) -> str:
    """Exactly one 'pcapq: ' line on stderr and the given exit code; returns the line."""
    assert_no_crash(proc)
    lines = stderr_lines(proc)
    assert proc.returncode == code, (proc.returncode, lines)
    assert len(lines) == 1, lines
    assert lines[0].startswith("pcapq: "), lines
    return lines[0]


def run_json(*args: str | Path) -> tuple[subprocess.CompletedProcess, dict]:
    proc = run_pcapq("analyze", "--format", "json", *map(str, args))
    assert_no_crash(proc)
    return proc, json.loads(proc.stdout)


def event_count(doc: dict) -> int:
    return sum(len(c["events"]) for c in doc["connections"])


def expected_from(tmp_path: Path, packets: list[Captured], name: str = "expected.pcap") -> dict:
    """The JSON document of a clean capture of `packets`: what a damaged file must still yield."""
    path = tmp_path / name
    path.write_bytes(pcap_bytes(packets))
    proc, doc = run_json(path)
    assert proc.returncode == 0, proc.stderr
    return doc


@pytest.fixture
def capture(tmp_path) -> Path:
    """Five connections: one with a SYN retransmit, a data retransmit and a RST."""
    path = tmp_path / "mixed.pcap"
    path.write_bytes(pcap_bytes(troubled() + conversations(3, spacing=0.5, first_port=41000, start=START + 3)))
    return path


# ---------------------------------------------------------------------------------------------
# 1. Bad input: one clear line, a documented exit code, no traceback


def test_missing_file(tmp_path):
    line = assert_one_error(run_pcapq("analyze", str(tmp_path / "nope.pcap")), ExitCode.UNREADABLE)
    assert "nope.pcap" in line and "no such file" in line


def test_directory_without_captures(tmp_path):
    (tmp_path / "notes.txt").write_text("not a capture")
    line = assert_one_error(run_pcapq("analyze", str(tmp_path)), ExitCode.UNREADABLE)
    assert str(tmp_path) in line and "holds no pcap or pcapng capture" in line


def test_empty_file(tmp_path):
    path = tmp_path / "empty.pcap"
    path.write_bytes(b"")
    line = assert_one_error(run_pcapq("analyze", str(path)), ExitCode.UNREADABLE)
    assert "empty" in line


def test_text_file_says_text(tmp_path):
    path = tmp_path / "dump.txt"
    path.write_text("12:00:00.000000 IP 10.0.0.1.40000 > 10.0.0.2.9000: Flags [S], seq 1000\n" * 20)
    line = assert_one_error(run_pcapq("analyze", str(path)), ExitCode.UNREADABLE)
    assert "text" in line and "not a capture" in line


def test_random_binary(tmp_path):
    path = tmp_path / "noise.bin"
    path.write_bytes(hashlib.sha512(b"seed").digest() * 64)
    line = assert_one_error(run_pcapq("analyze", str(path)), ExitCode.UNREADABLE)
    assert "not a capture" in line and "magic" in line


@pytest.mark.parametrize("keep", [4, 10, 23])
def test_pcap_file_header_cut_short(tmp_path, keep):
    path = tmp_path / "cut.pcap"
    path.write_bytes(pcap_bytes(conversations(1))[:keep])
    line = assert_one_error(run_pcapq("analyze", str(path)), ExitCode.UNREADABLE)
    assert "cut short" in line


@pytest.mark.parametrize("keep", [8, 20, 27])
def test_pcapng_first_block_cut(tmp_path, keep):
    path = tmp_path / "cut.pcapng"
    path.write_bytes(pcapng_bytes(conversations(1))[:keep])
    line = assert_one_error(run_pcapq("analyze", str(path)), ExitCode.UNREADABLE)
    assert "cut.pcapng" in line and "cut short" in line


def test_corrupt_gzip(tmp_path):
    data = bytearray(gzip.compress(pcap_bytes(conversations(3)), mtime=0))
    data[20:40] = b"\xff" * 20
    path = tmp_path / "bad.pcap.gz"
    path.write_bytes(bytes(data))
    line = assert_one_error(run_pcapq("analyze", str(path)), ExitCode.UNREADABLE)
    assert "gzip" in line


def test_gzip_cut_in_its_header(tmp_path):
    path = tmp_path / "cut.pcap.gz"
    path.write_bytes(gzip.compress(pcap_bytes(conversations(1)), mtime=0)[:12])
    line = assert_one_error(run_pcapq("analyze", str(path)), ExitCode.UNREADABLE)
    assert "gzip" in line


def test_not_a_capture_on_stdin_is_named():
    line = assert_one_error(run_pcapq("analyze", "-", input=b"hello, world\n"), ExitCode.UNREADABLE)
    assert "standard input" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode, so permission denied cannot happen")
def test_unreadable_file(tmp_path):
    path = tmp_path / "secret.pcap"
    path.write_bytes(pcap_bytes(conversations(1)))
    path.chmod(0)
    line = assert_one_error(run_pcapq("analyze", str(path)), ExitCode.UNREADABLE)
    assert "permission denied" in line


def test_one_bad_file_among_good_ones_fails_the_run(tmp_path):
    good = tmp_path / "good.pcap"
    good.write_bytes(pcap_bytes(conversations(2)))
    proc = run_pcapq("analyze", str(good), str(tmp_path / "missing.pcap"))
    assert "missing.pcap" in assert_one_error(proc, ExitCode.UNREADABLE)


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_truncated_last_record_warns_and_analyses_the_rest(tmp_path, fmt):
    packets = conversations(4)
    data = pcap_bytes(packets) if fmt == "pcap" else pcapng_bytes(packets)
    path = tmp_path / f"cut.{fmt}"
    path.write_bytes(data[:-10])
    proc, doc = run_json(path)
    assert proc.returncode == ExitCode.OK
    lines = stderr_lines(proc)
    assert len(lines) == 1 and lines[0].startswith("pcapq: warning: "), lines
    assert "cut short" in lines[0]

    expected = expected_from(tmp_path, packets[:-1])
    assert doc["captures"][0]["read_stop"] == "truncated"
    assert doc["summary"]["packets"] == len(packets) - 1
    assert doc["summary"]["connections"] == expected["summary"]["connections"] == 4
    assert event_count(doc) == event_count(expected) > 0
    assert doc["warnings"] == [lines[0].removeprefix("pcapq: warning: ")]


def test_truncated_capture_on_stdin(tmp_path):
    packets = conversations(2)
    proc = run_pcapq("analyze", "--format", "json", "-", input=pcap_bytes(packets)[:-5])
    assert_no_crash(proc)
    assert proc.returncode == ExitCode.OK
    assert "standard input" in proc.stderr.decode()
    assert json.loads(proc.stdout)["summary"]["connections"] == 2


@pytest.mark.parametrize("where", ["early", "middle", "trailer"])
def test_gzip_cut_short_is_a_truncated_capture(tmp_path, where):
    # "early" is cut within the first 64 KiB, which pcapq reads up front to recognise the format.
    packets = conversations(40) if where == "early" else many_conversations(300)
    gz = gzip.compress(pcap_bytes(packets), mtime=0)
    cut = len(gz) - 8 if where == "trailer" else len(gz) // 2
    path = tmp_path / "cut.pcap.gz"
    path.write_bytes(gz[:cut])
    proc, doc = run_json(path)
    assert proc.returncode == ExitCode.OK
    lines = stderr_lines(proc)
    assert len(lines) == 1 and lines[0].startswith("pcapq: warning: ") and "gzip" in lines[0], lines
    assert doc["captures"][0]["read_stop"] == "truncated"
    kept = doc["summary"]["packets"]
    assert 0 < kept <= len(packets)
    if where == "trailer":
        assert kept == len(packets)
    assert doc["summary"]["connections"] == expected_from(tmp_path, packets[:kept])["summary"]["connections"]


def test_gzip_failing_part_way_is_damaged(tmp_path):
    packets = many_conversations(300)  # well over the 64 KiB read up front
    gz = bytearray(gzip.compress(pcap_bytes(packets), mtime=0))
    gz[-8] ^= 0xFF  # the CRC in the trailer: every record inflates, then the check fails
    path = tmp_path / "crc.pcap.gz"
    path.write_bytes(bytes(gz))
    proc, doc = run_json(path)
    assert proc.returncode == ExitCode.DAMAGED, proc.stderr
    lines = stderr_lines(proc)
    assert len(lines) == 1 and "gzip data is damaged" in lines[0], lines
    assert doc["captures"][0]["read_stop"] == "io_error"
    assert doc["summary"]["packets"] == len(packets)


def _pcapng_with_bad_block(packets: list[Captured], damage: str) -> bytes:
    """SHB, IDB, the first half of the packets, a damaged EPB, then the rest."""
    half = len(packets) // 2
    bad = bytearray(epb(packets[half]))
    if damage == "lengths_disagree":
        bad[-4:] = struct.pack("<I", len(bad) + 4)
    elif damage == "length_below_12":
        bad[4:8] = struct.pack("<I", 8)
    elif damage == "length_0xfffffff0":
        bad[4:8] = struct.pack("<I", 0xFFFFFFF0)
    else:
        raise ValueError(damage)
    return shb() + idb() + b"".join(epb(p) for p in packets[:half]) + bytes(bad) + b"".join(epb(p) for p in packets[half + 1 :])


def _assert_damaged(tmp_path: Path, path: Path, packets: list[Captured], kept: int) -> None:
    proc, doc = run_json(path)
    assert proc.returncode == ExitCode.DAMAGED, proc.stderr
    lines = stderr_lines(proc)
    assert len(lines) == 1 and lines[0].startswith("pcapq: warning: "), lines
    assert "damaged" in lines[0] and f"analysed the {kept} records before it" in lines[0]
    assert doc["captures"][0]["read_stop"] == "corrupt"
    assert doc["summary"]["packets"] == kept
    expected = expected_from(tmp_path, packets[:kept])
    assert doc["summary"]["connections"] == expected["summary"]["connections"] > 0
    assert event_count(doc) == event_count(expected) > 0


@pytest.mark.parametrize("damage", ["lengths_disagree", "length_below_12", "length_0xfffffff0"])
def test_corrupt_pcapng_block_length_mid_file(tmp_path, damage):
    packets = conversations(6)
    path = tmp_path / "bad.pcapng"
    path.write_bytes(_pcapng_with_bad_block(packets, damage))
    _assert_damaged(tmp_path, path, packets, len(packets) // 2)


@pytest.mark.parametrize("caplen", [0x7FFFFFF0, 0xFFFFFFFF])
def test_absurd_pcap_caplen_mid_file(tmp_path, caplen):
    packets = conversations(6)
    half = len(packets) // 2
    record = bytearray(pcap_bytes(packets[half : half + 1])[24:])
    record[8:12] = struct.pack("<I", caplen)
    data = pcap_bytes(packets[:half]) + bytes(record) + pcap_bytes(packets[half + 1 :])[24:]
    path = tmp_path / "bad.pcap"
    path.write_bytes(data)
    _assert_damaged(tmp_path, path, packets, half)


def test_absurd_caplen_in_a_big_endian_pcap(tmp_path):
    packets = conversations(4)
    record = bytearray(pcap_bytes(packets[2:3], big_endian=True)[24:])
    record[8:12] = struct.pack(">I", 0x7FFFFFF0)
    path = tmp_path / "bad-be.pcap"
    path.write_bytes(pcap_bytes(packets[:2], big_endian=True) + bytes(record) + pcap_bytes(packets[3:], big_endian=True)[24:])
    _assert_damaged(tmp_path, path, packets, 2)


def test_no_tcp_names_what_was_there(tmp_path):
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import ARP, Ether

    udp = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.53") / UDP(sport=5353, dport=53) / b"query")
    arp = bytes(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="10.0.0.1", pdst="10.0.0.2"))
    path = tmp_path / "dns.pcap"
    path.write_bytes(pcap_of_frames([udp, arp, udp, udp]))
    line = assert_one_error(run_pcapq("analyze", "--format", "json", str(path)), ExitCode.NO_TCP)
    assert "no TCP" in line and "4 packets" in line
    assert "3 IP but not TCP (UDP" in line
    assert "1 not IPv4 or IPv6 (ARP" in line


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_zero_packets(tmp_path, fmt):
    path = tmp_path / f"nothing.{fmt}"
    path.write_bytes(pcap_bytes([]) if fmt == "pcap" else pcapng_bytes([]))
    line = assert_one_error(run_pcapq("analyze", str(path)), ExitCode.NO_TCP)
    assert "no packets" in line


# ---------------------------------------------------------------------------------------------
# 2. Inputs are never modified


def test_inputs_are_not_modified(tmp_path):
    plain = tmp_path / "a.pcap"
    plain.write_bytes(pcap_bytes(troubled()))
    ng = tmp_path / "b.pcapng.gz"
    ng.write_bytes(gzip.compress(pcapng_bytes(conversations(3)), mtime=0))
    before = {p: (sha256(p), p.stat().st_mtime_ns) for p in (plain, ng)}
    for args in (["--format", "json"], ["--format", "text"], ["--format", "json", "-o", str(tmp_path / "r.json")]):
        proc = run_pcapq("analyze", *args, str(plain), str(ng))
        assert proc.returncode == ExitCode.PROBLEMS, proc.stderr
    assert {p: (sha256(p), p.stat().st_mtime_ns) for p in (plain, ng)} == before


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink", "second_input"])
def test_output_never_overwrites_an_input(tmp_path, link):
    capture = tmp_path / "dump.pcap"
    capture.write_bytes(pcap_bytes(conversations(2)))
    other = tmp_path / "other.pcap"
    other.write_bytes(pcap_bytes(conversations(1)))
    digest = sha256(capture)
    target = {"same": capture, "second_input": capture}.get(link, tmp_path / "alias.pcap")
    if link == "symlink":
        target.symlink_to(capture)
    elif link == "hardlink":
        os.link(capture, target)
    inputs = [str(other), str(capture)] if link == "second_input" else [str(capture)]
    proc = run_pcapq("analyze", "--format", "json", "-o", str(target), *inputs)
    line = assert_one_error(proc, ExitCode.USAGE)
    assert "refusing" in line
    assert sha256(capture) == digest


def test_output_file_is_not_created_when_the_input_is_bad(tmp_path):
    report = tmp_path / "report.json"
    proc = run_pcapq("analyze", "--format", "json", "-o", str(report), str(tmp_path / "missing.pcap"))
    assert_one_error(proc, ExitCode.UNREADABLE)
    assert not report.exists()


def test_output_into_a_missing_directory(tmp_path, capture):
    proc = run_pcapq("analyze", "-o", str(tmp_path / "no" / "report.txt"), str(capture))
    line = assert_one_error(proc, ExitCode.CANT_WRITE)
    assert "cannot write the report" in line and "report.txt" in line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("args", [["--format", "json"], ["--format", "json", "--pretty"], ["--format", "text"]])
def test_full_disk(capture, args):
    line = assert_one_error(run_pcapq("analyze", *args, "-o", "/dev/full", str(capture)), ExitCode.CANT_WRITE)
    assert "/dev/full" in line and "No space left on device" in line
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(["pcapq", "analyze", *args, str(capture)], stdout=full, stderr=subprocess.PIPE, timeout=120)
    line = assert_one_error(proc, ExitCode.CANT_WRITE)
    assert "standard output" in line and "No space left on device" in line


# ---------------------------------------------------------------------------------------------
# 3. Version, help, usage errors


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    proc = run_pcapq(flag)
    assert proc.returncode == 0
    assert proc.stdout.decode().strip() == f"pcapq, version {pcapq.__version__}"


@pytest.mark.parametrize("args", [["-h"], ["--help"], ["analyze", "-h"], ["analyze", "--help"]])
def test_help_shows_examples(args):
    proc = run_pcapq(*args)
    assert_no_crash(proc)
    assert proc.returncode == 0
    out = proc.stdout.decode()
    assert out.startswith("Usage: pcapq")
    assert "$ pcapq analyze" in out
    if args[0] == "analyze":
        assert "Examples:" in out and "Exit codes:" in out and "--format" in out


@pytest.mark.parametrize(
    "args",
    [
        ["--bogus"],
        ["analyze", "--bogus", "x.pcap"],
        ["analyze"],
        ["nosuchcommand"],
        ["analyze", "--format", "xml", "x.pcap"],
    ],
)
def test_usage_errors_exit_2(args):
    proc = run_pcapq(*args)
    line = assert_one_error(proc, ExitCode.USAGE)
    assert proc.stdout == b""
    assert line.endswith("--help')")


def test_analyze_help_lists_every_exit_code():
    out = run_pcapq("analyze", "--help").stdout.decode()
    for code in ExitCode:
        # 6 and 69 are crosscheck's (test_crosscheck.py checks its help); 71 and 77 lab's.
        if code not in (ExitCode.INTERRUPTED, ExitCode.DISAGREE, ExitCode.TSHARK_MISSING, ExitCode.LAB_FAILED,
                        ExitCode.NOT_ROOT):
            assert f"{int(code)} " in out, code


# ---------------------------------------------------------------------------------------------
# 4. The JSON document

CONNECTION_KEYS = {
    "id", "client", "server", "ip_version", "partial", "follows", "state", "first_frame",
    "first_time", "last_time", "isn", "handshake", "sides", "events",
}  # fmt: skip
EVENT_KEYS = {"file", "frame", "time", "offset", "kind", "from", "flags", "seq", "ack", "len", "win"}


def test_json_stdout_and_output_file_are_identical(tmp_path, capture):
    report = tmp_path / "report.json"
    to_stdout = run_pcapq("analyze", "--format", "json", str(capture))
    to_file = run_pcapq("analyze", "--format", "json", "-o", str(report), str(capture))
    assert to_stdout.returncode == to_file.returncode == ExitCode.PROBLEMS
    assert to_file.stdout == b""
    assert report.read_bytes() == to_stdout.stdout


def test_json_pretty_is_the_same_data(tmp_path, capture):
    compact = run_pcapq("analyze", "--format", "json", str(capture))
    pretty = run_pcapq("analyze", "--format", "json", "--pretty", str(capture))
    pretty_file = tmp_path / "pretty.json"
    run_pcapq("analyze", "--format", "json", "--pretty", "-o", str(pretty_file), str(capture))
    assert b"\n  " in pretty.stdout and b"\n" not in compact.stdout.rstrip(b"\n")
    assert json.loads(pretty.stdout) == json.loads(compact.stdout) == json.loads(pretty_file.read_bytes())
    assert pretty_file.read_bytes() == pretty.stdout


def test_json_document_shape(capture):
    proc, doc = run_json(capture)
    assert proc.returncode == ExitCode.PROBLEMS and doc["findings"]
    assert doc["schema"] == "pcapq.analysis"
    assert doc["schema_version"] == 1 == pcapq.JSON_SCHEMA_VERSION
    assert {"captures", "summary", "skipped", "warnings", "connections"} <= doc.keys()
    assert doc["summary"]["connections"] == len(doc["connections"]) == 5
    assert doc["summary"]["with_syn_retransmits"] == 1
    kinds = set()
    for conn in doc["connections"]:
        assert CONNECTION_KEYS <= conn.keys(), CONNECTION_KEYS - conn.keys()
        assert conn["events"], conn["id"]
        for event in conn["events"]:
            assert EVENT_KEYS <= event.keys(), EVENT_KEYS - event.keys()
            kinds.add(event["kind"])
    assert {"syn_retransmit", "data_retransmit", "rst"} <= kinds


def test_json_has_no_ansi_even_on_request_for_colour(capture):
    proc = run_pcapq("analyze", "--format", "json", str(capture))
    assert not ANSI.search(proc.stdout)


# ---------------------------------------------------------------------------------------------
# 5. A reader that goes away


@pytest.fixture(scope="module")
def big_capture(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.pcap"
    path.write_bytes(pcap_bytes(many_conversations(3000)))
    return path


@pytest.mark.parametrize("args", [["--format", "json"], ["--format", "json", "--pretty"], ["--format", "text"]])
def test_broken_pipe_is_quiet(big_capture, args):
    proc = subprocess.Popen(["pcapq", "analyze", *args, str(big_capture)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read()
    code = proc.wait(timeout=120)
    assert len(head) == 100
    assert b"Traceback" not in err and b"panicked" not in err, err
    assert err == b"", err
    assert code == ExitCode.OK


def test_big_json_needs_several_writes(big_capture):
    proc, doc = run_json(big_capture)
    assert proc.returncode == 0
    assert doc["summary"]["connections"] == 3000
    # More than a pipe buffer (64 KiB) and more than the core's 1 MiB write chunk.
    assert len(proc.stdout) > 2 * 1024 * 1024


# ---------------------------------------------------------------------------------------------
# 6. The Python API


def test_api_missing_file_raises_capture_error(tmp_path):
    missing = str(tmp_path / "nope.pcap")
    with pytest.raises(pcapq.CaptureError) as info:
        pcapq.analyze([missing])
    message, kind, path = info.value.args
    assert kind == "not_found"
    assert path == missing
    assert missing in message
    assert isinstance(info.value, pcapq.PcapqError)


@pytest.mark.parametrize(
    "content, kind",
    [
        (None, "is_directory"),
        (b"", "empty"),
        (b"not a capture at all\n", "not_a_capture"),
        (b"\xd4\xc3\xb2\xa1\x02\x00", "bad_header"),
        (b"\x1f\x8b\x08\x00" + b"\xff" * 40, "gzip"),
    ],
)
def test_api_capture_error_kinds(tmp_path, content, kind):
    path = tmp_path / "input"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(pcapq.CaptureError) as info:
        pcapq.analyze([str(path)])
    assert info.value.args[1:] == (kind, str(path))


def test_api_kinds_are_the_documented_ones():
    error_rs = (REPO / "src/reader/error.rs").read_text()
    documented = set(re.findall(r'ReadError::\w+ \{ \.\. \} => "(\w+)"', error_rs))
    assert documented == {"not_found", "permission_denied", "is_directory", "io", "gzip", "empty", "not_a_capture", "bad_header"}


def test_api_analyze_good_capture(capture):
    result = pcapq.analyze([str(capture)])
    assert len(result) == 5
    assert result.summary()["with_syn_retransmits"] == 1
    assert result.captures()[0]["read_stop"] == "end"


# ---------------------------------------------------------------------------------------------
# 7. The text summary


def run_piped(*args: str) -> subprocess.CompletedProcess:
    """pcapq with stdout on a pipe and no COLUMNS (test runners may leak COLUMNS=80 to children)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    return subprocess.run(["pcapq", *args], capture_output=True, env=env, timeout=120)


def _count(text: str, label: str) -> int:
    match = re.search(rf"^{re.escape(label)}\s+([\d,]+)", text, re.MULTILINE)
    assert match, f"{label!r} not in\n{text}"
    return int(match.group(1).replace(",", ""))


@pytest.mark.parametrize("args", [["--no-color"], []])
def test_text_summary_counts_without_ansi_when_piped(capture, args):
    proc = run_piped("analyze", *args, str(capture))
    assert proc.returncode == ExitCode.PROBLEMS, proc.stderr
    assert not ANSI.search(proc.stdout), proc.stdout
    text = proc.stdout.decode()
    assert _count(text, "connections") == 5
    assert _count(text, "handshakes completed") == 5
    assert _count(text, "with SYN retransmits") == 1
    assert _count(text, "with SYN-ACK retransmits") == 0
    assert _count(text, "with data retransmits") == 1
    assert _count(text, "reset (RST)") == 1
    assert str(capture) in text


def test_text_summary_timestamps_are_not_wrapped_when_piped(capture):
    text = run_piped("analyze", str(capture)).stdout.decode()
    row = next(line for line in text.splitlines() if "2023-11-14 22:13:20" in line)
    assert "2023-11-14 22:13:20.000000 UTC" in row and "2023-11-14 22:13:24.003200 UTC" in row


NGINX = Path(__file__).resolve().parent.parent / "captures" / "nginx_php_fpm.pcap"


@pytest.mark.parametrize("command", [["analyze"], ["timeline"], ["timeline", "--aggregate"], ["explain"]])
def test_r14_piped_text_is_100_columns_wide(command):
    """Issue 14, item 4: without a terminal, width 100 (it was 200 to 600 columns)."""
    proc = run_piped(*command, str(NGINX))
    lines = proc.stdout.decode().splitlines()
    assert lines and max(map(len, lines)) <= 100, max(lines, key=len)


def test_r14_piped_text_honours_columns():
    env = {**{k: v for k, v in os.environ.items() if k != "NO_COLOR"}, "COLUMNS": "130"}
    proc = subprocess.run(["pcapq", "analyze", str(NGINX)], capture_output=True, env=env, timeout=120)
    assert max(map(len, proc.stdout.decode().splitlines())) == 130


def test_text_summary_to_file_has_no_ansi(tmp_path, capture):
    out = tmp_path / "summary.txt"
    proc = run_piped("analyze", "-o", str(out), str(capture))
    assert proc.returncode == ExitCode.PROBLEMS and proc.stdout == b""
    assert not ANSI.search(out.read_bytes())
    assert _count(out.read_text(), "with SYN retransmits") == 1


def _run_on_terminal(*args: str, code: int = ExitCode.PROBLEMS) -> bytes:
    """Runs pcapq with stdout and stderr on a pseudo-terminal; returns what it printed."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(["pcapq", *args], stdout=follower, stderr=follower, env=env)
    os.close(follower)
    out = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == code, out
    return out


def test_terminal_gets_colour_and_no_color_removes_it(capture):
    colour = re.compile(rb"\x1b\[(?:[0-9;]*;)?(?:3[0-7]|9[0-7]|38;[0-9;]+)m")
    assert colour.search(_run_on_terminal("analyze", str(capture)))
    plain = _run_on_terminal("analyze", "--no-color", str(capture))
    assert not colour.search(plain)
    assert b"with SYN retransmits" in plain


# ---------------------------------------------------------------------------------------------
# docs/exit-codes.md matches exitcodes.py


def test_exit_codes_doc_lists_every_code():
    doc = (REPO / "docs/exit-codes.md").read_text()
    rows = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\|\s*(\d+)\s*\|\s*`?(\w+)`?\s*\|", doc, re.MULTILINE)}
    assert rows == {int(code): code.name for code in ExitCode}


def test_r14_capture_without_tcp_says_so_instead_of_no_failures(tmp_path):
    """Issue 14, item 9: one UDP packet; the findings say there is no TCP, not 'No failures found'."""
    import struct

    ip = bytes([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]) + struct.pack(">HHHH", 5353, 53, 8, 0)
    frame = b"\x00" * 12 + b"\x08\x00" + ip
    path = tmp_path / "udp.pcap"
    path.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
                     + struct.pack("<IIII", 1700000000, 0, len(frame), len(frame)) + frame)
    for fmt in ("text", "markdown", "html"):
        proc = run_piped("analyze", "--format", fmt, str(path))
        assert proc.returncode == ExitCode.NO_TCP
        out = proc.stdout.decode()
        assert "No TCP in this capture" in out and "No failures found" not in out, fmt


def test_r14_crosscheck_help_says_what_unexplained_means():
    text = subprocess.run(["pcapq", "crosscheck", "--help"], capture_output=True, env={**os.environ, "COLUMNS": "200"}).stdout.decode()
    assert "a disagreement that no documented difference explains is listed as UNEXPLAINED" in " ".join(text.split())
