"""Kernel checks and timings for a fresh comparison: base and head interleaved on this machine.

Run-to-run swings of 30-50% are normal here, so the two sides are never timed one after the
other: each round takes one sample of base, then one of head (alternating which goes first), so
drift and neighbours' load hit both alike. The raw samples go to harness.analyze.stats.

Every probe's output is checked against the float64 oracle before and after timing. A mismatch is
a finding (the head, or base, computes the wrong thing), never a skip: it is what a reviewer most
needs to know, and a wrong kernel's timings mean nothing.
"""

from __future__ import annotations

from harness.analyze.comparison import Comparison, add_timings
from harness.errors import HarnessError
from harness.measure import probes
from harness.measure.device import HostLoad, select
from harness.measure.oracle import KernelMismatch
from harness.measure.timing import BUSY_HOST_CORES, calibrate
from harness.subjects.base import Subject

BENCHMARK = "kernel.Decode.time_layer"


def _prepare_sides(comparison: Comparison, probe, base: Subject, head: Subject, dev):
    """Both sides of one probe, oracle-checked; None (recorded as mismatch/skip) when unusable."""
    sides = []
    for side, subject in (("base", base), ("head", head)):
        try:
            sides.append(probes.prepare(probe, subject, dev))
        except KernelMismatch as exc:
            comparison.mismatches.append((f"probe {probe.name} ({side})", str(exc)))
            return None
        except HarnessError as exc:
            what = f"{BENCHMARK} probe {probe.name}"
            if side == "head" and sides:
                comparison.lost.append((what, str(exc)))
            else:
                comparison.skipped.append((what, str(exc)))
            return None
    return sides


def check_kernels(comparison: Comparison, base: Subject, head: Subject, tier: str = "quick",
                  device: str = "auto") -> None:
    """Run every probe of ``tier`` once per side against the oracle (no timing)."""
    dev = select(device)
    dev.prepare()
    checked = matched = 0
    for probe in probes.TIERS[tier]:
        before = len(comparison.mismatches)
        sides = _prepare_sides(comparison, probe, base, head, dev)
        if sides is not None or len(comparison.mismatches) > before:
            checked += 1
            matched += sides is not None
    comparison.oracle = (matched, checked)
    comparison.base.device = comparison.head.device = dev.name


def time_subjects(comparison: Comparison, base: Subject, head: Subject, tier: str = "quick",
                  rounds: int = 15, device: str = "auto", min_sample_s: float = 5e-3) -> None:
    """Add the oracle check and interleaved timings of every probe of ``tier``."""
    dev = select(device)
    dev.prepare()
    rows = []
    checked = matched = 0
    busiest = 0.0
    for probe in probes.TIERS[tier]:
        before = len(comparison.mismatches)
        sides = _prepare_sides(comparison, probe, base, head, dev)
        if sides is None:
            checked += len(comparison.mismatches) > before
            continue
        checked += 1
        number = max(calibrate(dev, p.run_layer, min_sample_s) for p in sides)
        samples: tuple[list[float], list[float]] = ([], [])
        with HostLoad() as load:
            for r in range(rounds):
                order = (0, 1) if r % 2 == 0 else (1, 0)
                for i in order:
                    seconds, _ = dev.elapsed(sides[i].run_layer, number)
                    samples[i].append(seconds / number)
        busiest = max(busiest, load.others_cores or 0.0)
        try:
            for p in sides:
                p.check()  # the last timed state is still right
        except KernelMismatch as exc:
            comparison.mismatches.append((f"probe {probe.name} (after timing)", str(exc)))
            continue
        matched += 1
        rows.append((BENCHMARK, {"probe": probe.name}, "seconds", *samples))
    add_timings(comparison, rows)
    comparison.timings_measured = True
    comparison.oracle = (matched, checked)
    comparison.timing_notes.append("base and head measured interleaved on this machine")
    if busiest > BUSY_HOST_CORES:
        comparison.timing_advisory = True
        comparison.timing_notes.append(
            f"busy host: other processes used {busiest:.2f} cores while timing; verdicts are "
            "advisory (rerun on a quiet machine)")
    comparison.base.device = comparison.head.device = dev.name
