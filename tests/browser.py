"""Open a page in headless Chromium (Debian's, driven by Playwright): what it rendered, what it
logged, and a screenshot. A test that needs a system package (Chromium; for ASV's page the
JavaScript libraries it serves offline) skips naming the packages when one is missing, and fails
instead where CI installs them and requires them (``SPYRE_BENCH_REQUIRE_BROWSER=1``, .ci/run)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Flags for a closed network: without them Chromium keeps trying Google's services.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


#: Upper bound on each wait for the page's state (Playwright's default, 30 s, failed under load).
STATE_TIMEOUT_MS = 180_000


@dataclass
class PageCheck:
    console_errors: list[str]
    plots: int
    plot_titles: list[str]
    svg_paths: int
    text: str
    screenshot: Path


REQUIRE_ENV = "SPYRE_BENCH_REQUIRE_BROWSER"


def _missing(packages: list[str], what: str) -> None:
    """Skip (or fail, where CI requires them) naming the Debian packages to install."""
    why = (f"needs {what}: apt-get install {' '.join(packages)} (.ci/run installs them; "
           f"{REQUIRE_ENV}=1 makes this a failure)")
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(why)
    pytest.skip(why)


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        _missing(["chromium"], "Chromium, not installed here")
    return exe


def offline_libraries() -> None:
    """The libraries ``asv publish``'s page loads, installed where the page copies them from
    (harness.runner.asv_assets); without them the page loads them from CDNs."""
    from harness.runner.asv_assets import ASSETS, find
    missing = sorted({a.package for a in ASSETS if find(a.local) is None})
    if missing:
        _missing(missing, "the JavaScript libraries of ASV's offline page, not installed here")


def open_page(path: Path, screenshot: str | Path) -> PageCheck:
    exe = chromium()
    from playwright.sync_api import sync_playwright
    screenshot = Path(screenshot)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=FLAGS, timeout=STATE_TIMEOUT_MS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            # Wait on the page's state (loaded, its last element parsed), never on a fixed time:
            # the generous bound only turns a hang into a failure on a loaded machine.
            page.set_default_timeout(STATE_TIMEOUT_MS)
            page.goto(path.resolve().as_uri(), wait_until="load")
            page.wait_for_selector("#report-end", state="attached")
            page.wait_for_function("document.readyState === 'complete'")
            figures = page.locator("figure.plot")
            check = PageCheck(errors, figures.count(),
                              figures.evaluate_all("els => els.map(e => e.dataset.title)"),
                              page.locator("figure.plot svg path").count(),
                              page.inner_text("body"), screenshot)
            page.screenshot(path=str(screenshot), full_page=True, timeout=STATE_TIMEOUT_MS)
        finally:
            browser.close()
    return check


#: Every host name resolves nowhere: a request for anything but the loopback server cannot leave.
OFFLINE = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]


@dataclass
class SiteCheck:
    console_errors: list[str]
    outside: list[str]          # requests for anything but the loopback server (all refused)
    plots: int                  # Flot canvases drawn on the benchmark's graph page
    grid: int                   # benchmarks on the summary grid
    list_rows: int              # rows of the benchmark list
    vendor: list[str]           # local library files the page loaded
    screenshot: Path


def open_asv_site(site: Path, benchmark: str, screenshot: str | Path) -> SiteCheck:
    """Serve ``asv publish``'s folder on the loopback (ASV's page reads its JSON with XHR, which a
    file:// page may not) and open its grid, list and one benchmark's graph with the network
    closed: host names resolve nowhere and any request off the loopback is refused and recorded."""
    import functools
    import http.server
    import threading
    offline_libraries()
    exe = chromium()
    from playwright.sync_api import sync_playwright

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/"
    screenshot = Path(screenshot)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    outside: list[str] = []
    loaded: list[str] = []

    def guard(route):
        url = route.request.url
        if url.startswith(base):
            if "/vendor/" in url:
                loaded.append(url[len(base):])
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=FLAGS + OFFLINE,
                                        timeout=STATE_TIMEOUT_MS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.set_default_timeout(STATE_TIMEOUT_MS)
                page.route("**/*", guard)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(base + "index.html", wait_until="load")
                page.wait_for_selector(".benchmark-container")
                grid = page.locator(".benchmark-container").count()
                page.goto(base + "index.html#/summarylist", wait_until="load")
                page.wait_for_selector("table tbody tr")
                rows = page.locator("table tbody tr").count()
                page.goto(base + "index.html#" + benchmark, wait_until="load")
                page.wait_for_selector("#main-graph canvas.flot-base")
                plots = page.locator("#main-graph canvas.flot-base").count()
                page.screenshot(path=str(screenshot), full_page=True, timeout=STATE_TIMEOUT_MS)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return SiteCheck(errors, outside, plots, grid, rows, sorted(set(loaded)), screenshot)
