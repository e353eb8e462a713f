"""The hand-written stub src/pcapq/_core.pyi matches the compiled module."""

import subprocess
import sys
from pathlib import Path

ALLOWLIST = Path(__file__).with_name("stubtest_allowlist.txt")


def test_stub_matches_runtime():
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "pcapq._core", "--allowlist", str(ALLOWLIST)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
