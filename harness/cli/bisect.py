"""``spyre-bench bisect``: pin the first bad commit of a change point by measuring its range."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.cli import options
from harness.cli.common import HISTORY_DIR
from harness.cli.options import subject_timeout
from harness.errors import ConfigError
from harness.matrix import TIERS
from harness.runner.machine import default_machine_name


def register(sub) -> None:
    p = sub.add_parser(
        "bisect", help="measure inside a change point's range to pin its first bad commit",
        description="Binary search over the first-parent commits after GOOD up to BAD, measuring "
                    "only one series: --benchmark (an ASV benchmark name) with its parameters "
                    "(--param NAME=VALUE, values as Python literals). Measurements land in "
                    "--results-dir like any run's, so they also fill the history.",
        epilog="example: spyre-bench bisect --repo ../spyre-inference 1a2b3c4 5d6e7f8 "
               "--benchmark kernel.Decode.time_layer --param probe=small-4x8",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("good", type=options.revision, help="last good commit")
    p.add_argument("bad", type=options.revision, help="first bad commit measured")
    p.add_argument("--repo", type=options.path, required=True)
    p.add_argument("--benchmark", required=True, help="e.g. kernel.Decode.time_layer")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--results-dir", type=options.path, default=HISTORY_DIR)
    p.add_argument("--machine", default=default_machine_name())
    p.add_argument("--device", default="auto")
    p.add_argument("--tier", choices=sorted(TIERS), default="quick")
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def _params(items: list[str]) -> dict:
    import ast
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--param {item!r}: expected NAME=VALUE")
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out


def run(args) -> int:
    from harness.cli.common import LOCAL_DIR, device_kind
    from harness.report.tables import console
    from harness.runner.asv_suite import Options
    from harness.runner.bisect import bisect
    from harness.runner.progress import LineProgress
    from harness.store.lock import results_lock
    from harness.store.names import checked_name
    from harness.subjects.source import gitrev
    checked_name("--machine", args.machine)
    subject_timeout(args)     # a bad $SPYRE_BENCH_SUBJECT_TIMEOUT: before any work
    params = _params(args.param)
    names = _param_names(args.results_dir, args.benchmark, args.machine)
    missing = [n for n in names if n not in params]
    if missing or set(params) - set(names):
        raise ConfigError(f"{args.benchmark} takes parameters {names}; give each with --param "
                          f"(missing {missing}, unknown {sorted(set(params) - set(names))})")
    options = Options(repo=args.repo, results_dir=args.results_dir, machine=args.machine,
                      device=device_kind(args.device), tier=args.tier, log_dir=LOCAL_DIR / "logs")
    good = gitrev.resolve(f"git:{args.repo}@{args.good}", args.repo, args.good)
    bad = gitrev.resolve(f"git:{args.repo}@{args.bad}", args.repo, args.bad)
    out = console()
    with results_lock(args.results_dir), \
            LineProgress(lambda line: out.print(line, markup=False, highlight=False)) as progress:
        result = bisect(options, good, bad, args.benchmark, params, names, progress)
    for commit, value, verdict in result.steps:
        out.print(f"  {commit[:12]}: {value:.6g} -> {verdict}")
    subject = gitrev.git(args.repo, "log", "-1", "--format=%s", result.first_bad).stdout.decode()
    out.print(f"first bad commit: {result.first_bad} {subject.strip()}", markup=False)
    print(json.dumps({"first_bad": result.first_bad, "steps": result.steps}))
    return 0


def _param_names(results_dir: Path, benchmark: str, machine: str) -> list[str]:
    """The benchmark's parameter names, from the benchmarks.json of the last run."""
    from harness.cli.common import warn
    from harness.store.jsonfile import read_json
    from harness.store.results_format import benchmarks_problem
    for path in (results_dir / machine / "benchmarks.json", results_dir / "benchmarks.json"):
        try:
            data = read_json(path)
            problem = benchmarks_problem(data)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, ValueError) as exc:
            problem = getattr(exc, "strerror", None) or str(exc)
        if problem:
            warn(f"{path}: unreadable benchmarks.json ({problem}); skipped")
        elif isinstance(data.get(benchmark), dict):
            return list(data[benchmark].get("param_names", []))
    raise ConfigError(f"unknown benchmark {benchmark!r}: not in {results_dir}'s benchmarks.json "
                      "(measure the range's endpoints first)")
