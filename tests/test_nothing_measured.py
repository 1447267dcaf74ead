"""Nothing measured is never a pass: a run whose every figure is skipped exits 2 on one line;
``history`` does not call such a commit complete; ``changes`` over no data, or no measured figure,
warns and exits 2, and says when most figures are skipped."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd

BENCH = r"^(exact\.Config\.track_kv_buckets\(|kernel\.Decode\.time_layer\('small-4x8'\))"


def cli(*args, home):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env={**os.environ, "HOME": str(home), "COLUMNS": "200"})


def test_a_run_that_measures_nothing_exits_2_and_history_and_changes_say_so(spyre_repo,
                                                                              tmp_path):
    results = tmp_path / "results"
    run = cli("run", "--repo", str(spyre_repo.path), spyre_repo.commits["no-bucketer"],
              "--results-dir", str(results), "--machine", "box", "--device", "cpu",
              "--tier", "tiny", "--bench", BENCH, home=tmp_path)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("spyre-bench: error: nothing measured: all ") and "bucketer" in line
    history = cli("history", "--results-dir", str(results), home=tmp_path)
    assert history.returncode == 0 and "no (nothing measured)" in history.stdout
    changes = cli("changes", "--results-dir", str(results), home=tmp_path)
    assert changes.returncode == 2
    assert changes.stderr.strip().splitlines()[-1].startswith(
        "spyre-bench: error: nothing measured: all ")
    empty = tmp_path / "empty"
    empty.mkdir()
    none = cli("changes", "--results-dir", str(empty), home=tmp_path)
    assert none.returncode == 2 and "warning: no results in" in none.stderr


def _frame(statuses: dict[str, list[str]]) -> pd.DataFrame:
    return pd.DataFrame([{"commit": c, "status": s} for c, ss in statuses.items() for s in ss])


def test_changes_warns_when_most_figures_are_skipped_or_the_branch_has_none():
    from harness.cli.changes import _coverage
    args = SimpleNamespace(results_dir="results", machine=None, branch="main", repo="repo")
    said = []
    mostly = _frame({"a": ["ok", "skipped", "skipped"], "b": ["ok", "skipped", "skipped"]})
    assert _coverage(mostly, None, args, said.append) is None
    assert said and "4 of 6 figures in results are skipped (measured: 2)" in said[0]
    said.clear()
    assert _coverage(_frame({"a": ["ok", "skipped"]}), None, args, said.append) is None
    assert not said                                              # half: no warning
    why = _coverage(mostly, ["c", "d"], args, said.append)       # none of them on the branch
    assert said == ["no results in results on branch main: no commit measured, nothing to compare"]
    assert why.startswith("nothing measured")
