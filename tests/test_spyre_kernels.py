"""The subjects' batched decode kernels: obtained without vLLM, and correct attention.

Inputs are built the way spyre-inference's metadata builder builds them (docs/spyre-inference.md,
section 2); the oracle is plain softmax attention over each sequence's real tokens. Small shapes,
eager mode: no compile here.
"""

from __future__ import annotations

import math
import sys

import pytest

torch = pytest.importorskip("torch")

from harness.ladders import chunking, stick_padded  # noqa: E402
from harness.subjects import resolve_subject  # noqa: E402
from tests.fixtures.spyre_backend import ops_kernel  # noqa: E402
from tests.fixtures.spyre_repo import GENERATIONS, KERNEL_GENERATION  # noqa: E402

BS, KV, QPKV, D = 16, 2, 3, 8


def build(seq_lens, b_seqs, b_blocks, dtype, seed=0):
    """Paged K/V with scattered pages, block_ids [B_b, S(B_s)], the additive mask, row ids."""
    g = torch.Generator().manual_seed(seed)
    n = len(seq_lens)
    blocks = [math.ceil(s / BS) for s in seq_lens]
    num_pages = 1 + sum(blocks) + 5
    k_pages = torch.randn(num_pages, BS, KV, D, generator=g).to(dtype)
    v_pages = torch.randn(num_pages, BS, KV, D, generator=g).to(dtype)
    order = (torch.randperm(num_pages - 1, generator=g) + 1).tolist()  # page 0 is the null page
    pages, i = [], 0
    for nb in blocks:
        pages.append(order[i:i + nb])
        i += nb
    rows = b_seqs + 3  # the staging buffer is larger than the batch
    query = torch.randn(rows, KV * QPKV, D, generator=g).to(dtype)
    row_ids = torch.randperm(rows, generator=g)[:b_seqs].to(torch.int64)
    block_ids = torch.zeros(b_blocks, stick_padded(b_seqs), dtype=torch.int32)
    low = torch.finfo(dtype).min
    mask = torch.full((b_blocks, b_seqs * KV, 1, BS), float("-inf"), dtype=dtype)
    for s in range(n):
        for b in range(min(blocks[s], b_blocks)):
            block_ids[b, s] = pages[s][b]
            mask[b, s * KV:(s + 1) * KV, 0, :] = 0
            past = seq_lens[s] - b * BS
            if past < BS:
                mask[b, s * KV:(s + 1) * KV, 0, past:] = low
    mask[0, n * KV:, 0, :] = low  # padded rows stay finite
    return dict(query=query, query_row_ids=row_ids, k_pages=k_pages, v_pages=v_pages,
                block_ids=block_ids, mask_by_block=mask), pages


def oracle(inputs, pages, seq_lens, scale, cap):
    out = []
    for s, length in enumerate(seq_lens):
        q = inputs["query"][inputs["query_row_ids"][s]].double()  # [H, D]
        k = inputs["k_pages"][pages[s]].double().reshape(-1, KV, D)[:length]
        v = inputs["v_pages"][pages[s]].double().reshape(-1, KV, D)[:length]
        heads = []
        for h in range(KV * QPKV):
            scores = k[:, h // QPKV] @ q[h] * scale
            if cap:
                scores = cap * torch.tanh(scores / cap)
            heads.append(torch.softmax(scores, 0) @ v[:, h // QPKV])
        out.append(torch.stack(heads))
    return torch.stack(out)


def chunked(inputs, b_seqs, b_blocks, per_chunk, chunks):
    """Generation B's layout: blocks padded to chunks*per_chunk, fp16 mask [C, E*KV, 1, bs]."""
    walked = per_chunk * chunks
    block_ids = torch.zeros(walked, inputs["block_ids"].shape[1], dtype=torch.int32)
    block_ids[:b_blocks] = inputs["block_ids"]
    mask = inputs["mask_by_block"]
    low = torch.finfo(torch.float16).min
    mask = torch.where(mask == torch.finfo(mask.dtype).min, torch.tensor(low, dtype=mask.dtype),
                       mask).to(torch.float16)
    padded = torch.full((walked, b_seqs * KV, 1, BS), float("-inf"), dtype=torch.float16)
    padded[:b_blocks] = mask
    # The real generation-B convention: entries sequence-major (s, j), one page-id tensor per
    # chunk, each query row repeated per_chunk times.
    entries = b_seqs * per_chunk
    mask = padded.view(chunks, per_chunk, b_seqs, KV, 1, BS).permute(0, 2, 1, 3, 4, 5)
    return {"query": inputs["query"],
            "rep_row_ids": inputs["query_row_ids"].to(torch.int32).repeat_interleave(per_chunk),
            "k_pages": inputs["k_pages"], "v_pages": inputs["v_pages"],
            "chunk_page_ids": [block_ids[c * per_chunk:(c + 1) * per_chunk, :b_seqs].t()
                               .reshape(entries, 1).contiguous() for c in range(chunks)],
            "mask_by_chunk": mask.reshape(chunks, entries * KV, 1, BS).contiguous()}


@pytest.fixture(scope="module")
def kernels(spyre_repo):
    """Generation-A kernels as the subjects load them; the fixture's generation-B kernel (the
    real convention, called only by its own forward()) straight from its source."""
    found = {g: resolve_subject(spyre_repo.spec(g)).decode_kernel() for g in GENERATIONS
             if KERNEL_GENERATION[g] == "A"}
    namespace: dict = {}
    exec(compile(ops_kernel(), "ops/batched_decode.py", "exec"), namespace)
    found["gen3"] = found["gen4"] = (namespace["batched_decode_kernel"], "B")
    return found


def test_kernels_load_without_vllm_and_name_their_generation(kernels):
    for g, (fn, gen) in kernels.items():
        assert gen == {"forward": "B"}.get(KERNEL_GENERATION[g], KERNEL_GENERATION[g]), g
        assert fn.__code__.co_filename.endswith(
            "backends/spyre_attn.py" if gen == "A" else "ops/batched_decode.py")  # noqa
    assert "vllm" not in sys.modules
    assert not [m for m in sys.modules if m.startswith("spyre_inference")]


SEQ_LENS = [40, 16, 1, 90]  # 3, 1, 1, 6 blocks of 16


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float16, 3e-3)])
@pytest.mark.parametrize("cap", [0.0, 2.5])
def test_generation_a_kernel_is_attention(kernels, dtype, tol, cap):
    fn, _ = kernels["810-clamp"]
    b_seqs, b_blocks = 8, 8  # 4 padded rows, 2 padded blocks
    inputs, pages = build(SEQ_LENS, b_seqs, b_blocks, dtype)
    scale = D ** -0.5
    got = fn(**inputs, scale=scale, num_seqs=b_seqs, num_blocks=b_blocks, num_kv_heads=KV,
             num_queries_per_kv=QPKV, block_size=BS, head_size=D, logits_soft_cap=cap)
    assert got.shape == (b_seqs, KV * QPKV, D) and got.dtype == dtype
    assert torch.isfinite(got).all()
    want = oracle(inputs, pages, SEQ_LENS, scale, cap)
    torch.testing.assert_close(got[:len(SEQ_LENS)].double(), want, atol=tol, rtol=tol)


@pytest.mark.parametrize("per_chunk, chunks", [chunking(8, 8), (3, 3)])
def test_generation_b_kernel_is_attention(kernels, per_chunk, chunks):
    fn, _ = kernels["gen3"]
    b_seqs, b_blocks = 8, 8
    inputs, pages = build(SEQ_LENS, b_seqs, b_blocks, torch.bfloat16, seed=1)
    out = torch.zeros(b_seqs + 2, KV * QPKV, D, dtype=torch.bfloat16)
    got = fn(**chunked(inputs, b_seqs, b_blocks, per_chunk, chunks), scale=0.3, num_seqs=b_seqs,
             blocks_per_chunk=per_chunk, num_kv_heads=KV,
             num_queries_per_kv=QPKV, block_size=BS, head_size=D, logits_soft_cap=1.5, out=out)
    assert got.data_ptr() == out.data_ptr()
    want = oracle(inputs, pages, SEQ_LENS, 0.3, 1.5)
    torch.testing.assert_close(out[:len(SEQ_LENS)].double(), want, atol=2e-2, rtol=2e-2)


def test_both_generations_agree_exactly_in_fp32(kernels):
    a, _ = kernels["810-clamp"]
    b, _ = kernels["gen4"]
    inputs, _ = build(SEQ_LENS, 4, 6, torch.float32, seed=2)
    common = dict(scale=0.2, num_seqs=4, num_kv_heads=KV, num_queries_per_kv=QPKV,
                  block_size=BS, head_size=D)
    per_chunk, chunks = chunking(4, 6)
    got_a = a(**inputs, num_blocks=6, **common)
    got_b = b(**chunked(inputs, 4, 6, per_chunk, chunks), blocks_per_chunk=per_chunk, **common)
    torch.testing.assert_close(got_a, got_b, atol=1e-5, rtol=1e-5)
