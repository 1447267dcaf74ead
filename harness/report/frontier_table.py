"""The frontier as people read it: one table per config and workload, then each marked ladder's
distance from the frontier (and, for a PR, the verdict line the comment prints)."""

from __future__ import annotations

from harness.analyze.frontier import Frontier, distance, pr_verdict
from harness.analyze.tradeoff import COSTS
from harness.matrix import CASE_FIELDS, case_label
from harness.metrics import METRICS, format_value, ladder_text
from harness.report.tables import table

#: Marks that name a ladder someone chose (not one the optimiser proposed).
CHOSEN = ("default", "head", "base")
ICONS = {"trade-off": "⚖️", "regression": "🔴", "improvement": "🟢", "change": "🟡"}


def title(f: Frontier) -> str:
    key = f.case.key()
    return (f"{f.axis.name} frontier of {f.subject}: "
            f"{case_label({k: key[k] for k in CASE_FIELDS if k in key})}, workload {f.workload}")


def render(f: Frontier, out) -> None:
    """The table (every point, frontier or dominated), then the marked ladders' lines."""
    unit = {"kv": "blocks", "num_seqs": "sequences", "query": "tokens"}[f.axis.name]
    rows = []
    for p in f.points:
        rows.append([len(p.ladder), ladder_text(p.ladder),
                     "(own)" if p.env is None else p.env, p.graphs,
                     *(format_value(p.costs[m], METRICS[m].unit) for m in COSTS),
                     "dominated" if p.dominated else "frontier", ", ".join(p.marks)])
    caption = (f"ladder: the {f.axis.shown} ladder ({unit}) the subject's code resolves; set by "
               f"{f.axis.env}; graphs: compiled graphs of the config (recorded at warmup plus "
               "reachable keys warmup misses); every figure from the subject's own code")
    out.print(table(title(f), ["buckets", "ladder", f.axis.env, "graphs",
                               *(METRICS[m].label for m in COSTS), "frontier", "marks"], rows,
                    caption=caption + "".join(f"; {n}" for n in f.notes)))
    if f.marked("base") is not None and f.marked("head") is not None:
        change, line = pr_verdict(f)
        out.print(f"{ICONS[change.kind]} {line}", markup=False, highlight=False)
    elif f.marked("default") is not None:
        out.print(f"  {distance(f, f.marked('default'), 'the config')}", markup=False,
                  highlight=False)


def as_json(f: Frontier) -> dict:
    data = f.as_dict()
    if f.marked("base") is not None and f.marked("head") is not None:
        change, line = pr_verdict(f)
        data["verdict"] = {"kind": change.kind, "text": line}
    data["distances"] = {mark: {"excess_padding": f.excess(p), "best": list(f.best_at(
        p.graphs).ladder)} for mark in CHOSEN if (p := f.marked(mark)) is not None}
    return data
