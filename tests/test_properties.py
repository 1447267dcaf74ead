"""Property tests for the ladder invariants, over random configs and overrides."""

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.config import EngineConfig, Overrides
from harness.ladders import round_up
from harness.subjects import POLICIES, resolve_subject

block_sizes = st.integers(1, 16).map(lambda k: 64 * k)
# vLLM (and EngineConfig) require max_num_batched_tokens >= max_num_seqs.
configs = st.integers(1, 512).flatmap(lambda mns: st.builds(
    EngineConfig, block_size=block_sizes, max_model_len=st.integers(1, 140_000),
    max_num_seqs=st.just(mns), max_num_batched_tokens=st.integers(mns, 16_384)))
bucket_lists = st.none() | st.lists(st.integers(1, 200_000), min_size=1, max_size=6).map(
    lambda v: ",".join(map(str, v)))


@st.composite
def overrides(draw):
    env = {"SPYRE_BATCHED_DECODE": draw(st.sampled_from(["0", "1"]))}
    for name in ("SPYRE_ATTN_KV_BUCKETS", "SPYRE_ATTN_QUERY_BUCKETS", "SPYRE_ATTN_NUM_SEQS_BUCKETS"):
        value = draw(bucket_lists)
        if value is not None:
            env[name] = value
    return Overrides.from_env(env)


def limits(config):
    return {"kv": config.max_model_len, "query": config.max_num_batched_tokens,
            "num_seqs": config.max_num_seqs, "batched_num_seqs": config.max_num_seqs}


@settings(max_examples=300, deadline=None)
@given(configs, overrides(), st.sampled_from(sorted(POLICIES)))
def test_ladders_are_sorted_unique_and_cover_their_limit(config, ov, policy):
    b = resolve_subject(f"reference:{policy}").bucketing(config, ov)
    for axis, ladder in b.ladders().items():
        if ladder is None or (axis.endswith("num_seqs") and ladder == ()):
            continue
        assert list(ladder) == sorted(set(ladder)), axis
        assert all(v >= 1 for v in ladder), axis
        if axis in limits(config):
            assert ladder[-1] >= limits(config)[axis], axis
    # the kv-derived blocks cover every sequence up to max_model_len
    assert b.num_blocks[-1] * config.block_size >= config.max_model_len
    assert b.batched_num_blocks[-1] * config.block_size >= config.max_model_len


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 10_000), min_size=1, max_size=12, unique=True),
       st.integers(-5, 12_000))
def test_round_up_is_the_smallest_bucket_at_or_above(values, x):
    ladder = tuple(sorted(values))
    up = round_up(ladder, x)
    above = [v for v in ladder if v >= x]
    assert up == (min(above) if above else None)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4).map(lambda k: 64 << k), st.integers(1, 140_000), st.integers(1, 512),
       st.sampled_from(["post-810-topup", "post-810-clamp", "chunked"]))
def test_post_810_equals_pre_810_for_power_of_two_block_sizes(bs, mml, mns, head):
    """Review point 5: the batched num_blocks ladder, and where a batch lands, do not move."""
    config = EngineConfig(block_size=bs, max_model_len=mml, max_num_seqs=mns)
    pre = resolve_subject("reference:pre-810").bucketing(config, Overrides())
    post = resolve_subject(f"reference:{head}").bucketing(config, Overrides())
    assert pre.batched_num_blocks == post.batched_num_blocks
    assert pre.num_blocks == post.num_blocks
    for n in range(4, mns + 1):
        assert round_up(pre.batched_num_seqs, n) == round_up(post.batched_num_seqs, n)
