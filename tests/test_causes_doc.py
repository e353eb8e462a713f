"""docs/diagnosis.md's table of causes is the registry's (docs/causes.py)."""

import subprocess
import sys

from conftest import REPO


def test_causes_table_is_current() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "docs" / "causes.py"), "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
