"""Benchmarks: ``spyre-bench frontier`` for one config and one workload (bs 192, mml 2048,
batched, long-tail: every proposed kv ladder evaluated by the subject's own code).

Targets on 2 cores: the embedded reference under 5 s, a real spyre-inference tree under 60 s
(``SPYRE_BENCH_REAL=<checkout>``, ``SPYRE_BENCH_REAL_REV`` default HEAD; skipped without it).
Whole commands in fresh processes with an empty figures memo (a cold run). Run with
``make bench``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

REAL = os.environ.get("SPYRE_BENCH_REAL")
ARGS = ("frontier", "--block-size", "192", "--max-model-len", "2048", "--workload", "long-tail",
        "--json")


def frontier_cold(subject: str) -> dict:
    with tempfile.TemporaryDirectory() as memo:
        proc = subprocess.run([sys.executable, "-m", "harness", *ARGS, "--subject", subject],
                              capture_output=True, text=True,
                              env={**os.environ, "SPYRE_BENCH_MEMO_DIR": memo,
                                   "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    [found] = json.loads(proc.stdout)
    return found


def _check(found: dict) -> None:
    default = [p for p in found["points"] if "default" in p["marks"]]
    assert len(default) == 1 and any(not p["dominated"] for p in found["points"])


def test_frontier_on_the_reference(benchmark):
    if benchmark.disabled:     # its figures are tested in tests/test_frontier.py; this times it
        pytest.skip("frontier on the reference: a benchmark (make bench)")
    benchmark.extra_info.update(config="bs 192, mml 2048, batched", workload="long-tail",
                                target_s=5.0)
    found = benchmark.pedantic(frontier_cold, args=("reference:post-810-clamp",), rounds=3,
                               iterations=1)
    _check(found)
    benchmark.extra_info["points"] = len(found["points"])


@pytest.mark.skipif(not REAL, reason="no real checkout: SPYRE_BENCH_REAL=<path>")
def test_frontier_on_a_real_tree(benchmark):
    if benchmark.disabled:
        pytest.skip("frontier on a real tree: a benchmark (make bench)")
    rev = os.environ.get("SPYRE_BENCH_REAL_REV", "HEAD")
    benchmark.extra_info.update(config="bs 192, mml 2048, batched", workload="long-tail",
                                subject=f"git:{REAL}@{rev}", target_s=60.0)
    found = benchmark.pedantic(frontier_cold, args=(f"git:{REAL}@{rev}",), rounds=1,
                               iterations=1)
    _check(found)
    benchmark.extra_info["points"] = len(found["points"])
