"""Compare two sides (subjects measured now, or commits in stored history).

Exact figures are compared exactly: any difference is reported, in both directions, because an
unexpected win is as suspicious as a loss. Ladders are compared per config and axis. Timings are
judged by harness.analyze.stats. Which machine, device and environment produced each side is
checked: numbers from different machines are not comparable.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from harness.analyze.document import DOCUMENT_SCHEMA
from harness.analyze.stats import DEFAULT_ALPHA, DEFAULT_FACTOR, Verdict, judge
from harness.errors import HarnessError
from harness.evaluate import config_figures, workload_figures
from harness.matrix import Case
from harness.metrics import CONFIG_METRICS, WORKLOAD_METRICS
from harness.registry import is_exact, is_timed, lookup, unit_of
from harness.store.history import load_identity
from harness.store.identity import config_key
from harness.store.identity import read as read_identity
from harness.subjects.base import Subject
from harness.workloads import WorkloadSpec

LADDER_AXES = ("kv", "query", "num_blocks", "num_seqs", "batched_num_seqs", "batched_num_blocks")
CASE_FIELDS = ("block_size", "max_model_len", "max_num_seqs", "overrides", "workload")
_SHORT = {"block_size": "bs", "max_model_len": "mml", "max_num_seqs": "mns", "overrides": "env",
          "workload": "workload"}


def case_label(params: dict) -> str:
    """``bs 192, mml 2048, mns 32, env batched`` (+ workload), in a stable field order."""
    parts = [f"{_SHORT[k]} {params[k]}" for k in CASE_FIELDS if k in params]
    parts += [f"{k} {v}" for k, v in sorted(params.items()) if k not in _SHORT]
    return ", ".join(parts)


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
class TimingChange:
    benchmark: str
    params: dict
    unit: str
    base: list[float]
    head: list[float]
    verdict: Verdict


@dataclass
class Side:
    """What one side is: the subject or commit, and where it was measured."""

    label: str
    commit: str | None = None
    machine: str | None = None
    device: str | None = None
    env_name: str | None = None
    harness: str | None = None


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
    #: What limits the timing verdicts (not interleaved, measured apart, busy host).
    timing_notes: list[str] = field(default_factory=list)
    #: Timing verdicts are advisory: base and head were not measured interleaved.
    timing_advisory: bool = False
    #: The configs compared (bs, mml, mns, overrides), and each override set's env in full.
    configs: list[dict] = field(default_factory=list)
    envs: dict[str, dict[str, str]] = field(default_factory=dict)
    factor: float = DEFAULT_FACTOR
    alpha: float = DEFAULT_ALPHA

    @property
    def exact_compared(self) -> int:
        return len(self.exact_all)

    def add_exact(self, metric: str, params: dict, base, head) -> None:
        pair = ExactChange(metric, params, _number(base), _number(head))
        self.exact_all.append(pair)
        if pair.base != pair.head:
            self.exact.append(pair)

    def timing_kinds(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.timings:
            out[t.verdict.kind] = out.get(t.verdict.kind, 0) + 1
        return out


def _number(value):
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _exact_rows(figures: dict, names) -> dict[str, float | None]:
    return {name: _number(figures.get(name)) for name in names}


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


def compare_subjects(base: Subject, head: Subject, cases: list[Case],
                     workloads: list[WorkloadSpec], **kwargs) -> Comparison:
    """Exact comparison of two subjects computed now (no stored results needed)."""
    comparison = Comparison(Side(base.spec, _commit(base)), Side(head.spec, _commit(head)),
                            **kwargs)
    for case in cases:
        key = {k: case.key()[k] for k in CASE_FIELDS if k in case.key()}
        comparison.configs.append(key)
        comparison.envs[case.overrides_name] = case.overrides.as_env()
        compare_figures(comparison, key, config_figures(base, case), config_figures(head, case),
                        list(CONFIG_METRICS))
        wb = workload_figures(base, case, workloads)
        wh = workload_figures(head, case, workloads)
        for name in wb:
            compare_figures(comparison, {**key, "workload": name}, wb[name], wh[name],
                            list(WORKLOAD_METRICS))
    return comparison


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
                                 "advice": t.verdict.advice}} for t in c.timings],
        "timings_measured": c.timings_measured, "timing_advisory": c.timing_advisory,
        "timing_notes": list(c.timing_notes),
        "oracle": None if c.oracle is None else {"matched": c.oracle[0], "checked": c.oracle[1]},
        "mismatches": [{"what": w, "why": r} for w, r in c.mismatches],
        "lost": [{"what": w, "why": r} for w, r in c.lost],
        "skipped": [{"what": w, "why": r} for w, r in c.skipped], "problems": list(c.problems),
        "configs": c.configs, "envs": c.envs,
    }


def _finite(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def _commit(subject: Subject) -> str | None:
    identity = subject.identity
    return identity if len(identity) == 40 and all(c in "0123456789abcdef" for c in identity) \
        else None


def add_timings(comparison: Comparison, rows) -> None:
    """Judge timing rows: (benchmark, params, unit, base samples, head samples)."""
    for benchmark, params, unit, base, head in rows:
        verdict = judge(base, head, comparison.factor, comparison.alpha)
        comparison.timings.append(TimingChange(benchmark, params, unit, list(base), list(head),
                                               verdict))


# -- stored history ----------------------------------------------------------------------------

def _commit_rows(frame, prefix: str):
    commits = sorted({c for c in frame["commit"].unique() if c.startswith(prefix)})
    if not commits:
        raise HarnessError(f"no stored results for commit {prefix!r}")
    if len(commits) > 1:
        raise HarnessError(f"commit prefix {prefix!r} is ambiguous: {', '.join(c[:12] for c in commits)}")
    return frame[frame["commit"] == commits[0]]


def _pick_series(rows, machine: str | None, env_name: str | None):
    if machine:
        rows = rows[rows["machine"] == machine]
    if env_name:
        rows = rows[rows["env_name"] == env_name]
    return rows


def _side(rows, label: str) -> Side:
    first = rows.iloc[0]
    identity = load_identity(first["file"])
    return Side(identity.get("label") or label, first["commit"], first["machine"],
                identity.get("device"), first["env_name"], identity.get("harness_commit"))


def compare_stored(frame, base: str, head: str, machine: str | None = None,
                   env_name: str | None = None, allow_cross_machine: bool = False,
                   **kwargs) -> Comparison:
    """Compare two commits' stored results (one machine and environment per side)."""
    b_rows = _pick_series(_commit_rows(frame, base), machine, env_name)
    h_rows = _pick_series(_commit_rows(frame, head), machine, env_name)
    b_series = set(zip(b_rows["machine"], b_rows["env_name"]))
    h_series = set(zip(h_rows["machine"], h_rows["env_name"]))
    if not b_series or not h_series:
        raise HarnessError(f"no stored results for {base if not b_series else head} on "
                           f"machine={machine or 'any'} env={env_name or 'any'}")
    shared = b_series & h_series
    if len(shared) > 1:
        raise HarnessError("both commits were measured on several machines/environments "
                           f"({', '.join(sorted(f'{m}/{e}' for m, e in shared))}): pick one with "
                           "--machine/--env-name")
    pick_b, pick_h = (next(iter(shared)),) * 2 if shared else (min(b_series), min(h_series))
    b_rows = b_rows[(b_rows["machine"] == pick_b[0]) & (b_rows["env_name"] == pick_b[1])]
    h_rows = h_rows[(h_rows["machine"] == pick_h[0]) & (h_rows["env_name"] == pick_h[1])]
    comparison = Comparison(_side(b_rows, base), _side(h_rows, head), **kwargs)
    _check_fingerprints(comparison)

    _compare_exact_rows(comparison, b_rows, h_rows)
    seen = {json.dumps({k: v for k, v in e.params.items() if k != "workload"}, sort_keys=True)
            for e in comparison.exact_all}
    comparison.configs = [json.loads(k) for k in sorted(seen)]
    _compare_stored_ladders(comparison, b_rows, h_rows)
    timing_rows = _paired_timings(b_rows, h_rows)
    comparison.timings_measured = bool(timing_rows)
    if timing_rows:
        comparison.timing_advisory = True
        comparison.timing_notes += stored_timing_notes(_timed_span(b_rows), _timed_span(h_rows))
    if comparison.problems and not allow_cross_machine:
        comparison.skipped += [(f"{bench} {case_label(params)}", "timings from different "
                                "machines/devices are not comparable")
                               for bench, params, *_ in timing_rows]
    else:
        add_timings(comparison, timing_rows)
    return comparison


def _timed_span(rows) -> tuple[float, float] | None:
    """(first start, last end) in seconds of a side's timed rows, from the history frame.

    The one place stored compare reads when a side was measured (``started_at``/``duration``,
    ASV's milliseconds and seconds), so a change of the store's layout touches only this.
    """
    timed = rows[rows["benchmark"].map(is_timed)]
    spans = [(float(r["started_at"]) / 1000, float(r["started_at"]) / 1000
              + float(r["duration"] or 0)) for _, r in timed.iterrows()
             if isinstance(r["started_at"], (int, float)) and not math.isnan(r["started_at"])]
    return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None


def stored_timing_notes(base_span, head_span) -> list[str]:
    """Why stored timings are advisory: never interleaved, when they were taken, no load record."""
    notes = ["base and head were not measured interleaved (stored results are timed one side "
             "after the other): timing verdicts are advisory; `spyre-bench compare --base "
             "SPEC --head SPEC --timings` interleaves them"]
    if base_span and head_span:
        apart = abs(head_span[0] - base_span[0])
        notes.append(f"measured {_duration(apart)} apart")
    else:
        notes.append("when each side was measured is not recorded")
    notes.append("host load while measuring was not recorded: a busy host cannot be ruled out")
    return notes


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _check_fingerprints(c: Comparison) -> None:
    for what in ("machine", "device", "env_name"):
        b, h = getattr(c.base, what), getattr(c.head, what)
        if b != h:
            c.problems.append(f"{what} differs: {b} (base) vs {h} (head)")


def _key(row) -> tuple:
    return row["benchmark"], json.dumps(row["params"], sort_keys=True)


def _compare_exact_rows(comparison: Comparison, b_rows, h_rows) -> None:
    exact = lambda rows: {_key(r): r for _, r in rows[rows["benchmark"].map(  # noqa: E731
        is_exact)].iterrows()}
    b, h = exact(b_rows), exact(h_rows)
    for key in sorted(set(b) | set(h)):
        rb, rh = b.get(key), h.get(key)
        row = rb if rb is not None else rh
        params, metric = row["params"], lookup(row["benchmark"]).figure
        statuses = (rb["status"] if rb is not None else "absent",
                    rh["status"] if rh is not None else "absent")
        if statuses != ("ok", "ok"):
            if statuses[0] == "ok":
                comparison.lost.append((f"{metric} {case_label(params)}",
                                        f"head {statuses[1]}"))
            elif statuses[0] != statuses[1]:
                comparison.skipped.append((f"{metric} {case_label(params)}",
                                           f"base {statuses[0]}, head {statuses[1]}"))
            continue
        comparison.add_exact(metric, params, rb["value"], rh["value"])


def _stored_ladders(results_file) -> dict[str, tuple[dict, dict]]:
    identity = read_identity(results_file)
    pairs = identity.ladders_by_config() if identity else []
    return {config_key(config): (config, ladders) for config, ladders in pairs}


def _compare_stored_ladders(comparison: Comparison, b_rows, h_rows) -> None:
    lb = _stored_ladders(b_rows.iloc[0]["file"])
    lh = _stored_ladders(h_rows.iloc[0]["file"])
    for key in sorted(set(lb) & set(lh)):
        params, base = lb[key]
        head = lh[key][1]
        for axis in LADDER_AXES:
            a, b = base.get(axis), head.get(axis)
            if a != b and "skipped" not in base and "skipped" not in head:
                comparison.ladders.append(LadderChange(params, axis, a, b))


def _paired_timings(b_rows, h_rows) -> list:
    timed = lambda rows: {_key(r): r for _, r in rows[rows["benchmark"].map(is_timed)  # noqa: E731
                                                      & (rows["status"] == "ok")].iterrows()}
    b, h = timed(b_rows), timed(h_rows)
    out = []
    for key in sorted(set(b) & set(h)):
        rb, rh = b[key], h[key]
        samples_b = rb["samples"] or [rb["value"]]
        samples_h = rh["samples"] or [rh["value"]]
        out.append((rb["benchmark"], rb["params"], rb["unit"], samples_b, samples_h))
    return out
