"""Standard input read live and stopped with Ctrl-C (issue 14, item 1): `tcpdump -w - | pcapq
analyze -` interrupted by SIGINT to the whole pipeline's process group prints the report of
everything read, marked interrupted, and exits with the usual code (not 130)."""

from __future__ import annotations

import array
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO

CAPTURE = REPO / "captures" / "accept_queue_overflow.pcap"
PACKETS = 118

# A writer like a live tcpdump: it sends a capture, says so in a file, then stays silent until
# SIGINT ends it (or, with IGNORE, never: pcapq must stop reading on its own).
WRITER = textwrap.dedent(
    """
    import os, signal, sys, time
    capture, ready, ignore = sys.argv[1], sys.argv[2], sys.argv[3] == "ignore"
    if ignore:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    data = open(capture, "rb").read()
    os.write(1, data)
    open(ready, "w").close()
    for _ in range(600):
        time.sleep(0.1)
    """
)


def _pipeline(tmp_path: Path, writer_args: list[str], *pcapq_args: str) -> tuple[subprocess.Popen, subprocess.Popen, int]:
    """`writer | pcapq analyze PCAPQ_ARGS -` in a process group of their own, and a copy of
    the pipe's reading end to see how much pcapq has not read yet."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    writer = subprocess.Popen(writer_args, stdout=subprocess.PIPE, process_group=0)
    assert writer.stdout is not None
    reader = subprocess.Popen(
        ["pcapq", "analyze", *pcapq_args, "-"], stdin=writer.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        process_group=writer.pid, env=env,
    )
    probe = os.dup(writer.stdout.fileno())
    writer.stdout.close()
    return writer, reader, probe


def _wait_read(ready: Path, probe: int, timeout: float = 60) -> None:
    """Until the writer has sent everything and pcapq has read it all (it is then reading)."""
    deadline = time.monotonic() + timeout
    unread = array.array("i", [1])
    while not ready.exists() or unread[0]:
        assert time.monotonic() < deadline, "pcapq never read its input"
        time.sleep(0.05)
        fcntl.ioctl(probe, termios.FIONREAD, unread)
    os.close(probe)
    time.sleep(0.3)


def _interrupt(writer: subprocess.Popen, reader: subprocess.Popen) -> tuple[int, str, str]:
    os.killpg(writer.pid, signal.SIGINT)
    try:
        out, err = reader.communicate(timeout=30)
    finally:
        writer.kill()
        writer.wait()
    return reader.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("writer_on_sigint", ["exit", "ignore"])
def test_r14_ctrl_c_on_a_live_pipeline_reports_what_was_read(tmp_path: Path, writer_on_sigint: str) -> None:
    """Ctrl-C to the pipeline: the writer exits (tcpdump), or ignores it and stays silent (pcapq
    must stop reading by itself); either way the report of the whole capture, marked."""
    ready = tmp_path / "ready"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writer, reader, probe = _pipeline(tmp_path, [sys.executable, str(script), str(CAPTURE), str(ready), writer_on_sigint], "--no-color")
    _wait_read(ready, probe)
    started = time.monotonic()
    code, out, err = _interrupt(writer, reader)
    assert time.monotonic() - started < 10
    # The same finding and exit code as the file itself (1: a problem found), not 130.
    assert code == 1, err
    assert f"Interrupted (Ctrl-C) after {PACKETS} packets, {CAPTURE.stat().st_size:,} bytes" in out, out
    assert "Accept queue overflow on 10.231.1.2:9000" in out
    assert "pcapq: warning: Interrupted (Ctrl-C)" in err
    assert "Traceback" not in err


def test_r14_ctrl_c_json_says_interrupted_and_keeps_every_connection(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writer, reader, probe = _pipeline(tmp_path, [sys.executable, str(script), str(CAPTURE), str(ready), "exit"], "--format", "json")
    _wait_read(ready, probe)
    code, out, err = _interrupt(writer, reader)
    assert code == 1, err
    doc = json.loads(out)
    assert doc["interrupted"]["interrupted"] is True
    assert doc["interrupted"]["packets"] == PACKETS
    whole = json.loads(subprocess.run(["pcapq", "analyze", "--format", "json", str(CAPTURE)], capture_output=True).stdout)
    assert doc["summary"]["connections"] == whole["summary"]["connections"]
    assert [f["cause"] for f in doc["findings"]] == [f["cause"] for f in whole["findings"]]


def test_r14_input_ended_by_its_writer_is_not_marked_interrupted() -> None:
    proc = subprocess.run(["pcapq", "analyze", "--format", "json", "-"], input=CAPTURE.read_bytes(), capture_output=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "interrupted" not in json.loads(proc.stdout)


def test_r14_ctrl_c_before_any_capture_says_so(tmp_path: Path) -> None:
    writer = subprocess.Popen([sys.executable, "-c", "import time\nfor _ in range(600): time.sleep(0.1)"], stdout=subprocess.PIPE, process_group=0)
    assert writer.stdout is not None
    reader = subprocess.Popen(["pcapq", "analyze", "-"], stdin=writer.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=writer.pid)
    writer.stdout.close()
    time.sleep(3)  # pcapq is up and waiting for its input
    code, out, err = _interrupt(writer, reader)
    assert code == 3, err
    assert "interrupted (Ctrl-C) before any capture arrived" in err


@pytest.mark.kernel
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("tcpdump") is None, reason="needs root and tcpdump")
def test_r14_ctrl_c_on_tcpdump_pipeline_reports_the_connections_captured(tmp_path: Path) -> None:
    """The real thing: tcpdump on loopback piped into pcapq, three connections to a listener,
    then SIGINT to the pipeline."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    tcpdump = subprocess.Popen(
        ["tcpdump", "-i", "lo", "-n", "-w", "-", f"tcp port {port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0
    )
    assert tcpdump.stdout is not None and tcpdump.stderr is not None
    reader = subprocess.Popen(["pcapq", "analyze", "--format", "json", "-"], stdin=tcpdump.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=tcpdump.pid)
    tcpdump.stdout.close()
    tcpdump.stderr.readline()  # "listening on lo ..."
    try:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
                peer, _ = server.accept()
                client.sendall(b"GET / HTTP/1.0\r\n\r\n")
                peer.recv(100)
                peer.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
                client.recv(100)
                peer.close()
        # tcpdump gets packets from the kernel's ring in blocks retired after 1 s at most.
        time.sleep(2)
        code, out, err = _interrupt(tcpdump, reader)
    finally:
        server.close()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["interrupted"]["interrupted"] is True
    assert doc["summary"]["connections"] == 3
    assert doc["summary"]["outcomes"]["completed"] == 3
