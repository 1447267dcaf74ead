"""A backfill split over runners (``nightly --shard i/n``) and merged back (``spyre-bench merge``).

Real runs on the fixture repository's main branch (six commits, from no bucketer to gen4), a
backfill of every second commit (gen3, 810-topup and the commit without a bucketer): measured once
unsharded, and again as shards 1/2 and 2/2 into folders of their own;
the shards merged equal the unsharded backfill file for file, byte for byte apart from the timing
fields (when each benchmark ran and for how long, when the sidecar was written). The nightly
workflow's merge job then runs as written (tests/actions_runner.py) on the shards' artifacts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.runner.nightly import plan
from harness.runner.shard import Shard
from tests.actions_runner import Runner

ROOT = Path(__file__).resolve().parents[1]
NIGHTLY = ROOT / ".github" / "workflows" / "nightly.yml"
BENCH = r"^exact\."
MACHINE = "m0"
ENV = "spyre-bench-py3.11-cpu"


def cli(*args, home, check=True):
    env = {**os.environ, "HOME": str(home), "COLUMNS": "200", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=env)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def backfill(repo, results, home, *extra):
    """Every second commit of main going back (none new), tiny tier, exact figures only."""
    return cli("nightly", "--repo", str(repo.path), "--branch", "main", "--max-new", "0",
               "--backfill", "100", "--backfill-step", "2", "--results-dir", str(results),
               "--machine", MACHINE, "--device", "cpu", "--tier", "tiny", "--bench", BENCH,
               "--no-commit", *extra, home=home)


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.startswith(".")}


def without_timing(name: str, raw: bytes):
    """The file as data, its timing fields blanked (this test's own list, not the merge's)."""
    data = json.loads(raw)
    if name.endswith(".identity"):
        data.pop("written_at")
    elif "results" in data:
        columns = data["result_columns"]
        for row in data["results"].values():
            for col in ("started_at", "duration"):
                if columns.index(col) < len(row):
                    row[columns.index(col)] = None
    return json.dumps(data, sort_keys=True)


@pytest.fixture(scope="module")
def shards(spyre_repo, tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    out = {}
    for name, extra in (("whole", ()), ("s1", ("--shard", "1/2")), ("s2", ("--shard", "2/2"))):
        proc = backfill(spyre_repo, root / name, root / "home", *extra)
        out[name] = (root / name / MACHINE, proc.stdout)
    return spyre_repo, root, out


# -- the split ---------------------------------------------------------------------------------

def _hashes(n: int) -> list[str]:
    return [hashlib.sha1(str(i).encode()).hexdigest() for i in range(n)]


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_every_commit_is_in_exactly_one_shard_whatever_the_history_around_it(count):
    history = _hashes(200)
    every = [Shard(i, count) for i in range(1, count + 1)]
    for commit in history:
        assert sum(s.holds(commit) for s in every) == 1
    # a plan over the history, and over a longer one (older and newer commits around it): each
    # commit stays in its shard, and the shards' union is the unsharded plan
    short = plan(history[50:150], set(), 0, 1000, 1)
    long = plan(history, set(), 0, 1000, 1)
    for s in every:
        assert set(short.only(s).commits) == set(long.only(s).commits) & set(short.commits)
    assert sorted(c for s in every for c in long.only(s).commits) == sorted(long.commits)


WANTED = "expected i/n with 1 <= i <= n <= 256"


@pytest.mark.parametrize("text,why", [
    ("0/2", WANTED), ("3/2", "shard 3 of 2 does not exist"), ("a/b", WANTED), ("1/0", WANTED),
    ("1/2/3", WANTED), ("-1/2", WANTED), ("1/257", "at most 256 shards"), ("", WANTED)])
def test_a_bad_shard_is_one_line_and_exit_2_with_nothing_stored(spyre_repo, tmp_path, text, why):
    stored = tmp_path / "stored"
    proc = cli("nightly", "--repo", str(spyre_repo.path), f"--shard={text}", "--results-dir",
               str(stored), "--dry-run", home=tmp_path, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("spyre-bench nightly: error: argument --shard: " + why)
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert not stored.exists()


# -- real runs: split, merged, equal -----------------------------------------------------------

@pytest.mark.extended
def test_the_shards_split_the_backfill_between_them(shards):
    repo, _, runs = shards
    history = repo.git("rev-list", "--first-parent", "--reverse", "main").split()
    commits = {name: {f[:8] for f in files(folder) if f.endswith(".identity")}
               for name, (folder, _) in runs.items()}
    assert len(history) == 6 and commits["whole"] == {history[i][:8] for i in (0, 2, 4)}
    assert commits["s1"] and commits["s2"] and not commits["s1"] & commits["s2"]
    assert commits["s1"] | commits["s2"] == commits["whole"]
    assert "now 0 new + 3 backfill\n" in runs["whole"][1]
    for name in ("s1", "s2"):
        assert (f"now 0 new + {len(commits[name])} backfill (shard {name[1]}/2 of a plan of 3)"
                in runs[name][1])


@pytest.mark.extended
def test_two_shards_merged_equal_one_unsharded_backfill(shards, tmp_path):
    _, root, runs = shards
    merged = tmp_path / "merged"
    done = cli("merge", "--results-dir", str(merged), str(runs["s1"][0]), str(runs["s2"][0]),
               home=root / "home")
    assert f"{MACHINE}: 8 files (3 commits) from 2 folders" in done.stdout
    whole, ours = files(runs["whole"][0]), files(merged / MACHINE)
    assert sorted(ours) == sorted(whole) and len(whole) == 8
    for name in ("machine.json", "benchmarks.json"):
        assert ours[name] == whole[name], name
    timed_apart = 0
    for name in whole:
        assert without_timing(name, ours[name]) == without_timing(name, whole[name]), name
        timed_apart += ours[name] != whole[name]
    assert timed_apart == 6           # every commit's two files: measured at other times
    # each merged file is the shard's own bytes
    for name, raw in ours.items():
        assert raw in (files(runs["s1"][0]).get(name), files(runs["s2"][0]).get(name))


def _copy(folder: Path, dest: Path) -> Path:
    shutil.copytree(folder, dest)
    return dest


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _timed_row(data: dict, value: float) -> None:
    """A timed benchmark's row, as ASV's runner writes one, with ``value`` as its sample."""
    columns = data["result_columns"]
    row = [None] * len(columns)
    for col, v in (("result", [value]), ("params", [["'small-4x8'"]]), ("version", "v"),
                   ("started_at", 1), ("duration", 0.5), ("samples", [[value, value]])):
        row[columns.index(col)] = v
    data["results"]["kernel.Decode.time_layer"] = row


@pytest.mark.extended
def test_timing_fields_are_no_conflict_and_the_first_copy_is_kept(shards, tmp_path):
    _, root, runs = shards
    first, again = _copy(runs["s1"][0], tmp_path / "first"), _copy(runs["s1"][0], tmp_path / "again")
    name = next(n for n in sorted(files(first)) if n.endswith(f"-{ENV}.json"))
    for folder, value in ((first, 0.001), (again, 0.002)):
        _edit(folder / name, lambda d, v=value: _timed_row(d, v))
    _edit(again / name, lambda d: [row.__setitem__(3, row[3] + 1) for row in d["results"].values()])
    _edit(again / name.replace(".json", ".identity"),
          lambda d: d.__setitem__("written_at", d["written_at"] + 60))
    merged = tmp_path / "merged"
    cli("merge", "--results-dir", str(merged), str(first), str(again), home=root / "home")
    assert files(merged / MACHINE) == files(first)


def _exact_value_changed(data: dict) -> None:
    data["results"]["exact.Config.track_kv_buckets"][0][0] = 12345


@pytest.mark.extended
def test_a_conflict_names_the_file_and_writes_nothing(shards, tmp_path):
    _, root, runs = shards
    again = _copy(runs["s1"][0], tmp_path / "again")
    name = next(n for n in sorted(files(again)) if n.endswith(f"-{ENV}.json"))
    _edit(again / name, _exact_value_changed)
    merged = tmp_path / "merged"
    (merged / MACHINE).mkdir(parents=True)
    (merged / MACHINE / "kept.txt").write_text("stored before")
    proc = cli("merge", "--results-dir", str(merged), str(runs["s1"][0]), str(runs["s2"][0]),
               str(again), home=root / "home", check=False)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert len(proc.stderr.splitlines()) == 1
    assert f"conflict in {MACHINE}/{name}" in proc.stderr and "exact.Config" in proc.stderr
    assert sorted(p.name for p in (merged / MACHINE).iterdir()) == ["kept.txt"]
    assert sorted(p.name for p in merged.iterdir()) == [MACHINE]


@pytest.mark.extended
def test_each_machines_shards_go_to_its_own_folder(shards, tmp_path):
    """The fleet's shards merged at once (as the workflow's merge job does): each folder goes to
    the machine its machine.json names."""
    _, root, runs = shards
    other = _copy(runs["s2"][0], tmp_path / "other")
    _edit(other / "machine.json", lambda d: d.__setitem__("machine", "m1"))
    for path in other.glob(f"*-{ENV}.json"):
        _edit(path, lambda d: d["params"].__setitem__("machine", "m1"))
    merged = tmp_path / "merged"
    done = cli("merge", "--results-dir", str(merged), str(runs["s1"][0]), str(other),
               home=root / "home")
    assert sorted(p.name for p in merged.iterdir() if not p.name.startswith(".")) == ["m0", "m1"]
    assert files(merged / "m0") == files(runs["s1"][0]) and files(merged / "m1") == files(other)
    assert "m0: " in done.stdout and "m1: " in done.stdout


def _plant(kind: str, folder: Path) -> str:
    """Spoil a copy of a shard's folder one way; returns what the error must name."""
    results = sorted(n for n in os.listdir(folder) if n.endswith(f"-{ENV}.json"))[0]
    if kind == "symlink":
        (folder / "aaaaaaaa-x.json").symlink_to(folder / results)
        return "aaaaaaaa-x.json: not a plain file"
    if kind == "subfolder":
        (folder / "deeper").mkdir()
        return "deeper: not a plain file"
    if kind == "script":
        (folder / "run.sh").write_text("echo hi\n")
        return "run.sh: not a file a machine folder holds"
    if kind == "other machine":
        _edit(folder / results, lambda d: d["params"].__setitem__("machine", "m1"))
        return f"{results}: measured on machine 'm1', not 'm0'"
    if kind == "renamed":
        os.rename(folder / results, folder / f"00000000-{ENV}.json")
        os.remove(folder / results.replace(".json", ".identity"))
        return f"00000000-{ENV}.json: holds {results[:8]}"
    if kind == "not json":
        (folder / results).write_text("{")
        return f"{results}: unreadable (not JSON"
    if kind == "a string for a number":
        _edit(folder / results,
              lambda d: d["results"]["exact.Config.track_kv_buckets"][0].__setitem__(0, "3"))
        return f"{results}: exact.Config.track_kv_buckets: result"
    if kind == "sidecar alone":
        os.remove(folder / results)
        return "an identity sidecar without its results file"
    if kind == "no machine.json":
        os.remove(folder / "machine.json")
        return "no machine.json"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["symlink", "subfolder", "script", "other machine", "renamed",
                                  "not json", "a string for a number", "sidecar alone",
                                  "no machine.json"])
@pytest.mark.extended
def test_merge_takes_only_what_a_machine_folder_holds(shards, tmp_path, kind):
    _, root, runs = shards
    bad = _copy(runs["s2"][0], tmp_path / "bad")
    why = _plant(kind, bad)
    merged = tmp_path / "merged"
    proc = cli("merge", "--results-dir", str(merged), str(runs["s1"][0]), str(bad),
               home=root / "home", check=False)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert len(proc.stderr.splitlines()) == 1 and why in proc.stderr, proc.stderr
    assert not merged.exists()


# -- the workflow's merge job, as written -------------------------------------------------------

def _head() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def _merge_job(tmp_path: Path, artifacts: dict[str, Path]):
    """nightly.yml's merge job on these shard artifacts (spyre-bench: this clone's HEAD)."""
    repo = yaml.safe_load(NIGHTLY.read_text())["env"]["SPYRE_BENCH_REPOSITORY"]
    assert repo == "${{ github.repository }}"
    runner = Runner(tmp_path / "actions", {"torch-spyre/spyre-bench": ROOT})
    for name, folder in artifacts.items():
        runner.artifacts[("1", name)] = folder
    done = runner.run_job(NIGHTLY, "merge", {"repository": "torch-spyre/spyre-bench",
                                             "sha": _head(), "ref": "refs/heads/main"},
                          run_id="1", vars={"SPYRE_BENCH_NIGHTLY": "true"})
    return done, runner


@pytest.mark.extended
def test_the_workflows_merge_job_checks_and_merges_the_shards(shards, tmp_path):
    _, _, runs = shards
    done, runner = _merge_job(tmp_path / "two", {"results-spyre-0-1": runs["s1"][0],
                                                 "results-spyre-0-2": runs["s2"][0]})
    assert done["result"] == "success" and done["outputs"]["merged"] == "true", runner.transcript()
    handed = runner.artifacts[("1", "merged-results")]
    assert sorted(p.name for p in handed.iterdir()) == [MACHINE]     # no lock, nothing else
    whole = files(runs["whole"][0])
    ours = files(handed / MACHINE)
    assert sorted(ours) == sorted(whole)
    assert all(without_timing(n, ours[n]) == without_timing(n, whole[n]) for n in whole)
    # one artifact alone is extracted flat by download-artifact: still found and merged
    done, runner = _merge_job(tmp_path / "one", {"results-spyre-0-1": runs["s1"][0]})
    assert done["result"] == "success", runner.transcript()
    assert files(runner.artifacts[("1", "merged-results")] / MACHINE) == files(runs["s1"][0])


@pytest.mark.extended
def test_the_workflows_merge_job_hands_nothing_over_on_a_conflict(shards, tmp_path):
    _, _, runs = shards
    again = _copy(runs["s1"][0], tmp_path / "again")
    name = next(n for n in sorted(files(again)) if n.endswith(f"-{ENV}.json"))
    _edit(again / name, _exact_value_changed)
    done, runner = _merge_job(tmp_path / "conflict", {"results-spyre-0-1": runs["s1"][0],
                                                      "results-spyre-0-1-again": again})
    assert done["result"] == "failure" and not done["outputs"].get("merged")
    assert f"conflict in {MACHINE}/{name}" in runner.transcript()
    assert ("1", "merged-results") not in runner.artifacts
    wf = yaml.safe_load(NIGHTLY.read_text())
    assert "needs.merge.outputs.merged == 'true'" in wf["jobs"]["record"]["if"]


@pytest.mark.parametrize("inputs,expected", [
    ({}, {"shards": "[1]", "count": "1", "max-new": "20", "backfill": "5", "backfill-step": "4"}),
    ({"shards": 3, "max-new": 0, "backfill": 1800, "backfill-step": 1},
     {"shards": "[1,2,3]", "count": "3", "max-new": "0", "backfill": "1800", "backfill-step": "1"}),
    ({"shards": 257}, None), ({"shards": 0}, None), ({"backfill-step": 0}, None),
    ({"backfill": "5; echo"}, None)])
def test_the_workflows_plan_job_lists_the_shards_from_the_inputs(tmp_path, inputs, expected):
    """A scheduled run (no inputs) takes the defaults; a 0 asked for stays 0; a bad input stops
    the run before any runner starts."""
    runner = Runner(tmp_path / "actions", {})
    done = runner.run_job(NIGHTLY, "plan", {"repository": "torch-spyre/spyre-bench"}, run_id="1",
                          vars={"SPYRE_BENCH_NIGHTLY": "true"}, inputs=inputs)
    if expected is None:
        assert done["result"] == "failure", runner.transcript()
    else:
        assert done["result"] == "success" and done["outputs"] == expected, runner.transcript()
        assert json.loads(done["outputs"]["shards"]) == list(range(1, int(expected["count"]) + 1))
