"""Nightly runs: measure a branch's new commits, backfill older ones in steps, commit results.

Resumable by construction: a commit counts as measured once its results file has an identity
sidecar that says the run was not interrupted, so a killed run loses only the commit in flight,
and the next run starts from what is on disk. Results are committed to git after every commit.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import HarnessError
from harness.runner.asv_suite import Options, results_file
from harness.runner.shard import Shard
from harness.store.history import is_complete, load_identity
from harness.subjects.source import gitrev


@dataclass(frozen=True)
class Plan:
    new: list[str]
    backfill: list[str]
    measured: int
    history: int

    @property
    def commits(self) -> list[str]:
        return self.new + self.backfill

    def only(self, shard: Shard) -> Plan:
        """The plan's commits that are ``shard``'s (every commit in one shard of ``n``)."""
        return replace(self, new=[c for c in self.new if shard.holds(c)],
                       backfill=[c for c in self.backfill if shard.holds(c)])


def first_parent_history(repo: Path, branch: str) -> list[str]:
    """The branch's first-parent history, oldest first."""
    if branch.startswith("-"):          # git would read it as an option (--output=FILE)
        raise HarnessError(f"--branch {branch!r} begins with '-': refused")
    out = gitrev.git(repo, "rev-list", "--first-parent", "--reverse", "--end-of-options", branch,
                     check=False)
    if out.returncode:
        why = (out.stderr.decode(errors="replace").strip() or "no message").splitlines()[0]
        raise HarnessError(f"--repo {repo}: no branch {branch!r} ({why})")
    return out.stdout.decode().split()


def is_measured(options: Options, commit: str) -> bool:
    path = results_file(options, commit)
    return path.exists() and is_complete(load_identity(path))


def plan(history: list[str], measured: set[str], max_new: int, backfill: int,
         step: int) -> Plan:
    """New commits after the newest measured one (oldest first, at most ``max_new``, the newest
    kept), then up to ``backfill`` unmeasured older commits, every ``step``-th going back from the
    oldest measured one."""
    if step < 1 or max_new < 0 or backfill < 0:
        raise HarnessError("--backfill-step must be >= 1; --max-new and --backfill >= 0")
    done = [i for i, c in enumerate(history) if c in measured]
    newest = done[-1] if done else -1
    new = [c for c in history[newest + 1:] if c not in measured]
    new = new[-max_new:] if max_new else []
    oldest = done[0] if done else (len(history) - len(new))
    older = [history[i] for i in range(oldest - step, -1, -step) if history[i] not in measured]
    return Plan(new, older[:backfill], len(done), len(history))


@contextlib.contextmanager
def machine_lock(results_dir: Path, machine: str) -> Iterator[None]:
    """One nightly per machine and results folder at a time."""
    folder = results_dir / machine
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".nightly.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HarnessError(f"another nightly run holds {folder / '.nightly.lock'}") from None
        yield


def git_toplevel(path: Path) -> Path | None:
    out = gitrev.git(path, "rev-parse", "--show-toplevel", check=False)
    return Path(out.stdout.decode().strip()) if out.returncode == 0 else None


def commit_results(results_dir: Path, machine: str, message: str) -> str | None:
    """Commit this machine's folder in the git repository holding ``results_dir``."""
    top = git_toplevel(results_dir)
    if top is None:
        return None
    folder = (results_dir / machine).resolve()
    who = ("-c", "user.name=spyre-bench nightly", "-c", "user.email=spyre-bench@localhost",
           "-c", "commit.gpgsign=false")
    gitrev.output(top, *who, "add", "--", str(folder))
    # the machine's description and benchmark definitions are ignored in this project's results/
    # (laptop runs of the reference write them too): a machine's history needs them
    derived = [str(folder / n) for n in ("machine.json", "benchmarks.json") if (folder / n).exists()]
    if derived:
        gitrev.output(top, *who, "add", "-f", "--", *derived)
    staged = gitrev.git(top, "diff", "--cached", "--quiet", "--", str(folder), check=False)
    if staged.returncode == 0:
        return None
    gitrev.output(top, *who, "commit", "-q", "-m", message, "--", str(folder))
    return gitrev.output(top, "rev-parse", "HEAD")


def push(results_dir: Path) -> None:
    top = git_toplevel(results_dir)
    if top is None:
        raise HarnessError(f"--push: {results_dir} is not in a git repository")
    # rebase onto what other machines pushed: their folders never overlap with ours
    for cmd in (("pull", "--rebase", "--quiet"), ("push", "--quiet")):
        gitrev.output(top, *cmd)
