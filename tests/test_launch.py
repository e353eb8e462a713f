"""The console script's way in (pcapq.launch): `pcapq analyze FILE...` without click must do what
click would have done with the same command line, and must not import click."""

from __future__ import annotations

import dataclasses
import gc
import subprocess
import sys

import pytest
from conftest import REPO

from pcapq import cli
from pcapq.launch import plain_analyze
from pcapq.commands.request import AnalyzeRequest


def analyze_defaults() -> dict:
    """AnalyzeRequest's defaults: those of analyze's options (`files` and watch's aside)."""
    return {f.name: f.default for f in dataclasses.fields(AnalyzeRequest) if f.name not in ("files", "watch")}


def click_params(args: list[str]) -> dict:
    """What click makes of `pcapq analyze ARGS`: the analyze function's arguments."""
    ctx = cli.analyze.make_context("analyze", list(args))
    return dict(ctx.params)


@pytest.mark.parametrize(
    "files",
    [["dump.pcap"], ["-"], ["a.pcap", "b.pcap.gz", "ring/"], ["ring/*.pcap*"], ["a=b"], [""], ["dump.pcap", "-"]],
)
def test_plain_analyze_is_what_click_makes_of_it(files: list[str]) -> None:
    assert plain_analyze(["analyze", *files]) == tuple(files)
    params = click_params(files)
    assert params.pop("files") == tuple(files)
    # Every option of analyze at its default: one added to analyze must be added to the defaults.
    assert params == analyze_defaults()


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["analyze"],
        ["--version"],
        ["-h"],
        ["analyze", "--help"],
        ["analyze", "-h"],
        ["analyze", "dump.pcap", "--format", "json"],
        ["analyze", "--", "dump.pcap"],
        ["analyze", "-o", "out.txt", "dump.pcap"],
        ["analyze", "dump.pcap", "-j2"],
        ["timeline", "dump.pcap"],
        ["analyse", "dump.pcap"],
    ],
)
def test_other_command_lines_go_through_click(args: list[str]) -> None:
    assert plain_analyze(args) is None


IMPORTED = """
import os, sys
sys.argv = ["pcapq", *sys.argv[1:]]
sys.stdout = open(os.devnull, "w")
from pcapq.launch import main
try:
    main()
except SystemExit as e:
    code = e.code
sys.stdout = sys.__stdout__
print(code, "click" in sys.modules)
"""


def imports_click(*args: str) -> tuple[str, str]:
    res = subprocess.run([sys.executable, "-c", IMPORTED, *args], capture_output=True, text=True, cwd=REPO, check=True)
    code, imported = res.stdout.split()
    return code, imported


def test_plain_analyze_runs_without_click() -> None:
    assert imports_click("analyze", "captures/healthy.pcap") == ("0", "False")
    assert imports_click("analyze", "captures/packet_loss.pcap") == ("1", "False")


def test_options_go_through_click() -> None:
    assert imports_click("analyze", "--format", "markdown", "captures/healthy.pcap") == ("0", "True")


@pytest.mark.parametrize("error", [KeyboardInterrupt, EOFError])
@pytest.mark.parametrize("args", [["analyze", "dump.pcap"], ["analyze", "--format", "text", "dump.pcap"]])
def test_interrupted_as_click_does(monkeypatch, capsys, args: list[str], error: type) -> None:
    """Ctrl-C in the middle of `pcapq analyze`: exit 130 after a blank line, with or without click."""
    import pcapq.commands.analyze
    from pcapq import launch

    def interrupted(*_args, **_kwargs):
        raise error

    monkeypatch.setattr(pcapq.commands.analyze, "run", interrupted)
    monkeypatch.setattr(sys, "argv", ["pcapq", *args])
    monkeypatch.setattr(gc, "disable", lambda: None)  # the collector stays on in this test process
    with pytest.raises(SystemExit) as e:
        launch.main()
    assert e.value.code == 130
    assert capsys.readouterr().err == "\n"
