"""Kernel checks and timings for a fresh comparison: base and head interleaved on this machine.

Run-to-run swings of 30-50% are normal here, so the two sides are never timed one after the
other: harness.measure.sampler takes rounds in ABBA order, as many as the sequential test needs
(bounded in rounds and seconds), and hands back the raw samples with its verdict.

Every probe's output is checked against the float64 oracle before and after timing. A mismatch is
a finding (the head, or base, computes the wrong thing), never a skip: it is what a reviewer most
needs to know, and a wrong kernel's timings mean nothing.

What is measured comes back as plain data (:class:`KernelRun`); harness.analyze.subjects_now adds
it to a Comparison and judges the timings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.errors import HarnessError
from harness.measure import placement, probes
from harness.measure.device import HostLoad, select
from harness.measure.oracle import KernelMismatch
from harness.measure.sampler import Plan, cache_flusher, sample_pair
from harness.subjects.base import Subject
from harness.suite import torch_threads

BENCHMARK = "kernel.Decode.time_layer"


@dataclass
class KernelRun:
    """What checking (and timing) base and head kernels found, before any judging."""

    device: str
    #: (probes whose output matched the oracle, probes checked).
    oracle: tuple[int, int] = (0, 0)
    #: (what, reason): an output the oracle rejected (the kernel is wrong).
    mismatches: list[tuple[str, str]] = field(default_factory=list)
    #: (what, reason): a probe the base ran and the head could not.
    lost: list[tuple[str, str]] = field(default_factory=list)
    #: (what, reason): a probe neither side could run, or the base could not.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: Whether timings were taken at all (False: the oracle check only).
    timed: bool = False
    #: (benchmark, params, unit, base samples, head samples, verdict): adaptive interleaved
    #: rounds in order, seconds a call, with the sampler's sequential verdict.
    timings: list[tuple] = field(default_factory=list)
    #: How the timings were taken (cache state), for the comparison's timing notes.
    notes: list[str] = field(default_factory=list)
    #: The factor the timing verdicts were decided for (the sampler's plan).
    factor: float | None = None
    #: The most cores other processes used while any probe was timed.
    busiest_cores: float = 0.0


def _prepare_sides(run: KernelRun, probe, base: Subject, head: Subject, dev):
    """Both sides of one probe, oracle-checked; None (recorded as mismatch/skip) when unusable."""
    sides = []
    for side, subject in (("base", base), ("head", head)):
        try:
            sides.append(probes.prepare(probe, subject, dev))
        except KernelMismatch as exc:
            run.mismatches.append((f"probe {probe.name} ({side})", str(exc)))
            return None
        except HarnessError as exc:
            what = f"{BENCHMARK} probe {probe.name}"
            if side == "head" and sides:
                run.lost.append((what, str(exc)))
            else:
                run.skipped.append((what, str(exc)))
            return None
    return sides


def check_kernels(base: Subject, head: Subject, tier: str = "quick",
                  device: str = "auto") -> KernelRun:
    """Run every probe of ``tier`` once per side against the oracle (no timing)."""
    dev = select(device)
    dev.prepare(torch_threads())
    run = KernelRun(dev.name)
    checked = matched = 0
    for probe in probes.TIERS[tier]:
        before = len(run.mismatches)
        sides = _prepare_sides(run, probe, base, head, dev)
        if sides is not None or len(run.mismatches) > before:
            checked += 1
            matched += sides is not None
    run.oracle = (matched, checked)
    return run


def time_subjects(base: Subject, head: Subject, tier: str = "quick", device: str = "auto",
                  plan: Plan | None = None) -> KernelRun:
    """The oracle check and adaptive interleaved timings (harness.measure.sampler) of every
    probe of ``tier``; each timing row carries the sampler's verdict."""
    plan = plan or Plan()
    dev = select(device)
    dev.prepare(torch_threads())
    run = KernelRun(dev.name, timed=True, factor=plan.factor)
    flush = None
    if plan.cold:
        flush, what = cache_flusher(dev)
        run.notes.append(f"cold cache: {what}")
    else:
        run.notes.append("warm cache: each timed call follows the previous one (--cold-cache "
                         "evicts the last-level cache before every call)")
    cpus = placement.timing_cpus(torch_threads())
    pinned = False
    checked = matched = 0
    for probe in probes.TIERS[tier]:
        before = len(run.mismatches)
        sides = _prepare_sides(run, probe, base, head, dev)
        if sides is None:
            checked += len(run.mismatches) > before
            continue
        checked += 1
        if cpus is not None and all(hasattr(p, "pin") for p in sides):
            pinned = all([p.pin(cpus) for p in sides]) or pinned
        with HostLoad(own_pids=[p.pid for p in sides if getattr(p, "pid", None)]) as load:
            sampled = sample_pair(sides[0], sides[1], plan, flush)
        run.busiest_cores = max(run.busiest_cores, load.others_cores or 0.0)
        try:
            for p in sides:
                p.check()  # the last timed state is still right
        except KernelMismatch as exc:
            run.mismatches.append((f"probe {probe.name} (after timing)", str(exc)))
            continue
        matched += 1
        run.timings.append((BENCHMARK, {"probe": probe.name}, "seconds", sampled.base,
                            sampled.head, sampled.verdict))
    if pinned:
        run.notes.append(f"both sides' workers pinned to CPU {placement.describe(cpus)} while "
                         "timed (a process's own core is otherwise a bias of its own)")
    run.oracle = (matched, checked)
    return run
