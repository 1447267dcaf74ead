"""A subject's own forward, timed on its own builder's metadata, every output checked.

For a commit whose kernels follow a convention the harness builds no inputs for (generation B
and C, head-major and jagged kernels, whatever comes next), the kernels run exactly as the
engine runs them: the commit's ``SpyreAttentionMetadataBuilder.build()`` makes the step's
metadata, its ``do_kv_cache_update()`` fills the K/V cache in its own layout, and its
``SpyreAttentionImpl.forward()`` calls its kernels with its own arguments. The oracle (float64
softmax over each sequence's dense K/V, kept by the harness) checks every output row; the time
is one layer's after the first (the first layer of a step pays for the device mirror).
Compiled graphs are counted per kernel, each compiled by the harness as the subject compiles
it (``dynamic=False``), under the subject's own Dynamo settings, over every step of the
workload, next to the distinct compile keys its builder produced. ``dynamic=False`` guards on
every tensor shape, the query's too: the harness hands forward exactly the step's tokens
(unpadded), so more graphs than keys means the kernel also specialises on the token count.
"""

from __future__ import annotations

import contextlib

import torch
import torch._dynamo

from harness.errors import HarnessError, SubjectRaised
from harness.matrix import Case
from harness.measure.guard import guard_workload
from harness.measure.oracle import TOLERANCES, KernelMismatch, check_live
from harness.measure.shape_timing import (
    budget_record,
    sampling,
    shape_label,
    shape_of,
    workload_timing,
)
from harness.measure.timing import Budget, TimedLayer, measure
from harness.subjects.spyre.drive.errors import KernelRaised
from harness.subjects.spyre.drive.live import kv_grid, live_step, reached_keys, run_forward
from harness.workloads import Workload


def oracle_basis(session) -> str:
    """What every output row is held to, in words (the row states it): the model dtype's
    tolerance, and for a K/V cache coarser than the model (FP8) the grid K/V are drawn on."""
    dtype = getattr(torch, session.config.dtype)
    atol, rtol = TOLERANCES[dtype]
    said = f"{session.config.dtype}: |out - ref| <= {atol:g} + {rtol:g}*|ref|"
    grid = kv_grid(session)
    if grid is not None:
        said += (f"; K/V drawn on the {str(grid).removeprefix('torch.')} grid of the "
                 f"{session.config.kv_cache_dtype} cache, which stores them exactly at scale 1")
    return said


def check_path(session, live, cost, where: str) -> None:
    """The live forward takes the path the step's exact figures say (its keys), or a
    HarnessError: a timing of another path must not stand under this one's label."""
    run_forward(session, live)
    reached = reached_keys(session, live)
    if sorted(reached) != sorted(cost.keys):
        raise HarnessError(
            f"{where}: the live forward reached {' '.join(map(str, reached))}, its exact figures "
            f"say {' '.join(map(str, cost.keys))} (the live K/V cache has "
            f"{int(live.kv_cache[0].shape[0])} pages)")


def _shapes(costs) -> dict[tuple, list[int]]:
    shapes: dict[tuple, list[int]] = {}
    for i, step in enumerate(costs.steps):
        shapes.setdefault(shape_of(step.keys), []).append(i)
    return dict(sorted(shapes.items(), key=lambda kv: (-len(kv[1]), kv[1][0])))


@contextlib.contextmanager
def _settings(settings: dict, recompile_limit: int | None):
    """The subject's Dynamo settings, then ``--recompile-limit`` over them; yields the limit."""
    with torch._dynamo.config.patch(**settings):
        limit = (recompile_limit if recompile_limit is not None
                 else torch._dynamo.config.recompile_limit)
        with torch._dynamo.config.patch(recompile_limit=limit):
            yield limit


def count_forward_graphs(session, subject, workload: Workload, costs, options) -> dict:
    """Graphs per kernel over every step's forward, compiled as the subject compiles them."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counters = {}
    for proxy in session.proxies:
        counters[proxy.fn.__name__] = counter = CompileCounterWithBackend(options.backend)
        proxy.target = torch.compile(proxy.fn, backend=counter, dynamic=False)
        proxy.widen_indices()
    keys = {k for step in costs.steps for k in step.keys}
    c = session.config
    errors = []
    session.reserve(options.device.torch_device, workload.steps)
    try:
        with _settings(subject.compile_settings(), options.recompile_limit) as limit:
            for i, step in enumerate(workload.steps):
                live = live_step(session, step, options.device.torch_device,
                                 options.seed + i)
                errors.append(check_live(live, run_forward(session, live),
                                           c.head_size ** -0.5, getattr(torch, c.dtype)))
    finally:
        for proxy in session.proxies:
            proxy.target = proxy.fn
        torch._dynamo.reset()
    by_kernel = {name: c.frame_count for name, c in counters.items() if c.frame_count}
    graphs = sum(by_kernel.values())
    at_limit = [name for name, n in by_kernel.items() if n >= limit]
    missing = max(0, len(keys) - graphs)
    fallbacks = missing if at_limit else 0
    verdict = []
    if fallbacks:
        verdict.append(f"{fallbacks} fall-backs")
    if graphs != len(keys):
        verdict.append(f"{graphs} graphs for {len(keys)} keys")
    return {
        "backend": options.backend, "recompile_limit": limit, "through": "forward",
        "compile_settings": {k: repr(v) for k, v in subject.compile_settings().items()},
        "recorded_warmup": False, "steps": len(workload.steps), "graphs": graphs,
        "graphs_warmup": 0, "graphs_workload": graphs, "graphs_by_kernel": by_kernel,
        "unique_graphs": graphs, "expected_graphs": len(keys), "model_keys": len(keys),
        "model_late": len(keys), "warmup_variants": 0, "late_compiles": graphs,
        "expected_late": len(keys), "late_compile_keys": [], "fallbacks": fallbacks,
        "fallback_keys": [], "uncompiled_keys": [], "recompile_limit_hit": bool(at_limit),
        "matches_model": graphs == len(keys) and not fallbacks,
        "verdict": "NO: " + ", ".join(verdict) if verdict else "yes",
        # compile seconds are not split per variant through forward()
        "compile_seconds": {}, "compile_seconds_total": 0.0, "compile_seconds_mean": None,
        "compile_seconds_max": None, "checked_calls": len(errors),
        "max_abs_error": max(errors, default=0.0), "inductor_cache": None,
    }


def time_forward(session, workload: Workload, costs, options, progress) -> dict:
    """Each step shape (most frequent first, up to ``max_shapes``): one representative step
    checked, then timed."""
    c = session.config
    dtype = getattr(torch, c.dtype)
    scale = c.head_size ** -0.5
    shapes = _shapes(costs)
    timed = list(shapes)[:options.max_shapes]
    session.reserve(options.device.torch_device, workload.steps)
    options.device.prepare(options.threads)
    rows, times = [], {}
    budget, left_out = Budget(options.time_budget_s), 0
    for n, shape in enumerate(timed):
        if rows and budget.spent():
            left_out = len(timed) - n
            break
        first = shapes[shape][0]
        step, cost = workload.steps[first], costs.steps[first]
        progress(f"{workload.name}: {shape_label(shape)} (forward)")
        live = live_step(session, step, options.device.torch_device, options.seed + first)
        check_path(session, live, cost, workload.origin(first))
        errors = []
        samples = measure(options.device, lambda: run_forward(session, live),
                          repeat=options.repeat, warmup=options.warmup, number=options.number,
                          min_sample_s=options.min_sample_s,
                          check=lambda out: errors.append(check_live(live, out, scale,
                                                                       dtype)),
                          budget_s=budget.left())
        s = samples.summary(options.unstable_threshold)
        tokens = cost.decode_tokens
        per_step = s.median * c.num_layers
        kv = 2 * cost.padded_kv_slots * c.num_kv_heads * c.head_size * c.dtype_bytes
        rows.append({
            "shape": shape_label(shape), "path": cost.dispatch.path, "through": "forward",
            "keys": [str(k) for k in cost.keys], "steps": len(shapes[shape]),
            "step_index": first, "launches": cost.launches_per_layer,
            "iterations_per_layer": cost.iterations_per_layer, "decode_tokens": tokens,
            "seq_lens": [q.seq_len for q in step], "h2d_bytes": cost.h2d_bytes, "kv_bytes": kv,
            "samples_us": list(samples.us_per_call), "number": samples.number,
            **sampling(samples), "first_call_s": samples.first_call_s, "stats": s.as_dict(),
            "host_others_cores": samples.others_cores, "us_per_layer": s.median,
            "us_per_call": s.median / max(1, cost.launches_per_layer),
            "us_per_token": s.median / tokens if tokens else None, "us_per_step": per_step,
            "tokens_per_s": tokens / (per_step * 1e-6) if tokens else None,
            "kv_gb_per_s": kv / (s.median * 1e-6) / 1e9, "max_abs_error": max(errors),
            "warnings": list(s.warnings)})
        times[shape] = s.median
    return {**workload_timing(rows, workload, shapes, timed, times, c.num_layers),
            **budget_record(options, left_out)}


def measure_forward(subject, case: Case, workload: Workload, options, progress) -> dict:
    """Graphs and timings of ``subject``'s own forward for one case and workload; a wrong
    output is ``wrong`` (nothing of it timed), what cannot be driven ``skipped``."""
    out: dict = {"generation": "forward"}
    try:
        (costs,) = subject.workload_costs(case.config, case.overrides, [workload])
        if isinstance(costs, HarnessError):
            raise costs
        with subject.builder_session(case.config, case.overrides) as session:
            out["oracle"] = oracle_basis(session)
            if options.graphs:
                progress(f"{workload.name}: compiled graphs (forward)")
                out["graphs"] = count_forward_graphs(session, subject, workload, costs,
                                                     options)
                if session.compile_guard is not None:
                    progress(f"{workload.name}: under the commit's compile guard")
                    out["graphs"]["compile_guard"] = guard_workload(session, subject, workload,
                                                                    costs, options)
            if options.time:
                out["timing"] = time_forward(session, workload, costs, options, progress)
    except KernelMismatch as exc:
        return {"generation": "forward", "wrong": str(exc)}
    except KernelRaised as exc:
        return {"generation": "forward", "wrong": f"the kernel {exc}"[:500]}
    except SubjectRaised as exc:
        return {"generation": "forward", "skipped": str(exc), "failed": True}
    except HarnessError as exc:
        return {"generation": "forward", "skipped": str(exc)}
    return out


class PreparedForward(TimedLayer):
    """A probe's step through the subject's forward (the ASV kernel benchmarks' input), its
    output checked once; ``close()`` ends the subject's load."""

    def __init__(self, subject, config, overrides, step, device, seed: int = 0):
        self.device = device
        # Dynamo's caches from an earlier load (an earlier probe's) are dropped: its compiled
        # frames name globals of module objects that load's close removed, and reusing them
        # raised NameError ('__compiled_fn_…' is not defined) in the next probe's forward.
        torch._dynamo.reset()
        self._open = subject.builder_session(config, overrides)
        self.session = self._open.__enter__()
        try:
            self.live = live_step(self.session, step, device.torch_device, seed)
            self.scale, self.dtype = config.head_size ** -0.5, getattr(torch, config.dtype)
            self.check()
        except BaseException:
            self.close()
            raise

    def run_layer(self):
        out = run_forward(self.session, self.live)
        self.device.synchronize()
        return out

    def check(self, outputs=None) -> None:
        try:
            check_live(self.live, outputs if outputs is not None else self.run_layer(),
                         self.scale, self.dtype)
        except KernelRaised as exc:
            raise KernelMismatch(f"the kernel {exc}") from None

    def close(self) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None


def graph_counts(subject, case: Case, workload: Workload, device,
                 recompile_limit: int | None) -> dict:
    """count_forward_graphs for one case, opening and closing the subject's load."""
    from types import SimpleNamespace

    (costs,) = subject.workload_costs(case.config, case.overrides, [workload])
    if isinstance(costs, HarnessError):
        raise costs
    options = SimpleNamespace(backend="eager", recompile_limit=recompile_limit, device=device,
                              seed=0)
    with subject.builder_session(case.config, case.overrides) as session:
        return count_forward_graphs(session, subject, workload, costs, options)


def guard_counts(subject, case: Case, workload: Workload, device,
                 recompile_limit: int | None = None) -> dict:
    """guard_workload for one case, opening and closing the subject's load; CapabilityMissing
    where the commit has no compile guard."""
    from types import SimpleNamespace

    from harness.errors import CapabilityMissing

    (costs,) = subject.workload_costs(case.config, case.overrides, [workload])
    if isinstance(costs, HarnessError):
        raise costs
    options = SimpleNamespace(backend="eager", recompile_limit=recompile_limit, device=device,
                              seed=0)
    with subject.builder_session(case.config, case.overrides) as session:
        if session.compile_guard is None:
            raise CapabilityMissing(f"{subject.origin} has no compile guard "
                                    "(v1/worker/compile_guard.py loaded by its backend)")
        return guard_workload(session, subject, workload, costs, options)
