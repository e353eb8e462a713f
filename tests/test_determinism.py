"""The same input gives the same output bytes on every run (text, JSON, Markdown, HTML), and
reading never changes the input.

Python randomises str hashing per process (PYTHONHASHSEED), and hash maps in the core iterate
in an order no one chose: each run here uses a different seed, so an output that followed
either order would differ between runs. Each seed's command lines run in one process
(tests/render.py); one line per format is held to the console script's own output.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from craft import pcap_bytes, pcapng_bytes
from flood import syn_flood
from inprocess import run_main
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


@pytest.fixture(scope="session")
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


SEEDS = (1, 2, 3)

# One worker runs this module, so that its runs for every seed are made once (`outputs`,
# session-scoped: a worker may run other modules' tests between this one's).
pytestmark = pytest.mark.xdist_group("determinism")


def run(args: list[str], seed: int) -> bytes:
    env = os.environ | {"PYTHONHASHSEED": str(seed), "COLUMNS": "120"}
    proc = subprocess.run(["pcapq", "analyze", *args], capture_output=True, timeout=300, env=env)
    assert proc.returncode in (ExitCode.OK, ExitCode.PROBLEMS, ExitCode.DAMAGED), proc.stderr
    return proc.stdout


def command_lines(inputs: dict[str, list[Path]]) -> dict[str, list[str]]:
    """Every command line compared, keyed by input set, format and (shipped) capture."""
    lines = {}
    for name, paths in inputs.items():
        for fmt, args in FORMATS.items():
            if name == "shipped":
                # Each shipped capture on its own: they are not one capture.
                for p in paths:
                    lines[f"{name}/{fmt}/{p.name}"] = ["analyze", *args, str(p)]
            else:
                # The ring's two files as one capture.
                merge = ["--merge"] if len(paths) > 1 else []
                lines[f"{name}/{fmt}"] = ["analyze", *args, *merge, *map(str, paths)]
    return lines


@pytest.fixture(scope="session")
def outputs(inputs) -> list[dict[str, list]]:
    """Per hash seed, every command line's exit code and output digest: each seed's runs in one
    process of its own (tests/render.py), since a seed is chosen when a process starts."""
    lines = json.dumps(command_lines(inputs))
    runs = []
    for seed in SEEDS:
        env = os.environ | {"PYTHONHASHSEED": str(seed), "COLUMNS": "120"}
        proc = subprocess.run([sys.executable, str(Path(__file__).with_name("render.py"))], input=lines,
                              capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout))
    return runs


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("name", ["shipped", "ring", "flood", "hostile_strings"])
def test_same_bytes_every_run(outputs, name, fmt):
    keys = [k for k in outputs[0] if k.split("/")[:2] == [name, fmt]]
    assert keys, "nothing was compared"
    for key in keys:
        code, _digest = outputs[0][key]
        assert code in (ExitCode.OK, ExitCode.PROBLEMS, ExitCode.DAMAGED), key
    differ = [k for k in keys if any(run[k] != outputs[0][k] for run in outputs[1:])]
    assert not differ, f"output differs between hash seeds: {differ}"


def test_the_in_process_run_is_the_console_script_s_output(inputs, outputs):
    """What tests/render.py digests is what `pcapq` itself writes, for one line per format."""
    lines = command_lines(inputs)
    for fmt in FORMATS:
        key = f"ring/{fmt}"
        env = os.environ | {"PYTHONHASHSEED": str(SEEDS[0]), "COLUMNS": "120"}
        proc = subprocess.run(["pcapq", *lines[key]], capture_output=True, timeout=300, env=env)
        assert proc.stdout and [proc.returncode, hashlib.sha256(proc.stdout).hexdigest()] == outputs[0][key], key


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
        for command in (args + ["--merge"] + paths, args + [str(tmp_path / FIXTURE.name)], args + [str(tmp_path / "flood.pcap")]):
            code, out, err = run_main("analyze", *command)
            assert code in (ExitCode.OK, ExitCode.PROBLEMS, ExitCode.DAMAGED) and out, err
    with open(tmp_path / "many.pcapng", "rb") as stdin:
        proc = subprocess.run(["pcapq", "analyze", "-"], stdin=stdin, capture_output=True, timeout=120)
    assert proc.returncode in (ExitCode.OK, ExitCode.PROBLEMS), proc.stderr
    assert _state(tmp_path) == before
