"""Scale-out on a real dask.distributed cluster: worker processes analyse one capture point
(a ring buffer's files) each, the client puts the serialised points side by side; the result
equals one process's."""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys

import distributed  # in the test extra: imported, not skipped without it
import pytest

import pcapq
from conftest import exit_for, run_pcapq
from craft import write_pcap
from pcapq import _core
from test_merge import _busy_spanning_conversations, _document, spanning_conversations


@pytest.fixture(scope="module")
def cluster():
    """Three worker processes with one thread each."""
    with distributed.LocalCluster(
        n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
    ) as c:
        yield c


def _ring(tmp_path, packets, parts: int) -> list[str]:
    n = len(packets)
    bounds = [i * n // parts for i in range(parts)] + [n]
    ring = tmp_path / "ring"
    ring.mkdir()
    return [
        str(write_pcap(ring / ("dump.pcap" + (str(i) if i else "")), packets[a:b]))
        for i, (a, b) in enumerate(zip(bounds, bounds[1:]))
    ]


def test_cluster_json_equals_one_process(tmp_path, cluster):
    paths = _ring(tmp_path, spanning_conversations(), 4)
    local = run_pcapq("analyze", "--format", "json", "--jobs", "1", *paths)
    remote = run_pcapq("analyze", "--format", "json", "--scheduler", cluster.scheduler_address, *paths)
    assert local.returncode == remote.returncode == exit_for(json.loads(local.stdout)), remote.stderr.decode()
    assert json.loads(remote.stdout) == json.loads(local.stdout)
    # And both equal one run over the files in order.
    assert json.loads(local.stdout)["connections"] == _document(pcapq.analyze(paths))["connections"]


def test_cluster_text_report_equals_one_process(tmp_path, cluster):
    paths = _ring(tmp_path, _busy_spanning_conversations(), 5)
    local = run_pcapq("analyze", *paths)
    remote = run_pcapq("analyze", "--scheduler", cluster.scheduler_address, *paths)
    assert remote.returncode == local.returncode == exit_for(json.loads(run_pcapq("analyze", "--format", "json", *paths).stdout))
    assert not remote.stderr, remote.stderr.decode()
    assert remote.stdout == local.stdout
    assert b"Connections" in remote.stdout


def _hosts(tmp_path, names) -> None:
    """A ring buffer of three files per host, each host with its own traffic."""
    packets = _busy_spanning_conversations()
    n = len(packets)
    for k, host in enumerate(names):
        (tmp_path / host).mkdir()
        mine = packets[k * n // (2 * len(names)):]  # a different start per host
        cut = [0, len(mine) // 3, 2 * len(mine) // 3, len(mine)]
        for i, (a, b) in enumerate(zip(cut, cut[1:])):
            write_pcap(tmp_path / host / ("dump.pcap" + (str(i) if i else "")), mine[a:b])


def test_cluster_one_task_per_capture_point_equals_one_process(tmp_path, cluster):
    hosts = ("web1", "web2", "web3", "web4")
    _hosts(tmp_path, hosts)
    local = run_pcapq("analyze", "--format", "json", "--jobs", "1", str(tmp_path))
    with distributed.Client(cluster, set_as_default=False) as client:
        with distributed.get_task_stream(client) as tasks:
            remote = run_pcapq("analyze", "--format", "json", "--scheduler", cluster.scheduler_address, str(tmp_path))
    expected = json.loads(local.stdout)
    assert remote.returncode == local.returncode == exit_for(expected), remote.stderr.decode()
    assert json.loads(remote.stdout) == expected
    assert [p["name"] for p in expected["capture_points"]] == [f"{h}/dump.pcap" for h in hosts]
    # One task per capture point (12 files), spread over the workers.
    ran = [t for t in tasks.data if str(t["key"]).startswith("analyze_group")]
    assert len(ran) == len(hosts)
    assert len({t["worker"] for t in ran}) >= 2
    # The text report too.
    text = run_pcapq("analyze", "--scheduler", cluster.scheduler_address, str(tmp_path))
    assert text.stdout == run_pcapq("analyze", str(tmp_path)).stdout and not text.stderr


def test_cluster_two_hosts_sharing_a_name_pattern_are_two_points(tmp_path, cluster):
    """One directory, one name pattern, two hosts' rings at different times: one task finds
    both points, the client names them as one process does."""
    packets = spanning_conversations()
    later = [dataclasses.replace(p, time=p.time + 3600) for p in packets]
    for name, part in (("dump.pcap", packets[:30]), ("dump.pcap1", packets[30:]), ("dump.pcap2", later[:30]), ("dump.pcap3", later[30:])):
        write_pcap(tmp_path / name, part)
    local = json.loads(run_pcapq("analyze", "--format", "json", str(tmp_path)).stdout)
    remote = run_pcapq("analyze", "--format", "json", "--scheduler", cluster.scheduler_address, str(tmp_path))
    assert remote.returncode == exit_for(local), remote.stderr.decode()
    assert json.loads(remote.stdout) == local
    assert [p["name"] for p in local["capture_points"]] == ["dump.pcap", "dump.pcap #2"]


def test_worker_capture_error_reaches_the_client(tmp_path, cluster):
    bad = tmp_path / "bad.pcap"
    bad.write_text("not a capture\n")
    good = write_pcap(tmp_path / "good.pcap", spanning_conversations())
    proc = run_pcapq("analyze", "--scheduler", cluster.scheduler_address, str(good), str(bad))
    assert proc.returncode == 3
    err = proc.stderr.decode()
    assert err.startswith("pcapq: ") and err.count("\n") == 1 and "bad.pcap" in err


def test_unreachable_scheduler_says_what_it_waits_for_then_one_line_exit_69(tmp_path):
    path = write_pcap(tmp_path / "a.pcap", spanning_conversations())
    proc = subprocess.run(
        ["pcapq", "analyze", "--scheduler", "tcp://127.0.0.1:9", str(path), str(path) + "x"],
        capture_output=True,
        timeout=120,
        env={**__import__("os").environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"},
    )
    # The second file does not exist: expansion passes it on, the scheduler is tried first.
    assert proc.returncode == 69, proc.stderr.decode()
    waiting, failed = proc.stderr.decode().splitlines()
    # Issue 14: said before the silent wait, not after; Dask's connect timeout (30 s unless its
    # configuration says otherwise) is the wait.
    assert waiting == "pcapq: waiting for the Dask scheduler at tcp://127.0.0.1:9 (giving up after 2 s)"
    assert failed.startswith("pcapq: cannot reach the Dask scheduler at tcp://127.0.0.1:9")


def test_stdin_cannot_go_to_a_cluster():
    proc = run_pcapq("analyze", "--scheduler", "tcp://127.0.0.1:9", "-", input=b"")
    assert proc.returncode == 2 and b"standard input" in proc.stderr


def test_serialised_part_round_trip_and_version_check(tmp_path):
    path = str(write_pcap(tmp_path / "a.pcap", spanning_conversations()))
    for keep in (True, False):
        part = pcapq.analyze([path], keep_connections=keep, keep_events=keep, mergeable=True)
        data = part.to_bytes()
        assert data.startswith(b"PCAPQPRT")
        again = _core.Analysis.from_bytes(data)
        also = pickle.loads(pickle.dumps(part))
        assert again.summary() == also.summary() == part.summary()
    future = data[:8] + (99).to_bytes(2, "little") + data[10:]
    with pytest.raises(ValueError, match=r"format 99\); this is pcapq .* \(format 3\)"):
        _core.Analysis.from_bytes(future)
    with pytest.raises(ValueError, match="not a serialised pcapq analysis"):
        _core.Analysis.from_bytes(b"PCAP")
    with pytest.raises(ValueError, match="damaged"):
        _core.Analysis.from_bytes(data[: len(data) // 2])


def test_no_dask_import_without_scheduler(tmp_path):
    path = write_pcap(tmp_path / "a.pcap", spanning_conversations())
    code = (
        "import sys; from pcapq.cli import main; sys.argv = ['pcapq', 'analyze', %r, %r]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert not any(m == 'dask' or m.startswith(('dask.', 'distributed')) for m in sys.modules), 'dask imported'\n"
    ) % (str(path), str(path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
