"""The engine config a commit reads (issue 32, part 3): model presets and speculative tokens reach
its bucketer and its builder as vLLM's config carries them (``speculative_config``,
``model_arch_config.per_layer_overrides``, ``get_num_kv_heads(parallel_config, layer)``), through
one config object, and the figures of a config are kept apart from another's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.config import EngineConfig
from harness.presets import DEFAULT_PRESET, PRESETS, preset_config
from tests.fixtures.spyre_repo import BUCKETER

#: What today's bucketers do with the config (written here from what they do, as a fixture
#: edit of generation 4): a verify query bucket of 1 + the drafts, and the fewest K/V heads of
#: any layer, said as a warning so the test can read what reached the code.
READS_TODAYS_CONFIG = '''
        spec = vllm_config.speculative_config
        if spec is not None and 1 + spec.num_speculative_tokens <= max_num_batched_tokens:
            self._query_buckets = sorted({*self._query_buckets, 1 + spec.num_speculative_tokens})
        model, parallel = vllm_config.model_config, vllm_config.parallel_config
        arch = model.model_arch_config
        fewest = min((model.get_num_kv_heads(parallel, arch[i])
                      for i in range(len(arch.per_layer_overrides or ()))),
                     default=model.get_num_kv_heads(parallel))
        logger.warning("fewest K/V heads of any layer: %d", fewest)
'''
ANCHOR = "        logger.info(\"attention buckets: kv up to"


def spyre_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"})


@pytest.fixture(scope="module")
def todays(spyre_repo) -> str:
    return spyre_repo.spec(spyre_repo.edit(BUCKETER, ANCHOR, READS_TODAYS_CONFIG + ANCHOR,
                                           parent="gen4"))


def test_the_default_preset_is_the_default_config():
    assert preset_config(DEFAULT_PRESET) == EngineConfig()
    for name in PRESETS:   # every preset is a valid config
        preset_config(name)


def test_speculative_tokens_and_per_layer_heads_reach_the_commits_bucketer(todays):
    done = spyre_bench("ladders", "--subject", todays, "--block-size", "64",
                       "--max-model-len", "2048", "--spec-tokens", "0,3",
                       "--preset", "granite-3.3-8b,mixed-kv-heads", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    got = {(r["case"].get("preset", DEFAULT_PRESET), r["case"].get("spec_tokens", 0)):
           r["subjects"][todays] for r in rows}
    assert set(got) == {(p, s) for p in (DEFAULT_PRESET, "mixed-kv-heads") for s in (0, 3)}
    for (preset, spec), fig in got.items():
        want = [1, 512, 1024, 1536, 2048] if spec == 0 else [1, 4, 512, 1024, 1536, 2048]
        assert fig["ladders"]["query"] == want
        heads = 1 if preset == "mixed-kv-heads" else 8
        assert fig["notes"] == [f"fewest K/V heads of any layer: {heads}"]
    # a speculative config's figures are its own (the memo keeps them apart)
    assert got[(DEFAULT_PRESET, 3)]["variants"] > got[(DEFAULT_PRESET, 0)]["variants"]


def test_the_builder_gets_the_same_config_as_the_bucketer(todays):
    """The builder constructs its own bucketer from the config it is handed: a verify step
    (four sequences of 4 new tokens) pads onto the verify bucket only when the builder's config
    carries the drafts."""
    keys = {}
    for spec in ("0", "3"):
        done = spyre_bench("cost", "--subject", todays, "--block-size", "64",
                           "--max-model-len", "2048", "--spec-tokens", spec,
                           "--step", "150,150,150,150|4,4,4,4", "--json")
        assert done.returncode == 0, done.stderr
        (row,) = json.loads(done.stdout)
        keys[spec] = row["subjects"][todays]["compile_keys"]
    assert keys == {"0": ["attn[4, 512]"], "3": ["attn[4, 4]"]}


def test_a_bad_preset_or_count_is_one_line_and_exit_2():
    for args, said in ((("--preset", "nope"), "unknown preset 'nope'"),
                       (("--spec-tokens", "-3"), "--spec-tokens: expected non-negative"),
                       (("--spec-tokens", "2.5"), "--spec-tokens: expected non-negative")):
        done = spyre_bench("ladders", *args)
        assert done.returncode == 2 and said in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout


def test_the_reference_says_what_it_does_not_model():
    """The embedded reference has no speculative config, FP8 cache or per-layer heads: a skip
    naming each, never its ladders standing in for them."""
    for args, said in ((("--spec-tokens", "3"), "does not model speculative decoding (3 tokens)"),
                       (("--preset", "granite-3.3-8b-fp8"), "does not model a fp8 K/V cache"),
                       (("--preset", "mixed-kv-heads"), "does not model per-layer head counts")):
        done = spyre_bench("ladders", "--subject", "reference:latest", *args, "--json")
        assert done.returncode == 2 and said in done.stdout, (done.stdout, done.stderr)
