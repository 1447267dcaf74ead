"""``spyre-bench kernel``: measure a subject's batched decode kernel on the device at hand.

Importing this module must not import torch (``spyre-bench --help`` stays fast): everything that
needs torch is imported inside :func:`run`.
"""

from __future__ import annotations

import argparse
import sys

from harness.analyze.kernel_gates import exit_status, parse_gates
from harness.cli import options
from harness.errors import ConfigError, SubjectFailed
from harness.measure.settings import defaults as kernel_defaults
from harness.progress import Progress
from harness.report.tables import print_json

EPILOG = """\
what it does, per config x workload x subject:
  graphs   record the subject's warmup variants, then run every step of the workload through
           torch.compile(kernel, dynamic=False) (--backend), dispatched on the subject's
           bucketing; count graphs per kernel (Dynamo reset between configs) next to the exact
           model's keys; graphs after warmup are late compiles; keys past Dynamo's recompile
           limit that silently ran eagerly are fall-backs; compile seconds per variant (a cold
           TORCHINDUCTOR_CACHE_DIR for real backends). A first look compiles each key
           shape-only (outputs not computed) and shares one Dynamo session between a config's
           workloads where that changes no figure: the counts are a full run's.
  time     group the steps by shape (the compile keys they call), build one batch per shape the
           way the metadata builder does, check it against the oracle, and time it: median
           us per layer (all of the step's kernel calls) with IQR and a 95% CI, us per decode
           token, per step x num_layers, decode tokens/s, K/V GB/s. A first look spends
           --time-budget seconds per workload (shapes most frequent first, at least 5 samples
           each); rows say how many samples and shapes they got.
  workloads: every named mix, or on --tier tiny the review's two (four-3-block-decodes,
  bimodal): a first look of four configs in under 30 s on two cores.
  every timed output is checked against a plain-softmax oracle (--full: every key the graph
  count reaches, too); a wrong kernel is reported as WRONG with no timing, and the command
  exits 1. --full: the full measurement (every shape, every --repeat sample, every key run).
  progress goes to stderr: a bar on a terminal; in a pipe, a line per unit of work and one at
  least every 10 s.

exit status: 0 measured; 1 a row shows what --fail-on names (default: a wrong kernel; e.g.
--fail-on wrong,fallbacks also gates on a "NO: N fall-backs" verdict); 2 bad input, or nothing
could be measured.

examples:
  # the standard microbenchmark: per-block vs chunked vs per-sequence, 4 decodes of 16 blocks
  spyre-bench kernel --base reference:post-810-clamp --head reference:chunked \\
      --block-size 128 --max-model-len 2048 --step 2048,2048,2048,2048 --per-sequence --no-graphs
  # compiled graphs vs the model for a workload, as JSON
  spyre-bench kernel --subject reference:chunked --workload bimodal --no-timing --json
"""


#: Bounds of the counting flags (samples, warmup calls, shapes, recompiles): past them a run
#: would not end in any useful time.
MAX_COUNT = 1_000_000
#: Largest soft cap: float16's largest finite value (a cap beyond it is "off", which 0 says).
MAX_SOFT_CAP = 65504.0
#: Largest --max-cache-gib: more memory than any accelerator or host the kernel runs on.
MAX_CACHE_GIB = 4096.0
#: Largest --time-budget: a day per shape is no bound at all (0 says that).
MAX_TIME_BUDGET = 86400.0


def register(sub) -> None:
    p = sub.add_parser(
        "kernel", help="time and check the batched decode kernel, and count its compiled graphs",
        description="Measure a subject's batched decode kernel (Subject.decode_kernel) on the "
                    "selected device: compiled graphs vs the exact model, time and throughput "
                    "per step shape, correctness against an oracle. Batched decode is on by "
                    "default here (--overrides batched).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_subjects(p)
    options.add_matrix(p, default_overrides="batched")
    options.add_workloads(p)
    g = p.add_argument_group("measurement")
    d = kernel_defaults()
    count = options.number(1, most=MAX_COUNT, kind=int)
    g.add_argument("--device", default="auto", metavar="NAME",
                   help="auto (spyre when torch_spyre imports, else cuda, else cpu), spyre, "
                        "cuda[:N] or cpu (default %(default)s)")
    g.add_argument("--repeat", type=count, default=d["repeat"], metavar="N",
                   help="timed samples per shape, at most (default %(default)s)")
    g.add_argument("--time-budget", type=options.number(0, most=MAX_TIME_BUDGET),
                   default=None, metavar="S",
                   help="wall seconds per workload's timing: step shapes are timed most "
                        "frequent first, each sampling while the budget lasts (at least 5 "
                        "samples), none starting once it is spent (the first always does); rows "
                        "say how many samples and shapes they have and why; 0: every --repeat "
                        f"sample of every shape (default {d['time_budget_s']:g}; 0 with --full)")
    g.add_argument("--full", action="store_true",
                   help="the full measurement, not a first look: no time budget, every step "
                        "shape timed (no --max-shapes cap), and every key the graph count "
                        "reaches (warmup variants too) run and checked against the oracle, not "
                        "only compiled; flags given still apply")
    g.add_argument("--warmup", type=count, default=d["warmup"], metavar="N",
                   help="untimed calls before sampling, the first one checked (default "
                        "%(default)s)")
    g.add_argument("--number", type=options.number(1, most=10**9, kind=int), default=d["number"], metavar="N",
                   help="calls per sample (default: calibrated to >= "
                        f"{d['min_sample_s'] * 1e3:g} ms per sample)")
    g.add_argument("--backend", default=d["backend"], metavar="NAME",
                   help="torch.compile backend for graph counting and compiled timing: eager or "
                        "aot_eager (cheap, counts exactly), inductor (real compile seconds; "
                        "torch-spyre's on Spyre) (default %(default)s)")
    g.add_argument("--timing", choices=("eager", "compiled"), default=None,
                   help="time the kernel called directly (eager) or through torch.compile with "
                        "--backend (default: compiled on spyre, eager elsewhere)")
    g.add_argument("--recompile-limit", type=count, default=d["recompile_limit"],
                   metavar="N",
                   help="Dynamo's recompile limit per kernel while counting (default: torch's, "
                        "8); keys past it run eagerly and are reported as fall-backs")
    g.add_argument("--no-warmup-variants", action="store_true",
                   help="do not record the subject's warmup variants before the workload (every "
                        "graph then counts as late)")
    g.add_argument("--no-graphs", action="store_true", help="skip compiled-graph counting")
    g.add_argument("--no-timing", action="store_true", help="skip timing")
    g.add_argument("--per-sequence", action="store_true",
                   help="also time each batched shape's sequences on the per-sequence path")
    g.add_argument("--max-shapes", type=count, default=None, metavar="N",
                   help="time at most N step shapes per workload, most frequent first "
                        f"(default {d['max_shapes']}; every one with --full)")
    g.add_argument("--soft-cap", type=options.number(0, most=MAX_SOFT_CAP), default=d["soft_cap"],
                   metavar="X",
                   help="logits soft cap passed to the kernel (default 0: off)")
    g.add_argument("--threads", type=options.number(1, most=4096, kind=int), default=d["threads"],
                   metavar="N",
                   help="torch intra-op threads while timing (default: torch's); on a shared "
                        "CPU, fewer threads than cores avoids stalls behind other processes")
    g.add_argument("--unstable-threshold", type=options.number(above=0, most=100),
                   default=d["unstable_threshold"], metavar="R",
                   help="warn when IQR/median exceeds R (default %(default)s)")
    g.add_argument("--max-cache-gib", type=options.number(above=0, most=MAX_CACHE_GIB),
                   default=d["max_cache_bytes"] / (1 << 30), metavar="G",
                   help="skip workloads whose K/V cache or per-step inputs need more (default "
                        "%(default)s)")
    g.add_argument("--fail-on", default="wrong", metavar="WHAT,..",
                   help="exit 1 when a row shows any of: wrong (a kernel output differs from the "
                        "oracle), fallbacks (keys past the recompile limit ran eagerly), model "
                        "(compiled graphs differ from the exact model's keys); none: never "
                        "(default %(default)s)")
    options.add_output(p)
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def _validate(args) -> None:
    """What argparse cannot check alone (each numeric flag's range is its type)."""
    parse_gates(args.fail_on)
    if args.no_graphs and args.no_timing:
        raise ConfigError("--no-graphs and --no-timing together leave nothing to measure")


def _budget(args, default: float | None) -> float | None:
    """Seconds per workload's timing: the flag's (0: none), else none with --full, else the default."""
    if args.time_budget is not None:
        return args.time_budget or None
    return None if args.full else default


def run(args) -> int:
    _validate(args)
    from harness.measure.kernel_run import counting_pool
    from harness.subjects import is_embedded
    from harness.subjects.spyre.prefetch import jobs

    cases = options.cases(args)
    specs = options.workloads(args, kernel=True)
    given = options.subject_specs(args)
    # Only the embedded reference counts in parallel: a commit's worker loads its code once,
    # a counting process per config would load it again (the fixture's gen3 tiny: 90 s, not 27 s).
    parallel = not args.no_graphs and all(is_embedded(s) for s in given)
    with counting_pool(min(jobs(), len(cases) * len(given)) if parallel else 1) as pool:
        return _run(args, cases, specs, pool)


def _run(args, cases, specs, pool) -> int:
    d = kernel_defaults()
    subjects = options.subjects(args)
    options.check_knobs(subjects, cases)

    from harness.measure import device as devices
    from harness.measure.compiles import check_backend
    from harness.measure.kernel_figures import KernelOptions

    if args.threads is not None:
        import torch
        torch.set_num_threads(args.threads)
    dev = devices.select(args.device)
    check_backend(args.backend)
    bandwidth = {"gb_per_s": None, "source": None}
    if not args.no_timing:
        from harness.measure.efficiency import machine_bandwidth
        bandwidth = machine_bandwidth(dev)   # measured once per machine, then cached
    opts = KernelOptions(
        device=dev, repeat=args.repeat, warmup=args.warmup, number=args.number,
        backend=args.backend,
        timing=args.timing or ("compiled" if dev.name == "spyre" else "eager"),
        recompile_limit=args.recompile_limit, record_warmup=not args.no_warmup_variants,
        graphs=not args.no_graphs, time=not args.no_timing, per_sequence=args.per_sequence,
        max_shapes=args.max_shapes or (MAX_COUNT if args.full else d["max_shapes"]),
        soft_cap=args.soft_cap,
        unstable_threshold=args.unstable_threshold, seed=args.seed,
        max_cache_bytes=int(args.max_cache_gib * (1 << 30)), threads=args.threads,
        bandwidth_gbps=bandwidth["gb_per_s"], bandwidth_source=bandwidth["source"],
        time_budget_s=_budget(args, d["time_budget_s"]),
        shape_only=() if args.full else ("warmup", "workload"))
    from harness.measure.kernel_run import measure_all

    with Progress(len(cases) * len(specs) * len(subjects), "kernel") as advance:
        figures = measure_all(subjects, cases, specs, opts, advance, pool)
    rows = []
    units = ((case, spec, subject) for case in cases for spec in specs for subject in subjects)
    for (case, spec, subject), fig in zip(units, figures):
        c = case.config
        layout = {"num_kv_heads": c.num_kv_heads, "queries_per_kv": c.queries_per_kv,
                  "head_size": c.head_size, "dtype": c.dtype, "num_layers": c.num_layers}
        # which code the figures are of: every attention module's content hash
        rows.append({"case": case.key(), "layout": layout, "workload": spec.name, **fig,
                     "sources": subject.sources})
    failed = [r["skipped"] for r in rows if r.get("failed")]
    if failed:   # said first (stderr), as every command says a subject's failure
        print(f"spyre-bench: FAILED: {SubjectFailed(failed)}", file=sys.stderr)
    if args.json:
        print_json({"device": dev.as_dict(), "options": opts.as_dict(), "rows": rows})
    else:
        from harness.report.kernel_tables import render
        render(rows, [s.spec for s in subjects], dev, opts)
    return exit_status(rows, parse_gates(args.fail_on))
