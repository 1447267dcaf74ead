"""The exact model answers the #810 review's numeric questions."""

import pytest

from harness.config import EngineConfig, Overrides
from harness.matrix import override_set
from harness.model import dispatch, step_cost, summarize, workload_cost
from harness.subjects import resolve_subject
from harness.workloads import MIXES, Seq, generate, inline

CONFIG = EngineConfig(block_size=64, max_model_len=2048, num_kv_heads=8, dtype="float16",
                      num_layers=40)
KV_ABOVE = Overrides.from_env({"SPYRE_BATCHED_DECODE": "1", "SPYRE_ATTN_KV_BUCKETS": "128,8192"})
FOUR_3_BLOCK = (Seq(150),) * 4


@pytest.mark.parametrize("spec,iterations,mask_kib", [
    ("reference:pre-810", 4, 16), ("reference:post-810-topup", 128, 512),
    ("reference:post-810-clamp", 32, 128),
])
def test_four_3_block_decodes_under_kv_override(spec, iterations, mask_kib):
    b = resolve_subject(spec).bucketing(CONFIG, KV_ABOVE)
    cost = step_cost(b, CONFIG, FOUR_3_BLOCK)
    assert cost.dispatch.path == "batched" and cost.dispatch.b_seqs == 4
    assert cost.dispatch.b_blocks == iterations
    assert cost.iterations_per_layer == iterations
    assert cost.iterations_per_layer * CONFIG.num_layers == iterations * 40   # 5,120 for top-up
    assert cost.h2d["mask"] == mask_kib * 1024
    # 8·B_s + 4·B_b·S(B_s) + e·B_b·B_s·KV·bs
    assert cost.h2d_bytes == 8 * 4 + 4 * iterations * 32 + 2 * iterations * 4 * 8 * 64
    assert cost.transfers == 3 and cost.keys == (("batched", (4, iterations)),)
    assert cost.padded_kv_slots == 4 * iterations * 64 and cost.real_kv_tokens == 600


def test_chunked_kernel_iterates_over_chunks():
    b = resolve_subject("reference:chunked").bucketing(CONFIG, KV_ABOVE)   # clamp: B_b = 32
    cost = step_cost(b, CONFIG, FOUR_3_BLOCK)
    d = cost.dispatch
    assert (d.b_seqs, d.b_blocks, d.blocks_per_chunk, d.num_chunks) == (4, 32, 8, 4)
    assert cost.iterations_per_layer == 4
    assert cost.keys == (("batched_chunked", (4, 8, 4)),)
    assert cost.h2d["mask"] == 2 * 4 * (4 * 8) * 8 * 64      # fp16 [C, E·KV, 1, bs]


@pytest.mark.parametrize("step,overrides,reason", [
    (FOUR_3_BLOCK, Overrides(), "SPYRE_BATCHED_DECODE off"),
    ((Seq(150),) * 3, KV_ABOVE, "3 decode(s) < minimum 4"),
    ((Seq(150),) * 4 + (Seq(600, 100),), KV_ABOVE, "1 prefill sequence(s) in the batch"),
])
def test_per_sequence_path_and_reason(step, overrides, reason):
    b = resolve_subject("reference:post-810-clamp").bucketing(CONFIG, overrides)
    d = dispatch(b, CONFIG.block_size, step)
    assert d.path == "per-sequence" and d.reason == reason
    cost = step_cost(b, CONFIG, step)
    assert cost.launches_per_layer == len(step)
    assert cost.iterations_per_layer == sum(nb for nb, _ in d.per_sequence)


def test_per_sequence_buckets_decodes_at_width_1_and_prefills_on_the_query_ladder():
    b = resolve_subject("reference:post-810-clamp").bucketing(CONFIG, Overrides())
    d = dispatch(b, 64, (Seq(150), Seq(600, 100), Seq(2048, 1500)))
    assert d.per_sequence == ((4, 1), (16, 512), (32, 1536))


def test_latest_batches_the_decode_prefix_of_a_mixed_batch():
    on = override_set("batched")
    b = resolve_subject("reference:latest").bucketing(CONFIG, on)
    d = dispatch(b, 64, (Seq(150),) * 5 + (Seq(600, 100),))
    assert d.path == "mixed" and d.batched == 5 and d.b_seqs == 8 and d.per_sequence == ((16, 512),)


def test_query_override_without_1_makes_decodes_late_compiles():
    ov = Overrides.from_env({"SPYRE_ATTN_QUERY_BUCKETS": "512,2048"})
    b = resolve_subject("reference:post-810-clamp").bucketing(CONFIG, ov)
    w = workload_cost(b, CONFIG, inline(["150,150", "1000"]))
    assert [str(k) for k in w.late_compiles] == ["attn[4, 1]", "attn[16, 1]"]
    s = summarize(b, CONFIG)
    assert all(k.shape[1] == 1 for k in s.unrecorded) and len(s.unrecorded) == 6


def test_num_seqs_entries_below_4_are_dead_warmup_variants():
    b = resolve_subject("reference:chunked").bucketing(CONFIG, override_set("num-seqs-low"))
    dead = summarize(b, CONFIG).dead_variants
    assert dead and all(k.kernel == "batched_chunked" and k.shape[0] < 4 for k in dead)
    assert len(dead) == 2 * len(b.batched_num_blocks)        # num_seqs 1 and 2 × every nb


def test_gen_1_2_batched_keys_are_never_recorded_so_all_are_late():
    b = resolve_subject("reference:post-810-clamp").bucketing(CONFIG, override_set("batched"))
    w = workload_cost(b, CONFIG, generate("uniform-long", CONFIG))
    assert w.keys_of("batched") and set(w.keys_of("batched")) <= set(w.late_compiles)
    g3 = resolve_subject("reference:chunked").bucketing(CONFIG, override_set("batched"))
    assert workload_cost(g3, CONFIG, generate("uniform-long", CONFIG)).late_compiles == ()


@pytest.mark.parametrize("block_size", [64, 128, 256, 512])
def test_review_point_5_no_fewer_compiles_at_power_of_two_block_sizes(block_size):
    """Without ladder overrides, #810 changes no batched compile count at power-of-two bs."""
    on = override_set("batched")
    for mml in (256, 2048, 32768):
        config = CONFIG.replace(block_size=block_size, max_model_len=mml)
        pre = resolve_subject("reference:pre-810").bucketing(config, on)
        for head in ("reference:post-810-topup", "reference:post-810-clamp"):
            post = resolve_subject(head).bucketing(config, on)
            assert len(pre.batched_num_blocks) == len(post.batched_num_blocks)
            assert summarize(pre, config).batched_reachable == summarize(post, config).batched_reachable
            for mix in MIXES:
                w = generate(mix, config)
                assert (workload_cost(pre, config, w).keys_of("batched")
                        == workload_cost(post, config, w).keys_of("batched"))


def test_review_point_5_block_size_192_does_change_compile_counts():
    on = override_set("batched")
    config = CONFIG.replace(block_size=192, max_model_len=2048)
    pre = resolve_subject("reference:pre-810").bucketing(config, on)
    post = resolve_subject("reference:post-810-clamp").bucketing(config, on)
    assert (len(pre.batched_num_blocks), len(post.batched_num_blocks)) == (5, 4)
    assert len(summarize(pre, config).batched_reachable) == 4 * 5
    assert len(summarize(post, config).batched_reachable) == 4 * 4


def test_workload_aggregates_are_sums_of_steps():
    b = resolve_subject("reference:post-810-clamp").bucketing(CONFIG, KV_ABOVE)
    w = workload_cost(b, CONFIG, generate("bimodal", CONFIG, steps=8))
    d = w.as_dict(per_step=True)
    assert d["iterations_per_layer_total"] == sum(s["iterations_per_layer"] for s in d["per_step"])
    assert d["h2d_bytes_total"] == sum(s["h2d_bytes"] for s in d["per_step"])
    assert d["padded_slots_per_real_token"] == pytest.approx(
        sum(s["padded_kv_slots"] for s in d["per_step"]) / sum(s["real_kv_tokens"] for s in d["per_step"]))
    assert d["distinct_compile_keys"] == len({k for s in d["per_step"] for k in s["compile_keys"]})
