"""Graphs are counted under the subject's own Dynamo settings: its platform module's limits."""

from __future__ import annotations

import torch

from harness.matrix import Case
from harness.measure.device import select
from harness.measure.kernel_figures import KernelOptions, measure_workload
from harness.subjects import resolve_subject
from harness.workloads import specs
from tests.fixtures.spyre_sources import PLATFORM, PLATFORM_FILE
from tests.measure.helpers import BATCHED, SMALL

#: Ten batched keys at mml 1024 under pre-#810 ladders (num_seqs 1..8, num_blocks 1..16).
STEPS = [",".join([str(b * 64)] * n) for n in (4, 8) for b in (1, 2, 4, 8, 16)]


def _fallbacks(subject) -> dict:
    case = Case(SMALL.replace(max_model_len=1024), BATCHED, "batched")
    (spec,) = specs(None, None, STEPS, steps=len(STEPS))
    row = measure_workload(subject, case, spec, KernelOptions(select("cpu"), time=False,
                                                              record_warmup=False))
    assert "graphs" in row, row
    return row["graphs"]


def test_a_platform_that_raises_the_limits_shows_no_fallbacks(spyre_repo):
    with_platform = spyre_repo.add_commit({PLATFORM_FILE: PLATFORM},
                                          "platform: raise Dynamo's recompile limits",
                                          parent="pre-810")
    plain = _fallbacks(resolve_subject(spyre_repo.spec("pre-810")))
    raised = _fallbacks(resolve_subject(spyre_repo.spec(with_platform)))
    assert plain["recompile_limit"] == 8 and plain["fallbacks"] == 2
    assert raised["recompile_limit"] == 100_000 and raised["fallbacks"] == 0
    assert raised["graphs"] == 10 and raised["matches_model"]
    assert "cache_size_limit" in str(raised["compile_settings"]) or \
        "recompile_limit" in str(raised["compile_settings"])
    assert torch._dynamo.config.recompile_limit == 8  # the subject's settings were undone
