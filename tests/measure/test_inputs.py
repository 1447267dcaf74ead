"""Inputs are built the way the metadata builder builds them, and their bytes are the model's."""

from __future__ import annotations

import pytest
import torch

from harness.config import EngineConfig, Overrides
from harness.ladders import stick_padded
from harness.measure.inputs import InputError, Workspace, batched_mask, check_generation
from harness.model.cost import step_cost
from harness.workloads import generate, parse_step
from tests.measure.helpers import SMALL, subject_and_bucketing

ON = {"SPYRE_BATCHED_DECODE": "1"}


def _steps(config):
    """Batched, chunked-padding, per-sequence decode, prefill and mixed steps for ``config``."""
    bs, mml = config.block_size, config.max_model_len
    fixed = [parse_step(",".join([str(3 * bs - 10)] * 4)),            # four 3-block decodes
             parse_step(f"{mml},1,{bs + 1},{2 * bs},5"),                  # ragged batch of 5
             parse_step(f"{mml},7"),                                      # below the minimum
             parse_step(f"{2 * bs},{bs},{bs},{bs},{mml} | 1,1,1,1,{bs}")]  # decode prefix+prefill
    return fixed + list(generate("bimodal", config, 3).steps) + list(
        generate("mixed-prefill-decode", config, 3).steps)


CONFIGS = [
    EngineConfig(block_size=64, max_model_len=2048, max_num_seqs=16, max_num_batched_tokens=512,
                 num_kv_heads=8, queries_per_kv=1, head_size=8, dtype="float16"),
    EngineConfig(block_size=192, max_model_len=2048, max_num_seqs=40, max_num_batched_tokens=512,
                 num_kv_heads=2, queries_per_kv=2, head_size=8, dtype="bfloat16"),
    EngineConfig(block_size=128, max_model_len=1024, max_num_seqs=8, max_num_batched_tokens=256,
                 num_kv_heads=1, queries_per_kv=4, head_size=8, dtype="float32"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"bs{c.block_size}-{c.dtype}")
@pytest.mark.parametrize("policy", ["pre-810", "post-810-topup", "chunked", "latest"])
@pytest.mark.parametrize("env", [ON, {**ON, "SPYRE_ATTN_KV_BUCKETS": "128,8192"}],
                         ids=["batched", "kv-above-limit"])
def test_built_bytes_equal_model_h2d_exactly(config, policy, env):
    _, bucketing = subject_and_bucketing(policy, config, Overrides.from_env(env))
    steps = _steps(config)
    ws = Workspace.for_steps(config, steps)
    paths = set()
    for i, step in enumerate(steps):
        calls = ws.step(bucketing, step, seed=i)
        model = step_cost(bucketing, config, step)
        assert calls.h2d() == model.h2d, (step, calls.h2d(), model.h2d)
        assert calls.keys == model.keys
        assert calls.iterations == model.iterations_per_layer
        assert calls.launches == model.launches_per_layer
        paths.add(calls.dispatch.path)
    assert "batched" in paths and "per-sequence" in paths


def test_review_example_mask_bytes():
    """Four 3-block decodes at bs 64, KV 8, fp16: 16 KiB of mask, 512 KiB under top-up."""
    config = EngineConfig(block_size=64, max_model_len=2048, head_size=8)
    step = parse_step("150,150,150,150")
    ws = Workspace.for_steps(config, [step])
    sizes = {}
    for policy, env in [("pre-810", ON), ("post-810-topup", {**ON, "SPYRE_ATTN_KV_BUCKETS":
                                                             "128,8192"}),
                        ("post-810-clamp", {**ON, "SPYRE_ATTN_KV_BUCKETS": "128,8192"})]:
        _, b = subject_and_bucketing(policy, config, Overrides.from_env(env))
        call = ws.step(b, step).batched
        sizes[policy] = (call.mask.nbytes, tuple(call.mask.shape), call.b_blocks)
    assert sizes == {"pre-810": (16 << 10, (4, 32, 1, 64), 4),
                     "post-810-topup": (512 << 10, (128, 32, 1, 64), 128),
                     "post-810-clamp": (128 << 10, (32, 32, 1, 64), 32)}


def test_batched_layout_follows_the_builder():
    config = SMALL.replace(max_model_len=512)
    _, b = subject_and_bucketing("post-810-clamp", config)
    step = parse_step("130,64,1,200,65")  # 5 decodes -> B_s 8; max 4 blocks -> B_b 4
    ws = Workspace.for_steps(config, [step])
    call = ws.step(b, step, seed=3).batched
    bs, kv = config.block_size, config.num_kv_heads
    assert (call.b_seqs, call.b_blocks) == (8, 4)
    assert call.block_ids.dtype == torch.int32
    assert tuple(call.block_ids.shape) == (4, stick_padded(8)) == (4, 32)
    assert call.query_row_ids.dtype == torch.int64
    assert call.query_row_ids.tolist() == [0, 1, 2, 3, 4, 0, 0, 0]
    assert tuple(call.query.shape) == (ws.query_rows, config.num_heads, config.head_size)
    # block ids: the sequence's pages, zero (the null page) everywhere else
    expected = torch.zeros(4, 32, dtype=torch.int32)
    for s, pages in enumerate(call.pages):
        assert len(pages) == -(-call.seq_lens[s] // bs)
        expected[:len(pages), s] = torch.tensor(pages, dtype=torch.int32)
    assert torch.equal(call.block_ids, expected)
    used = [p for pages in call.pages for p in pages]
    assert 0 not in used and len(set(used)) == len(used)
    assert used != sorted(used)  # scattered, not handed out in order
    # the mask, row by row: [B_b, B_s*KV, 1, bs]
    mask = call.mask.view(4, 8, kv, bs).float()
    low = torch.finfo(torch.float16).min
    assert tuple(call.mask.shape) == (4, 8 * kv, 1, bs) and call.mask.dtype == torch.float16
    assert torch.equal(mask[:, :, 0], mask[:, :, 1])  # same for every KV head
    seq0 = mask[:, 0, 0]  # 130 tokens = 2 full blocks + 2 tokens
    assert (seq0[:2] == 0).all() and (seq0[2, :2] == 0).all() and (seq0[2, 2:] == low).all()
    assert torch.isneginf(seq0[3]).all()
    assert (mask[0, 1, 0] == 0).all() and torch.isneginf(mask[1:, 1, 0]).all()  # exactly 1 block
    assert mask[0, 2, 0, 0] == 0 and (mask[0, 2, 0, 1:] == low).all()  # 1 token
    for padded in range(5, 8):  # padded rows: finite block 0, -inf beyond
        assert (mask[0, padded, 0] == low).all() and torch.isneginf(mask[1:, padded, 0]).all()


def test_chunked_layout_pads_to_walked_blocks_in_fp16():
    config = SMALL.replace(max_model_len=1024, max_num_seqs=8, dtype="bfloat16")
    _, b = subject_and_bucketing("chunked", config)
    step = parse_step(",".join(["700"] * 8))  # 11 blocks at bs 64 -> B_b 16 -> (4, 4)
    ws = Workspace.for_steps(config, [step])
    call = ws.step(b, step).batched
    assert call.key.shape == (8, 4, 4) and call.walked_blocks == 16
    assert call.mask.dtype == torch.float16
    assert tuple(call.mask.shape) == (4, 8 * 4 * config.num_kv_heads, 1, 64)
    assert tuple(call.block_ids.shape) == (16, 32)
    # the chunked mask is the generation A mask padded to the walked blocks, viewed per chunk
    flat = batched_mask([700] * 8, 8, 16, 64, config.num_kv_heads, torch.float16)
    assert torch.equal(call.mask.view(16, -1, 1, 64), flat)
    assert (call.block_ids[11:] == 0).all() and (call.block_ids[:11, :8] > 0).all()


def test_chunking_with_walked_padding_matches_the_model():
    """(8, 11) -> (4, 3): 12 walked blocks, one more than B_b."""
    config = EngineConfig(block_size=192, max_model_len=2048, max_num_seqs=8, head_size=8,
                          num_kv_heads=2)
    _, b = subject_and_bucketing("chunked", config)
    step = parse_step(",".join(["2048"] * 8))
    ws = Workspace.for_steps(config, [step])
    call = ws.step(b, step).batched
    assert (call.b_blocks, call.blocks_per_chunk, call.num_chunks) == (11, 4, 3)
    assert tuple(call.block_ids.shape) == (12, 32)
    assert call.h2d() == step_cost(b, config, step).h2d


def test_sequence_mask_is_causal_and_finite_on_padded_rows():
    config = SMALL
    ws = Workspace(config, num_pages=8)
    call = ws.sequence(seq_len=100, query_len=3, pages=[5, 2], num_blocks=4, q_bucket=4)
    m = call.mask.float()
    low = torch.finfo(torch.float16).min
    assert tuple(m.shape) == (4, 4 * 64) and call.block_table.tolist() == [5, 2, 0, 0]
    for i in range(3):  # query token i at position 97 + i sees keys 0..97+i
        assert (m[i, :98 + i] == 0).all() and (m[i, 98 + i:128] == low).all()
        assert torch.isneginf(m[i, 128:]).all()
    assert (m[3, :64] == low).all() and torch.isneginf(m[3, 64:]).all()


def test_workspace_refuses_a_cache_above_the_limit():
    with pytest.raises(InputError, match="GiB"):
        Workspace(SMALL, num_pages=1000, max_cache_bytes=1 << 20)


def test_generation_must_match_the_bucketer():
    _, chunked = subject_and_bucketing("chunked")
    _, per_block = subject_and_bucketing("post-810-clamp")
    check_generation("B", chunked)
    check_generation("A", per_block)
    with pytest.raises(InputError, match="generation A"):
        check_generation("A", chunked)
    with pytest.raises(InputError, match="generation B"):
        check_generation("B", per_block)
