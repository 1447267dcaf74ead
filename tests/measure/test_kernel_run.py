"""``kernel`` counts graphs in parallel processes for the reference, times alone, and gives what
one process gives; a tier names the mixes its kernel run times."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.cli import options, parser
from harness.config import EngineConfig
from harness.matrix import TIERS, Case, override_set
from harness.measure import device
from harness.measure.kernel_run import counting_pool, measure_all
from harness.measure.settings import KernelOptions
from harness.workloads import specs
from tests.measure.test_cli_kernel import SMALL_ARGS

SPYRE_BENCH = str(Path(sys.executable).with_name("spyre-bench"))
#: What a graph count is, compile seconds apart.
EXACT = ("graphs", "graphs_warmup", "graphs_workload", "graphs_by_kernel", "unique_graphs",
         "late_compile_keys", "fallback_keys", "uncompiled_keys", "verdict", "model_keys")


def _kernel(jobs: str, *flags: str) -> dict:
    out = subprocess.run(
        [SPYRE_BENCH, "kernel", "--subject", "reference:chunked", *SMALL_ARGS,
         "--block-size", "64,128", "--overrides", "batched", "--workload", "bimodal",
         "--workload", "four-3-block-decodes", "--steps", "4", "--json", *flags],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "SPYRE_BENCH_JOBS": jobs})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_parallel_counting_gives_the_counts_and_rows_of_one_process():
    one = _kernel("1", "--no-timing")
    two = _kernel("2", "--repeat", "3", "--warmup", "1")
    assert len(one["rows"]) == len(two["rows"]) == 4
    for a, b in zip(one["rows"], two["rows"]):
        assert (a["case"], a["workload"]) == (b["case"], b["workload"])
        assert {k: a["graphs"][k] for k in EXACT} == {k: b["graphs"][k] for k in EXACT}
        assert "timing" not in a and b["timing"]["shapes"]   # counted apart, then timed
    assert {r["case"]["block_size"] for r in two["rows"]} == {64, 128}


class _Unopenable:
    """A subject whose spec no counting process can open."""

    spec = "reference:no-such-policy"
    identity = {"spec": spec}


def test_a_counting_process_that_fails_is_that_configs_failure_in_its_rows():
    config = EngineConfig(max_model_len=256, max_num_seqs=8, max_num_batched_tokens=256,
                          num_kv_heads=2, queries_per_kv=2, head_size=16, num_layers=2)
    cases = [Case(config.replace(block_size=bs), override_set("batched"), "batched")
             for bs in (64, 128)]
    opts = KernelOptions(device=device.select("cpu"), time=False)
    said = []
    with counting_pool(2) as pool:
        rows = measure_all([_Unopenable()], cases, specs(["bimodal"], steps=2), opts,
                           lambda label, what, n: said.append(what), pool)
    assert len(rows) == 2 and all(r["failed"] for r in rows)
    assert all("counting graphs at bs=" in r["skipped"] and "no-such-policy" in r["skipped"]
               for r in rows)
    assert said.count("graphs counted") == 2


def test_a_tier_names_the_mixes_its_kernel_run_times():
    tiny = parser().parse_args(["kernel", "--tier", "tiny"])
    assert [s.name for s in options.workloads(tiny, kernel=True)] == list(
        TIERS["tiny"].kernel_mixes)
    assert len(options.workloads(tiny)) > len(TIERS["tiny"].kernel_mixes)   # exact: every mix
    named = parser().parse_args(["kernel", "--tier", "tiny", "--workload", "long-tail"])
    assert [s.name for s in options.workloads(named, kernel=True)] == ["long-tail"]
    quick = parser().parse_args(["kernel", "--tier", "quick"])
    assert len(options.workloads(quick, kernel=True)) == len(options.workloads(quick))
