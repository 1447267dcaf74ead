"""Open a page in headless Chromium (Debian's, driven by Playwright): what it rendered, what it
logged, and a screenshot. Skips when no Chromium is installed, unless CI requires one."""

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


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    why = "no Chromium here (apt-get install chromium; .ci/run installs it)"
    if os.environ.get("SPYRE_BENCH_REQUIRE_BROWSER"):
        pytest.fail(why)
    pytest.skip(why)


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
