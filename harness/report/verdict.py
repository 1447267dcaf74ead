"""What a comparison says, decided once: the verdict, per-metric summaries, the detail rows.

Both the terminal table and the markdown PR comment render these; neither decides wording or
order on its own.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from harness.analyze.comparison import Comparison, ExactChange, added_removed_lines, default_lines
from harness.matrix import PARAM_SHORT, case_label
from harness.metrics import METRICS, format_value, ladder_text


@dataclass(frozen=True)
class MetricSummary:
    metric: str
    label: str
    unit: str
    worse: int
    better: int
    #: The change with the largest relative move, for a one-line example.
    largest: ExactChange


def metric_summaries(c: Comparison) -> list[MetricSummary]:
    by_metric: dict[str, list[ExactChange]] = defaultdict(list)
    for e in c.exact:
        by_metric[e.metric].append(e)
    out = []
    for metric in [m for m in METRICS if m in by_metric] + sorted(set(by_metric) - set(METRICS)):
        changes = by_metric[metric]
        worse = sum(1 for e in changes if e.direction == "worse")
        out.append(MetricSummary(metric, METRICS[metric].label if metric in METRICS else metric,
                                 changes[0].unit, worse, len(changes) - worse,
                                 max(changes, key=_relative)))
    return out


def _relative(e: ExactChange) -> float:
    if e.base in (None, 0) or e.head is None:
        return float("inf")
    return abs(e.head - e.base) / abs(e.base)


#: Which ladder changes matter most to a reviewer: what batches land on, then what compiles.
AXIS_ORDER = ("batched_num_blocks", "kv", "num_blocks", "query", "batched_num_seqs", "num_seqs")


@dataclass(frozen=True)
class LadderGroup:
    axis: str
    base: list | None
    head: list | None
    where: list[dict]

    def where_text(self, limit: int = 4) -> str:
        """Where the change happens, as compactly as it is true.

        A full cross product of values reads ``bs 64/128, mml 256/2048 (env none, batched)``;
        otherwise configs are listed (``bs 192, mml 2048 (env none, batched)``), then counted.
        """
        return where_text(self.where, limit)


def where_text(params_list: list[dict], limit: int = 4) -> str:
    fields = [k for k in params_list[0] if k not in ("overrides", "workload")] if params_list else []
    extra = [k for k in ("overrides", "workload") if params_list and k in params_list[0]]
    values = {k: _ordered(p[k] for p in params_list) for k in fields + extra}
    product = 1
    for v in values.values():
        product *= len(v)
    distinct = {tuple(p[k] for k in fields + extra) for p in params_list}
    if len(distinct) == product:
        head = ", ".join(f"{PARAM_SHORT.get(k, k)} {'/'.join(map(str, values[k]))}"
                         for k in fields)
        tail = ", ".join(f"{PARAM_SHORT.get(k, k)} {', '.join(map(str, values[k]))}"
                         for k in extra)
        return f"{head} ({tail})" if tail else head
    groups: dict[str, list[str]] = {}
    for p in params_list:
        key = case_label({k: p[k] for k in fields})
        groups.setdefault(key, []).append(", ".join(str(p[k]) for k in extra))
    parts = [f"{k} ({', '.join(dict.fromkeys(v))})" if extra else k for k, v in groups.items()]
    more = len(parts) - limit
    return "; ".join(parts[:limit]) + (f"; and {more} more configs" if more > 0 else "")


def _ordered(values) -> list:
    """Numbers ascending, other values in the order first seen."""
    seen = list(dict.fromkeys(values))
    if all(isinstance(v, (int, float)) for v in seen):
        return sorted(seen)
    return seen


def ladder_groups(c: Comparison) -> list[LadderGroup]:
    """Ladder changes grouped by (axis, before, after), most important axis first."""
    groups: dict[tuple, list[dict]] = {}
    for change in c.ladders:
        key = (change.axis, tuple(change.base or ()) if change.base is not None else None,
               tuple(change.head or ()) if change.head is not None else None)
        groups.setdefault(key, []).append(change.params)
    rank = {a: i for i, a in enumerate(AXIS_ORDER)}
    ordered = sorted(groups.items(), key=lambda kv: (rank.get(kv[0][0], 99), -len(kv[1])))
    return [LadderGroup(axis, None if b is None else list(b), None if h is None else list(h), w)
            for (axis, b, h), w in ordered]


def change_text(e: ExactChange) -> str:
    return f"{format_value(e.base, e.unit)} → {format_value(e.head, e.unit)}"


#: What can make the exit code 1 (``--fail-on``); wrong kernels and lost figures come first.
#: ``regression``: a timing regression, or exact figures that only got worse (a trade-off is
#: not one); ``variants``: a ladder change after which a config compiles more graphs.
FAIL_ON = ("wrong", "lost", "exact", "regression", "variants", "incomparable")


def nothing_compared(doc: dict) -> str | None:
    """Why nothing was compared (one line), or None when something was: no exact pair, no
    timing and no oracle verdict is never a pass."""
    if doc["exact_compared"] or doc["timings"] or doc["mismatches"]:
        return None
    reasons = [s["why"] for s in doc["skipped"]]
    first = f"; first reason: {reasons[0]}" if reasons else ""
    return (f"nothing compared: {len(reasons):,} figures skipped and none measured on both "
            f"sides{first}")


def exit_code(doc: dict, fail_on: set[str]) -> int:
    """0 nothing to flag; 1 a flagged finding (see --fail-on); 2 nothing compared at all, or
    sides that are not comparable (their input: the exit-status contract of harness.errors,
    where 3 is an interrupt).

    ``doc`` is the comparison document; with an expected-changes file only unacknowledged exact
    changes count (harness.analyze.expected).
    """
    if "wrong" in fail_on and doc["mismatches"]:
        return 1
    if "lost" in fail_on and doc["lost"]:
        return 1
    if nothing_compared(doc):
        return 2
    if doc["problems"] and "incomparable" in fail_on:
        return 2
    return 1 if flagged(doc, fail_on) else 0


def flagged(doc: dict, fail_on: set[str]) -> list[str]:
    """What ``fail_on`` flags in ``doc``, each said in a few words (exit status 1 when any)."""
    from harness.analyze.expected import unacknowledged
    from harness.report.findings import exact_regressions, more_graphs
    timed = sum(t["verdict"]["kind"] == "regression" for t in doc["timings"])
    counts = [("wrong", len(doc["mismatches"]), "wrong kernel output(s)"),
              ("lost", len(doc["lost"]), "lost figure(s)"),
              ("exact", unacknowledged(doc), "exact change(s)"),
              ("regression", timed, "timing regression(s)"),
              ("regression", exact_regressions(doc), "exact regression(s)"),
              ("variants", more_graphs(doc), "ladder change(s) compiling more graphs")]
    return [f"{n} {what}" for flag, n, what in counts if flag in fail_on and n]


def render_findings(doc: dict, out) -> None:
    """Verdict, truth line and ranked findings: what every verdict path prints first."""
    from harness.report.findings import findings, headline, status
    found = findings(doc)
    out.print(headline(doc, found), markup=False)
    out.print(status(doc), markup=False)
    for line in default_lines(doc.get("knobs", [])):   # each side measured on its own default
        out.print(f"⚙ {line}", markup=False)
    numbered = [f for f in found if f.kind != "info"]
    for i, f in enumerate(numbered, 1):
        out.print(f"{i:>2}. {f.icon} {f.text}", markup=False)
    for f in found:
        if f.kind == "info":
            out.print(f"    {f.icon} {f.text}", markup=False)
    for line in added_removed_lines(doc.get("knobs", [])):
        out.print(f"    ⚙ {line}", markup=False)
    notes = list(doc["problems"]) + (doc["timing_notes"] if doc["timing_advisory"]
                                     or not doc["timings_measured"] else [])
    for n in notes:
        out.print(f"  ⚠ {n}", markup=False)


def render_terminal(c: Comparison, out, full: bool = False, limit: int = 20,
                    doc: dict | None = None) -> None:
    """Findings first (from ``doc``, the comparison's document), then the tables."""
    from harness.analyze.comparison import as_document
    from harness.report.tables import said_text, table
    out.print(f"{c.base.label} (base) → {c.head.label} (head)", markup=False)
    render_findings(doc if doc is not None else as_document(c), out)
    groups = ladder_groups(c)
    if groups:
        rows = [[g.axis, f"{ladder_text(g.base)} → {ladder_text(g.head)}",
                 g.where_text(limit=10**6 if full else 4)]
                for g in groups[: None if full else limit]]
        out.print(table(f"ladder changes ({len(c.ladders)} in {len(groups)} groups)",
                        ["axis", "base → head", "at"], rows,
                        caption=None if full or len(groups) <= limit
                        else f"first {limit}; --full for all"))
    if c.notes:
        rows = [[case_label(params), said_text(b) if b == h else
                 f"base: {said_text(b)} | head: {said_text(h)}"]
                for params, b, h in c.notes[: None if full else limit]]
        out.print(table("what the code said (warnings while building buckets and builder)",
                        ["at", "warnings"], rows,
                        caption=None if full or len(c.notes) <= limit
                        else f"first {limit} of {len(c.notes)}; --full for all"))
    summaries = metric_summaries(c)
    if summaries:
        rows = [[s.label, s.unit, s.worse, s.better, case_label(s.largest.params),
                 change_text(s.largest)] for s in summaries]
        out.print(table("exact changes by metric (every metric is lower-is-better)",
                        ["metric", "unit", "worse", "better", "largest change at", "base → head"],
                        rows))
    if c.timings:
        rows = [[t.benchmark, case_label(t.params), format_value(_median(t.base), "s"),
                 format_value(_median(t.head), "s"), f"{t.verdict.ratio:.2f}×",
                 f"{t.verdict.ci[0]:.2f}–{t.verdict.ci[1]:.2f}", f"{t.verdict.p_value:.2g}",
                 t.verdict.kind + (f" ({t.verdict.advice})" if t.verdict.advice else "")]
                for t in c.timings]
        out.print(table(f"timings (factor {c.factor}, alpha {c.alpha})",
                        ["benchmark", "params", "base median", "head median", "ratio",
                         "95% CI", "p", "verdict"], rows))
    if c.skipped:
        out.print(f"{len(c.skipped)} items not compared (skipped or missing on one side), e.g. "
                  f"{c.skipped[0][0]}: {c.skipped[0][1]}", markup=False)


def _median(samples):
    from statistics import median
    return median(samples) if samples else None
