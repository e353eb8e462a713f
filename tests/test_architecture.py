"""docs/architecture.md's worked example of adding a cause that needs a new fact, followed in a
copy of the tree: the core built from the copy (the test run's `ci` profile, reusing target/'s
compiled dependencies; the copy's own crate unoptimised), the stub and the docs written by their tools, the golden reports
written again by the copy's own golden test, then the files changed are exactly those the page
names, the copy's golden test passes, and the new cause is found."""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

PAGE = REPO / "docs" / "architecture.md"
# A step: the file, where in it (after or before the first line that starts with the text, once
# stripped; nothing: a new file), and the block to put there.
STEP = re.compile(r"<!-- walkthrough: (\S+)(?: (after|before): (.*?))? -->\n```\w*\n(.*?)```", re.DOTALL)


def steps() -> list[tuple[str, str, str, str]]:
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


def apply(tree: Path, path: str, where: str, anchor: str, block: str) -> None:
    target = tree / path
    if not where:
        assert not target.exists(), path
        target.write_text(block)
        return
    lines = target.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(anchor.strip()))
    at += where == "after"
    target.write_text("".join(lines[:at]) + block + "".join(lines[at:]))


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".so")}


def test_the_walkthrough_names_its_steps_and_files():
    assert [(path, where) for path, where, _, _ in steps()] == [
        ("src/detect/facts.rs", "after"), ("src/detect/facts.rs", "before"),
        ("src/pcapq/causes/reset_after_answer.py", ""), ("src/pcapq/causes/registry.py", "after")]
    assert touched() == {"src/detect/facts.rs", "src/pcapq/_core.pyi", "src/pcapq/causes/reset_after_answer.py",
                         "src/pcapq/causes/registry.py", "docs/diagnosis.md", "docs/json.md",
                         "tests/golden/app_reset.json", "tests/golden/keepalive_race.json"}


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo to build the copy's core")
def test_a_new_cause_with_a_new_fact_touches_the_files_the_page_names(tmp_path):
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "images", "figures")
    for name in ("src", "docs", "tools", "examples", "tests", "captures"):
        shutil.copytree(REPO / name, tree / name, ignore=ignore)
    for name in ("Cargo.toml", "Cargo.lock", "pyproject.toml"):
        shutil.copy(REPO / name, tree / name)
    before = tmp_path / "before"
    shutil.copytree(tree, before)
    for path, where, anchor, block in steps():
        apply(tree, path, where, anchor, block)
    # Step 3: the core built from the copy, into the copy's package; then the stub from it. The
    # test run's profile and target directory: only the copy's own crate is compiled again, and
    # without optimisation (the dependencies keep theirs), which takes a third of the time.
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    env = {**os.environ, "CARGO_TARGET_DIR": str(target)}
    build = subprocess.run(["cargo", "build", "--quiet", "--profile", "ci", "--config", "profile.ci.package.pcapq.opt-level=0",
                            "--lib", "--features", "python,pyo3/extension-module"],
                           cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-3000:]
    shutil.copy(target / "ci" / "lib_core.so", tree / "src" / "pcapq" / "_core.abi3.so")
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    for tool in ("tools/stub_literals.py", "docs/causes.py"):
        subprocess.run([sys.executable, str(tree / tool)], check=True, env=env, capture_output=True)
    # Step 5: the golden reports of the captures where the cause is found, written again.
    golden = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_golden.py"]
    refresh = subprocess.run([*golden, "--refresh-golden"], cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    assert refresh.returncode == 0, refresh.stdout[-3000:]
    changed = {f for f in files(tree) if not (before / f).exists() or not filecmp.cmp(tree / f, before / f, shallow=False)}
    assert changed == touched()
    # The copy's golden test passes on what it wrote.
    check = subprocess.run(golden, cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stdout[-3000:]
    # The copy agrees with itself: the stub and the docs with its core and registry.
    for tool in ("tools/stub_literals.py", "docs/causes.py"):
        check = subprocess.run([sys.executable, str(tree / tool), "--check"], env=env, capture_output=True, text=True)
        assert check.returncode == 0, (tool, check.stderr)
    run = subprocess.run([sys.executable, "-c", "import sys; from pcapq.cli import main; sys.argv[0] = 'pcapq'; main()",
                          "analyze", "--format", "json", str(tree / "captures" / "app_reset.pcap")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode in (0, 1), run.stderr
    doc = json.loads(run.stdout)
    causes = {f["cause"] for f in doc["findings"] + doc["minor_observations"]}
    assert "reset_after_answer" in causes, causes
    # The repository itself is untouched.
    assert not (REPO / "src" / "pcapq" / "causes" / "reset_after_answer.py").exists()
