"""Adaptive interleaved sampling of two sides until a timing verdict is reached, or a bound.

Wall-clock noise on a shared 2-core box is 10-50% between runs, and a fixed number of rounds is
either too few for a 10% slowdown or wasted on a 2x one. So rounds are taken in ABBA order (base,
head, head, base, ...: drift and a neighbour's load hit both sides alike), and each ABBA quad (two
rounds) is one paired observation: the geometric mean of each side's two samples. Within a quad each
side runs once straight after itself and once after the other side, so what the other side's
sample leaves behind (the caches, the core) cancels; judged round by round, that position effect
(15-20 % on a 2-core box between two subject workers) splits the observations into two clusters
whose median is decided by the clusters' widths, and an A/A run said "improvement". At looks
spaced geometrically the sequential test of
harness.analyze.stats.judge_paired either decides (regression / improvement / no change) or asks
for more rounds. Sampling stops at a decision, at ``max_rounds`` or at ``max_seconds``: far from
the factor it stops early, near it it keeps going, and at the bound it says inconclusive with the
effect size and interval it has. The error rate is split over the looks (Bonferroni), so taking
more looks never buys a false alarm.

A side is anything with ``calls_per_sample(min_sample_s) -> int`` and ``sample(number) -> float``
(seconds per call; harness.measure.timing.TimedLayer): a probe prepared in this process or one in
a subject worker answers the same. Raw samples are kept, round by round.

Cold cache (``cold=True``, for memory-bound kernels): before every timed call a buffer larger than
the last-level cache (twice the L3 on the CPU, twice the L2 on CUDA) is written, so each call
reads its K/V from memory, as a decode step does after the rest of the model ran. Warm (the
default) times a kernel whose inputs the previous call left in cache.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from harness.analyze.stats import DEFAULT_ALPHA, Verdict, judge_paired

#: The factor a PR verdict is powered for: a 10-20% kernel regression is what a review must catch.
PR_FACTOR = 1.10
#: The box's L3 when sysfs does not say (CI: 32 MiB).
DEFAULT_L3_BYTES = 32 << 20


class Side(Protocol):
    def calls_per_sample(self, min_sample_s: float) -> int: ...

    def sample(self, number: int) -> float: ...


@dataclass(frozen=True)
class Plan:
    """How long to sample and what to decide; the defaults fit a PR job on 2 cores (4 probes)."""

    factor: float = PR_FACTOR
    alpha: float = DEFAULT_ALPHA
    #: The first look: 15 quads, the fewest whose signed-rank interval is finite at the
    #: corrected level of the default plan.
    min_rounds: int = 30
    max_rounds: int = 240
    #: Bound per probe, checked after every round pair.
    max_seconds: float = 30.0
    min_sample_s: float = 5e-3
    #: Each look comes after this many times the rounds of the previous one.
    growth: float = 1.25
    cold: bool = False
    #: Timed calls per sample in cold mode (each after its own flush).
    cold_calls: int = 4

    def looks(self) -> list[int]:
        """Round counts at which the test looks (even: ABBA pairs complete), the last the bound."""
        out, n = [], max(2, self.min_rounds)
        while n < self.max_rounds:
            n += n % 2
            if not out or n > out[-1]:
                out.append(n)
            n = math.ceil(n * self.growth)
        out.append(self.max_rounds + self.max_rounds % 2)
        return out

    def as_dict(self) -> dict:
        return {"factor": self.factor, "alpha": self.alpha, "min_rounds": self.min_rounds,
                "max_rounds": self.max_rounds, "max_seconds": self.max_seconds,
                "min_sample_s": self.min_sample_s, "cold": self.cold,
                "looks": len(self.looks()) + 1}


@dataclass
class Sampled:
    """Raw rounds and the verdict: seconds per call, base and head, in round order (round r ran
    base first when r is even)."""

    base: list[float] = field(default_factory=list)
    head: list[float] = field(default_factory=list)
    number: int = 1
    verdict: Verdict | None = None
    seconds: float = 0.0
    cache: str = "warm"


def sample_pair(base: Side, head: Side, plan: Plan = Plan(),
                flush: Callable[[], None] | None = None,
                clock: Callable[[], float] = time.perf_counter,
                refresh: Callable[[], tuple[Side, Side]] | None = None) -> Sampled:
    """Interleave ``base`` and ``head`` until the sequential test decides or a bound is hit.

    ``refresh``, when given, returns both sides prepared anew; it is called before every quad
    but the first, so each quad runs on preparations of its own. Two preparations of the same
    kernel on a commit's forward timed up to 9 % apart, consistently for as long as they lived
    (where their buffers landed, what the commit's code cached): with one preparation per side,
    that difference was a verdict; with one per quad it is variance the test sees."""
    sides = (base, head)
    number = max(s.calls_per_sample(plan.min_sample_s) for s in sides)
    cold = plan.cold and flush is not None
    take = _cold_sampler(flush, plan.cold_calls) if cold else (lambda s: s.sample(number))
    out = Sampled(number=plan.cold_calls if cold else number, cache="cold" if cold else "warm")

    def warm_up(sides) -> None:
        for s in sides[::-1]:  # one untimed sample each: first-touch costs are no side's; head
            take(s)            # first, so the first quad's base sample follows the base too
    warm_up(sides)
    looks = plan.looks()
    total_looks = len(looks) + 1  # the time bound may force one look off the schedule
    start = clock()
    verdict = None
    while True:
        if refresh is not None and out.base:
            sides = tuple(refresh())
            warm_up(sides)
        for r in (len(out.base), len(out.base) + 1):
            order = (0, 1) if r % 2 == 0 else (1, 0)
            got = [0.0, 0.0]
            for i in order:
                got[i] = take(sides[i])
            out.base.append(got[0])
            out.head.append(got[1])
        n = len(out.base)
        out_of_time = clock() - start >= plan.max_seconds
        if n in looks or out_of_time or n >= looks[-1]:
            verdict = judge_paired(*quads(out.base, out.head), plan.factor, plan.alpha,
                                   total_looks)
            last = out_of_time or n >= looks[-1]
            if verdict.kind != "inconclusive" or last:
                break
    out.seconds = clock() - start
    verdict = _with(verdict, rounds=n)
    stopped = "decided" if verdict.kind != "inconclusive" else \
        ("time bound" if out_of_time else "round bound")
    advice = "" if verdict.kind != "inconclusive" else _advice(verdict, plan, stopped)
    out.verdict = _with(verdict, seconds=out.seconds, stopped=stopped, advice=advice)
    return out


def quads(base: list[float], head: list[float]) -> tuple[list[float], list[float]]:
    """Each side's geometric mean over each complete ABBA quad (rounds 2k and 2k+1): the paired
    observations the verdict is judged on."""
    n = min(len(base), len(head)) // 2 * 2
    pair = lambda xs: [math.sqrt(xs[i] * xs[i + 1]) for i in range(0, n, 2)]  # noqa: E731
    return pair(base), pair(head)


def _cold_sampler(flush: Callable[[], None], calls: int):
    def take(side: Side) -> float:
        total = 0.0
        for _ in range(calls):
            flush()
            total += side.sample(1)
        return total / calls
    return take


def _with(v: Verdict, **changes) -> Verdict:
    import dataclasses
    return dataclasses.replace(v, **changes)


def _advice(v: Verdict, plan: Plan, stopped: str) -> str:
    low, high = v.decision_ci or (0.0, math.inf)
    where = (f"the interval {low:.2f}-{high:.2f}x reaches both sides of the factor "
             f"{plan.factor:g}" if math.isfinite(high) and low > 0 else "too few rounds for an "
             "interval")
    return f"undecided at the {stopped} ({v.rounds} rounds): {where}; more time " \
           "(--timing-seconds) or a quieter machine"


def last_level_cache_bytes() -> int:
    """The CPU's L3 from sysfs (the largest cache level of cpu0), else 32 MiB."""
    import glob
    best = 0
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            text = open(path).read().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best or DEFAULT_L3_BYTES


def cache_flusher(device) -> tuple[Callable[[], None], str]:
    """A function that evicts the device's last-level cache, and what it writes (for the record).

    CPU: writes twice the L3 (at least 64 MiB); CUDA: twice the GPU's L2, on the GPU.
    """
    import torch

    if device.name == "cuda":
        index = device.torch_device.index or torch.cuda.current_device()
        l2 = getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0) or (50 << 20)
        size, what = 2 * l2, f"2x the GPU's L2 ({l2 >> 20} MiB)"
    else:
        l3 = last_level_cache_bytes()
        size, what = max(64 << 20, 2 * l3), f"2x the L3 ({l3 >> 20} MiB)"
    buffer = torch.empty(size, dtype=torch.uint8, device=device.torch_device)

    def flush() -> None:
        buffer.add_(1)
        device.synchronize()
    return flush, f"{size >> 20} MiB written before every timed call ({what})"
