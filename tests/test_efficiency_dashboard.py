"""Efficiency over history: a real ``spyre-bench run`` (ASV) of three commits of the generated
repository, then ``spyre-bench report``, opened offline in headless Chromium.

The run stores the exact padded-slots figure, the probe's bytes (``kernel.DecodeBytes``) and its
timing; the machine's info (and so each results file) records the copy-benchmark bandwidth of
this HOME's cache. The page must plot padding efficiency and kernel efficiency with one point per
measured commit, in commit order, judged against that stored bandwidth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.measure.efficiency import parse_machine_value
from harness.store.history import load_history

#: Long end-to-end runs: `make test-extended` (CI runs it after `make test`).
pytestmark = pytest.mark.extended

BENCH = (r"^(exact\.Workload\.track_padded_slots_per_real_token\("
         r"|kernel\.Decode\.time_layer\('small-4x8'\)"
         r"|kernel\.DecodeBytes\.track_(walked|logical)_bytes\('small-4x8'\))")
NAMES = ["pre-810", "810-topup", "810-clamp"]     # main's order
ARTIFACTS = os.environ.get("SPYRE_BENCH_ARTIFACTS", "test-artifacts")
KV_CASE = dict(block_size=64, max_model_len=2048, overrides="kv-above-limit",
               workload="four-3-block-decodes")


def cli(*args, home):
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
           "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def measured(spyre_repo, tmp_path_factory):
    home = tmp_path_factory.mktemp("efficiency")
    results = home / "results"
    # run in reverse commit order: the page must still plot in the branch's order
    cli("run", "--repo", str(spyre_repo.path), *[spyre_repo.commits[n] for n in NAMES[::-1]],
        "--results-dir", str(results), "--machine", "eff-box", "--device", "cpu",
        "--tier", "tiny", "--bench", BENCH, home=home)
    cli("report", "--results-dir", str(results), "--repo", str(spyre_repo.path),
        "--branch", "main", "--out", str(home / "site"), "--asv", home=home)
    return spyre_repo, home, results


def test_every_results_file_says_which_bandwidth_it_was_judged_against(measured):
    _, home, results = measured
    [cached] = json.loads((home / "cache" / "spyre-bench" / "bandwidth.json").read_text()).values()
    expected = f"{cached['gb_per_s']:.1f} GB/s cpu (copy benchmark)"
    files = sorted((results / "eff-box").glob("*-cpu.json"))
    assert len(files) == len(NAMES)
    for path in files:
        assert json.loads(path.read_text())["params"]["bandwidth"] == expected, path
    assert json.loads((results / "eff-box" / "machine.json").read_text())["bandwidth"] == expected
    machine = json.loads((home / ".asv-machine.json").read_text())["eff-box"]
    assert machine["bandwidth"] == expected


def _points(page, title_start: str) -> dict[str, list[float]]:
    """Each series of the plot whose title starts so: the y of every marker drawn, left to right."""
    figure = page.locator(f'figure.plot[data-title^="{title_start}"]')
    assert figure.count() == 1, title_start
    names = json.loads(figure.get_attribute("data-series"))
    out = {}
    for i, name in enumerate(names):
        markers = figure.locator(f'g[id="series-{i}"] use')
        xs = [float(markers.nth(j).get_attribute("x")) for j in range(markers.count())]
        assert xs == sorted(xs), name
        out[name] = [float(markers.nth(j).get_attribute("y")) for j in range(markers.count())]
    return out


def test_the_page_plots_efficiency_per_commit_offline(measured):
    repo, home, results = measured
    from tests.browser import chromium, open_page
    chromium()    # skips (or fails, where CI requires a browser) before anything is opened
    page_check = open_page(home / "site" / "index.html",
                           os.path.join(ARTIFACTS, "report-efficiency.png"))
    assert page_check.console_errors == []
    titles = page_check.plot_titles
    assert "padding efficiency at bs 64, mml 2048, env kv-above-limit (% of walked KV slots " \
           "that are real tokens)" in titles
    assert "kernel efficiency on cpu (% of memory bandwidth)" in titles
    assert "fraction of the roofline on cpu (%)" in titles

    frame = load_history(results)
    stored = frame[frame.benchmark == "exact.Workload.track_padded_slots_per_real_token"]
    for k, v in KV_CASE.items():
        stored = stored[stored[f"param:{k}"] == v]
    padding = {r.commit: 100 / r.value for r in stored.itertuples()}
    c = repo.commits
    # #810's top-up: the KV override above the limit pads the review's probe many times over
    assert padding[c["pre-810"]] > 5 * padding[c["810-topup"]]
    gbps = {parse_machine_value(json.loads(open(f).read())["params"]["bandwidth"], "cpu")
            for f in frame["file"]}
    assert len(gbps) == 1 and None not in gbps

    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto((home / "site" / "index.html").resolve().as_uri(), wait_until="load")
            page.wait_for_selector("#report-end", state="attached")
            kv = _points(page, "padding efficiency at bs 64, mml 2048, env kv-above-limit")
            for name, ys in kv.items():
                assert len(ys) == len(NAMES), name          # one point per commit
            # higher efficiency is drawn higher (a smaller SVG y): pre-810 above 810-topup
            pre, topup, _ = kv["four-3-block-decodes"]
            assert pre < topup
            for title in ("kernel efficiency on cpu", "fraction of the roofline on cpu"):
                series = _points(page, title)
                assert list(series) == ["small-4x8 (eff-box)"], series
                assert len(series["small-4x8 (eff-box)"]) == len(NAMES)
            judged = page.locator("p.bandwidth[data-device='cpu']").inner_text()
            row = page.locator('table.efficiency[data-title^="padding efficiency at bs 64, mml '
                               '2048, env kv-above-limit"] tr', has_text="four-3-block-decodes")
            cells = row.locator("td").all_inner_texts()
        finally:
            browser.close()
    [value] = gbps
    assert f"eff-box: {value:.1f} GB/s cpu (copy benchmark)" in judged
    # the exact figures, first and latest, as the page states them
    assert cells == [f"{c['pre-810'][:8]} {padding[c['pre-810']]:.1f}%",
                     f"{c['810-clamp'][:8]} {padding[c['810-clamp']]:.1f}%"]


def test_asv_graphs_of_results_that_record_a_bandwidth_render_offline(measured):
    """The bandwidth is one more machine param ASV keys its graphs by ('GB/s' holds a slash):
    asv publish's graph of the new benchmark still loads and draws."""
    _, home, _ = measured
    from tests.browser import open_asv_site
    site = open_asv_site(home / "site" / "asv", "kernel.DecodeBytes.track_walked_bytes",
                         os.path.join(ARTIFACTS, "asv-efficiency.png"))
    assert site.outside == [] and site.console_errors == []
    assert site.plots >= 1 and site.grid >= 2
