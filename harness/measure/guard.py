"""The commit's own compile guard as a second opinion on spyre-bench's late-compile count.

Newer commits carry ``v1/worker/compile_guard.py``: kernels registered with ``watch()`` at
import, ``arm(level)`` once warmup returns, and from then on a compile of a watched kernel is
reported (``SPYRE_COMPILE_GUARD=warn``) or raised (``error``; ``error_all`` also for torch-spyre's
eager-op compiles) -- "meant for CI, to keep a warmup-coverage regression from landing". Here a
workload runs as the engine would run it under the guard's strictest level:

1. warmup is the commit's own ``record_graphs(layer, kv_cache, builder)``, each kernel compiled
   through a counting backend without computing (:class:`harness.measure.compiles._CountingBackend`);
   a variant whose key the workload never reaches is recorded, not compiled, when no kernel's
   graphs could reach the subject's recompile limit (then it cannot change a later compile);
   otherwise every variant compiles;
2. the guard is armed (the commit's ``arm``) and every step's forward runs with its kernels
   compiled and its output checked against the oracle. A compile the guard raises for is one
   violation, named by its step, key, label and compile id; the call is then repeated with the
   guard disarmed (and armed again after it) so the run goes on and every violation is counted.

Beside it, spyre-bench's own figures of the same run: the graphs compiled after warmup (by key)
and the exact model's late keys (reached keys warmup does not record). Where they disagree, the
result says so in one sentence ("the commit's guard would fail this workload at key ...;
spyre-bench counts ...").
"""

from __future__ import annotations

import contextlib

import torch
import torch._dynamo

from harness.errors import CapabilityMissing, SubjectRaised
from harness.measure.compiles import _CountingBackend
from harness.measure.oracle import check_live
from harness.subjects.spyre.drive.errors import KernelRaised
from harness.subjects.spyre.drive.kernel_proxy import KernelCall
from harness.subjects.spyre.drive.live import live_step, run_forward
from harness.subjects.spyre.drive.paths import read_step

#: The level names, strictest first (the commit's ``CompileGuardLevel`` values).
STRICTEST = ("error_all", "error")


def strictest(guard):
    """The commit's strictest guard level (its ``CompileGuardLevel`` member)."""
    levels = {level.value: level for level in guard.CompileGuardLevel}
    return next(levels[name] for name in STRICTEST if name in levels)


def _key(proxy, args, kwargs, block_size: int):
    call = KernelCall(proxy.fn.__name__, proxy.bind(args, kwargs))
    keys = read_step([call], (), None, block_size, lambda s, m: "").keys
    return keys[0] if keys else None


class _Run:
    """The proxies' targets for one guarded run, and what each phase saw."""

    def __init__(self, session, guard, reached: set, backend: str):
        self.session, self.guard, self.reached = session, guard, reached
        self.bs = session.config.block_size
        self.counters = {p: _CountingBackend(backend) for p in session.proxies}
        for p in session.proxies:
            p.widen_indices()
        self.compiled = {p: torch.compile(p.fn, backend=c, dynamic=False)
                         for p, c in self.counters.items()}
        #: warmup: key -> proxy of every variant the commit's recorder called
        self.recorded: dict = {}
        self.warm_compiled: set = set()
        self.compile_all = False
        #: workload: the step now running, keys that compiled late, and the guard's violations
        self.step = -1
        self.late: dict = {}
        self.violations: list[dict] = []

    def warm_target(self, proxy):
        compiled, counter = self.compiled[proxy], self.counters[proxy]

        def call(*args, **kwargs):
            key = _key(proxy, args, kwargs, self.bs)
            self.recorded.setdefault(key, proxy)
            if not (self.compile_all or key in self.reached):
                return proxy.recorded(proxy.bind(args, kwargs))
            before = counter.frame_count
            counter.shape_only = True
            counter.begin_call()
            try:
                return compiled(*args, **kwargs)
            finally:
                counter.shape_only = False
                if counter.frame_count > before or key in self.warm_compiled:
                    self.warm_compiled.add(key)
        return call

    def step_target(self, proxy, level):
        compiled, counter, guard = self.compiled[proxy], self.counters[proxy], self.guard

        def call(*args, **kwargs):
            before = counter.frame_count
            counter.begin_call()
            try:
                return compiled(*args, **kwargs)
            except guard.UnexpectedCompileError as exc:
                key = _key(proxy, args, kwargs, self.bs)
                self.violations.append({"step": self.step, "key": str(key),
                                        "message": str(exc).split(". ")[0]})
                guard.disarm()
                try:
                    counter.begin_call()
                    return compiled(*args, **kwargs)
                finally:
                    guard.arm(level)
            finally:
                if counter.frame_count > before:
                    key = _key(proxy, args, kwargs, self.bs)
                    self.late.setdefault(str(key), 0)
                    self.late[str(key)] += counter.frame_count - before
        return call

    def targets(self, phase: str | None, level=None) -> None:
        for p in self.session.proxies:
            p.mode = "run"
            p.target = (p.fn if phase is None else
                        self.warm_target(p) if phase == "warmup" else self.step_target(p, level))


def _warm(run: _Run, session, settings_limit: int) -> None:
    """The commit's own warmup: first recorded only (what it compiles, per kernel), then with
    the variants that matter compiled (every one where some kernel's graphs reach the limit)."""
    record = getattr(session.impl, "record_graphs", None)
    if not callable(record):
        raise CapabilityMissing(f"{session.origin}: its impl has no record_graphs(), the "
                                "warmup its compile guard is armed after")
    cache = session.cache.get(None, 1)

    def warmup():
        try:
            record(session.layer, cache, session.builder)
        except (KernelRaised, CapabilityMissing):
            raise
        except Exception as exc:
            raise session.raised("SpyreAttentionImpl.record_graphs()", exc) from None

    run.targets("warmup")
    reached_only, run.compile_all = run.reached, False
    run.reached = set()
    warmup()   # nothing compiled: every variant's key, by kernel
    per_kernel: dict = {}
    for key, proxy in run.recorded.items():
        per_kernel.setdefault(proxy, set()).add(key)
    late = {k for k in reached_only if k not in run.recorded}
    run.compile_all = any(len(keys) + len(late) > settings_limit for keys in per_kernel.values())
    run.reached = reached_only
    warmup()


def guard_workload(session, subject, workload, costs, options) -> dict:
    """The workload under the commit's compile guard at its strictest level, beside spyre-bench's
    own late-compile figures of the same run (see the module docstring)."""
    guard = session.compile_guard
    if guard is None:
        raise CapabilityMissing(f"{session.origin} has no compile guard "
                                "(v1/worker/compile_guard.py)")
    level = strictest(guard)
    reached = {k for step in costs.steps for k in step.keys}
    model_late = sorted(str(k) for k in costs.late_compiles)
    device = options.device.torch_device
    c = session.config
    torch._dynamo.reset()
    run = _Run(session, guard, reached, options.backend)
    session.reserve(device, workload.steps)
    errors = []
    settings = subject.compile_settings()
    with torch._dynamo.config.patch(**settings):
        limit = (options.recompile_limit if options.recompile_limit is not None
                 else torch._dynamo.config.recompile_limit)
    try:
        with torch._dynamo.config.patch(**settings), \
                torch._dynamo.config.patch(recompile_limit=limit):
            _warm(run, session, limit)
            warm_graphs = sum(counter.frame_count for counter in run.counters.values())
            for i, step in enumerate(workload.steps):
                run.targets(None)   # the K/V fill is the harness's, not the engine's
                live = live_step(session, step, device, options.seed + i)
                run.step = i
                run.targets("workload", level)
                guard.arm(level)
                try:
                    out = run_forward(session, live)
                finally:
                    guard.disarm()
                errors.append(check_live(live, out, c.head_size ** -0.5,
                                           getattr(torch, c.dtype)))
    except KernelRaised as exc:
        raise SubjectRaised(f"{session.origin}: the kernel {exc}"[:500]) from None
    finally:
        with contextlib.suppress(Exception):
            guard.disarm()
        run.targets(None)
        torch._dynamo.reset()
    return _result(run, level, model_late, warm_graphs, len(errors), max(errors, default=0.0))


def _result(run: _Run, level, model_late: list, warm_graphs: int, checked: int,
            max_error: float) -> dict:
    violations = run.violations
    guard_keys = sorted({v["key"] for v in violations})
    late_keys = sorted(run.late)
    agree = guard_keys == late_keys == model_late
    finding = None
    if not agree:
        first = violations[0] if violations else None
        said = (f"the commit's guard would fail this workload at key {first['key']} (step "
                f"{first['step']}: {first['message']})" if first else
                "the commit's guard raises for no compile of this workload")
        finding = (f"{said}; spyre-bench counts {sum(run.late.values())} late compile(s)"
                   + (f" ({', '.join(late_keys)})" if late_keys else "")
                   + f" and the exact model {len(model_late)} late key(s)"
                   + (f" ({', '.join(model_late)})" if model_late else ""))
    return {
        "level": level.value, "violations": len(violations),
        "violation_keys": guard_keys, "first_violation": violations[0] if violations else None,
        "late_compiles": sum(run.late.values()), "late_compile_keys": late_keys,
        "model_late": len(model_late), "model_late_keys": model_late,
        "warmup_variants": len(run.recorded), "warmup_graphs": warm_graphs,
        "warmup_compiled": "every variant" if run.compile_all else
        "the variants this workload reaches (the rest cannot change a later compile below "
        "the recompile limit)",
        "agrees": agree, "finding": finding, "checked_calls": checked,
        "max_abs_error": max_error}
