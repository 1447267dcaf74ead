"""``spyre-bench compare``: the deltas between two commits or subjects, for people and for CI."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cli import options
from harness.errors import ConfigError, HarnessError

EPILOG = """\
two ways to name the sides:
  BASE HEAD              commits (or unique prefixes) with stored results in --results-dir
  --base SPEC --head SPEC  subjects evaluated now (reference:..., git:<repo>@<rev>, path:...):
                         exact figures over the config matrix (default: the quick tier), plus
                         kernel timings measured interleaved on this machine with --timings

exact figures (ladders, compile keys, iterations, padding, host-to-device bytes) are compared
exactly: any change is reported in both directions. Timings are judged by the ratio of medians AND
a Mann-Whitney U test on the raw samples: regression / improvement, no change (95% interval of the
ratio inside [1/factor, factor]) or inconclusive (with what would settle it). Timings from
different machines, devices or environments are refused (exact figures still compare).

exit codes (for a CI gate):
  0  nothing flagged by --fail-on
  1  a flagged change: an exact figure or ladder changed (either direction), or a timing regression
  2  bad input: unknown commit, unreadable results, bad flags
  3  the sides are not comparable (different machine, device or environment) and 'incomparable'
     is in --fail-on

examples:
  spyre-bench compare 1a2b3c4 5d6e7f8 --results-dir results
  spyre-bench compare --base git:../spyre-inference@main --head git:../spyre-inference@pr-810 \\
      --markdown comment.md
"""


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare two commits (stored) or two subjects (now)",
                       description="Compare two sides and say what changed: ladders, compile "
                                   "counts, iterations, padding, host-to-device bytes and "
                                   "timings, with a verdict and an exit code for CI gates.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("commits", nargs="*", metavar="BASE HEAD",
                   help="two commits with stored results (see --results-dir)")
    options.add_subjects(p)
    options.add_matrix(p)
    options.add_workloads(p)
    stored = p.add_argument_group("stored results")
    stored.add_argument("--results-dir", type=Path, default=Path("results"),
                        help="ASV results folder (default %(default)s)")
    stored.add_argument("--machine", help="machine to compare on (when several have both)")
    stored.add_argument("--env-name", help="ASV environment to compare (when several)")
    stored.add_argument("--allow-cross-machine", action="store_true",
                        help="judge timings even when machine/device/environment differ")
    judged = p.add_argument_group("verdicts")
    judged.add_argument("--factor", type=float, default=None,
                        help="timing ratio that counts as a change (default 1.25)")
    judged.add_argument("--alpha", type=float, default=None,
                        help="significance level of the rank test (default 0.01)")
    judged.add_argument("--fail-on", default="exact,regression,incomparable",
                        help="what makes the exit code non-zero: exact, regression, "
                             "incomparable (default %(default)s; '' never fails)")
    judged.add_argument("--timings", action="store_true",
                        help="with --base/--head: also time the kernel buckets of the quick "
                             "tier on this machine, base and head interleaved")
    out = p.add_argument_group("output")
    out.add_argument("--markdown", type=Path, metavar="FILE",
                     help="write the PR comment body (markdown) to FILE")
    out.add_argument("--json", type=Path, metavar="FILE", help="write every figure as JSON "
                     "('-' for standard output)")
    out.add_argument("--full", action="store_true", help="show every ladder change")
    p.set_defaults(run=run)


def _judging(args) -> dict:
    kw = {}
    if args.factor is not None:
        if args.factor <= 1:
            raise ConfigError(f"--factor must be > 1, got {args.factor}")
        kw["factor"] = args.factor
    if args.alpha is not None:
        if not 0 < args.alpha < 1:
            raise ConfigError(f"--alpha must be in (0, 1), got {args.alpha}")
        kw["alpha"] = args.alpha
    return kw


def comparison_from_args(args):
    """The Comparison the arguments describe (shared with ``spyre-bench comment``)."""
    from harness.analyze import compare
    if args.commits and (args.base or args.head or args.subject):
        raise ConfigError("give either BASE HEAD commits or --base/--head subjects, not both")
    if args.commits:
        if len(args.commits) != 2:
            raise ConfigError(f"expected two commits (BASE HEAD), got {len(args.commits)}")
        from harness.cli.history import warn
        from harness.store.history import load_history_quietly
        frame = load_history_quietly(args.results_dir, warn)
        return compare.compare_stored(frame, *args.commits, machine=args.machine,
                                      env_name=args.env_name,
                                      allow_cross_machine=args.allow_cross_machine,
                                      **_judging(args))
    if not (args.base and args.head):
        raise ConfigError("name the sides: BASE HEAD commits, or --base SPEC --head SPEC")
    base, head = options.subjects(args)
    if not args.tier and not any((args.block_size, args.max_model_len, args.max_num_seqs)):
        args.tier = "quick"
    comparison = compare.compare_subjects(base, head, options.cases(args),
                                          options.workloads(args), **_judging(args))
    if args.timings:
        from harness.measure.compare import time_subjects
        time_subjects(comparison, base, head)
    return comparison


def run(args) -> int:
    from harness.report.comparison import exit_code, render_terminal
    from harness.report.tables import console
    fail_on = {f for f in args.fail_on.split(",") if f}
    unknown = fail_on - {"exact", "regression", "incomparable"}
    if unknown:
        raise ConfigError(f"--fail-on: unknown {sorted(unknown)}; known: exact, regression, "
                          "incomparable")
    comparison = comparison_from_args(args)
    if args.markdown:
        from harness.report.markdown import render
        from harness.runner.runner import harness_commit
        _write(args.markdown, render(comparison, harness_commit=harness_commit()))
    if args.json:
        text = json.dumps(to_json(comparison), indent=1, default=str)
        if str(args.json) == "-":
            sys.stdout.write(text + "\n")
        else:
            _write(args.json, text)
    if str(args.json) != "-":
        render_terminal(comparison, console(), full=args.full)
    return exit_code(comparison, fail_on)


def _write(path: Path, text: str) -> None:
    try:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as exc:
        raise HarnessError(f"cannot write {path}: {exc.strerror or exc}") from None


def to_json(c) -> dict:
    from dataclasses import asdict
    return {
        "base": asdict(c.base), "head": asdict(c.head), "factor": c.factor, "alpha": c.alpha,
        "exact_compared": c.exact_compared,
        "exact_changed": [asdict(e) | {"direction": e.direction, "unit": e.unit}
                          for e in c.exact],
        "ladders": [asdict(ld) for ld in c.ladders],
        "timings": [{"benchmark": t.benchmark, "params": t.params, "unit": t.unit,
                     "base": t.base, "head": t.head, "verdict": asdict(t.verdict)}
                    for t in c.timings],
        "skipped": [{"what": w, "why": r} for w, r in c.skipped], "problems": c.problems,
    }
