"""The README's set-up (issue 14, item 9): two commands in a virtual environment, and every tool
the tests use, with what is skipped without it."""

from __future__ import annotations

import re

from conftest import REPO

README = (REPO / "README.md").read_text()
SETUP = README[README.index("## Set-up"):README.index("## Usage")]


def test_r14_setup_is_two_commands_in_a_venv() -> None:
    commands = re.findall(r"```console\n\$ (.+)\n```", SETUP)
    assert len(commands) == 2, commands
    install, tests = commands
    assert install.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install .")
    assert "pcapq analyze captures/" in install
    assert tests.startswith(". .venv/bin/activate && ") and "cargo test" in tests and "pytest" in tests


def test_r14_setup_lists_every_tool_the_tests_use() -> None:
    for tool in ("chromium", "nginx", "php-fpm", "ab", "nft", "tcptrace", "nmap", "tshark", "tcpdump"):
        assert f"`{tool}`" in SETUP, tool
    assert "skipped" in SETUP
