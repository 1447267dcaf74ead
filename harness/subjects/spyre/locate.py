"""Finding a spyre-inference version: a revision of a git repository, a checkout, or the installed
package; its ``spyre_inference/**.py`` snapshotted and its identity named, none of its code run
(:meth:`Located.load` runs it, here or in a worker process: :mod:`harness.worker`)."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.errors import SubjectError
from harness.subjects.load.loader import BUCKETER_FILE, BUCKETER_MODULE, PACKAGE, SourceTree, restore_modules
from harness.subjects.source import gitrev
from harness.subjects.spyre.subject import SpyreInferenceSubject

# -- resolving specs ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Located:
    """A spyre-inference version found and read (sources snapshotted), none of its code run:
    :meth:`load` runs it, here or in a worker process (:mod:`harness.worker`)."""

    spec: str
    tree: SourceTree
    identity: str
    where: str
    installed: bool = False

    def load(self) -> SpyreInferenceSubject:
        if not self.installed:
            return SpyreInferenceSubject(self.spec, self.tree, self.identity, self.where)
        stack_error = _import_stack(self.tree)
        subject = SpyreInferenceSubject(self.spec, self.tree, self.identity, self.where,
                                        stack=stack_error is None)
        subject.stack_error = stack_error
        return subject


def locate_git(spec: str, rest: str) -> Located:
    """``git:<repo>@<rev>``: any revision expression; identity is the full commit hash."""
    repo, rev = gitrev.split_spec(spec, rest)
    commit = gitrev.resolve(spec, repo, rev)
    files = gitrev.read_subtree(spec, repo, commit, PACKAGE)
    where_ = f"commit {commit[:12]}"
    if files is None:
        raise SubjectError(f"{spec} ({where_}): not a spyre-inference revision: it has no "
                           f"{PACKAGE}/ package")
    return Located(spec, SourceTree(files, f"{repo.resolve()}@{commit[:12]}"), commit, where_)


def locate_checkout(spec: str, rest: str) -> Located:
    """``path:<checkout>``: identity is HEAD, marked dirty (with a digest) if the package is."""
    root = Path(rest).expanduser()
    if not root.is_dir():
        raise SubjectError(f"{spec}: no such directory {rest!r}")
    if not (root / PACKAGE).is_dir():
        raise SubjectError(f"{spec}: not a spyre-inference checkout: {root / PACKAGE} does not "
                           "exist")
    root = root.resolve()
    tree = SourceTree.from_dir(root)
    commit, dirty = gitrev.worktree_commit(root, PACKAGE)
    return Located(spec, tree, _identity(tree, commit, dirty),
                   f"checkout {root}" + (f" at {commit[:12]}" if commit else ""))


def locate_installed(spec: str = "spyre-inference") -> Located:
    """The installed package: imported whole when vLLM imports, else loaded by path from it."""
    try:
        found = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise SubjectError(f"{spec}: the {PACKAGE} package is not installed for {sys.executable};"
                           " name a checkout (path:<dir>) or a revision (git:<repo>@<rev>)")
    root = Path(next(iter(found.submodule_search_locations))).parent
    tree = SourceTree.from_dir(root)
    commit, dirty = _installed_commit(root)
    return Located(spec, tree, _identity(tree, commit, dirty), f"installed at {root}",
                   installed=True)


def git_subject(spec: str, rest: str) -> SpyreInferenceSubject:
    return locate_git(spec, rest).load()


def checkout_subject(spec: str, rest: str) -> SpyreInferenceSubject:
    return locate_checkout(spec, rest).load()


def installed_subject(spec: str = "spyre-inference") -> SpyreInferenceSubject:
    return locate_installed(spec).load()


def _import_stack(tree: SourceTree) -> str | None:
    """Import the installed package with its full stack; None on success, else why not (and
    every module of the failed attempt is gone again)."""
    saved = dict(sys.modules)
    try:
        importlib.import_module(PACKAGE)
        if tree.has(BUCKETER_FILE):
            importlib.import_module(BUCKETER_MODULE)
        return None
    except Exception as exc:
        restore_modules(saved)
        return f"{type(exc).__name__}: {exc}"


def _installed_commit(root: Path) -> tuple[str | None, bool]:
    try:
        text = importlib.metadata.distribution("spyre-inference").read_text("direct_url.json")
        commit = json.loads(text or "{}").get("vcs_info", {}).get("commit_id")
        if commit:
            return commit, False
    except (importlib.metadata.PackageNotFoundError, ValueError, AttributeError):
        pass
    return gitrev.worktree_commit(root, PACKAGE)


def _identity(tree: SourceTree, commit: str | None, dirty: bool) -> str:
    if commit and not dirty:
        return commit
    digest = tree.digest()
    return f"{commit}+dirty.{digest[:12]}" if commit else f"sha256:{digest[:16]}"
