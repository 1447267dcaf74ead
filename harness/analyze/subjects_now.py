"""Compare two subjects computed now: exact figures and ladders, config by config.

No stored results needed: both sides are evaluated here (harness.evaluate), so a PR's head can be
compared with its base before anything is measured or stored. Kernel checks and timings of the
same two subjects are measured apart (harness.measure.interleaved) and added to the same Comparison.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.analyze.comparison import (
    LADDER_AXES,
    Comparison,
    LadderChange,
    Side,
    TimingChange,
    add_timings,
    knob_changes,
    number_or_none,
)
from harness.evaluate import config_figures, prefetch, workload_figures
from harness.matrix import CASE_FIELDS, Case, case_label
from harness.metrics import CONFIG_METRICS, WORKLOAD_METRICS
from harness.subjects.base import Subject
from harness.workloads import WorkloadSpec

if TYPE_CHECKING:  # harness.measure imports torch; exact comparisons never need it
    from harness.measure.host_run import HostRun
    from harness.measure.interleaved import KernelRun


def _exact_rows(figures: dict, names) -> dict[str, float | None]:
    return {name: number_or_none(figures.get(name)) for name in names}


def compare_figures(comparison: Comparison, params: dict, base: dict, head: dict,
                    metrics) -> None:
    """Add the exact and ladder differences of one config (or config × workload) pair."""
    what = case_label(params)
    if "skipped" in head and "skipped" not in base:
        comparison.lost.append((what, head["skipped"]))
        return
    for side, fig in (("base", base), ("head", head)):
        if "skipped" in fig:
            comparison.skipped.append((f"{what} ({side})", fig["skipped"]))
    if "skipped" in base or "skipped" in head:
        return
    b, h = _exact_rows(base, metrics), _exact_rows(head, metrics)
    for name in metrics:
        comparison.add_exact(name, params, b[name], h[name])
    if "ladders" in base:
        for axis in LADDER_AXES:
            lb, lh = base["ladders"].get(axis), head["ladders"].get(axis)
            if lb != lh:
                comparison.ladders.append(LadderChange(params, axis, lb, lh))


def changed_fields(base: dict, head: dict, fields) -> list[str]:
    """Which of ``fields`` (figure names, ``ladders.<axis>``) differ between two figure dicts.

    The tables' "changed" column, found by :func:`compare_figures` itself so a table and the
    comparison never disagree. A skip on either side is ``["skipped"]``, unless both sides
    skipped for the same reason.
    """
    if "skipped" in base or "skipped" in head:
        return [] if base.get("skipped") == head.get("skipped") else ["skipped"]
    found = Comparison(Side("base"), Side("head"))
    compare_figures(found, {}, base, head, [f for f in fields if not f.startswith("ladders.")])
    differ = {e.metric for e in found.exact} | {f"ladders.{ld.axis}" for ld in found.ladders}
    return [f for f in fields if f in differ]


def compare_subjects(base: Subject, head: Subject, cases: list[Case],
                     workloads: list[WorkloadSpec], frontier: bool = True,
                     **kwargs) -> Comparison:
    """Exact comparison of two subjects computed now (no stored results needed); with
    ``frontier``, a changed default kv ladder is placed on the head's frontier too."""
    comparison = Comparison(Side(base.spec, _commit(base), sources=base.sources),
                            Side(head.spec, _commit(head), sources=head.sources), **kwargs)
    comparison.knobs = knob_changes(base.knobs, head.knobs)
    prefetch([base, head], cases, workloads)   # over the cores; the loop below reads the memo
    for case in cases:
        key = {k: case.key()[k] for k in CASE_FIELDS if k in case.key()}
        comparison.configs.append(key)
        comparison.envs[case.overrides_name] = case.overrides.as_env()
        fb, fh = config_figures(base, case), config_figures(head, case)
        compare_figures(comparison, key, fb, fh, list(CONFIG_METRICS))
        wb = workload_figures(base, case, workloads)
        wh = workload_figures(head, case, workloads)
        said = code_said(fb, wb), code_said(fh, wh)
        # a side whose code stopped before it could warn said nothing we know of: not a change
        if any(said) and not any(_stopped(f, w) for f, w in ((fb, wb), (fh, wh))):
            comparison.notes.append((key, *said))
        for name in wb:
            compare_figures(comparison, {**key, "workload": name}, wb[name], wh[name],
                            list(WORKLOAD_METRICS))
    if frontier:
        from harness.analyze.frontier_compare import placements
        comparison.frontier = placements(base, head, comparison, cases, workloads)
    return comparison


def code_said(config: dict, workloads: dict | None = None) -> list[str]:
    """What the commit's code warned for one config, once each: its bucketer's notes (config
    figures) and its builder's (each workload's, the same load for all of them)."""
    said = list(config.get("notes", ()))
    for fig in (workloads or {}).values():
        said += fig.get("notes", ())
    return list(dict.fromkeys(said))


def _stopped(config: dict, workloads: dict) -> bool:
    """A side skipped at this config (its code failed or cannot run it), so what it warned is
    unknown."""
    return "skipped" in config or any("skipped" in fig for fig in workloads.values())


def _commit(subject: Subject) -> str | None:
    identity = subject.identity
    return identity if len(identity) == 40 and all(c in "0123456789abcdef" for c in identity) \
        else None


#: Why ``compare --timings`` timed nothing between two commits of one code (harness.worker.same_code).
SAME_CODE = ("timings not measured: base and head are different commits that run the same code "
             "(one attention closure by content: a change to docs, tests or modules no load "
             "reaches), so every timing between them is an A/A; the oracle checked the head's "
             "kernels (the base's would compute the same outputs)")


def add_kernel_run(comparison: Comparison, run: KernelRun) -> None:
    """Add what harness.measure.interleaved found (oracle, mismatches, timings) and judge it."""
    comparison.mismatches += run.mismatches
    comparison.lost += run.lost
    comparison.skipped += run.skipped
    comparison.oracle = run.oracle
    comparison.guard = list(run.guards)
    comparison.base.device = comparison.head.device = run.device
    if not run.timed:
        return
    if run.factor is not None:   # the sampler decided for its own factor: say that one
        comparison.factor = run.factor
    add_timings(comparison, run.timings)
    comparison.timings_measured = True
    comparison.timing_notes.append("base and head measured interleaved on this machine (ABBA "
                                   "rounds until the sequential test decided, or its bound)")
    comparison.timing_notes += run.notes
    _busy_host(comparison, run.busiest_cores, "")


def add_host_run(comparison: Comparison, run: HostRun) -> None:
    """Add what harness.measure.host_run found (host time of build() and forward(), each with
    its sampler's verdict and, for build(), each side's profile)."""
    comparison.lost += run.lost
    comparison.skipped += run.skipped
    if run.factor is not None:
        comparison.factor = run.factor
    for benchmark, params, unit, base, head, verdict, profile in run.timings:
        comparison.timings.append(TimingChange(benchmark, params, unit, list(base), list(head),
                                               verdict, profile))
    comparison.timings_measured = True
    comparison.timing_notes += run.notes
    _busy_host(comparison, run.busiest_cores, " host probes")


def _busy_host(comparison: Comparison, cores: float, what: str) -> None:
    """Verdicts taken while other processes used more than BUSY_HOST_CORES are advisory; said
    once per comparison."""
    from harness.measure.timing import BUSY_HOST_CORES  # torch is loaded once a run exists
    if cores > BUSY_HOST_CORES and not comparison.timing_advisory:
        comparison.timing_advisory = True
        comparison.timing_notes.append(
            f"busy host: other processes used {cores:.2f} cores while timing{what}; verdicts "
            "are advisory (rerun on a quiet machine)")
