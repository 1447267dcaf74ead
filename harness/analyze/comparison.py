"""What a comparison of two sides holds, and the plain document it becomes.

Shared by both ways of comparing (harness.analyze.subjects_now: two subjects computed now;
harness.analyze.stored: two commits' stored results), so the report renders one shape. Exact
figures are compared exactly: any difference is kept, in both directions, because an unexpected
win is as suspicious as a loss. Timings are judged by harness.analyze.stats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from harness.analyze.document import DOCUMENT_SCHEMA
from harness.analyze.stats import DEFAULT_ALPHA, DEFAULT_FACTOR, Verdict, judge
from harness.registry import unit_of

LADDER_AXES = ("kv", "query", "num_blocks", "num_seqs", "batched_num_seqs", "batched_num_blocks")


@dataclass(frozen=True)
class ExactChange:
    metric: str
    params: dict
    base: float | None
    head: float | None

    @property
    def unit(self) -> str:
        return unit_of(self.metric)

    @property
    def direction(self) -> str:
        """'worse' when the figure grew (every metric is lower-is-better), else 'better'."""
        if self.base is None or self.head is None:
            return "appeared" if self.base is None else "vanished"
        return "worse" if self.head > self.base else "better"


@dataclass(frozen=True)
class LadderChange:
    params: dict
    axis: str
    base: list | None
    head: list | None


@dataclass(frozen=True)
class KnobChange:
    """A knob of the commits' ``envs.py`` registries whose default differs between the sides
    (None: the side does not declare it): what each side measures when no override names it."""

    knob: str
    base: str | None
    head: str | None
    #: "default" (both declare it), "added" (only the head does) or "removed"
    change: str = "default"


def _unset(value) -> str:
    return "unset" if value is None else value


def default_lines(knobs: list[dict]) -> list[str]:
    """A comparison document's changed knob defaults in words, one line each: what each side
    runs when no override names the knob, said before anything else."""
    return [f"default changed: {k['knob']} {_unset(k['base'])} → {_unset(k['head'])}"
            for k in knobs if k["change"] == "default"]


def added_removed_lines(knobs: list[dict]) -> list[str]:
    """The knobs the head's registry added and removed, a line for each kind."""
    lines = []
    for change, side, said in (("added", "head", "default"), ("removed", "base", "default was")):
        found = [f"{k['knob']} ({said} {_unset(k[side])})" for k in knobs
                 if k["change"] == change]
        if found:
            lines.append(f"knobs {change}: {', '.join(found)}")
    return lines


def knob_changes(base: dict | None, head: dict | None) -> list[KnobChange]:
    """What changed between two registries (name -> Knob; None: no registry to read): every
    default that differs, then every knob added or removed. Nothing where a side has none."""
    if base is None or head is None:
        return []
    both = [n for n in head if n in base]
    changed = [KnobChange(n, base[n].default, head[n].default) for n in both
               if base[n].default != head[n].default]
    added = [KnobChange(n, None, head[n].default, "added") for n in head if n not in base]
    removed = [KnobChange(n, base[n].default, None, "removed") for n in base if n not in head]
    return changed + added + removed


@dataclass(frozen=True)
class TimingChange:
    benchmark: str
    params: dict
    unit: str
    base: list[float]
    head: list[float]
    verdict: Verdict
    #: Where each side's time went (host build(): harness.measure.host_profile), or None.
    profile: dict | None = None


@dataclass
class Side:
    """What one side is: the subject or commit, and where it was measured."""

    label: str
    commit: str | None = None
    machine: str | None = None
    device: str | None = None
    env_name: str | None = None
    harness: str | None = None
    #: Content hash of each attention-path module (harness.subjects.source.sources), where known.
    sources: dict[str, str] | None = None


@dataclass
class Comparison:
    base: Side
    head: Side
    #: Every exact pair compared (changed or not), and the changed ones.
    exact_all: list[ExactChange] = field(default_factory=list)
    exact: list[ExactChange] = field(default_factory=list)
    ladders: list[LadderChange] = field(default_factory=list)
    timings: list[TimingChange] = field(default_factory=list)
    #: (what, reason) for anything that could not be compared on one side or both.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: Fingerprint mismatches (machine, device, environment): the timings are not comparable.
    problems: list[str] = field(default_factory=list)
    #: (what, reason): a kernel output the oracle rejected. Never a skip: the head is wrong.
    mismatches: list[tuple[str, str]] = field(default_factory=list)
    #: (what, reason): figures or capabilities the base had and the head lacks.
    lost: list[tuple[str, str]] = field(default_factory=list)
    #: Whether kernel timings were measured at all (a comparison without them must say so).
    timings_measured: bool = False
    #: (probes whose output matched the oracle, probes checked); None when the oracle never ran.
    oracle: tuple[int, int] | None = None
    #: Per side with a compile guard: its violations beside spyre-bench's late compiles
    #: (harness.measure.interleaved.GUARD_FIELDS, with "side" and "workload").
    guard: list[dict] = field(default_factory=list)
    #: What limits the timing verdicts (not interleaved, measured apart, busy host).
    timing_notes: list[str] = field(default_factory=list)
    #: Timing verdicts are advisory: base and head were not measured interleaved.
    timing_advisory: bool = False
    #: Knob defaults (the commits' envs.py) that differ: each side is measured on its own.
    knobs: list[KnobChange] = field(default_factory=list)
    #: What the commits' code said (warnings) while building each config's buckets and builder:
    #: (params, base's notes, head's notes), where either side said something.
    notes: list[tuple[dict, list[str], list[str]]] = field(default_factory=list)
    #: The configs compared (bs, mml, mns, overrides), and each override set's env in full.
    configs: list[dict] = field(default_factory=list)
    envs: dict[str, dict[str, str]] = field(default_factory=dict)
    factor: float = DEFAULT_FACTOR
    alpha: float = DEFAULT_ALPHA
    #: Ladder changes placed on the head's frontier (harness.analyze.frontier_compare).
    frontier: list[dict] = field(default_factory=list)

    @property
    def exact_compared(self) -> int:
        return len(self.exact_all)

    def add_exact(self, metric: str, params: dict, base, head) -> None:
        pair = ExactChange(metric, params, number_or_none(base), number_or_none(head))
        self.exact_all.append(pair)
        if pair.base != pair.head:
            self.exact.append(pair)

    def timing_kinds(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.timings:
            out[t.verdict.kind] = out.get(t.verdict.kind, 0) + 1
        return out


def number_or_none(value):
    """``value``, or None where it is missing or NaN (a gap, never a figure)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def add_timings(comparison: Comparison, rows) -> None:
    """Judge timing rows: (benchmark, params, unit, base samples, head samples[, verdict]); a
    row that brings its verdict (the adaptive sampler's sequential test) keeps it."""
    for benchmark, params, unit, base, head, *given in rows:
        verdict = given[0] if given else judge(base, head, comparison.factor, comparison.alpha)
        comparison.timings.append(TimingChange(benchmark, params, unit, list(base), list(head),
                                               verdict))


def as_document(c: Comparison) -> dict:
    """The comparison as plain JSON data (harness.report.schema describes and validates it).

    This is what crosses from the job that ran PR code to the one that posts: data only, no
    markdown; the poster renders it itself.
    """
    from dataclasses import asdict
    return {
        "schema": DOCUMENT_SCHEMA, "base": asdict(c.base), "head": asdict(c.head),
        "factor": c.factor, "alpha": c.alpha, "exact_compared": c.exact_compared,
        "exact_changed": [{"metric": e.metric, "params": e.params, "base": e.base,
                           "head": e.head} for e in c.exact],
        "ladders": [{"params": ld.params, "axis": ld.axis, "base": ld.base, "head": ld.head}
                    for ld in c.ladders],
        "timings": [{"benchmark": t.benchmark, "params": t.params, "unit": t.unit,
                     "base": t.base, "head": t.head,
                     "verdict": {"kind": t.verdict.kind, "ratio": _finite(t.verdict.ratio),
                                 "ci": [_finite(x) for x in t.verdict.ci],
                                 "p_value": _finite(t.verdict.p_value),
                                 "advice": t.verdict.advice,
                                 **_paired(t.verdict)},
                     **({"profile": t.profile} if t.profile is not None else {})}
                    for t in c.timings],
        "timings_measured": c.timings_measured, "timing_advisory": c.timing_advisory,
        "timing_notes": list(c.timing_notes),
        "oracle": None if c.oracle is None else {"matched": c.oracle[0], "checked": c.oracle[1]},
        "mismatches": [{"what": w, "why": r} for w, r in c.mismatches],
        "lost": [{"what": w, "why": r} for w, r in c.lost],
        "skipped": [{"what": w, "why": r} for w, r in c.skipped], "problems": list(c.problems),
        "configs": c.configs, "envs": {**_named_envs(c), **c.envs}, "frontier": c.frontier,
        "probes": _probes(c),
        # only where there is something: a comparison without keeps the document it always had
        **({"knobs": [{"knob": k.knob, "base": k.base, "head": k.head, "change": k.change}
                      for k in c.knobs]}
           if c.knobs else {}),
        **({"notes": [{"params": p, "base": b, "head": h} for p, b, h in c.notes]}
           if c.notes else {}),
        **({"guard": list(c.guard)} if c.guard else {}),
    }


def _named(c: Comparison, key: str) -> set[str]:
    """The values of param ``key`` among everything compared."""
    items = [*c.exact_all, *c.ladders, *c.timings]
    return {str(i.params[key]) for i in items if i.params.get(key) is not None}


def _named_envs(c: Comparison) -> dict[str, dict[str, str]]:
    """Each named override set compared, as its env in full (stored results keep only the
    name; a reader needs the variables)."""
    from harness.matrix import OVERRIDE_SETS
    return {n: dict(OVERRIDE_SETS[n]) for n in sorted(_named(c, "overrides"))
            if n in OVERRIDE_SETS}


def _probes(c: Comparison) -> dict[str, dict]:
    """Each kernel probe compared: its config, step and env (its figures carry only the name)."""
    from harness.measure.probe_set import describe
    return {n: d for n in sorted(_named(c, "probe")) if (d := describe(n)) is not None}


def _paired(v: Verdict) -> dict:
    """The sampler's part of a verdict (rounds, seconds, why it stopped, decision interval)."""
    if v.method != "paired":
        return {}
    return {"method": v.method, "rounds": v.rounds, "seconds": _finite(v.seconds),
            "stopped": v.stopped,
            "decision_ci": [_finite(x) for x in v.decision_ci] if v.decision_ci else None}


def _finite(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x
