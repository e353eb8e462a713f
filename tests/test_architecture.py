"""docs/architecture.md's worked example of adding a cause, followed in a copy of the tree: the
files it names are the only ones that change, and the new cause is found."""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

PAGE = REPO / "docs" / "architecture.md"
STEP = re.compile(r"<!-- walkthrough: (\S+) -->\n```python\n(.*?)```", re.DOTALL)


def steps() -> list[tuple[str, str]]:
    return STEP.findall(PAGE.read_text())


def touched() -> set[str]:
    """The files the page says a new cause touches: the list after its marker."""
    text = PAGE.read_text().split("<!-- walkthrough: touched -->\n", 1)[1]
    items = []
    for line in text.splitlines():
        if not line.startswith("- "):
            break
        items.append(line[2:].split("`")[1])
    return set(items)


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_the_walkthrough_names_its_steps_and_files():
    assert [path for path, _ in steps()] == ["src/pcapq/causes/reset_after_answer.py", "src/pcapq/causes/registry.py"]
    assert touched() == {"src/pcapq/causes/reset_after_answer.py", "src/pcapq/causes/registry.py",
                         "docs/diagnosis.md", "docs/json.md"}


def test_a_new_cause_is_one_module_plus_one_line(tmp_path):
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "images", "figures")
    shutil.copytree(REPO / "src" / "pcapq", tree / "src" / "pcapq", ignore=ignore)
    shutil.copytree(REPO / "docs", tree / "docs", ignore=ignore)
    before = tmp_path / "before"
    shutil.copytree(tree, before)
    for path, code in steps():
        target = tree / path
        if target.exists():
            # A line into a list: the registry's NAMES.
            text = target.read_text()
            assert "NAMES = [\n" in text
            target.write_text(text.replace("NAMES = [\n", "NAMES = [\n" + code, 1))
        else:
            target.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    subprocess.run([sys.executable, str(tree / "docs" / "causes.py")], check=True, env=env, capture_output=True)
    changed = {f for f in files(tree) if not (before / f).exists() or not filecmp.cmp(tree / f, before / f, shallow=False)}
    assert changed == touched()
    # The copy checks itself: its docs agree with its registry, and nothing outside the causes
    # names the new cause.
    check = subprocess.run([sys.executable, str(tree / "docs" / "causes.py"), "--check"], env=env, capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr
    run = subprocess.run([sys.executable, "-c", "import sys; from pcapq.cli import main; sys.argv[0] = 'pcapq'; main()",
                          "analyze", "--format", "json", str(REPO / "captures" / "app_reset.pcap")],
                         env=env, capture_output=True, text=True)
    assert run.returncode in (0, 1), run.stderr
    doc = json.loads(run.stdout)
    causes = {f["cause"] for f in doc["findings"] + doc["minor_observations"]}
    assert "reset_after_answer" in causes, causes
    # The tree itself does not have it.
    assert not (REPO / "src" / "pcapq" / "causes" / "reset_after_answer.py").exists()
