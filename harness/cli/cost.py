"""``spyre-bench cost``: the exact model's per-step figures for configs × workloads."""

from __future__ import annotations

import argparse
import sys

from harness.analyze.subjects_now import changed_fields, code_said
from harness.cli import options
from harness.errors import SubjectFailed, row_outcome
from harness.evaluate import prefetch, workload_figures
from harness.matrix import case_variant
from harness.metrics import WORKLOAD_METRICS, format_bytes
from harness.progress import Progress
from harness.report.tables import SAID, cell, console, print_json, said_text, table
from harness.subjects import is_embedded

#: About the embedded reference's model only: a commit's figures are its own builder's.
REFERENCE_NOTE = ("per-sequence H2D is the model's assumption (block table + key mask per "
                  "sequence); the batched formulas are spyre-inference's")


def register(sub) -> None:
    p = sub.add_parser(
        "cost", help="exact dispatch and cost figures per config and workload",
        description="Drive every step of each workload through the subject's metadata builder "
                    "(a spyre-inference commit's own; the embedded reference's model of it) and "
                    "report the exact cost: path taken and why, buckets, kernel "
                    "loop iterations per layer and per step, padded KV slots per real token, "
                    "host-to-device bytes and transfers, distinct compile keys, warmup variants "
                    "and late compiles. Batched decode runs only with SPYRE_BATCHED_DECODE=1 "
                    "(--batched), as in spyre-inference.",
        epilog="example: spyre-bench cost --base reference:pre-810 --head reference:post-810-topup"
               " --block-size 64 --max-model-len 2048 --batched "
               "--env SPYRE_ATTN_KV_BUCKETS=128,8192 --step 150,150,150,150",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_subjects(p)
    options.add_matrix(p)
    options.add_workloads(p)
    p.add_argument("--per-step", action="store_true",
                   help="also show every step: path, reason, buckets, iterations, bytes, keys")
    options.add_output(p)
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def run(args) -> int:
    subjects = options.subjects(args)
    cases = options.cases(args)
    options.check_knobs(subjects, cases)
    specs = options.workloads(args)
    rows = []
    prefetch(subjects, cases, specs)   # over the cores, as compare does; the loop reads the memo
    with Progress(len(cases) * len(subjects), "cost", quiet_s=2.0) as advance:
        for case in cases:
            per_subject = {}
            for s in subjects:
                per_subject[s.spec] = workload_figures(s, case, specs, args.per_step)
                advance(f"{s.spec} {case.label()}", "done", 1)
            rows += _rows(case, specs, per_subject, len(subjects))
    outcome = row_outcome(f for r in rows for f in r["subjects"].values())
    if isinstance(outcome, SubjectFailed):   # said first (stderr), once
        print(f"spyre-bench: FAILED: {outcome}", file=sys.stderr)
    if args.json:
        print_json(rows)
    else:
        _render(rows, [s.spec for s in subjects], args.per_step)
    if isinstance(outcome, SubjectFailed):
        return outcome.exit_status   # said once, first
    if outcome is not None:
        raise outcome
    return 0


def _rows(case, specs, per_subject, n_subjects) -> list[dict]:
    rows = []
    for spec in specs:
        figures = {s: per_subject[s][spec.name] for s in per_subject}
        row = {"case": case.key(), "workload": spec.name, "subjects": figures}
        if n_subjects == 2:
            row["changed"] = changed_fields(*figures.values(),
                                            list(WORKLOAD_METRICS) + ["paths"])
        rows.append(row)
    return rows


def _paths(fig: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in fig["paths"].items())


def _render(rows, specs, per_step) -> None:
    out = console()
    metrics = list(WORKLOAD_METRICS.values())
    said = _said_per_case(rows, specs)
    column = any(said.values())
    body, shown = [], set()
    for r in rows:
        c = r["case"]
        lead = [c["block_size"], c["max_model_len"], c["max_num_seqs"], case_variant(c),
                r["workload"]]
        key = repr(c)   # the config's warnings once, on its first row
        note = [said[key] if key not in shown else ""] if column else []
        shown.add(key)
        figs = [r["subjects"][s] for s in specs]
        skipped = [f.get("skipped") for f in figs]
        if any(skipped):
            body.append(lead + [f"skipped: {next(s for s in skipped if s)}"]
                        + [""] * len(metrics) + note)
            continue
        body.append(lead + [cell([_paths(f) for f in figs])]
                    + [cell([f[m.name] for f in figs], m.unit) for m in metrics] + note)
    title = f"cost: {specs[0]}" if len(specs) == 1 else f"cost: {specs[0]} → {specs[1]}"
    n_changed = sum(1 for r in rows if r.get("changed"))
    references = [s for s in specs if is_embedded(s)]
    notes = ([f"{n_changed} of {len(rows)} rows changed"] if len(specs) == 2 else []) \
        + ([f"{', '.join(references)}: {REFERENCE_NOTE}"] if references else [])
    caption = "; ".join(notes) or None
    out.print(table(title, ["bs", "mml", "mns", "overrides", "workload", "paths"]
                    + [m.label for m in metrics] + [SAID] * column, body, caption=caption))
    if per_step:
        for r in rows:
            for spec in specs:
                fig = r["subjects"][spec]
                if "per_step" in fig:
                    out.print(_step_table(spec, r, fig["per_step"]))


def _said_per_case(rows, specs) -> dict[str, str]:
    """Per config (its key, as text): what each subject's builder warned building it, over all
    its workloads; with two subjects, each side's where they differ."""
    per: dict[str, list[dict]] = {}
    for r in rows:
        figures = per.setdefault(repr(r["case"]), [{} for _ in specs])
        for i, spec in enumerate(specs):
            figures[i][r["workload"]] = r["subjects"][spec]
    out = {}
    for key, figures in per.items():
        notes = [code_said({}, f) for f in figures]
        if len(notes) == 1 or notes[0] == notes[1]:
            out[key] = said_text(notes[0]) if notes[0] else ""
        else:
            out[key] = f"base: {said_text(notes[0])} | head: {said_text(notes[1])}"
    return out


def _step_table(spec, row, steps):
    c = row["case"]
    body = [[s["step"], s["path"], s["reason"], s["b_seqs"] or "-", s["b_blocks"] or "-",
             s["blocks_per_chunk"] or "-", s["num_chunks"] or "-", s["iterations_per_layer"],
             s["iterations_per_step"], s["padded_kv_slots"], format_bytes(s["h2d_bytes"]),
             format_bytes(s["h2d_bytes_by_tensor"].get("mask", 0)), " ".join(s["compile_keys"])]
            for s in steps]
    return table(f"{spec}: {row['workload']} at bs={c['block_size']} mml={c['max_model_len']} "
                 f"env={c['overrides']}",
                 ["step", "path", "reason", "B_s", "B_b", "blocks/chunk", "chunks", "iters/layer",
                  "iters/step", "padded slots", "H2D", "mask", "keys"], body)
