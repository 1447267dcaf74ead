"""``spyre-bench crosscheck``: where a commit's own metadata builder and the model part ways.

The model (``harness/model``, the builder of ``reference:*``) was written from notes; a commit's
builder is the truth for that commit. This command evaluates both over configs × workloads and
lists every exact figure that differs, so a stale note (or a changed builder) is found by name.
Exit status 0: they agree everywhere; 1: a disagreement was listed; 2: bad input.
"""

from __future__ import annotations

import json

from harness.cli import options
from harness.evaluate import config_figures, workload_figures
from harness.subjects import resolve_subject

#: Figures compared per workload (tensor names are each builder's own, so bytes by tensor are not).
WORKLOAD_FIELDS = ("paths", "iterations_per_layer_total", "padded_kv_slots", "h2d_bytes_total",
                   "mask_bytes_per_step", "transfers_per_step", "compile_keys",
                   "late_compile_keys", "reasons")
CONFIG_FIELDS = ("ladders", "variants", "batched_variants_recorded", "batched_keys_reachable",
                 "unrecorded_key_list", "dead_variant_keys")


def register(sub) -> None:
    p = sub.add_parser(
        "crosscheck", help="where a commit's own builder and the embedded model disagree",
        description=__doc__.split("\n\n")[1])
    options.add_subjects(p)
    p.add_argument("--policy", required=True, metavar="NAME",
                   help="the reference policy to hold the subject against, e.g. chunked")
    options.add_matrix(p)
    options.add_workloads(p)
    p.add_argument("--json", action="store_true", help="print the disagreements as JSON")
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def disagreements(subject, model, cases, specs) -> list[dict]:
    out = []
    for case in cases:
        got, want = config_figures(subject, case), config_figures(model, case)
        for name in ("skipped",) + CONFIG_FIELDS:
            if got.get(name) != want.get(name):
                out.append({"case": case.label(), "workload": None, "figure": name,
                            "builder": got.get(name), "model": want.get(name)})
        got_w = workload_figures(subject, case, specs)
        want_w = workload_figures(model, case, specs)
        for wl in got_w:
            for name in ("skipped",) + WORKLOAD_FIELDS:
                a, b = got_w[wl].get(name), want_w[wl].get(name)
                if a != b:
                    out.append({"case": case.label(), "workload": wl, "figure": name,
                                "builder": a, "model": b})
    return out


def run(args) -> int:
    (subject,) = options.subjects(args)
    model = resolve_subject(f"reference:{args.policy}")
    cases = options.cases(args)
    options.check_knobs([subject], cases)
    found = disagreements(subject, model, cases, options.workloads(args))
    if args.json:
        print(json.dumps({"subject": subject.spec, "model": model.spec, "disagreements": found},
                         indent=1, default=str))
    else:
        for d in found:
            where = d["case"] + (f" {d['workload']}" if d["workload"] else "")
            print(f"{where}: {d['figure']}: builder {d['builder']} | model {d['model']}")
        print(f"{len(found)} disagreement(s) between {subject.spec} and {model.spec}")
    return 1 if found else 0
