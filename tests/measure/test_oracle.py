"""The reference kernels agree with the oracle; deliberately wrong kernels are caught loudly."""

from __future__ import annotations

import pytest
import torch

from harness.matrix import Case
from harness.measure.device import select
from harness.measure.inputs import Workspace
from harness.measure.kernel_figures import KernelOptions, measure_workload
from harness.measure.oracle import KernelMismatch, check_call, check_step, compare
from harness.subjects.base import Subject
from harness.subjects.reference.kernels import (
    ACC,
    _finish,
    _initial_state,
    attend_sequence,
    batched_decode_chunked,
    batched_decode_per_block,
)
from harness.workloads import WorkloadSpec, inline, parse_step
from tests.measure.helpers import BATCHED, SMALL, subject_and_bucketing

STEPS = [parse_step("256,1,65,130"),                 # batched, ragged, one 1-token sequence
         parse_step("200,64,3,129,250,17"),          # 6 decodes -> B_s 8 (two padded rows)
         parse_step("256,100"),                      # below the minimum: per-sequence
         parse_step("64,64,64,64,200 | 1,1,1,1,70")]  # prefill in the batch


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("policy", ["post-810-clamp", "chunked", "latest"])
@pytest.mark.parametrize("soft_cap", [0.0, 2.0])
def test_reference_kernels_match_the_oracle(dtype, policy, soft_cap):
    config = SMALL.replace(dtype=dtype)
    subject, bucketing = subject_and_bucketing(policy, config)
    kernel, _ = subject.decode_kernel()
    ws = Workspace.for_steps(config, STEPS, soft_cap=soft_cap)
    for i, step in enumerate(STEPS):
        calls = ws.step(bucketing, step, seed=i)
        checks = check_step(calls, calls.run(kernel, attend_sequence))
        assert len(checks) == calls.launches and all(c.ok for c in checks)


def test_out_argument_is_written_in_place():
    subject, bucketing = subject_and_bucketing("post-810-clamp")
    kernel, _ = subject.decode_kernel()
    ws = Workspace.for_steps(SMALL, STEPS)
    call = ws.step(bucketing, STEPS[1]).batched
    out = torch.zeros(16, SMALL.num_heads, SMALL.head_size, dtype=torch.float16)
    returned = kernel(*call.args(), out=out)
    assert returned is out and out[8:].abs().sum() == 0
    check_call(call, out)


# -- deliberately wrong kernels ----------------------------------------------------------------

def _buggy_per_block(bug: str):
    """Generation A with one classic online-softmax bug planted.

    ``cap-after-mask``: the soft cap squashes the mask too, so masked keys get -cap, not -inf;
    ``no-rescale``: the running output is not rescaled when the running max moves.
    """
    def kernel(query, query_row_ids, k_pages, v_pages, block_ids, mask_by_block, scale,
               num_seqs, num_blocks, num_kv_heads, num_queries_per_kv, block_size, head_size,
               logits_soft_cap=0.0, out=None):
        q = query.index_select(0, query_row_ids).view(
            num_seqs, num_kv_heads, num_queries_per_kv, head_size).to(ACC)
        state = _initial_state((num_seqs, num_kv_heads, num_queries_per_kv), head_size,
                               query.device)
        for b in range(num_blocks):
            pages = block_ids[b, :num_seqs]
            k = k_pages.index_select(0, pages).to(ACC).permute(0, 2, 3, 1)
            v = v_pages.index_select(0, pages).to(ACC).permute(0, 2, 1, 3)
            mask = mask_by_block[b].view(num_seqs, num_kv_heads, 1, block_size).to(ACC)
            scores = torch.matmul(q, k) * scale + mask
            if bug == "cap-after-mask":
                scores = logits_soft_cap * torch.tanh(scores / logits_soft_cap)
            m, s, o = state
            new_m = torch.maximum(m, scores.amax(-1, keepdim=True))
            p = torch.exp(scores - new_m)
            a = torch.exp(m - new_m)
            kept = o if bug == "no-rescale" else o * a
            state = (new_m, s * a + p.sum(-1, keepdim=True), kept + torch.matmul(p, v))
        return _finish(state, query, num_seqs, num_kv_heads * num_queries_per_kv, head_size, out)
    return kernel


cap_after_mask = _buggy_per_block("cap-after-mask")
dropped_rescale = _buggy_per_block("no-rescale")


def ignores_row_ids(query, query_row_ids, *args, **kwargs):
    """Reads the first B_s rows of the staging buffer instead of the rows it was given."""
    shifted = torch.roll(query, shifts=1, dims=0)
    return batched_decode_per_block(shifted, query_row_ids, *args, **kwargs)


def chunked_wrong_order(query, query_row_ids, k_pages, v_pages, block_ids, mask, *args,
                        **kwargs):
    """Generation B reading the chunk's pages sequence-major instead of block-major."""
    bpc = args[2]
    swapped = block_ids.clone()
    for c in range(args[3]):
        rows = swapped[c * bpc:(c + 1) * bpc, :args[1]]
        swapped[c * bpc:(c + 1) * bpc, :args[1]] = rows.t().reshape(rows.shape)
    return batched_decode_chunked(query, query_row_ids, k_pages, v_pages, swapped, mask, *args,
                                  **kwargs)


def _batched_call(policy="post-810-clamp", soft_cap=0.0, step="256,1,65,130"):
    config = SMALL.replace(max_model_len=512)
    _, bucketing = subject_and_bucketing(policy, config)
    steps = [parse_step(step)]
    ws = Workspace.for_steps(config, steps, soft_cap=soft_cap)
    return ws.step(bucketing, steps[0]).batched


@pytest.mark.parametrize("wrong,policy,soft_cap,step", [
    (cap_after_mask, "post-810-clamp", 2.0, "256,1,65,130"),
    (dropped_rescale, "post-810-clamp", 0.0, "256,1,65,130"),
    (ignores_row_ids, "post-810-clamp", 0.0, "256,1,65,130"),
    (chunked_wrong_order, "chunked", 0.0, "512,450,300,400"),
], ids=["soft-cap-after-mask", "dropped-rescale", "ignores-query-row-ids",
        "chunk-pages-transposed"])
def test_oracle_catches_wrong_kernels(wrong, policy, soft_cap, step):
    call = _batched_call(policy, soft_cap, step)
    right = batched_decode_chunked if policy == "chunked" else batched_decode_per_block
    assert check_call(call, call.run(right)).ok  # same inputs, the right kernel passes
    with pytest.raises(KernelMismatch, match="differs from the oracle"):
        check_call(call, call.run(wrong))


def test_nan_and_bad_shapes_are_mismatches():
    call = _batched_call()
    good = call.run(batched_decode_per_block)
    bad = good.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(KernelMismatch):
        check_call(call, bad)
    with pytest.raises(KernelMismatch, match="output shape"):
        check_call(call, good[:2])
    with pytest.raises(KernelMismatch, match="returned None"):
        check_call(call, None)


def test_tolerance_is_dtype_aware():
    ref = torch.ones(2, 2, 2, dtype=torch.float64)
    off = ref + 5e-3
    assert compare(off, ref, torch.float16).ok
    assert not compare(off, ref, torch.float32).ok


class _KernelSubject(Subject):
    """A subject whose bucketer is the reference's and whose kernel is given."""

    def __init__(self, kernel, generation="A", policy="post-810-clamp"):
        self._reference, _ = subject_and_bucketing(policy)
        self.spec = f"test:{getattr(kernel, '__name__', 'none')}"
        self.identity = self.spec
        self.capabilities = self._reference.capabilities
        self._kernel = None if kernel is None else (kernel, generation)

    def bucketing(self, config, overrides):
        return self._reference.bucketing(config, overrides)

    def decode_kernel(self):
        return self._kernel


def _measure(subject, graphs=False):
    case = Case(SMALL, BATCHED, "batched")
    spec = WorkloadSpec("steps", fixed=inline(["256,1,65,130"]))
    opts = KernelOptions(device=select("cpu"), repeat=3, warmup=1, number=1, graphs=graphs)
    return measure_workload(subject, case, spec, opts)


def test_a_wrong_kernel_is_never_timed():
    row = _measure(_KernelSubject(dropped_rescale), graphs=True)
    assert "differs from the oracle" in row["wrong"]
    assert "timing" not in row and "graphs" not in row


def test_a_kernel_that_raises_is_wrong_not_a_crash():
    def broken(*args, **kwargs):
        raise RuntimeError("index out of range")

    row = _measure(_KernelSubject(broken), graphs=True)
    assert row["wrong"] == "the kernel raised RuntimeError: index out of range"
    assert row["raised_at"].endswith("test_oracle.py:" + row["raised_at"].split(":")[-1])
    assert "timing" not in row and "graphs" not in row


def test_a_subject_without_a_kernel_is_a_skip_with_a_reason():
    row = _measure(_KernelSubject(None))
    assert row["skipped"] == "test:none has no batched decode kernel"
    row = _measure(_KernelSubject(batched_decode_chunked, "B"))
    assert "generation B" in row["skipped"] and "timing" not in row


def test_any_subject_kernel_is_measured_through_decode_kernel():
    calls = []

    def spy(*args, **kwargs):
        calls.append(args[7:9])
        return batched_decode_per_block(*args, **kwargs)

    row = _measure(_KernelSubject(spy))
    assert "wrong" not in row and "skipped" not in row
    assert calls and set(calls) == {(4, 4)}  # (num_seqs, num_blocks) of the step's bucket
    assert len(row["timing"]["shapes"][0]["samples_us"]) == 3


@pytest.mark.parametrize("policy,generation", [("pre-810", "A"), ("post-810-clamp", "A"),
                                               ("chunked", "B"), ("post-810-topup+chunked", "B")])
def test_reference_subjects_hand_out_their_generation(policy, generation):
    subject, _ = subject_and_bucketing(policy)
    kernel, got = subject.decode_kernel()
    assert got == generation and f"decode_kernel_{generation.lower()}" in subject.capabilities
    assert kernel is {"A": batched_decode_per_block, "B": batched_decode_chunked}[generation]
