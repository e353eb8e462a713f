"""`pcapq watch -` (issue 14, item 1, the live mode): lines while a capture arrives, an episode
said as it opens and as it recovers, and on Ctrl-C (SIGINT to the pipeline's process group) or
the end of the input the full report with analyze's exit code."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO
from craft import Captured, Conversation, write_pcap

import pcapq._core as core
from pcapq.lab.namespaces import unavailable_reason
from pcapq.causes.registry import CAUSES
from pcapq.watch import SIGN_WORDS, Watcher, look_lines, signs_of_causes

# Replays a pcap file's records with their capture-time gaps divided by SPEED, like a live
# tcpdump -U; touches DONE after the last record, then stays silent until SIGINT.
REPLAY = textwrap.dedent(
    """
    import os, signal, struct, sys, time
    capture, done, speed = sys.argv[1], sys.argv[2], float(sys.argv[3])
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    data = open(capture, "rb").read()
    os.write(1, data[:24])
    at, previous = 24, None
    while at < len(data):
        seconds, fraction, caplen = struct.unpack("<III", data[at:at + 12])
        t = seconds + fraction / 1e6
        if previous is not None and t > previous:
            time.sleep((t - previous) / speed)
        previous = t
        os.write(1, data[at:at + 16 + caplen])
        at += 16 + caplen
    open(done, "w").close()
    for _ in range(600):
        time.sleep(0.1)
    """
)

SERVER = ("10.0.0.2", 9000)


def _healthy(packets: list[Captured], port: int, t: float) -> None:
    c = Conversation(client=("10.0.0.1", port), server=SERVER, start=1_700_000_000.0, packets=packets, new_ip_ids=True)
    c.handshake(t)
    c.send("client", t + 0.001, b"GET / HTTP/1.1\r\n\r\n")
    c.send("server", t + 0.05, b"HTTP/1.1 200 OK\r\n\r\n")
    c.close(t + 0.06)


def _overflowed(packets: list[Captured], port: int, t: float) -> None:
    """The server's kernel drops the handshake's final ACK (accept queue full): the SYN-ACK comes
    again after it, the request is re-sent and never acknowledged, the client gives up."""
    c = Conversation(client=("10.0.0.1", port), server=SERVER, start=1_700_000_000.0, packets=packets, new_ip_ids=True)
    c.handshake(t)
    c.send("client", t + 0.001, b"GET / HTTP/1.1\r\n\r\n")
    c.resend("server", t + 1.0, index=0)
    c.resend("client", t + 1.2)
    c.rst("client", t + 2.5)


def episode_capture(path: Path) -> Path:
    """Healthy from 0 to 4 s, an accept queue overflow in the connections begun from 5 to 7.8 s
    (signs from 6 s, the first SYN-ACK again, to 9 s, the last request re-sent), healthy again
    from 11 to 23.5 s: the episode opens at 6 s and recovers at 14 s, 5 s after its last sign."""
    packets: list[Captured] = []
    port = 41000
    for i in range(8):
        _healthy(packets, port := port + 1, i * 0.5)
    for i in range(8):
        _overflowed(packets, port := port + 1, 5 + i * 0.4)
    for i in range(26):
        _healthy(packets, port := port + 1, 11 + i * 0.5)
    packets.sort(key=lambda p: p.time)
    return write_pcap(path, packets)


def _watch(tmp_path: Path, capture: Path, speed: float, *args: str) -> tuple[subprocess.Popen, subprocess.Popen, Path]:
    """`replay CAPTURE | pcapq watch ARGS -` in a process group of their own."""
    script = tmp_path / "replay.py"
    script.write_text(REPLAY)
    done = tmp_path / "done"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    writer = subprocess.Popen([sys.executable, str(script), str(capture), str(done), str(speed)], stdout=subprocess.PIPE, process_group=0)
    assert writer.stdout is not None
    reader = subprocess.Popen(
        ["pcapq", "watch", *args, "-"], stdin=writer.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        process_group=writer.pid, env=env,
    )
    writer.stdout.close()
    return writer, reader, done


class _Lines:
    """Standard error of a running pcapq, line by line, each with when it arrived and whether
    the writer had finished by then."""

    def __init__(self, reader: subprocess.Popen, done: Path) -> None:
        self.seen: list[tuple[str, bool]] = []
        assert reader.stderr is not None
        stream = reader.stderr

        def follow() -> None:
            for raw in stream:
                self.seen.append((raw.decode().rstrip("\n"), done.exists()))

        self.thread = threading.Thread(target=follow, daemon=True)
        self.thread.start()

    def wait_for(self, text: str, timeout: float = 60) -> tuple[str, bool]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line, finished in list(self.seen):
                if text in line:
                    return line, finished
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} in {[line for line, _ in self.seen]}")


def _interrupt(writer: subprocess.Popen, reader: subprocess.Popen, lines: _Lines) -> tuple[int, str]:
    os.killpg(writer.pid, signal.SIGINT)
    try:
        assert reader.stdout is not None
        out = reader.stdout.read()
        reader.wait(timeout=30)
    finally:
        writer.kill()
        writer.wait()
    lines.thread.join(timeout=10)
    return reader.returncode, out.decode()


def test_r14_watch_says_an_episode_as_it_opens_and_recovers_then_reports_on_ctrl_c(tmp_path: Path) -> None:
    capture = episode_capture(tmp_path / "episode.pcap")
    # 23.6 s of capture in about 12 s: the recovery (at 14 s) is said 4 s or more before the end.
    writer, reader, done = _watch(tmp_path, capture, 2.0, "--every", "1", "--no-color")
    lines = _Lines(reader, done)
    opened, finished = lines.wait_for("episode opened")
    assert not finished, "the episode was said only after the whole capture was written"
    assert opened.split()[1] == "10.0.0.2:9000"
    assert "SYN-ACKs re-sent after the client's ACK" in opened and "(signs of an accept queue overflow)" in opened
    recovered, finished = lines.wait_for("recovered after")
    assert not finished
    # Signs from 6 s to 9 s, in eight connections; said at 14 s (22:13:34).
    assert recovered == "22:13:34  10.0.0.2:9000  recovered after 3.0 s; 8 connections affected", recovered
    interval, finished = lines.wait_for(" failed")
    assert not finished and "10.0.0.2:9000" in interval
    while not done.exists():
        time.sleep(0.05)
    time.sleep(1.5)
    code, out = _interrupt(writer, reader, lines)
    assert code == 1, [line for line, _ in lines.seen]
    assert "Interrupted (Ctrl-C)" in out
    assert "Accept queue overflow on 10.0.0.2:9000" in out
    err = "\n".join(line for line, _ in lines.seen)
    assert "Traceback" not in err
    assert "episode still open" not in err


def test_r14_watch_json_to_stdout_stays_parseable_and_end_of_input_is_not_interrupted(tmp_path: Path) -> None:
    capture = episode_capture(tmp_path / "episode.pcap")
    proc = subprocess.run(["pcapq", "watch", "--every", "0.5", "--format", "json", "-"], input=capture.read_bytes(), capture_output=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert "interrupted" not in doc
    assert [f["cause"] for f in doc["findings"]] == ["accept_queue_overflow"]
    err = proc.stderr.decode()
    # Read at once, the whole capture falls in one interval: the episode opens and recovers in it.
    assert "10.0.0.2:9000  episode opened: " in err and "recovered after 3.0 s; 8 connections affected" in err, err


def test_r14_watch_says_an_episode_still_open_at_the_end(tmp_path: Path) -> None:
    packets: list[Captured] = []
    for i in range(4):
        _overflowed(packets, 42000 + i, i * 0.3)
    packets.sort(key=lambda p: p.time)
    capture = write_pcap(tmp_path / "open.pcap", packets)
    out = tmp_path / "report.txt"
    proc = subprocess.run(["pcapq", "watch", "-o", str(out), "-"], input=capture.read_bytes(), capture_output=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr.decode()
    assert "10.0.0.2:9000  episode still open at the end of the input: since " in err, err
    assert "4 connections affected so far" in err
    assert "Accept queue overflow" in out.read_text()


def test_r14_watch_takes_only_standard_input() -> None:
    proc = subprocess.run(["pcapq", "watch", "dump.pcap"], capture_output=True, timeout=30)
    assert proc.returncode == 2
    assert b"watch reads standard input" in proc.stderr


def loopback_exchanges(port: int, server: socket.socket, n: int) -> None:
    """`n` request-answer exchanges on loopback with `server` (bounded)."""
    for _ in range(n):
        client = socket.create_connection(("127.0.0.1", port), timeout=5)
        conn, _ = server.accept()
        client.sendall(b"ping")
        conn.sendall(conn.recv(4))
        client.recv(4)
        client.close()
        conn.close()


# ---- the words, without a pipeline ----


def test_every_live_sign_has_words_and_cause_signs_are_live_signs() -> None:
    assert list(SIGN_WORDS) == list(core.VOCABULARY["live_signs"])
    for cause in CAUSES.values():
        assert set(cause.live_signs) <= set(core.VOCABULARY["live_signs"]), cause.slug
    assert signs_of_causes(["syn_retransmitted"]) == ""
    assert signs_of_causes(["syn_retransmitted", "final_ack_dropped"]) == " (signs of an accept queue overflow)"


def test_look_lines_say_a_quiet_interval_and_count_in_the_singular() -> None:
    quiet = {"servers": [], "more_servers": 0, "events": [], "events_dropped": 0, "open": 1, "episodes_forgotten": 0,
             "latest_time": 1_700_000_005.0, "segments": 1234}
    assert look_lines(quiet, 5.0) == ["22:13:25  nothing new in the last 5.0 s (1,234 TCP segments so far; 1 episode open)"]
    busy = dict(quiet, servers=[{"server": "10.0.0.2:9000", "connections": 1, "answered": 0, "failed": 1, "signs": {"syn_retransmitted": 1}}])
    assert look_lines(busy, 5.0) == ["22:13:25  10.0.0.2:9000  1 connection, 0 answered, 1 failed; 1 SYN re-sent"]
    forgetting = dict(busy, episodes_forgotten=3)
    assert look_lines(forgetting, 5.0)[0] == "22:13:25  3 open episodes of listeners that never answered again forgotten (too many open at once)"


def test_watcher_looks_only_every_so_often() -> None:
    now = [0.0]
    looks: list[bool] = []

    class Live:
        def look(self, max_servers: int = 8, end: bool = False) -> dict:
            looks.append(end)
            return {"servers": [], "more_servers": 0, "events": [], "events_dropped": 0, "open": 0, "episodes_forgotten": 0,
                    "latest_time": None, "segments": 1}

    w = Watcher(5.0, clock=lambda: now[0])
    said: list[str] = []
    for t in (1.0, 4.9, 5.0, 6.0, 10.1):
        now[0] = t
        w.tick(Live(), said.append)  # type: ignore[arg-type]
    assert looks == [False, False]
    w.end(Live(), said.append)  # type: ignore[arg-type]
    assert looks == [False, False, True] and len(said) == 3


@pytest.mark.kernel
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("tcpdump") is None, reason="needs root and tcpdump")
def test_r14_watch_on_tcpdump_says_connections_while_they_happen(tmp_path: Path) -> None:
    """tcpdump -U on loopback piped into pcapq watch: connections made after the pipeline
    started are counted in a line before Ctrl-C, and Ctrl-C gives the report."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    tcpdump = subprocess.Popen(["tcpdump", "-i", "lo", "-n", "-U", "-w", "-", f"tcp port {port}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, process_group=0)
    assert tcpdump.stdout is not None
    reader = subprocess.Popen(["pcapq", "watch", "--every", "1", "-"], stdin=tcpdump.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=tcpdump.pid)
    tcpdump.stdout.close()
    done = tmp_path / "never"
    lines = _Lines(reader, done)
    time.sleep(2)  # tcpdump is capturing
    loopback_exchanges(port, server, 3)
    lines.wait_for(f"127.0.0.1:{port}  ", timeout=30)
    time.sleep(1.5)  # the next interval's line, should the three have straddled two
    code, out = _interrupt(tcpdump, reader, lines)
    said = [line.split("  ")[2] for line, _ in lines.seen if f"127.0.0.1:{port}  " in line]
    assert sum(int(s.split()[0]) for s in said) == 3, said
    server.close()
    assert code == 0, [line for line, _ in lines.seen]
    assert "Interrupted (Ctrl-C)" in out


LAB_NEEDS = ("ip", "tcpdump", "tc", "nstat")


@pytest.mark.kernel
@pytest.mark.skipif(unavailable_reason(LAB_NEEDS) is not None, reason=str(unavailable_reason(LAB_NEEDS)))
def test_r14_watch_follows_the_accept_queue_overflow_lab_as_it_runs(tmp_path: Path) -> None:
    """The lab's accept_queue_overflow with its tcpdump (-U) writing into a pipe that pcapq watch
    reads: the episode is said while the lab runs, the report when tcpdump ends the input."""
    from pcapq.lab.runner import run_scenario

    fifo = tmp_path / "aq.pcap"
    os.mkfifo(fifo)
    # Opened without waiting for a writer, then made blocking for pcapq; a writer of our own
    # holds the pipe open (a pipe without writers reads as ended) until tcpdump has it too.
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    holder = [os.open(fifo, os.O_WRONLY)]
    reader = subprocess.Popen(["pcapq", "watch", "--every", "1", "--format", "json", "-"], stdin=fd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(fd)
    lab_done = tmp_path / "lab_done"
    lines = _Lines(reader, lab_done)

    def say(line: str) -> None:
        # Said once the lab's tcpdump is capturing (it opened the pipe before).
        if line.startswith("client load") and holder:
            os.close(holder.pop())

    try:
        result = run_scenario("accept_queue_overflow", fifo, say)
    finally:
        lab_done.touch()
        for held in holder:
            os.close(held)
    out, _ = reader.communicate(timeout=60)
    lines.thread.join(timeout=10)
    said = [line for line, _ in lines.seen]
    assert not result.problems, result.problems
    opened, finished = lines.wait_for("10.231.1.2:9000  episode opened: ", timeout=1)
    assert not finished, "the episode was said only once the lab was over"
    # The queue's own sign, in the opening or in a line of its own while the lab ran.
    sign, finished = lines.wait_for("SYN-ACKs re-sent after the client's ACK (signs of an accept queue overflow)", timeout=1)
    assert not finished and "10.231.1.2:9000  episode " in sign, said
    assert reader.returncode == 1, said
    assert [f["cause"] for f in json.loads(out)["findings"]] == ["accept_queue_overflow"]
