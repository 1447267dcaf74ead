"""The review's numbers from the command line, computed by the generated repository's own code;
errors as one line with exit status 2 and nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fixtures.spyre_repo import BROKEN, BUCKETER


def run_cli(*args: str, tmpdir=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if tmpdir is not None:
        env.update(TMPDIR=str(tmpdir), TMP=str(tmpdir), TEMP=str(tmpdir))
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=env)


def repo_state(repo) -> tuple[str, str, str]:
    """Refs, worktrees and status: what a run must never change."""
    return (repo.git("for-each-ref"), repo.git("worktree", "list", "--porcelain"),
            repo.git("status", "--porcelain"))


LADDERS_192 = ("ladders", "--block-size", "192", "--max-model-len", "2048")


def test_ladders_must_show_pre_810_vs_810(spyre_repo, tmp_path):
    before = repo_state(spyre_repo)
    done = run_cli(*LADDERS_192, "--base", spyre_repo.spec("pre-810"),
                   "--head", spyre_repo.spec("810-topup"), tmpdir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[1,2,4,8,11] → [2,3,6,11]" in done.stdout
    assert done.stderr == ""
    assert list(tmp_path.iterdir()) == [] and repo_state(spyre_repo) == before


def test_ladders_follow_an_edit_of_the_fixture(spyre_repo):
    edited = spyre_repo.edit(BUCKETER, "start=self._block_size", "start=1", parent="810-topup",
                             message="kv ladder from 1")
    done = run_cli(*LADDERS_192, "--base", spyre_repo.spec("pre-810"), "--head",
                   spyre_repo.spec(edited), "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    head = row["subjects"][spyre_repo.spec(edited)]["ladders"]
    assert head["batched_num_blocks"] == [1, 2, 3, 6, 11]
    assert "ladders.batched_num_blocks" in row["changed"]


COST = ("cost", "--batched", "--env", "SPYRE_ATTN_KV_BUCKETS=128,8192", "--block-size", "64",
        "--max-model-len", "2048", "--step", "150,150,150,150")


def test_cost_must_show_4_then_128_then_32_iterations(spyre_repo):
    specs = {g: spyre_repo.spec(g) for g in ("pre-810", "810-topup", "810-clamp")}
    done = run_cli(*COST, "--base", specs["pre-810"], "--head", specs["810-topup"])
    assert done.returncode == 0, done.stderr
    assert "4 → 128" in done.stdout and "16 KiB → 512 KiB" in done.stdout
    done = run_cli(*COST, "--base", specs["810-topup"], "--head", specs["810-clamp"], "--json")
    (row,) = json.loads(done.stdout)
    figures = row["subjects"]
    assert figures[specs["810-topup"]]["iterations_per_layer_mean"] == 128
    assert figures[specs["810-clamp"]]["iterations_per_layer_mean"] == 32
    assert figures[specs["810-clamp"]]["mask_bytes_per_step"] == 128 * 1024


def test_a_subject_without_the_bucketer_prints_skips(spyre_repo):
    old = spyre_repo.spec("no-bucketer")
    done = run_cli(*LADDERS_192, "--base", old, "--head", spyre_repo.spec("pre-810"))
    assert done.returncode == 0, done.stderr
    # the base column's text, its wrapped lines joined (where it wraps follows the path's length)
    base_cell = " ".join(line.split("│")[6].strip() for line in done.stdout.splitlines()
                         if line.startswith("│"))
    assert "has no bucketer" in base_cell, done.stdout
    for command in (LADDERS_192, COST):
        done = run_cli(*command, "--subject", old, "--json")
        assert done.returncode == 2  # nothing could be computed
        rows = json.loads(done.stdout)
        assert rows and all(set(r["subjects"][old]) == {"skipped"} for r in rows)
        assert "spyre_attn_bucketer.py is not in it" in rows[0]["subjects"][old]["skipped"]
        text = run_cli(*command, "--subject", old).stdout
        assert "skipped: " in text


@pytest.mark.parametrize("make_spec, missing", [
    (lambda r, t: f"git:{r.path}@v9.9", "revision 'v9.9' does not exist in"),
    (lambda r, t: f"git:{t}/nowhere@HEAD", "no such directory"),
    (lambda r, t: f"path:{r.path}/spyre_inference", "not a spyre-inference checkout"),
    (lambda r, t: r.spec(BROKEN), "failed to import: ModuleNotFoundError"),
    (lambda r, t: "spyre-inference", "package is not installed"),
])
def test_errors_are_one_line_exit_2_and_leave_nothing(spyre_repo, tmp_path, make_spec, missing):
    spec = make_spec(spyre_repo, tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    before = repo_state(spyre_repo)
    done = run_cli(*LADDERS_192, "--base", spyre_repo.spec("pre-810"), "--head", spec,
                   tmpdir=scratch)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"spyre-bench: error: {spec}")
    assert missing in lines[0]
    assert list(scratch.iterdir()) == [] and repo_state(spyre_repo) == before


def test_help_names_every_spec_form():
    done = run_cli("ladders", "--help")
    text = " ".join(done.stdout.split())
    for form in ("reference:<policy>", "spyre-inference", "path:<checkout>", "git:<repo>@<rev>"):
        assert form in text
