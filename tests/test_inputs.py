"""Input expansion (files, globs, directories, '-') and grouping into capture points."""

from __future__ import annotations

import json
import os

import pytest

import pcapq
from conftest import exit_for, run_pcapq
from craft import write_pcap, write_pcapng
from pcapq.capture_points import FileTimes, group, stem
from pcapq.inputs import InputError, expand
from test_merge import spanning_conversations


def _captures(tmp_path):
    packets = spanning_conversations()
    write_pcap(tmp_path / "a.pcap", packets[:10])
    write_pcap(tmp_path / "noext", packets[10:20])
    write_pcapng(tmp_path / "sub" / "c.pcapng.gz", packets[20:], gzip=True)
    (tmp_path / "notes.txt").write_text("not a capture\n")
    return packets


# --- expansion ---


def test_directory_is_walked_for_captures_by_content(tmp_path):
    (tmp_path / "sub").mkdir()
    _captures(tmp_path)
    assert expand([str(tmp_path)]) == [str(tmp_path / "a.pcap"), str(tmp_path / "noext"), str(tmp_path / "sub" / "c.pcapng.gz")]


def test_glob_is_expanded_when_the_shell_did_not(tmp_path):
    (tmp_path / "sub").mkdir()
    _captures(tmp_path)
    assert expand([str(tmp_path / "*.pcap*")]) == [str(tmp_path / "a.pcap")]
    assert expand([str(tmp_path / "**" / "*.gz")]) == [str(tmp_path / "sub" / "c.pcapng.gz")]


def test_existing_file_with_glob_characters_is_taken_as_it_is(tmp_path):
    odd = write_pcap(tmp_path / "dump[1].pcap", spanning_conversations())
    write_pcap(tmp_path / "dump1.pcap", spanning_conversations())
    assert expand([str(odd)]) == [str(odd)]


def test_each_file_once_and_stdin_passes(tmp_path):
    (tmp_path / "sub").mkdir()
    _captures(tmp_path)
    a = str(tmp_path / "a.pcap")
    assert expand([a, a, "-"]) == [a, "-"]
    with pytest.raises(InputError, match="only once"):
        expand(["-", "-"])


def test_empty_glob_and_directory_are_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x.txt").write_text("hello")
    with pytest.raises(InputError, match="no file matches"):
        expand([str(tmp_path / "*.pcap")])
    with pytest.raises(InputError, match="holds no pcap"):
        expand([str(tmp_path / "empty")])


def test_cli_empty_glob_is_one_line_exit_3(tmp_path):
    proc = run_pcapq("analyze", str(tmp_path / "nothing-*.pcap"))
    assert proc.returncode == 3
    err = proc.stderr.decode()
    assert err.startswith("pcapq: ") and err.count("\n") == 1 and "no file matches" in err


def test_missing_file_still_reported_by_the_core(tmp_path):
    assert expand([str(tmp_path / "missing.pcap")]) == [str(tmp_path / "missing.pcap")]


# --- capture points ---


@pytest.mark.parametrize(
    "name, expected",
    [
        ("dump.pcap", "dump.pcap"),
        ("dump.pcap7", "dump.pcap"),
        ("dump.pcap07.gz", "dump.pcap"),
        ("web1-20261121-080000.pcap", "web1-#-#.pcap"),
        ("web2.pcap", "web2.pcap"),
    ],
)
def test_stem_of_tcpdump_names(name, expected):
    assert stem(name) == expected


def _names(points):
    return [[os.path.basename(f.path) for f in p.files] for p in points]


def test_ring_buffer_files_are_one_point_in_time_order():
    files = [
        FileTimes("/c/dump.pcap2", 20.0, 29.0),
        FileTimes("/c/dump.pcap", 0.0, 9.5),
        FileTimes("/c/dump.pcap1", 9.5, 19.0),
    ]
    (point,) = group(files)
    assert _names([point]) == [["dump.pcap", "dump.pcap1", "dump.pcap2"]]


def test_timed_rotation_names_are_one_point():
    files = [FileTimes(f"/c/web-20261121-08{m:02d}00.pcap", m * 60.0, m * 60.0 + 59) for m in (2, 0, 1)]
    (point,) = group(files)
    assert [f.first_time for f in point.files] == [0.0, 60.0, 120.0]


def test_per_host_directories_are_separate_points():
    files = [FileTimes(f"/cap/{host}/dump.pcap{i}", i * 10.0, i * 10.0 + 9) for host in ("web1", "web2") for i in range(3)]
    points = group(files)
    assert [p.name for p in points] == ["web1/dump.pcap", "web2/dump.pcap"]
    assert all(len(p.files) == 3 for p in points)


def test_overlapping_files_with_one_name_pattern_are_two_points():
    # Two hosts rotating into one directory with the same pattern: their files overlap in time.
    files = [FileTimes(f"/c/dump-{int(t):06d}.pcap", t, t + 60.0) for t in (0.0, 60.0)] + [
        FileTimes(f"/c/dump-{int(t) + 1:06d}.pcap", t + 1, t + 61.0) for t in (0.0, 60.0)
    ]
    points = group(files)
    assert len(points) == 2
    assert [[f.first_time for f in p.files] for p in points] == [[0.0, 60.0], [1.0, 61.0]]


def test_a_long_gap_starts_another_point_and_merge_joins_all():
    files = [FileTimes("/c/dump.pcap", 0.0, 10.0), FileTimes("/c/dump.pcap1", 500.0, 510.0)]
    assert len(group(files)) == 2
    (merged,) = group(files, merge=True)
    assert [f.first_time for f in merged.files] == [0.0, 500.0]


def test_different_names_are_different_points():
    files = [FileTimes("/c/web1.pcap", 0.0, 10.0), FileTimes("/c/web2.pcap", 0.0, 10.0)]
    assert [p.name for p in group(files)] == ["web1.pcap", "web2.pcap"]


# --- through the command ---


def _doc(analysis) -> dict:
    import io

    out = io.StringIO()
    analysis.write_json(out)
    return json.loads(out.getvalue())


def _ring(directory, packets, cuts):
    directory.mkdir(parents=True, exist_ok=True)
    bounds = [0, *cuts, len(packets)]
    paths = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        paths.append(str(write_pcap(directory / ("dump.pcap" + (str(i) if i else "")), packets[a:b])))
    return paths


def test_cli_ring_buffer_in_shuffled_order_equals_one_run(tmp_path):
    packets = spanning_conversations()
    paths = _ring(tmp_path / "ring", packets, [len(packets) // 3, 2 * len(packets) // 3])
    one_run = _doc(pcapq.analyze(paths))
    proc = run_pcapq("analyze", "--format", "json", paths[2], paths[0], paths[1])
    doc = json.loads(proc.stdout)
    assert proc.returncode == exit_for(doc), proc.stderr.decode()
    assert doc["connections"] == one_run["connections"]
    assert doc["summary"] == one_run["summary"]
    assert [c["path"] for c in doc["captures"]] == paths


def test_cli_two_hosts_side_by_side(tmp_path):
    packets = spanning_conversations()
    _ring(tmp_path / "web1", packets, [len(packets) // 2])
    _ring(tmp_path / "web2", packets[:20], [10])
    proc = run_pcapq("analyze", "--format", "json", str(tmp_path))
    doc = json.loads(proc.stdout)
    assert proc.returncode == exit_for(doc), proc.stderr.decode()
    assert [p["name"] for p in doc["capture_points"]] == ["web1/dump.pcap", "web2/dump.pcap"]
    assert doc["capture_points"][0]["report"]["summary"]["connections"] == 5
    text = run_pcapq("analyze", str(tmp_path))
    assert text.returncode == exit_for(doc)
    out = text.stdout.decode()
    assert "Capture points" in out and "web1/dump.pcap" in out and "web2/dump.pcap" in out
    merged = json.loads(run_pcapq("analyze", "--merge", "--format", "json", str(tmp_path)).stdout)
    assert "capture_points" not in merged and len(merged["captures"]) == 4


def test_cli_text_report_same_for_any_jobs(tmp_path):
    packets = spanning_conversations()
    paths = _ring(tmp_path / "ring", packets, [10, 20, 30])
    outputs = {run_pcapq("analyze", "--jobs", str(j), *paths).stdout for j in (1, 2, 0)}
    assert len(outputs) == 1
    assert b"Connections" in outputs.pop()
    bad = run_pcapq("analyze", "--jobs", "-1", *paths)
    assert bad.returncode == 2


@pytest.mark.parametrize(
    "write, options",
    [
        (write_pcap, {}),
        (write_pcap, {"gzip": True}),
        (write_pcap, {"big_endian": True}),
        (write_pcap, {"nano": True}),
        (write_pcapng, {}),
        (write_pcapng, {"tsresol": 9, "big_endian": True}),
        (write_pcapng, {"block": "opb"}),
        (write_pcapng, {"gzip": True}),
    ],
)
def test_first_packet_time_read_from_the_head_equals_the_core(tmp_path, write, options):
    from pcapq.inputs import first_packet_time

    path = write(tmp_path / "a.cap", spanning_conversations()[3:], **options)
    (info,) = pcapq.analyze([str(path)]).captures()
    assert first_packet_time(str(path)) == pytest.approx(info["first_time"], abs=1e-6)


def test_ring_that_wrapped_is_joined_in_time_order(tmp_path):
    # tcpdump -W 3 after wrapping: dump.pcap2 holds the oldest packets, dump.pcap0 the newest.
    packets = spanning_conversations()
    n = len(packets)
    ring = tmp_path / "ring"
    ring.mkdir()
    names = ["dump.pcap2", "dump.pcap0", "dump.pcap1"]
    paths = [str(write_pcap(ring / name, packets[i * n // 3 : (i + 1) * n // 3])) for i, name in enumerate(names)]
    one_run = _doc(pcapq.analyze(paths))
    doc = json.loads(run_pcapq("analyze", "--format", "json", str(ring)).stdout)
    assert [c["path"] for c in doc["captures"]] == paths
    assert doc["connections"] == one_run["connections"]
