"""Regressions of a results folder: its stored history, in branch order, as grouped change points.

What ``spyre-bench changes`` lists and ``spyre-bench report`` shows, decided once for both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def detect_regressions(results_dir: Path, repo: Path | None, branch: str | None,
                       machine: str | None = None, warn: Callable[[str], None] | None = None):
    """(frame, regressions, commit order) for a results folder; with ``repo``, the order is
    ``branch``'s first-parent history (default: the branch checked out in ``repo``). ``warn``
    (if given) hears of skipped results files, of measured commits left out as off the
    branch, and of timing points too noisy to show a step."""
    from harness.analyze.changepoints import detect, group, thresholds_from
    from harness.runner.asv_config import load_project_config
    from harness.runner.nightly import first_parent_history
    from harness.store.history import load_history_quietly
    frame = load_history_quietly(results_dir, warn)
    if machine:
        frame = frame[frame["machine"] == machine]
    order = None
    if repo:
        from harness.subjects.source.gitrev import current_branch
        branch = branch or current_branch(repo)
        order = first_parent_history(repo, branch)
        _warn_off_branch(set(frame["commit"]), set(order), repo, branch, warn)
    points = detect(frame, order, thresholds_from(load_project_config()), on_noisy=warn)
    if order:
        index = {c: i for i, c in enumerate(order)}
        between = lambda good, bad: order[index[good] + 1:index[bad] + 1]  # noqa: E731
    else:
        between = None
    return frame, group(points, between), order


def _warn_off_branch(measured: set[str], on_branch: set[str], repo: Path, branch: str,
                     warn) -> None:
    """Measured commits off the branch are left out: say so, or "0 regressions" would lie."""
    off = measured - on_branch
    if not off or warn is None:
        return
    if off == measured:
        warn(f"none of the {len(measured)} measured commit(s) is on branch {branch!r} of {repo}; "
             "nothing to compare (give --branch)")
    else:
        warn(f"{len(off)} of {len(measured)} measured commit(s) are not on branch {branch!r} of "
             f"{repo} and are left out (give --branch)")
