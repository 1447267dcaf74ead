"""Change points over history, per series (machine, environment, benchmark, parameters).

Exact series are deterministic, so every change between consecutive measured commits is a change
point, in either direction. Timing series are noisy: ASV's own step detection
(``asv.step_detect``: a piecewise-constant fit, then upward steps past a relative threshold)
decides, with the threshold asv.conf.json's ``regressions_thresholds`` gives the benchmark (the
largest matching one, as ``asv publish`` does). A timing point whose own samples spread wider
than that threshold (interquartile range over the median: a busy host, e.g. samples from 7 ms to
1 s) cannot show such a step by its median. A busy host only adds time, so the point's fastest
sample stands for it in the fit: a planted slowdown measured on a busy host still shows at its
commit, and a busy point of unchanged code makes no step. A noisy point without stored samples
is left out, and the next clean measurement of that series decides. Either is said through
``on_noisy``.

Change points at the same commit range are one *regression*: what a GitHub issue is opened for,
naming the first bad commit measured and every commit the change could be in. This module returns
them as data; the issue's markdown is harness.report.issues'.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field

from asv import step_detect

from harness.analyze.stats import quartile_spread
from harness.metrics import format_value
from harness.registry import is_exact, lookup

DEFAULT_TIMING_THRESHOLD = 0.5


@dataclass(frozen=True)
class ChangePoint:
    machine: str
    env_name: str
    benchmark: str
    params: dict
    unit: str
    exact: bool
    last_good: str
    first_bad: str
    before: float
    after: float

    @property
    def direction(self) -> str:
        return "worse" if self.after > self.before else "better"

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before else math.inf

    def change_text(self) -> str:
        return (f"{format_value(self.before, self.unit)} → {format_value(self.after, self.unit)}"
                + (f" ({self.ratio:.2f}×)" if self.before else ""))

    @property
    def metric(self) -> str:
        found = lookup(self.benchmark)
        return found.figure if found is not None else self.benchmark


@dataclass
class Regression:
    """Every change point between one last good and one first bad commit."""

    last_good: str
    first_bad: str
    #: Commits the change could be in (after last_good, up to and including first_bad).
    candidates: list[str] = field(default_factory=list)
    points: list[ChangePoint] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.last_good[:8]}..{self.first_bad[:8]}"

    @property
    def worse(self) -> list[ChangePoint]:
        return [p for p in self.points if p.direction == "worse"]

    @property
    def is_regression(self) -> bool:
        """Counted by its worse entries only: a change whose every figure improved (#810's clamp
        dropping the entries above the limit: fewer buckets, less padding) is no regression."""
        return bool(self.worse)

    @property
    def kind(self) -> str:
        return "timing" if all(not p.exact for p in self.points) else "exact"

    def as_dict(self) -> dict:
        return {"key": self.key, "last_good": self.last_good, "first_bad": self.first_bad,
                "candidates": self.candidates, "kind": self.kind,
                "regression": self.is_regression,
                "points": [asdict(p) | {"direction": p.direction} for p in self.points]}


def thresholds_from(conf: dict) -> list[tuple[re.Pattern, float]]:
    return [(re.compile(k), float(v)) for k, v in conf.get("regressions_thresholds", {}).items()]


def threshold_for(benchmark: str, thresholds) -> float:
    matched = [t for regex, t in thresholds if regex.match(benchmark)]
    return max(matched) if matched else DEFAULT_TIMING_THRESHOLD


def _spread(row) -> float:
    """Interquartile range over the median of one stored timing (0 when not stored)."""
    try:
        q25, q75, median = float(row["q_25"]), float(row["q_75"]), float(row["value"])
    except (KeyError, TypeError, ValueError):
        return 0.0
    if math.isnan(q25) or math.isnan(q75) or not median:
        return 0.0
    return quartile_spread(q25, median, q75)


def _fastest(row) -> float | None:
    """The fastest stored sample of one timing (None when no samples were stored)."""
    samples = row.get("samples")
    if not isinstance(samples, (list, tuple)):
        return None
    kept = [float(x) for x in samples if x is not None and not math.isnan(float(x))]
    return min(kept) if kept else None


def detect(frame, order: list[str] | None = None, thresholds=(),
           on_noisy=None) -> list[ChangePoint]:
    """Change points of every series in a history frame (harness.store.history);
    ``on_noisy(line)`` hears of each timing point too noisy to show a step by its median."""
    ok = frame[frame["status"] == "ok"]
    if order is None:
        order = list(ok.sort_values("date")["commit"].drop_duplicates())
    rank = {c: i for i, c in enumerate(order)}
    ok = ok[ok["commit"].isin(rank)]
    points: list[ChangePoint] = []
    keys = ok.assign(_p=[json.dumps(p, sort_keys=True) for p in ok["params"]],
                     _r=[rank[c] for c in ok["commit"]],
                     _v=ok["version"].fillna("") if "version" in ok else "")
    # a new version of a benchmark (a changed definition, harness.registry) is a new series
    for (machine, env, bench, _p, _v), rows in keys.groupby(
            ["machine", "env_name", "benchmark", "_p", "_v"], sort=True):
        rows = rows.sort_values("_r")
        commits, values = list(rows["commit"]), [float(v) for v in rows["value"]]
        if len(values) < 2:
            continue
        first = rows.iloc[0]
        exact = is_exact(bench)
        common = dict(machine=machine, env_name=env, benchmark=bench, params=first["params"],
                      unit=first["unit"], exact=exact)
        if exact:
            for i in range(1, len(values)):
                if values[i] != values[i - 1]:
                    points.append(ChangePoint(**common, last_good=commits[i - 1],
                                              first_bad=commits[i], before=values[i - 1],
                                              after=values[i]))
            continue
        threshold = threshold_for(bench, thresholds)
        left_out = set()
        for i, (_, row) in enumerate(rows.iterrows()):
            spread = _spread(row)
            if not threshold or spread <= threshold:
                continue
            fastest = _fastest(row)
            where = (f"{bench} {_p} at {commits[i][:12]} on {machine}: its samples spread "
                     f"{spread:.0%} of the median, over the {threshold:.0%} step threshold "
                     "(a busy host?); ")
            if fastest is None:
                left_out.add(i)
                said = "no samples stored, so left out of step detection until measured again"
            else:
                values[i] = fastest
                said = (f"its fastest sample, {format_value(fastest, first['unit'])}, stands for "
                        "it in step detection")
            if on_noisy is not None:
                on_noisy(where + said)
        commits = [c for i, c in enumerate(commits) if i not in left_out]
        values = [v for i, v in enumerate(values) if i not in left_out]
        if len(values) < 2:
            continue
        steps = step_detect.detect_steps(values)
        _, _, regressions = step_detect.detect_regressions(steps, threshold=threshold)
        for before_i, after_i, before_v, after_v in regressions or []:
            points.append(ChangePoint(**common, last_good=commits[before_i],
                                      first_bad=commits[after_i], before=before_v,
                                      after=after_v))
    return points


def group(points: list[ChangePoint], between=None) -> list[Regression]:
    """One Regression per commit range; ``between(good, bad)`` lists the commits in it."""
    out: dict[tuple[str, str], Regression] = {}
    for p in points:
        r = out.setdefault((p.last_good, p.first_bad), Regression(p.last_good, p.first_bad))
        r.points.append(p)
    for r in out.values():
        r.candidates = between(r.last_good, r.first_bad) if between else [r.first_bad]
    return list(out.values())
