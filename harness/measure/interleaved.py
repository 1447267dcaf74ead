"""Kernel checks and timings for a fresh comparison: base and head interleaved on this machine.

Run-to-run swings of 30-50% are normal here, so the two sides are never timed one after the
other: each round takes one sample of base, then one of head (alternating which goes first), so
drift and neighbours' load hit both alike. The raw samples go to harness.analyze.stats.

Every probe's output is checked against the float64 oracle before and after timing. A mismatch is
a finding (the head, or base, computes the wrong thing), never a skip: it is what a reviewer most
needs to know, and a wrong kernel's timings mean nothing.

What is measured comes back as plain data (:class:`KernelRun`); harness.analyze.subjects_now adds
it to a Comparison and judges the timings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.errors import HarnessError
from harness.measure import probes
from harness.measure.device import HostLoad, select
from harness.measure.oracle import KernelMismatch
from harness.subjects.base import Subject

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
    #: (benchmark, params, unit, base samples, head samples), interleaved, seconds a call.
    timings: list[tuple] = field(default_factory=list)
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
    dev.prepare()
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


def time_subjects(base: Subject, head: Subject, tier: str = "quick", rounds: int = 15,
                  device: str = "auto", min_sample_s: float = 5e-3) -> KernelRun:
    """The oracle check and interleaved timings of every probe of ``tier``."""
    dev = select(device)
    dev.prepare()
    run = KernelRun(dev.name, timed=True)
    checked = matched = 0
    for probe in probes.TIERS[tier]:
        before = len(run.mismatches)
        sides = _prepare_sides(run, probe, base, head, dev)
        if sides is None:
            checked += len(run.mismatches) > before
            continue
        checked += 1
        number = max(p.calls_per_sample(min_sample_s) for p in sides)
        samples: tuple[list[float], list[float]] = ([], [])
        with HostLoad() as load:
            for r in range(rounds):
                order = (0, 1) if r % 2 == 0 else (1, 0)
                for i in order:
                    samples[i].append(sides[i].sample(number))
        run.busiest_cores = max(run.busiest_cores, load.others_cores or 0.0)
        try:
            for p in sides:
                p.check()  # the last timed state is still right
        except KernelMismatch as exc:
            run.mismatches.append((f"probe {probe.name} (after timing)", str(exc)))
            continue
        matched += 1
        run.timings.append((BENCHMARK, {"probe": probe.name}, "seconds", *samples))
    run.oracle = (matched, checked)
    return run
