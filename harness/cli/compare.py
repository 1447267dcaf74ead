"""``spyre-bench compare``: the deltas between two commits or subjects, for people and for CI."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from harness.cli import options
from harness.cli.common import HISTORY_DIR
from harness.errors import ConfigError
from harness.outputs import output_file

EPILOG = """\
two ways to name the sides:
  BASE HEAD              commits (or unique prefixes) with stored results in --results-dir
  --base SPEC --head SPEC  subjects evaluated now (reference:..., git:<repo>@<rev>, path:...):
                         exact figures over the config matrix (default: the quick tier), plus
                         kernel and host timings measured interleaved on this machine with
                         --timings

exact figures (ladders, compile keys, iterations, padding, host-to-device bytes) are compared
exactly: any change is reported in both directions. Timings are judged by the ratio of medians AND
a Mann-Whitney U test on the raw samples: regression / improvement, no change (95% interval of the
ratio inside [1/factor, factor]) or inconclusive (with what would settle it). Timings from
different machines, devices or environments are refused (exact figures still compare).

what is said first: a wrong kernel (the oracle rejects an output) and figures the base had and the
head lacks ("lost") are ❌ at the top with exit 1; then one ranked line per distinct finding. Figures
not compared are counted, and "timings not measured" / "oracle not run" say what was not checked.
Stored results are never interleaved: their timing verdicts are advisory, and the comparison says
how far apart the two sides were measured.

expected changes (--expected FILE, JSON lines in the subject repository): the gate fails on any
exact change the file does not acknowledge, in either direction, and passes on those it does;
--write-expected FILE writes the file acknowledging exactly this comparison's changes.

exit codes (for a CI gate):
  0  nothing flagged by --fail-on
  1  a flagged finding: wrong kernel, lost figures, an (unacknowledged) exact or ladder change in
     either direction, a timing regression or exact figures that only got worse (a trade-off of
     compiled graphs against padding is not one, unless --fail-on variants)
  2  bad input (unknown commit, unreadable results, bad flags), nothing compared at all (every
     figure skipped on one side or both: a subject that does not load is never a pass), or sides
     that are not comparable (different machine, device or environment) with 'incomparable' in
     --fail-on
  3  interrupted

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
    stored.add_argument("--results-dir", type=options.path, default=HISTORY_DIR,
                        help="ASV results folder (default %(default)s, where `run` writes)")
    stored.add_argument("--machine", help="machine to compare on (when several have both)")
    stored.add_argument("--env-name", help="ASV environment to compare (when several)")
    stored.add_argument("--allow-cross-machine", action="store_true",
                        help="judge timings even when machine/device/environment differ")
    judged = p.add_argument_group("verdicts")
    judged.add_argument("--factor", type=options.number(above=1, most=1000), default=None,
                        help="timing ratio that counts as a change (default 1.25 for stored "
                             "results, 1.1 for --timings: the adaptive sampler catches a "
                             "slowdown of the factor, never one under its square root)")
    judged.add_argument("--alpha", type=options.number(above=0, below=1), default=None,
                        help="significance level of the rank test (default 0.01)")
    judged.add_argument("--fail-on", default="wrong,lost,exact,regression,incomparable",
                        help="what makes the exit code non-zero: wrong, lost, exact, regression "
                             "(never a trade-off), variants (a ladder change compiling more "
                             "graphs), incomparable (default %(default)s; '' never fails)")
    judged.add_argument("--timings", action="store_true",
                        help="with --base/--head: check each side's kernel against the oracle "
                             "and time the quick tier's probes on this machine, interleaved; "
                             "and time each side's own build() and forward() on the host, per "
                             "workload and attention path, interleaved the same way")
    judged.add_argument("--timing-seconds", type=options.number(above=0, most=3600),
                        default=None, metavar="S",
                        help="with --timings: bound on the adaptive sampler's seconds per probe "
                             "(default 30 for a kernel probe, 10 for a host one; rounds stop "
                             "earlier once the verdict is clear)")
    judged.add_argument("--cold-cache", action="store_true",
                        help="with --timings: evict the last-level cache (a buffer twice the L3, "
                             "or the GPU's L2) before every timed call, for memory-bound kernels")
    judged.add_argument("--oracle", action="store_true",
                        help="with --base/--head: check each side's kernel against the oracle on "
                             "the quick tier's probes, without timing them")
    judged.add_argument("--expected", type=options.path, metavar="FILE",
                        help="expected-changes file (JSON lines): exact changes it acknowledges "
                             "do not fail the gate")
    judged.add_argument("--write-expected", metavar="FILE", type=output_file,
                        help="write the expected-changes file acknowledging exactly this "
                             "comparison's changes ('-' for standard output)")
    out = p.add_argument_group("output")
    out.add_argument("--markdown", type=output_file, metavar="FILE",
                     help="write the PR comment body (markdown) to FILE")
    out.add_argument("--json", type=output_file, metavar="FILE", help="write every figure as JSON "
                     "('-' for standard output)")
    out.add_argument("--full", action="store_true", help="show every ladder change")
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


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


def _plan(args, seconds_default: float | None = None):
    """The adaptive sampler's plan from --factor, --alpha, --timing-seconds, --cold-cache (its
    bound per probe ``seconds_default`` when --timing-seconds is not given, else the plan's)."""
    from harness.measure.sampler import PR_FACTOR, Plan
    judging = _judging(args)
    seconds = getattr(args, "timing_seconds", None)
    if seconds is not None and not seconds > 0:
        raise ConfigError(f"--timing-seconds must be > 0, got {seconds}")
    plan = Plan(factor=judging.get("factor", PR_FACTOR), cold=getattr(args, "cold_cache", False))
    if "alpha" in judging:
        plan = dataclasses.replace(plan, alpha=judging["alpha"])
    seconds = seconds or seconds_default
    return dataclasses.replace(plan, max_seconds=seconds) if seconds else plan


def comparison_from_args(args):
    """The Comparison the arguments describe (shared with ``spyre-bench comment``)."""
    from harness.analyze.stored import compare_stored
    from harness.analyze.subjects_now import compare_subjects
    from harness.worker import same_code
    if args.commits and (args.base or args.head or args.subject):
        raise ConfigError("give either BASE HEAD commits or --base/--head subjects, not both")
    if args.commits:
        if len(args.commits) != 2:
            raise ConfigError(f"expected two commits (BASE HEAD), got {len(args.commits)}")
        from harness.cli.common import warn
        from harness.store.history import load_history_quietly
        frame = load_history_quietly(args.results_dir, warn)
        return compare_stored(frame, *args.commits, machine=args.machine,
                              env_name=args.env_name,
                              allow_cross_machine=args.allow_cross_machine, **_judging(args))
    if not (args.base and args.head):
        raise ConfigError("name the sides: BASE HEAD commits, or --base SPEC --head SPEC")
    plan = _plan(args) if args.timings else None   # bad timing flags fail before any work
    base, head = options.subjects(args)
    if not args.tier and not any((args.block_size, args.max_model_len, args.max_num_seqs)):
        args.tier = "quick"
    cases, specs = options.cases(args), options.workloads(args)
    options.check_knobs([base, head], cases)
    comparison = compare_subjects(base, head, cases, specs, **_judging(args))
    if args.timings and same_code(base, head):
        from harness.analyze.subjects_now import SAME_CODE, add_kernel_run
        from harness.measure.interleaved import check_kernels
        add_kernel_run(comparison, check_kernels(base, head, same_code=True))
        comparison.timing_notes.append(SAME_CODE)
    elif args.timings:
        from harness.analyze.subjects_now import add_host_run, add_kernel_run
        from harness.measure.host_run import HOST_SECONDS, time_host
        from harness.measure.interleaved import time_subjects
        add_kernel_run(comparison, time_subjects(base, head, plan=plan))
        add_host_run(comparison, time_host(base, head, cases, specs,
                                           _plan(args, seconds_default=HOST_SECONDS)))
    elif args.oracle:
        from harness.analyze.subjects_now import add_kernel_run
        from harness.measure.interleaved import check_kernels
        add_kernel_run(comparison, check_kernels(base, head))
    return comparison


def document_of(comparison, args) -> dict:
    """The comparison document, with the expected-changes file applied when one is given."""
    from harness.analyze import expected
    from harness.analyze.comparison import as_document
    doc = as_document(comparison)
    if getattr(args, "expected", None) is not None:
        expected.apply(doc, expected.load(args.expected), str(args.expected))
    return doc


def run(args) -> int:
    from harness.analyze import expected
    from harness.report.tables import console
    from harness.report.verdict import FAIL_ON, exit_code, nothing_compared, render_terminal
    fail_on = {f for f in args.fail_on.split(",") if f}
    unknown = fail_on - set(FAIL_ON)
    if unknown:
        raise ConfigError(f"--fail-on: unknown {sorted(unknown)}; known: {', '.join(FAIL_ON)}")
    if args.oracle and args.commits:
        raise ConfigError("--oracle runs kernels: it needs --base/--head subjects")
    comparison = comparison_from_args(args)
    doc = document_of(comparison, args)
    if args.markdown:
        from harness.report.markdown import render
        from harness.runner.asv_suite import harness_commit
        _write(args.markdown, render(doc, harness_commit=harness_commit()))
    if args.json:
        text = json.dumps(doc, indent=1)
        if str(args.json) == "-":
            sys.stdout.write(text + "\n")
        else:
            _write(args.json, text)
    if args.write_expected:
        text = expected.replacement(doc)
        if args.write_expected == "-":
            sys.stdout.write(text)
        else:
            _write(Path(args.write_expected), text)
            print(f"spyre-bench: wrote {args.write_expected}: commit it to acknowledge these "
                  f"{len(doc['exact_changed']) + len(doc['ladders'])} changes", file=sys.stderr)
    if str(args.json) != "-" and args.write_expected != "-":
        render_terminal(comparison, console(), full=args.full, doc=doc)
    code = exit_code(doc, fail_on)
    empty = nothing_compared(doc)
    if empty or code == 2:     # 2: nothing compared, or sides not comparable; one line says why
        why = empty or f"the sides are not comparable: {'; '.join(doc['problems'])}"
        print(f"spyre-bench: error: {why}", file=sys.stderr)
    return code


def _write(path: Path, text: str) -> None:
    """Beside the resolved target, then renamed: harness.outputs' one rule for output files."""
    from harness.outputs import write_text
    write_text(path, text)


