"""A ladder against the best the optimiser finds with at most as many compiled graphs.

Cheaper than a whole frontier (:mod:`harness.analyze.frontier`): per ladder, one rival, the
optimiser's best ladder of the same size for padding (of a smaller size while that one compiles
more graphs), both evaluated by the subject's own code. What ``compare`` says of a PR's two
ladders and what the ASV suite tracks per config (``exact.Frontier``).
"""

from __future__ import annotations

from harness.analyze.frontier import (
    PADDING,
    Point,
    Prepared,
    evaluate_points,
    prepare,
    with_value,
)
from harness.analyze.frontier_opt import AXES
from harness.analyze.tradeoff import COSTS, compiled_graphs
from harness.errors import HarnessError
from harness.evaluate import config_figures
from harness.matrix import Case
from harness.subjects.base import Subject
from harness.subjects.timeout import SubjectTimeout
from harness.workloads import Workload, WorkloadSpec, buildable

#: The name of the workload made of every mix compared, step after step.
EVERY_MIX = "every-mix"


def every_mix(specs: list[WorkloadSpec], case: Case) -> WorkloadSpec | None:
    """The mixes that build at ``case``, as one workload (None when none does): the traffic a
    config's ladder is judged on when no one workload is named."""
    built = buildable(specs, case.config)
    if not built:
        return None
    steps = tuple(step for w in built for step in w.steps)
    origins = tuple(w.origin(i) for w in built for i in range(len(w.steps)))
    names = ", ".join(w.name for w in built)
    return WorkloadSpec(EVERY_MIX, fixed=Workload(EVERY_MIX, f"every mix compared: {names}",
                                                  steps, origins))


def place(subject: Subject, requests: list[tuple[Case, WorkloadSpec, dict]],
          axis_name: str = "kv", keep_errors: bool = False) -> list[dict]:
    """Per request (config, workload, {name: ladder in the shown ladder's units, or None for
    the config's own}): each ladder's figures, the best rival with at most as many graphs, and
    its excess padding over that rival (0 when none pads less). Raises what :func:`prepare`
    raises (bad input, an axis the code has no override for), or with ``keep_errors`` says it
    in that request's entry (``skipped``)."""
    ready = prepare(subject, [(case, spec) for case, spec, _ in requests], axis_name,
                    keep_errors=keep_errors)
    kept = [(p, r) for p, r in zip(ready, requests) if not isinstance(p, HarnessError)]
    placed_ok = iter(_place(subject, [p for p, _ in kept], [r for _, r in kept]))
    return [refused(case, spec, axis_name, p) if isinstance(p, HarnessError)
            else next(placed_ok) for p, (case, spec, _) in zip(ready, requests)]


def refused(case: Case, spec: WorkloadSpec, axis_name: str, exc: HarnessError) -> dict:
    """The entry of a request that could not be placed, and why."""
    return {"params": _params(case), "axis": axis_name, "workload": spec.name,
            "skipped": str(exc)}


def _params(case: Case) -> dict:
    key = case.key()
    return {k: key[k] for k in ("block_size", "max_model_len", "max_num_seqs", "overrides")}


def _place(subject: Subject, prepared: list[Prepared], requests: list) -> list[dict]:
    notes: list[str] = []
    named = [r[2] for r in requests]
    own = [{name: tuple(p.default["ladders"][p.axis.shown] or ()) if ladder is None
            else tuple(ladder) for name, ladder in n.items()} for p, n in zip(prepared, named)]
    first = []
    for p, n, o in zip(prepared, named, own):
        want: dict[str | None, list[str]] = {}
        for name in n:
            want.setdefault(None if n[name] is None else p.value(o[name]), []).append(name)
        first.append(want)
    placed = [{name: next((pt for pt in pts if name in pt.marks), None) for name in n}
              for pts, n in zip(evaluate_points(subject, list(zip(prepared, first)), notes), named)]
    proposals = [p.best(range(1, max(map(len, o.values()), default=1) + 1))
                 for p, o in zip(prepared, own)]
    # each ladder's rival: the optimiser's best of its size, else of one size less, ... the
    # first whose compiled graphs (its bucketing alone, no step driven) are no more than the
    # ladder's; then every rival's workload is driven once, all together
    batch, asked = [], []
    for i, p in enumerate(prepared):
        want: dict[str | None, list[str]] = {}
        for name, point in placed[i].items():
            value = None if point is None else _rival(subject, p, proposals[i],
                                                      len(own[i][name]), point.graphs)
            if value is not None and value != p.value(own[i][name]):   # else its own best
                want.setdefault(value, []).append(name)
                asked.append((i, name))
        if want:
            batch.append((p, want))
    found = dict(zip((id(p) for p, _ in batch), evaluate_points(subject, batch, notes)))
    rivals: list[dict[str, Point | None]] = [dict.fromkeys(n) for n in named]
    for i, name in asked:
        rivals[i][name] = next((pt for pt in found[id(prepared[i])] if name in pt.marks), None)
    return [_entry(p, pl, rv, notes) for p, pl, rv in zip(prepared, placed, rivals)]


def _padding_best(proposals: dict, size: int) -> tuple[int, ...] | None:
    return next((q.ladder for q in proposals.get(size, []) if q.objective == "padding"), None)


def _rival(subject: Subject, p: Prepared, proposals: dict, size: int, graphs: int) -> str | None:
    """The env value of the largest padding-best ladder of at most ``size`` buckets whose
    compiled graphs, read from the subject's bucketing, are at most ``graphs`` (None: none)."""
    for k in range(size, 0, -1):
        ladder = _padding_best(proposals, k)
        if ladder is None:
            continue
        figures = config_figures(subject, with_value(p.case, p.axis, p.value(ladder)))
        if "skipped" not in figures and compiled_graphs(figures) <= graphs:
            return p.value(ladder)
    return None


def _entry(p: Prepared, placed: dict[str, Point | None], rivals: dict[str, Point | None],
           notes: list[str]) -> dict:
    out = {"params": _params(p.case), "axis": p.axis.name, "ladder": p.axis.shown,
           "workload": p.spec.name, "sides": {}}
    for name, point in placed.items():
        if point is None:
            out["sides"][name] = None
            out["skipped"] = "; ".join(notes) or f"the {name} ladder could not be evaluated"
            continue
        rival = rivals[name]
        best = point if rival is None or rival.costs[PADDING] >= point.costs[PADDING] else rival
        out["sides"][name] = {
            "ladder": list(point.ladder), "graphs": point.graphs,
            **{m: point.costs[m] for m in COSTS},
            "excess_padding": point.costs[PADDING] / best.costs[PADDING] - 1
            if best.costs[PADDING] else 0.0,
            "best": {"ladder": list(best.ladder), "graphs": best.graphs,
                     PADDING: best.costs[PADDING]}}
    return out


def default_excess(subject: Subject, cases: list[Case], mixes: list[WorkloadSpec]) -> dict:
    """Per case (by :meth:`Case.label`): ``{"excess_padding": percent}`` of the config's own kv
    ladder on every mix that builds there, or ``{"skipped": why}`` (an env override sets the
    ladder there; the code has no kv override; no mix builds)."""
    out: dict[str, dict] = {}
    requests = []
    for case in cases:
        set_by = case.overrides.get(AXES["kv"])
        union = every_mix(mixes, case)
        if set_by is not None:
            out[case.label()] = {"skipped": f"its kv ladder is set by {AXES['kv']}={set_by}, "
                                            "not its default"}
        elif union is None:
            out[case.label()] = {"skipped": "no mix builds at this config"}
        else:
            requests.append((case, union, {"default": None}))
    try:
        entries = place(subject, requests, keep_errors=True)
    except SubjectTimeout:
        raise
    except HarnessError as exc:    # the subject's own code failed under a proposed ladder
        entries = [{"skipped": str(exc)}] * len(requests)
    for (case, _, _), entry in zip(requests, entries):
        side = entry["sides"].get("default") if "sides" in entry else None
        out[case.label()] = ({"skipped": entry.get("skipped", "not evaluated")} if side is None
                             else {"excess_padding": 100 * side["excess_padding"]})
    return out
