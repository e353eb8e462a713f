"""`pcapq annotate` (docs/wireshark.md): the capture written back as pcapng with pcapq's words as
packet comments, read back with Wireshark's own tools. The comments are `pcapq timeline`'s notes,
frame for frame; every packet's bytes and timestamp are the input's; capinfos and editcap read the
file; the colouring rules load in tshark and colour the packets they name."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from scapy.all import PcapNgReader, PcapReader, RawPcapNgReader, RawPcapReader  # type: ignore[attr-defined]

import craft
from conftest import REPO
from inprocess import run_main
from pcapq.exitcodes import ExitCode

CAPTURES = REPO / "captures"
OVERFLOW = CAPTURES / "accept_queue_overflow.pcap"
WIRESHARK = ("tshark", "capinfos", "editcap")
pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in WIRESHARK), reason="needs tshark, capinfos and editcap")


def pcapq(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["pcapq", *args], capture_output=True, text=True, timeout=300)


def tshark(*args: str, env: dict | None = None) -> str:
    proc = subprocess.run(["tshark", *args], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def comments(path: Path) -> dict[int, str]:
    """Frame number -> its comments as tshark shows them (several joined by ',')."""
    out = {}
    for line in tshark("-r", str(path), "-T", "fields", "-e", "frame.number", "-e", "frame.comment").splitlines():
        number, _, text = line.partition("\t")
        if text:
            out[int(number)] = text
    return out


def notes(files: list[Path], *options: str) -> dict[tuple[int, int], list[str]]:
    """(file, frame) -> the notes `pcapq timeline` shows on that packet, over every connection."""
    code, text, err = run_main("timeline", "--format", "json", "--since", "0", "--limit", "1000000", *options, *map(str, files))
    assert code == 0, err
    out: dict[tuple[int, int], list[str]] = defaultdict(list)
    for conn in json.loads(text)["connections"]:
        for row in conn["rows"]:
            out[(row["file"], row["frame"])].append(row["note"])
    return out


def records(files: list[Path]) -> list[int]:
    """The number of records (frames) of each file, as tshark counts them."""
    return [int(tshark("-r", str(f), "-T", "fields", "-e", "frame.number").split()[-1]) for f in files]


def packets(path: Path) -> list[tuple[bytes, object]]:
    """Each packet's bytes and timestamp (exact, as scapy reads it)."""
    reader = PcapNgReader if path.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a" else PcapReader
    with reader(str(path)) as r:
        return [(bytes(p.original), p.time) for p in r]


def annotate(tmp_path: Path, files: list[Path], *options: str) -> Path:
    out = tmp_path / "out.pcapng"
    code, _, err = run_main("annotate", "-o", str(out), *options, *map(str, files))
    assert code == 0 and "Traceback" not in err, err
    return out


def assert_comments_are_timeline_notes(out: Path, files: list[Path]) -> None:
    """Frame for frame: every labelled packet carries its notes, in order, and no other packet a
    comment but a problem connection's first one."""
    expected = notes(files)
    offsets = [0]
    for n in records(files[:-1]):
        offsets.append(offsets[-1] + n)
    got = comments(out)
    assert expected, "nothing labelled"
    for (file, frame), texts in expected.items():
        comment = got.get(offsets[file] + frame, "")
        at = 0
        for text in texts:
            found = comment.find(text, at)
            assert found >= 0, (file, frame, text, comment)
            at = found + len(text)
    labelled = {offsets[f] + n for f, n in expected}
    for number, comment in got.items():
        assert comment.startswith("pcapq: "), comment
        if number not in labelled:
            assert comment.startswith("pcapq: connection "), (number, comment)


# ---------------------------------------------------------------------------------------------
# Tests on the shipped captures


@pytest.mark.parametrize("name", ["accept_queue_overflow", "syn_queue_overflow", "abort_on_overflow", "packet_loss",
                                  "icmp_port_unreachable", "haproxy_http_overflow"])
def test_comments_are_the_timeline_notes_frame_for_frame(tmp_path: Path, name: str) -> None:
    files = [CAPTURES / f"{name}.pcap"]
    out = annotate(tmp_path, files)
    assert_comments_are_timeline_notes(out, files)
    assert packets(out) == packets(files[0])


@pytest.mark.parametrize("run", sorted(p.stem for p in (CAPTURES / "kernel_runs").glob("*.pcap")))
def test_real_kernel_runs_are_annotated_frame_for_frame(tmp_path: Path, run: str) -> None:
    files = [CAPTURES / "kernel_runs" / f"{run}.pcap"]
    out = annotate(tmp_path, files)
    assert_comments_are_timeline_notes(out, files)
    assert packets(out) == packets(files[0])


def test_the_spurious_synack_and_each_resent_request_say_why(tmp_path: Path) -> None:
    # The picture: on the shipped overflow, the SYN-ACK sent again after the client's
    # ACK, and each request re-sent into a connection the server did not take.
    out = annotate(tmp_path, [OVERFLOW])
    got = comments(out)
    spurious = [n for n, c in got.items() if "spurious: the client already ACKed in frame" in c]
    resent = [n for n, c in got.items() if "request re-sent" in c and "never acknowledged" in c]
    assert spurious and resent, got
    report = pcapq("analyze", "--format", "json", str(OVERFLOW))
    frames = {e["frame"] for f in json.loads(report.stdout)["findings"] for e in f["evidence"]}
    # The frames the report points at carry pcapq's words.
    assert frames and frames <= set(got), (frames, sorted(got))
    first = [c for c in got.values() if c.startswith("pcapq: connection ") and "Accept queue overflow on 10.231.1.2:9000" in c]
    assert first


def test_section_header_has_the_findings_and_the_version(tmp_path: Path) -> None:
    from pcapq import __version__

    out = annotate(tmp_path, [OVERFLOW])
    info = subprocess.run(["capinfos", str(out)], capture_output=True, text=True, check=True).stdout
    assert f"pcapq {__version__} annotated" in info and "Finding: Accept queue overflow on 10.231.1.2:9000" in info
    assert "pcapng" in info and "Number of packets:   118" in info


def test_editcap_and_capinfos_read_the_file(tmp_path: Path) -> None:
    out = annotate(tmp_path, [OVERFLOW])
    copy = tmp_path / "copy.pcapng"
    subprocess.run(["editcap", str(out), str(copy)], check=True, capture_output=True)
    assert comments(copy) == comments(out)
    assert subprocess.run(["capinfos", "-c", str(copy)], capture_output=True).returncode == 0


# ---------------------------------------------------------------------------------------------
# Tests for the inputs pcapq reads: pcapng, link types, IPv6, VLAN, gzip, several files


def _overflow_packets() -> list[craft.Captured]:
    """The shipped overflow's IP packets with their times, to wrap in other link layers."""
    out = []
    for data, meta in RawPcapReader(str(OVERFLOW)):
        t = meta.sec + meta.usec / 1e6
        out.append(craft.Captured(t, data[14:]))
    return out


def _v6_conversation() -> list[craft.Captured]:
    packets: list[craft.Captured] = []
    c = craft.Conversation(client=("fd00::1", 40000), server=("fd00::2", 9000), packets=packets)
    c.syn(0.0)
    c.syn(1.0)
    c.synack(1.0001)
    c.ack("client", 1.0002)
    c.send("client", 1.001, 100)
    c.resend("client", 1.25)
    c.rst("client", 3.0)
    return packets


@pytest.mark.parametrize("form", ["pcapng", "pcapng_big_endian_ns", "sll2", "vlan", "gzip", "nanoseconds", "ipv6"])
def test_every_input_form_is_written_frame_for_frame(tmp_path: Path, form: str) -> None:
    packets_in = _v6_conversation() if form == "ipv6" else _overflow_packets()
    path = tmp_path / f"in_{form}.{'pcapng' if form.startswith('pcapng') else 'pcap'}"
    if form == "pcapng":
        craft.write_pcapng(path, packets_in)
    elif form == "pcapng_big_endian_ns":
        craft.write_pcapng(path, packets_in, big_endian=True, tsresol=9)
    elif form == "sll2":
        craft.write_pcap(path, packets_in, linktype="sll2")
    elif form == "vlan":
        craft.write_pcap(path, packets_in, vlan=(100,))
    elif form == "gzip":
        path = craft.write_pcap(tmp_path / "in.pcap.gz", packets_in, gzip=True)
    elif form == "nanoseconds":
        craft.write_pcap(path, packets_in, nano=True)
    else:
        craft.write_pcap(path, packets_in)
    out = annotate(tmp_path, [path])
    assert_comments_are_timeline_notes(out, [path])
    plain = path if form != "gzip" else craft.write_pcap(tmp_path / "plain.pcap", packets_in)
    assert packets(out) == packets(plain)
    if form in ("pcapng_big_endian_ns", "nanoseconds"):
        assert "nanoseconds" in subprocess.run(["capinfos", str(out)], capture_output=True, text=True).stdout


def test_several_files_of_one_capture_point_follow_one_another(tmp_path: Path) -> None:
    # The overflow cut in two files (editcap -c): one output, the second file's frames after the
    # first's, each with its notes.
    subprocess.run(["editcap", "-c", "60", str(OVERFLOW), str(tmp_path / "part.pcap")], check=True, capture_output=True)
    parts = sorted(tmp_path.glob("part*.pcap"))
    assert len(parts) == 2
    out = annotate(tmp_path, parts)
    assert_comments_are_timeline_notes(out, parts)
    assert [p for p, _ in packets(out)] == [p for f in parts for p, _ in packets(f)]


def test_comments_already_in_a_pcapng_input_are_kept_before_pcapqs(tmp_path: Path) -> None:
    commented = tmp_path / "commented.pcapng"
    subprocess.run(["editcap", "-a", "1:seen by the on-call", str(OVERFLOW), str(commented)], check=True, capture_output=True)
    out = annotate(tmp_path, [commented])
    first = comments(out)[1]
    assert first.startswith("seen by the on-call,pcapq: "), first


# ---------------------------------------------------------------------------------------------
# Tests for the selection, the colouring rules and bad input


def test_failed_and_cause_label_fewer_connections(tmp_path: Path) -> None:
    every = comments(annotate(tmp_path, [OVERFLOW]))
    failed = comments(annotate(tmp_path, [OVERFLOW], "--failed"))
    cause = comments(annotate(tmp_path, [OVERFLOW], "--cause", "accept_queue_overflow"))
    assert set(cause) <= set(failed) < set(every)
    assert all("Accept queue overflow" in c for c in cause.values() if c.startswith("pcapq: connection "))
    assert not comments(annotate(tmp_path, [OVERFLOW], "--cause", "closed_port"))


def test_coloring_rules_load_in_tshark_and_mark_pcapqs_labels(tmp_path: Path) -> None:
    from pcapq.annotate import COLORING_RULES

    out = annotate(tmp_path, [OVERFLOW], "--coloring-rules", str(tmp_path / "rules"))
    rules = (tmp_path / "rules").read_text()
    for rule in COLORING_RULES:
        tshark("-r", str(out), "-Y", rule.filter, "-c", "1")  # each filter compiles
    config = tmp_path / "wireshark"
    config.mkdir()
    (config / "colorfilters").write_text(rules)
    psml = tshark("-r", str(out), "-T", "psml", "--color", env={"WIRESHARK_CONFIG_DIR": str(config), "PATH": "/usr/bin:/bin"})
    # Each packet's background, "" where no rule (ours or the defaults) coloured it.
    backgrounds = [(line.split("background='")[1][:7] if "background='" in line else "")
                   for line in psml.splitlines() if line.startswith("<packet")]
    assert len(backgrounds) == 118
    spurious = "#" + "".join(f"{c >> 8:02x}" for c in COLORING_RULES[0].background)
    got = comments(out)
    marked = [n for n, bg in enumerate(backgrounds, 1) if bg == spurious]
    assert marked and all("spurious" in got[n] for n in marked)


def test_standard_input_and_a_missing_file_are_one_line_errors(tmp_path: Path) -> None:
    proc = pcapq("annotate", "-o", str(tmp_path / "x.pcapng"), "-")
    assert proc.returncode == ExitCode.USAGE and proc.stderr.count("\n") == 1
    proc = pcapq("annotate", "-o", str(tmp_path / "x.pcapng"), str(tmp_path / "nope.pcap"))
    assert proc.returncode == ExitCode.UNREADABLE and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_a_truncated_capture_is_written_up_to_the_break(tmp_path: Path) -> None:
    data = OVERFLOW.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) // 2])
    out = tmp_path / "cut.pcapng"
    proc = pcapq("annotate", "-o", str(out), str(cut))
    assert proc.returncode == ExitCode.DAMAGED and "warning" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    written = packets(out)
    assert written and written == packets(out)[: len(written)]
    with RawPcapNgReader(str(out)) as r:
        assert sum(1 for _ in r) == len(written)


def test_the_output_never_overwrites_an_input(tmp_path: Path) -> None:
    copy = tmp_path / "in.pcap"
    copy.write_bytes(OVERFLOW.read_bytes())
    proc = pcapq("annotate", "-o", str(copy), str(copy))
    assert proc.returncode == ExitCode.USAGE and copy.read_bytes() == OVERFLOW.read_bytes()
