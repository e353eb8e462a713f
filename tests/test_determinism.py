"""The same input gives the same output bytes on every run (text, JSON, Markdown, HTML), and
reading never changes the input.

Python randomises str hashing per process (PYTHONHASHSEED), and hash maps in the core iterate
in an order no one chose: each run here uses a different seed, so an output that followed
either order would differ between runs.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from craft import pcap_bytes, pcapng_bytes
from flood import syn_flood
from test_cli import conversations, troubled
from test_report_safety import FIXTURE

from pcapq.exitcodes import ExitCode

FORMATS = {
    "text": ["--format", "text", "--no-color"],
    "json": ["--format", "json"],
    "json_pretty": ["--format", "json", "--pretty"],
    "markdown": ["--format", "markdown"],
    "html": ["--format", "html"],
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, list[Path]]:
    d = tmp_path_factory.mktemp("determinism")
    mixed = d / "mixed.pcap.gz"
    mixed.write_bytes(gzip.compress(pcap_bytes(troubled() + conversations(40, spacing=0.05, first_port=41000)), mtime=0))
    ng = d / "many.pcapng"
    ng.write_bytes(pcapng_bytes(conversations(300, spacing=0.001)))
    flood = syn_flood(d / "flood.pcap", 5000, sources=300)
    shipped = sorted((REPO / "captures").glob("*.pcap"))
    return {
        "shipped": shipped,
        "ring": [mixed, ng],
        "flood": [flood],
        "hostile_strings": [FIXTURE],
    }


def run(args: list[str], seed: int) -> bytes:
    env = os.environ | {"PYTHONHASHSEED": str(seed), "COLUMNS": "120"}
    proc = subprocess.run(["pcapq", "analyze", *args], capture_output=True, timeout=300, env=env)
    assert proc.returncode in (ExitCode.OK, ExitCode.PROBLEMS, ExitCode.DAMAGED), proc.stderr
    return proc.stdout


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("name", ["shipped", "ring", "flood", "hostile_strings"])
def test_same_bytes_every_run(inputs, name, fmt):
    paths = [str(p) for p in inputs[name]]
    if name == "shipped":
        # Each shipped capture on its own: they are not one capture.
        # Two seeds: an output that followed a hash order would differ between them (a third run
        # costs a minute of CI over the shipped captures and adds nothing).
        runs = [[run(FORMATS[fmt] + [p], seed) for p in paths] for seed in (1, 2)]
    else:
        # The ring's two files as one capture.
        merge = ["--merge"] if len(paths) > 1 else []
        runs = [run(FORMATS[fmt] + merge + paths, seed) for seed in (1, 2, 3)]
    assert runs[0], "no output: nothing was compared"
    assert all(r == runs[0] for r in runs[1:])


def test_output_file_is_the_same_bytes_as_stdout_every_run(inputs, tmp_path):
    paths = [str(p) for p in inputs["ring"]]
    written = []
    for seed in (1, 2):
        out = tmp_path / f"report-{seed}.json"
        env = os.environ | {"PYTHONHASHSEED": str(seed)}
        proc = subprocess.run(["pcapq", "analyze", "--format", "json", "--merge", "-o", str(out), *paths], capture_output=True, timeout=300, env=env)
        assert proc.returncode in (ExitCode.OK, ExitCode.PROBLEMS), proc.stderr
        written.append(out.read_bytes())
    assert written[0] == written[1] == run(FORMATS["json"] + ["--merge"] + paths, 3)


def _state(directory: Path) -> dict[str, tuple[str, int, int]]:
    """Every file in `directory`: digest, mtime and mode."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns, p.stat().st_mode)
        for p in sorted(directory.iterdir())
    }


def test_analysing_changes_nothing_in_the_inputs_directory(inputs, tmp_path):
    # Read-only inputs too: pcapq never needs to write next to them.
    for p in inputs["ring"] + inputs["flood"] + [FIXTURE]:
        shutil.copy2(p, tmp_path / p.name)
    (tmp_path / FIXTURE.name).chmod(0o444)
    before = _state(tmp_path)
    paths = [str(tmp_path / p.name) for p in inputs["ring"]]
    for args in FORMATS.values():
        run(args + ["--merge"] + paths, 1)
        run(args + [str(tmp_path / FIXTURE.name)], 1)
        run(args + [str(tmp_path / "flood.pcap")], 1)
    with open(tmp_path / "many.pcapng", "rb") as stdin:
        proc = subprocess.run(["pcapq", "analyze", "-"], stdin=stdin, capture_output=True, timeout=120)
    assert proc.returncode in (ExitCode.OK, ExitCode.PROBLEMS), proc.stderr
    assert _state(tmp_path) == before
