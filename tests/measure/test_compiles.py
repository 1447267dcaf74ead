"""Compiled graphs counted exactly, and equal to the distinct keys the exact model predicts."""

from __future__ import annotations

import pytest
import torch

from harness.config import Overrides
from harness.measure.compiles import case_graphs, count_graphs, end_sessions, session_workloads
from harness.measure.device import select
from harness.model.cost import workload_cost
from harness.workloads import Workload, generate, inline
from tests.measure.helpers import SMALL, subject_and_bucketing

OVERRIDES = {
    "batched": {"SPYRE_BATCHED_DECODE": "1"},
    # no query bucket 1: decodes pad to width 1 without asking, so (nb, 1) compiles late
    "query-no-1": {"SPYRE_BATCHED_DECODE": "1", "SPYRE_ATTN_QUERY_BUCKETS": "128,256"},
    # a sparse kv ladder: fewer num_blocks buckets (post-810 only; pre-810 ignores it)
    "kv-sparse": {"SPYRE_BATCHED_DECODE": "1", "SPYRE_ATTN_KV_BUCKETS": "128,256"},
    # num_seqs entries below 4: recorded by chunked's warmup grid, never dispatched
    "num-seqs-low": {"SPYRE_BATCHED_DECODE": "1", "SPYRE_ATTN_NUM_SEQS_BUCKETS": "1,2,4"},
}
#: (policy, override set, workload): every reference policy on three override sets / workloads.
CASES = [
    ("pre-810", "batched", "bimodal"),
    ("pre-810", "query-no-1", "mixed-prefill-decode"),
    ("pre-810", "kv-sparse", "uniform-short"),
    ("post-810-topup", "batched", "mixed-prefill-decode"),
    ("post-810-topup", "kv-sparse", "bimodal"),
    ("post-810-topup", "query-no-1", "uniform-long"),
    ("post-810-clamp", "batched", "bimodal"),
    ("post-810-clamp", "num-seqs-low", "uniform-long"),
    ("post-810-clamp", "query-no-1", "mixed-prefill-decode"),
    ("chunked", "batched", "bimodal"),
    ("chunked", "kv-sparse", "mixed-prefill-decode"),
    ("chunked", "num-seqs-low", "bimodal"),
]


def _count(policy, overrides, workload, **kwargs):
    subject, bucketing = subject_and_bucketing(policy, SMALL,
                                               Overrides.from_env(OVERRIDES[overrides]))
    kernel, generation = subject.decode_kernel()
    wl = generate(workload, SMALL, steps=6, seed=1)
    model = workload_cost(bucketing, SMALL, wl)
    return model, count_graphs(kernel, generation, bucketing, SMALL, wl, **kwargs)


@pytest.mark.parametrize("policy,overrides,workload", CASES)
def test_graph_count_equals_model_keys(policy, overrides, workload):
    # The limit is raised so that no kernel falls back (chunked's warmup grid under
    # num-seqs-low has 12 batched variants); the fall-back tests below leave it at 8.
    model, r = _count(policy, overrides, workload, recompile_limit=64)
    assert not r.fallbacks and not r.uncompiled and not r.limit_hit
    assert r.graphs == r.unique_graphs == len(set(model.keys) | model.warmup)
    assert r.graphs_warmup == len(model.warmup)
    assert r.graphs_workload == len(model.late_compiles) == len(r.late_keys)
    assert sorted(r.late_keys) == sorted(model.late_compiles)
    assert r.graphs_by_kernel["batched"] == len({k for k in set(model.keys) | model.warmup
                                                 if k.kernel != "attn"})
    assert r.matches_model and r.verdict == "yes"
    # every key the workload reaches ran and was checked once; warmup variants compile
    # shape-only (their dummy outputs are never computed, so never checked)
    assert r.checked_calls == len(set(model.keys))


def test_warmup_grid_past_the_default_limit_falls_back():
    """chunked + num_seqs override 1,2,4: 4 x 3 batched warmup variants, Dynamo compiles 8."""
    model, r = _count("chunked", "num-seqs-low", "bimodal", check=False)
    batched_warmup = [k for k in model.warmup if k.kernel != "attn"]
    assert len(batched_warmup) == 12 and r.recompile_limit == 8
    assert r.graphs_by_kernel["batched"] == 8 and r.limit_hit
    assert len(r.fallbacks) == len({k for k in set(model.keys) | model.warmup
                                    if k.kernel != "attn"}) - 8
    assert r.verdict.startswith(f"NO: {len(r.fallbacks)} fall-backs")


def test_late_compiles_are_measured_not_assumed():
    """query-no-1: every decode bucket compiles late; pre-810 records no batched variants."""
    subject, bucketing = subject_and_bucketing(
        "pre-810", SMALL, Overrides.from_env(OVERRIDES["query-no-1"]))
    kernel, generation = subject.decode_kernel()
    wl = inline(["256,256,256,256", "64,100", "200"])
    r = count_graphs(kernel, generation, bucketing, SMALL, wl)
    late = ["batched[4, 4]", "attn[1, 1]", "attn[2, 1]", "attn[4, 1]"]
    assert [str(k) for k in r.late_keys] == late  # in the order the steps reach them
    assert r.graphs_workload == 4 and r.graphs_warmup == len(bucketing.variants)
    no_warmup = count_graphs(kernel, generation, bucketing, SMALL, wl, record_warmup=False)
    assert no_warmup.graphs == no_warmup.graphs_workload == 4 and no_warmup.matches_model


def test_counts_do_not_leak_between_runs():
    subject, bucketing = subject_and_bucketing("post-810-clamp")
    kernel, generation = subject.decode_kernel()
    wl = generate("uniform-long", SMALL, steps=3)
    first = count_graphs(kernel, generation, bucketing, SMALL, wl, record_warmup=False)
    second = count_graphs(kernel, generation, bucketing, SMALL, wl, record_warmup=False)
    assert first.graphs == second.graphs == len(first.model_keys) > 0


def _many_batched_keys(n_seqs=(4, 8), blocks=(1, 2, 3, 4, 8)) -> Workload:
    """One decode step per (num_seqs, num_blocks) bucket: len(n_seqs) * len(blocks) keys."""
    return inline([",".join([str(b * 64)] * n) for n in n_seqs for b in blocks])


def test_recompile_limit_fallback_is_noticed_at_the_default_limit():
    """Ten batched keys through one kernel: Dynamo compiles eight, the last two run eagerly."""
    config = SMALL.replace(max_model_len=1024)  # pre-810: num_seqs 1..8, num_blocks 1..16
    subject, bucketing = subject_and_bucketing("pre-810", config)
    kernel, generation = subject.decode_kernel()
    wl = _many_batched_keys(blocks=(1, 2, 4, 8, 16))
    keys = [workload_cost(bucketing, config, Workload("one", "", (step,))).keys[0]
            for step in wl.steps]
    assert len(set(keys)) == len(keys) == 10 and all(k.kernel == "batched" for k in keys)
    assert torch._dynamo.config.recompile_limit == 8
    r = count_graphs(kernel, generation, bucketing, config, wl, record_warmup=False, check=False)
    assert r.graphs == r.graphs_by_kernel["batched"] == r.unique_graphs == 8
    assert r.fallbacks == keys[8:]
    assert r.limit_hit and not r.matches_model and r.verdict.startswith("NO: 2 fall-backs")


def test_recompile_limit_fallback_with_a_lowered_limit():
    subject, bucketing = subject_and_bucketing("chunked")
    kernel, generation = subject.decode_kernel()
    wl = _many_batched_keys(blocks=(1, 2, 4))
    r = count_graphs(kernel, generation, bucketing, SMALL, wl, record_warmup=False,
                     recompile_limit=2)
    assert r.recompile_limit == 2 and r.limit_hit
    assert r.graphs == 2 and len(r.fallbacks) == len(r.model_keys) - 2 > 0
    raised = count_graphs(kernel, generation, bucketing, SMALL, wl, record_warmup=False,
                          recompile_limit=64)
    assert raised.graphs == len(raised.model_keys) and not raised.fallbacks


def test_a_kernel_dynamo_does_not_compile_is_flagged():
    """A kernel Dynamo skips compiles no graph for any key: not the model's count, and said so."""
    subject, bucketing = subject_and_bucketing("post-810-clamp")
    kernel, generation = subject.decode_kernel()
    wl = inline(["64,64,64,64", "128,128,128,128"])
    opaque = torch._dynamo.disable(kernel)

    def kernel_behind_a_disabled_call(*args, **kwargs):
        return opaque(*args, **kwargs)

    r = count_graphs(kernel_behind_a_disabled_call, generation, bucketing, SMALL, wl,
                     record_warmup=False)
    assert r.graphs == 0 and len(r.uncompiled) == 2 and not r.fallbacks and not r.limit_hit
    assert not r.matches_model and "2 keys compiled no graph" in r.verdict


@pytest.mark.inductor
def test_inductor_counts_and_times_cold_compiles():
    subject, bucketing = subject_and_bucketing("post-810-clamp")
    kernel, generation = subject.decode_kernel()
    wl = inline(["64,64,64,64", "200,200,200,200"])
    r = count_graphs(kernel, generation, bucketing, SMALL, wl, backend="inductor",
                     record_warmup=False)
    assert r.graphs == len(r.model_keys) == 2 and r.matches_model
    assert r.checked_calls == 2
    assert all(s > 0 for s in r.compile_seconds.values())
    assert r.inductor_cache.get("fxgraph_cache_miss", 0) >= 1
    assert r.inductor_cache.get("fxgraph_cache_hit", 0) == 0


def _figures(r, error: bool = True) -> dict:
    """A count's figures, compile seconds left out (a measured time, never twice the same), and
    the oracle's error too where the runs' K/V data differ (a case session's workspace is
    sized for every workload of the case)."""
    d = r.as_dict()
    for k in ("compile_seconds", "compile_seconds_total", "compile_seconds_mean",
              "compile_seconds_max") + (() if error else ("max_abs_error",)):
        d.pop(k)
    return d


@pytest.mark.parametrize("policy,overrides,workload", [
    ("post-810-clamp", "batched", "bimodal"),
    ("chunked", "num-seqs-low", "bimodal"),   # falls back during warmup at the default limit
])
def test_shape_only_calls_count_what_computed_calls_count(policy, overrides, workload):
    _, ran = _count(policy, overrides, workload, shape_only=())
    run = _figures(ran)
    checks = {k: run.pop(k) for k in ("checked_calls", "max_abs_error")}
    assert checks["checked_calls"] == ran.graphs + len(ran.fallbacks)   # every key, computed
    for phases in (("warmup",), ("warmup", "workload")):
        _, shaped = _count(policy, overrides, workload, shape_only=phases)
        figures = _figures(shaped)
        # what a shape-only phase reaches is never computed, fall-backs included (Dynamo
        # declines them at the limit instead of running them eagerly)
        computed = set() if "workload" in phases else set(shaped.model_keys)
        assert figures.pop("checked_calls") == len(computed)
        figures.pop("max_abs_error")
        assert figures == run


def _case_runs(policy, overrides, names, config=SMALL, **kwargs):
    """Each workload counted alone, and the same workloads through one case session."""
    subject, bucketing = subject_and_bucketing(policy, config,
                                               Overrides.from_env(OVERRIDES[overrides]))
    kernel, generation = subject.decode_kernel()
    wls = [generate(n, config, steps=6, seed=1) if isinstance(n, str) else n for n in names]
    alone = [count_graphs(kernel, generation, bucketing, config, w, **kwargs) for w in wls]
    end_sessions()
    shared = [case_graphs(kernel, generation, bucketing, config, w, device=select("cpu"),
                          max_cache_bytes=1 << 30, **kwargs) for w in wls]
    return alone, shared


@pytest.mark.parametrize("policy,overrides", [
    ("post-810-clamp", "batched"), ("chunked", "num-seqs-low"), ("pre-810", "query-no-1")])
def test_a_case_session_gives_each_workload_its_own_figures(policy, overrides):
    names = ["bimodal", "uniform-long", "mixed-prefill-decode", "bimodal"]
    alone, shared = _case_runs(policy, overrides, names)
    assert [_figures(r, False) for r in shared] == [_figures(r, False) for r in alone]
    assert session_workloads() == len(names)   # all four counted in one session


def test_a_limit_filled_by_late_keys_is_counted_in_a_session_of_its_own():
    """Workload 1 fills the batched kernel's limit with late keys; workload 2's own keys would
    fall back in the case session but compile in a run of its own: it is counted alone, and the
    case session stays for workload 3."""
    config = SMALL.replace(max_model_len=1024)
    first = _many_batched_keys(blocks=(1, 2, 4, 8))
    second = _many_batched_keys(blocks=(16,))
    alone, shared = _case_runs("pre-810", "batched", [first, second, first], config,
                               record_warmup=False)
    assert alone[0].graphs == 8 and not alone[0].fallbacks   # the limit, reached
    assert alone[1].graphs == 2 and not alone[1].fallbacks   # its keys compile alone
    assert session_workloads() == 2   # workloads 1 and 3
    assert [_figures(r, False) for r in shared] == [_figures(r, False) for r in alone]


def test_a_kernel_with_a_graph_break_is_never_shared():
    subject, bucketing = subject_and_bucketing("post-810-clamp")
    kernel, generation = subject.decode_kernel()

    def broken(query, *args, **kwargs):
        query = query * 1   # a graph before the break that every key shares (query's shape)
        torch._dynamo.graph_break()
        return kernel(query, *args, **kwargs)

    # shared, the second key would reuse the graph before the break that the first compiled
    wls = [inline(["64,64,64,64"]), inline(["128,128,128,128"])]
    alone = [count_graphs(broken, generation, bucketing, SMALL, w) for w in wls]
    end_sessions()
    shared = [case_graphs(broken, generation, bucketing, SMALL, w, device=select("cpu"),
                          max_cache_bytes=1 << 30) for w in wls]
    assert alone[1].graphs_by_kernel["batched"] == len(alone[1].model_keys) + 1 == 2
    assert session_workloads() == 1
    assert [_figures(r, False) for r in shared] == [_figures(r, False) for r in alone]
