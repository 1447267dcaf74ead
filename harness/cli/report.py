"""``spyre-bench report``: the dashboard: a static report page plus ASV's per-benchmark graphs."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import options
from harness.cli.common import HISTORY_DIR
from harness.errors import writing


def register(sub) -> None:
    p = sub.add_parser(
        "report", help="build the dashboard: report page + asv publish graphs",
        description="Write a static site: index.html (ladders per config over time, padding and "
                    "iterations per workload, compile counts per commit, kernel time per device, "
                    "efficiency per commit: padding efficiency per workload, kernel efficiency and "
                    "the fraction of the roofline per probe against the bandwidth each run stored "
                    "in its machine's info; the latest change points; plots inline, no script, no "
                    "network) and, with "
                    "--asv, ASV's own per-benchmark graphs under asv/.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results-dir", type=options.path, default=HISTORY_DIR,
                   help="ASV results folder (default %(default)s, where `run` writes)")
    p.add_argument("--repo", type=options.path, help="spyre-inference repository (commit order, titles)")
    p.add_argument("--branch", type=options.revision,
                   help="branch of --repo whose history orders the commits "
                   "(default: the branch checked out there)")
    p.add_argument("--out", type=options.path, default=Path(".asv/site"),
                   help="output folder (default %(default)s)")
    p.add_argument("--asv", action="store_true",
                   help="also run `asv publish` into OUT/asv (needs --repo)")
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def run(args) -> int:
    from harness.analyze.regressions import detect_regressions
    from harness.cli.common import warn
    from harness.report.site import Commit, build
    from harness.runner.asv_publish import publish_asv_site
    from harness.subjects.source import gitrev
    if args.asv and not args.repo:
        from harness.errors import ConfigError
        raise ConfigError("--asv needs --repo (asv publish reads the repository)")
    frame, regressions, order = detect_regressions(args.results_dir, args.repo, args.branch,
                                                   warn=warn)
    measured = set(frame["commit"])
    if order:
        hashes = [c for c in order if c in measured]
        titles = {c: gitrev.git(args.repo, "log", "-1", "--format=%s", c).stdout.decode().strip()
                  for c in hashes}
    else:
        hashes = list(frame.sort_values("date")["commit"].drop_duplicates())
        titles = {}
    commits = [Commit(c, f"{c[:12]} {titles.get(c, '')}".strip()) for c in hashes]
    asv_link = None
    with writing(args.out):
        args.out.mkdir(parents=True, exist_ok=True)  # before asv publish spends minutes
    if args.asv:
        publish_asv_site(args.results_dir, args.repo, args.out / "asv")
        asv_link = "asv/index.html"
    with writing(args.out):
        index = build(frame, regressions, commits, args.out, asv_link=asv_link)
    print(f"wrote {index} ({len(commits)} commits, {len(regressions)} regressions)")
    return 0
