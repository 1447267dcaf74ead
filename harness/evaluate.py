"""Subjects × cases × workloads -> exact figures, as JSON-ready rows.

One place that turns (subject, case[, workload]) into figures, shared by the CLI, the ASV suite and
comparisons. Every figure comes through the subject: its bucketing (ladders, warmup records) and
its ``workload_costs`` (the path, buckets, iterations, padding and transfers of each step), which
the reference computes with the pure-Python model and a spyre-inference commit with its own
metadata builder. A subject or config that cannot be evaluated becomes a row with ``skipped`` and
the reason, never a crash, never a zero and never the model standing in for a real commit.
Comparing two subjects' figures is harness.analyze.subjects_now's (one path for every caller).
"""

from __future__ import annotations

from harness.errors import HarnessError, SubjectCrashed, SubjectRaised
from harness.matrix import Case
from harness.model import summarize
from harness.model.summary import bucketer_figures
from harness.subjects.base import Bucketing, Subject
from harness.subjects.timeout import SubjectTimeout
from harness.worker import is_worker
from harness.workloads import WorkloadSpec, buildable


def bucketing_or_reason(subject: Subject, case: Case,
                        bucketer_only: bool = False) -> Bucketing | HarnessError:
    try:
        if bucketer_only:
            return subject.bucketer_bucketing(case.config, case.overrides)
        return subject.bucketing(case.config, case.overrides)
    except SubjectTimeout:
        raise  # a hung subject stops the command: it is not one config's skip
    except HarnessError as exc:
        return exc


def prefetch(subjects: list[Subject], cases: list[Case], specs: list[WorkloadSpec]) -> None:
    """Drive each subject's configs over the cores first (its memo then answers the serial pass
    with the same figures); workloads that do not build are skipped here and said later."""
    prefetch_ahead(subjects, [(c.config, c.overrides, built) for c in cases
                              if (built := buildable(specs, c.config))])


def prefetch_ahead(subjects: list[Subject], ahead: list) -> None:
    """:func:`prefetch` of (config, overrides, built workloads) requests, each its own."""
    for subject in subjects:
        if is_worker(subject):
            try:   # a worker's failure is met again, with its row, by the serial pass
                subject.call("prefetch", pieces=2 * len(ahead) + 1, requests=ahead,
                             what="driving its builder ahead")
            except SubjectCrashed:
                pass
        else:
            subject.prefetch_workloads(ahead)


def unmeasured(exc: HarnessError) -> dict:
    """The row of what could not be measured: why, and whether the subject's own code failed
    (``failed``: a failure of that commit, which every command reports as one)."""
    return {"skipped": str(exc), "failed": True} if isinstance(exc, SubjectRaised) \
        else {"skipped": str(exc)}


def config_figures(subject: Subject, case: Case, bucketer_only: bool = False) -> dict:
    """Per-config figures; ``bucketer_only``: only the bucketer's own ladders are asked for, so
    a commit whose default path's builder cannot be driven still gives them (its row says why
    the rest is absent: ``batched_unavailable``)."""
    if is_worker(subject):
        return _in_worker(subject, "config_figures", 2, case=case, bucketer_only=bucketer_only,
                          what=f"computing its ladders at {case.label()}")
    b = bucketing_or_reason(subject, case, bucketer_only)
    if isinstance(b, HarnessError):
        return unmeasured(b)
    if b.builder_failed is not None:
        return bucketer_figures(b)
    return summarize(b, case.config).as_dict()


def workload_figures(subject: Subject, case: Case, specs: list[WorkloadSpec],
                     per_step: bool = False) -> dict[str, dict]:
    """Figures per workload name for one case (one builder load for all of them)."""
    if is_worker(subject):
        return _in_worker(subject, "workload_figures", 2 + len(specs), case=case, specs=specs,
                          per_step=per_step, what=f"driving its builder at {case.label()}")
    out: dict[str, dict] = {}
    built = []
    for spec in specs:
        try:
            built.append((spec.name, spec.build(case.config)))
        except HarnessError as exc:
            out[spec.name] = {"skipped": str(exc)}
    try:
        costs = subject.workload_costs(case.config, case.overrides, [w for _, w in built])
    except SubjectTimeout:
        raise
    except HarnessError as exc:
        costs = [exc] * len(built)
    for (name, _), cost in zip(built, costs):
        out[name] = (unmeasured(cost) if isinstance(cost, HarnessError)
                     else cost.as_dict(per_step))
    return {spec.name: out[spec.name] for spec in specs}


def _in_worker(subject, op: str, pieces: float, **args) -> dict:
    """Figures computed in the subject's worker; its crash is this row's failure."""
    try:
        return subject.call(op, pieces=pieces, **args)
    except SubjectCrashed as exc:
        if op == "workload_figures":
            return {spec.name: unmeasured(exc) for spec in args["specs"]}
        return unmeasured(exc)


def field(figures: dict, name: str):
    """A figure by dotted name (``ladders.kv``), or None where absent."""
    for part in name.split("."):
        if not isinstance(figures, dict):
            return None
        figures = figures.get(part)
    return figures

