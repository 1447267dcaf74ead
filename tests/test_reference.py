"""The reference policies reproduce the #810 before/after table and warmup records."""

import pytest

from harness.config import EngineConfig, Overrides
from harness.errors import SubjectError
from harness.subjects import resolve_subject

PRE, TOPUP, CLAMP = "reference:pre-810", "reference:post-810-topup", "reference:post-810-clamp"
KV_ABOVE = Overrides.from_env({"SPYRE_ATTN_KV_BUCKETS": "128,8192"})


def bucketing(spec, overrides=Overrides(), **config):
    return resolve_subject(spec).bucketing(EngineConfig(**config), overrides)


@pytest.mark.parametrize("mml,before,after", [
    (2048, (1, 2, 4, 8, 11), (2, 3, 6, 11)),
    (32768, (1, 2, 4, 8, 16, 32, 64, 128, 171), (2, 3, 6, 11, 22, 43, 86, 171)),
    (256, (1, 2), (2,)),
])
@pytest.mark.parametrize("head", [TOPUP, CLAMP])
def test_block_size_192_changes_batched_num_blocks(mml, before, after, head):
    assert bucketing(PRE, block_size=192, max_model_len=mml).batched_num_blocks == before
    assert bucketing(head, block_size=192, max_model_len=mml).batched_num_blocks == after


@pytest.mark.parametrize("spec,expected", [(PRE, (1, 2, 4, 8, 16, 32)), (TOPUP, (2, 128)),
                                           (CLAMP, (2, 32))])
def test_kv_override_above_limit(spec, expected):
    b = bucketing(spec, KV_ABOVE, block_size=64, max_model_len=2048)
    assert b.batched_num_blocks == expected


def test_pre_810_batched_ladders_are_env_blind_but_per_sequence_follows_env():
    b = bucketing(PRE, KV_ABOVE, block_size=64, max_model_len=2048)
    assert b.num_blocks == (2, 128) and b.num_seqs is None
    assert b.batched_num_seqs == (1, 2, 4, 8, 16, 32)


def test_variants_keep_16_of_30_pairs():
    b = bucketing(CLAMP, block_size=64, max_model_len=2048, max_num_batched_tokens=2048)
    assert len(b.num_blocks) * len(b.query) == 30
    assert len(b.variants) == 16
    assert b.variants[0] == (32, 2048)                    # num_blocks desc, query desc
    assert (16, 2048) not in b.variants and (16, 1024) in b.variants


def test_num_seqs_axis_by_generation():
    assert bucketing(CLAMP, max_num_seqs=32).num_seqs == (4, 8, 16, 32)
    assert bucketing(CLAMP, max_num_seqs=2).num_seqs == (2,)          # never dispatched (< 4)
    assert bucketing("reference:latest", max_num_seqs=2).num_seqs == ()
    low = Overrides.from_env({"SPYRE_ATTN_NUM_SEQS_BUCKETS": "1,2,4"})
    assert bucketing(CLAMP, low, max_num_seqs=32).num_seqs == (1, 2, 4, 32)
    assert bucketing(TOPUP, low, max_num_seqs=32).num_seqs == (1, 2, 4, 32)


def test_batched_grid_recorded_only_by_generation_3_when_enabled():
    on = Overrides.from_env({"SPYRE_BATCHED_DECODE": "1"})
    assert bucketing(CLAMP, on).batched_variants == ()
    assert bucketing("reference:chunked").batched_variants == ()      # flag off: empty
    grid = bucketing("reference:chunked", on, max_num_seqs=8, max_model_len=256).batched_variants
    # (num_seqs, num_blocks) pairs: num_blocks descending outside, num_seqs descending inside
    assert grid == ((8, 4), (4, 4), (8, 2), (4, 2), (8, 1), (4, 1))


def test_non_power_of_two_block_size_is_noted():
    assert any("not a power of two" in n for n in bucketing(CLAMP, block_size=192).notes)
    assert not bucketing(CLAMP, block_size=128).notes


def test_policy_specs():
    s = resolve_subject("reference:post-810-topup+chunked")
    assert "chunking" in s.capabilities and s.lacks("chunking") is None
    assert "no batched_decode_variants" in resolve_subject(PRE).lacks("batched_decode_variants")
    with pytest.raises(SubjectError, match="unknown policy 'pre-811'"):
        resolve_subject("reference:pre-811")
    with pytest.raises(SubjectError, match=r"unknown option \+fast"):
        resolve_subject("reference:pre-810+fast")
    with pytest.raises(SubjectError, match="unsupported spec"):
        resolve_subject("nonsense")
