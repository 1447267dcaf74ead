"""How small a slowdown do the timing verdicts catch on this machine?

    python -m tests.bench.sensitivity [TRIALS]

Times the reference kernel (reference:post-810-clamp) against itself slowed by a factor k (the
real call, then a busy wait of (k-1) x its own duration), through the same interleaved timing and
verdict as ``spyre-bench compare --timings``, TRIALS times per k; prints how often each verdict
came out. k = 1.0 is the A/A case: any regression or improvement there is a false alarm.
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from harness.analyze.comparison import Comparison, Side
from harness.analyze.subjects_now import add_kernel_run
from harness.measure.interleaved import time_subjects
from harness.subjects import resolve_subject


class Slowed:
    """A subject whose decode kernel takes ``factor`` times as long (same output)."""

    def __init__(self, subject, factor: float):
        self._subject, self.factor = subject, factor
        self.spec = f"{subject.spec}*{factor}"

    def __getattr__(self, name):
        return getattr(self._subject, name)

    def decode_kernel(self):
        kernel, generation = self._subject.decode_kernel()

        def slowed(*args, **kwargs):
            t0 = time.perf_counter()
            out = kernel(*args, **kwargs)
            end = time.perf_counter() + (self.factor - 1) * (time.perf_counter() - t0)
            while time.perf_counter() < end:
                pass
            return out
        return slowed, generation


def main(trials: int = 5) -> None:
    base = resolve_subject("reference:post-810-clamp")
    for factor in (1.0, 1.1, 1.2, 1.3, 1.5, 2.0):
        tally: Counter[str] = Counter()
        for _ in range(trials):
            c = Comparison(Side("base"), Side("head"))
            add_kernel_run(c, time_subjects(base, Slowed(base, factor)))
            tally.update(t.verdict.kind for t in c.timings
                         if t.params["probe"] != "small-4x8-per-seq")
        total = sum(tally.values())
        print(f"k={factor:.1f}: " + ", ".join(f"{k} {n}/{total}" for k, n in sorted(tally.items())),
              flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
