"""Pin the first bad commit of a change point by measuring inside its range.

A binary search over the first-parent commits between the last good and the first bad commit,
measuring only the one series (benchmark and parameters) that changed. A midpoint is bad when its
value is an exact figure that differs from the good one, or a timing closer (in log ratio) to the
bad commit's than to the good one's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from harness.errors import HarnessError
from harness.registry import is_exact
from harness.runner.asv_suite import Options, Target, run_targets
from harness.store.history import load_history_quietly
from harness.subjects.source import gitrev


@dataclass
class Bisection:
    benchmark: str
    params: dict
    good: str
    bad: str
    first_bad: str | None = None
    #: (commit, value, verdict) for every commit measured, in the order measured.
    steps: list[tuple[str, float, str]] = field(default_factory=list)


def series_regex(benchmark: str, params: dict, param_names: list[str]) -> str:
    """ASV's --bench regex selecting one parameter combination (names are ``name(p1, p2)``)."""
    if not param_names:
        return f"^{re.escape(benchmark)}$"
    shown = ", ".join(repr(params[n]) for n in param_names)
    return f"^{re.escape(f'{benchmark}({shown})')}$"


def _value(options: Options, commit: str, benchmark: str, params: dict) -> tuple[float, bool]:
    frame = load_history_quietly(options.results_dir)
    rows = frame[(frame.commit == commit) & (frame.benchmark == benchmark)
                 & (frame.machine == options.machine)]
    rows = rows[[p == params for p in rows["params"]]]
    if rows.empty or rows.iloc[0]["status"] != "ok":
        raise HarnessError(f"no measured value of {benchmark} {params} at {commit[:12]}")
    row = rows.iloc[0]
    return float(row["value"]), is_exact(benchmark)


def bisect(options: Options, good: str, bad: str, benchmark: str, params: dict,
           param_names: list[str], progress=None) -> Bisection:
    candidates = gitrev.git(options.repo, "rev-list", "--first-parent", "--reverse", "--end-of-options",
                            f"{good}..{bad}", check=False).stdout.decode().split()
    if not candidates or candidates[-1] != bad:
        raise HarnessError(f"{bad[:12]} is not a first-parent descendant of {good[:12]}")
    result = Bisection(benchmark, params, good, bad)
    opts = Options(**{**options.__dict__, "bench": series_regex(benchmark, params, param_names)})
    cache: dict[str, tuple[float, bool]] = {}

    def measure(commit: str) -> tuple[float, bool]:
        if commit not in cache:
            try:
                cache[commit] = _value(opts, commit, benchmark, params)
            except HarnessError:
                target = Target(f"{commit[:8]} (bisect)", commit,
                                f"git:{options.repo.resolve()}@{commit}")
                for _ in run_targets([target], opts, progress):
                    pass
                cache[commit] = _value(opts, commit, benchmark, params)
        return cache[commit]

    good_v, exact = measure(good)
    bad_v, _ = measure(bad)
    if good_v == bad_v:
        raise HarnessError(f"{benchmark} is {good_v} at both {good[:12]} and {bad[:12]}: "
                           "nothing to bisect")
    lo, hi = -1, len(candidates) - 1  # candidates[lo] good (lo = -1: `good`), candidates[hi] bad
    while hi - lo > 1:
        mid = (lo + hi) // 2
        value, _ = measure(candidates[mid])
        if exact:
            is_bad = value != good_v
        else:
            is_bad = abs(math.log(value / bad_v)) < abs(math.log(value / good_v))
        result.steps.append((candidates[mid], value, "bad" if is_bad else "good"))
        lo, hi = (lo, mid) if is_bad else (mid, hi)
    result.first_bad = candidates[hi]
    return result
