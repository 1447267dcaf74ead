"""How long does a PR verdict take, end to end, and how does it scale with the cores?

    python scripts/pr_verdict_time.py --base git:REPO@BASE --head git:REPO@HEAD
    python scripts/pr_verdict_time.py --base ... --head ... --jobs 1,2,all --repeat 2
    python scripts/pr_verdict_time.py --workflow --repo REPO --base BASE --head HEAD

Times the whole ``spyre-bench compare --base --head --tier quick --timings --json`` command as
a user (or CI) runs it, cold: every run with a figure memo of its own, empty
(``SPYRE_BENCH_MEMO_DIR``), once per ``SPYRE_BENCH_JOBS`` value (``all``: the cores this process
may use). Per run: wall seconds, CPU seconds of the command and every process it started, the
load average before and after (the machine is shared: a wall time means little without it),
the exit status and the comparison's headline counts. ``--warm`` keeps one memo for every run
after a first that fills it (a docs-only head then reads the base's figures). ``--keep DIR``
keeps each run's document (the host build() times, verdicts and profiles of a timed run).

``--workflow`` runs .github/workflows/pr-bench.yml's ``bench`` job as written (every ``run:``
step, tests/actions_runner.py standing in for GitHub's runner) on REPO, with spyre-bench pinned
to this checkout's HEAD: install, compare, package, upload; it prints the job's wall seconds and
its result.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="subject spec (or, with --workflow, a rev)")
    p.add_argument("--head", required=True, help="subject spec (or, with --workflow, a rev)")
    p.add_argument("--jobs", default="1,2,all", help="SPYRE_BENCH_JOBS values (default %(default)s)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--tier", default="quick")
    p.add_argument("--warm", action="store_true", help="one memo for all runs (see above)")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="keep each run's --json document in DIR (jobs<N>-run<n>.json)")
    p.add_argument("--workflow", action="store_true", help="run pr-bench.yml's job instead")
    p.add_argument("--repo", help="with --workflow: the spyre-inference repository")
    args = p.parse_args(argv)
    if args.workflow:
        return _workflow(args)
    cores = len(os.sched_getaffinity(0))
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pr-verdict-") as tmp:
        for n in range(args.repeat):
            for jobs in args.jobs.split(","):
                value = str(cores) if jobs == "all" else jobs
                memo = Path(tmp) / ("memo" if args.warm else f"memo-{n}-{jobs}")
                out = (args.keep / f"jobs{value}-run{n}.json" if args.keep
                       else Path(tmp) / "c.json")
                _one(args, value, memo, out)
    return 0


def _one(args, jobs: str, memo: Path, out: Path) -> None:
    env = {**os.environ, "SPYRE_BENCH_JOBS": jobs, "SPYRE_BENCH_MEMO_DIR": str(memo)}
    cmd = [sys.executable, "-m", "harness", "compare", "--base", args.base, "--head", args.head,
           "--tier", args.tier, "--timings", "--json", str(out)]
    before, load0 = resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg()[0]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    after, load1 = resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg()[0]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    try:
        doc = json.loads(out.read_text())
        kinds: dict[str, int] = {}
        for t in doc["timings"]:
            kinds[t["verdict"]["kind"]] = kinds.get(t["verdict"]["kind"], 0) + 1
        said = (f"exact {len(doc['exact_changed'])}/{doc['exact_compared']} changed, "
                f"timings {kinds or 'none'}")
    except (OSError, ValueError, KeyError):
        said = done.stderr.strip().splitlines()[-1:] or "no document"
    print(f"jobs={jobs:>3}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, load {load0:.1f} -> {load1:.1f}, "
          f"exit {done.returncode}; {said}", flush=True)
    if not args.keep:
        out.unlink(missing_ok=True)


def _workflow(args) -> int:
    import yaml

    from tests.actions_runner import Runner
    workflows = ROOT / ".github" / "workflows"
    env = yaml.safe_load((workflows / "pr-bench.yml").read_text())["env"]
    head_sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    repo = "torch-spyre/spyre-inference"
    rev = lambda r: subprocess.run(["git", "-C", args.repo, "rev-parse", r],  # noqa: E731
                                   capture_output=True, text=True, check=True).stdout.strip()
    base, head = rev(args.base), rev(args.head)
    with tempfile.TemporaryDirectory(prefix="pr-job-") as tmp:
        runner = Runner(Path(tmp), {repo: Path(args.repo), env["SPYRE_BENCH_REPOSITORY"]: ROOT},
                        env={"SPYRE_BENCH_MEMO_DIR": str(Path(tmp) / "memo")})
        event = {"repository": {"name": "spyre-inference", "full_name": repo},
                 "pull_request": {"number": 1, "head": {"sha": head, "ref": "feature",
                                                        "repo": {"full_name": repo}},
                                  "base": {"sha": base, "ref": "main"}}}
        load0, t0 = os.getloadavg()[0], time.perf_counter()
        job = runner.run_job(workflows / "pr-bench.yml", "bench",
                             {"repository": repo, "event_name": "pull_request", "event": event,
                              "sha": head, "token": "ghs_read_only", "run_id": "1"},
                             run_id="1", env_overrides={"SPYRE_BENCH_REF": head_sha,
                                                        "SPYRE_BENCH_TIER": args.tier})
        wall = time.perf_counter() - t0
        code = job["steps"].get("compare", {}).get("outputs", {}).get("exit-code")
        print(f"pr-bench.yml bench job: {wall:.1f} s wall, load {load0:.1f} -> "
              f"{os.getloadavg()[0]:.1f}; result {job['result']}, compare exit {code}")
        if job["result"] != "success":
            print("\n".join(runner.transcript().splitlines()[-40:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
