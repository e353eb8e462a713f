"""Hypothesis over the Python layer: random and mutated capture bytes through `pcapq analyze`.

Whatever the bytes, pcapq ends with a documented exit code, every stderr line is a `pcapq: `
message (no traceback), and a report it writes is whole (JSON parses). The runs go through
`pcapq.cli.main` in-process, as the console script (`pcapq.launch`) calls it for a command line
with options, so hundreds of inputs take seconds.
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import pytest
from craft import Conversation, epb, idb, pcap_bytes, shb
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from inprocess import run_main
from test_cli import conversations

from pcapq.exitcodes import ExitCode

# What `pcapq analyze` may end with on a bad capture (docs/exit-codes.md); 70 (a bug) is not here.
DOCUMENTED = {ExitCode.OK, ExitCode.PROBLEMS, ExitCode.UNREADABLE, ExitCode.DAMAGED, ExitCode.NO_TCP}


def _seeds() -> dict[str, bytes]:
    packets = conversations(3)
    rst = Conversation(client=("10.0.0.1", 41000), packets=packets)
    rst.syn(0.5)
    rst.syn(1.5)
    rst.rst("server", 1.6)
    six = Conversation(client=("fd00::1", 42000), server=("fd00::2", 9000), start=packets[0].time + 2)
    six.handshake()
    six.close(0.1)
    pcap = pcap_bytes(packets)
    ng = shb(comment="seed") + idb() + b"".join(epb(p) for p in packets + six.packets)
    return {
        "pcap": pcap,
        "pcap_be_nano": pcap_bytes(packets, big_endian=True, nano=True),
        "pcapng": ng,
        "pcap_gz": gzip.compress(pcap, mtime=0),
        "pcapng_gz": gzip.compress(ng, mtime=0),
    }


SEEDS = _seeds()

_interesting_words = st.sampled_from([0, 1, 12, 16, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFF0, 0xFFFFFFFF])


@st.composite
def mutated_capture(draw) -> bytes:
    """A seed capture with a few edits: flipped bytes, a 32-bit field set to an extreme value,
    a slice cut out, repeated or inserted, or the file cut short."""
    data = bytearray(SEEDS[draw(st.sampled_from(sorted(SEEDS)))])
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "word", "cut_out", "repeat", "insert", "truncate"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "word":
            order = draw(st.sampled_from("<>"))
            data[at : at + 4] = struct.pack(order + "I", draw(_interesting_words))
        elif kind == "cut_out":
            del data[at : at + draw(st.integers(1, 64))]
        elif kind == "repeat":
            data[at:at] = data[at : at + draw(st.integers(1, 200))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=32))
        elif kind == "truncate":
            del data[at:]
    return bytes(data)


# Each example is read in one report format, drawn with the bytes: the reading and the diagnosis
# are the same in every format, so each format meets its share of the inputs.
FORMAT = st.sampled_from(["json", "text", "markdown", "html"])


def check(path: Path, data: bytes, fmt: str) -> None:
    path.write_bytes(data)
    code, out, err = run_main("analyze", "--format", fmt, "--no-color", str(path))
    event(f"exit {code}")  # --hypothesis-show-statistics: how often each outcome came up
    assert code in DOCUMENTED, (code, err)
    assert "Traceback" not in err and "panicked" not in err, err
    lines = err.splitlines()
    assert all(line.startswith("pcapq: ") for line in lines), lines
    # One line per fact (the stop, time going backwards, each undecoded link type, no TCP),
    # never one per packet.
    assert len(lines) == len(set(lines)) and len(lines) <= 10, lines
    if code == ExitCode.UNREADABLE:
        # Nothing was analysed: one line says why, no report.
        assert out == "" and len(lines) == 1, (out[:200], lines)
        return
    # Analysed (a damaged capture up to the damage, or one without TCP): a whole report.
    assert out, err
    if fmt == "json":
        assert json.loads(out)["schema"] == "pcapq.analysis"


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(data=mutated_capture(), fmt=FORMAT)
def test_mutated_captures_end_with_a_documented_exit_code(tmp_path, data, fmt):
    check(tmp_path / "mutated.cap", data, fmt)


@FUZZ
@given(
    magic=st.sampled_from([b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\x0a\x0d\x0d\x0a", b"\x1f\x8b", b""]),
    rest=st.binary(max_size=600),
    fmt=FORMAT,
)
def test_random_bytes_behind_a_capture_magic(tmp_path, magic, rest, fmt):
    check(tmp_path / "random.cap", magic + rest, fmt)


@FUZZ
@given(data=mutated_capture(), fmt=FORMAT)
def test_mutated_captures_inside_gzip(tmp_path, data, fmt):
    check(tmp_path / "mutated.cap.gz", gzip.compress(data, mtime=0), fmt)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_the_seeds_themselves_are_good(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(SEEDS[name])
    code, out, err = run_main("analyze", "--format", "json", str(path))
    # The seeds hold a SYN re-sent and reset: a finding, exit 1.
    assert code == ExitCode.PROBLEMS, err
    assert json.loads(out)["summary"]["connections"] >= 4
