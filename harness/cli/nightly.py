"""``spyre-bench nightly``: extend the history on a hardware machine, resumably."""

from __future__ import annotations

import argparse

from harness.cli import options
from harness.cli.common import HISTORY_DIR
from harness.cli.options import subject_timeout
from harness.errors import HarnessError
from harness.matrix import TIERS
from harness.runner.machine import default_machine_name
from harness.runner.shard import WHOLE, Shard

#: Commits one nightly run may take on (new, backfill, step): a bound, not a plan.
MAX_COMMITS = 100_000


def register(sub) -> None:
    p = sub.add_parser(
        "nightly", help="measure a branch's new commits, backfill older ones, commit results",
        description="Measure the commits of a spyre-inference branch that this machine has not "
                    "measured yet: first every new commit since the newest measured one, then "
                    "older ones in steps going back (backfill). One commit at a time, in this "
                    "Python environment (the machine's prepared one), results committed to the git "
                    "repository holding --results-dir after each commit. Resumable: a killed run "
                    "loses only the commit in flight; the next run picks up from what is on disk.",
        epilog="example (a Spyre runner's cron job):\n"
               "  spyre-bench nightly --repo ../spyre-inference --tier full --device spyre "
               "--push\n"
               "then: spyre-bench changes --repo ../spyre-inference; spyre-bench report",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", type=options.path, required=True, help="the spyre-inference repository")
    p.add_argument("--branch", default="main", type=options.revision,
                   help="branch to follow (default %(default)s)")
    p.add_argument("--max-new", type=options.number(0, most=MAX_COMMITS, kind=int), default=20,
                   help="at most this many new commits per run, the newest (default %(default)s)")
    p.add_argument("--backfill", type=options.number(0, most=MAX_COMMITS, kind=int), default=5,
                   help="older commits to measure per run (default %(default)s)")
    p.add_argument("--backfill-step", type=options.number(1, most=MAX_COMMITS, kind=int),
                   default=4,
                   help="measure every Nth commit going back (default %(default)s; bisect "
                        "pins changes between them)")
    p.add_argument("--shard", type=_shard, default=WHOLE, metavar="I/N",
                   help="measure only shard I of N of the plan (commits split by hash: each in "
                        "exactly one shard, whatever the history's length), so N runners share a "
                        "backfill; merge their folders with `spyre-bench merge`")
    p.add_argument("--results-dir", type=options.path, default=HISTORY_DIR,
                   help="results folder (default %(default)s)")
    p.add_argument("--machine", default=default_machine_name(),
                   help="ASV machine name (default: the host's, %(default)s)")
    p.add_argument("--device", default="auto", help="spyre, cuda, cpu or auto")
    p.add_argument("--tier", choices=sorted(TIERS), default="full",
                   help="benchmark tier (default %(default)s)")
    p.add_argument("--bench", metavar="REGEX", type=options.regex,
                   help="only benchmarks matching REGEX")
    p.add_argument("--no-commit", action="store_true", help="do not git-commit results")
    p.add_argument("--push", action="store_true", help="push the results commits at the end")
    p.add_argument("--dry-run", action="store_true", help="print the plan, measure nothing")
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def _shard(text: str) -> Shard:
    try:
        return Shard.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args) -> int:
    from harness.cli.common import LOCAL_DIR, device_kind
    from harness.report.tables import console
    from harness.runner import nightly
    from harness.runner.asv_suite import Options, run_targets
    from harness.runner.targets import commit_targets

    subject_timeout(args)     # a bad $SPYRE_BENCH_SUBJECT_TIMEOUT: before any work
    out = console()
    options = Options(repo=args.repo, results_dir=args.results_dir, machine=args.machine,
                      device=device_kind(args.device), tier=args.tier, bench=args.bench,
                      log_dir=LOCAL_DIR / "logs", branch=args.branch)
    history = nightly.first_parent_history(args.repo, args.branch)
    measured = {c for c in history if nightly.is_measured(options, c)}
    plan = nightly.plan(history, measured, args.max_new, args.backfill, args.backfill_step)
    whole, plan = plan, plan.only(args.shard)
    out.print(f"{args.branch}: {plan.history} commits, {plan.measured} measured on "
              f"{options.machine}; now {len(plan.new)} new + {len(plan.backfill)} backfill"
              + (f" (shard {args.shard} of a plan of {len(whole.commits)})"
                 if args.shard != WHOLE else ""), markup=False)
    if args.dry_run or not plan.commits:
        for c in plan.commits:
            out.print(f"  would measure {c[:12]}")
        return 0
    failed = 0
    from harness.runner.progress import LineProgress
    from harness.store.lock import results_lock
    with results_lock(args.results_dir), nightly.machine_lock(args.results_dir, options.machine), \
            LineProgress(lambda line: out.print(line, markup=False, highlight=False)) as progress:
        targets = commit_targets(args.repo, plan.commits)
        for i, target in enumerate(targets, start=1):
            out.print(f"[{i}/{len(targets)}] {target.label}", markup=False)
            try:
                for report in run_targets([target], options, progress):
                    failed += bool(report.failed_groups)
                    state = "ok" if not report.failed_groups else "failures in " + "; ".join(
                        f"{g}: {report.causes.get(g, '?')}" for g in report.failed_groups) + \
                        f" (log {report.log})"
                    out.print(f"  {state}, {report.seconds:.0f} s", markup=False)
                if not args.no_commit:
                    _commit(args, options, target, out)
            except KeyboardInterrupt:
                # A commit measured in full just before the signal is still committed on its
                # own; one cut short stays uncommitted and is measured again next run.
                if not args.no_commit and nightly.is_measured(options, target.commit):
                    _commit(args, options, target, out)
                raise
        if args.push:
            nightly.push(args.results_dir)
    if not args.no_commit and nightly.git_toplevel(args.results_dir) is None:
        raise HarnessError(f"{args.results_dir} is not in a git repository: results were "
                           "written but not committed (use --no-commit to say that is fine)")
    return 1 if failed else 0


def _commit(args, options, target, out) -> None:
    from harness.runner import nightly
    made = nightly.commit_results(args.results_dir, options.machine,
                                  f"results({options.machine}): {target.label}")
    if made:
        out.print(f"  committed {made[:12]}")
