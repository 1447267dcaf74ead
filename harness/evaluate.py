"""Run the exact model over subjects × cases × workloads, as JSON-ready rows.

One place that turns (subject, case[, workload]) into figures, shared by the CLI, the ASV suite and
comparisons. A subject or config that cannot be evaluated becomes a row with ``skipped`` and the
reason, never a crash and never a zero.
"""

from __future__ import annotations

from harness.errors import HarnessError
from harness.matrix import Case
from harness.model import summarize, workload_cost
from harness.subjects.base import Bucketing, Subject
from harness.workloads import WorkloadSpec


def bucketing_or_reason(subject: Subject, case: Case) -> Bucketing | str:
    try:
        return subject.bucketing(case.config, case.overrides)
    except HarnessError as exc:
        return str(exc)


def config_figures(subject: Subject, case: Case) -> dict:
    b = bucketing_or_reason(subject, case)
    if isinstance(b, str):
        return {"skipped": b}
    return summarize(b, case.config).as_dict()


def workload_figures(subject: Subject, case: Case, specs: list[WorkloadSpec],
                     per_step: bool = False) -> dict[str, dict]:
    """Figures per workload name for one case (the bucketing is computed once)."""
    b = bucketing_or_reason(subject, case)
    out = {}
    for spec in specs:
        if isinstance(b, str):
            out[spec.name] = {"skipped": b}
            continue
        try:
            out[spec.name] = workload_cost(b, case.config, spec.build(case.config)).as_dict(per_step)
        except HarnessError as exc:
            out[spec.name] = {"skipped": str(exc)}
    return out


def field(figures: dict, name: str):
    """A figure by dotted name (``ladders.kv``), or None where absent."""
    for part in name.split("."):
        if not isinstance(figures, dict):
            return None
        figures = figures.get(part)
    return figures


def changed(base: dict, head: dict, fields) -> list[str]:
    """Fields whose exact values differ between two figure dicts (skips compare as changed)."""
    if "skipped" in base or "skipped" in head:
        return [] if base.get("skipped") == head.get("skipped") else ["skipped"]
    return [f for f in fields if field(base, f) != field(head, f)]
