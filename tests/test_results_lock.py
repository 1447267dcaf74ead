"""Writers of one results folder: a second `run` refuses while the first holds the folder, and
names that become paths are validated before anything is written (real subprocesses)."""

import json
import os
import subprocess
import sys
import time

from harness.store.history import load_history
from harness.store.lock import LOCK_NAME

BENCH = r"^exact\.Config\.track_batched_num_blocks_distinct\("


def cli(*args, home, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "harness", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HOME": str(home), "COLUMNS": "200"}, **kwargs)


def test_a_second_run_into_the_same_folder_refuses_and_the_first_keeps_everything(
        spyre_repo, tmp_path):
    results = tmp_path / "results"
    commits = [spyre_repo.commits[n] for n in ("pre-810", "810-clamp")]   # long enough to hold
    first = cli("run", "--repo", str(spyre_repo.path), *commits, "--results-dir", str(results),
                "--machine", "box", "--device", "cpu", "--tier", "tiny", "--bench", BENCH, "--no-compare",
                home=tmp_path)
    deadline = time.monotonic() + 120
    lock = results / LOCK_NAME
    while not (lock.exists() and lock.read_text()):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.1)
    holder = json.loads(lock.read_text())
    assert holder["pid"] == first.pid
    second = cli("run", "--repo", str(spyre_repo.path), spyre_repo.commits["gen3"],
                 "--results-dir", str(results), "--machine", "box", "--device", "cpu", "--tier", "tiny",
                 "--bench", BENCH, home=tmp_path)
    out, err = second.communicate(timeout=120)
    assert first.poll() is None, "the first run must still hold the folder for this test to mean"
    assert second.returncode == 2 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and f"pid {first.pid}" in err
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    frame = load_history(results)
    assert set(frame.commit) == set(commits)           # gen3 never written
    assert set(frame.status) == {"ok"}
    per_commit = frame.groupby("commit").size()
    assert per_commit.nunique() == 1 and per_commit.iloc[0] > 0
    # released: the next writer gets the folder
    third = cli("run", "--repo", str(spyre_repo.path), spyre_repo.commits["gen3"],
                "--results-dir", str(results), "--machine", "box", "--device", "cpu", "--tier", "tiny",
                "--bench", BENCH, home=tmp_path)
    assert third.wait(timeout=300) == 0, third.communicate()


def test_a_machine_name_that_is_a_path_is_one_line_exit_2(spyre_repo, tmp_path):
    results = tmp_path / "deep" / "results"
    for machine in ("../../evil", "a/b", ".hidden", ""):
        proc = cli("run", "--repo", str(spyre_repo.path), spyre_repo.commits["pre-810"],
                   "--results-dir", str(results), "--machine", machine, "--device", "cpu", "--tier", "tiny",
                   "--bench", BENCH, home=tmp_path)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, (machine, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert "--machine" in err
    assert not (tmp_path / "evil").exists() and not results.exists()
