"""Rebuild the git repository of real spyre-inference trees from files you downloaded.

    python scripts/assemble_real_trees.py --files ~/si-files --out ~/si-trees
    python scripts/assemble_real_trees.py --clone torch-spyre+spyre-inference=~/src/si \\
        --files ~/si-files --out ~/si-trees
    make test-real REAL=~/si-trees REAL_REVS=up-19461caa

The recipe (tests/real/trees.json) names, for every tree, the files of spyre-inference's attention
path taken at one repository and commit, and for each file the repository, commit, stored id and
length in characters it was taken from (with a ``why`` where it came from another commit than the
tree's). No file's content is in this project: you fetch them yourself, from GitHub or from a
store of public repositories, and either

* lay them out as ``DIR/<owner>+<repo>/<40-hex commit>/<path>`` (``--files DIR``); a file the
  recipe knows only by its stored id (``"commit": null``) goes to
  ``DIR/<owner>+<repo>/id-<id>/<path>``; or
* point at a local clone of the repository (``--clone OWNER+REPO=PATH``), from which each file is
  read with ``git show <commit>:<path>`` (files known only by id still come from ``--files``).

Every file's length is checked against the recipe before anything is written. The result is a git
repository with one commit per tree holding exactly that tree's files, tagged with the tree's name,
upstream trees on ``main`` in commit order and each fork on a branch of its own, so ``git:<repo>@<tag>``
is a subject for every spyre-bench command. Commit dates are fixed, so a rebuild from the same files
gives the same commits. Exit status 2, with one line on stderr, for a missing or wrong-length file,
a bad recipe or an output folder that is not empty; nothing is written then.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[1] / "tests" / "real" / "trees.json"
#: Fixed commit identity and clock: the same files always give the same commits.
_IDENTITY = {"GIT_AUTHOR_NAME": "spyre-bench", "GIT_AUTHOR_EMAIL": "spyre-bench@localhost",
             "GIT_COMMITTER_NAME": "spyre-bench", "GIT_COMMITTER_EMAIL": "spyre-bench@localhost"}
_EPOCH = 1_790_000_000


class Refused(Exception):
    """One line for stderr; the script exits 2."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        recipe = _load_recipe(Path(args.recipe))
        clones = dict(_clone(spec) for spec in args.clone)
        if args.files is None and not clones:
            raise Refused("give --files DIR and/or --clone OWNER+REPO=PATH (see --help)")
        trees = [t for t in recipe if not args.only or t["name"] in args.only]
        if args.only and len(trees) != len(set(args.only)):
            unknown = sorted(set(args.only) - {t["name"] for t in recipe})
            raise Refused(f"--only names no tree of the recipe: {', '.join(unknown)}")
        contents = {t["name"]: _contents(t, args.files, clones) for t in trees}
        out = Path(args.out)
        if out.exists() and any(out.iterdir()):
            raise Refused(f"--out {out} is not empty")
        built = _build(out, trees, contents)
    except Refused as exc:
        print(f"assemble_real_trees: {exc}", file=sys.stderr)
        return 2
    for name, sha, count in built:
        print(f"{name}\t{sha}\t{count} files")
    print(f"built {len(built)} trees in {out}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="assemble_real_trees.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--recipe", default=str(RECIPE), help="the recipe (default: %(default)s)")
    p.add_argument("--files", type=Path, help="folder of downloaded files: "
                   "<owner>+<repo>/<commit or id-ID>/<path>")
    p.add_argument("--clone", action="append", default=[], metavar="OWNER+REPO=PATH",
                   help="a local clone to read files from with git show (repeatable)")
    p.add_argument("--out", required=True, help="the git repository to create (new or empty)")
    p.add_argument("--only", action="append", metavar="NAME", help="build only these trees")
    return p


def _load_recipe(path: Path) -> list[dict]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        trees = doc["trees"]
        for tree in trees:
            for key in ("name", "repository", "commit", "branch", "files"):
                tree[key]  # noqa: B018  (presence check)
            for entry in tree["files"]:
                for key in ("path", "repository", "commit", "id", "chars"):
                    entry[key]  # noqa: B018
    except OSError as exc:
        raise Refused(f"cannot read the recipe {path}: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise Refused(f"{path} is not a trees recipe ({type(exc).__name__}: {exc})") from None
    names = [t["name"] for t in trees]
    if len(set(names)) != len(names):
        raise Refused(f"{path} names a tree twice")
    return trees


def _clone(spec: str) -> tuple[str, Path]:
    repo, sep, path = spec.partition("=")
    if not sep or "+" not in repo or not path:
        raise Refused(f"--clone {spec!r}: expected OWNER+REPO=PATH")
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise Refused(f"--clone {spec!r}: no such directory {folder}")
    return repo, folder


def _contents(tree: dict, files: Path | None, clones: dict[str, Path]) -> dict[str, bytes]:
    """Every file of one tree, path -> bytes, each checked against the recipe's length."""
    out = {}
    for entry in tree["files"]:
        repo = entry["repository"].replace("/", "+")
        text = _from_clone(entry, clones.get(repo)) if entry["commit"] else None
        where = f"{repo}/{entry['commit'] or 'id-' + str(entry['id'])}/{entry['path']}"
        if text is None and files is not None:
            candidate = files / where
            if candidate.is_file():
                text = candidate.read_bytes()
        if text is None:
            source = f"{files / where}" if files is not None else f"{repo} clone"
            raise Refused(f"{tree['name']}: missing {entry['path']} (id {entry['id']}): "
                          f"not found at {source}")
        try:
            length = len(text.decode("utf-8"))
        except UnicodeDecodeError:
            raise Refused(f"{tree['name']}: {entry['path']} (id {entry['id']}) is not UTF-8 "
                          "text") from None
        if length != entry["chars"]:
            raise Refused(f"{tree['name']}: {entry['path']} (id {entry['id']}) has {length} "
                          f"characters, the recipe says {entry['chars']}")
        out[entry["path"]] = text
    return out


def _from_clone(entry: dict, clone: Path | None) -> bytes | None:
    if clone is None:
        return None
    done = subprocess.run(["git", "-C", str(clone), "show", f"{entry['commit']}:{entry['path']}"],
                          capture_output=True)
    return done.stdout if done.returncode == 0 else None


def _build(out: Path, trees: list[dict], contents: dict[str, dict[str, bytes]]) -> list:
    """Create the repository beside ``out`` and move it into place once every tree is in."""
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".assemble-", dir=out.parent))
    try:
        _git(work, "init", "--quiet", "--initial-branch=main")
        built, started = [], set()
        for index, tree in enumerate(trees):
            branch = tree["branch"]
            if branch not in started:
                _git(work, "checkout", "--quiet", "--orphan", branch)
                started.add(branch)
            else:
                _git(work, "checkout", "--quiet", branch)
            _write_tree(work, contents[tree["name"]])
            env = {"GIT_AUTHOR_DATE": f"{_EPOCH + index} +0000",
                   "GIT_COMMITTER_DATE": f"{_EPOCH + index} +0000"}
            message = (f"{tree['name']}: {tree['repository']}@{tree['commit']}\n\n"
                       f"{tree.get('about', '')}\n")
            _git(work, "commit", "--quiet", "--allow-empty", "-m", message, env=env)
            _git(work, "tag", tree["name"])
            sha = _git(work, "rev-parse", "HEAD").strip()
            built.append((tree["name"], sha, len(contents[tree["name"]])))
        if "main" in started:
            _git(work, "checkout", "--quiet", "main")
        if out.exists():
            out.rmdir()
        work.rename(out)
    except BaseException:
        subprocess.run(["rm", "-rf", str(work)], check=False)
        raise
    return built


def _write_tree(work: Path, files: dict[str, bytes]) -> None:
    """Make the worktree hold exactly ``files`` and stage it."""
    _git(work, "rm", "-r", "--quiet", "--cached", "--ignore-unmatch", ".")
    for path in _git(work, "ls-files", "--others").splitlines():
        (work / path).unlink()
    for rel, data in files.items():
        target = work / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    _git(work, "add", "--all", ".")


def _git(repo: Path, *args: str, env: dict | None = None) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**os.environ, **_IDENTITY, **(env or {})})
    if done.returncode:
        raise Refused(f"git {' '.join(args)} failed: {done.stderr.strip().splitlines()[0]}")
    return done.stdout


if __name__ == "__main__":
    sys.exit(main())
