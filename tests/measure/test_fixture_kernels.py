"""The fixture commits' own kernels and bucketers (git: subjects), measured like any subject."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness.config import Overrides
from harness.matrix import Case
from harness.measure.compiles import count_graphs
from harness.measure.device import select
from harness.measure.kernel_figures import KernelOptions, measure_workload
from harness.model.cost import workload_cost
from harness.subjects import resolve_subject
from harness.workloads import WorkloadSpec, generate, inline
from tests.fixtures.spyre_repo import KERNEL_GENERATION, REFERENCE_POLICY
from tests.measure.helpers import BATCHED, SMALL, subject_and_bucketing

QUERY_NO_1 = Overrides.from_env({"SPYRE_BATCHED_DECODE": "1",
                                 "SPYRE_ATTN_QUERY_BUCKETS": "128,256"})


@pytest.mark.parametrize("generation,overrides,workload", [
    ("pre-810", BATCHED, "bimodal"),
    ("810-topup", QUERY_NO_1, "mixed-prefill-decode"),
    ("810-clamp", BATCHED, "uniform-long"),
], ids=["pre-810", "810-topup-query-no-1", "810-clamp"])
def test_fixture_commit_graphs_equal_model_keys(spyre_repo, generation, overrides, workload):
    subject = resolve_subject(spyre_repo.spec(generation))
    kernel, kernel_generation = subject.decode_kernel()
    assert kernel_generation == KERNEL_GENERATION[generation]
    assert kernel.__code__.co_filename.endswith(".py") and "harness" not in \
        kernel.__code__.co_filename  # the commit's own kernel, not the reference
    bucketing = subject.bucketing(SMALL, overrides)
    wl = generate(workload, SMALL, steps=6, seed=2)
    model = workload_cost(bucketing, SMALL, wl)
    r = count_graphs(kernel, kernel_generation, bucketing, SMALL, wl, recompile_limit=64)
    assert r.matches_model and not r.fallbacks
    assert r.graphs == len(set(model.keys) | model.warmup)
    assert r.graphs_workload == len(model.late_compiles)
    # the embedded reference policy of the same generation compiles the same keys
    _, ref_bucketing = subject_and_bucketing(REFERENCE_POLICY[generation], SMALL,
                                                     overrides)
    assert workload_cost(ref_bucketing, SMALL, wl).keys == model.keys


@pytest.mark.parametrize("generation", ["gen3", "gen4"])
def test_a_kernel_of_the_real_generation_b_convention_runs_through_its_forward(spyre_repo,
                                                                              generation):
    subject = resolve_subject(spyre_repo.spec(generation))
    assert subject.decode_kernel() is None
    assert "run through its SpyreAttentionImpl.forward()" in subject.lacks("decode_kernel_b")
    spec = WorkloadSpec("bimodal", mix="bimodal", steps=4)
    row = measure_workload(subject, Case(SMALL, BATCHED, "b"), spec,
                           KernelOptions(select("cpu"), time=False))
    assert row["generation"] == "forward" and "skipped" not in row and "wrong" not in row
    graphs = row["graphs"]
    (cost,) = subject.workload_costs(SMALL, BATCHED, [spec.build(SMALL)])
    keys = {k for step in cost.steps for k in step.keys}
    # dynamic=False guards on every tensor shape: the query's row count (the step's tokens,
    # unpadded) is one more axis than the builder's keys, so steps of one key can compile apart
    assert graphs["graphs"] >= len(keys) and set(graphs["graphs_by_kernel"]) <= {
        "batched_decode_kernel", "_page_attn_kernel"}
    assert graphs["checked_calls"] == 4 and graphs["fallbacks"] == 0


def test_a_commit_without_a_bucketer_is_a_skip(spyre_repo):
    subject = resolve_subject(spyre_repo.spec("no-bucketer"))
    spec = WorkloadSpec("steps", fixed=inline(["256,1,65,130"]))
    row = measure_workload(subject, Case(SMALL, BATCHED, "batched"), spec,
                           KernelOptions(device=select("cpu"), repeat=2, warmup=1, number=1))
    assert "skipped" in row and "timing" not in row


def test_kernel_cli_on_two_commits(spyre_repo, capsys):
    code = main(["kernel", "--base", spyre_repo.spec("810-clamp"),
                 "--head", spyre_repo.spec("pre-810"), "--block-size", "64",
                 "--max-model-len", "256", "--max-num-seqs", "8", "--max-num-batched-tokens",
                 "256", "--num-kv-heads", "2", "--queries-per-kv", "2", "--head-size", "16",
                 "--step", "256,256,256,256", "--repeat", "2", "--warmup", "1", "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    gens = [(r["generation"], r["graphs"]["verdict"], r["timing"]["shapes"][0]["shape"])
            for r in doc["rows"]]
    # a commit's kernels run through its own forward, whatever their convention
    assert gens == [("forward", "yes", "batched[4, 4]"), ("forward", "yes", "batched[4, 4]")]
