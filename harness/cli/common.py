"""What the subcommands share: console warnings, the project's local folders, the --device check.

Commands import this module (and :mod:`harness.cli.options`), never one another: a command
module parses its arguments and calls the layers below; anything two commands need lives here
or lower down.
"""

from __future__ import annotations

import sys

from harness.runner.asv_config import PROJECT_ROOT

#: The stored history: where ``run --repo`` and ``nightly`` put commits' results.
HISTORY_DIR = PROJECT_ROOT / "results"
#: Local, untracked state: the reference repository, its results, run logs.
LOCAL_DIR = PROJECT_ROOT / ".asv"


def warn(message: str) -> None:
    """One warning line on stderr (e.g. a results file a command had to skip)."""
    print(f"spyre-bench: warning: {message}", file=sys.stderr)


def device_kind(name: str) -> str:
    """The kind of ``--device NAME``, checked before any run starts (imports torch)."""
    from harness.measure.device import select
    return select(name).name
