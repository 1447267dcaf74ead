"""The ladder frontier: the optimiser is exact, every point is the subject's own figure, and the
command reads as documented (table, JSON, plot, a PR's verdict)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.analyze.frontier import frontier, pr_frontier
from harness.analyze.frontier_opt import OBJECTIVES, CostModel, Launch, best_ladders, modelled_cost
from harness.config import EngineConfig, Overrides
from harness.evaluate import workload_figures
from harness.matrix import Case
from harness.subjects import resolve_subject
from harness.workloads import Workload, WorkloadSpec, parse_step, specs

BATCHED = Overrides.from_env({"SPYRE_BATCHED_DECODE": "1"})
KV = "SPYRE_ATTN_KV_BUCKETS"


def case(bs=192, mml=2048, overrides=BATCHED, **more) -> Case:
    return Case(EngineConfig(block_size=bs, max_model_len=mml, **more), overrides, "batched")


# -- the optimiser, against an exhaustive search ----------------------------------------------

@st.composite
def small_cases(draw):
    axis = draw(st.sampled_from(["kv", "num_seqs", "query"]))
    top = draw(st.integers(2, 9))
    config = EngineConfig(block_size=64, max_model_len=64 * top, max_num_seqs=32)
    chunked = draw(st.booleans())
    launches = Counter()
    for _ in range(draw(st.integers(1, 8))):
        batched = axis == "num_seqs" or (axis == "kv" and draw(st.booleans()))
        launch = Launch(batched, draw(st.integers(1, top)), seqs=draw(st.integers(1, 32)),
                        blocks=draw(st.integers(1, 12)), query=draw(st.integers(1, 64)))
        launches[launch] += draw(st.integers(1, 3))
    return CostModel(axis, config, chunked), launches, top


@settings(max_examples=150, deadline=None)
@given(small_cases())
def test_no_ladder_of_a_size_beats_the_optimisers_best_of_that_size(drawn):
    model, launches, top = drawn
    proposals = best_ladders(launches, model, top, range(1, top + 1))
    for k, found in proposals.items():
        every = [(*rest, top) for rest in itertools.combinations(range(1, top), k - 1)]
        for p in found:
            o = OBJECTIVES.index(p.objective)
            assert p.ladder[-1] == top and len(p.ladder) == k
            assert modelled_cost(launches, model, p.ladder) == p.modelled
            best = min(modelled_cost(launches, model, ladder)[o] for ladder in every)
            assert p.modelled[o] == best, (k, p, best)


@pytest.mark.parametrize("policy,objective,figure", [
    ("post-810-clamp", "padding", "padded_slots_per_real_token"),
    ("chunked", "iterations", "iterations_per_layer_mean"),
    ("pre-810", "bytes", "h2d_bytes_per_step")])
def test_the_best_ladder_of_a_size_is_never_beaten_in_the_subjects_own_figures(
        policy, objective, figure):
    """Exhaustive on a small case: every kv ladder of 1-4 buckets at bs 192, mml 2048 (top 11
    blocks), evaluated by the reference's own code, never beats the frontier's best of its size
    for the figure the optimiser minimised."""
    subject = resolve_subject(f"reference:{policy}")
    at = case(overrides=Overrides() if policy == "pre-810" else BATCHED)
    spec = specs(["long-tail"], steps=8)[0]
    f = frontier(subject, at, spec, "kv", range(1, 5))
    for k in range(1, 5):
        best = next(p for p in f.points if f"best {k} for {objective}" in p.marks)
        for rest in itertools.combinations(range(1, 11), k - 1):
            env = ",".join(str(b * 192) for b in rest) + ",2048"
            trial = Case(at.config, at.overrides.with_env(**{KV: env}), "trial")
            exact = workload_figures(subject, trial, [spec])[spec.name][figure]
            assert best.costs[figure] <= exact, (k, rest, best)


# -- every point is the subject's own figure ---------------------------------------------------

def spyre_bench(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_every_point_is_what_cost_gives_for_its_override():
    proc = spyre_bench("frontier", "--block-size", "192", "--max-model-len", "2048",
                       "--workload", "bimodal", "--json")
    [f] = json.loads(proc.stdout)
    assert f["axis"] == "kv" and f["ladder"] == "batched_num_blocks"
    default = [p for p in f["points"] if "default" in p["marks"]]
    assert [p["ladder"] for p in default] == [[2, 3, 6, 11]] and default[0]["env"] is None
    assert any(not p["dominated"] for p in f["points"])
    subject = resolve_subject("reference:post-810-clamp")
    spec = specs(["bimodal"])[0]
    for p in f["points"]:
        env = {KV: p["env"]} if p["env"] else {}
        exact = workload_figures(subject, case(overrides=BATCHED.with_env(**env)), [spec])
        for figure in ("padded_slots_per_real_token", "iterations_per_layer_mean",
                       "h2d_bytes_per_step"):
            assert p[figure] == exact["bimodal"][figure], (p, figure)
    # dominated: another point compiles no more graphs and costs no more, and beats it once
    names = ("graphs", "padded_slots_per_real_token", "iterations_per_layer_mean",
             "h2d_bytes_per_step")

    def beats(q, p):
        return all(q[n] <= p[n] for n in names) and any(q[n] < p[n] for n in names)

    for p in f["points"]:
        assert p["dominated"] == any(beats(q, p) for q in f["points"] if q is not p), p


def test_the_table_and_the_plots(tmp_path):
    proc = spyre_bench("frontier", "--block-size", "192", "--max-model-len", "2048",
                       "--workload", "long-tail", "--plot", str(tmp_path / "f.png"))
    assert "kv frontier of reference:post-810-clamp: bs 192, mml 2048" in proc.stdout
    assert "[2,3,6,11]" in proc.stdout and "dominated" in proc.stdout
    assert "the config's [2,3,6,11] (30 graphs) pads 2.61 % more than [2,4,8,11]" in proc.stdout
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    proc = spyre_bench("frontier", "--block-size", "192", "--max-model-len", "2048",
                       "--workload", "long-tail", "--workload", "bimodal",
                       "--plot", str(tmp_path / "g.svg"))
    written = sorted(p.name for p in tmp_path.glob("g.*.svg"))
    assert written == ["g.bs192-mml2048-mns32-batched-bimodal.svg",
                       "g.bs192-mml2048-mns32-batched-long-tail.svg"], written
    assert all("<svg" in (tmp_path / n).read_text() for n in written)


def test_a_prs_two_ladders_on_the_heads_frontier():
    base, head = (resolve_subject(f"reference:{p}") for p in ("pre-810", "post-810-clamp"))
    spec = specs(["four-3-block-decodes"], steps=8)[0]
    f = pr_frontier(base, head, case(), spec, "kv", range(1, 5))
    assert f.marked("base").ladder == (1, 2, 4, 8, 11)     # the base's, on the head's code
    assert f.marked("head").ladder == (2, 3, 6, 11) and f.marked("head").env is None
    proc = spyre_bench("frontier", "--base", "reference:pre-810", "--head",
                       "reference:post-810-clamp", "--block-size", "192", "--max-model-len",
                       "2048", "--workload", "four-3-block-decodes", "--budget", "4")
    last = " ".join(proc.stdout.split()[-60:])
    assert "🟢 improvement: −6 compiled graphs, −25 % iterations, −25 % padding" in last
    assert "the base's [1,2,4,8,11] (36 graphs) pads 33.3 % more than [3,11]" in last


def test_the_num_seqs_and_query_axes():
    subject = resolve_subject("reference:post-810-clamp")
    f = frontier(subject, case(), specs(["uniform-long"], steps=8)[0], "num_seqs", range(1, 4))
    assert f.axis.shown == "batched_num_seqs" and f.marked("default").ladder == (4, 8, 16, 32)
    assert all(p.ladder[-1] == 32 for p in f.points)
    mixed = specs(["mixed-prefill-decode"], steps=8)[0]
    q = frontier(subject, case(overrides=Overrides()), mixed, "query", range(1, 4))
    assert q.axis.shown == "query" and all(p.ladder[0] == 1 for p in q.points)


def test_a_trace_with_no_decodes_and_an_axis_without_override_are_refused():
    from harness.errors import ConfigError, TraceError
    prefills = WorkloadSpec("prefills", fixed=Workload("prefills", "",
                                                       (parse_step("300,400 | 20,30"),)))
    with pytest.raises(TraceError, match="no decode in it"):
        frontier(resolve_subject("reference:post-810-clamp"), case(), prefills, "kv")
    with pytest.raises(ConfigError, match="no env override for the num_seqs axis"):
        frontier(resolve_subject("reference:pre-810"), case(), specs(["bimodal"])[0],
                 "num_seqs")


def test_a_workload_at_the_top_still_gets_the_one_bucket_ladder():
    """Every sequence at max_model_len: no ladder pads less, so the cheapest one (a single
    bucket) dominates the config's own."""
    f = frontier(resolve_subject("reference:post-810-clamp"), case(),
                 specs(["all-at-max"], steps=4)[0], "kv")
    assert [p.ladder for p in f.points] == [(11,), (2, 3, 6, 11)]
    assert f.points[1].dominated and not f.points[0].dominated
