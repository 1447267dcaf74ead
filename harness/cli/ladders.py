"""``spyre-bench ladders``: the bucket ladders of one subject, or two side by side."""

from __future__ import annotations

import argparse
import sys

from harness.analyze.subjects_now import changed_fields, code_said
from harness.cli import options
from harness.errors import SubjectFailed, row_outcome
from harness.evaluate import config_figures, field
from harness.matrix import case_variant
from harness.metrics import CONFIG_METRICS
from harness.report.tables import SAID, cell, console, print_json, said_text, table

AXES = ("kv", "query", "num_blocks", "num_seqs", "batched_num_seqs", "batched_num_blocks")
#: The axes the bucketer alone gives (the batched ones are the builder's and the impl's).
BUCKETER_AXES = frozenset(AXES[:4])
DEFAULT_AXES = ("kv", "num_blocks", "batched_num_seqs", "batched_num_blocks")


def register(sub) -> None:
    p = sub.add_parser(
        "ladders", help="show bucket ladders across a config matrix (one subject, or base vs head)",
        description="Show the bucket ladders a subject's bucketer produces for each config of a "
                    "matrix, with warmup variant counts, reachable and dead keys. With --base and "
                    "--head, show both and mark every changed row.",
        epilog="example: spyre-bench ladders --base reference:pre-810 --head "
               "reference:post-810-topup --block-size 192 --max-model-len 256,2048,32768",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_subjects(p)
    options.add_matrix(p)
    p.add_argument("--axes", default=",".join(DEFAULT_AXES), metavar="AXIS,..",
                   help=f"ladders to show, from {', '.join(AXES)} (default %(default)s)")
    p.add_argument("--changed-only", action="store_true",
                   help="with --base/--head: show only rows that differ")
    options.add_output(p)
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def run(args) -> int:
    subjects = options.subjects(args)
    axes = [a for a in args.axes.split(",") if a]
    unknown = set(axes) - set(AXES)
    if unknown:
        raise options.ConfigError(f"unknown axes {sorted(unknown)}; known: {', '.join(AXES)}")
    # the bucketer's own axes need only the bucketer: shown where the default path's builder
    # cannot be driven too, with the figures it gave
    bucketer_only = set(axes) <= BUCKETER_AXES
    rows = []
    cases = options.cases(args)
    options.check_knobs(subjects, cases)
    for case in cases:
        rows.append({"case": case.key(),
                     "subjects": {s.spec: config_figures(s, case, bucketer_only)
                                  for s in subjects}})
    given = [f for r in rows for f in r["subjects"].values() if "skipped" not in f]
    fields = [f"ladders.{a}" for a in axes] + [m for m in CONFIG_METRICS
                                               if all(m in f for f in given)]
    if len(subjects) == 2:
        for row in rows:
            row["changed"] = changed_fields(*row["subjects"].values(), fields)
    # As in ``cost``: a subject's failure said first, once (status 1); nothing computed
    # raised last (status 2, every figure a skip).
    outcome = row_outcome(f for r in rows for f in r["subjects"].values())
    if isinstance(outcome, SubjectFailed):
        print(f"spyre-bench: FAILED: {outcome}", file=sys.stderr)
    if args.json:
        print_json(rows)
    else:
        _render(rows, subjects, fields, args.changed_only)
    if isinstance(outcome, SubjectFailed):
        return outcome.exit_status   # said once, first
    if outcome is not None:
        raise outcome
    return 0


def _case_cells(case: dict) -> list:
    return [case["block_size"], case["max_model_len"], case["max_num_seqs"], case_variant(case)]


def _render(rows, subjects, fields, changed_only) -> None:
    out = console()
    specs = [s.spec for s in subjects]
    labels = [f.removeprefix("ladders.") if f.startswith("ladders.") else CONFIG_METRICS[f].label
              for f in fields]
    head = ["bs", "mml", "mns", "overrides"]
    if len(specs) == 1:
        said = any(r["subjects"][specs[0]].get("notes") for r in rows)
        body = []
        for r in rows:
            fig = r["subjects"][specs[0]]
            if "skipped" in fig:
                body.append(_case_cells(r["case"]) + [f"skipped: {fig['skipped']}"]
                            + [""] * (len(fields) - 1 + said))
                continue
            body.append(_case_cells(r["case"]) + [cell([field(fig, f)], _unit(f)) for f in fields]
                        + ([said_text(code_said(fig))] if said else []))
        absent = {r["subjects"][specs[0]].get("batched_unavailable") for r in rows} - {None}
        out.print(table(f"ladders of {specs[0]}", head + labels + [SAID] * said, body,
                        caption="; ".join(f"no batched figures: {why}" for why in absent)
                        or None))
        return
    body = []
    for r in rows:
        base, head_fig = (r["subjects"][s] for s in specs)
        if r["changed"] == ["skipped"] or "skipped" in base:
            body.append(_case_cells(r["case"]) + ["-", base.get("skipped", "ok"),
                                                  head_fig.get("skipped", "ok"), "skip"])
            continue
        notes = [code_said(base), code_said(head_fig)]
        if any(notes):
            body.append(_case_cells(r["case"]) + [SAID, *map(said_text, notes),
                                                  "=" if notes[0] == notes[1] else "changed"])
        for f, label in zip(fields, labels):
            is_changed = f in r["changed"]
            if changed_only and not is_changed:
                continue
            values = [field(base, f), field(head_fig, f)]
            body.append(_case_cells(r["case"]) + [
                label, cell(values[:1], _unit(f)), cell(values[1:], _unit(f)),
                cell(values, _unit(f)) if is_changed else "="])
    n_changed = sum(1 for r in rows if r.get("changed"))
    out.print(table(f"ladders: {specs[0]} (base) vs {specs[1]} (head)",
                    head + ["axis", "base", "head", "change"], body,
                    caption=f"{n_changed} of {len(rows)} configs changed"))


def _unit(f: str) -> str:
    return "ladder" if f.startswith("ladders.") else CONFIG_METRICS[f].unit
