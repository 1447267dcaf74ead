"""Run the ASV suite for a list of targets (commits with the subject each one stands for).

One ``asv run --set-commit-hash`` per (target, benchmark group) in the current interpreter's
environment, so an interrupt loses at most the group in flight: ASV saves a results file only when
a run ends, and each run merges into the commit's existing file. After each target an identity
sidecar records what ASV cannot: the subject spec, the harness and device, and why benchmarks
were skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness import __version__, suite
from harness.errors import HarnessError
from harness.runner.asv_config import PROJECT_ROOT, write_config
from harness.runner.machine import ensure_machine
from harness.runner.sessions import end_session
from harness.store.compact import compact_results
from harness.store.lock import check_writable, results_lock
from harness.store.names import checked_name
from harness.subjects.source import gitrev

#: Benchmark groups, each its own ``asv run`` (name regex, label).
#: The exact tier is computed in this process (harness.runner.inprocess), ``None`` as its regex
#: meaning "all of it"; everything else goes through ASV's runner.
EXACT = "exact (in process)"
GROUPS = ((None, EXACT), ("^kernel\\.", "kernel"), ("^host\\.", "host"))
ENV_NAME_TOOL = "spyre-bench"
_PERCENT = re.compile(r"^\[\s*(\d+(?:\.\d+)?)%\]")


@dataclass(frozen=True)
class Target:
    """One commit to measure and the subject spec the suite loads for it."""

    label: str
    commit: str
    spec: str


@dataclass
class Options:
    repo: Path
    results_dir: Path
    machine: str
    device: str
    tier: str = "quick"
    bench: str | None = None
    smoke: bool = False
    log_dir: Path = field(default_factory=lambda: Path(".asv") / "logs")
    #: The branch ASV resolves (its config's ``branches``): the checkout's current one by default.
    branch: str | None = None
    #: Measure commits again even when a finished run of the same selection is stored.
    remeasure: bool = False

    def __post_init__(self):
        checked_name("--machine", self.machine)
        checked_name("--device", self.device)


@dataclass
class TargetReport:
    target: Target
    seconds: float
    results_file: Path | None
    failed_groups: list[str]
    log: Path
    #: Groups kept from an earlier run of the same selection instead of measured again.
    kept: list[str] = field(default_factory=list)
    #: Per failed group, the line of ASV's output that says why (what the user sees first).
    causes: dict[str, str] = field(default_factory=dict)


def env_name(device: str) -> str:
    return f"{ENV_NAME_TOOL}-py{sys.version_info[0]}.{sys.version_info[1]}-{device}"


def harness_commit() -> str | None:
    proc = gitrev.git(PROJECT_ROOT, "rev-parse", "HEAD", check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def results_file(options: Options, commit: str) -> Path:
    checked_name("environment", env_name(options.device))
    return options.results_dir / options.machine / f"{commit[:8]}-{env_name(options.device)}.json"


def _asv_command(config: Path, commit: str, options: Options, bench: str) -> list[str]:
    cmd = [sys.executable, "-m", "asv", "run", "--config", str(config),
           "-E", f"{ENV_NAME_TOOL}:{sys.executable}", "--set-commit-hash", commit,
           "--machine", options.machine, "--record-samples", "--show-stderr", "--bench", bench]
    if options.smoke:
        cmd.append("--quick")
    return cmd


def _groups(options: Options) -> list[tuple[str | None, str]]:
    if options.bench:
        # the exact part in process with the same regex; ASV gets what is not exact
        return [(options.bench, EXACT),
                (rf"^(?!exact\.)(?=.*?(?:{options.bench}))", f"--bench {options.bench}")]
    return list(GROUPS)


#: ASV output lines that state why a step failed (the first such line is the cause shown).
_CAUSE = re.compile(r"(Unknown branch|UserError|Error|error:|Traceback|failed|No such|not found)",
                    re.IGNORECASE)


def _cause(lines: list[str]) -> str:
    """The line of a failed ASV step's output that names its cause."""
    for line in lines:
        text = line.strip().lstrip("·").strip()
        if text and _CAUSE.search(text) and not text.startswith("File "):
            return text[:300]
    tail = [ln.strip() for ln in lines if ln.strip()]
    return tail[-1][:300] if tail else "no output"


NOTHING_SELECTED = "no benchmark selected"


def _run_group(cmd: list[str], env: dict, log, on_percent: Callable[[float], None]
               ) -> tuple[int, str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=PROJECT_ROOT, start_new_session=True)
    try:
        selected = True
        seen: list[str] = []
        log.flush()
        for line in proc.stdout:
            log.write(line)
            seen.append(line)
            selected = selected and "No benchmarks selected" not in line
            m = _PERCENT.match(line.strip())
            if m:
                on_percent(float(m.group(1)))
        code = proc.wait()
        if not selected:
            return 0, NOTHING_SELECTED
        return code, (_cause(seen) if code else "")
    except BaseException:
        # stop ASV and its benchmark processes (each in a group of its own, all in ASV's
        # session); what earlier groups saved stays saved
        end_session(proc)
        raise


def subject_snapshot(spec: str, tier: str) -> tuple[list, dict | None]:
    """What ASV cannot store (it stores numbers): the subject's ladders for every config of the
    tier, and the content hash of each attention-path module it ran (None: no source tree)."""
    from harness.evaluate import config_figures
    from harness.matrix import TIERS, tier_cases
    from harness.worker import open_subject
    try:
        subject = open_subject(spec)
    except HarnessError as exc:
        return [{"skipped": str(exc)}], None
    out = []
    with contextlib.closing(subject):   # one worker per target, ended before the next
        names = suite.key_names(TIERS[tier])
        for case in tier_cases(tier):
            fig = config_figures(subject, case)
            out.append({"config": dict(zip(names, suite.case_key(case, TIERS[tier]))),
                        "ladders": fig.get("ladders") or {"skipped": fig["skipped"]}})
    return out, subject.sources


def write_identity(path: Path, target: Target, options: Options, skipped: list[dict],
                   interrupted: bool, groups_done: list[str] | None = None) -> Path:
    from harness.store.identity import Identity
    ladders, sources = subject_snapshot(target.spec, options.tier)
    return Identity(subject=target.spec, commit=target.commit, label=target.label,
                    harness_version=__version__, harness_commit=harness_commit(),
                    device=options.device, tier=options.tier, python=sys.version.split()[0],
                    skipped=skipped, interrupted=interrupted, bench=options.bench,
                    groups_done=list(groups_done or []), ladders=ladders,
                    sources=sources).write(path)


def run_targets(targets: list[Target], options: Options, progress=None) -> Iterator[TargetReport]:
    """Measure each target in turn, yielding a report as each one finishes."""
    check_writable(options.results_dir, options.machine)
    options.log_dir.mkdir(parents=True, exist_ok=True)
    groups = _groups(options)
    with results_lock(options.results_dir), \
            tempfile.TemporaryDirectory(prefix="spyre-bench-asv-") as tmp:
        # the bandwidth efficiency is judged against, in the machine's info (and so in every
        # results file): measured once per machine and cached, else the published figure
        from harness.runner.exact_process import machine_fields
        ensure_machine(options.machine, fields=machine_fields(options.device))
        config = write_config(Path(tmp) / "asv.conf.json", options.repo, options.results_dir,
                              branches=[options.branch or current_branch(options.repo)])
        for target in targets:
            yield _run_target(target, options, config, groups, progress)


def current_branch(repo: Path) -> str:
    """The checkout's current branch, or ``HEAD`` when detached (what ASV resolves)."""
    out = gitrev.git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    branch = out.stdout.decode().strip() if out.returncode == 0 else ""
    return branch or "HEAD"


def _run_target(target: Target, options: Options, config: Path, groups, progress) -> TargetReport:
    started = time.monotonic()
    # pid in the name: two commands started in the same second never share a log
    log_path = (options.log_dir /
                f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{target.commit[:8]}.log")
    failed: list[str] = []
    causes: dict[str, str] = {}
    skip_log = log_path.with_suffix(".skips")
    interrupted = True
    resumed: list[str] = []
    with log_path.open("x") as log:
        env = {**os.environ, suite.SUBJECT_ENV: target.spec, suite.TIER_ENV: options.tier,
               suite.SKIP_LOG_ENV: str(skip_log.resolve()), "SPYRE_BENCH_DEVICE": options.device,
               **_asv_tmpdir(config.parent)}
        resumed = [label for _, label in groups
                   if label in _groups_already_done(target, options)]
        done: list[str] = list(resumed)
        kept_skips = _previous_skips(target, options) if resumed else []
        try:
            selected = len(resumed)
            for i, (bench, label) in enumerate(groups):
                if label in resumed:
                    log.write(f"{label}: kept from an earlier run\n")
                    continue
                def on_percent(p, i=i, label=label):
                    if progress:
                        progress(target, label, (i + p / 100) / len(groups))
                on_percent(0)
                if label == EXACT:
                    code, cause, found = _run_exact(target, options, bench, skip_log, log)
                else:
                    log.write(f"$ {' '.join(_asv_command(config, target.commit, options, bench))}"
                              "\n")
                    code, cause = _run_group(_asv_command(config, target.commit, options, bench),
                                             env, log, on_percent)
                    found = cause != NOTHING_SELECTED
                selected += found
                if code != 0:
                    failed.append(label)
                    causes[label] = cause
                else:
                    done.append(label)
            if not selected:
                raise HarnessError(f"no benchmark matches --bench {options.bench!r} "
                                   "(parameterized names end in '(params)': do not anchor with $)")
            interrupted = False
        finally:
            out = results_file(options, target.commit)
            if out.exists():
                compact_results(out)     # after the last group: ASV's saves add blanks back
                write_identity(out, target, options, kept_skips + _read_skips(skip_log),
                               interrupted, done)
            skip_log.unlink(missing_ok=True)
    shared = options.results_dir / "benchmarks.json"
    if shared.exists():
        # a copy per machine: machines then never write the same file, so their results merge
        # without conflicts (results/README.md)
        tmp = options.results_dir / options.machine / "benchmarks.json.tmp"
        tmp.write_bytes(shared.read_bytes())
        tmp.replace(tmp.with_suffix(""))
    out = results_file(options, target.commit)
    return TargetReport(target, time.monotonic() - started, out if out.exists() else None, failed,
                        log_path, kept=resumed, causes=causes)


#: ASV's benchmark server listens on ``<TMPDIR>/asv-forkserver-XXXXXXXX/socket``: AF_UNIX paths
#: end at 107 bytes, so its files are moved into the run's folder only while that path fits.
_SOCKET_ROOM = 107 - len("/asv-forkserver-XXXXXXXX/socket")


def _asv_tmpdir(folder: Path) -> dict:
    """ASV's temporary files inside the run's folder, which an interrupt removes with them."""
    return {"TMPDIR": str(folder)} if len(os.fsencode(folder)) < _SOCKET_ROOM else {}


def _groups_already_done(target: Target, options: Options) -> list[str]:
    """Groups a run of the same target, tier and selection already finished: a rerun measures
    only what is missing (everything again with ``remeasure``)."""
    from harness.store import identity
    path = results_file(options, target.commit)
    found = identity.read(path) if path.exists() and not options.remeasure else None
    if found is None:
        return []
    same = (found.tier, found.bench, found.subject) == (options.tier, options.bench, target.spec)
    return list(found.groups_done) if same else []


def _previous_skips(target: Target, options: Options) -> list[dict]:
    from harness.store import identity
    found = identity.read(results_file(options, target.commit))
    return list(found.skipped) if found else []


def _run_exact(target: Target, options: Options, bench: str | None, skip_log: Path,
               log) -> tuple[int, str, bool]:
    """The exact tier in one process of its own, stored through asv.results
    (harness.runner.inprocess, harness.runner.exact_process)."""
    from harness.runner.exact_process import run_exact
    log.write(f"$ exact tier in one process: {target.spec} --bench {bench}\n")
    t0 = time.monotonic()
    stored, failed, ended = run_exact(
        log, spec=target.spec, commit=target.commit, repo=options.repo,
        results_dir=options.results_dir, machine=options.machine,
        env_name=env_name(options.device), tier=options.tier, bench=bench,
        skip_log=skip_log.resolve())
    log.write(f"stored {stored} exact benchmarks ({failed} with failures) in "
              f"{time.monotonic() - t0:.1f} s\n")
    cause = ended or (f"{failed} exact benchmark(s) failed (log)" if failed else "")
    return (1 if failed else 0), cause, bool(stored) or bool(ended)


def _read_skips(path: Path) -> list[dict]:
    if not path.exists():
        return []
    seen, out = set(), []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        key = (entry.get("benchmark"), entry.get("reason"))
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out


