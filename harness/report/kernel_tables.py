"""Terminal tables of ``spyre-bench kernel`` rows: skips and wrong kernels, compiled graphs,
kernel time per step shape, workload throughput.

Rendering only: the rows are :func:`harness.measure.kernel_figures.measure_workload`'s figures as they
are (and as ``--json`` prints them).
"""

from __future__ import annotations

from harness.matrix import case_variant
from harness.report.tables import console, table

#: The warmup cell of a row counted through the commit's forward() (no warmup recorded).
NOT_RECORDED = "not recorded"


def _lead(r: dict) -> list:
    c = r["case"]
    return [c["block_size"], c["max_model_len"], c["max_num_seqs"], case_variant(c), r["workload"],
            r["subject"]]


def _num(v, fmt: str = ",.1f") -> str:
    return "-" if v is None else format(v, fmt)


def render(rows: list[dict], specs: list[str], dev, opts, out=None) -> None:
    """Print the rows' tables; ``specs[0]`` is the base of the "time vs base" column."""
    out = out or console()
    lead = ["bs", "mml", "mns", "overrides", "workload", "subject"]
    for r in rows:
        where = " ".join(map(str, _lead(r)))
        if r.get("failed"):   # the subject's own code failed: that commit's failure, not a skip
            out.print(f"[bold red]FAILED[/] {where}: {r['skipped']}", highlight=False)
        elif "skipped" in r:
            out.print(f"[yellow]skipped[/] {where}: {r['skipped']}", highlight=False)
        if "wrong" in r:
            out.print(f"[bold red]WRONG[/] {where}: {r['wrong']}", highlight=False)
    graph_rows = [r for r in rows if "graphs" in r]
    if graph_rows:
        body = []
        for r in graph_rows:
            g = r["graphs"]
            secs = ("-" if g["compile_seconds_mean"] is None else
                    f"{g['compile_seconds_mean']:.2f} / {g['compile_seconds_max']:.2f}")
            body.append(_lead(r) + [
                g["model_keys"], f"{g['graphs']} ({g['expected_graphs']})",
                g["graphs_warmup"] if g["recorded_warmup"] else NOT_RECORDED,
                f"{g['late_compiles']} ({g['expected_late']})", g["fallbacks"] or "-", secs,
                f"{g['max_abs_error']:.1e}", g["verdict"]])
        limit = graph_rows[0]["graphs"]["recompile_limit"]
        forward = any(not r["graphs"]["recorded_warmup"] for r in graph_rows)
        recorded = ("not recorded" if not opts.record_warmup else
                    "recorded where the kernel is called directly" if forward else "recorded")
        out.print(table(
            f"compiled graphs (backend {opts.backend}, recompile limit {limit}, warmup variants "
            f"{recorded})",
            lead + ["keys", "graphs (model)", "warmup", "late (model)", "fall-backs",
                    "compile s mean/max", "max err", "= model"], body,
            caption="keys: distinct compile keys the exact model predicts for the workload; "
                    "late: graphs compiled after warmup; fall-backs: new keys past Dynamo's "
                    "recompile limit that ran eagerly (--recompile-limit raises it)"
                    + (f"; warmup {NOT_RECORDED}: counted through the commit's forward(), "
                       "which records no warmup, so every graph (and every key of the model) "
                       "counts as late; late compiles after the commit's own warmup are the "
                       "compile guard table's, where the commit has one" if forward else "")))
    _guard_table(graph_rows, lead, out)
    timed = [r for r in rows if "timing" in r]
    if not timed:
        return
    layers = timed[0]["layout"]["num_layers"]
    by_case: dict[str, list] = {}
    for r in timed:
        c = r["case"]
        by_case.setdefault(f"bs={c['block_size']} mml={c['max_model_len']} "
                           f"mns={c['max_num_seqs']} env={c['overrides']}", []).append(r)
    for label, case_rows in by_case.items():
        body, notes = [], []
        for r in case_rows:
            for s in r["timing"]["shapes"]:
                if s["us_per_layer"] is None:   # invalid: said, never shown as a timing
                    notes += [f"{r['subject']} {r['workload']} {s['shape']}: {w}"
                              for w in s["warnings"]]
                    continue
                st = s["stats"]
                body.append([
                    r["workload"], r["subject"], s["path"], s["shape"], s["steps"],
                    len(s["seq_lens"]), s["launches"], s["iterations_per_layer"],
                    _num(s["us_per_layer"]), f"{st['relative_spread']:.0%}",
                    f"{st['ci_low']:,.0f}-{st['ci_high']:,.0f}", _num(s["us_per_token"]),
                    _num(s["us_per_step"] / 1e3, ",.2f"), _num(s["tokens_per_s"], ",.0f"),
                    _num(s["kv_gb_per_s"], ".2f"), f"{s['max_abs_error']:.1e}"])
                notes += [f"{r['subject']} {r['workload']} {s['shape']}: {w}"
                          for w in s["warnings"]]
        out.print(table(
            f"kernel time, {label}, on {dev.description}: {opts.timing}, {_sampling(opts)}",
            ["workload", "subject", "path", "shape", "steps", "seqs", "calls", "iters",
             "µs/layer", "IQR", "95% CI µs", "µs/token", f"ms/step×{layers}", "tok/s",
             "KV GB/s", "max err"], body,
            caption="µs/layer: all kernel calls of one step, one layer; µs/token: per decode "
                    f"token and layer; ms/step×{layers}: all layers; tok/s: decode tokens per "
                    "second of whole steps; max err: vs the oracle on real rows"))
        for note in notes:
            out.print(f"[yellow]warning[/] {note}", highlight=False)
    _efficiency(timed, dev, opts, out)
    body = []
    base = {}
    for r in timed:
        t = r["timing"]
        key = (str(r["case"]), r["workload"])
        ratio = "-"
        if r["subject"] == specs[0]:
            base[key] = t["workload_us_per_token"]
        elif base.get(key) and t["workload_us_per_token"]:
            ratio = f"{t['workload_us_per_token'] / base[key]:.2f}x"
        body.append(_lead(r) + [f"{t['steps_timed']}/{t['steps']}",
                                f"{t['timed_shapes']}/{t['distinct_shapes']}",
                                _num(t["workload_us_per_token"]),
                                _num(t["workload_tokens_per_s"], ",.0f"), ratio])
    out.print(table("workload throughput: timed shapes weighted by their steps",
                    lead + ["steps timed", "shapes timed", "µs/token", "tok/s",
                            "time vs base" if len(specs) == 2 else "-"], body))


def _pct(v) -> str:
    return "-" if v is None else f"{v:.1%}"


def _efficiency(timed: list[dict], dev, opts, out) -> None:
    """Bytes the kernel must move against bytes it walks, and the roofline (harness.measure
    .efficiency): padding efficiency and kernel efficiency apart."""
    body = []
    for r in timed:
        for s in r["timing"]["shapes"]:
            e = s.get("efficiency")
            if not e:
                continue
            body.append([r["workload"], r["subject"], s["shape"],
                         _num(e["logical_bytes"] / 1e6, ",.2f"),
                         _num(e["walked_bytes"] / 1e6, ",.2f"), _pct(e["padding_efficiency"]),
                         _num(e["achieved_gb_per_s"], ",.2f"), _num(e["walked_gb_per_s"], ",.2f"),
                         _pct(e["kernel_efficiency"]), _pct(e["roofline_fraction"])])
    if not body:
        return
    bw = opts.bandwidth_gbps
    where = (f"{bw:,.0f} GB/s ({opts.bandwidth_source})" if bw else "unknown bandwidth")
    out.print(table(
        f"efficiency per layer on {dev.description}, {where}",
        ["workload", "subject", "shape", "logical MB", "walked MB", "padding eff",
         "GB/s logical", "GB/s walked", "kernel eff", "of roofline"], body,
        caption="logical: real K/V tokens (2·H_kv·head_size·dtype bytes each) + query + output; "
                "walked: padded slots included; padding eff = logical/walked K/V; kernel eff = "
                "walked GB/s / the machine's bandwidth; of roofline = logical GB/s / bandwidth; "
                "warm cache (inputs of the previous call)"))


def _sampling(opts) -> str:
    """How the rows were sampled: every --repeat sample, or what a time budget allowed."""
    if opts.time_budget_s:
        return (f"median of up to {opts.repeat} samples per shape in {opts.time_budget_s:g} s "
                "per workload (a first look; --full: every sample)")
    return f"median of {opts.repeat} samples"


def _guard_table(graph_rows: list[dict], lead: list[str], out) -> None:
    """The commit's own compile guard beside spyre-bench's late compiles of the same run, and
    each disagreement said in a line."""
    guarded = [r for r in graph_rows if "compile_guard" in r["graphs"]]
    if not guarded:
        return
    body, findings = [], []
    for r in guarded:
        g = r["graphs"]["compile_guard"]
        body.append(_lead(r) + [g["level"], g["violations"], g["late_compiles"], g["model_late"],
                                f"{g['warmup_graphs']}/{g['warmup_variants']}",
                                "yes" if g["agrees"] else "NO"])
        if g["finding"]:
            findings.append(f"{' '.join(map(str, _lead(r)))}: {g['finding']}")
    out.print(table(
        "the commit's compile guard (armed at its strictest after its own warmup)",
        lead + ["level", "guard raised", "late (spyre-bench)", "late (model)",
                "warmup compiled/variants", "agree"], body,
        caption="guard raised: compiles of watched kernels the guard raised for; late: graphs "
                "compiled after warmup in the same run; model: reached keys warmup does not "
                "record"))
    for line in findings:
        out.print(f"[bold yellow]finding[/] {line}", highlight=False)
