"""The fixture's ``today`` generation (tests/fixtures/spyre_sources.py): today's spyre-inference in
small — head-major K/V by default, a jagged path, the compile guard, a bucketer reading the
model's per-layer KV heads, and (``today-spec``) a fork's speculative verify bucket.

Two kinds of test. The fixture's own: driven directly (the harness's stand-ins, the commit's own
builder and forward, kernels run eagerly), every path's output matches the float64 oracle and a
planted error does not; its compile guard raises on a watched kernel's late compile. And what
spyre-bench does on it, as real subprocesses: its ladders, costs and kernels on each path.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import types

import pytest
import torch

from harness.config import EngineConfig
from harness.measure.oracle import attention, compare
from harness.subjects.load.loader import CaptureHandler, SourceTree, isolated, vllm_standins
from harness.subjects.spyre.drive.kernel_proxy import intercepted_compile
from harness.subjects.spyre.drive.steps import common_metadata
from harness.workloads import Seq
from tests.fixtures.spyre_repo import BUCKETER, GENERATIONS, TODAY, TODAY_SPEC
from tests.fixtures.spyre_today import HEAD_MAJOR_BACKEND, JAGGED_PLAN

#: A small engine: every command on it takes seconds.
SMALL = EngineConfig(block_size=64, max_model_len=512, max_num_seqs=8, max_num_batched_tokens=256,
                     num_kv_heads=2, queries_per_kv=2, head_size=64)
SMALL_ARGS = ["--block-size", "64", "--max-model-len", "512", "--max-num-seqs", "8",
              "--max-num-batched-tokens", "256", "--num-kv-heads", "2", "--queries-per-kv", "2",
              "--head-size", "64"]
#: Eight decodes: batched where the path batches, B_s 8, 8 blocks in chunks of 4 (2 chunks).
EIGHT_DECODES = "300,300,300,300,300,300,300,300"
#: Four decodes and a 100-token prefill chunk: a jagged step has a decode and a tile group.
MIXED = "300,300,300,300,200 | 1,1,1,1,100"


# -- the fixture's own code, driven directly -------------------------------------------------

@pytest.fixture(scope="module")
def today_tree(spyre_repo, tmp_path_factory) -> SourceTree:
    return SourceTree.from_dir(spyre_repo.export(TODAY, tmp_path_factory.mktemp("today")))


def _standins(handler):
    """The harness's stand-ins, plus what today's tree imports that they may not have yet."""
    table = vllm_standins(handler)
    table.setdefault("vllm.utils.math_utils", types.SimpleNamespace(
        cdiv=lambda a, b: -(-a // b),
        next_power_of_2=lambda n: 1 if n < 1 else 1 << (n - 1).bit_length()))
    name = "vllm.model_executor.layers.attention.attention"
    if name in table and not hasattr(table[name].Attention, "forward"):
        module = types.ModuleType(name)
        module.__dict__.update(table[name].__dict__)
        module.Attention = type("Attention", (table[name].Attention,),
                                {"forward": lambda self, *a, **k: None})
        table[name] = module
    return table


def _engine(config: EngineConfig, vllm_config_module):
    dtype = getattr(torch, config.dtype)
    ns = types.SimpleNamespace
    model = ns(max_model_len=config.max_model_len, dtype=dtype, runner_type="generate",
               model_arch_config=ns(per_layer_overrides=None),
               get_num_attention_heads=lambda parallel=None: config.num_heads,
               get_num_kv_heads=lambda parallel=None, layer=None: config.num_kv_heads)
    return vllm_config_module.VllmConfig(
        cache_config=ns(block_size=config.block_size, cache_dtype="auto"), model_config=model,
        scheduler_config=ns(max_num_batched_tokens=config.max_num_batched_tokens,
                            max_num_seqs=config.max_num_seqs),
        parallel_config=ns(tensor_parallel_size=1, decode_context_parallel_size=1),
        speculative_config=None,
        compilation_config=ns(mode=vllm_config_module.CompilationMode.STOCK_TORCH_COMPILE,
                              static_forward_context={}))


def drive(tree: SourceTree, env: dict, step: tuple, config: EngineConfig = SMALL, seed: int = 0):
    """One layer of ``step`` through the commit's platform-chosen backend, its kernels run:
    (names of the kernels called, the shapes of their ``page_indices`` tables, the worst output
    element's error over its fp16 allowance)."""
    handler, proxies = CaptureHandler(), []
    with isolated(env, tree, _standins(handler)):
        with intercepted_compile(proxies):
            platform = importlib.import_module("spyre_inference.platform")
            module, _, name = platform.TorchSpyrePlatform._decoder_backend_path().rpartition(".")
            backend = getattr(importlib.import_module(module), name)
        vllm_config_module = sys.modules["vllm.config"]
        vllm_config = _engine(config, vllm_config_module)
        dtype, bs = getattr(torch, config.dtype), config.block_size
        with vllm_config_module.set_current_vllm_config(vllm_config), \
                intercepted_compile(proxies):
            impl = backend.get_impl_cls()(num_heads=config.num_heads, head_size=config.head_size,
                                          scale=config.head_size ** -0.5,
                                          num_kv_heads=config.num_kv_heads)
            attention_module = sys.modules["vllm.model_executor.layers.attention.attention"]
            layer = attention_module.Attention(config.num_heads, config.head_size,
                                               config.head_size ** -0.5, config.num_kv_heads,
                                               prefix="layer", impl=impl)
            vllm_config.compilation_config.static_forward_context["layer"] = layer
            spec = sys.modules["vllm.v1.kv_cache_interface"].FullAttentionSpec(
                block_size=bs, num_kv_heads=config.num_kv_heads, head_size=config.head_size,
                dtype=dtype)
            builder = backend.get_builder_cls()(spec, ["layer"], vllm_config,
                                                torch.device("cpu"))
        for proxy in proxies:
            proxy.mode = "run"
        pages = 1 + config.max_num_seqs * -(-config.max_model_len // bs)
        shape = backend.get_kv_cache_shape(pages, bs, config.num_kv_heads, config.head_size)
        layer.kv_cache = cache = (torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype))
        cm = common_metadata(config, step, seed)
        metadata = builder.build(0, cm)
        gen = torch.Generator().manual_seed(seed)
        keys, values = ([torch.randn(s.seq_len, config.num_kv_heads, config.head_size,
                                     generator=gen).to(dtype) for s in step] for _ in range(2))
        slots = torch.cat([cm.block_table_tensor[i, torch.arange(s.seq_len) // bs].long() * bs
                           + torch.arange(s.seq_len) % bs for i, s in enumerate(step)])
        impl.do_kv_cache_update(layer, torch.cat(keys), torch.cat(values), cache,
                                impl.kv_write_index(slots, torch.device("cpu")))
        query = torch.randn(sum(s.query_len for s in step), config.num_heads, config.head_size,
                            generator=gen).to(dtype)
        output = torch.zeros_like(query)
        for proxy in proxies:
            proxy.calls.clear()
        impl.forward(layer, query, query, query, cache, metadata, output)
        called = sorted({c.kernel for p in proxies for c in p.calls})
        tables = sorted(tuple(c.args["page_indices"].shape) for p in proxies for c in p.calls
                        if "page_indices" in c.args)
    worst, start = 0.0, 0
    for i, s in enumerate(step):
        rows = slice(start, start + s.query_len)
        start += s.query_len
        expected = attention(query[rows].double(), keys[i].double(), values[i].double(),
                             torch.arange(s.seq_len - s.query_len, s.seq_len),
                             config.head_size ** -0.5, 0.0)
        worst = max(worst, compare(output[rows], expected, dtype).worst_ratio)
    return called, tables, worst


STEP = tuple([Seq(300)] * 8 + [Seq(200, 100), Seq(20, 20)])
#: Four 5-page decodes: a jagged decode group spreads each over 2 page slots (8 entries).
FOUR_DECODES = tuple([Seq(300)] * 4 + [Seq(200, 100)])
#: Eight 3-page decodes: with 2 entries, 4 jagged groups of 2 tiles.
SHORT_DECODES = tuple([Seq(150)] * 8)


@pytest.mark.parametrize("env,step,kernels,tables", [
    ({}, STEP, ["batched_decode_head_major_kernel", "page_attn_head_major_prefill_kernel"], []),
    ({"SPYRE_ATTN_KV_LAYOUT": "token_major"}, STEP, ["page_attn_kernel"], []),
    ({"SPYRE_ATTN_KV_LAYOUT": "token_major", "SPYRE_ATTN_FOR_EACH_TILE": "0"}, STEP,
     ["batched_decode_kernel", "page_attn_kernel"], []),
    ({"SPYRE_BATCHED_DECODE": "0"}, STEP,
     ["page_attn_head_major_decode_kernel", "page_attn_head_major_prefill_kernel"], []),
    # decodes: 8 one-row tiles of 5 pages (capacity 8) over 8 entries, one group of 8 chunks;
    # the 100- and 20-token prefills: one tile of 128 rows over 4 pages, one of 64 over 1
    ({"SPYRE_JAGGED_ATTENTION": "1"}, STEP,
     ["jagged_decode_attn_kernel", "jagged_tile_attn_kernel"],
     [(1, 1, 32), (1, 4, 32), (1, 8, 8, 32)]),
    # 4 tiles of 8 pages over 8 entries: each tile's pages in 2 slots, 4 chunks
    ({"SPYRE_JAGGED_ATTENTION": "1", "SPYRE_ATTN_KV_LAYOUT": "token_major"}, FOUR_DECODES,
     ["jagged_decode_attn_kernel", "jagged_tile_attn_kernel"], [(1, 4, 8, 32), (1, 4, 32)]),
    # 8 tiles of 3 pages (capacity 4) over 2 entries: 4 groups of 2 tiles, 4 chunks each
    ({"SPYRE_JAGGED_ATTENTION": "1", "SPYRE_JAGGED_PARALLEL_ENTRIES": "2"}, SHORT_DECODES,
     ["jagged_decode_attn_kernel"], [(4, 4, 2, 32)]),
], ids=["default", "token-major", "token-major-python-walk", "per-sequence-decode", "jagged",
        "jagged-token-major-2-slots", "jagged-2-entries-4-groups"])
def test_every_path_of_today_matches_the_oracle(today_tree, env, step, kernels, tables):
    called, shapes, worst = drive(today_tree, env, step)
    assert called == kernels and shapes == sorted(tables)
    assert worst <= 1.0


def test_a_planted_jagged_error_fails_the_oracle(spyre_repo, tmp_path):
    """The check above can fail: a plan whose query rows see one key past their own position."""
    bad = spyre_repo.edit(JAGGED_PLAN, "upper = relative.clamp(-1, block_size - 1)",
                          "upper = (relative + 1).clamp(-1, block_size - 1)", parent=TODAY,
                          message="planted: each query row sees the next key too")
    tree = SourceTree.from_dir(spyre_repo.export(bad, tmp_path / "bad"))
    called, _, worst = drive(tree, {"SPYRE_JAGGED_ATTENTION": "1"}, STEP)
    assert "jagged_tile_attn_kernel" in called and worst > 1.0


def test_todays_compile_guard_raises_on_a_watched_kernels_late_compile(today_tree):
    handler = CaptureHandler()
    with isolated({}, today_tree, _standins(handler)):
        guard = importlib.import_module("spyre_inference.v1.worker.compile_guard")

        def kernel(x, n):
            return x * n

        guard.watch(kernel, "a watched kernel")
        compiled = torch.compile(kernel, backend="eager", dynamic=False)
        try:
            compiled(torch.ones(2), 2)                    # warmup: not reported
            guard.arm(guard.parse_level("warn"))
            compiled(torch.ones(3), 2)                    # a recompile: logged once
            compiled(torch.ones(3), 2)
            guard.arm(guard.CompileGuardLevel.ERROR)
            with guard.allow_compile("a phase that compiles on purpose"):
                compiled(torch.ones(5), 2)                # suspended: not reported
            with pytest.raises(guard.UnexpectedCompileError, match="a watched kernel recompiled"):
                compiled(torch.ones(4), 2)
        finally:
            guard.reset()
            torch._dynamo.reset()
    # once; the frame's number in the id is however many frames Dynamo compiled before it in
    # this process (other tests'), its recompile's is 1
    said = [m for m in handler.messages if "unexpectedly" in m]
    assert len(said) == 1 and re.fullmatch(
        r"a watched kernel recompiled unexpectedly \(compile_id=\d+/1\)\. This costs a full "
        r"Inductor compile here\.", said[0]), said
    with pytest.raises(ValueError, match="Invalid SPYRE_COMPILE_GUARD='strict'"):
        guard.parse_level("strict")


def test_today_sits_off_every_branch(spyre_repo):
    """main, its history and GENERATIONS stay what every other test measures."""
    assert spyre_repo.rev("main") == spyre_repo.rev(GENERATIONS[-1]) == spyre_repo.rev("gen4")
    assert spyre_repo.rev(f"{TODAY}^") == spyre_repo.rev("gen4")
    assert spyre_repo.rev(f"{TODAY_SPEC}^") == spyre_repo.rev(TODAY)
    assert not spyre_repo.git("branch", "--contains", TODAY).strip()
    assert spyre_repo.git("diff", "--name-only", TODAY, TODAY_SPEC).split() == [BUCKETER]


# -- what spyre-bench must do on it ------------------------------------------------------------
# Four subprocesses in all (module fixtures), each test reading its part: the default run's time.

def spyre_bench(*args: str) -> tuple[subprocess.CompletedProcess, object]:
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "200"})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, (json.loads(proc.stdout) if proc.stdout.strip() else None)


def _row(rows, **case) -> dict:
    """The one row whose case has these values (a case leaves out 0 speculative tokens and the
    default preset: None here)."""
    (row,) = [r for r in rows
              if all(r["case"].get(k, 0 if k == "spec_tokens" else None) == v
                     for k, v in case.items())]
    return row


@pytest.fixture(scope="module")
def ladders(spyre_repo):
    """today (base) and today-spec (head) at 0 and 3 speculative tokens, for the default model
    and one with per-layer K/V heads (some layers one head)."""
    return spyre_bench("ladders", "--base", spyre_repo.spec(TODAY), "--head",
                       spyre_repo.spec(TODAY_SPEC), *SMALL_ARGS, "--spec-tokens", "0,3",
                       "--preset", "granite-3.3-8b,mixed-kv-heads",
                       "--axes", "kv,query,num_blocks,num_seqs", "--json")


def test_ladders_of_today_are_its_bucketers(spyre_repo, ladders):
    proc, rows = ladders
    assert proc.returncode == 0, proc.stderr
    found = _row(rows, spec_tokens=0, preset=None)["subjects"][spyre_repo.spec(TODAY)]["ladders"]
    assert found["kv"] == [64, 128, 256, 512]
    assert found["query"] == [1, 256]
    assert found["num_blocks"] == [1, 2, 4, 8]
    assert found["num_seqs"] == [1, 2, 4, 8]     # from 1: today's builder batches any number


@pytest.mark.parametrize("tokens,query", [(0, [1, 256]), (3, [1, 4, 256])])
def test_speculative_tokens_add_the_verify_bucket_where_the_bucketer_reads_them(
        spyre_repo, ladders, tokens, query):
    """today-spec's bucketer reads speculative_config.num_speculative_tokens; today's does not."""
    proc, rows = ladders
    assert proc.returncode == 0, proc.stderr
    subjects = _row(rows, spec_tokens=tokens, preset=None)["subjects"]
    assert subjects[spyre_repo.spec(TODAY_SPEC)]["ladders"]["query"] == query
    assert subjects[spyre_repo.spec(TODAY)]["ladders"]["query"] == [1, 256]


def test_a_layer_with_one_kv_head_lifts_the_smallest_block_bucket_under_head_major(spyre_repo,
                                                                                  ladders):
    """The bucketer asks the model for each layer's K/V heads (model_arch_config's
    per_layer_overrides, get_num_kv_heads(parallel_config, arch[i])): where a layer has one,
    head-major (today's default) walks two blocks at least."""
    proc, rows = ladders
    assert proc.returncode == 0, proc.stderr
    found = _row(rows, spec_tokens=0, preset="mixed-kv-heads")["subjects"]
    assert found[spyre_repo.spec(TODAY)]["ladders"]["num_blocks"] == [2, 4, 8]


@pytest.fixture(scope="module")
def cost(spyre_repo):
    """The commit's defaults and its jagged path on 2 parallel entries (SPYRE_JAGGED_PARALLEL_
    ENTRIES, a knob only its envs.py names; nothing else reads it), on eight decodes and on a
    mixed step."""
    return spyre_bench("cost", "--subject", spyre_repo.spec(TODAY), *SMALL_ARGS,
                       "--overrides", "none,jagged", "--env", "SPYRE_JAGGED_PARALLEL_ENTRIES=2",
                       "--step", EIGHT_DECODES, "--step", MIXED, "--per-step", "--json")


def _steps(spyre_repo, done, jagged: bool) -> list[dict]:
    """The per-step figures of the cost row with (or without) the jagged path."""
    proc, rows = done
    assert proc.returncode == 0, proc.stderr
    (row,) = [r for r in rows if ("SPYRE_JAGGED_ATTENTION" in r["case"]["env"]) == jagged]
    figures = row["subjects"][spyre_repo.spec(TODAY)]
    assert "skipped" not in figures, figures
    return figures["per_step"]


def test_cost_measures_todays_default_the_head_major_batched_path(spyre_repo, cost):
    """No override: the commit's own defaults (head-major, batched decode on, the tiled walk);
    the split page index [chunks, E, 1] still walks 2 chunks."""
    step = _steps(spyre_repo, cost, jagged=False)[0]
    assert (step["path"], step["b_seqs"], step["b_blocks"]) == ("batched", 8, 8)
    assert (step["blocks_per_chunk"], step["num_chunks"], step["iterations_per_layer"]) == (4, 2, 2)
    assert step["padded_kv_slots"] == 8 * 8 * 64
    # the slot index one int64 tensor per KV head; the rows repeated per block slot; the page
    # ids split per chunk [2, 32, 1]; the mask [8, 8, KV 2, 1, 64] fp16 (its KV axis kept under
    # the tiled walk): 5 copies
    assert step["h2d_bytes_by_tensor"]["kv_write_index"] == 2 * 8 * 8
    assert step["h2d_bytes"] == 2 * 8 * 8 + 32 * 4 + 2 * 32 * 4 + 8 * 8 * 2 * 64 * 2
    assert step["transfers"] == 5


def test_cost_reads_the_jagged_groups_loop_counts_of_the_commits_own_knob(spyre_repo, cost):
    """The mixed step's decode group: 4 one-row tiles of 5 pages (capacity 8) over 2 entries,
    2 tiles a group: 2 groups x 8 chunks (over the default 64 entries: 1 x 4); its tile group:
    one 128-row tile over 4 pages. 20 page trips in 2 calls."""
    step = _steps(spyre_repo, cost, jagged=True)[1]
    assert step["iterations_per_layer"] == 2 * 8 + 4 and step["launches_per_layer"] == 2


def test_cost_of_token_major_runs_per_sequence_under_the_tiled_walk(spyre_repo):
    spec = spyre_repo.spec(TODAY)
    proc, rows = spyre_bench("cost", "--subject", spec, *SMALL_ARGS, "--env",
                             "SPYRE_ATTN_KV_LAYOUT=token_major", "--step", EIGHT_DECODES,
                             "--per-step", "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = rows
    (step,) = row["subjects"][spec]["per_step"]
    assert step["path"] == "per-sequence" and step["iterations_per_layer"] == 8 * 8


@pytest.fixture(scope="module")
def kernel(spyre_repo):
    """The commit's own forward on its jagged path (a decode and a tile group), timed briefly."""
    return spyre_bench("kernel", "--subject", spyre_repo.spec(TODAY), *SMALL_ARGS,
                       "--overrides", "jagged", "--step", MIXED, "--repeat", "2", "--warmup", "1",
                       "--json")


def _kernel_row(done) -> dict:
    proc, doc = done
    assert proc.returncode == 0, proc.stderr
    (row,) = doc["rows"]
    assert "wrong" not in row and "skipped" not in row, row
    return row


def test_kernel_runs_todays_jagged_kernels_through_its_forward_and_the_oracle_passes(kernel):
    row = _kernel_row(kernel)
    (shape,) = row["timing"]["shapes"]
    assert shape["through"] == "forward" and shape["launches"] == 2
    assert shape["iterations_per_layer"] == 8 and shape["max_abs_error"] < 1e-2
    # one graph per group's key: the kernels' own .to() casts break no graph
    assert row["graphs"]["graphs_by_kernel"] == {"jagged_decode_attn_kernel": 1,
                                                 "jagged_tile_attn_kernel": 1}


def test_kernel_reports_todays_compile_guard_beside_its_own_late_compiles(kernel):
    """The commit's guard, armed at its strictest after the commit's own warmup (record_graphs:
    its jagged_plan_variants, 28 decode and 16 + 12 + 4 tile shapes at this engine), beside
    spyre-bench's late compiles of the same run and the exact model's: today's recorder covers
    the jagged groups this step makes, so all three say none (tests/test_spyre_paths.py plants
    the gaps that make them differ)."""
    guard = _kernel_row(kernel)["graphs"]["compile_guard"]
    assert guard["level"] == "error_all" and guard["warmup_variants"] == 60
    assert guard["violations"] == guard["late_compiles"] == guard["model_late"] == 0
    assert guard["agrees"] is True and guard["finding"] is None


def test_the_bucketers_own_ladders_need_only_the_bucketer(spyre_repo):
    """Today's default path's backend reaching a module its tree lacks (as the assembled
    up-19461caa's head-major kernels): the bucketer's own axes are computed still, saying why the
    batched figures are absent; every axis (the batched ones are the builder's) skips naming it."""
    gap = "spyre_inference.v1.attention.ops.gone"
    rev = spyre_repo.edit(HEAD_MAJOR_BACKEND, "from spyre_inference import envs\n",
                          f"from spyre_inference import envs\nimport {gap}  # noqa: F401\n",
                          parent=TODAY)
    args = ["ladders", "--subject", spyre_repo.spec(rev), *SMALL_ARGS, "--json"]
    proc, rows = spyre_bench(*args, "--axes", "kv,query,num_blocks,num_seqs")
    assert proc.returncode == 0, proc.stderr
    (figures,) = rows[0]["subjects"].values()
    assert figures["ladders"]["kv"] == [64, 128, 256, 512]
    assert figures["ladders"]["query"] == [1, 256]
    assert gap in figures["batched_unavailable"]
    assert "batched_keys_reachable" not in figures
    table = subprocess.run([sys.executable, "-m", "harness", *args[:-1], "--axes", "kv,query"],
                           capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    caption = " ".join(table.stdout.split()).split("no batched figures: ")
    assert len(caption) == 2 and gap in caption[1]
    proc, rows = spyre_bench(*args)
    assert proc.returncode == 2 and gap in proc.stderr.splitlines()[0]
    assert all(gap in f["skipped"] for r in rows for f in r["subjects"].values())


def test_the_kernel_table_says_a_forward_row_records_no_warmup(spyre_repo):
    """Counted through the commit's forward() no warmup is recorded, so every graph is late:
    the table says so instead of claiming recorded warmup variants and a warmup of 0."""
    proc = subprocess.run([sys.executable, "-m", "harness", "kernel", "--subject",
                           spyre_repo.spec(TODAY), *SMALL_ARGS, "--overrides", "jagged",
                           "--step", MIXED, "--no-timing"],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "warmup variants recorded where the kernel is called directly)" in text
    graphs_row = next(line for line in proc.stdout.splitlines() if "│ jagged" in line)
    assert "│ 2 (2) │ not recorded │ 2 (2) │" in " ".join(graphs_row.split())
    assert "which records no warmup, so every graph" in text
