"""The hand-written stub src/pcapq/_core.pyi matches the compiled module."""

import subprocess
import sys


def test_stub_matches_runtime():
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "pcapq._core"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
