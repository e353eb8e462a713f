"""Strings from the capture are shown as text, never run or rendered as markup.

tests/data/hostile_strings.pcapng carries script tags, HTML attribute breakouts, Markdown table
pipes and backticks, rich markup, terminal escape sequences and a right-to-left override in its
section comment, hardware/OS/application strings, interface name and description, interface
comment and packet comments. It is made by `hostile_pcapng()` below (a test checks the file is
exactly that), so it can be read and changed here.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
from pathlib import Path

import pytest
from craft import LINKTYPE, _block, _option, epb
from test_cli import assert_no_crash, conversations

from pcapq.exitcodes import ExitCode

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "hostile_strings.pcapng"

SCRIPT = "<script>document.title='pwned';console.log('pwned')</script>"
CLOSE_SCRIPT = "</script><script>document.title='pwned'</script>"
ATTRIBUTE = "\"><img src=x onerror=\"document.title='pwned'\">"
MARKDOWN = "| a | b |\n|---|---|\n`code` **bold** [link](javascript:alert(1)) <b>raw</b>"
RICH = "[bold red]big[/] [link=https://example.com]click[/link]"
TERMINAL = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\r\nnext line"
BIDI = "invoice\u202etxt.exe"
LONG = "A" * 5000


def _shb(options: list[tuple[int, str]]) -> bytes:
    opts = b"".join(_option("<", code, text.encode()) for code, text in options) + _option("<", 0, b"")
    return _block("<", 0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + opts)


def _idb(options: list[tuple[int, str]]) -> bytes:
    opts = b"".join(_option("<", code, text.encode()) for code, text in options) + _option("<", 0, b"")
    return _block("<", 1, struct.pack("<HHI", LINKTYPE["ethernet"], 0, 0) + opts)


def _with_comment(block: bytes, comment: str) -> bytes:
    """An EPB with an opt_comment added."""
    body = block[8:-4] + _option("<", 1, comment.encode()) + _option("<", 0, b"")
    return _block("<", 6, body)


def hostile_pcapng() -> bytes:
    packets = conversations(2)
    shb = _shb([(1, SCRIPT), (1, MARKDOWN), (2, ATTRIBUTE), (3, RICH), (4, TERMINAL)])
    idb = _idb([(2, CLOSE_SCRIPT), (3, BIDI), (1, LONG)])
    blocks = [epb(p) for p in packets]
    for i, comment in ((0, SCRIPT), (1, ATTRIBUTE), (2, MARKDOWN), (3, TERMINAL), (4, RICH)):
        blocks[i] = _with_comment(blocks[i], comment)
    return shb + idb + b"".join(blocks)


def test_the_fixture_is_what_the_generator_makes():
    assert FIXTURE.read_bytes() == hostile_pcapng(), "regenerate: python -c 'import test_report_safety as t; t.FIXTURE.write_bytes(t.hostile_pcapng())'"


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(["pcapq", *args], capture_output=True, timeout=120, env=os.environ | (env or {}))
    assert_no_crash(proc)
    assert proc.returncode == ExitCode.OK, proc.stderr
    return proc


def test_json_carries_the_strings_cleaned_and_capped():
    doc = json.loads(run("analyze", "--format", "json", str(FIXTURE)).stdout)
    notes = doc["captures"][0]["pcapng"]
    assert notes["hardware"] == ATTRIBUTE
    assert notes["os"] == RICH
    # Escapes and line breaks are gone; what is left is plain characters.
    assert notes["application"] == "]0;pwned [2J [31mred next line"
    assert notes["comments"][:2] == [SCRIPT, "| a | b | |---|---| `code` **bold** [link](javascript:alert(1)) <b>raw</b>"]
    assert notes["comments"][2] == "A" * 256 + "…"
    (iface,) = notes["interfaces"]
    assert iface == {"name": CLOSE_SCRIPT, "description": "invoice txt.exe", "link_type": "ETHERNET"}
    assert [p["frame"] for p in notes["packet_comments"]] == [1, 2, 3, 4, 5]
    assert notes["packet_comments_total"] == 5
    text = json.dumps(notes, ensure_ascii=False)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text


def test_classic_pcap_has_no_pcapng_notes(tmp_path):
    from craft import pcap_bytes

    path = tmp_path / "plain.pcap"
    path.write_bytes(pcap_bytes(conversations(1)))
    assert json.loads(run("analyze", "--format", "json", str(path)).stdout)["captures"][0]["pcapng"] is None


def test_terminal_shows_markup_as_text_without_colour():
    out = run("analyze", "--no-color", str(FIXTURE), env={"COLUMNS": "400"}).stdout.decode()
    assert "\x1b" not in out
    assert "Capture notes" in out
    # rich markup from the file is printed, not interpreted: the brackets are still there.
    assert "[bold red]big[/] [link=https://example.com]click[/link]" in out
    assert SCRIPT in out and CLOSE_SCRIPT in out
    assert "interface  " in out and "invoice txt.exe (ETHERNET)" in out


def test_terminal_with_colour_has_only_colour_sequences():
    # FORCE_COLOR makes rich colour a pipe as it would a terminal.
    out = run("analyze", str(FIXTURE), env={"FORCE_COLOR": "1", "COLUMNS": "400"}).stdout.decode()
    sequences = set(re.findall(r"\x1b[^a-zA-Z]*[a-zA-Z]?", out))
    assert sequences, "no colour at all: the test would prove nothing"
    # Only SGR (colour and style) sequences: no OSC title set, no screen clear, no hyperlink.
    assert all(re.fullmatch(r"\x1b\[[0-9;]*m", s) for s in sequences), sequences
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "[bold red]big[/]" in plain and "]8;" not in out


def test_a_file_name_with_markup_is_shown_as_it_is(tmp_path):
    from craft import pcap_bytes

    path = tmp_path / "[bold]dump[red].pcap"
    path.write_bytes(pcap_bytes(conversations(1)))
    out = run("analyze", "--no-color", str(path), env={"COLUMNS": "400"}).stdout.decode()
    assert "[bold]dump[red].pcap" in out


@pytest.mark.parametrize("count", [40])
def test_many_packet_comments_are_capped_and_counted(tmp_path, count):
    packets = conversations(4)
    blocks = [_with_comment(epb(p), f"comment {i}") for i, p in enumerate(packets[:count])]
    path = tmp_path / "comments.pcapng"
    path.write_bytes(_shb([]) + _idb([(2, "eth0")]) + b"".join(blocks))
    doc = json.loads(run("analyze", "--format", "json", str(path)).stdout)
    notes = doc["captures"][0]["pcapng"]
    assert len(notes["packet_comments"]) == 16 and notes["packet_comments_total"] == len(blocks)
    out = run("analyze", "--no-color", str(path), env={"COLUMNS": "400"}).stdout.decode()
    assert f"{len(blocks) - 16} more packet comments" in out


# ---------------------------------------------------------------------------------------------
# Markdown and HTML


def _notes_section(markdown: str) -> list[str]:
    lines = markdown.split("## Capture notes\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [line for line in lines if line.startswith("| ")]


def test_markdown_holds_no_html_and_no_broken_table_from_the_capture():
    out = run("analyze", "--format", "markdown", str(FIXTURE)).stdout.decode()
    for raw in ("<script", "</script", "<img", "<b>", "\x1b", "\u202e"):
        assert raw not in out, raw
    assert "&lt;script>document.title='pwned';console.log('pwned')&lt;/script>" in out
    rows = _notes_section(out)
    assert len(rows) == 11, rows  # header + 10 notes
    for row in rows:
        # Three cell borders; every pipe from the capture is escaped.
        assert len(re.findall(r"(?<!\\)\|", row)) == 3, row
    assert "\\`code\\` \\*\\*bold\\*\\* \\[link\\](javascript:alert(1))" in out


def test_html_report_runs_nothing_from_the_capture(tmp_path):
    from html_browser import PageWatch, browser, write_report
    from test_html_chromium import _skip_unless_browser

    _skip_unless_browser()
    report = tmp_path / "report.html"
    write_report(FIXTURE, report)
    text = report.read_text()
    for raw in ("<script>document.title", "<img src=x", "\x1b", "\u202e"):
        assert raw not in text, raw
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;" in text
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 1000})
        watch = PageWatch(page, report.as_uri())
        console: list[str] = []
        page.on("console", lambda m: console.append(m.text))
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        # Each payload would set the title or log "pwned": neither happened.
        assert "pwned" not in page.title()
        assert not [m for m in console if "pwned" in m], console
        assert page.locator("img").count() == 0
        assert page.evaluate("document.querySelectorAll('script').length") == len(re.findall(r"<script\b", text))
        # The strings are on the page as text.
        notes = page.text_content("table.notes") or ""
        for payload in (SCRIPT, CLOSE_SCRIPT, ATTRIBUTE, "[bold red]big[/]"):
            assert payload in notes, payload
        assert watch.problems == []
