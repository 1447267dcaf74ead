"""The embedded reference subject as a git repository: one commit per policy, in history order.

ASV records results per commit, so the reference policies get commits of their own, with fixed
authors and dates: the same hashes on every machine, so histories line up and ``asv compare
<pre-810> <post-810-clamp>`` works like it does for spyre-inference. Each commit holds a
``SPYRE_BENCH_SUBJECT`` file naming the subject spec the suite should run.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.subjects import gitrev
from harness.subjects.reference import POLICIES

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
    """Create the repo if missing (idempotent); returns policy -> commit hash."""
    commits = reference_commits(repo)
    if commits:
        return commits
    if repo.exists() and any(repo.iterdir()):
        raise HarnessError(f"{repo} exists and is not spyre-bench's reference repository")
    repo.mkdir(parents=True, exist_ok=True)
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
    return reference_commits(repo)
