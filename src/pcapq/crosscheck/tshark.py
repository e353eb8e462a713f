"""tshark's two-pass TCP analysis of a capture, one record per TCP frame.

Small captures go through pyshark (tshark's PDML, every field); above PYSHARK_LIMIT packets
tshark is run directly with `-T fields`, which reads the same analysis ~20x faster.
"""

from __future__ import annotations

import asyncio
import gc
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Above this many packets pyshark is too slow: it parses tshark's PDML in Python, about 550
# packets/s measured here (20,000 packets ~40 s), where -T fields reads the same in ~1 s.
PYSHARK_LIMIT = 20_000

PREFS = {
    "tcp.analyze_sequence_numbers": "TRUE",
    "tcp.relative_sequence_numbers": "TRUE",
    "tcp.calculate_timestamps": "TRUE",
}

# The tcp.analysis.* flags (FT_NONE fields) crosscheck reads.
FLAGS = (
    "retransmission",
    "fast_retransmission",
    "spurious_retransmission",
    "out_of_order",
    "duplicate_ack",
    "zero_window",
    "zero_window_probe",
    "zero_window_probe_ack",
    "keep_alive",
    "keep_alive_ack",
    "reused_ports",
    "lost_segment",
    "ack_lost_segment",
    "rto",
    "window_update",
)

SYN, FIN, RST = 0x02, 0x01, 0x04


class TsharkMissing(Exception):
    """tshark is not on PATH."""


class TsharkFailed(Exception):
    """tshark stopped before reading every packet."""


@dataclass(frozen=True)
class Frame:
    """What tshark says about one TCP frame."""

    number: int
    stream: int
    source: str
    seq: int
    ack: int
    flags: int
    window: int
    length: int
    analysis: frozenset[str]
    dup_num: int | None = None
    dup_frame: int | None = None
    rto_frame: int | None = None


@dataclass
class TsharkResult:
    frames: dict[int, Frame]
    method: str  # "pyshark" or "tshark -T fields"
    note: str  # why that method, for the report
    version: str


# TCP segments only: tshark dissects the TCP header an ICMP error quotes, pcapq never counts it.
TCP_ONLY = "tcp && !icmp && !icmpv6"


def find_tshark() -> str:
    path = shutil.which("tshark")
    if path is None:
        raise TsharkMissing
    return path


def tshark_version(tshark: str) -> str:
    out = subprocess.run([tshark, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    m = re.search(r"TShark \(Wireshark\) (\S+?)\.?\s", out + " ")
    return f"tshark {m.group(1)}" if m else "tshark"


def read_tshark(path: str | Path, packets: int, method: str = "auto") -> TsharkResult:
    """tshark's analysis of every TCP frame in `path`, which holds `packets` packets.
    method: "auto" (pyshark up to PYSHARK_LIMIT packets), "pyshark" or "fields"."""
    tshark = find_tshark()
    version = tshark_version(tshark)
    if method == "auto":
        method = "pyshark" if packets <= PYSHARK_LIMIT else "fields"
    if method == "pyshark":
        try:
            import pyshark  # noqa: F401
        except ImportError:
            method = "fields"
            note = "pyshark is not installed: ran tshark -T fields directly"
        else:
            note = f"through pyshark ({packets:,} packets; tshark is run directly above {PYSHARK_LIMIT:,})"
            return TsharkResult(_pyshark_frames(tshark, path, packets), "pyshark", note, version)
    else:
        note = f"{packets:,} packets, too many for pyshark (limit {PYSHARK_LIMIT:,}): ran tshark -T fields directly"
    return TsharkResult(_field_frames(tshark, path), "tshark -T fields", note, version)


def _int(value: str | None) -> int | None:
    return None if value in (None, "") else int(value)


def _pyshark_frames(tshark: str, path: str | Path, packets: int) -> dict[int, Frame]:
    import pyshark

    # One event loop per capture, closed at the end: pyshark's default loop leaks tshark's pipes.
    loop = asyncio.new_event_loop()
    cap = pyshark.FileCapture(
        str(path),
        override_prefs=PREFS,
        tshark_path=tshark,
        custom_parameters=["-2"],
        display_filter=TCP_ONLY,
        eventloop=loop,
    )
    frames: dict[int, Frame] = {}
    seen = 0
    try:
        for packet in cap:
            seen += 1
            tcp = packet.tcp
            ip = packet.ipv6 if hasattr(packet, "ipv6") else packet.ip
            names = tcp.field_names
            frames[int(packet.number)] = Frame(
                number=int(packet.number),
                stream=int(tcp.stream),
                source=f"{ip.src}:{tcp.srcport}",
                seq=int(tcp.seq),
                ack=int(tcp.ack),
                flags=int(tcp.flags, 16),
                window=int(tcp.window_size_value),
                length=int(tcp.len),
                analysis=frozenset(n[len("analysis_") :] for n in names if n.startswith("analysis_")) & set(FLAGS),
                dup_num=_int(tcp.get_field_value("analysis_duplicate_ack_num")),
                dup_frame=_int(tcp.get_field_value("analysis_duplicate_ack_frame")),
                rto_frame=_int(tcp.get_field_value("analysis_rto_frame")),
            )
    finally:
        try:
            cap.close()
        except pyshark.capture.capture.TSharkCrashException:
            # tshark 4.0 with -2 now and then exits 255 after printing every packet; only a
            # short read is a failure (checked against the last frame number below).
            if not frames or max(frames) < _last_tcp_frame(tshark, path):
                raise TsharkFailed("tshark stopped before the end of the capture") from None
        # pyshark's __del__ would close again on a loop that is gone by then.
        cap.close = lambda: None
        del cap
        gc.collect()
        loop.close()
    return frames


def _last_tcp_frame(tshark: str, path: str | Path) -> int:
    out = subprocess.run(
        [tshark, "-r", str(path), "-Y", TCP_ONLY, "-T", "fields", "-e", "frame.number"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    return int(out[-1]) if out else 0


FIELDS = (
    "frame.number",
    "tcp.stream",
    "ip.src",
    "ipv6.src",
    "tcp.srcport",
    "tcp.seq",
    "tcp.ack",
    "tcp.flags",
    "tcp.window_size_value",
    "tcp.len",
    "tcp.analysis.duplicate_ack_num",
    "tcp.analysis.duplicate_ack_frame",
    "tcp.analysis.rto_frame",
    *(f"tcp.analysis.{f}" for f in FLAGS),
)


def _field_frames(tshark: str, path: str | Path) -> dict[int, Frame]:
    cmd = [tshark, "-2", "-n", "-r", str(path), "-Y", TCP_ONLY, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"]
    for name, value in PREFS.items():
        cmd += ["-o", f"{name}:{value}"]
    for f in FIELDS:
        cmd += ["-e", f]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    frames: dict[int, Frame] = {}
    assert proc.stdout is not None
    n_flags = len(FLAGS)
    for line in proc.stdout:
        v = line.rstrip("\n").split("\t")
        if len(v) < len(FIELDS) or not v[1]:
            continue
        analysis = frozenset(FLAGS[i] for i in range(n_flags) if v[13 + i])
        ip = v[2] or v[3]
        frames[int(v[0])] = Frame(
            number=int(v[0]),
            stream=int(v[1]),
            source=f"{ip}:{v[4]}",
            seq=int(v[5]),
            ack=int(v[6] or 0),
            flags=int(v[7], 16),
            window=int(v[8]),
            length=int(v[9] or 0),
            analysis=analysis,
            dup_num=_int(v[10]),
            dup_frame=_int(v[11]),
            rto_frame=_int(v[12]),
        )
    err = proc.stderr.read() if proc.stderr else ""
    rc = proc.wait()
    if rc != 0 and (rc != 255 or not frames or max(frames) < _last_tcp_frame(tshark, path)):
        raise TsharkFailed(f"tshark exited with {rc}: {err.strip()[-300:]}")
    return frames
