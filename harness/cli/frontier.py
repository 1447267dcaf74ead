"""``spyre-bench frontier``: compiled graphs against per-step cost, for every ladder worth trying."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import options
from harness.errors import ConfigError

EPILOG = """\
every point is an exact figure of the subject's own code: the optimiser (dynamic programming
over the workload's lengths, pure Python) only proposes ladders; each is then evaluated through
the axis's env override by the subject's bucketer and builder, as `cost --env` would.

with --base/--head the frontier is the head's; its own ladder is marked "head", the base's
ladder (evaluated by the head's code) "base", and the last line is the verdict the PR comment
gives a ladder change: improvement, regression, or a trade-off said as what was bought for what.

examples:
  spyre-bench frontier --block-size 192 --max-model-len 2048 --workload long-tail --plot f.png
  spyre-bench frontier --base reference:pre-810 --head reference:post-810-clamp \\
      --block-size 192 --max-model-len 2048 --workload bimodal --budget 2:6
  spyre-bench frontier --subject git:../spyre-inference@main --trace prod.trace --json
"""


def register(sub) -> None:
    p = sub.add_parser(
        "frontier", help="the best ladder per compile count for a workload, and where a "
                         "ladder sits against it",
        description="For each config and workload: the Pareto frontier of compiled graphs "
                    "versus padded KV slots per real token, kernel iterations per layer and "
                    "host-to-device bytes per step, over the ladders an exact optimiser proposes "
                    "for the axis (and the config's own), each evaluated by the subject's own "
                    "code. Batched decode is on unless --overrides/--env say otherwise.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_subjects(p)
    options.add_matrix(p, default_overrides="batched")
    options.add_workloads(p)
    p.add_argument("--axis", default="kv", choices=("kv", "num_seqs", "query"),
                   help="the ladder to choose, set by SPYRE_ATTN_KV_BUCKETS, "
                        "SPYRE_ATTN_NUM_SEQS_BUCKETS or SPYRE_ATTN_QUERY_BUCKETS (default kv)")
    p.add_argument("--budget", metavar="K|LO:HI", type=budget,
                   help="ladder sizes (buckets) to propose: each bucket is one more compiled "
                        "variant per bucket of the other axes (default 1 to twice the config's "
                        "own size, at least 8)")
    p.add_argument("--plot", metavar="FILE", type=plot_file,
                   help="write the frontier as an image (.png or .svg); one file per config and "
                        "workload when there are several (FILE's stem, then which)")
    options.add_output(p)
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def budget(text: str) -> range:
    """``6`` (1 to 6) or ``2:6``: ladder sizes, each at least 1."""
    lo, sep, hi = text.partition(":")
    try:
        first, last = (int(lo), int(hi)) if sep else (1, int(lo))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K or LO:HI (ladder sizes), got {text!r}") \
            from None
    if first < 1 or last < 1:
        raise argparse.ArgumentTypeError(f"ladder sizes must be >= 1, got {text!r}")
    if last < first or last > options.MAX_STEPS:
        raise argparse.ArgumentTypeError(f"expected LO <= HI <= {options.MAX_STEPS}, got "
                                         f"{text!r}")
    return range(first, last + 1)


def plot_file(text: str) -> Path:
    from harness.outputs import output_file
    from harness.report.frontier_plot import FORMATS
    path = output_file(text)
    if path == "-" or Path(path).suffix.lower() not in FORMATS:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a .png or .svg file")
    return Path(path)


def run(args) -> int:
    from harness.analyze.frontier import frontier, pr_frontier
    from harness.report import frontier_table
    from harness.report.tables import console, print_json
    subjects = options.subjects(args)
    cases = options.cases(args)
    specs = options.workloads(args)
    found = []
    for case in cases:
        for spec in specs:
            if len(subjects) == 2:
                found.append(pr_frontier(*subjects, case, spec, args.axis, args.budget))
            else:
                found.append(frontier(subjects[0], case, spec, args.axis, args.budget))
    if not found:
        raise ConfigError("no config and workload to compute a frontier for")
    if args.json:
        print_json([frontier_table.as_json(f) for f in found])
    else:
        out = console()
        for f in found:
            frontier_table.render(f, out)
    if args.plot:
        from harness.report.frontier_plot import plot_paths, save
        for f, path in zip(found, plot_paths(args.plot, found)):
            save(f, path)
            print(f"spyre-bench: wrote {path}", file=sys.stderr)
    return 0
