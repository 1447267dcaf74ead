"""Real-code acceptance: every command on a real spyre-inference git checkout's commits.

Opt-in: ``make test-real REAL=<path to a spyre-inference git checkout>`` (``SPYRE_BENCH_REAL``);
skipped when not given. ``REAL_REVS`` (space-separated revisions, default: every commit on HEAD's
first-parent history that has the attention bucketer) picks the commits. For each commit it asserts
what a kernel engineer relies on: the commit loads, its figures are computed (no row skipped, no
subject failure), its kernels pass the oracle; and a comparison of successive commits compares
figures (exit status 0 or 1, never "nothing compared").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REAL = os.environ.get("SPYRE_BENCH_REAL")
BUCKETER = "spyre_inference/v1/attention/spyre_attn_bucketer.py"

pytestmark = pytest.mark.skipif(not REAL, reason="no real checkout: make test-real REAL=<path>")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", REAL, *args], capture_output=True, text=True,
                          check=True).stdout


def _revisions() -> list[str]:
    if not REAL:
        return []
    given = os.environ.get("REAL_REVS", "").split()
    if given:
        return [_git("rev-parse", "--verify", f"{r}^{{commit}}").strip() for r in given]
    revs = _git("rev-list", "--first-parent", "--reverse", "HEAD").split()
    have = [r for r in revs if _git("ls-tree", "--name-only", r, BUCKETER).strip()]
    return have


REVS = _revisions()


def spyre_bench(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def spec(rev: str) -> str:
    return f"git:{Path(REAL).resolve()}@{rev}"


def _rows(done: subprocess.CompletedProcess) -> list[dict]:
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("rev", REVS, ids=[r[:12] for r in REVS])
def test_ladders_and_cost_are_computed_by_the_commit(rev):
    ladders = spyre_bench("ladders", "--subject", spec(rev), "--tier", "tiny", "--json")
    assert ladders.returncode == 0, ladders.stderr
    rows = _rows(ladders)
    assert rows and not [f for r in rows for f in r["subjects"].values() if "skipped" in f]
    cost = spyre_bench("cost", "--subject", spec(rev), "--tier", "tiny", "--json")
    assert cost.returncode == 0, cost.stderr[-2000:]
    rows = _rows(cost)
    skipped = [f["skipped"] for r in rows for f in r["subjects"].values() if "skipped" in f]
    assert rows and not skipped, skipped[:3]


@pytest.mark.parametrize("rev", REVS, ids=[r[:12] for r in REVS])
def test_kernel_runs_the_commits_own_kernels_and_the_oracle_passes(rev):
    done = spyre_bench("kernel", "--subject", spec(rev), "--block-size", "64",
                       "--max-model-len", "2048", "--batched", "--step", "150,150,150,150",
                       "--step", "150,300,450,600,750,900", "--step", "2048,300|512,1",
                       "--repeat", "3", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = _rows(done)
    assert rows
    for row in rows:
        assert "wrong" not in row and "skipped" not in row, row


@pytest.mark.parametrize("pair", list(zip(REVS, REVS[1:])),
                         ids=[f"{a[:8]}..{b[:8]}" for a, b in zip(REVS, REVS[1:])])
def test_compare_of_successive_commits_compares_figures(pair, tmp_path):
    base, head = pair
    out = tmp_path / "comparison.json"
    done = spyre_bench("compare", "--base", spec(base), "--head", spec(head), "--tier", "quick",
                       "--json", str(out), "--fail-on", "wrong")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["exact_compared"] >= 1000, doc["skipped"][:3]


def test_run_measures_the_commits(tmp_path):
    if len(REVS) < 1:
        pytest.skip("no commit with the attention bucketer")
    done = spyre_bench("run", "--repo", REAL, "--tier", "tiny", "--results-dir",
                       str(tmp_path / "results"), f"{REVS[-1]}^!", timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
