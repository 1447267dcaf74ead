"""Real ``asv run`` (through ``spyre-bench run``) over commits of the generated repository."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.store.history import load_history, load_identity
from harness.store.identity import read as read_identity
from tests.fixtures.processes import default_sigint
from tests.fixtures.spyre_repo import BUCKETER
from tests.fixtures.spyre_sources import held_bucketer

BENCH = (r"^(exact\.(Config\.track_batched_num_blocks_distinct"
         r"|Workload\.track_iterations_per_layer_mean)\(|kernel\.Decode\.time_layer\('small-4x8'\)"
         r"|host\.Build\.time_build\('bimodal', '(batched|jagged)'\))")


def run_cli(*args, home, check=True, **kwargs):
    env = {**os.environ, "HOME": str(home), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=env, **kwargs)
    if check and proc.returncode:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def value(frame, commit, benchmark, **params):
    rows = frame[(frame.commit == commit) & (frame.benchmark == benchmark)]
    for k, v in params.items():
        rows = rows[rows[f"param:{k}"] == v]
    assert len(rows) == 1, rows
    return rows.iloc[0]


@pytest.fixture(scope="module")
def measured(spyre_repo, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("asv")
    names = ["no-bucketer", "pre-810", "810-topup", "810-clamp"]
    proc = run_cli("run", "--repo", str(spyre_repo.path), *[spyre_repo.commits[n] for n in names],
                   "--results-dir", str(tmp / "results"), "--machine", "ci-box",
                   "--device", "cpu", "--tier", "tiny", "--bench", BENCH, home=tmp)
    return spyre_repo, names, tmp, proc


def test_exact_values_per_commit_match_the_model(measured):
    repo, names, tmp, proc = measured
    frame = load_history(tmp / "results")
    assert set(frame.machine) == {"ci-box"}
    assert set(frame.env_name) == {f"spyre-bench-py{sys.version_info[0]}.{sys.version_info[1]}-cpu"}
    c = repo.commits
    nb = "exact.Config.track_batched_num_blocks_distinct"
    where = dict(block_size=192, max_model_len=2048, max_num_seqs=32, overrides="batched")
    assert value(frame, c["pre-810"], nb, **where)["value"] == 5       # [1,2,4,8,11]
    assert value(frame, c["810-topup"], nb, **where)["value"] == 4     # [2,3,6,11]
    it = "exact.Workload.track_iterations_per_layer_mean"
    probe = dict(block_size=64, max_model_len=2048, max_num_seqs=32, overrides="kv-above-limit",
                 workload="four-3-block-decodes")
    assert [value(frame, c[n], it, **probe)["value"] for n in names[1:]] == [4, 128, 32]


def test_timings_keep_their_raw_samples(measured):
    repo, names, tmp, proc = measured
    frame = load_history(tmp / "results")
    timed = frame[(frame.benchmark == "kernel.Decode.time_layer") & (frame.status == "ok")]
    assert set(timed["param:probe"]) == {"small-4x8"}      # the one probe --bench selected
    assert set(timed.commit) == {repo.commits[n] for n in names[1:]}
    for _, row in timed.iterrows():
        assert row["unit"] == "seconds" and len(row["samples"]) >= 5
        assert min(row["samples"]) <= row["value"] <= max(row["samples"])
    skipped = frame[(frame.benchmark == "kernel.Decode.time_layer")
                    & (frame.commit == repo.commits["no-bucketer"])
                    & (frame["param:probe"] == "small-4x8")]
    assert list(skipped.status) == ["skipped"]


def test_host_build_times_are_stored_per_workload_and_path(measured):
    repo, names, tmp, proc = measured
    frame = load_history(tmp / "results")
    rows = frame[frame.benchmark == "host.Build.time_build"]
    timed = rows[rows.status == "ok"]
    assert set(timed["param:path"]) == {"batched"} and set(timed["param:workload"]) == {"bimodal"}
    assert set(timed.commit) == {repo.commits[n] for n in names[1:]}
    for _, row in timed.iterrows():
        assert row["unit"] == "seconds" and len(row["samples"]) >= 4   # a step per sample
        assert min(row["samples"]) <= row["value"] <= max(row["samples"])
    # a path whose knob the commit's env does not know: a skip, its reason kept
    jagged = rows[(rows["param:path"] == "jagged") & (rows["param:workload"] == "bimodal")]
    assert len(jagged) == len(names) and set(jagged.status) == {"skipped"}
    identity = load_identity(timed.iloc[0]["file"])
    assert any("SPYRE_JAGGED_ATTENTION" in s["reason"] for s in identity["skipped"])


def test_a_missing_capability_is_a_skip_with_its_reason(measured):
    repo, names, tmp, proc = measured
    frame = load_history(tmp / "results")
    rows = frame[frame.commit == repo.commits["no-bucketer"]]
    assert len(rows) and set(rows.status) == {"skipped"} and rows["value"].isna().all()
    identity = load_identity(rows.iloc[0]["file"])
    assert identity["subject"] == repo.spec("no-bucketer")
    assert any("bucketer" in s["reason"] for s in identity["skipped"])
    assert identity["device"] == "cpu" and identity["harness_version"]


def test_identity_records_ladders_and_the_summary_is_printed(measured):
    repo, names, tmp, proc = measured
    frame = load_history(tmp / "results")
    row = frame[frame.commit == repo.commits["810-topup"]].iloc[0]
    ladders = {json.dumps(config, sort_keys=True): lad
               for config, lad in read_identity(row["file"]).ladders_by_config()}
    key = json.dumps({"block_size": 192, "max_model_len": 2048, "max_num_seqs": 32,
                      "overrides": "batched"}, sort_keys=True)
    assert ladders[key]["batched_num_blocks"] == [2, 3, 6, 11]
    assert "run summary" in proc.stdout
    # the closing comparison of first and last target is printed
    assert "(base) →" in proc.stdout
    # piped: a line per unit of work (target × group)
    assert proc.stdout.count("[exact (in process)] started") == len(names)


def test_results_are_stored_without_blanks_after_asvs_own_save(measured):
    """The kernel group is saved by ASV's `asv run`, which writes blanks after , and : (one per
    stored number) after the exact tier's compact save: run compacts the file once more at the
    end. Whole means are ints; the sidecar has no blanks either."""
    _, names, tmp, _ = measured
    files = sorted((tmp / "results" / "ci-box").glob("*-spyre-bench-*.json"))
    assert len(files) == len(names)
    for path in files:
        raw = path.read_text()
        data = json.loads(raw)
        assert "kernel.Decode.time_layer" in data["results"]
        assert raw == json.dumps(data, separators=(",", ":")), path.name
        for name, row in data["results"].items():
            if name.startswith("exact."):
                assert not any(isinstance(v, float) and v.is_integer() for v in row[0]), name
        side = path.with_suffix(".identity").read_text()
        assert "\n" not in side and json.dumps(json.loads(side), separators=(",", ":")) == side


def test_machine_file_is_written_in_full_and_other_entries_kept(measured):
    _, _, tmp, _ = measured
    data = json.loads((tmp / ".asv-machine.json").read_text())
    assert {"arch", "cpu", "machine", "num_cpu", "os", "ram"} <= set(data["ci-box"])


def test_a_bench_regex_matching_nothing_is_an_error(spyre_repo, tmp_path):
    proc = run_cli("run", "--repo", str(spyre_repo.path), spyre_repo.commits["pre-810"],
                   "--results-dir", str(tmp_path / "r"), "--device", "cpu", "--tier", "tiny",
                   "--bench", r"^exact\.Config\.track_kv_buckets$", home=tmp_path, check=False)
    assert proc.returncode == 2 and "do not anchor with $" in proc.stderr


def test_smoke_runs_never_write_to_the_history(spyre_repo, tmp_path):
    proc = run_cli("run", "--smoke", "--repo", str(spyre_repo.path), spyre_repo.commits["pre-810"],
                   "--results-dir", "results", "--device", "cpu", "--tier", "tiny", "--bench", BENCH,
                   home=tmp_path, check=False, cwd=tmp_path)
    assert proc.returncode == 2 and "never to --results-dir" in proc.stderr
    proc = run_cli("run", "--smoke", "--repo", str(spyre_repo.path), spyre_repo.commits["pre-810"],
                   "--device", "cpu", "--tier", "tiny", "--bench", BENCH, "--machine", "smoke-box",
                   home=tmp_path)
    from harness.cli.common import HISTORY_DIR
    assert not (HISTORY_DIR / "smoke-box").exists()


def held_commit(spyre_repo, tmp_path):
    """A commit after 810-clamp that stays in measurement while ``tmp_path / "hold"`` exists, so
    that an interrupt lands on it however fast the first commit went; returns (commit, hold)."""
    hold = tmp_path / "hold"
    hold.touch()
    rev = spyre_repo.add_commit({BUCKETER: held_bucketer("810-clamp", str(hold))},
                                "bucketer: held by the test", parent="810-clamp")
    return rev, hold


def test_an_interrupted_run_keeps_the_finished_commits(spyre_repo, tmp_path):
    results = tmp_path / "results"
    held, _ = held_commit(spyre_repo, tmp_path)
    cmd = [sys.executable, "-m", "harness", "run", "--repo", str(spyre_repo.path),
           spyre_repo.commits["pre-810"], held, "--results-dir",
           str(results), "--machine", "box", "--device", "cpu", "--tier", "tiny", "--bench", BENCH]
    proc = subprocess.Popen(cmd, env={**os.environ, "HOME": str(tmp_path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    first = spyre_repo.commits["pre-810"][:8]
    deadline = time.monotonic() + 120
    while not list((results / "box").glob(f"{first}-*.identity")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    frame = load_history(results)
    kept = frame[(frame.commit == spyre_repo.commits["pre-810"])
                 & frame.benchmark.str.startswith("exact.")]
    assert len(kept) and set(kept.status) == {"ok"}


def test_a_rerun_after_an_interrupt_measures_only_what_is_missing(spyre_repo, tmp_path):
    results = tmp_path / "results"
    held, hold = held_commit(spyre_repo, tmp_path)
    commits = [spyre_repo.commits["pre-810"], held]
    args = ["run", "--repo", str(spyre_repo.path), *commits,
            "--results-dir", str(results), "--machine", "box", "--device", "cpu", "--tier", "tiny",
            "--bench", BENCH, "--no-compare"]
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args],
                            env={**os.environ, "HOME": str(tmp_path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    first = spyre_repo.commits["pre-810"]
    deadline = time.monotonic() + 120
    while not list((results / "box").glob(f"{first[:8]}-*.identity")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    before = load_history(results)
    assert not before[before.commit == held]["complete"].any()
    hold.unlink()
    kept = before[before.commit == first][["benchmark", "started_at"]].reset_index(drop=True)
    again = run_cli(*args, home=tmp_path)
    assert "kept from an earlier run" in again.stdout
    after = load_history(results)
    assert after["complete"].all() and set(after.commit) == set(commits)
    redone = after[after.commit == first][["benchmark", "started_at"]].reset_index(drop=True)
    assert redone.equals(kept)   # not measured again
