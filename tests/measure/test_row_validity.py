"""A timing row says whether it can be trusted: a graph compiled during the timed samples makes
it invalid (reported, never shown as a timing); efficiency figures follow from exact bytes."""

from __future__ import annotations

import itertools

import torch
import torch._dynamo

from harness.config import EngineConfig
from harness.measure.device import select
from harness.measure.efficiency import logical_bytes, row_efficiency
from harness.measure.kernel_figures import row_validity
from harness.measure.settings import KernelOptions
from harness.measure.shape_timing import workload_timing
from harness.measure.timing import measure


def test_a_recompile_during_timing_makes_the_row_invalid():
    torch._dynamo.reset()
    dev = select("cpu")
    sizes = itertools.count(1)
    add = torch.compile(lambda x: x + 1, backend="eager", dynamic=False)

    def fn():   # every call a new shape: Dynamo compiles a new graph (dynamic=False)
        return add(torch.ones(next(sizes)))

    samples = measure(dev, fn, repeat=3, warmup=1, number=1)
    validity = row_validity(samples, KernelOptions(device=dev))
    assert samples.new_graphs >= 1 and validity["invalid"]
    assert "compiled during the timed samples" in validity["invalid"][0]
    steady = measure(dev, lambda: add(torch.ones(1)), repeat=3, warmup=2, number=1)
    ok = row_validity(steady, KernelOptions(device=dev))
    assert steady.new_graphs == 0 and not ok["invalid"]
    assert ok["torch"] == torch.__version__ and ok["threads"] >= 1 and ok["device"]
    torch._dynamo.reset()


def test_an_invalid_shape_is_no_timing_in_the_workload_figures():
    class W:
        steps = [[type("S", (), {"is_decode": True})()]] * 2
    out = workload_timing([], W, {"a": [0], "b": [1]}, ["a", "b"], {"b": 10.0}, num_layers=1)
    assert out["timed_shapes"] == 1 and out["steps_timed"] == 1


def test_padding_and_kernel_efficiency_apart():
    c = EngineConfig(block_size=64, max_model_len=2048, num_kv_heads=8, queries_per_kv=4,
                     head_size=128, dtype="float16")
    lb = logical_bytes(c, [150] * 4)
    assert lb["kv"] == 2 * 8 * 128 * 2 * 600
    walked_kv = 2 * 4 * 128 * 64 * 8 * 128 * 2            # 4 sequences x 128 blocks of 64
    e = row_efficiency(c, [150] * 4, [1] * 4, walked_kv, 1e-3, bandwidth_gbps=100.0)
    assert abs(e["padding_efficiency"] - 600 / (128 * 64 * 4)) < 1e-12   # 1.8%
    assert abs(e["kernel_efficiency"] - e["walked_gb_per_s"] / 100.0) < 1e-12
    assert e["roofline_fraction"] < e["kernel_efficiency"]
