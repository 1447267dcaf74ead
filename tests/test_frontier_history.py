"""The default ladder's distance from the frontier over history: a real ``spyre-bench run`` (the
exact tier, in process) of #810's bucketer and of a planted default kv ladder far from the
frontier stores ``exact.Frontier.track_excess_padding``; a stored comparison flags the rise as a
regression, plain ``asv compare`` marks it worse, and the report plots one point per commit and
config."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from harness.store.history import load_history
from tests.fixtures.spyre_repo import plant_kv_ladder

BENCH = r"^exact\.Frontier\."
BRANCH = "frontier-history"


def cli(*args, home, check=True):
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
           "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=env)
    if check:
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def measured(spyre_repo, tmp_path_factory):
    floor = plant_kv_ladder(spyre_repo, "floor-8", branch=BRANCH)
    home = tmp_path_factory.mktemp("frontier-history")
    results = home / "results"
    commits = [spyre_repo.commits["810-clamp"], floor]
    cli("run", "--repo", str(spyre_repo.path), *commits, "--results-dir", str(results),
        "--machine", "frontier-box", "--tier", "tiny", "--bench", BENCH, home=home)
    return spyre_repo, home, results, commits


def test_the_excess_padding_is_stored_per_config_and_rises_with_a_ladder_moved_away(measured):
    _, _, results, (clamp, floor) = measured
    frame = load_history(results)
    rows = frame[frame.benchmark == "exact.Frontier.track_excess_padding"]
    ok = rows[rows.status == "ok"]
    assert set(ok["param:overrides"]) == {"batched"}            # the tiny tier's default set
    assert set(rows[rows.status != "ok"]["param:overrides"]) == {"kv-above-limit"}   # skipped
    value = {(r["commit"], r["param:block_size"]): r["value"] for _, r in ok.iterrows()}
    for bs in (64, 192):
        assert 0 <= value[(clamp, bs)] < 5 < value[(floor, bs)], value


def test_a_stored_comparison_flags_the_rise(measured):
    _, home, results, (clamp, floor) = measured
    proc = cli("compare", clamp[:12], floor[:12], "--results-dir", str(results),
               "--fail-on", "regression", home=home, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[1]
    assert first.startswith("🔴 1 regression"), proc.stdout
    assert re.search(r"exact\.Frontier\.track_excess_padding\s.*percent\s.*2\s.*0\s", proc.stdout)


def test_plain_asv_compare_shows_the_rise(measured):
    """What `spyre-bench run` stored is ASV's own format: plain `asv compare` marks it worse."""
    from harness.runner.asv_config import write_config
    repo, home, results, (clamp, floor) = measured
    conf = write_config(home / "asv.conf.json", repo.path, results)
    proc = subprocess.run([sys.executable, "-m", "asv", "compare", "--config", str(conf),
                           "--machine", "frontier-box", "--factor", "1.0", clamp[:8], floor[:8]],
                          capture_output=True, text=True, env={**os.environ, "HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    rows = [x for x in proc.stdout.splitlines() if "track_excess_padding" in x and "'batched'" in x]
    assert len(rows) == 2 and all(x.lstrip("| ").startswith("+") for x in rows), proc.stdout


def test_the_report_plots_the_distance_per_commit(measured):
    repo, home, results, commits = measured
    cli("report", "--results-dir", str(results), "--repo", str(repo.path), "--branch", BRANCH,
        "--out", str(home / "site"), home=home)
    page = (home / "site" / "index.html").read_text()
    assert "Default ladder against the frontier per commit" in page
    figure = re.search(r'<figure class="plot" data-title="excess padding of the default kv '
                       r'ladder, env batched \(%\)" data-series="([^"]*)">(.*?)</figure>', page,
                       re.S)
    assert figure is not None
    assert figure.group(1) == "[&quot;bs 192, mml 2048&quot;, &quot;bs 64, mml 2048&quot;]"
    for i in range(2):   # one marker per commit in each series
        series = re.search(rf'<g id="series-{i}">(.*?)</g>\s*</g>', figure.group(2), re.S)
        assert series is not None and series.group(1).count("<use ") == len(commits)
