"""Statistics for wall-clock samples: ratio of medians, a rank test, and an honest verdict.

Timings on these machines swing 30-50% run to run, so one number never decides. A timing change
is a regression (or improvement) only when the median ratio is past ``factor`` AND a two-sided
Mann-Whitney U test on the raw samples rejects "same distribution" at ``alpha``. It is "no
change" only when the bootstrap interval of the ratio (``scipy.stats.bootstrap``) lies inside
[1/factor, factor]. Anything else is "inconclusive", with what would settle it.

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
    ci: tuple[float, float]  # bootstrap 95% interval of the ratio
    p_value: float
    advice: str = ""

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
