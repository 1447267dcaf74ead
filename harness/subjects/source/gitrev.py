"""Revisions of a local git repository: parse ``<repo>@<rev>``, resolve it, read a subtree.

A revision is read straight out of the object store (``ls-tree`` + ``cat-file --batch`` into
memory), so nothing is ever written to disk: no temporary worktree or folder to clean up, even when
the run is killed, and the user's repository (worktree list, index, refs) is never touched. Blobs
are read as committed: unlike ``git archive``, no ``.gitattributes`` export rule can drop or
rewrite a file of the code under test.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness.errors import HarnessError, SubjectError

#: Git settings that make output stable and never prompt (no pager, no credential helper).
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C"}


def git(repo: Path, *args: str, check: bool = True, input: bytes | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``git -C repo args`` capturing bytes; raise CalledProcessError on failure if check.

    The one way the harness runs git: ``env`` adds variables (commit dates, say) to
    :data:`_GIT_ENV`'s.
    """
    env = {**os.environ, **_GIT_ENV, **(env or {})}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env,
                          check=check, input=input)


def output(repo: Path, *args: str, env: dict | None = None) -> str:
    """``git -C repo args``'s stdout, stripped; a failure is one HarnessError line."""
    proc = git(repo, *args, check=False, env=env)
    if proc.returncode:
        raise HarnessError(f"git {' '.join(args)} in {repo} failed: {_first_line(proc.stderr)}")
    return proc.stdout.decode().strip()


def _first_line(err: bytes) -> str:
    lines = [ln.strip() for ln in err.decode(errors="replace").splitlines() if ln.strip()]
    return lines[0] if lines else "no message"


def split_spec(spec: str, rest: str) -> tuple[Path, str]:
    """``<repo>@<rev>`` -> (repo, rev). Both sides may contain ``@`` (``HEAD@{1}``): the repo is
    the shortest prefix before an ``@`` that is an existing directory. No ``@`` means HEAD."""
    positions = [i for i, ch in enumerate(rest) if ch == "@"]
    for i in positions:
        if i and Path(rest[:i]).expanduser().is_dir():
            return Path(rest[:i]).expanduser(), rest[i + 1:] or "HEAD"
    if not positions:
        repo = Path(rest).expanduser()
        if repo.is_dir():
            return repo, "HEAD"
        raise SubjectError(f"{spec}: no such directory {rest!r} (expected git:<repo>@<rev>)")
    head = rest[:positions[0]] or "''"
    raise SubjectError(f"{spec}: no such directory {head!r} (expected git:<repo>@<rev>)")


def single(rev: str) -> str:
    """``X^!`` (git's and ASV's "X alone", no parents) names the one commit X."""
    return rev[:-2] if rev.endswith("^!") and len(rev) > 2 else rev


def current_branch(repo: Path) -> str:
    """The branch checked out in ``repo``: what ``changes`` and ``report`` follow by default."""
    out = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if out.returncode:
        probe = git(repo, "rev-parse", "--git-dir", check=False)
        if probe.returncode:
            raise SubjectError(f"--repo {repo}: not a git repository "
                               f"({_first_line(probe.stderr)})")
        raise SubjectError(f"--repo {repo}: HEAD is detached, no current branch; give --branch")
    return out.stdout.decode().strip()


def resolve(spec: str, repo: Path, rev: str) -> str:
    """The full commit hash ``rev`` names in ``repo``, or a one-line SubjectError."""
    probe = git(repo, "rev-parse", "--git-dir", check=False)
    if probe.returncode:
        raise SubjectError(f"{spec}: {repo} is not a git repository ({_first_line(probe.stderr)})")
    found = git(repo, "rev-parse", "--verify", "--end-of-options", f"{single(rev)}^{{commit}}",
                check=False)
    if found.returncode:
        raise SubjectError(f"{spec}: revision {rev!r} does not exist in {repo} "
                           f"({_first_line(found.stderr)})")
    return found.stdout.decode().strip()


def read_subtree(spec: str, repo: Path, commit: str, prefix: str) -> dict[str, bytes] | None:
    """Every ``.py`` file under ``prefix/`` at ``commit`` (path from the repository root ->
    bytes), or None when the commit has no such folder."""
    listed = git(repo, "ls-tree", "-r", "-z", "--full-tree", commit, "--", prefix, check=False)
    if listed.returncode:
        raise SubjectError(f"{spec}: cannot list {prefix}/ at {commit[:12]} "
                           f"({_first_line(listed.stderr)})")
    blobs = {}
    for entry in listed.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, oid = meta.split()
        # Regular files only: symlinks hold a target, not source; submodules are commits.
        if kind == b"blob" and mode in (b"100644", b"100755") and path.endswith(b".py"):
            blobs[path.decode()] = oid.decode()
    if not listed.stdout:
        return None
    batch = git(repo, "cat-file", "--batch", input="".join(f"{o}\n" for o in blobs.values())
                .encode(), check=False)
    if batch.returncode:
        raise SubjectError(f"{spec}: cannot read {prefix}/ at {commit[:12]} "
                           f"({_first_line(batch.stderr)})")
    files, out, pos = {}, batch.stdout, 0
    for path in blobs:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split()[2])
        files[path] = out[header_end + 1:header_end + 1 + size]
        pos = header_end + 1 + size + 1
    return files


def worktree_commit(path: Path, pathspec: str) -> tuple[str | None, bool]:
    """(HEAD commit, whether ``pathspec`` has uncommitted changes) for a checkout, or (None,
    False) outside a git work tree."""
    head = git(path, "rev-parse", "--verify", "HEAD", check=False)
    if head.returncode:
        return None, False
    status = git(path, "status", "--porcelain", "--", pathspec, check=False)
    return head.stdout.decode().strip(), bool(status.stdout.strip())
