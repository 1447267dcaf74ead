"""Exact figures as ``track_`` benchmarks: deterministic, so any change at all is a real change.

No torch is imported here. Every figure is lower-is-better (ASV's convention) and declared in
``harness.metrics``; the methods are generated from that registry so a new metric needs no code.
"""

from harness import suite
from harness.analyze.frontier_place import default_excess
from harness.evaluate import config_figures, workload_figures
from harness.metrics import CONFIG_METRICS, WORKLOAD_METRICS
from harness.registry import LADDER_UNITS, describe
from harness.workloads import MIXES, buildable, specs

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


def _stored(value):
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT_INT:
        return int(value)
    return value


def _track(cls: str, name: str):
    def track(self, *params):
        return _stored(self.figures[name])
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
        return self.figures["excess_padding"]


describe(Frontier.track_excess_padding, "exact.Frontier.track_excess_padding")


#: Positions of each ladder tracked: the tier's longest doubling ladder (quick 10, full 12); past
#: the last, only its top entry is seen. Two positions fewer than the full tier's in the quick
#: tier are 768 numbers (2.9 kB) fewer per commit.
LADDER_POSITIONS = suite.tier().ladder_positions


class Ladder:
    """Per config, every ladder entry by entry, so plain ASV sees what a count hides.

    ``exact.Config`` tracks a ladder's size: [1,2,4,8,11] -> [2,3,6,11] is 5 -> 4 buckets, which
    ASV calls an improvement. Here each position is a series of its own: the entry at that
    position, or the ladder's top entry past its end (a shorter ladder's missing positions are
    its top bucket, never a gap), so the same change is four entries grown (worse, as ASV flags
    it: a larger bucket pads more) and a change of any entry changes a series. A missing ladder
    is a skip (NaN), never a number: ASV shows a lost ladder as n/a, never as an improvement.
    """

    params = _CONFIG_PARAMS + [list(range(LADDER_POSITIONS))]
    param_names = _CONFIG_NAMES + ["position"]
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
        *config, self.position = key
        self.ladders = _figures_or_skip(f"exact.Ladder{config}", table, tuple(config))
        self.config = config


def _entry(axis: str):
    def track(self, *params):
        ladder = self.ladders.get(axis)
        if not ladder:
            suite.skip(f"exact.Ladder.track_{axis}{self.config}", f"no {axis} ladder")
        return ladder[min(self.position, len(ladder) - 1)]
    return describe(track, f"exact.Ladder.track_{axis}")


for _axis in LADDER_UNITS:
    setattr(Ladder, f"track_{_axis}", _entry(_axis))
del _axis

for _cls, _metrics in ((Config, CONFIG_METRICS), (Workload, WORKLOAD_METRICS)):
    for _name, _metric in _metrics.items():
        if _metric.tracked:
            setattr(_cls, f"track_{_name}", _track(_cls.__name__, _name))
del _cls, _metrics, _name, _metric
