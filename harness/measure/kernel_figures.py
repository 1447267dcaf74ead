"""Subject × case × workload → kernel figures: compiled graphs, then timed step shapes.

One place that turns a subject's decode kernel (``Subject.decode_kernel()``, whichever subject it
is) into JSON-ready figures, shared by the CLI and the benchmarks. Timing is per *step shape*: the
workload's steps grouped by the compile keys they call (batched key plus per-sequence keys), the
most frequent shapes first; one representative batch per shape is built, checked against the
oracle and timed. Workload throughput follows from the shapes' times weighted by how many steps
land on each.

Failures are figures, not crashes: a subject with no kernel, or a batch too large for the cache
limit, is ``skipped`` with the reason; a wrong kernel is ``wrong`` with the oracle's message and
no timing at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import traceback
from collections.abc import Callable

import torch
import torch._dynamo

from harness.config import EngineConfig, check_step_bytes
from harness.errors import HarnessError, SubjectCrashed
from harness.matrix import Case
from harness.measure.compiles import case_graphs, end_sessions
from harness.measure.efficiency import row_efficiency
from harness.measure.inputs import StepCalls, Workspace, check_generation
from harness.measure.oracle import KernelMismatch, check_step
from harness.measure.settings import KernelOptions
from harness.measure.shape_timing import (
    budget_record,
    sampling,
    shape_label,
    shape_of,
    workload_timing,
)
from harness.measure.timing import Budget, measure
from harness.model.cost import step_cost
from harness.subjects.base import Bucketing, Subject
from harness.subjects.reference.kernels import attend_sequence
from harness.worker import is_worker
from harness.workloads import Workload, WorkloadSpec

Progress = Callable[[str], None]
#: A kernel measurement may run this many pieces of subject work, each under the subject time
#: limit, before its worker counts as hung (timing a big workload legitimately takes minutes).
WORKER_PIECES = 20


def _no_progress(_: str) -> None:
    pass


def workload_shapes(bucketing: Bucketing, config: EngineConfig,
                    workload: Workload) -> dict[tuple, list[int]]:
    """Step indices per shape (the model's keys), most frequent shape first."""
    shapes: dict[tuple, list[int]] = {}
    for i, step in enumerate(workload.steps):
        shapes.setdefault(shape_of(step_cost(bucketing, config, step).keys), []).append(i)
    return dict(sorted(shapes.items(), key=lambda kv: (-len(kv[1]), kv[1][0])))


def _path(calls: StepCalls, forced: bool = False) -> str:
    if forced:
        return "per-sequence (forced)"
    return calls.dispatch.path


def _kernels(kernel, options: KernelOptions):
    """The callables to time: the kernels themselves, or compiled with the chosen backend."""
    if options.timing == "eager":
        return kernel, attend_sequence
    compile_ = lambda fn: torch.compile(fn, backend=options.backend, dynamic=False)  # noqa: E731
    return compile_(kernel), compile_(attend_sequence)


def _time_shape(calls: StepCalls, batched_fn, sequence_fn, config: EngineConfig,
                options: KernelOptions, budget: Budget) -> dict:
    errors = []

    def check(outputs):
        errors.extend(c.max_abs_error for c in check_step(calls, outputs))

    samples = measure(options.device, lambda: calls.run(batched_fn, sequence_fn),
                      repeat=options.repeat, warmup=options.warmup, number=options.number,
                      min_sample_s=options.min_sample_s, check=check,
                      budget_s=budget.left())
    s = samples.summary(options.unstable_threshold)
    tokens = calls.decode_tokens
    per_step_us = s.median * config.num_layers
    validity = row_validity(samples, options)
    if validity["invalid"]:   # never a timing: the raw samples stay, the figures do not
        return {"launches": calls.launches, "iterations_per_layer": calls.iterations,
                "decode_tokens": tokens, "seq_lens": [q.seq_len for q in calls.step],
                "samples_us": list(samples.us_per_call), "number": samples.number,
                **sampling(samples), "validity": validity, "us_per_layer": None, "warnings": [
                    f"INVALID: {why}" for why in validity["invalid"]]}
    return {"validity": validity,
            "efficiency": row_efficiency(config, [q.seq_len for q in calls.step],
                                         [q.query_len for q in calls.step], calls.kv_bytes(),
                                         s.median * 1e-6, options.bandwidth_gbps),
        "launches": calls.launches, "iterations_per_layer": calls.iterations,
        "decode_tokens": tokens, "seq_lens": [q.seq_len for q in calls.step],
        "h2d_bytes": sum(calls.h2d().values()), "kv_bytes": calls.kv_bytes(),
        "samples_us": list(samples.us_per_call), "number": samples.number, **sampling(samples),
        "first_call_s": samples.first_call_s, "stats": s.as_dict(),
        "host_others_cores": samples.others_cores,
        "us_per_layer": s.median, "us_per_call": s.median / calls.launches,
        "us_per_token": s.median / tokens if tokens else None,
        "us_per_step": per_step_us,
        "tokens_per_s": tokens / (per_step_us * 1e-6) if tokens else None,
        "kv_gb_per_s": calls.kv_bytes() / (s.median * 1e-6) / 1e9,
        "max_abs_error": max(errors), "warnings": list(s.warnings),
    }


def row_validity(samples, options: KernelOptions) -> dict:
    """What a timing row must say for a reader to trust it, and the rules it broke (if any)."""
    invalid = []
    if samples.new_graphs:
        invalid.append(f"{samples.new_graphs} graph(s) compiled during the timed samples "
                       "(compile time inside the timing)")
    return {"new_graphs": samples.new_graphs, "oracle": "match", "torch": torch.__version__,
            "threads": torch.get_num_threads(), "device": options.device.description,
            "invalid": invalid}


def _time_workload(subject_kernel, bucketing: Bucketing, config: EngineConfig,
                   workload: Workload, ws: Workspace, options: KernelOptions,
                   progress: Progress) -> dict:
    shapes = workload_shapes(bucketing, config, workload)
    timed_shapes = list(shapes)[:options.max_shapes]
    compiled = options.timing != "eager"
    if compiled:   # eager timing leaves Dynamo alone: the case's graph session lives on
        end_sessions()
    batched_fn, sequence_fn = _kernels(subject_kernel, options)
    limit = torch._dynamo.config.patch(recompile_limit=1 << 16) if compiled else \
        contextlib.nullcontext()
    options.device.prepare(options.threads)
    rows, times = [], {}
    unbatched = dataclasses.replace(bucketing, batched_enabled=False)
    budget, left_out = Budget(options.time_budget_s), 0
    with limit:
        for n, shape in enumerate(timed_shapes):
            if rows and budget.spent():
                left_out = len(timed_shapes) - n
                break
            first = shapes[shape][0]
            calls = ws.step(bucketing, workload.steps[first], seed=options.seed + first)
            progress(f"{workload.name}: {shape_label(shape)}")
            row = {"shape": shape_label(shape), "path": _path(calls),
                   "keys": [str(k) for k in calls.keys], "steps": len(shapes[shape]),
                   "step_index": first, **_time_shape(calls, batched_fn, sequence_fn, config,
                                                      options, budget)}
            rows.append(row)
            if row["us_per_layer"] is not None:   # an invalid row is no timing
                times[shape] = row["us_per_layer"]
            if options.per_sequence and calls.batched:
                alone = ws.step(unbatched, workload.steps[first], seed=options.seed + first)
                label = shape_label(shape_of(alone.keys))
                progress(f"{workload.name}: per-sequence {label}")
                rows.append({"shape": label, "path": _path(alone, True),
                             "keys": [str(k) for k in alone.keys], "steps": len(shapes[shape]),
                             "step_index": first, "compared_to": shape_label(shape),
                             **_time_shape(alone, batched_fn, sequence_fn, config, options,
                                           budget)})
    if compiled:
        torch._dynamo.reset()
    return {**workload_timing(rows, workload, shapes, timed_shapes, times, config.num_layers),
            **budget_record(options, left_out)}


#: The last timing workspace: (its key, the workspace).
_TIMING_WS: list = []


def timing_workspace(config: EngineConfig, pages: int, options: KernelOptions) -> Workspace:
    """The case's timing inputs (K/V cache, queries: about a second to fill at 1,000 pages),
    made once per case and grown only when a workload needs more pages than it has."""
    key = (config, str(options.device.torch_device), options.seed, options.soft_cap,
           options.max_cache_bytes)
    if _TIMING_WS and _TIMING_WS[0][0] == key and _TIMING_WS[0][1].num_pages >= pages:
        return _TIMING_WS[0][1]
    _TIMING_WS.clear()   # the old one goes before the new one is filled
    ws = Workspace(config, pages, options.device.torch_device, options.seed, options.soft_cap,
                   options.max_cache_bytes)
    _TIMING_WS.append((key, ws))
    return ws


def measure_workload(subject: Subject, case: Case, spec: WorkloadSpec, options: KernelOptions,
                     progress: Progress = _no_progress) -> dict:
    """Figures of one subject's kernel on one case and workload (see module docstring)."""
    out: dict = {"subject": subject.spec, "identity": subject.identity}
    if is_worker(subject):
        try:   # measured in the subject's worker, by this same function
            return subject.call("measure_workload", pieces=WORKER_PIECES, progress=progress,
                                what=f"measuring its kernel at {case.label()} {spec.name}",
                                case=case, spec=spec, options=options)
        except SubjectCrashed as exc:
            return {**out, "skipped": str(exc), "failed": True}
    try:
        found = subject.decode_kernel()
    except HarnessError as exc:
        return {**out, "skipped": f"{subject.spec}: decode kernel not loadable: {exc}"}
    if "forward" in subject.capabilities:
        # A commit's kernels run as the engine runs them, whatever their convention: its own
        # builder's metadata, its own forward, its own kernels (per-sequence ones included),
        # never inputs or kernels of the harness's.
        from harness.measure.forward import measure_forward

        try:
            workload = spec.build(case.config)
            workload.check_fits(case.config)
        except HarnessError as exc:
            return {**out, "skipped": str(exc)}
        return {**out, **measure_forward(subject, case, workload, options, progress)}
    if found is None:
        return {**out, "skipped": subject.lacks("decode_kernel_a")
                or f"{subject.spec} has no batched decode kernel"}
    kernel, generation = found
    out["generation"] = generation
    try:
        bucketing = subject.bucketing(case.config, case.overrides)
        check_generation(generation, bucketing)
        workload = spec.build(case.config)
        workload.check_fits(case.config)
        for i, step in enumerate(workload.steps):  # inputs past the limit: a skip, not WRONG
            check_step_bytes(step_cost(bucketing, case.config, step).h2d_bytes,
                             workload.origin(i), options.max_cache_bytes)
        pages = Workspace.pages_for(case.config, workload.steps)
        Workspace.check_fits(case.config, pages, options.max_cache_bytes)
        ws = timing_workspace(case.config, pages, options) if options.time else None
    except HarnessError as exc:
        return {**out, "skipped": str(exc)}
    try:
        if options.graphs:
            progress(f"{workload.name}: compiled graphs")
            out["graphs"] = case_graphs(
                kernel, generation, bucketing, case.config, workload, device=options.device,
                backend=options.backend, recompile_limit=options.recompile_limit,
                record_warmup=options.record_warmup, seed=options.seed,
                soft_cap=options.soft_cap, max_cache_bytes=options.max_cache_bytes,
                settings=subject.compile_settings(),
                shape_only=options.shape_only).as_dict()
        if options.time:
            out["timing"] = _time_workload(kernel, bucketing, case.config, workload, ws,
                                           options, progress)
    except KernelMismatch as exc:
        # A wrong kernel has no figures worth keeping: nothing of it is reported as fast.
        out.pop("graphs", None)
        return {**out, "wrong": str(exc)}
    except HarnessError as exc:
        return {**out, "skipped": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the subject's kernel is foreign code
        out.pop("graphs", None)
        out.pop("timing", None)
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return {**out, "wrong": f"the kernel raised {type(exc).__name__}: {exc}".strip()[:500],
                "raised_at": f"{where.filename}:{where.lineno}"}
    return out

