"""What ``spyre-bench run`` measures: commits of a spyre-inference repository, or the reference.

A commit's subject is ``git:<repo>@<hash>``: the loader reads the revision straight from the object
store, so no worktree is created and every benchmark process can load it on its own.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.runner.asv_suite import Target
from harness.runner.reference_repo import ORDER, ensure_reference_repo
from harness.subjects.source import gitrev


def reference_targets(repo: Path, policies: list[str]) -> list[Target]:
    unknown = [p for p in policies if p not in ORDER]
    if unknown:
        raise HarnessError(f"unknown reference policies {unknown}; known: {', '.join(ORDER)}")
    commits = ensure_reference_repo(repo)
    return [Target(f"reference:{p}", commits[p], f"reference:{p}") for p in policies]


def commit_targets(repo: Path, revisions: list[str]) -> list[Target]:
    """Each revision expression, or every commit of an ``A..B`` range (oldest first)."""
    if not (repo / ".git").exists() and gitrev.git(repo, "rev-parse", "--git-dir",
                                                     check=False).returncode:
        raise HarnessError(f"--repo {repo}: not a git repository")
    commits: list[str] = []
    for rev in revisions:
        if rev.startswith("-"):     # git would read it as an option (--output=FILE)
            raise HarnessError(f"revision {rev!r} begins with '-': refused")
        if ".." in rev:
            out = gitrev.git(repo, "rev-list", "--reverse", "--end-of-options", rev, check=False)
            if out.returncode:
                raise HarnessError(f"--repo {repo}: bad range {rev!r}: "
                                   f"{out.stderr.decode(errors='replace').strip()}")
            found = out.stdout.decode().split()
            if not found:
                raise HarnessError(f"--repo {repo}: range {rev!r} has no commits")
            commits += found
        else:
            commits.append(gitrev.resolve(f"git:{repo}@{rev}", repo, rev))
    seen: set[str] = set()
    targets = []
    for commit in commits:
        if commit in seen:
            continue
        seen.add(commit)
        subject = gitrev.git(repo, "log", "-1", "--format=%s", "--end-of-options",
                             commit).stdout.decode().strip()
        targets.append(Target(f"{commit[:8]} {subject[:50]}", commit,
                              f"git:{repo.resolve()}@{commit}"))
    return targets
