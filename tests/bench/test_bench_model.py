"""Benchmark of the exact model: the full analytic matrix must stay interactive (< 5 s target).

Run with ``make bench``; in the default test run (``--benchmark-disable``) it runs once as a test.
"""

from harness.config import EngineConfig
from harness.evaluate import workload_figures
from harness.matrix import OVERRIDE_SETS, expand, override_set
from harness.subjects import resolve_subject
from harness.workloads import MIXES, specs

OVERRIDES = ["batched", "kv-above-limit", "kv-sparse", "query-no-1"]


def full_analytic_matrix():
    cases = expand(EngineConfig(), (64, 128, 192, 256), (256, 2048, 8192, 32768), (32,),
                   [(name, override_set(name)) for name in OVERRIDES])
    workloads = specs()
    rows = 0
    for spec in ("reference:pre-810", "reference:post-810-clamp"):
        subject = resolve_subject(spec)
        for case in cases:
            rows += sum("skipped" not in f for f in
                        workload_figures(subject, case, workloads).values())
    return rows


def test_full_analytic_matrix(benchmark):
    benchmark.extra_info["cases"] = "2 subjects x 4 bs x 4 mml x 4 overrides x 7 workloads x 32 steps"
    rows = benchmark.pedantic(full_analytic_matrix, rounds=3, iterations=1)
    assert rows == 2 * 4 * 4 * len(OVERRIDES) * len(MIXES)
    assert set(OVERRIDES) <= set(OVERRIDE_SETS)
