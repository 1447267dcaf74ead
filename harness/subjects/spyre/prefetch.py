"""Drive a commit's builder over many configs at once, in worker processes, into the memo.

A commit's exact tier is one builder session per (config, env), each driving the same few dozen
steps: independent work, nearly all of it the subject's own torch code, so it spreads over the
machine's cores (``SPYRE_BENCH_JOBS``, default: the cores this process may use). Workers put
nothing anywhere: each returns the step figures it drove (with the builder's ladders and the
config's bucketing, which the config benchmarks read), the parent adds them to
:data:`harness.subjects.memo.figures.FIGURES` (which writes them to its store) and the subject, and the
ordinary serial pass then reads them from there. Configs whose steps the memo already holds (from
this process or the store) go to no worker. So the figures, their order and every skip are
exactly what one process gives (a worker's failure is dropped and met again, with its one
message, by the serial pass); only a subject past its time limit stops the command at once, as
it would in one process. A worker keeps the memory it frees (nothing is timed in it).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import active_children, get_all_start_methods, get_context

from harness.errors import ConfigError, HarnessError
from harness.subjects import timeout
from harness.subjects.memo.figures import FIGURES, ladders_key, setup_key, step_key

JOBS_ENV = "SPYRE_BENCH_JOBS"


def jobs() -> int:
    """Worker processes to use: ``SPYRE_BENCH_JOBS`` (1 = none), else the usable cores."""
    raw = os.environ.get(JOBS_ENV)
    if raw:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise ConfigError(f"{JOBS_ENV}={raw!r}: expected a whole number of processes >= 1")
        return value
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def prefetch(subject, source: str, requests: list) -> int:
    """Fill the memo for ``requests`` ([(config, overrides, workloads)]) in parallel; returns
    how many step figures came back. Nothing happens with one job, fewer than two requests that
    miss the memo, no ``fork`` (the workers are forks of this process: the subject already
    loaded, nothing imported twice, no main module run again), or another thread in this
    process (``run`` drives the tier in a process of its own for this)."""
    missing = [r for r in requests if any(FIGURES.get(source, step_key(r[0], r[1], s)) is None
                                          for w in r[2] for s in w.steps)]
    workers = min(jobs(), len(missing))
    if workers < 2 or "fork" not in get_all_start_methods() or threading.active_count() > 1:
        return 0   # a fork beside another thread can inherit a lock it holds, and hang for good
    filled = 0
    _worker.update(subject=subject, source=source)
    # the longest configs first, so no worker is left with one long config at the end
    missing.sort(key=lambda r: -r[0].max_model_len)
    before = set(active_children())
    # every worker is forked here, before the executor's own thread starts
    pool = ProcessPoolExecutor(workers, mp_context=get_context("fork"), initializer=_start)
    try:
        for request, done in zip(missing, pool.map(_drive, missing)):
            if isinstance(done, str):
                raise timeout.SubjectTimeout(done)
            steps, ladders, bucketing = done
            for key, value in steps + ladders:
                FIGURES.put(source, key, value)
            if bucketing is not None:
                subject.keep_bucketing(request[0], request[1], bucketing)
            FIGURES.flush()
            filled += len(steps)
    except BrokenProcessPool:
        pass   # the subject's code ended a worker (os._exit): the serial pass meets it and says so
    finally:
        _worker.clear()
        _stop(pool, [p for p in active_children() if p not in before])
    return filled


def _stop(pool: ProcessPoolExecutor, workers: list) -> None:
    """The workers end now: an interrupt or a time-out never waits for the queued configs."""
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        process.terminate()
    for process in workers:
        process.join()


# -- in the worker ------------------------------------------------------------------------------

_worker: dict = {}


def _keep_freed_memory() -> None:
    """Let freed memory be reused instead of handed back to the kernel (:mod:`harness.allocator`).

    The subject's builder allocates a fresh mask of up to hundreds of MiB per step; served by mmap
    (every allocation above 32 MiB is, whatever the threshold) and unmapped on free, it faulted
    in anew every step: about a third of a generation commit's exact tier on a 2-core box (5.5 M
    minor faults, 24 s of system time, against 0.9 M with this). A worker only computes exact
    figures, nothing is timed in it, and it exits with the pool, so its heap goes with it."""
    from harness.allocator import M_MMAP_MAX, M_TOP_PAD, M_TRIM_THRESHOLD, NO_TRIM, mallopt
    mallopt({M_MMAP_MAX: 0, M_TRIM_THRESHOLD: NO_TRIM, M_TOP_PAD: 256 << 20})


def _start() -> None:
    import torch

    torch.set_num_threads(1)   # one core per worker: the pool is the parallelism
    _keep_freed_memory()
    FIGURES.persist = False    # the parent writes what a worker hands back


def _drive(request):
    config, overrides, workloads = request
    subject, source = _worker["subject"], _worker["source"]
    try:
        subject.workload_costs(config, overrides, workloads)
    except timeout.SubjectTimeout as exc:
        return str(exc)
    except HarnessError:
        pass   # the serial pass meets it again and reports it

    def known(keys):
        return [(k, v) for k in keys if (v := FIGURES.get(source, k)) is not None]

    # what the parent reads next: the steps, and (for the config benchmarks) the builder's
    # ladders and the bucketing this worker computed on the way
    return (known(step_key(config, overrides, s) for w in workloads for s in w.steps),
            known([ladders_key(config, overrides), setup_key(config, overrides)]),
            subject.known_bucketing(config, overrides))
