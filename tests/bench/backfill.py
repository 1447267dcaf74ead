"""Exact tier into ASV results in process: seconds per commit, a backfill, bytes per commit.

    python -m tests.bench.backfill --tier quick --commits 100     # the issue-11 backfill figure
    python -m tests.bench.backfill --tier full --commits 1        # bytes per commit, full tier
    python -m tests.bench.backfill --first gen3 --commits 1       # one commit in a fresh process

Commits are fixture commits (tests.fixtures.spyre_repo): the generations, then docs-only commits
on top of #810 as merged, so every commit has a bucketer and costs the full tier. Prints seconds
per commit (min/median/max), the total, and the bytes of one results file per tier and machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

#: The fixture's generation commits, each driven through its own builder.
GENERATIONS = ("pre-810", "810-topup", "810-clamp", "gen3", "gen4")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tier", default="quick")
    p.add_argument("--commits", type=int, default=100)
    p.add_argument("--first", choices=GENERATIONS, default=GENERATIONS[0],
                   help="the generation measured first (with --commits 1: alone, imports included)")
    args = p.parse_args(argv)
    from harness.runner.inprocess import write_exact
    from harness.runner.machine import ensure_machine
    from tests.fixtures.spyre_repo import build_repo
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["HOME"] = str(tmp)
        ensure_machine("bench-box")
        repo = build_repo(tmp / "spyre-inference")
        generations = (args.first, *(g for g in GENERATIONS if g != args.first))
        commits = [repo.commits[n] for n in generations]
        parent = "810-clamp"
        while len(commits) < args.commits:
            parent = repo.add_commit({"NOTES.md": f"notes {len(commits)}\n"}, "docs",
                                     parent=parent)
            commits.append(parent)
        commits = commits[:args.commits]
        seconds = []
        start = time.perf_counter()
        for commit in commits:
            t = time.perf_counter()
            write_exact(spec=f"git:{repo.path}@{commit}", commit=commit, repo=repo.path,
                        results_dir=tmp / "results", machine="bench-box",
                        env_name="spyre-bench-py3.11-cpu", tier=args.tier)
            seconds.append(time.perf_counter() - t)
        total = time.perf_counter() - start
        sizes = [f.stat().st_size for f in (tmp / "results" / "bench-box").glob("*-spyre-*.json")]
        print(f"tier {args.tier}: {len(commits)} commits in {total:.1f} s; per commit min "
              f"{min(seconds):.2f} s, median {statistics.median(seconds):.2f} s, max "
              f"{max(seconds):.2f} s; results file {statistics.median(sizes):,.0f} bytes per "
              f"commit per machine (+ identity sidecar when written by spyre-bench run)")
        print("through each generation's own builder: " + ", ".join(
            f"{name} {sec:.2f} s" for name, sec in zip(generations, seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
