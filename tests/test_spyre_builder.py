"""Figures from each commit's own metadata builder: build() and one layer of forward() per step.

The fixture's generation-3 builder mirrors the real interfaces (module-level chunking, the
generation-B tensors, transfers through custom_ops.utils.convert), so its figures are the code's,
and editing that code changes them with no harness change.
"""

from __future__ import annotations

import pytest

from harness.config import EngineConfig, Overrides
from harness.evaluate import config_figures, workload_figures
from harness.matrix import Case
from harness.subjects import resolve_subject
from harness.workloads import Seq, Workload
from tests.fixtures.spyre_repo import BACKEND, GENERATIONS, MIXED_810, OPS_KERNEL

REVIEW = Overrides.from_env({"SPYRE_ATTN_KV_BUCKETS": "128,8192", "SPYRE_BATCHED_DECODE": "1"})
CASE = Case(EngineConfig(block_size=64, max_model_len=2048), REVIEW, "review")


def four_decodes(subject, case=CASE):
    step = tuple(Seq(150) for _ in range(4))
    (cost,) = subject.workload_costs(case.config, case.overrides,
                                     [Workload("four-3-block", "review step", (step,))])
    return cost


def test_generation_3_four_3_block_decodes_are_4_iterations_and_6_transfers(spyre_repo):
    subject = resolve_subject(spyre_repo.spec("gen3"))
    cost = four_decodes(subject)
    (step,) = cost.steps
    d = step.dispatch
    assert (d.path, d.b_seqs, d.b_blocks, d.blocks_per_chunk, d.num_chunks) == (
        "batched", 4, 32, 8, 4)  # 32 blocks in chunks of 8
    assert step.iterations_per_layer == 4
    assert step.transfers == 6  # rep_row_ids, one page-id tensor per chunk, the mask
    entries = 4 * 8
    assert step.h2d == {"rep_row_ids": 4 * entries, "chunk_page_ids": 4 * (4 * entries),
                        "mask_by_chunk": 2 * 4 * entries * 8 * 64}
    # The embedded model counts 3 transfers for the same step: the builder is the reference.
    reference = four_decodes(resolve_subject("reference:chunked")).steps[0]
    assert reference.transfers == 3 and reference.iterations_per_layer == 4


def test_editing_the_builder_changes_the_figures_with_no_harness_change(spyre_repo):
    """One stacked transfer for the page ids instead of one per chunk: 3 transfers, not 6."""
    rev = spyre_repo.edit(
        BACKEND,
        '"chunk_page_ids": [convert(t, device=device) for t in cpu["chunk_page_ids"]],',
        '"chunk_page_ids": list(convert(torch.stack(cpu["chunk_page_ids"]), device=device)),',
        parent="gen3", message="mirror the chunk page ids in one transfer")
    before = four_decodes(resolve_subject(spyre_repo.spec("gen3"))).steps[0]
    after = four_decodes(resolve_subject(spyre_repo.spec(rev))).steps[0]
    assert (before.transfers, after.transfers) == (6, 3)
    # Same bytes; the stacked tensor is held by no metadata field: named after the subject's
    # function that copied it
    assert after.h2d_bytes == before.h2d_bytes
    assert after.h2d["forward"] == before.h2d["chunk_page_ids"]
    assert after.iterations_per_layer == before.iterations_per_layer == 4


def test_an_810_bucketer_under_the_pre_810_builder_reports_the_builders_ladders(spyre_repo):
    mixed = config_figures(resolve_subject(spyre_repo.spec(MIXED_810)), CASE)
    merged = config_figures(resolve_subject(spyre_repo.spec("810-clamp")), CASE)
    assert mixed["ladders"]["num_seqs"] == [4, 8, 16, 32]  # the bucketer has the axis ...
    assert mixed["ladders"]["batched_num_blocks"] == [1, 2, 4, 8, 16, 32]  # ... the builder wins
    assert mixed["ladders"]["batched_num_seqs"] == [1, 2, 4, 8, 16, 32]
    assert merged["ladders"]["batched_num_blocks"] == [2, 32]
    cost = four_decodes(resolve_subject(spyre_repo.spec(MIXED_810)))
    assert (cost.steps[0].dispatch.b_blocks, cost.steps[0].iterations_per_layer) == (4, 4)


def test_generation_3_batches_the_decode_prefix_of_a_mixed_batch(spyre_repo):
    mixed = Workload("mixed", "4 decodes then a prefill",
                     (tuple(Seq(300) for _ in range(4)) + (Seq(600, 64),),))
    for gen, path in (("gen3", "mixed"), ("810-clamp", "per-sequence")):
        subject = resolve_subject(spyre_repo.spec(gen))
        (cost,) = subject.workload_costs(CASE.config, CASE.overrides, [mixed])
        assert cost.steps[0].dispatch.path == path, gen


def test_the_upstream_history_without_a_bucketer_skips_every_figure(spyre_repo):
    subject = resolve_subject(spyre_repo.spec(GENERATIONS[0]))
    config = config_figures(subject, CASE)
    assert set(config) == {"skipped"} and "no bucketer yet" in config["skipped"]
    from harness.workloads import specs

    rows = workload_figures(subject, CASE, specs(steps=2))
    assert rows and all(set(r) == {"skipped"} and "no bucketer yet" in r["skipped"]
                        for r in rows.values())


def test_a_vllm_name_no_stand_in_covers_is_a_skip_naming_it(spyre_repo):
    rev = spyre_repo.edit(BACKEND, "from vllm.logger import init_logger\n",
                          "from vllm.logger import init_logger\n"
                          "from vllm.distributed import get_tp_group  # noqa: F401\n",
                          parent="gen3")
    figures = config_figures(resolve_subject(spyre_repo.spec(rev)), CASE)
    assert "vllm.distributed" in figures["skipped"]
    assert "cannot be loaded with spyre-bench's vLLM stand-ins" in figures["skipped"]


@pytest.mark.parametrize("line, said", [
    ("import spyre_inference.v1.attention.gone", "imports spyre_inference.v1.attention.gone"),
    ("from spyre_inference.v1.attention.backends import gone",
     "imports a name from spyre_inference.v1.attention.backends")])
def test_a_spyre_inference_module_missing_from_the_tree_is_the_commits_gap(spyre_repo, line,
                                                                           said):
    from harness.workloads import specs

    rev = spyre_repo.edit(BACKEND, "from vllm.logger import init_logger\n",
                          f"from vllm.logger import init_logger\n{line}  # noqa: F401\n",
                          parent="gen3")
    (figures,) = workload_figures(resolve_subject(spyre_repo.spec(rev)), CASE,
                                  specs([], [], ["150,150,150,150"])).values()
    assert f"{said}, which is not in this commit's tree" in figures["skipped"]
    assert "stand-in" not in figures["skipped"]


@pytest.mark.parametrize("generation", ["pre-810", "810-topup", "810-clamp"])
def test_generation_a_builders_agree_with_the_model_on_the_review_step(spyre_repo, generation):
    from tests.fixtures.spyre_repo import REFERENCE_POLICY

    got = four_decodes(resolve_subject(spyre_repo.spec(generation))).steps[0]
    want = four_decodes(resolve_subject(f"reference:{REFERENCE_POLICY[generation]}")).steps[0]
    assert (got.iterations_per_layer, got.transfers, got.h2d_bytes, got.keys) == (
        want.iterations_per_layer, want.transfers, want.h2d_bytes, want.keys)


def test_crosscheck_lists_where_the_builder_and_the_model_disagree(spyre_repo, capsys):
    from harness.cli import main

    common = ["--batched", "--env", "SPYRE_ATTN_KV_BUCKETS=128,8192", "--block-size", "64",
              "--max-model-len", "2048", "--step", "150,150,150,150"]
    assert main(["crosscheck", "--subject", spyre_repo.spec("gen3"), "--policy", "chunked",
                 *common]) == 1
    out = capsys.readouterr().out
    assert "transfers_per_step: builder 6.0 | model 3.0" in out
    assert main(["crosscheck", "--subject", spyre_repo.spec("810-clamp"), "--policy",
                 "post-810-clamp", *common]) == 0
    assert capsys.readouterr().out.strip().startswith("0 disagreement(s)")


def test_the_override_rule_is_told_apart_by_asking_the_bucketer(spyre_repo):
    rules = {g: resolve_subject(spyre_repo.spec(g)).describe()["override_rule"]
             for g in GENERATIONS}
    assert rules == {"no-bucketer": None, "pre-810": "top-up", "810-topup": "top-up",
                     "810-clamp": "clamp", "gen3": "clamp", "gen4": "clamp"}


def _kernel(query, rows, pages, *, scale, num_seqs, out=None, block_size=64):
    return query


@pytest.mark.parametrize("args, kwargs", [
    (("q", "r", "p"), {"scale": 0.5, "num_seqs": 4}),
    (("q",), {"rows": "r", "pages": "p", "scale": 0.5, "num_seqs": 4, "out": "o"}),
    (("q", "r", "p"), {"scale": 0.5, "num_seqs": 4, "block_size": 192}),
])
def test_a_recorded_kernel_call_binds_as_the_signature_does(args, kwargs):
    import inspect

    from harness.subjects.spyre.drive.kernel_proxy import KernelProxy
    expected = inspect.signature(_kernel).bind(*args, **kwargs)
    expected.apply_defaults()
    got = KernelProxy(_kernel, {}).bind(args, kwargs)
    assert got == dict(expected.arguments) and list(got) == list(expected.arguments)


@pytest.mark.parametrize("args, kwargs", [
    (("q", "r", "p", "extra"), {"scale": 0.5, "num_seqs": 4}),   # too many positionals
    (("q", "r", "p"), {"scale": 0.5}),                            # a required one missing
    (("q", "r", "p"), {"scale": 0.5, "num_seqs": 4, "bogus": 1}),  # an unknown name
    (("q", "r", "p"), {"query": "again", "scale": 0.5, "num_seqs": 4}),  # given twice
])
def test_a_recorded_kernel_call_the_signature_refuses_raises_its_type_error(args, kwargs):
    import inspect

    from harness.subjects.spyre.drive.kernel_proxy import KernelProxy
    with pytest.raises(TypeError) as expected:
        inspect.signature(_kernel).bind(*args, **kwargs)
    with pytest.raises(TypeError) as got:
        KernelProxy(_kernel, {}).bind(args, kwargs)
    assert str(got.value) == str(expected.value)


def test_a_closed_builder_session_leaves_nothing_of_the_commit_alive(spyre_repo):
    """A config's load is gone once its figures are in: no recorded kernel call (the step's
    tensors), no proxy, no class of the commit stays reachable (a full tier loads hundreds)."""
    import gc
    import weakref

    from harness.subjects.spyre.drive.session import BuilderSession
    subject = resolve_subject(spyre_repo.spec("gen3"))
    with BuilderSession(subject.tree, subject.origin, CASE.config, CASE.overrides) as session:
        session.record_step(tuple(Seq(150) for _ in range(4)))
        builder_cls = weakref.ref(type(session.builder))
        module = weakref.ref(session.module)
        proxies = [weakref.ref(p) for p in session.proxies]
    del session
    gc.collect()
    assert builder_cls() is None and module() is None
    # (this load's own: a kernel torch.compile'd for measurement is kept by Dynamo's guards in
    # torch 2.13 even after torch._dynamo.reset(), which another test's process may show)
    assert proxies and not [p for p in proxies if p() is not None]


def _costs_in_order(spyre_repo, steps):
    """A fresh load of the newest-style fixture commit driving ``steps`` in the given order."""
    from harness.subjects.memo.figures import FIGURES

    FIGURES.clear()
    subject = resolve_subject(spyre_repo.spec("gen4"))
    return [subject.workload_costs(CASE.config, CASE.overrides,
                                   [Workload(f"w{i}", "one step", (step,))])[0]
            for i, step in enumerate(steps)]


def test_one_time_staging_is_no_steps_cost_and_step_figures_do_not_depend_on_order(spyre_repo):
    prefill = (Seq(2048, 300), Seq(512))        # per sequence: stages the buffers on first use
    decodes = tuple(Seq(150) for _ in range(6))  # batched: six decodes pad to eight
    first, second = _costs_in_order(spyre_repo, [prefill, decodes])
    again_second, again_first = _costs_in_order(spyre_repo, [decodes, prefill])
    assert first.steps[0].h2d == again_first.steps[0].h2d
    assert second.steps[0].h2d == again_second.steps[0].h2d
    # the per-step slot index reaches the device every step (attn_layer's publish)
    assert first.steps[0].h2d["kv_write_index"] == 8 * 301
    assert second.steps[0].h2d["kv_write_index"] == 8 * 6
    # the staging buffers are the engine's, reported apart, whichever step came first
    staged = 2 * 8 * 32 * 128 * 2
    assert "forward" not in first.steps[0].h2d and "_staging_buffers" not in first.steps[0].h2d
    # and what the builder warned building it (its bucketer, on the review's kv override)
    said = ["SPYRE_ATTN_KV_BUCKETS=128,8192: dropping [8192] above 2048",
            "SPYRE_ATTN_KV_BUCKETS=128,8192: appending 2048"]
    for cost in (first, second, again_first, again_second):
        assert cost.setup == {"transfers": 2, "by_tensor": {"_staging_buffers": staged},
                              "notes": said}
        assert cost.as_dict()["setup_h2d_bytes"] == staged


def test_a_non_power_of_two_decode_batch_gives_every_row(spyre_repo):
    """Six decodes pad to eight: the recorded kernel hands back [8, H, D], as the real one."""
    (cost,) = _costs_in_order(spyre_repo, [tuple(Seq(150) for _ in range(6))])
    d = cost.steps[0].dispatch
    assert (d.path, d.b_seqs) == ("batched", 8)


def test_a_chunked_kernel_naming_its_index_chunk_row_ids_is_counted_as_such(spyre_repo):
    """The head-major kernel of a stored commit calls its per-chunk index ``chunk_row_ids``:
    its loop count is read from it, as from ``chunk_page_ids`` (no "cannot tell" skip)."""
    kernel = spyre_repo.read("gen3", OPS_KERNEL)
    renamed = spyre_repo.add_commit({OPS_KERNEL: kernel.replace("chunk_page_ids", "chunk_row_ids")},
                                    "kernel: chunk_row_ids", parent="gen3")
    (step,) = four_decodes(resolve_subject(spyre_repo.spec(renamed))).steps
    assert step.iterations_per_layer == 4 and step.dispatch.num_chunks == 4


def test_widened_int32_indices_compile_a_kernel_once_not_once_per_call():
    """Dynamo guards on the active torch-function mode: one mode object for the process, so a
    kernel run with int32 indices widened is one graph however often it is called."""
    import torch
    from torch._dynamo.testing import CompileCounter

    from harness.subjects.spyre.drive.kernel_proxy import _int32_indices

    def kernel(out, index, src):
        return out.index_copy_(0, index, src)

    counter = CompileCounter()
    compiled = torch.compile(kernel, backend=counter, dynamic=False)
    torch._dynamo.reset()
    for _ in range(5):
        with _int32_indices():
            got = compiled(torch.zeros(4, 2), torch.tensor([2, 0], dtype=torch.int32),
                           torch.ones(2, 2))
    assert got[[0, 2]].eq(1).all() and got[[1, 3]].eq(0).all()
    assert _int32_indices() is _int32_indices()
    assert counter.frame_count == 1
