"""Exact tier into ASV results in process: seconds per commit, a backfill, bytes per commit.

    python -m tests.bench.backfill --tier quick --commits 100     # the issue-11 backfill figure
    python -m tests.bench.backfill --tier full --commits 1        # bytes per commit, full tier
    python -m tests.bench.backfill --first gen3 --commits 1       # one commit in a fresh process
    python -m tests.bench.backfill --repo /src/spyre-inference --rev main --commits 100
    python -m tests.bench.backfill --repo /src/spyre-inference --revs gen3,docs-on-gen3

Commits are fixture commits (tests.fixtures.spyre_repo): the generations, then docs-only commits
on top of #810 as merged, so every commit has a bucketer and costs the full tier. With ``--repo``
they are a real repository's: the last ``--commits`` of ``--rev``'s first-parent history,
oldest first, or exactly ``--revs``. Prints seconds per commit (min/median/max, the slowest),
the total, and the bytes of the results files per commit and machine. The figure memo is the
one the env names (``SPYRE_BENCH_MEMO_DIR``; else one under the run's own temporary HOME, so
cold): point it at a warm folder to measure a warm backfill.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
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
    p.add_argument("--repo", type=Path, help="a real spyre-inference repository instead of the "
                                             "fixture")
    p.add_argument("--rev", default="main", help="with --repo: whose first-parent history")
    p.add_argument("--revs", help="with --repo: exactly these revisions, comma-separated")
    args = p.parse_args(argv)
    from harness.runner.inprocess import write_exact
    from harness.runner.machine import ensure_machine
    from tests.fixtures.spyre_repo import build_repo
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["HOME"] = str(tmp)
        ensure_machine("bench-box")
        if args.repo is not None:
            path, commits = args.repo.resolve(), real_commits(args)
            names = [c[:12] for c in commits]
        else:
            repo = build_repo(tmp / "spyre-inference")
            path = repo.path
            names = [args.first, *(g for g in GENERATIONS if g != args.first)]
            commits = [repo.commits[n] for n in names]
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
            write_exact(spec=f"git:{path}@{commit}", commit=commit, repo=path,
                        results_dir=tmp / "results", machine="bench-box",
                        env_name="spyre-bench-py3.11-cpu", tier=args.tier)
            seconds.append(time.perf_counter() - t)
        total = time.perf_counter() - start
        sizes = [f.stat().st_size for f in (tmp / "results" / "bench-box").glob("*-spyre-*.json")]
        print(f"tier {args.tier}: {len(commits)} commits in {total:.1f} s; per commit min "
              f"{min(seconds):.2f} s, median {statistics.median(seconds):.2f} s, max "
              f"{max(seconds):.2f} s; results file median {statistics.median(sizes):,.0f} bytes,"
              f" max {max(sizes):,} bytes, {sum(sizes):,} bytes in all, per machine "
              f"(+ identity sidecar when written by spyre-bench run)")
        slowest = sorted(zip(seconds, names), reverse=True)[:5]
        print("in order: " + ", ".join(f"{n} {s:.2f} s" for n, s in zip(names, seconds))
              if len(commits) <= 10 else
              "slowest: " + ", ".join(f"{n} {s:.2f} s" for s, n in slowest))
    return 0


def real_commits(args) -> list[str]:
    """Full hashes: ``--revs`` as given, else the last ``--commits`` of ``--rev``'s first-parent
    history, oldest first."""
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(args.repo), *a], capture_output=True,
                              text=True, check=True).stdout

    if args.revs:
        return [git("rev-parse", "--verify", f"{r}^{{commit}}").strip()
                for r in args.revs.split(",")]
    return git("rev-list", "--first-parent", f"--max-count={args.commits}",
               args.rev).split()[::-1]


if __name__ == "__main__":
    raise SystemExit(main())
