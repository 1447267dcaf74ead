"""The benchmark registry: every suite benchmark is in it, and the suite takes unit and version
from it, so compare, changes and bisect judge a series the way the suite defined it."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

from harness.registry import REGISTRY, BenchmarkDef, is_exact, is_timed, lookup, unit_of

DISCOVER = """
import importlib, inspect, json, pkgutil, benchmarks
out = {}
for info in pkgutil.iter_modules(benchmarks.__path__):
    mod = importlib.import_module(f"benchmarks.{info.name}")
    for cname, cls in inspect.getmembers(mod, inspect.isclass):
        if cls.__module__ != mod.__name__:
            continue
        for name, fn in inspect.getmembers(cls, callable):
            if name.startswith(("track_", "time_")):
                out[f"{mod.__name__.split('.')[-1]}.{cname}.{name}"] = [fn.unit, fn.version]
print(json.dumps(out))
"""


def _suite(tier: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", DISCOVER], capture_output=True, text=True,
                          env={**os.environ, "SPYRE_BENCH_TIER": tier}, check=True)
    import json
    return json.loads(proc.stdout)


def test_every_suite_benchmark_takes_unit_and_version_from_the_registry():
    found = _suite("full")
    assert set(found) == set(REGISTRY), "the suite and the registry list different benchmarks"
    for name, (unit, version) in found.items():
        assert (unit, version) == (REGISTRY[name].unit, REGISTRY[name].version), name


def test_exact_and_timed_are_decided_by_the_registry_alone():
    assert is_exact("exact.Workload.track_h2d_bytes_per_step")
    assert is_exact("kernel.Compile.track_graphs")
    assert not is_exact("kernel.Decode.time_layer") and is_timed("kernel.Decode.time_layer")
    assert not is_exact("kernel.CompileTime.track_compile_seconds")
    assert not is_exact("no.Such.track_thing") and not is_timed("no.Such.track_thing")
    assert lookup("kernel.Decode.time_layer('notes-4x16')").name == "kernel.Decode.time_layer"
    assert unit_of("h2d_bytes_per_step") == "bytes"
    assert unit_of("kernel.Compile.track_graphs") == "graphs"


def test_a_changed_meaning_is_a_new_version():
    d = REGISTRY["kernel.Compile.track_graphs"]
    assert dataclasses.replace(d, meaning=d.meaning + " (per layer)").version != d.version
    assert dataclasses.replace(d, revision=2).version != d.version
    assert dataclasses.replace(d).version == d.version
    versions = [b.version for b in REGISTRY.values()]
    assert len(set(versions)) == len(versions)
    assert all(isinstance(b, BenchmarkDef) and b.direction == "lower" for b in REGISTRY.values())
