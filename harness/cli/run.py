"""``spyre-bench run``: measure commits (or the embedded reference) with the ASV suite."""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

from harness.cli import options
from harness.cli.common import HISTORY_DIR, LOCAL_DIR, device_kind, warn
from harness.cli.options import subject_timeout
from harness.errors import HarnessError, Interrupted
from harness.matrix import TIERS
from harness.report.tables import console, table
from harness.runner.machine import default_machine_name
from harness.runner.reference_repo import ORDER

MAIN_JOB_POLICIES = ("pre-810", "post-810-clamp")
#: What the closing comparison gates on by default: the truth (a wrong kernel, a lost figure).
RUN_FAIL_ON = ("wrong", "lost")


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="run the ASV suite for commits, or the embedded reference (the main job)",
        description="Run the ASV suite (benchmarks/) in this Python environment, one commit at a "
                    "time, the way hardware machines do (torch-spyre cannot be installed into a "
                    "fresh virtualenv). Machine and environment names are stable, so runs from "
                    "different clones line up. With no REVISION and no --repo this is the main "
                    "job: the embedded reference subject (pre-#810 and #810 as merged), quick "
                    "tier, offline, on this machine's device, ending with their comparison (exact "
                    "figures from the stored results, kernel timings (and, for commits with a "
                    "builder of their own, host timings) of the two measured again interleaved, "
                    "as `compare --timings` does).",
        epilog="examples:\n"
               "  spyre-bench run                                  # the main job\n"
               "  spyre-bench run --repo ../spyre-inference main~3..main\n"
               "  spyre-bench run --repo ../spyre-inference v0.4.0 --tier full --device spyre\n"
               "results: results/ (where history, compare, report and changes read by "
               "default); the reference's files there are git-ignored, never committed. --smoke "
               "runs (ASV --quick) always go to a temporary folder.\n"
               "exit status: 0 measured, nothing flagged by --fail-on; 1 a benchmark failed, or "
               "the closing comparison shows what --fail-on names; 2 bad input, or nothing "
               "measured (every figure skipped).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("revisions", nargs="*", metavar="REVISION", type=options.revision,
                   help="commits of --repo: revision expressions or A..B ranges (oldest first)")
    p.add_argument("--repo", type=options.path, help="the spyre-inference git repository")
    p.add_argument("--branch", type=options.revision,
                   help="the branch ASV follows (default: the checkout's current "
                                    "branch); a warning says when no measured commit is on it")
    p.add_argument("--reference", default=",".join(MAIN_JOB_POLICIES), metavar="POLICY,..",
                   help=f"reference policies to run without --repo ({', '.join(ORDER)}; "
                        "default %(default)s)")
    p.add_argument("--tier", choices=sorted(TIERS), default="quick",
                   help="quick (PR) or full (nightly) matrix (default %(default)s)")
    p.add_argument("--results-dir", type=options.path,
                   help=f"where results go (default {HISTORY_DIR})")
    p.add_argument("--machine", default=default_machine_name(),
                   help="ASV machine name (default: this host's name, %(default)s)")
    p.add_argument("--device", default="auto",
                   help="spyre, cuda, cpu, or auto: spyre when torch_spyre imports, else cuda, "
                        "else cpu (default %(default)s)")
    p.add_argument("--bench", metavar="REGEX", type=options.regex,
                   help="only benchmarks matching REGEX")
    p.add_argument("--smoke", action="store_true",
                   help="one quick pass per benchmark (ASV --quick) into a temporary folder: "
                        "checks the suite runs, never touches stored history")
    p.add_argument("--remeasure", action="store_true",
                   help="measure commits again even when a finished run of the same tier and "
                        "--bench is stored (by default a rerun measures only what is missing)")
    p.add_argument("--no-compare", action="store_true",
                   help="skip the closing comparison of the first and last target")
    p.add_argument("--fail-on", default=",".join(RUN_FAIL_ON), metavar="WHAT,..",
                   help="what in the closing comparison exits 1, as in `compare --fail-on` "
                        "(wrong, lost, exact, regression, variants, incomparable; default "
                        "%(default)s: the "
                        "comparison of a run is for reading, `compare` is the gate)")
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def run(args) -> int:
    from harness.report.verdict import FAIL_ON
    from harness.runner.asv_suite import Options, run_targets
    from harness.runner.targets import commit_targets, reference_targets

    subject_timeout(args)     # a bad $SPYRE_BENCH_SUBJECT_TIMEOUT: said before any work
    fail_on = {f for f in args.fail_on.split(",") if f}
    if fail_on - set(FAIL_ON):
        raise HarnessError(f"--fail-on: unknown {sorted(fail_on - set(FAIL_ON))}; known: "
                           f"{', '.join(FAIL_ON)}")
    if args.revisions and not args.repo:
        raise HarnessError("REVISION needs --repo (the spyre-inference repository)")
    if args.repo:
        targets = commit_targets(args.repo, args.revisions or ["HEAD"])
        repo = args.repo
    else:
        repo = LOCAL_DIR / "reference-repo"
        targets = reference_targets(repo, [p for p in args.reference.split(",") if p])
    tmp = None
    if args.smoke:
        if args.results_dir:
            raise HarnessError("--smoke results are poor by design: they go to a temporary "
                               "folder, never to --results-dir or results/")
        tmp = tempfile.TemporaryDirectory(prefix="spyre-bench-smoke-")
        results_dir = Path(tmp.name)
    else:
        # one place for every run: where history, compare, report and changes read by default
        results_dir = args.results_dir or HISTORY_DIR
    options = Options(repo=repo, results_dir=results_dir, machine=args.machine,
                      device=device_kind(args.device), tier=args.tier, bench=args.bench,
                      smoke=args.smoke, log_dir=LOCAL_DIR / "logs", branch=args.branch,
                      remeasure=args.remeasure)
    out = console()
    if args.repo:
        _warn_off_branch(args.repo, options.branch, targets)
    compared = (targets[0], targets[-1]) if len(targets) >= 2 else None
    targets = list(dict.fromkeys(targets))    # a target named twice is measured once
    out.print(f"measuring {len(targets)} target(s) on machine {options.machine}, device "
              f"{options.device}, tier {options.tier} -> {results_dir}")
    reports = []
    try:
        # closing: an interrupt between two targets still ends the runner (its lock, its
        # temporary folder) before the last line is printed
        with _progress(out) as progress, \
                contextlib.closing(run_targets(targets, options, progress)) as measured:
            for report in measured:
                reports.append(report)
                state = ("ok" if not report.failed_groups else "failures in " + "; ".join(
                    f"{g}: {report.causes.get(g, '?')}" for g in report.failed_groups))
                if report.kept:
                    state += f" (kept from an earlier run: {', '.join(report.kept)})"
                out.print(f"  {report.target.label}: {state} in {report.seconds:.0f} s "
                          f"(log {report.log})", markup=False)
    except KeyboardInterrupt:
        # the last line (main prints it, exit status 3); the target in flight is recorded as
        # interrupted and a rerun measures only what is missing
        if tmp:
            tmp.cleanup()
        raise _interrupted(reports, targets, results_dir, args.smoke) from None
    try:
        counts = _summary(out, reports, results_dir)
        failed = [r.target.label for r in reports if r.failed_groups]
        if not failed and not counts["ok"]:
            # every figure skipped: stored (the skips are history too), but never a pass
            raise HarnessError(_nothing_measured(counts, reports, results_dir))
        code = 1 if failed else 0
        flagged = ""
        if compared and not args.no_compare:
            flagged = _compare(out, results_dir, *compared, options, fail_on)
        code = max(code, 1 if flagged else 0)
        gate = ",".join(f for f in FAIL_ON if f in fail_on) or "(nothing)"
        why = (f"failures in {', '.join(failed)}" if failed else
               f"the closing comparison shows {flagged} (--fail-on {gate})" if flagged else
               f"measured; nothing flagged by --fail-on {gate}")
        out.print(f"exit status {code}: {why}", markup=False, highlight=False)
        return code
    except KeyboardInterrupt:
        raise _interrupted(reports, targets, results_dir, args.smoke,
                           " (the closing comparison cut short)") from None
    finally:
        if tmp:
            tmp.cleanup()


def _interrupted(reports, targets, results_dir: Path, smoke: bool, then: str = "") -> Interrupted:
    """What an interrupted run says last: how many targets it finished and where they are."""
    kept = ("nothing kept (--smoke)" if smoke else f"their results kept in {results_dir}; a "
            "rerun measures only what is missing")
    return Interrupted(f"{len(reports)} of {len(targets)} target(s) complete{then}, {kept}")


def _warn_off_branch(repo: Path, branch: str | None, targets) -> None:
    """Say so when none of the commits measured is on the branch ASV follows."""
    from harness.runner.asv_suite import current_branch
    from harness.subjects.source import gitrev
    branch = branch or current_branch(repo)
    if gitrev.git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{branch}^{{commit}}",
                  check=False).returncode:
        raise HarnessError(f"--branch {branch!r}: no such branch in {repo}")
    on = [t for t in targets if not gitrev.git(repo, "merge-base", "--is-ancestor",
                                               "--end-of-options", t.commit, branch,
                                               check=False).returncode]
    if not on:
        warn(f"none of the {len(targets)} commit(s) measured is on branch {branch!r} (history "
             "views follow that branch; pass --branch)")


def _progress(out):
    if not out.is_terminal:
        from harness.runner.progress import LineProgress
        return LineProgress(lambda line: out.print(line, markup=False, highlight=False))
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    class _Bar:
        def __enter__(self):
            self.p = Progress(TextColumn("{task.description}"), BarColumn(),
                              TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                              console=out, transient=True)
            self.p.__enter__()
            self.tasks = {}
            return self

        def __call__(self, target, label, fraction):
            if target.commit not in self.tasks:
                self.tasks[target.commit] = self.p.add_task(target.label, total=1.0)
            self.p.update(self.tasks[target.commit], completed=fraction,
                          description=f"{target.label} [{label}]")

        def __exit__(self, *exc):
            return self.p.__exit__(*exc)

    return _Bar()


def _summary(out, reports, results_dir: Path) -> dict:
    """The run's table; returns the figures' counts by status over every target."""
    from harness.store.history import load_history_quietly
    frame = load_history_quietly(results_dir) if results_dir.exists() else None
    rows, total = [], {"ok": 0, "skipped": 0, "failed": 0}
    for r in reports:
        sub = frame[frame["commit"] == r.target.commit] if frame is not None else None
        counts = sub["status"].value_counts() if sub is not None else {}
        for k in total:
            total[k] += int(counts.get(k, 0))
        rows.append([r.target.label, r.target.commit[:12], counts.get("ok", 0),
                     counts.get("skipped", 0), counts.get("failed", 0), f"{r.seconds:.0f} s"])
    out.print(table("run summary", ["target", "commit", "ok", "skipped", "failed", "wall"],
                    rows))
    return total


def _nothing_measured(counts: dict, reports, results_dir: Path) -> str:
    """Why a run measured nothing, as the stored results say (never a count of zero skips)."""
    logs = f"(log {reports[0].log})" if len(reports) == 1 else "(their logs above)"
    if not counts["skipped"]:
        return (f"nothing measured: no figure of the {len(reports)} target(s) is stored in "
                f"{results_dir} {logs}")
    return (f"nothing measured: all {counts['skipped']:,} figures of {len(reports)} target(s) "
            f"skipped; first reason: {_first_skip(reports) or 'not recorded ' + logs}")


def _first_skip(reports) -> str | None:
    from harness.store import identity
    for r in reports:
        found = identity.read(r.results_file) if r.results_file else None
        for entry in (found.skipped if found else []):
            if entry.get("reason"):
                return entry["reason"]
    return None


def _compare(out, results_dir: Path, base, head, options, fail_on: set[str]) -> str:
    """The closing comparison, by compare's rules: exact figures from the stored results, kernel
    and host timings of the two subjects measured again here, interleaved (stored timings were
    taken one side after the other, minutes apart). Returns what it flags under ``fail_on`` (''
    if nothing)."""
    from harness.analyze.comparison import as_document
    from harness.analyze.stored import compare_stored
    from harness.report.verdict import exit_code, render_terminal
    from harness.runner.asv_suite import env_name
    from harness.store.history import load_history_quietly
    frame = load_history_quietly(results_dir)
    # this run's own series: plain ASV may have stored the same commits under another env name
    series = dict(machine=options.machine, env_name=env_name(options.device))
    stored = compare_stored(frame, base.commit, head.commit, **series)
    timed = bool(stored.timings) and not options.smoke
    comparison = (compare_stored(frame, base.commit, head.commit, timings=False, **series)
                  if timed else stored)
    out.rule("comparison: first target (base) vs last (head)")
    if timed:
        _time_interleaved(out, comparison, base, head, options)
    doc = as_document(comparison)
    render_terminal(comparison, out, doc=doc)
    print(file=sys.stdout)
    code = exit_code(doc, fail_on)
    if code == 1:
        return _flag_text(doc, fail_on)
    # 2 is nothing compared (not flagged: the run's own figures say so) or sides not comparable
    return "sides that are not comparable" if code == 2 and doc["problems"] else ""


def _time_interleaved(out, comparison, base, head, options) -> None:
    import torch

    from harness import suite
    from harness.analyze.subjects_now import add_host_run, add_kernel_run
    from harness.matrix import TIERS, tier_cases
    from harness.measure.host_run import time_host
    from harness.measure.interleaved import time_subjects
    from harness.worker import open_subject
    from harness.workloads import specs
    out.print(f"timing {base.label} and {head.label} interleaved ({options.tier} probes, "
              f"{suite.torch_threads()} torch thread(s)) ...", markup=False, highlight=False)
    torch.set_num_threads(suite.torch_threads())
    base_subject, head_subject = open_subject(base.spec), open_subject(head.spec)
    add_kernel_run(comparison, time_subjects(base_subject, head_subject, tier=options.tier,
                                             device=options.device))
    if any("forward" in s.capabilities for s in (base_subject, head_subject)):
        add_host_run(comparison, time_host(base_subject, head_subject, tier_cases(options.tier),
                                           specs(steps=TIERS[options.tier].steps)))


def _flag_text(doc: dict, fail_on: set[str]) -> str:
    from harness.report.verdict import flagged
    return ", ".join(flagged(doc, fail_on)) or "a flagged finding"
