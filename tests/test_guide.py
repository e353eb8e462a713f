"""docs/guide.md: its figures are pcapq's current output on the catalog (docs/figures.py), and
every capture it names exists."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO


def test_figures_are_current() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "docs" / "figures.py"), "--check"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


def test_every_capture_named_exists() -> None:
    text = (REPO / "docs" / "guide.md").read_text()
    named = set(re.findall(r"((?:captures/)?(?:crafted/)?\w+\.pcap)\b", text))
    assert named
    for name in named:
        path = REPO / name if name.startswith("captures/") else REPO / "captures" / name
        if name in {"aq.pcap", "syn.pcap", "abort.pcap", "ng.pcap", "dump.pcap"}:
            continue  # pcapq lab outputs in the examples
        assert path.exists(), name
