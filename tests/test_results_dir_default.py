"""One default results folder: every command that reads or writes stored results defaults to
where ``run`` writes (harness.cli.common.HISTORY_DIR), so ``run`` then ``compare``/``report``/
``comment``/``history``/``changes`` needs no --results-dir."""

from harness.cli import parser
from harness.cli.common import HISTORY_DIR


def _subcommands():
    p = parser()
    [sub] = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sub.choices


def test_every_results_dir_defaults_to_where_run_writes():
    found = {}
    for name, sub in _subcommands().items():
        for action in sub._actions:
            if "--results-dir" in action.option_strings:
                found[name] = action.default
    assert {"compare", "report", "comment", "history", "changes", "nightly", "bisect"} <= set(found)
    run = found.pop("run")
    assert run is None          # run picks HISTORY_DIR itself (or .asv for the reference)
    assert {name: d for name, d in found.items() if d != HISTORY_DIR} == {}
