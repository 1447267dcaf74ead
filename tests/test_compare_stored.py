"""Comparing stored results: exact rows exactly, timings judged, machines never mixed silently."""

import json
import math
import subprocess
import sys

import numpy as np

from harness.analyze.compare import compare_stored
from harness.store.history import load_history
from tests.test_history import write_results

A, B = "a" * 40, "b" * 40
NB = "exact.Config.track_batched_num_blocks_distinct"
TIME = "kernel.Decode.time_layer"


def results(tmp_path, head_machine="box", slow=1.0):
    (tmp_path / "benchmarks.json").write_text(json.dumps({
        NB: {"type": "track", "unit": "buckets", "param_names": ["block_size"]},
        TIME: {"type": "time", "unit": "seconds", "param_names": ["probe"]}, "version": 2}))
    rng = np.random.default_rng(3)
    for commit, machine, nb, scale in ((A, "box", [5, 4], 1.0), (B, head_machine, [5, 5], slow)):
        samples = list(rng.lognormal(np.log(1e-3 * scale), 0.05, 20))
        write_results(tmp_path, machine=machine, commit=commit, results={
            NB: [nb, [["128", "192"]], "1"],
            TIME: [[float(np.median(samples))], [["'small'"]], "1", 0, 1.0, None, None, None,
                   None, None, None, [samples]]})
    return load_history(tmp_path)


def test_exact_changes_both_directions_and_timing_verdicts(tmp_path):
    c = compare_stored(results(tmp_path, slow=2.0), A[:7], B[:7])
    assert [(e.metric, e.params, e.base, e.head, e.direction) for e in c.exact] == [
        ("batched_num_blocks_distinct", {"block_size": 192}, 4, 5, "worse")]
    assert c.exact_compared == 2 and not c.problems
    [t] = c.timings
    assert t.verdict.kind == "regression" and math.isclose(t.verdict.ratio, 2.0, rel_tol=0.1)


def test_different_machines_are_refused_for_timings_but_exact_still_compares(tmp_path):
    c = compare_stored(results(tmp_path, head_machine="other"), A, B)
    assert c.problems == ["machine differs: box (base) vs other (head)"]
    assert c.timings == [] and any("not comparable" in why for _, why in c.skipped)
    assert len(c.exact) == 1
    allowed = compare_stored(load_history(tmp_path), A, B, allow_cross_machine=True)
    assert len(allowed.timings) == 1


def test_cli_exit_codes_for_a_ci_gate(tmp_path):
    results(tmp_path, head_machine="other")

    def code(*args):
        return subprocess.run([sys.executable, "-m", "harness", "compare", A[:8], B[:8],
                               "--results-dir", str(tmp_path), *args],
                              capture_output=True, text=True).returncode
    assert code() == 3                                      # not comparable
    assert code("--fail-on", "exact") == 1                  # the exact change
    assert code("--fail-on", "") == 0
    assert code("--fail-on", "speed") == 2                  # bad flag
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", "c" * 8, B[:8],
                           "--results-dir", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "no stored results for commit 'cccccccc'" in proc.stderr
