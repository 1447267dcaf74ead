"""Kernel timings for a fresh comparison: base and head measured interleaved on this machine.

Run-to-run swings of 30-50% are normal here, so the two sides are never timed one after the
other: each round takes one sample of base, then one of head (alternating which goes first), so
drift and neighbours' load hit both alike. The raw samples go to harness.analyze.stats.
"""

from __future__ import annotations

from harness.analyze.compare import Comparison, add_timings
from harness.errors import HarnessError
from harness.measure import probes
from harness.measure.device import select
from harness.measure.timing import calibrate
from harness.subjects.base import Subject

BENCHMARK = "kernel.Decode.time_layer"


def time_subjects(comparison: Comparison, base: Subject, head: Subject, tier: str = "quick",
                  rounds: int = 15, device: str = "auto", min_sample_s: float = 5e-3) -> None:
    """Add the interleaved timings of every probe of ``tier`` to ``comparison``."""
    dev = select(device)
    dev.prepare()
    rows = []
    for probe in probes.TIERS[tier]:
        try:
            sides = [probes.prepare(probe, s, dev) for s in (base, head)]
        except HarnessError as exc:
            comparison.skipped.append((f"{BENCHMARK} probe {probe.name}", str(exc)))
            continue
        number = max(calibrate(dev, p.run_layer, min_sample_s) for p in sides)
        samples: tuple[list[float], list[float]] = ([], [])
        for r in range(rounds):
            order = (0, 1) if r % 2 == 0 else (1, 0)
            for i in order:
                seconds, _ = dev.elapsed(sides[i].run_layer, number)
                samples[i].append(seconds / number)
        for p in sides:
            p.check()  # the last timed state is still right
        rows.append((BENCHMARK, {"probe": probe.name}, "seconds", *samples))
    add_timings(comparison, rows)
    comparison.base.device = comparison.head.device = dev.name
