"""Every subject x case x workload of a ``kernel`` run: graphs counted in parallel, then timed alone.

Counting compiled graphs is Dynamo tracing (single-threaded Python, seconds per config: a
config's warmup variants are traced once, its workloads share that session) and independent per
(subject, config). For the embedded reference (its code is the harness's, loaded in no time) it
spreads over the machine's cores (``SPYRE_BENCH_JOBS``, default: the cores this process may
use): spawned counting processes, started with the command so their start-up overlaps its own,
each counting one config's workloads in order as one process would. Timing then runs in this
process with those processes gone, so nothing of the run shares the cores with a timed sample.
Rows and their order are what one process gives; a counting process that dies is that config's
failure, said in its rows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context

from harness.lifeline import hold
from harness.matrix import Case
from harness.workloads import WorkloadSpec

#: A row's keys that end it before timing: nothing of it is timed (what a serial run does).
FINAL = ("skipped", "wrong", "failed")


@contextlib.contextmanager
def counting_pool(jobs: int) -> Iterator[ProcessPoolExecutor | None]:
    """``jobs`` counting processes (None for fewer than two), started now so that their
    start-up (torch, Dynamo) overlaps this process's own; all of them ended on exit."""
    if jobs < 2:
        yield None
        return
    pool = ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_start)
    try:
        for _ in range(jobs):
            pool.submit(_ready)
        yield pool
    finally:
        stop(pool)


def stop(pool: ProcessPoolExecutor) -> None:
    """End the counting processes at once (an interrupt, or their work is done)."""
    for process in list((pool._processes or {}).values()):
        if process.is_alive():
            process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def measure_all(subjects: list, cases: list[Case], specs: list[WorkloadSpec], options,
                advance: Callable[[str, str, int], None],
                pool: ProcessPoolExecutor | None = None) -> list[dict]:
    """Figures per (case, workload, subject), in that order (see the module docstring)."""
    from harness.measure.kernel_figures import measure_workload

    pairs = [(s, c) for c in range(len(cases)) for s in range(len(subjects))]
    graphs = None
    if pool is not None and options.graphs and len(pairs) > 1:
        graphs = _count_graphs(subjects, cases, pairs, specs, options, advance, pool)
    timing = dataclasses.replace(options, graphs=False) if graphs is not None else options
    rows = []
    for c, case in enumerate(cases):
        for w, spec in enumerate(specs):
            for s, subject in enumerate(subjects):
                label = f"{subject.spec} {case.label()} {spec.name}"
                counted = graphs[(s, c)][w] if graphs is not None else None
                if counted is not None and (any(k in counted for k in FINAL)
                                            or not options.time):
                    fig = counted
                else:
                    fig = measure_workload(subject, case, spec, timing,
                                           lambda what, label=label: advance(label, what, 0))
                    if counted is not None and not any(k in fig for k in FINAL):
                        fig = {**fig, "graphs": counted.get("graphs")}
                advance(label, "done", 1)
                rows.append(fig)
    return rows


def _count_graphs(subjects, cases, pairs, specs, options, advance, pool) -> dict:
    """{(subject index, case index): [measure_workload's figures without timing, per workload]},
    the pairs with the most blocks per sequence (the longest traces) first, so none is left
    running alone at the end; the pool is stopped before the timing starts."""
    only = dataclasses.replace(options, time=False)
    timeout = _subject_timeout()
    order = sorted(pairs, key=lambda p: -cases[p[1]].config.max_model_len
                   / cases[p[1]].config.block_size)
    out: dict = {}
    try:
        pending = {pool.submit(_graphs_of, subjects[s].spec, cases[c], specs, only, timeout):
                   (s, c) for s, c in order}
        while pending:
            for future in wait(pending, return_when=FIRST_COMPLETED)[0]:
                s, c = pending.pop(future)
                try:
                    out[(s, c)] = future.result()
                except Exception as exc:  # noqa: BLE001 - the process died: that config fails
                    out[(s, c)] = [{"subject": subjects[s].spec,
                                    "identity": subjects[s].identity,
                                    "skipped": f"counting graphs at {cases[c].label()} ended: "
                                               f"{type(exc).__name__}: {exc}".strip(),
                                    "failed": True}] * len(specs)
                advance(f"{subjects[s].spec} {cases[c].label()}", "graphs counted", 0)
    finally:
        stop(pool)   # done, or an interrupt: the timing has the cores to itself
    return out


def _subject_timeout() -> float:
    from harness.subjects import timeout
    return timeout.limit()


def _start() -> None:
    """A counting process dies of an interrupt quietly (its parent says what happened), ends
    with its parent (harness.lifeline), and has torch and Dynamo loaded and warm before its
    first config arrives."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    hold()
    import torch

    import harness.measure.kernel_figures  # noqa: F401 - imported once, before any work

    torch.compile(lambda x: x + 1, backend="eager", dynamic=False)(torch.zeros(2))
    torch._dynamo.reset()


def _ready() -> None:
    """A first task: makes the pool start its processes now."""


def _graphs_of(spec: str, case: Case, specs: list[WorkloadSpec], options,
               subject_timeout: float) -> list[dict]:
    """In a counting process: one subject's graphs for every workload of one config."""
    from harness.measure.kernel_figures import measure_workload
    from harness.subjects import timeout
    from harness.worker import open_subject

    timeout.set_limit(subject_timeout)
    subject = open_subject(spec)
    try:
        return [measure_workload(subject, case, w, options) for w in specs]
    finally:
        subject.close()
