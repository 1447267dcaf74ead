"""Workload mixes are deterministic and sized from the config; traces fail with their line."""

import pytest

from harness.config import EngineConfig
from harness.errors import TraceError
from harness.workloads import MIXES, generate, load_trace, parse_step, specs

CONFIG = EngineConfig(block_size=128, max_model_len=4096, max_num_seqs=16,
                      max_num_batched_tokens=1024)


@pytest.mark.parametrize("name", list(MIXES))
def test_mixes_are_seeded_and_fit_the_config(name):
    a, b = generate(name, CONFIG, steps=20, seed=3), generate(name, CONFIG, steps=20, seed=3)
    assert a.steps == b.steps and len(a.steps) == 20
    a.check_fits(CONFIG)
    if name not in ("all-at-max", "four-3-block-decodes"):  # deterministic by design
        assert generate(name, CONFIG, steps=20, seed=4).steps != a.steps


def test_mix_shapes():
    lens = lambda name: [s.seq_len for step in generate(name, CONFIG).steps for s in step]  # noqa
    assert set(lens("all-at-max")) == {4096}
    probe = generate("four-3-block-decodes", CONFIG).steps
    assert all(len(step) == 4 and {s.seq_len for s in step} == {320} for step in probe)  # 3 blocks
    assert max(lens("uniform-short")) <= 4096 // 8
    assert min(lens("uniform-long")) >= 2048
    assert all(len(step) < 4 for step in generate("below-minimum", CONFIG).steps)
    assert all(4 <= len(step) <= 16 for step in generate("uniform-short", CONFIG).steps)
    mixed = generate("mixed-prefill-decode", CONFIG).steps
    assert all(any(not s.is_decode for s in step) for step in mixed)
    assert all(sum(s.query_len for s in step) <= 1024 for step in mixed)
    bimodal = lens("bimodal")
    assert all(v <= 256 or v >= 3072 for v in bimodal) and min(bimodal) <= 256 <= max(bimodal)


def test_mixes_scale_with_the_config():
    small = EngineConfig(max_model_len=256, max_num_seqs=4)
    for name in MIXES:
        generate(name, small, steps=10).check_fits(small)


def test_parse_step_formats():
    assert [(s.seq_len, s.query_len) for s in parse_step("150, 150 300")] == [(150, 1), (150, 1),
                                                                             (300, 1)]
    assert [(s.seq_len, s.query_len) for s in parse_step("2048,300 | 512,1")] == [(2048, 512),
                                                                                (300, 1)]


def test_trace_replay_and_errors_name_the_line(tmp_path):
    good = tmp_path / "good.trace"
    good.write_text("# step per line\n150,150,150,150\n\n2048,300 | 512,1  # a prefill\n")
    w = load_trace(good)
    assert len(w.steps) == 2 and w.origin(1) == f"{good}:4"

    bad = tmp_path / "bad.trace"
    for text, message in [("100,abc\n", ":1: seq_len 'abc' is not an integer"),
                          ("1\n100,0\n", ":2: seq_len must be >= 1"),
                          ("100,200 | 1\n", "2 seq_lens but 1 query_lens"),
                          ("100 | 200\n", "query_len 200 > seq_len 100"),
                          ("| 1\n", "no sequence lengths"), ("# empty\n", "no steps")]:
        bad.write_text(text)
        with pytest.raises(TraceError, match=message):
            load_trace(bad)
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(tmp_path / "missing.trace")


def test_trace_that_does_not_fit_names_the_line(tmp_path):
    trace = tmp_path / "t.trace"
    trace.write_text("100\n5000\n")
    with pytest.raises(TraceError, match=r"t.trace:2: seq_len 5000 > max_model_len 4096"):
        load_trace(trace).check_fits(CONFIG)
    trace.write_text(",".join(["10"] * 17) + "\n")
    with pytest.raises(TraceError, match="17 sequences > max_num_seqs 16"):
        load_trace(trace).check_fits(CONFIG)
    trace.write_text("2000,2000 | 1000,1000\n")
    with pytest.raises(TraceError, match="2000 scheduled tokens > max_num_batched_tokens 1024"):
        load_trace(trace).check_fits(CONFIG)


def test_specs_default_to_every_mix_and_reject_unknown_names():
    assert [s.name for s in specs()] == list(MIXES)
    assert [s.name for s in specs(steps_inline=["150"])] == ["steps"]
    with pytest.raises(TraceError, match="unknown workload 'uniform'"):
        specs(["uniform"])


@pytest.mark.parametrize("mns,mnbt", [(1, 2), (2, 2), (2, 3), (3, 3), (4, 5), (8, 15), (16, 16)])
def test_mixed_prefill_decode_fits_tiny_budgets_with_a_prefill_every_step(mns, mnbt):
    config = EngineConfig(max_num_seqs=mns, max_num_batched_tokens=mnbt)
    for seed in range(5):
        w = generate("mixed-prefill-decode", config, steps=50, seed=seed)
        w.check_fits(config)
        assert all(step and any(not s.is_decode for s in step) for step in w.steps)


def test_mixed_prefill_decode_without_room_for_a_prefill_is_a_trace_error():
    with pytest.raises(TraceError, match="needs room for a prefill chunk"):
        generate("mixed-prefill-decode", EngineConfig(max_num_seqs=1, max_num_batched_tokens=1))


def test_a_non_utf8_trace_is_one_error(tmp_path):
    trace = tmp_path / "t.trace"
    trace.write_bytes(b"150\n\xff\n")
    with pytest.raises(TraceError, match=r"t.trace: not UTF-8 text \(byte 0xff at offset 4\)"):
        load_trace(trace)
