"""The HTML report in a real browser (Debian's headless chromium through Playwright): no
console error, no page error, no request for anything outside the file, no markup from the
capture executed; sorting, filtering, pagination and the ladder links work. Screenshots go to
the test's tmp dir (`python tests/html_browser.py` regenerates docs/images/)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from craft import Conversation, write_pcap
from html_browser import CHROMIUM, PageWatch, browser, write_report
from test_cli import conversations, troubled



def _has_playwright() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


def _skip_unless_browser() -> None:
    missing = [what for what, ok in (("chromium", Path(CHROMIUM).exists()), ("playwright", _has_playwright())) if not ok]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{' and '.join(missing)} missing in CI (.ci/run installs them)")
        pytest.skip(f"needs {' and '.join(missing)}")


REFUSED = 30
HEALTHY = 100


def many_connections() -> list:
    """100 healthy connections, 30 refused, and one with a SYN retry, a request re-sent and a RST."""
    packets = troubled() + conversations(HEALTHY, first_port=42000)
    for i in range(REFUSED):
        c = Conversation(client=("10.0.0.9", 45000 + i), start=1_700_000_010 + i * 0.1, packets=packets)
        c.syn(0.0)
        c.rst("server", 0.0001)
    packets.sort(key=lambda p: p.time)
    return packets


@pytest.fixture
def report(tmp_path) -> Path:
    _skip_unless_browser()
    # A name that is markup: it must show as text and never run.
    capture = write_pcap(tmp_path / "dump<img src=x onerror=alert(1)>.pcap", many_connections())
    out = tmp_path / "report.html"
    write_report(capture, out)
    return out


def _rows(page) -> list[list[str]]:
    return page.eval_on_selector_all("#conn-body tr", "rows => rows.map(r => Array.from(r.cells, c => c.textContent))")


def test_report_in_chromium(report, tmp_path):
    total = HEALTHY + REFUSED + 2
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 1000})
        watch = PageWatch(page, report.as_uri())
        page.goto(report.as_uri())
        page.screenshot(path=str(tmp_path / "top.png"))
        assert page.title().startswith("pcapq: ") and "<img" in page.title()  # shown as text

        # First page, worst first: the failed connections before the healthy ones.
        rows = _rows(page)
        assert len(rows) == 50
        assert page.text_content("#conn-info") == f"rows 1\u201350 of {total} (page 1 of 3)"
        assert rows[0][4] in ("reset by server", "refused") and rows[-1][4] in ("refused", "completed")

        # Pagination.
        page.click("#conn-next")
        assert page.text_content("#conn-info").startswith(f"rows 51\u2013100 of {total}")
        page.click("#conn-next")
        assert len(_rows(page)) == total - 100
        assert page.is_disabled("#conn-next")
        page.click("#conn-prev")
        assert page.text_content("#conn-info").startswith("rows 51")

        # Sorting: added latency, most first on the first click, then the other way.
        page.click("th[data-key=latency]")
        latencies = [0.0 if r[6] == "-" else float(r[6]) for r in _rows(page)]
        assert latencies == sorted(latencies, reverse=True) and latencies[0] > 0
        assert page.get_attribute("th[data-key=latency]", "aria-sort") == "descending"
        page.click("th[data-key=latency]")
        latencies = [0.0 if r[6] == "-" else float(r[6]) for r in _rows(page)]
        assert latencies == sorted(latencies)
        page.click("th[data-key=id]")
        assert [int(r[0]) for r in _rows(page)] == list(range(50))

        # Filtering: by outcome, by text, and problems only.
        page.select_option("#conn-outcome", "refused")
        rows = _rows(page)
        assert len(rows) == REFUSED and {r[4] for r in rows} == {"refused"}
        page.select_option("#conn-outcome", "")
        page.fill("#conn-search", "42007")
        rows = _rows(page)
        assert len(rows) == 1 and rows[0][1] == "10.0.0.1:42007"
        page.fill("#conn-search", "")
        page.check("#conn-problems")
        assert page.text_content("#conn-info").endswith(f"of {REFUSED + 1} (page 1 of 1)")
        page.fill("#conn-search", "no such connection")
        assert page.text_content("#conn-info") == "no connection matches"
        page.fill("#conn-search", "")
        page.screenshot(path=str(tmp_path / "table.png"))

        # A ladder link jumps to its diagram.
        page.click("th[data-key=latency]")
        link = page.locator("#conn-body a").first
        target = link.get_attribute("href")
        link.click()
        assert page.evaluate("location.hash") == target
        ladder = page.locator(target)
        box = ladder.bounding_box()
        assert box is not None and -2 <= box["y"] < 1000  # scrolled to it (sub-pixel)
        assert ladder.locator("svg line[stroke-dasharray]").count() >= 1  # the schedule's slots
        ladder.screenshot(path=str(tmp_path / "ladder.png"))

        # The chart is there and drew bars.
        assert page.locator(".chart svg rect").count() > 3
        page.locator(".chart").screenshot(path=str(tmp_path / "chart.png"))

        assert watch.problems == []
    for shot in ("top", "table", "ladder", "chart"):
        assert (tmp_path / f"{shot}.png").stat().st_size > 5000


NGINX = Path(__file__).resolve().parent.parent / "captures" / "nginx_php_fpm.pcap"


def test_r14_nginx_report_opens_with_telling_ladders_and_folds_the_rest(tmp_path):
    """Issue 14, item 7: the nginx_php_fpm report was 22,585 px tall and opened with 15 SYN-only
    ladders 1,441 px wide in a 1,280 px page; now the most telling come first, the rest are folded
    (a link to one opens it), and every ladder fits the page."""
    _skip_unless_browser()
    out = tmp_path / "nginx.html"
    write_report(NGINX, out)
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 1100})
        watch = PageWatch(page, out.as_uri())
        page.goto(out.as_uri())
        assert page.evaluate("document.body.scrollHeight") < 10_000
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        body_width = page.evaluate("document.querySelector('.ladder').clientWidth")
        widths = page.evaluate("Array.from(document.querySelectorAll('.ladder svg')).map(s => s.getBoundingClientRect().width)")
        assert widths and max(widths) <= body_width
        first = page.inner_text(".ladder h3")
        assert "syncookie suspected" in first or "request unacked" in first, first
        folded = page.query_selector_all("details.more-ladders .ladder")
        assert folded and not page.evaluate("document.querySelector('details.more-ladders').open")
        target = folded[0].get_attribute("id")
        page.click(f'a[href="#{target}"]')
        assert page.evaluate("document.querySelector('details.more-ladders').open")
        page.screenshot(path=str(tmp_path / "nginx.png"))
        assert watch.problems == []
