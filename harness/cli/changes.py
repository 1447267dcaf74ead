"""``spyre-bench changes``: change points over the stored history, grouped into regressions."""

from __future__ import annotations

import argparse
import json

from harness.cli import options
from harness.cli.common import HISTORY_DIR
from harness.errors import HarnessError, writing
from harness.outputs import output_file, write_text


def register(sub) -> None:
    p = sub.add_parser(
        "changes", help="detect change points in the stored history (one issue per regression)",
        description="Find change points per series (machine, environment, benchmark, "
                    "parameters): every change of an exact figure between consecutive measured "
                    "commits, and timing steps found by ASV's step detection past the threshold "
                    "asv.conf.json's regressions_thresholds gives the benchmark. Change points "
                    "over the same commit range form one regression, named by its first bad "
                    "commit and the range it could be in. A range counts as a regression by its worse "
                    "figures only: one whose every figure improved is listed as an "
                    "improvement (no issue, no exit 1); --json lists the regressions.",
        epilog="exit codes: 0 no regression, 1 regressions found, 2 bad input or nothing "
               "measured (no results on the branch, or every figure skipped)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results-dir", type=options.path, default=HISTORY_DIR,
                   help="ASV results folder (default %(default)s, where `run` writes)")
    p.add_argument("--repo", type=options.path,
                   help="the spyre-inference repository: commit order and ranges come from its "
                        "first-parent history (default: commit dates)")
    p.add_argument("--branch", type=options.revision,
                   help="branch of --repo whose history orders the commits "
                   "(default: the branch checked out there)")
    p.add_argument("--machine", help="only this machine's series")
    p.add_argument("--json", type=output_file, metavar="FILE",
                   help="machine-readable list ('-': stdout)")
    p.add_argument("--issues-dir", type=options.path, metavar="DIR",
                   help="write one markdown issue body per regression (<key>.md)")
    p.add_argument("--repo-url", help="commit links in the markdown, e.g. "
                   "https://github.com/torch-spyre/spyre-inference")
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def run(args) -> int:
    from harness.analyze.regressions import detect_regressions
    from harness.cli.common import warn
    from harness.report.issues import issue_markdown
    from harness.report.tables import console, table
    frame, changes, order = detect_regressions(args.results_dir, args.repo, args.branch,
                                               args.machine, warn)
    nothing = _coverage(frame, order, args, warn)
    # a change counts by its worse entries: one whose every figure improved is listed, not counted
    regressions = [r for r in changes if r.is_regression]
    improvements = [r for r in changes if not r.is_regression]
    if args.json:
        text = json.dumps([r.as_dict() for r in regressions], indent=1)
        if str(args.json) == "-":
            print(text)
        else:
            write_text(args.json, text)
    if args.issues_dir:
        with writing(args.issues_dir):
            args.issues_dir.mkdir(parents=True, exist_ok=True)
            for r in regressions:
                write_text(args.issues_dir / f"{r.key.replace('..', '-')}.md",
                           issue_markdown(r, args.repo_url))
    if str(args.json) != "-":
        rows = [[r.first_bad[:12], r.last_good[:12], len(r.candidates), r.kind,
                 f"{len(r.worse)} worse, {len(r.points) - len(r.worse)} better",
                 (r.worse or r.points)[0].benchmark] for r in regressions + improvements]
        console().print(table(f"{len(regressions)} regression(s), {len(improvements)} "
                              f"improvement(s) in {frame['commit'].nunique()} commits",
                              ["first bad", "last good", "in range", "kind", "series", "e.g."],
                              rows))
    if nothing:
        raise HarnessError(nothing)     # "0 regressions" over nothing measured is no pass
    return 1 if regressions else 0


#: Above this share of skipped figures, ``changes`` says its verdict rests on few series.
MOSTLY_SKIPPED = 0.5


def _coverage(frame, order, args, warn) -> str | None:
    """Warn when the history looked at holds no data or mostly skips; returns why nothing was
    measured (the command then exits 2), or None."""
    where = f"{args.results_dir}" + (f" (machine {args.machine})" if args.machine else "")
    if order is not None:
        frame = frame[frame["commit"].isin(set(order))]
        where += f" on branch {args.branch or 'checked out in ' + str(args.repo)}"
    counts = frame["status"].value_counts()
    ok, skipped = int(counts.get("ok", 0)), int(counts.get("skipped", 0))
    if frame.empty:
        warn(f"no results in {where}: no commit measured, nothing to compare")
        return f"nothing measured: no results in {where}"
    if not ok:
        return (f"nothing measured: all {len(frame):,} figures of {frame['commit'].nunique()} "
                f"commit(s) in {where} are skipped or failed")
    if skipped > MOSTLY_SKIPPED * len(frame):
        warn(f"{skipped:,} of {len(frame):,} figures in {where} are skipped (measured: {ok:,}): "
             "change points can only be found in the measured ones")
    return None
