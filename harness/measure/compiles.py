"""Compiled graphs, counted exactly: a workload through ``torch.compile(kernel, dynamic=False)``.

What serving does, in order: record the subject's warmup variants (the model's ``warmup_keys``),
then run every step of the workload, dispatched on the subject's bucketing by the model. Each
kernel is compiled through its own counting backend, so graphs are counted per kernel and per
phase; graphs compiled after warmup are "late compiles". Dynamo's cache belongs to the code
object, so it is reset (with the counters) before every run.

Past ``recompile_limit`` graphs per code object (8 by default) Dynamo silently runs the function
eagerly. Here every call knows its compile key: a key seen for the first time that compiles no
graph is a fall-back, reported as such (and cross-checked with Dynamo's own "recompile limit
exceeded" counter). With a cold compile cache (a fresh TORCHINDUCTOR_CACHE_DIR) the first call of
each key, less a second call of it, is that variant's compile time (the backend's one-time
start-up is paid beforehand on a trivial graph, so it is charged to no variant).
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from dataclasses import dataclass, field

import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounterWithBackend
from torch._dynamo.utils import counters

from harness.config import EngineConfig
from harness.errors import HarnessError
from harness.generations import Generation
from harness.measure.device import Device
from harness.measure.inputs import BatchedCall, Workspace, check_generation
from harness.measure.oracle import check_call
from harness.model.cost import workload_cost
from harness.model.dispatch import CompileKey
from harness.subjects.base import Bucketing
from harness.subjects.reference_kernels import attend_sequence
from harness.workloads import Workload

#: Backends cheap enough for counting in CI; anything else is the real compiler.
CHEAP_BACKENDS = ("eager", "aot_eager")
_LIMIT_EXCEEDED = "Dynamo recompile limit exceeded"


@dataclass
class GraphCount:
    """Graphs compiled for one workload, next to what the exact model predicts."""

    backend: str
    recompile_limit: int
    recorded_warmup: bool
    #: Distinct keys the model predicts the workload reaches, and those warmup does not record.
    model_keys: tuple[CompileKey, ...]
    model_late: tuple[CompileKey, ...]
    warmup_keys: tuple[CompileKey, ...]
    graphs_warmup: int = 0
    graphs_workload: int = 0
    graphs_by_kernel: dict[str, int] = field(default_factory=dict)
    #: Dynamo's own tally (counters["stats"]["unique_graphs"]), a cross-check.
    unique_graphs: int = 0
    #: Keys that compiled during the workload phase (measured late compiles).
    late_keys: list[CompileKey] = field(default_factory=list)
    #: Keys called for the first time that compiled no graph past the recompile limit: eager.
    fallbacks: list[CompileKey] = field(default_factory=list)
    #: Keys called for the first time that compiled no graph below the limit: Dynamo skipped
    #: the kernel (disabled, or nothing to trace) or an earlier graph served a new key.
    uncompiled: list[CompileKey] = field(default_factory=list)
    #: Dynamo counted "recompile limit exceeded" at least once.
    limit_hit: bool = False
    compile_seconds: dict[CompileKey, float] = field(default_factory=dict)
    checked_calls: int = 0
    max_abs_error: float = 0.0
    inductor_cache: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    #: The subject's own Dynamo settings the run applied (its platform module's).
    compile_settings: dict = field(default_factory=dict)

    @property
    def graphs(self) -> int:
        return self.graphs_warmup + self.graphs_workload

    @property
    def expected_graphs(self) -> int:
        """What the model says: one graph per distinct key, warmup's included when recorded."""
        keys = set(self.model_keys) | (set(self.warmup_keys) if self.recorded_warmup else set())
        return len(keys)

    @property
    def expected_late(self) -> int:
        return len(self.model_late) if self.recorded_warmup else len(self.model_keys)

    @property
    def verdict(self) -> str:
        """"yes" when the measured graphs are the model's, else why not."""
        why = []
        if self.fallbacks:
            why.append(f"{len(self.fallbacks)} fall-backs")
        if self.uncompiled:
            why.append(f"{len(self.uncompiled)} keys compiled no graph")
        if self.graphs != self.expected_graphs:
            why.append(f"{self.graphs} graphs for {self.expected_graphs} keys")
        elif self.graphs_workload != self.expected_late:
            why.append(f"{self.graphs_workload} late for {self.expected_late}")
        return "NO: " + ", ".join(why) if why else "yes"

    @property
    def matches_model(self) -> bool:
        return (self.graphs == self.expected_graphs and self.graphs_workload == self.expected_late
                and not self.fallbacks and not self.uncompiled)

    def as_dict(self) -> dict:
        secs = list(self.compile_seconds.values())
        return {
            "backend": self.backend, "recompile_limit": self.recompile_limit,
            "compile_settings": {k: repr(v) for k, v in self.compile_settings.items()},
            "recorded_warmup": self.recorded_warmup, "steps": self.steps,
            "graphs": self.graphs, "graphs_warmup": self.graphs_warmup,
            "graphs_workload": self.graphs_workload, "graphs_by_kernel": self.graphs_by_kernel,
            "unique_graphs": self.unique_graphs, "expected_graphs": self.expected_graphs,
            "model_keys": len(self.model_keys), "model_late": len(self.model_late),
            "warmup_variants": len(self.warmup_keys),
            "late_compiles": self.graphs_workload, "expected_late": self.expected_late,
            "late_compile_keys": [str(k) for k in self.late_keys],
            "fallbacks": len(self.fallbacks), "fallback_keys": [str(k) for k in self.fallbacks],
            "uncompiled_keys": [str(k) for k in self.uncompiled],
            "recompile_limit_hit": self.limit_hit, "matches_model": self.matches_model,
            "verdict": self.verdict,
            "compile_seconds": {str(k): v for k, v in self.compile_seconds.items()},
            "compile_seconds_total": sum(secs),
            "compile_seconds_mean": sum(secs) / len(secs) if secs else None,
            "compile_seconds_max": max(secs) if secs else None,
            "checked_calls": self.checked_calls, "max_abs_error": self.max_abs_error,
            "inductor_cache": self.inductor_cache,
        }


class BackendError(HarnessError):
    """A torch.compile backend name this torch does not know."""


def check_backend(name: str) -> None:
    """Fail early, in one line, on a backend name torch.compile would reject mid-run."""
    from torch._dynamo.backends.registry import list_backends, lookup_backend
    try:
        lookup_backend(name)
    except Exception:  # noqa: BLE001 - torch raises several kinds here
        known = sorted(set(list_backends(exclude_tags=())) | set(CHEAP_BACKENDS))
        raise BackendError(f"--backend {name!r}: not a torch.compile backend here; known: "
                           f"{', '.join(known)}") from None


@contextlib.contextmanager
def _quiet_recompile_warnings():
    """Dynamo logs the limit hit as a warning; the count reports it, so keep stderr clean."""
    logger = logging.getLogger("torch._dynamo.convert_frame")
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextlib.contextmanager
def cold_compile_cache():
    """A fresh, empty TORCHINDUCTOR_CACHE_DIR (and cleared in-memory caches) for the block."""
    with tempfile.TemporaryDirectory(prefix="spyre-bench-inductor-") as tmp:
        try:
            from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir
        except ImportError:  # pragma: no cover - older torch
            import os
            from unittest import mock
            with mock.patch.dict(os.environ, {"TORCHINDUCTOR_CACHE_DIR": tmp}):
                yield tmp
            return
        with temporary_cache_dir(tmp):
            yield tmp


_PRIMED: set[str] = set()


def prime_backend(backend: str, device=None) -> None:
    """Compile one trivial graph with ``backend`` (own throwaway cache), once per process.

    The first compile in a process pays the backend's one-time start-up (inductor: ~10 s of
    imports and toolchain probing on a CPU); without this it would be charged to whichever
    variant happens to compile first.
    """
    if backend in _PRIMED or backend in CHEAP_BACKENDS:
        return
    with cold_compile_cache():
        fn = torch.compile(lambda x: torch.tanh(x) * 2 + 1, backend=backend, dynamic=False)
        fn(torch.ones(8, device=device))
    torch._dynamo.reset()
    _PRIMED.add(backend)


class _Counted:
    """One kernel compiled through its own counting backend; knows the keys it has seen."""

    def __init__(self, fn, backend: str):
        self.counter = CompileCounterWithBackend(backend)
        self.compiled = torch.compile(fn, backend=self.counter, dynamic=False)
        self.seen: set[CompileKey] = set()
        #: Dynamo gave up on this kernel's code object: later new keys run eagerly.
        self.fell_back = False


def _limit_hits() -> int:
    return sum(n for reason, n in counters["unimplemented"].items()
               if str(reason).startswith(_LIMIT_EXCEEDED))


def count_graphs(kernel, generation: Generation, bucketing: Bucketing, config: EngineConfig,
                 workload: Workload, *, device: Device | None = None, backend: str = "eager",
                 recompile_limit: int | None = None, record_warmup: bool = True,
                 check: bool = True, seed: int = 0, sequence_kernel=attend_sequence,
                 workspace: Workspace | None = None,
                 settings: dict | None = None) -> GraphCount:
    """Run ``workload`` through compiled kernels and count the graphs, exactly.

    ``settings``: the subject's own ``torch._dynamo.config`` values (its platform module's),
    applied for the run; fall-backs are judged against the limit they give (unless
    ``recompile_limit`` overrides it).
    """
    check_generation(generation, bucketing)
    model = workload_cost(bucketing, config, workload)
    settings = dict(settings or {})
    with torch._dynamo.config.patch(**settings):
        subject_limit = torch._dynamo.config.recompile_limit
    limit = recompile_limit if recompile_limit is not None else subject_limit
    dev = device.torch_device if device else torch.device("cpu")
    ws = workspace or Workspace.for_steps(config, workload.steps, dev, seed)
    result = GraphCount(backend, limit, record_warmup, model.keys, model.late_compiles,
                        tuple(sorted(model.warmup)), steps=len(workload.steps),
                        compile_settings=settings)
    prime_backend(backend, dev)
    torch._dynamo.reset()
    counters.clear()
    kernels = {"batched": _Counted(kernel, backend), "attn": _Counted(sequence_kernel, backend)}

    def call(c, phase: str):
        k = kernels["batched" if isinstance(c, BatchedCall) else "attn"]
        fn = k.compiled
        if c.key in k.seen:
            return c.run(fn)
        k.seen.add(c.key)
        before, hits = k.counter.frame_count, _limit_hits()
        t0 = time.perf_counter()
        out = c.run(fn)
        if device:
            device.synchronize()
        first = time.perf_counter() - t0
        new = k.counter.frame_count - before
        k.fell_back = k.fell_back or _limit_hits() > hits
        if new == 0:
            (result.fallbacks if k.fell_back else result.uncompiled).append(c.key)
        else:
            t0 = time.perf_counter()
            c.run(fn)
            if device:
                device.synchronize()
            result.compile_seconds[c.key] = max(0.0, first - (time.perf_counter() - t0))
            if phase == "workload":
                result.late_keys.append(c.key)
        if phase == "warmup":
            result.graphs_warmup += new
        else:
            result.graphs_workload += new
        if check:
            verdict = check_call(c, out)
            result.checked_calls += 1
            result.max_abs_error = max(result.max_abs_error, verdict.max_abs_error)
        return out

    cache = cold_compile_cache() if backend not in CHEAP_BACKENDS else contextlib.nullcontext()
    with cache, _quiet_recompile_warnings(), torch._dynamo.config.patch(**settings), \
            torch._dynamo.config.patch(recompile_limit=limit):
        if record_warmup:
            for c in ws.warmup(bucketing):
                call(c, "warmup")
        for i, step in enumerate(workload.steps):
            for c in ws.step(bucketing, step, seed=seed + i).calls:
                call(c, "workload")
    result.graphs_by_kernel = {name: k.counter.frame_count for name, k in kernels.items()}
    result.unique_graphs = int(counters["stats"]["unique_graphs"])
    result.limit_hit = _limit_hits() > 0
    result.inductor_cache = {k: int(v) for k, v in counters["inductor"].items()
                             if "cache" in k}
    torch._dynamo.reset()
    return result
