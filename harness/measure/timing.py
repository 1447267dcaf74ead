"""Timing a callable on a device, and the statistics a noisy machine needs.

Each sample times ``number`` back-to-back calls (calibrated so one sample lasts at least
``min_sample_s``) and is stored as microseconds per call; the raw samples are kept. A time budget
bounds a measurement that would otherwise run for minutes on a slow device: sampling stops at
``repeat`` samples or when the budget is spent (at least ``MIN_SAMPLES`` taken), and the result
says how many it has and why it stopped; it is never padded to look like more. The summary
is robust (median, IQR, MAD, min) with a distribution-free confidence interval for the median
(order statistics, binomial ranks via scipy), and warns, as pyperf does, when the result is
unstable rather than hiding it.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.measure.device import Device, HostLoad
from harness.measure.settings import UNSTABLE_SPREAD

#: Fewer samples than this cannot give a useful interval.
MIN_SAMPLES = 5
#: Other processes using more than this many cores while sampling make a result suspect.
BUSY_HOST_CORES = 0.25


@dataclass(frozen=True)
class Samples:
    """Raw timings: microseconds per call, one value per sample of ``number`` calls."""

    us_per_call: tuple[float, ...]
    number: int
    warmup: int
    #: Seconds spent in the first (warmup) call: compile time when the callable compiles.
    first_call_s: float
    #: Cores' worth of CPU other processes used while sampling (None where unknown).
    others_cores: float | None = None
    #: Graphs Dynamo compiled while the timed samples ran (not the warmup): anything but 0 means
    #: compile time is inside the timing, and the row is invalid.
    new_graphs: int = 0
    #: Samples asked for, and why sampling stopped: "repeat" (all taken) or "time budget".
    repeat: int = 0
    stopped: str = "repeat"

    def summary(self, threshold: float = UNSTABLE_SPREAD, confidence: float = 0.95) -> Summary:
        s = summarize(self.us_per_call, threshold, confidence)
        if self.others_cores is not None and self.others_cores > BUSY_HOST_CORES:
            s = dataclasses.replace(s, warnings=s.warnings + (
                f"busy host: other processes used {self.others_cores:.2f} cores while sampling; "
                "timings on a shared CPU can be many times too slow (quiet machine, or fewer "
                "--threads)",))
        return s


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    mad: float
    min: float
    max: float
    mean: float
    stdev: float
    ci_low: float
    ci_high: float
    #: Actual coverage of [ci_low, ci_high] (order-statistic intervals are not exactly 95%).
    ci_level: float
    warnings: tuple[str, ...] = field(default=())

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def spread(self) -> float:
        """IQR relative to the median."""
        return self.iqr / self.median if self.median else float("inf")

    @property
    def unstable(self) -> bool:
        return bool(self.warnings)

    def as_dict(self) -> dict:
        return {"n": self.n, "median": self.median, "q1": self.q1, "q3": self.q3,
                "iqr": self.iqr, "mad": self.mad, "min": self.min, "max": self.max,
                "mean": self.mean, "stdev": self.stdev, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "ci_level": self.ci_level,
                "relative_spread": self.spread, "warnings": list(self.warnings)}


def median_ci(sorted_values, confidence: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free CI for the median: order statistics at binomial(n, 1/2) ranks.

    Returns (low, high, coverage); with too few samples the interval is (min, max) and its
    coverage says how little that is.
    """
    from scipy import stats as sps  # here, not at import: 0.4 s of every ASV benchmark process

    n = len(sorted_values)
    alpha = 1.0 - confidence
    # Largest k (1-based) with P(B <= k-1) <= alpha/2: [x_(k), x_(n-k+1)] covers >= confidence.
    k = int(sps.binom.ppf(alpha / 2, n, 0.5))
    while k > 0 and sps.binom.cdf(k - 1, n, 0.5) > alpha / 2:
        k -= 1
    k = max(k, 1)
    coverage = 1.0 - 2.0 * float(sps.binom.cdf(k - 1, n, 0.5))
    return sorted_values[k - 1], sorted_values[n - k], coverage


def summarize(values, threshold: float = UNSTABLE_SPREAD, confidence: float = 0.95) -> Summary:
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("no samples")
    n = len(xs)
    med = statistics.median(xs)
    q1, q3 = (statistics.quantiles(xs, n=4, method="inclusive")[i] for i in (0, 2)) \
        if n > 1 else (xs[0], xs[0])
    mad = statistics.median(abs(x - med) for x in xs)
    low, high, level = median_ci(xs, confidence)
    warnings = []
    if n < MIN_SAMPLES:
        warnings.append(f"only {n} samples: use --repeat {MIN_SAMPLES} or more")
    spread = (q3 - q1) / med if med else math.inf
    if spread > threshold:
        warnings.append(f"unstable: IQR is {spread:.0%} of the median (threshold "
                        f"{threshold:.0%}); the machine is noisy or the run too short")
    if med and xs[0] < 0.5 * med:
        warnings.append(f"min is {1 - xs[0] / med:.0%} below the median")
    return Summary(n, med, q1, q3, mad, xs[0], xs[-1], statistics.fmean(xs),
                   statistics.stdev(xs) if n > 1 else 0.0, low, high, level, tuple(warnings))


def calibrate(device: Device, fn: Callable[[], object], min_sample_s: float) -> int:
    """Calls per sample so that one sample lasts at least ``min_sample_s``."""
    seconds, _ = device.elapsed(fn, 1)
    if seconds <= 0:
        return 1000
    return max(1, math.ceil(min_sample_s / seconds))


class Budget:
    """Wall seconds one workload's timing may take: each shape samples within what is left, and
    no shape starts once it is spent (the first always does). None: no bound."""

    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.perf_counter):
        self.seconds, self.clock, self.start = seconds, clock, clock()

    def left(self) -> float | None:
        if self.seconds is None:
            return None
        return max(0.0, self.seconds - (self.clock() - self.start))

    def spent(self) -> bool:
        return self.seconds is not None and self.left() <= 0


class TimedLayer:
    """What an interleaved timer asks of a prepared probe (``device`` and ``run_layer`` given by
    the class); a probe prepared in a subject worker answers the same over its pipe."""

    def calls_per_sample(self, min_sample_s: float) -> int:
        gc.collect()   # each side starts sampling from a collected heap
        return calibrate(self.device, self.run_layer, min_sample_s)

    def sample(self, number: int) -> float:
        """Seconds per call, over ``number`` back-to-back calls."""
        seconds, _ = self.device.elapsed(self.run_layer, number)
        return seconds / number


def measure(device: Device, fn: Callable[[], object], *, repeat: int = 20, warmup: int = 3,
            number: int | None = None, min_sample_s: float = 2e-3,
            check: Callable[[object], None] | None = None,
            budget_s: float | None = None,
            clock: Callable[[], float] = time.perf_counter) -> Samples:
    """Time ``fn`` on ``device``: warmup calls, then ``repeat`` samples of ``number`` calls.

    ``check`` sees the first warmup result and the last timed result: a wrong callable raises
    before any timing is reported. ``budget_s`` bounds the whole measurement's wall time: the
    warmup calls after the first (checked) one stop once half of it is spent, the samples once
    all of it is and ``MIN_SAMPLES`` were taken; the stop is decided by the clock alone, never by
    the values, so the samples taken are an honest (smaller) sample.
    """
    if repeat < 1 or warmup < 0:
        raise ValueError("repeat must be >= 1 and warmup >= 0")
    start = clock()
    spent = lambda: clock() - start  # noqa: E731
    first_s, result = device.elapsed(fn, 1)
    if check is not None:
        check(result)
    last_s = None   # the last warmup call after the first (the first may include a compile)
    for _ in range(max(0, warmup - 1)):
        if budget_s is not None and spent() >= budget_s / 2:
            break
        last_s, _ = device.elapsed(fn, 1)
    if number is None:   # one more call to calibrate, unless a warmup call already says enough
        number = (max(1, math.ceil(min_sample_s / last_s)) if last_s
                  else calibrate(device, fn, min_sample_s))
    samples = []
    graphs = compiled_graphs()
    stopped = "repeat"
    with HostLoad() as load:
        for _ in range(repeat):
            if (budget_s is not None and len(samples) >= MIN_SAMPLES
                    and spent() >= budget_s):
                stopped = "time budget"
                break
            seconds, result = device.elapsed(fn, number)
            samples.append(seconds / number * 1e6)
    new_graphs = compiled_graphs() - graphs
    if check is not None:
        check(result)
    return Samples(tuple(samples), number, warmup, first_s, load.others_cores, new_graphs,
                   repeat, stopped)


def compiled_graphs() -> int:
    """Dynamo's running count of graphs compiled in this process (its own counters)."""
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])
