"""Exact figures as ``track_`` benchmarks: deterministic, so any change at all is a real change.

No torch is imported here. Every figure is lower-is-better (ASV's convention) and declared in
``harness.metrics``; the methods are generated from that registry so a new metric needs no code.
"""

import math

from harness import suite
from harness.analyze.frontier_place import default_excess
from harness.evaluate import config_figures, workload_figures
from harness.ladders import ladder_sum
from harness.metrics import CONFIG_METRICS, WORKLOAD_METRICS
from harness.registry import LADDER_UNITS, describe
from harness.workloads import MIXES, buildable, specs

#: The ratio whose rounding the frontier's excess padding (a percent of it) shares.
PADDED = WORKLOAD_METRICS["padded_slots_per_real_token"]

_CONFIG_PARAMS, _CONFIG_NAMES = suite.config_params()


def _compact(figures: dict, metrics) -> dict:
    """Only the tracked numbers: setup_cache's table is unpickled in every benchmark process."""
    if "skipped" in figures:
        return figures
    return {name: figures[name] for name, m in metrics.items() if m.tracked}


def _figures_or_skip(benchmark: str, table: dict, key: tuple) -> dict:
    if "skipped" in table:
        suite.skip(benchmark, table["skipped"])
    figures = table[key]
    if "skipped" in figures:
        suite.skip(benchmark, figures["skipped"])
    return figures


#: Whole numbers float64 holds exactly: a mean that is whole (``5499.0``) is stored as the int
#: (``5499``), the same number to ASV and every reader and two bytes fewer in the results file.
_EXACT_INT = 2 ** 53


def _stored(value, significant: int = 0):
    """As ASV stores it: a whole float as its int; a ratio at ``significant`` digits (0: as is)."""
    if isinstance(value, float) and significant and math.isfinite(value):
        value = float(f"{value:.{significant}g}")
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT_INT:
        return int(value)
    return value


def _track(cls: str, name: str, significant: int):
    def track(self, *params):
        return _stored(self.figures[name], significant)
    return describe(track, f"exact.{cls}.track_{name}")


class Config:
    """Per config: ladder sizes, warmup variants, reachable, unrecorded and dead compile keys."""

    params = _CONFIG_PARAMS
    param_names = _CONFIG_NAMES
    timeout = 300

    @suite.skipped_when_not_drivable
    def setup_cache(self):
        subject = suite.subject()
        if subject.lacks("bucketer"):
            return {"skipped": subject.lacks("bucketer")}
        return {suite.case_key(c): _compact(config_figures(subject, c), CONFIG_METRICS)
                for c in suite.cases() if suite.wanted(suite.case_key(c))}

    def setup(self, table, *key):
        self.figures = _figures_or_skip(f"exact.Config{list(key)}", table, key)


class Workload:
    """Per config and batch mix: iterations, padding, host-to-device bytes, compile keys."""

    params = _CONFIG_PARAMS + [list(MIXES)]
    param_names = _CONFIG_NAMES + ["workload"]
    timeout = 300
    #: In one process (spyre-bench run), this goes before Config: its worker processes bucket
    #: every config they drive, so Config's setup_cache then reads the bucketings.
    setup_cache_first = True

    @suite.skipped_when_not_drivable
    def setup_cache(self):
        subject = suite.subject()
        if subject.lacks("bucketer"):
            return {"skipped": subject.lacks("bucketer")}
        mixes = specs(steps=suite.tier().steps)
        chosen = {}
        for case in suite.cases():
            key = suite.case_key(case)
            chosen[key] = (case, [m for m in mixes if suite.wanted(key + (m.name,))])
        subject.prefetch_workloads([(case.config, case.overrides, built)
                                    for case, wanted in chosen.values()
                                    if (built := buildable(wanted, case.config))])
        table = {}
        for case, wanted in chosen.values():
            if not wanted:
                continue
            for name, figures in workload_figures(subject, case, wanted).items():
                table[suite.case_key(case) + (name,)] = _compact(figures, WORKLOAD_METRICS)
        return table

    def setup(self, table, *key):
        self.figures = _figures_or_skip(f"exact.Workload{list(key)}", table, key)


class Frontier:
    """Per config with no kv override: how much more (%) its own kv ladder pads on the tier's
    mixes than the best ladder the optimiser finds with at most as many compiled graphs, both
    evaluated by the subject's own code (harness.analyze.frontier_place). 0 is on the frontier;
    a PR that moves a ladder away from it shows in plain ``asv compare``."""

    params = _CONFIG_PARAMS
    param_names = _CONFIG_NAMES
    timeout = 300

    @suite.skipped_when_not_drivable
    def setup_cache(self):
        subject = suite.subject()
        if subject.lacks("bucketer"):
            return {"skipped": subject.lacks("bucketer")}
        cases = [c for c in suite.cases() if suite.wanted(suite.case_key(c))]
        by_label = default_excess(subject, cases, specs(steps=suite.tier().steps))
        return {suite.case_key(c): by_label[c.label()] for c in cases}

    def setup(self, table, *key):
        self.figures = _figures_or_skip(f"exact.Frontier{list(key)}", table, key)

    def track_excess_padding(self, *params):
        return _stored(self.figures["excess_padding"], PADDED.significant)


describe(Frontier.track_excess_padding, "exact.Frontier.track_excess_padding")


#: Positions each ladder is summed over: the tier's longest doubling ladder (quick 10, full 12).
LADDER_POSITIONS = suite.tier().ladder_positions


class Ladder:
    """Per config, each ladder as one number plain ASV can judge: its entries summed over the
    tier's positions, the top entry repeated past its end.

    ``exact.Config`` tracks a ladder's size: [1,2,4,8,11] -> [2,3,6,11] is 5 -> 4 buckets, which
    ASV calls an improvement. Summed over the tier's positions, padded with the top entry, the
    same change is 81 -> 88 (quick tier): worse, as ASV flags it, since every position's bucket
    grew or stayed; a bucket added below lowers the sum. An entry moved without changing the sum
    is seen by spyre-bench (compare, report, comment), which reads each ladder itself from the
    run's identity sidecar, where it is stored once. One number per ladder, not one per
    position: 384 numbers a quick-tier commit instead of 3,840 (14 kB). A missing ladder is a
    skip (NaN), never a number: ASV shows a lost ladder as n/a, never as an improvement.
    """

    params = _CONFIG_PARAMS
    param_names = _CONFIG_NAMES
    timeout = 300

    @suite.skipped_when_not_drivable
    def setup_cache(self):
        subject = suite.subject()
        if subject.lacks("bucketer"):
            return {"skipped": subject.lacks("bucketer")}
        table = {}
        for case in suite.cases():
            key = suite.case_key(case)
            if suite.wanted(key):
                figures = config_figures(subject, case)
                table[key] = ({"skipped": figures["skipped"]} if "skipped" in figures
                              else dict(figures["ladders"]))
        return table

    def setup(self, table, *key):
        self.ladders = _figures_or_skip(f"exact.Ladder{list(key)}", table, key)
        self.config = list(key)


def _entry(axis: str):
    def track(self, *params):
        ladder = self.ladders.get(axis)
        if not ladder:
            suite.skip(f"exact.Ladder.track_{axis}{self.config}", f"no {axis} ladder")
        return ladder_sum(ladder, LADDER_POSITIONS)
    return describe(track, f"exact.Ladder.track_{axis}")


for _axis in LADDER_UNITS:
    setattr(Ladder, f"track_{_axis}", _entry(_axis))
del _axis

for _cls, _metrics in ((Config, CONFIG_METRICS), (Workload, WORKLOAD_METRICS)):
    for _name, _metric in _metrics.items():
        if _metric.tracked:
            setattr(_cls, f"track_{_name}", _track(_cls.__name__, _name, _metric.significant))
del _cls, _metrics, _name, _metric
