"""pytest-benchmark microbenchmarks of decode-kernel buckets, with their exact figures.

Tiers: the quick buckets (small shapes) run in the default test run, once each with benchmarks
disabled; ``kernel_full`` (the standard microbenchmark defaults and the #810 review's buckets) and
``inductor`` (compiled with inductor, cold cache) are opt-in: ``make bench-kernel``,
``make test-inductor``. Every benchmark checks its output against the oracle, and records in
``extra_info`` the figures that are exact: loop iterations, launches, host-to-device bytes by
tensor, K/V bytes walked, compile keys and the graphs they compiled.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounterWithBackend

from harness.measure.compiles import cold_compile_cache
from harness.measure.device import select
from harness.measure.oracle import check_step
from harness.measure.probes import KV_ABOVE, NOTES, REVIEW, SMALL, Probe, prepare
from harness.model.cost import step_cost
from harness.subjects import resolve_subject
from harness.subjects.reference.kernels import attend_sequence
from harness.workloads import parse_step


@dataclass(frozen=True)
class Bucket:
    """A probe run on one reference policy's kernel and bucketing."""

    name: str
    probe: Probe
    policy: str


_4X8 = Probe("4x8", SMALL, "512,512,512,512")
_4X16 = Probe("4x16", NOTES, "2048,2048,2048,2048")
_3BLK = Probe("3blk", REVIEW, "150,150,150,150", env=KV_ABOVE)
QUICK = [
    Bucket("A-4x8", _4X8, "post-810-clamp"),
    Bucket("B-4x8", _4X8, "chunked"),
    Bucket("per-seq-4x8", Probe("4x8", SMALL, _4X8.step, per_sequence=True), "post-810-clamp"),
]
FULL = [
    Bucket("notes-A-4x16", _4X16, "post-810-clamp"),
    Bucket("notes-B-4x16", _4X16, "chunked"),
    Bucket("notes-per-seq-4x16", Probe("4x16", NOTES, _4X16.step, per_sequence=True),
           "post-810-clamp"),
    Bucket("review-pre810-3blk", _3BLK, "pre-810"),
    Bucket("review-topup-3blk", _3BLK, "post-810-topup"),
    Bucket("review-clamp-3blk", _3BLK, "post-810-clamp"),
]
PARAMS = [pytest.param(b, id=b.name) for b in QUICK] + [
    pytest.param(b, id=b.name, marks=pytest.mark.kernel_full) for b in FULL]


def _prepare(bucket: Bucket, device):
    """The probe's calls on the policy's kernel, checked against the oracle once."""
    p = prepare(bucket.probe, resolve_subject(f"reference:{bucket.policy}"), device)
    return (bucket.probe.engine_config(), p.bucketing, p.kernel, parse_step(bucket.probe.step),
            p.calls)


def _count_graphs(calls, kernel, backend="eager"):
    """Compile the step's kernels once; graphs per kernel and the compiled callables."""
    torch._dynamo.reset()
    batched, single = CompileCounterWithBackend(backend), CompileCounterWithBackend(backend)
    fns = (torch.compile(kernel, backend=batched, dynamic=False),
           torch.compile(attend_sequence, backend=single, dynamic=False))
    outputs = calls.run(*fns)
    return batched.frame_count + single.frame_count, fns, outputs


def _exact_figures(config, bucketing, step, calls, graphs, device) -> dict:
    model = step_cost(bucketing, config, step)
    assert calls.h2d() == model.h2d and calls.keys == model.keys  # built == modelled, exactly
    return {"device": device.description, "keys": [str(k) for k in calls.keys],
            "graphs": graphs, "iterations_per_layer": calls.iterations,
            "iterations_per_step": calls.iterations * config.num_layers,
            "launches_per_layer": calls.launches, "decode_tokens": calls.decode_tokens,
            "h2d_bytes": sum(calls.h2d().values()), "h2d_bytes_by_tensor": calls.h2d(),
            "kv_bytes_per_layer": calls.kv_bytes(), "num_layers": config.num_layers}


@pytest.mark.parametrize("bucket", PARAMS)
def test_kernel_bucket(benchmark, bucket):
    device = select("auto")
    device.prepare()
    config, bucketing, kernel, step, calls = _prepare(bucket, device)
    graphs, _, compiled_out = _count_graphs(calls, kernel)
    check_step(calls, compiled_out)
    assert graphs == len(set(calls.keys))
    benchmark.extra_info.update(_exact_figures(config, bucketing, step, calls, graphs, device))

    def one_layer():
        out = calls.run(kernel, attend_sequence)
        device.synchronize()
        return out

    outputs = benchmark(one_layer)
    check_step(calls, outputs)


@pytest.mark.inductor
@pytest.mark.parametrize("bucket", [pytest.param(b, id=b.name) for b in QUICK])
def test_kernel_bucket_inductor(benchmark, bucket):
    device = select("auto")
    config, bucketing, kernel, step, calls = _prepare(bucket, device)
    with cold_compile_cache():
        t0 = time.perf_counter()
        graphs, fns, outputs = _count_graphs(calls, kernel, backend="inductor")
        device.synchronize()
        compile_s = time.perf_counter() - t0
    check_step(calls, outputs)
    assert graphs == len(set(calls.keys))
    figures = _exact_figures(config, bucketing, step, calls, graphs, device)
    benchmark.extra_info.update({**figures, "backend": "inductor",
                                 "first_call_s_cold_cache": compile_s})
    outputs = benchmark(lambda: calls.run(*fns))
    check_step(calls, outputs)
