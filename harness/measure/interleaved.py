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
    #: Per side with a compile guard: its figures on harness.measure.guard's workload.
    guards: list[dict] = field(default_factory=list)


def _prepare_sides(run: KernelRun, probe, subjects: tuple, dev):
    """Each side of one probe (``subjects``: (side, subject) pairs), oracle-checked; None
    (recorded as mismatch/skip) when unusable."""
    sides = []
    for side, subject in subjects:
        try:
            sides.append(probes.prepare(probe, subject, dev))
        except KernelMismatch as exc:
            run.mismatches.append((f"probe {probe.name} ({side})", str(exc)))
            _close(sides)
            return None
        except HarnessError as exc:
            what = f"{BENCHMARK} probe {probe.name}"
            if side == "head" and sides:
                run.lost.append((what, str(exc)))
            else:
                run.skipped.append((what, str(exc)))
            _close(sides)
            return None
    return sides


class _Fresh:
    """Both sides of a probe prepared anew (oracle-checked, pinned), the last ones closed: the
    sampler's ``refresh``, so every ABBA quad runs on preparations of its own."""

    def __init__(self, probe, subjects, dev, cpus, sides):
        self.probe, self.subjects, self.dev, self.cpus = probe, subjects, dev, cpus
        self.sides = list(sides)

    def __call__(self):
        _close(self.sides)
        self.sides = []
        for subject in self.subjects:
            self.sides.append(probes.prepare(self.probe, subject, self.dev))
        self.pin()
        return tuple(self.sides)

    def pin(self) -> bool:
        """Both sides' workers on the same cores (harness.measure.placement); False when there
        is nothing to pin (sides in this process, or every core is timing's)."""
        if self.cpus is None or not all(hasattr(p, "pin") for p in self.sides):
            return False
        return all([p.pin(self.cpus) for p in self.sides])


def _close(sides) -> None:
    """End what a prepared probe holds open: a probe through a commit's forward keeps its load
    (and the custom ops it registered) open until closed, and the next probe loads it again."""
    for prepared in sides or ():
        close = getattr(prepared, "close", None)
        if close is not None:
            close()


def check_kernels(base: Subject, head: Subject, tier: str = "quick",
                  device: str = "auto", same_code: bool = False) -> KernelRun:
    """Run every probe of ``tier`` once per side against the oracle (no timing). With
    ``same_code`` (harness.worker.same_code: both sides run one code) only the head's run: the
    base's would compute the same outputs again."""
    dev = select(device)
    dev.prepare(torch_threads())
    run = KernelRun(dev.name)
    subjects = (("head", head),) if same_code else (("base", base), ("head", head))
    checked = matched = 0
    for probe in probes.for_subjects(tier, base, head):
        before = len(run.mismatches)
        sides = _prepare_sides(run, probe, subjects, dev)
        if sides is not None or len(run.mismatches) > before:
            checked += 1
            matched += sides is not None
        _close(sides)
    run.oracle = (matched, checked)
    _guards(run, subjects, dev)
    return run


def _guards(run: KernelRun, subjects: tuple, dev) -> None:
    """Each side's own compile guard beside spyre-bench's late compiles, on the guard's workload
    (harness.measure.guard); a side without a guard (or that cannot run it) has none."""
    from harness.config import EngineConfig
    from harness.matrix import Case, override_set
    from harness.measure.kernel_figures import measure_workload
    from harness.measure.settings import (
        GUARD_CONFIG,
        GUARD_OVERRIDES,
        GUARD_STEPS,
        GUARD_WORKLOAD,
        KernelOptions,
    )
    from harness.workloads import WorkloadSpec

    config = EngineConfig(**GUARD_CONFIG)
    case = Case(config, override_set(GUARD_OVERRIDES), GUARD_OVERRIDES)
    spec = WorkloadSpec(GUARD_WORKLOAD, mix=GUARD_WORKLOAD, steps=GUARD_STEPS)
    options = KernelOptions(device=dev, time=False)
    for side, subject in subjects:
        if not {"forward", "compile_guard"} <= subject.capabilities:
            continue
        row = measure_workload(subject, case, spec, options)
        found = (row.get("graphs") or {}).get("compile_guard")
        if found is not None:
            run.guards.append({"side": side, "workload": GUARD_WORKLOAD,
                               **{k: found[k] for k in GUARD_FIELDS}})


#: What a comparison keeps of each side's guard figures.
GUARD_FIELDS = ("level", "violations", "late_compiles", "model_late", "agrees", "finding")


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
    run.notes.append("each ABBA quad on both sides' probes prepared anew and checked against "
                     "the oracle (one preparation's own speed is no side's)")
    cpus = placement.timing_cpus(torch_threads())
    pinned = False
    checked = matched = 0
    for probe in probes.for_subjects(tier, base, head):
        before = len(run.mismatches)
        sides = _prepare_sides(run, probe, (("base", base), ("head", head)), dev)
        if sides is None:
            checked += len(run.mismatches) > before
            continue
        checked += 1
        fresh = _Fresh(probe, (base, head), dev, cpus, sides)
        pinned = fresh.pin() or pinned
        try:
            with HostLoad(own_pids=[p.pid for p in sides if getattr(p, "pid", None)]) as load:
                sampled = sample_pair(sides[0], sides[1], plan, flush, refresh=fresh)
            run.busiest_cores = max(run.busiest_cores, load.others_cores or 0.0)
            for p in fresh.sides:
                p.check()  # the last timed state is still right
        except KernelMismatch as exc:
            run.mismatches.append((f"probe {probe.name} (while timing)", str(exc)))
            continue
        except HarnessError as exc:
            run.skipped.append((f"{BENCHMARK} probe {probe.name}", f"while timing: {exc}"))
            continue
        finally:
            _close(fresh.sides)
        matched += 1
        run.timings.append((BENCHMARK, {"probe": probe.name}, "seconds", sampled.base,
                            sampled.head, sampled.verdict))
    if pinned:
        run.notes.append(f"both sides' workers pinned to CPU {placement.describe(cpus)} while "
                         "timed (a process's own core is otherwise a bias of its own)")
    run.oracle = (matched, checked)
    _guards(run, (("base", base), ("head", head)), dev)
    return run
