"""``spyre-bench merge``: the shards of a backfill, measured on several runners, into one history."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import HISTORY_DIR


def register(sub) -> None:
    p = sub.add_parser(
        "merge", help="merge machine folders measured apart (nightly --shard) into results",
        description="Merge machine folders that runners measured apart (the shards of "
                    "`nightly --shard I/N`, as their artifacts) into the results folder. Each "
                    "folder is checked as data: plain files with the names a machine folder "
                    "holds, each readable as what its name says, all of the machine its "
                    "machine.json names. Per-commit files are a union; a file two folders both "
                    "hold must agree apart from timing fields (started_at, duration, a timed "
                    "benchmark's samples, the sidecar's written_at), else the merge stops with "
                    "one line naming the file and writes nothing. Files already in the results "
                    "folder are replaced (results/README.md, \"How machines merge\").",
        epilog="example (the nightly workflow's merge job):\n"
               "  spyre-bench merge --results-dir merged incoming/results-spyre-0-*",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="+", type=Path, metavar="FOLDER",
                   help="a shard's machine folder (its results/<machine>)")
    p.add_argument("--results-dir", type=Path, default=HISTORY_DIR,
                   help="results folder to merge into (default %(default)s)")
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def run(args) -> int:
    from harness.report.tables import console
    from harness.store.lock import results_lock
    from harness.store.merge import checked, write

    out = console()
    files = checked(args.folders)        # every folder read and checked before any write
    args.results_dir.mkdir(parents=True, exist_ok=True)
    with results_lock(args.results_dir):
        written = write(files, args.results_dir)
    for machine, names in written.items():
        commits = {n[:8] for n in names if n not in ("machine.json", "benchmarks.json")}
        out.print(f"{machine}: {len(names)} files ({len(commits)} commits) from "
                  f"{len(args.folders)} folders into {args.results_dir / machine}", markup=False)
    return 0
