"""Opens pcapq's HTML reports in Debian's headless Chromium through Playwright (never a
downloaded browser). Used by tests/test_html_chromium.py, and run as a script it regenerates
the screenshots in docs/images/:

    python tests/html_browser.py
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("PCAPQ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def browser() -> Iterator[object]:
    """A Playwright Browser on Debian's chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class PageWatch:
    """Everything a page does that a self-contained report must not: console errors, page
    errors (uncaught exceptions), dialogs (an alert() from injected markup), and requests for
    anything but the report file itself."""

    def __init__(self, page, allowed_url: str) -> None:
        self.problems: list[str] = []
        page.on("console", lambda m: m.type in ("error", "warning") and self.problems.append(f"console {m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))

        def on_request(request) -> None:
            if request.url.split("#")[0] != allowed_url:
                self.problems.append(f"request: {request.url}")

        page.on("request", on_request)


def write_report(capture: Path, out: Path, *extra: str, cwd: Path | None = None) -> None:
    pcapq = shutil.which("pcapq") or "pcapq"
    argv = [pcapq, "analyze", "--format", "html", "-o", str(out), *extra, str(capture)]
    proc = subprocess.run(argv, capture_output=True, timeout=300, cwd=cwd)
    if proc.returncode not in (0, 1):
        raise RuntimeError(proc.stderr.decode())


def docs_screenshots(out_dir: Path = REPO / "docs" / "images") -> list[Path]:
    """The screenshots docs/reports.md shows: the top of the report and one ladder, from the
    shipped accept-queue capture."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "accept_queue_overflow.html"
    # Run from the repository, so that the report names the capture as the docs do.
    write_report(Path("captures") / "accept_queue_overflow.pcap", report, cwd=REPO)
    shots = [out_dir / "report-top.png", out_dir / "report-ladder.png"]
    try:
        with browser() as b:
            page = b.new_page(viewport={"width": 1280, "height": 1100})
            page.goto(report.as_uri())
            page.screenshot(path=str(shots[0]))
            # Wide enough for the ladder's notes.
            page.set_viewport_size({"width": 1500, "height": 1100})
            page.evaluate("document.querySelector('main').style.maxWidth = 'none'")
            page.locator("section.ladder").first.screenshot(path=str(shots[1]))
    finally:
        report.unlink()
    return shots


if __name__ == "__main__":
    for path in docs_screenshots():
        print(path.relative_to(REPO))
    sys.exit(0)
