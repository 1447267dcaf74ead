"""``changes`` counts a change as a regression by its worse entries only: #810 as merged (the
clamp: entries above the limit dropped) changes figures for the better only, and is listed as an
improvement, with no issue and no exit status 1 of its own."""

import json
import os
import subprocess
import sys

import pandas as pd

from harness.analyze.changepoints import detect, group

BENCH = (r"^exact\.(Config\.track_batched_num_blocks_distinct|"
         r"Workload\.track_iterations_per_layer_mean)\(")


def cli(*args, home):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env={**os.environ, "HOME": str(home), "COLUMNS": "200",
                                          "OMP_NUM_THREADS": "1"})


def _points(values):
    return pd.DataFrame([{"machine": "m", "env_name": "e", "commit": f"c{i}", "date": i,
                          "benchmark": f"exact.Config.track_{name}", "params": {}, "status": "ok",
                          "unit": "count", "value": v}
                         for i, row in enumerate(values) for name, v in row.items()])


def test_a_range_whose_every_figure_improved_is_no_regression():
    found = group(detect(_points([{"kv_buckets": 5, "variants": 4}, {"kv_buckets": 3, "variants": 4},
                                  {"kv_buckets": 3, "variants": 6}])))
    by_bad = {r.first_bad: r for r in found}
    assert not by_bad["c1"].is_regression and by_bad["c1"].as_dict()["regression"] is False
    assert by_bad["c2"].is_regression and len(by_bad["c2"].worse) == 1


def test_the_810_clamp_is_an_improvement_not_a_regression(spyre_repo, tmp_path):
    c = spyre_repo.commits
    results = tmp_path / "results"
    run = cli("run", "--repo", str(spyre_repo.path), c["pre-810"], c["810-topup"],
              c["810-clamp"], "--results-dir", str(results), "--machine", "box", "--device",
              "cpu", "--tier", "tiny", "--bench", BENCH, "--no-compare", home=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    proc = cli("changes", "--results-dir", str(results), "--repo", str(spyre_repo.path),
               "--branch", "main", "--json", "-", "--issues-dir", str(tmp_path / "issues"),
               home=tmp_path)
    assert proc.returncode == 1, proc.stderr             # the top-up's blow-up is worse
    [topup] = json.loads(proc.stdout)
    assert topup["first_bad"] == c["810-topup"] and topup["regression"] is True
    assert [p for p in topup["points"] if p["direction"] == "worse"]
    assert [p.name for p in (tmp_path / "issues").iterdir()] == [
        f"{c['pre-810'][:8]}-{c['810-topup'][:8]}.md"]
    table = cli("changes", "--results-dir", str(results), "--repo", str(spyre_repo.path),
                "--branch", "main", home=tmp_path)
    clamp = [line for line in table.stdout.splitlines() if c["810-clamp"][:12] in line]
    assert "1 regression(s), 1 improvement(s)" in table.stdout
    assert len(clamp) == 1 and "0 worse" in clamp[0]
