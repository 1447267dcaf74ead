"""Statistics for wall-clock samples: ratio of medians, a rank test, and an honest verdict.

Timings on these machines swing 30-50% run to run, so one number never decides. A timing change
is a regression (or improvement) only when the median ratio is past ``factor`` AND a two-sided
Mann-Whitney U test on the raw samples rejects "same distribution" at ``alpha``. It is "no
change" only when the bootstrap interval of the ratio (``scipy.stats.bootstrap``) lies inside
[1/factor, factor]. Anything else is "inconclusive", with what would settle it.

Timings measured now, interleaved, are judged on paired rounds instead (:func:`judge_paired`, one
look of harness.measure.sampler's sequential test): the Hodges-Lehmann ratio of each round's
head/base, an interval corrected for the looks taken, regression past √factor.

numpy and scipy are imported by the functions that use them: a Comparison (which names this
module's defaults) is also built for exact figures only, and those commands stay light.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median

from harness.measure.settings import UNSTABLE_SPREAD

DEFAULT_FACTOR = 1.25
DEFAULT_ALPHA = 0.01
MIN_SAMPLES = 5


@dataclass(frozen=True)
class Verdict:
    kind: str  # "regression", "improvement", "no change", "inconclusive"
    ratio: float  # median(head) / median(base); > 1 is slower (lower is better)
    ci: tuple[float, float]  # 95% interval of the ratio (bootstrap; Hodges-Lehmann when paired)
    p_value: float
    advice: str = ""
    #: How the verdict was reached: "unpaired" (Mann-Whitney on two sets of samples) or
    #: "paired" (the adaptive sampler's rounds, harness.measure.sampler).
    method: str = "unpaired"
    #: Paired only: rounds taken, seconds spent, why sampling stopped, and the interval the
    #: decision used (wider than ``ci``: its level is corrected for the looks taken).
    rounds: int | None = None
    seconds: float | None = None
    stopped: str | None = None
    decision_ci: tuple[float, float] | None = None

    @property
    def changed(self) -> bool:
        return self.kind in ("regression", "improvement")


def spread(samples) -> float:
    """IQR / median: the relative noise of one series."""
    import numpy as np
    return quartile_spread(*np.percentile(samples, [25, 50, 75]))


def quartile_spread(q25: float, median: float, q75: float) -> float:
    """IQR / median from the quartiles (what ASV stores of a timing), infinite at a zero median."""
    return float((q75 - q25) / median) if median else math.inf


def ratio_interval(base, head, rounds: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Bootstrap 95% interval of median(head)/median(base), each side resampled on its own
    (percentile method; seeded: same input, same answer)."""
    import numpy as np
    from scipy import stats

    def ratio(b, h, axis=-1):
        return np.median(h, axis=axis) / np.median(b, axis=axis)

    with np.errstate(divide="ignore", invalid="ignore"):
        ci = stats.bootstrap((np.asarray(base, dtype=float), np.asarray(head, dtype=float)),
                             ratio, n_resamples=rounds, vectorized=True, method="percentile",
                             confidence_level=0.95, random_state=np.random.default_rng(seed)
                             ).confidence_interval
    return float(ci.low), float(ci.high)


def judge(base, head, factor: float = DEFAULT_FACTOR, alpha: float = DEFAULT_ALPHA) -> Verdict:
    """Verdict on two sets of raw timing samples (lower is better)."""
    base, head = [float(x) for x in base], [float(x) for x in head]
    if len(base) < 2 or len(head) < 2:
        return Verdict("inconclusive", _ratio(base, head), (math.nan, math.nan), math.nan,
                       f"need samples on both sides (have {len(base)} and {len(head)}): "
                       "run with --record-samples or more repeats")
    from scipy import stats

    r = _ratio(base, head)
    ci = ratio_interval(base, head)
    p = float(stats.mannwhitneyu(base, head, alternative="two-sided").pvalue)
    if r > factor and p < alpha:
        return Verdict("regression", r, ci, p)
    if r < 1 / factor and p < alpha:
        return Verdict("improvement", r, ci, p)
    if 1 / factor <= ci[0] and ci[1] <= factor:
        return Verdict("no change", r, ci, p)
    return Verdict("inconclusive", r, ci, p, _advice(base, head))


def _ratio(base, head) -> float:
    mb = median(base) if base else math.nan
    return median(head) / mb if base and head and mb else math.nan


def _advice(base, head) -> str:
    noisy = max(spread(base), spread(head))
    tips = []
    if min(len(base), len(head)) < 3 * MIN_SAMPLES:
        tips.append(f"more samples (have {len(base)} and {len(head)})")
    if noisy > UNSTABLE_SPREAD:
        tips.append(f"a quieter machine (spread {noisy:.0%} of the median)")
    return "; ".join(tips) or "more samples, interleaved base/head runs"


def paired_ratio(base, head, z: float = 1.96) -> tuple[float, float, float]:
    """Hodges-Lehmann estimate of head/base from paired rounds, with its interval at ``z``.

    Each round's log-ratio log(head/base) cancels what drifts between rounds (load, clocks,
    thermal state); the estimate is the median of the Walsh averages of those log-ratios, and the
    interval is the pair of Walsh averages at the signed-rank test's critical ranks (normal
    approximation). Robust to the odd sample a neighbour's burst spoils. Returns (ratio, low,
    high); the interval is (0, inf) when there are too few rounds for that confidence.
    """
    import numpy as np

    d = np.log(np.asarray(head, dtype=float)) - np.log(np.asarray(base, dtype=float))
    n = len(d)
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2.0)
    m = len(walsh)
    estimate = float(np.median(walsh))
    k = math.floor(n * (n + 1) / 4 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24))
    if k < 0:
        return math.exp(estimate), 0.0, math.inf
    return math.exp(estimate), math.exp(walsh[k]), math.exp(walsh[m - 1 - k])


def look_z(alpha: float, looks: int) -> float:
    """Two-sided critical z with ``alpha`` split evenly over ``looks`` looks (Bonferroni)."""
    from scipy.stats import norm
    return float(norm.ppf(1 - alpha / (2 * max(1, looks))))


def judge_paired(base, head, factor: float = DEFAULT_FACTOR, alpha: float = DEFAULT_ALPHA,
                 looks: int = 1) -> Verdict:
    """Verdict on paired rounds, one look of a sequential test (lower is better).

    The interval at the corrected level decides: a regression when it lies above √factor (half
    way, in log terms, from no change to the factor: a slowdown of the factor is caught, one
    under √factor never is), an improvement when below 1/√factor, no change when inside
    [1/factor, factor]; anything else is undecided (the sampler takes more rounds) and, at the
    last look, inconclusive. The reported ratio and 95% interval are the Hodges-Lehmann ones.
    """
    base, head = [float(x) for x in base], [float(x) for x in head]
    if len(base) != len(head) or len(base) < 2:
        return Verdict("inconclusive", _ratio(base, head), (math.nan, math.nan), math.nan,
                       f"need paired rounds (have {len(base)} and {len(head)})", "paired",
                       rounds=min(len(base), len(head)))
    from scipy import stats

    ratio, low95, high95 = paired_ratio(base, head)
    _, low, high = paired_ratio(base, head, look_z(alpha, looks))
    logs = [math.log(h / b) for b, h in zip(base, head)]
    p = float(stats.wilcoxon(logs).pvalue) if any(logs) else 1.0
    edge = math.sqrt(factor)
    if low > edge:
        kind = "regression"
    elif high < 1 / edge:
        kind = "improvement"
    elif 1 / factor <= low and high <= factor:
        kind = "no change"
    else:
        kind = "inconclusive"
    return Verdict(kind, ratio, (low95, high95), p, "", "paired", rounds=len(base),
                   decision_ci=(low, high))
