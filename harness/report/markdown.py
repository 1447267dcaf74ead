"""The PR comment (and nightly summary) as GitHub markdown, from a Comparison.

Order follows what a reviewer asks first: a one-line verdict, then ladder changes, compile
counts, the per-workload cost figures, timings with intervals; full tables folded in <details>.
Untrusted text (subject specs, branch names, benchmark names, params) goes through ``escape``;
the body starts with the sticky-comment marker and is cut to GitHub's size limit.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median

from harness import __version__
from harness.analyze.compare import Comparison, ExactChange, case_label
from harness.metrics import METRICS, format_value
from harness.publish.body import GITHUB_BODY_LIMIT, fit_body, marker
from harness.report.comparison import (
    change_text, ladder_groups, ladder_text, verdict,
)
from harness.report.markdown_escape import code, escape

#: Compile counts shown per override set and block size (the review's "fewer compiles?").
COMPILE_METRICS = ("batched_num_blocks_distinct", "batched_keys_reachable", "late_compiles")
COST_METRICS = ("iterations_per_layer_mean", "iterations_per_step_mean",
                "padded_slots_per_real_token", "h2d_bytes_per_step", "mask_bytes_per_step")
TOP = 8


def _cells(values) -> str:
    return "| " + " | ".join(str(v) for v in values) + " |"


def _table(header, rows) -> list[str]:
    return [_cells(header), _cells(["---"] * len(header)), *(_cells(r) for r in rows)]


def _details(summary: str, lines: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *lines, "", "</details>", ""]


def _headline(c: Comparison) -> str:
    if c.problems:
        return "⚠️ not comparable"
    if any(t.verdict.kind == "regression" for t in c.timings):
        return "🔴 timing regression"
    if c.exact or c.ladders:
        return "🟡 exact figures changed"
    return "🟢 no change"


def _relative(e: ExactChange) -> float:
    if not e.base or e.head is None:
        return float("inf")
    return abs(e.head - e.base) / abs(e.base)


def _sides(c: Comparison) -> list[str]:
    rows = [["subject", code(c.base.label), code(c.head.label)]]
    if c.base.commit or c.head.commit:
        rows.append(["commit", code((c.base.commit or "-")[:12]), code((c.head.commit or "-")[:12])])
    for what in ("machine", "device", "env_name"):
        b, h = getattr(c.base, what), getattr(c.head, what)
        if b or h:
            rows.append([what.replace("_", " "), escape(b or "-"), escape(h or "-")])
    return _table(["", "base", "head"], rows)


def _ladders(c: Comparison) -> list[str]:
    groups = ladder_groups(c)
    if not groups:
        return ["#### Ladders", "", "No ladder changed in any config.", ""]
    rows = [[escape(g.axis), f"{ladder_text(g.base)} → {ladder_text(g.head)}",
             escape(g.where_text())] for g in groups]
    lines = ["#### Ladder changes", ""]
    lines += _table(["axis", "before → after", "at"], rows[:TOP])
    if len(rows) > TOP:
        lines += ["", *_details(f"all {len(rows)} ladder changes", _table(
            ["axis", "before → after", "at"],
            [[r[0], r[1], escape(g.where_text(limit=10**6))] for r, g in zip(rows, groups)]))]
    return lines + [""]


def _compile_counts(c: Comparison) -> list[str]:
    """Fewer compiles, or not? Per override set and block size, summed over the other axes."""
    lines = ["#### Compile counts", ""]
    for metric in COMPILE_METRICS:
        sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for e in c.exact_all:
            if e.metric == metric and e.base is not None and e.head is not None:
                cell = sums[(e.params.get("overrides"), e.params.get("block_size"))]
                cell[0] += e.base
                cell[1] += e.head
        if not sums:
            continue
        envs = list(dict.fromkeys(k[0] for k in sums))
        sizes = sorted({k[1] for k in sums}, key=lambda v: (v is None, v or 0))
        rows = [[f"env {escape(env)}"] + [_fewer(sums.get((env, bs))) for bs in sizes]
                for env in envs]
        lines += [f"{escape(METRICS[metric].description)} (summed over the other axes):", ""]
        lines += _table(["", *(f"bs {bs}" for bs in sizes)], rows) + [""]
    return lines


def _fewer(cell) -> str:
    if cell is None:
        return "-"
    b, h = cell
    if b == h:
        return f"{b:g} (0 fewer)"
    return f"{b:g} → {h:g} ({b - h:g} fewer)" if h < b else f"{b:g} → {h:g} ({h - b:g} more)"


def _costs(c: Comparison) -> list[str]:
    lines = ["#### Iterations, padding and host-to-device bytes per workload", ""]
    changes = [e for e in c.exact if e.metric in COST_METRICS]
    if not changes:
        return lines + ["Unchanged in every config and workload.", ""]
    by_metric: dict[str, list[ExactChange]] = defaultdict(list)
    for e in changes:
        by_metric[e.metric].append(e)
    rows = []
    for metric in COST_METRICS:
        top = sorted(by_metric.get(metric, []), key=lambda e: -_relative(e))[:TOP]
        rows += [[escape(METRICS[metric].label), escape(case_label(e.params)), change_text(e),
                  e.direction] for e in top]
    lines += _table(["figure", "at", "base → head", ""], rows)
    return lines + [""]


def _timings(c: Comparison) -> list[str]:
    if not c.timings:
        return []
    rows = []
    for t in sorted(c.timings, key=lambda t: (t.verdict.kind != "regression", t.benchmark)):
        v = t.verdict
        rows.append([escape(t.benchmark), escape(case_label(t.params)),
                     format_value(median(t.base), "s"), format_value(median(t.head), "s"),
                     f"{v.ratio:.2f}× ({v.ci[0]:.2f}–{v.ci[1]:.2f})", f"{v.p_value:.2g}",
                     f"**{v.kind}**" if v.changed else v.kind + (
                         f": {escape(v.advice)}" if v.advice else "")])
    lines = [f"#### Timings (median ratio head/base with 95% interval; a change needs ratio past "
             f"{c.factor}× and Mann–Whitney p < {c.alpha})", ""]
    return lines + _table(["benchmark", "params", "base", "head", "ratio", "p", "verdict"],
                          rows) + [""]


def _all_exact(c: Comparison, cap: int = 150) -> list[str]:
    if not c.exact:
        return []
    rows = [[escape(METRICS[e.metric].label if e.metric in METRICS else e.metric),
             escape(case_label(e.params)), change_text(e), e.direction] for e in c.exact[:cap]]
    more = ["", f"… and {len(c.exact) - cap} more: see the full report (`--json`) in the run's "
            "artifacts."] if len(c.exact) > cap else []
    return _details(f"changed exact figures: {len(c.exact)} of {c.exact_compared}",
                    _table(["figure", "at", "base → head", ""], rows) + more)


def render(c: Comparison, harness_commit: str | None = None, key: str = "pr-comment",
           limit: int = GITHUB_BODY_LIMIT, artifact_hint: str | None = None) -> str:
    lines = [marker(key), f"### spyre-bench: {_headline(c)}", "", f"**{escape(verdict(c))}**", ""]
    lines += _sides(c) + [""]
    if c.problems:
        lines += ["> [!WARNING]", *(f"> {escape(p)}" for p in c.problems), ""]
    lines += _ladders(c) + _compile_counts(c) + _costs(c) + _timings(c) + _all_exact(c)
    if c.skipped:
        lines += _details(f"{len(c.skipped)} figures not compared (skipped or missing)",
                          [f"- {escape(what)}: {escape(why)}" for what, why in c.skipped])
    lines += ["---", f"<sub>spyre-bench {__version__}"
              + (f" ({code(harness_commit[:12])})" if harness_commit else "")
              + " · every figure is lower-is-better · exact figures are deterministic and "
                "compared exactly</sub>", ""]
    pointer = artifact_hint or ("The comment was cut to fit GitHub's size limit; the full "
                                "report is in the run's artifacts.")
    return fit_body("\n".join(lines), limit=limit, pointer_text=pointer)
