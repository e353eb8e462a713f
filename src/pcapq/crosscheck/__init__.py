"""`pcapq crosscheck`: pcapq's per-frame labels against tshark's two-pass TCP analysis."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

from pcapq import _core
from pcapq.crosscheck import tshark
from pcapq.crosscheck.compare import Comparison, compare
from pcapq.crosscheck.tshark import TsharkFailed, TsharkMissing

__all__ = ["Crosscheck", "TsharkFailed", "TsharkMissing", "crosscheck"]


@dataclass
class Crosscheck:
    path: str
    packets: int
    tcp_segments: int
    tshark: tshark.TsharkResult
    comparison: Comparison

    def to_json(self) -> dict[str, object]:
        return {
            "schema": "pcapq.crosscheck",
            "schema_version": 1,
            "file": self.path,
            "packets": self.packets,
            "tshark": {"version": self.tshark.version, "method": self.tshark.method, "note": self.tshark.note},
            "frames_compared": len({r.frame for r in self.comparison.rows}),
            **self.comparison.to_json(),
        }


def crosscheck(path: str, method: str = "auto") -> Crosscheck:
    """Runs pcapq and tshark on `path` and lines their labels up. Raises _core.CaptureError,
    TsharkMissing, TsharkFailed."""
    tshark.find_tshark()  # before the analysis: say so at once when it is missing
    result = _core.analyze([path])
    summary = result.summary()
    buf = io.StringIO()
    result.write_json(buf)
    doc = json.loads(buf.getvalue())
    # Looked up on the module, so tests can put a doctored tshark result in.
    ts = tshark.read_tshark(path, summary["packets"], method)
    return Crosscheck(path, summary["packets"], summary["tcp_segments"], ts, compare(doc, ts.frames))
