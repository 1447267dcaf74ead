"""``asv run NEW`` is bounded to what is new on the configured branches (harness.runner.asv_new):
commits above the newest one measured (in the config's results or the committed history), or a
branch's tip when none is, never the whole branch; through ASV's own repository code."""

import json

from asv.config import Config

from harness.runner.asv_config import write_config
from harness.runner.asv_new import bounded_new, measured


def _conf(spyre_repo, tmp_path):
    path = write_config(tmp_path / "asv.conf.json", spyre_repo.path, tmp_path / "results",
                        branches=["main"])
    return Config.load(str(path))


def _result(folder, commit):
    """A results file as ASV stores one (what its own reader finds)."""
    (folder / "box").mkdir(parents=True, exist_ok=True)
    (folder / "box" / "machine.json").write_text(json.dumps({"machine": "box", "version": 1}))
    (folder / "box" / f"{commit[:8]}-env.json").write_text(json.dumps(
        {"commit_hash": commit, "env_name": "env", "date": 0, "params": {"machine": "box"}, "python": "3.11",
         "requirements": {}, "env_vars": {}, "result_columns": ["result"], "results": {},
         "durations": {}, "version": 2}))


def test_nothing_measured_gives_the_tip_only(spyre_repo, tmp_path):
    conf = _conf(spyre_repo, tmp_path)
    assert bounded_new(conf, tmp_path / "history") == [spyre_repo.rev("main")]


def test_new_stops_at_the_newest_measured_commit_here_or_in_the_history(spyre_repo, tmp_path):
    c = spyre_repo.commits
    conf = _conf(spyre_repo, tmp_path)
    history = tmp_path / "history"
    _result(history, c["810-topup"])
    assert measured(history) == {c["810-topup"]}
    tip = spyre_repo.rev("main")
    above = bounded_new(conf, history)
    assert above[0] == tip and above[-3:] == [c["gen4"], c["gen3"], c["810-clamp"]]
    assert c["810-topup"] not in above and c["pre-810"] not in above
    _result(tmp_path / "results", c["gen3"])           # the config's own results count too
    assert bounded_new(conf, history)[-1] == c["gen4"]
