"""``asv run NEW`` bounded to what is new on the configured branches.

ASV's NEW walks each configured branch back from its tip to the first commit with results in the
config's ``results_dir``. A fresh clone has none there (``.asv/results`` is ignored; the committed
history is ``results/``, where ``run`` and ``nightly`` write), so NEW walked the whole branch:
274 commits of spyre-inference's main. Here the commits of that history count as measured too,
and a branch none of whose commits is measured gives its tip only, as ``asv run`` without a range
does. ``asv run ALL`` still walks every commit; ``spyre-bench nightly --backfill`` goes back in
steps.
"""

from __future__ import annotations

from pathlib import Path


def measured(*results_dirs: Path | str) -> set[str]:
    from asv.results import iter_existing_hashes
    return {h for d in results_dirs if Path(d).is_dir() for h in iter_existing_hashes(str(d))}


def new_commits(repo, branches: list[str], existing: set[str]) -> list[str]:
    """Per branch (newest first): the commits above its newest measured one, or its tip when
    none of its commits is measured."""
    out: list[str] = []
    for branch in branches:
        commits = repo.get_branch_commits(branch)
        new = []
        for commit in commits:
            if commit in existing:
                break
            new.append(commit)
        if len(new) == len(commits):      # nothing on the branch measured yet
            new = commits[:1]
        out += [c for c in new if c not in out]
    return out


def bounded_new(conf, history_dir: Path) -> list[str]:
    """What ``NEW`` measures under ``conf``: a commit list ASV's run takes as its range."""
    from asv.console import log
    from asv.repo import get_repo
    repo = get_repo(conf)
    repo.pull()
    existing = measured(conf.results_dir, history_dir)
    commits = new_commits(repo, conf.branches, existing)
    log.info(f"NEW: {len(commits)} commit(s) new on {', '.join(conf.branches)} (measured ones in "
             f"{conf.results_dir} and {history_dir} count; a branch with none measured gives "
             "its tip; `asv run ALL` walks every commit)")
    return commits
