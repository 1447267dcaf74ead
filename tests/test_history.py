"""The history loader: ASV's results format into pandas; bad files warn and are skipped."""

import json
import math

import pytest

from harness.errors import HarnessError
from harness.store.history import HistoryWarning, export, load_history

COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples"]


def write_results(root, machine="box", commit="a" * 40, env="spyre-bench-py3.11-cpu", results=None,
                  date=1_700_000_000_000):
    mdir = root / machine
    mdir.mkdir(parents=True, exist_ok=True)
    (mdir / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    data = {"commit_hash": commit, "env_name": env, "date": date, "params": {}, "python": "3.11",
            "requirements": {}, "env_vars": {}, "result_columns": COLUMNS, "results": results or {},
            "durations": {}, "version": 2}
    path = mdir / f"{commit[:8]}-{env}.json"
    # ASV writes NaN tokens; json.dumps does too
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def results_dir(tmp_path):
    (tmp_path / "benchmarks.json").write_text(json.dumps({
        "exact.Ladders.track_batched_nb": {"type": "track", "unit": "buckets",
                                           "param_names": ["block_size", "policy"]},
        "kernel.Decode.time_call": {"type": "time", "unit": "seconds", "param_names": ["bucket"]},
        "version": 2}))
    write_results(tmp_path, results={
        "exact.Ladders.track_batched_nb": [[5, 4, math.nan, None], [["64", "192"], ["'a'", "'b'"]], "3"],
        "kernel.Decode.time_call": [[1e-3], [["'4x16'"]], "1", 0, 1.0, [9e-4], [1.1e-3], [9.5e-4],
                                    [1.05e-3], [1], [5], [[1e-3, 1.1e-3, 9e-4]]],
    })
    write_results(tmp_path, machine="other", commit="b" * 40, results={
        "exact.Ladders.track_batched_nb": [[6, 6, 6, 6], [["64", "192"], ["'a'", "'b'"]], "3"]})
    return tmp_path


def test_loads_every_machine_commit_param_and_status(results_dir):
    frame = load_history(results_dir)
    assert len(frame) == 4 + 1 + 4
    box = frame[(frame.machine == "box") & (frame.benchmark == "exact.Ladders.track_batched_nb")]
    assert list(box["status"]) == ["ok", "ok", "skipped", "failed"]
    assert list(box["param:block_size"]) == [64, 64, 192, 192]
    assert list(box["param:policy"]) == ["a", "b", "a", "b"]
    assert box["value"].iloc[0] == 5 and math.isnan(box["value"].iloc[2])
    assert set(frame["unit"]) == {"buckets", "seconds"}
    timed = frame[frame.type == "time"].iloc[0]
    assert timed["samples"] == [1e-3, 1.1e-3, 9e-4] and timed["repeat"] == 5
    assert str(timed["date"]).startswith("2023-11-14")


def test_corrupt_partial_and_foreign_files_warn_and_the_rest_loads(results_dir):
    box = results_dir / "box"
    (box / "truncated.json").write_text('{"commit_hash": "c", "results": {')
    (box / "foreign.json").write_text(json.dumps({"hello": "world"}))
    (box / "old.json").write_text(json.dumps({"commit_hash": "c", "results": {}, "version": 1}))
    (results_dir / "stray").mkdir()
    (results_dir / "stray" / "x.json").write_text("{}")
    with pytest.warns(HistoryWarning) as caught:
        frame = load_history(results_dir)
    messages = "\n".join(str(w.message) for w in caught)
    for name in ("truncated.json", "foreign.json", "old.json", "stray/machine.json"):
        assert name in messages
    assert len(frame) == 9


def test_missing_results_dir_is_a_clear_error(tmp_path):
    with pytest.raises(HarnessError, match="does not exist"):
        load_history(tmp_path / "nope")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_export_round_trips(results_dir, tmp_path, suffix):
    import pandas as pd
    frame = load_history(results_dir)
    path = export(frame, tmp_path / f"history{suffix}")
    back = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    assert len(back) == len(frame) and json.loads(back["params"][0]) == frame["params"][0]


def test_export_rejects_unknown_formats(results_dir, tmp_path):
    with pytest.raises(HarnessError, match=".parquet or .csv"):
        export(load_history(results_dir), tmp_path / "h.xlsx")


def test_a_commit_is_complete_only_when_its_identity_says_the_run_finished(results_dir):
    from harness.store.identity import Identity, read
    files = sorted((results_dir / "box").glob("*-spyre-*.json"))
    assert not load_history(results_dir)["complete"].any()       # killed: no identity at all
    Identity(subject="git:x@a", commit="a" * 40, interrupted=True).write(files[0])
    assert not load_history(results_dir)["complete"].any()       # interrupted
    config = {"block_size": 192, "max_model_len": 2048, "max_num_seqs": 32, "overrides": "batched"}
    side = Identity(subject="git:x@a", commit="a" * 40, interrupted=False,
                    ladders=[{"config": config, "ladders": {"kv": [192]}}]).write(files[0])
    frame = load_history(results_dir)
    assert frame[frame.machine == "box"]["complete"].all()
    assert not frame[frame.machine == "other"]["complete"].any()
    back = read(files[0])
    assert back.complete and back.ladders_by_config() == [(config, {"kv": [192]})]
    # a sidecar of an earlier version, ladders keyed by position, reads back by name
    old = json.loads(side.read_text())
    old["ladders"] = {json.dumps([192, 2048, 32, "batched"]): {"kv": [192]}, "skipped": "x"}
    side.write_text(json.dumps(old))
    assert read(files[0]).ladders_by_config() == [(config, {"kv": [192]})]
