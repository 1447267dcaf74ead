"""The embedded reference subject as a git repository: one commit per policy, in history order.

ASV records results per commit, so the reference policies get commits of their own, with fixed
authors and dates: the same hashes on every machine, so histories line up and ``asv compare
<pre-810> <post-810-clamp>`` works like it does for spyre-inference. Each commit holds a
``SPYRE_BENCH_SUBJECT`` file naming the subject spec the suite should run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.errors import HarnessError
from harness.store.lock import wait_lock
from harness.subjects.reference.subject import POLICIES
from harness.subjects.source import gitrev

MARKER = "SPYRE_BENCH_SUBJECT"
BRANCH = "main"
#: History order: what a reviewer compares is the pre-#810 policy against what #810 became.
ORDER = ("pre-810", "post-810-topup", "post-810-clamp", "chunked", "latest")
assert set(ORDER) == set(POLICIES)


def reference_commits(repo: Path) -> dict[str, str]:
    """Policy -> commit hash of an existing reference repo (empty if absent or foreign)."""
    if not (repo / ".git").exists():
        return {}
    out = {}
    for line in gitrev.output(repo, "log", "--format=%H %s", BRANCH).splitlines():
        commit, _, subject = line.partition(" ")
        out[subject.removeprefix("reference:")] = commit
    return out if set(out) == set(ORDER) else {}


def ensure_reference_repo(repo: Path) -> dict[str, str]:
    """Create the repo if missing (idempotent); returns policy -> commit hash.

    Two commands started together in a fresh checkout both find it missing: the second waits
    on a lock beside it while the first builds it, then finds it made. It is built under a
    temporary name and renamed into place, so a build cut short (an interrupt, a kill) leaves
    no half-made repository that would be refused forever after."""
    commits = reference_commits(repo)
    if commits:
        return commits
    try:
        repo.parent.mkdir(parents=True, exist_ok=True)
        lock = wait_lock(repo.with_name(repo.name + ".lock"))
    except OSError as exc:
        raise HarnessError(f"cannot create the reference repository {repo}: "
                           f"{exc.strerror or exc}") from None
    with lock:
        commits = reference_commits(repo)
        if commits:
            return commits      # made by the command we waited for
        if repo.exists() and (not repo.is_dir() or any(repo.iterdir())):
            raise HarnessError(f"{repo} exists and is not spyre-bench's reference repository")
        for stale in repo.parent.glob(repo.name + ".tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)     # a build cut short; we hold the lock
        building = repo.with_name(f"{repo.name}.tmp-{os.getpid()}")
        try:
            _build(building)
            if repo.exists():
                repo.rmdir()        # empty, checked above
            building.rename(repo)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return reference_commits(repo)


def _build(repo: Path) -> None:
    """The reference commits, in ORDER, into a new repository at ``repo``."""
    repo.mkdir(parents=True)
    gitrev.output(repo, "init", "-q", "-b", BRANCH)
    for day, policy in enumerate(ORDER, start=1):
        spec = f"reference:{policy}"
        (repo / MARKER).write_text(spec + "\n")
        # content is the spec alone: editing a policy's description must not change the hashes
        (repo / "README.md").write_text(f"# spyre-bench reference subject\n\n{spec}\n")
        gitrev.output(repo, "add", MARKER, "README.md")
        stamp = f"2025-01-{day:02d}T00:00:00+00:00"
        gitrev.output(repo, "-c", "user.name=spyre-bench", "-c", "user.email=spyre-bench@localhost",
                      "-c", "commit.gpgsign=false", "commit", "-q", "-m", spec,
                      env={"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})
