"""Comparing stored results: exact rows exactly, timings judged, machines never mixed silently."""

import json
import math
import subprocess
import sys

import numpy as np

from harness.analyze.stored import compare_stored
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
    assert code() == 2                                      # not comparable
    assert code("--fail-on", "exact") == 1                  # the exact change
    assert code("--fail-on", "") == 0
    assert code("--fail-on", "speed") == 2                  # bad flag
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", "c" * 8, B[:8],
                           "--results-dir", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "no stored results for commit 'cccccccc'" in proc.stderr


# -- issue 11: every exact series compared; stored timings are advisory, and say why -----------

GRAPHS = "kernel.Compile.track_graphs"


def results_apart(tmp_path, apart_s=3600.0, head_graphs=5, head_nb=(5, 4)):
    """Base and head measured ``apart_s`` seconds apart (ASV's started_at, ms), graphs 3 -> 5."""
    (tmp_path / "benchmarks.json").write_text(json.dumps({
        NB: {"type": "track", "unit": "buckets", "param_names": ["block_size"]},
        GRAPHS: {"type": "track", "unit": "graphs", "param_names": ["probe"]},
        TIME: {"type": "time", "unit": "seconds", "param_names": ["probe"]}, "version": 2}))
    rng = np.random.default_rng(5)
    start = 1_700_000_000_000
    for commit, graphs, nb, t0 in ((A, 3, [5, 4], start), (B, head_graphs, list(head_nb),
                                                            start + int(apart_s * 1000))):
        samples = list(rng.lognormal(np.log(1e-3), 0.05, 20))
        write_results(tmp_path, commit=commit, results={
            NB: [nb, [["128", "192"]], "1", t0, 1.0],
            GRAPHS: [[graphs], [["'small'"]], "1", t0, 1.0],
            TIME: [[float(np.median(samples))], [["'small'"]], "1", t0 + 2000, 30.0, None, None,
                   None, None, None, None, [samples]]})
    return load_history(tmp_path)


def test_a_kernel_compile_graph_change_is_reported_as_exact(tmp_path):
    c = compare_stored(results_apart(tmp_path), A, B)
    assert [(e.metric, e.base, e.head, e.direction) for e in c.exact] == [
        (GRAPHS, 3, 5, "worse")]
    assert c.exact_compared == 3
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", A[:8], B[:8],
                           "--results-dir", str(tmp_path), "--json", "-"],
                          capture_output=True, text=True)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["exact_changed"][0]["metric"] == GRAPHS


def test_stored_timings_are_advisory_and_say_they_were_not_interleaved(tmp_path):
    results_apart(tmp_path, apart_s=3 * 3600)
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", A[:8], B[:8],
                           "--results-dir", str(tmp_path), "--markdown", str(tmp_path / "c.md")],
                          capture_output=True, text=True)
    text = (tmp_path / "c.md").read_text().replace("\\", "")
    for out in (proc.stdout, text):
        assert "not measured interleaved" in out and "measured 3.0 h apart" in out
        assert "host load while measuring was not recorded" in out
        assert "(advisory)" in out


def test_a_figure_the_head_no_longer_records_is_lost(tmp_path):
    frame = results_apart(tmp_path, head_nb=(5, math.nan))
    c = compare_stored(frame, A, B)
    assert c.lost and "head skipped" in c.lost[0][1]
    from harness.analyze.comparison import as_document
    from harness.report.verdict import FAIL_ON, exit_code
    assert exit_code(as_document(c), set(FAIL_ON)) == 1


# -- issue 34: a figure stored under a new definition (version) is a new series, never a step ----

PADDED = "exact.Workload.track_padded_slots_per_real_token"


def _versions(tmp_path, head_version: str):
    """Base stored the ratio whole (version 1), head at ten significant digits (head_version)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "benchmarks.json").write_text(json.dumps({
        PADDED: {"type": "track", "unit": "slots/token", "param_names": ["workload"]},
        "version": 2}))
    for day, (commit, value, version) in enumerate(((A, 3.835815474028333, "1"),
                                                    (B, 3.835815474, head_version))):
        write_results(tmp_path, commit=commit, date=1_700_000_000_000 + day * 86_400_000,
                      results={PADDED: [[value], [["'mix'"]], version]})
    return load_history(tmp_path)


def test_a_figure_whose_definition_changed_is_not_compared_and_says_why(tmp_path):
    c = compare_stored(_versions(tmp_path, "2"), A, B)
    assert c.exact == [] and c.exact_compared == 0
    assert c.skipped == [("padded_slots_per_real_token workload mix",
                          "its definition changed between the two runs' harnesses "
                          "(version 1 -> 2)")]
    same = compare_stored(_versions(tmp_path / "same", "1"), A, B)  # one definition: a change
    assert [(e.base, e.head) for e in same.exact] == [(3.835815474028333, 3.835815474)]


def test_a_new_version_of_a_series_makes_no_change_point(tmp_path):
    from harness.analyze.changepoints import detect
    assert detect(_versions(tmp_path, "2")) == []
    [point] = detect(_versions(tmp_path / "same", "1"))
    assert (point.last_good, point.first_bad) == (A, B)
