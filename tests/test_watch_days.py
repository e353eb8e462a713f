"""`pcapq watch` as a sidecar that runs for days (issue 30): --follow FILE (a capture file
tcpdump is still writing), pcapng on a pipe, SIGTERM taken as Ctrl-C, and --keep (the report
covers a window of capture time, with the totals since the watch began)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from craft import Captured, Conversation, write_pcap
from test_watch import loopback_exchanges

SERVER = ("10.0.0.2", 9000)
START = 1_700_000_000.0
NEEDS_TCPDUMP = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("tcpdump") is None, reason="needs root and tcpdump")


def _healthy(packets: list[Captured], port: int, t: float) -> None:
    c = Conversation(client=("10.0.0.1", port), server=SERVER, start=START, packets=packets, new_ip_ids=True)
    c.handshake(t)
    c.send("client", t + 0.001, b"GET / HTTP/1.1\r\n\r\n")
    c.send("server", t + 0.05, b"HTTP/1.1 200 OK\r\n\r\n")
    c.close(t + 0.06)


def _overflowed(packets: list[Captured], port: int, t: float) -> None:
    """The server's kernel drops the handshake's final ACK (accept queue full)."""
    c = Conversation(client=("10.0.0.1", port), server=SERVER, start=START, packets=packets, new_ip_ids=True)
    c.handshake(t)
    c.send("client", t + 0.001, b"GET / HTTP/1.1\r\n\r\n")
    c.resend("server", t + 1.0, index=0)
    c.resend("client", t + 1.2)
    c.rst("client", t + 2.5)


def _capture(path: Path, healthy_s: int = 10) -> Path:
    packets: list[Captured] = []
    for i in range(healthy_s):
        _healthy(packets, 41000 + i, float(i))
    packets.sort(key=lambda p: p.time)
    return write_pcap(path, packets)


class _Stderr:
    """A running pcapq's standard error, line by line."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        stream = proc.stderr

        def follow() -> None:
            for raw in stream:
                self.lines.append(raw.decode().rstrip("\n"))

        self.thread = threading.Thread(target=follow, daemon=True)
        self.thread.start()

    def wait_for(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} in {self.lines}")


def _wait_for_file(path: Path, size: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_size >= size):
        assert time.monotonic() < deadline, f"{path} has not {size} bytes"
        time.sleep(0.05)


# ---- --follow FILE ----


@pytest.mark.kernel
@NEEDS_TCPDUMP
def test_r30_follow_reads_the_file_tcpdump_is_writing_until_ctrl_c(tmp_path: Path) -> None:
    """tcpdump -i lo -U -w FILE in the background, pcapq watch --follow FILE: connections made
    after both started are said in a line before Ctrl-C, which gives the report."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    dump = tmp_path / "dump.pcap"
    tcpdump = subprocess.Popen(["tcpdump", "-i", "lo", "-n", "-U", "-w", str(dump), f"tcp port {port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_file(dump, 24)
        # Wide enough that the report never wraps the capture's path (a test's temporary path
        # is longer under xdist).
        watch = subprocess.Popen(["pcapq", "watch", "--every", "1", "--follow", str(dump)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "400"})
        err = _Stderr(watch)
        time.sleep(1.5)  # tcpdump is capturing, pcapq at the end of the file
        loopback_exchanges(port, server, 3)
        err.wait_for(f"127.0.0.1:{port}  ")
        time.sleep(1.5)  # the next interval's line, should the three have straddled two
        watch.send_signal(signal.SIGINT)
        assert watch.stdout is not None
        out = watch.stdout.read()
        watch.wait(timeout=30)
        err.thread.join(timeout=10)
    finally:
        tcpdump.terminate()
        tcpdump.wait(timeout=10)
        server.close()
    said = [line.split("  ")[2] for line in err.lines if f"127.0.0.1:{port}  " in line]
    assert sum(int(s.split()[0]) for s in said) == 3, err.lines
    assert watch.returncode == 0, err.lines
    text = " ".join(out.decode().split())  # the report wraps at the console's width
    assert f"Interrupted (Ctrl-C) after " in text and f"bytes from {dump}" in text, text
    assert "Traceback" not in "\n".join(err.lines)


def test_r30_follow_ends_with_the_report_when_tcpdump_starts_over(tmp_path: Path) -> None:
    dump = tmp_path / "dump.pcap"
    _capture(dump)
    watch = subprocess.Popen(["pcapq", "watch", "--format", "json", "--follow", str(dump)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = _Stderr(watch)
    time.sleep(2)  # read to the end, waiting for more
    assert watch.poll() is None, err.lines
    # tcpdump restarted: a new file at the path (the old one renamed away by a rotation).
    os.replace(_capture(tmp_path / "new.pcap", 3), dump)
    assert watch.stdout is not None
    out = watch.stdout.read()
    watch.wait(timeout=30)
    err.thread.join(timeout=10)
    assert watch.returncode == 0, err.lines
    assert f"pcapq: {dump} was replaced (tcpdump restarted?): the report covers what was read until then" in err.lines
    doc = json.loads(out)
    assert doc["summary"]["connections"] == 10 and "interrupted" not in doc
    assert doc["captures"][0]["path"] == str(dump)


def test_r30_follow_a_file_that_shrank_ends_the_watch(tmp_path: Path) -> None:
    dump = tmp_path / "dump.pcap"
    _capture(dump)
    watch = subprocess.Popen(["pcapq", "watch", "--format", "json", "--follow", str(dump)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = _Stderr(watch)
    time.sleep(2)
    dump.write_bytes(dump.read_bytes()[:24])  # tcpdump -w on the same name truncates it
    assert watch.stdout is not None
    out = watch.stdout.read()
    watch.wait(timeout=30)
    assert watch.returncode == 0 and json.loads(out)["summary"]["connections"] == 10
    err.thread.join(timeout=10)
    assert any("was replaced (tcpdump restarted?)" in line for line in err.lines), err.lines


def test_r30_follow_bad_uses_are_one_line_errors(tmp_path: Path) -> None:
    missing = subprocess.run(["pcapq", "watch", "--follow", str(tmp_path / "nope.pcap")], capture_output=True, timeout=30)
    assert missing.returncode == 3
    assert missing.stderr.decode().splitlines() == [f"pcapq: {tmp_path / 'nope.pcap'}: no such file (start tcpdump -w {tmp_path / 'nope.pcap'} first)"]
    dash = subprocess.run(["pcapq", "watch", "--follow", "-"], capture_output=True, timeout=30)
    assert dash.returncode == 2 and dash.stderr.decode().count("\n") == 1 and "--follow reads a file" in dash.stderr.decode()
    _capture(tmp_path / "dump.pcap")
    both = subprocess.run(["pcapq", "watch", "--follow", str(tmp_path / "dump.pcap"), "-"], capture_output=True, timeout=30)
    assert both.returncode == 2 and b"give no '-' as well" in both.stderr
    text = tmp_path / "notes.txt"
    text.write_text("not a capture\n" * 4)
    bad = subprocess.run(["pcapq", "watch", "--follow", str(text)], capture_output=True, timeout=30)
    assert bad.returncode == 3 and bad.stderr.decode().count("\n") == 1 and b"Traceback" not in bad.stderr, bad.stderr


# ---- pcapng on a pipe, and a pipe tcpdump closes ----


def _pcapng_writer(port: int) -> list[str] | None:
    """A capture of loopback port `port` written as pcapng to standard output, packet by packet:
    tcpdump --pcapng where tcpdump can write it (5.0 and later), else Wireshark's dumpcap (whose
    format is pcapng); None without either."""
    tcpdump = shutil.which("tcpdump")
    if tcpdump is not None and "pcapng" in subprocess.run([tcpdump, "--help"], capture_output=True, text=True).stderr:
        return [tcpdump, "--pcapng", "-i", "lo", "-n", "-U", "-w", "-", f"tcp port {port}"]
    dumpcap = shutil.which("dumpcap")
    if dumpcap is not None:
        return [dumpcap, "-q", "-i", "lo", "-f", f"tcp port {port}", "-w", "-"]
    return None


@pytest.mark.kernel
@pytest.mark.skipif(os.geteuid() != 0 or not (shutil.which("tcpdump") or shutil.which("dumpcap")), reason="needs root and tcpdump or dumpcap")
def test_r30_pcapng_on_a_pipe_ends_cleanly_when_its_writer_is_killed(tmp_path: Path) -> None:
    """A pcapng capture on a pipe into pcapq watch -: the section, interface and packet blocks as
    they come, and the Interface Statistics Block the writer adds as it exits on SIGTERM (sent to
    it alone, by PID), then the end of the pipe ends the watch: not interrupted."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    writer = _pcapng_writer(port)
    assert writer is not None
    tcpdump = subprocess.Popen(writer, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert tcpdump.stdout is not None
    watch = subprocess.Popen(["pcapq", "watch", "--every", "1", "--format", "json", "-"], stdin=tcpdump.stdout,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tcpdump.stdout.close()
    err = _Stderr(watch)
    try:
        time.sleep(2)
        loopback_exchanges(port, server, 3)
        err.wait_for(f"127.0.0.1:{port}  ")
    finally:
        tcpdump.terminate()
        tcpdump.wait(timeout=10)
        server.close()
    assert watch.stdout is not None
    out = watch.stdout.read()
    watch.wait(timeout=30)
    err.thread.join(timeout=10)
    assert watch.returncode == 0, err.lines
    doc = json.loads(out)
    capture = doc["captures"][0]
    assert capture["format"] == "pcapng" and capture["read_stop"] == "end", capture
    assert doc["summary"]["connections"] == 3
    assert "interrupted" not in doc
    assert not doc["warnings"], doc["warnings"]


# ---- SIGTERM as Ctrl-C ----


def test_r30_sigterm_writes_the_report_with_analyzes_exit_code(tmp_path: Path) -> None:
    packets: list[Captured] = []
    for i in range(4):
        _overflowed(packets, 42000 + i, i * 0.3)
    packets.sort(key=lambda p: p.time)
    capture = write_pcap(tmp_path / "open.pcap", packets).read_bytes()
    watch = subprocess.Popen(["pcapq", "watch", "--no-color", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert watch.stdin is not None
    watch.stdin.write(capture)
    watch.stdin.flush()  # and kept open: a writer that went quiet
    err = _Stderr(watch)
    time.sleep(2)
    watch.send_signal(signal.SIGTERM)
    assert watch.stdout is not None
    out = watch.stdout.read().decode()
    watch.wait(timeout=30)
    watch.stdin.close()
    err.thread.join(timeout=10)
    assert watch.returncode == 1, err.lines
    assert "Accept queue overflow on 10.0.0.2:9000" in out
    assert "Interrupted (SIGTERM) after 28 packets, 2,224 bytes from standard input" in " ".join(out.split()), out
    assert "Traceback" not in "\n".join(err.lines)


# ---- --keep: a window of capture time ----


def _days(path: Path) -> Path:
    """Ten minutes of capture: an accept queue overflow in its first minute (8 connections), then
    one healthy connection every 2 s until the end (fewer segments than the tracker's sweep
    waits for: the window counts what finished when a slice ends)."""
    packets: list[Captured] = []
    for i in range(8):
        _overflowed(packets, 40000 + i, 5 + i * 0.4)
    for i in range(300):
        _healthy(packets, 41000 + i, 2.0 * i)
    packets.sort(key=lambda p: p.time)
    return write_pcap(path, packets)


def test_r30_keep_reports_the_window_and_counts_everything_since_the_start(tmp_path: Path) -> None:
    capture = _days(tmp_path / "days.pcap").read_bytes()
    proc = subprocess.run(["pcapq", "watch", "--keep", "2m", "--format", "json", "-"], input=capture, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    summary, all_time = doc["summary"], doc["summary"]["all_time"]
    assert all_time["connections"] == 308
    assert all_time["outcomes"]["abandoned"] + all_time["outcomes"]["reset_by_client"] >= 8, all_time["outcomes"]
    assert all_time["keep_seconds"] == 120 and all_time["since"] == START
    # The window: 2 min to 2.5 min of the end (598 s), in slices of 30 s; the overflow is out.
    window_s = 598.06 - (all_time["window_start"] - START)
    assert 120 <= window_s <= 150.5, window_s
    assert 60 <= summary["connections"] <= 76, summary["connections"]
    assert sum(summary["outcomes"].values()) == summary["connections"]
    assert summary["outcomes"]["completed"] == summary["connections"]
    assert doc["findings"] == []
    # Without --keep's window (a day), the same capture finds the overflow.
    whole = subprocess.run(["pcapq", "watch", "--keep", "1d", "--format", "json", "-"], input=capture, capture_output=True, timeout=60)
    assert whole.returncode == 1, whole.stderr
    doc = json.loads(whole.stdout)
    assert doc["summary"]["connections"] == doc["summary"]["all_time"]["connections"] == 308
    assert [f["cause"] for f in doc["findings"]] == ["accept_queue_overflow"]


def test_r30_keep_text_report_says_the_totals_since_the_watch_began(tmp_path: Path) -> None:
    capture = _days(tmp_path / "days.pcap").read_bytes()
    proc = subprocess.run(["pcapq", "watch", "--keep", "2m", "--no-color", "-"], input=capture, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.decode().split())  # the report wraps at the console's width
    said = "Since the watch began (9 min 58 s): 308 connections, 8 failed; this report covers the last 2 min"
    assert said in text, text


def test_r30_keep_bad_durations_are_usage_errors() -> None:
    for bad in ("soon", "2x", "1s"):
        proc = subprocess.run(["pcapq", "watch", "--keep", bad, "-"], capture_output=True, timeout=30)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert proc.stderr.decode().count("\n") == 1 and "--keep" in proc.stderr.decode(), proc.stderr
