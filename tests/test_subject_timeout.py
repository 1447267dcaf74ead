"""Subject code is bounded in time: a looping bucketer is one error line and exit 2, quickly."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.fixtures.spyre_repo import BUCKETER
from tests.fixtures.spyre_sources import looping_bucketer


def test_a_looping_bucketer_is_one_error_line_and_exit_2_within_the_timeout(spyre_repo):
    rev = spyre_repo.add_commit({BUCKETER: looping_bucketer()}, "bucketer: wait forever",
                                parent="gen4")
    spec = spyre_repo.spec(rev)
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "harness", "cost", "--subject", spec, "--subject-timeout",
         "3", "--block-size", "64", "--max-model-len", "2048", "--step", "150,150,150,150"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    elapsed = time.monotonic() - t0
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith(f"spyre-bench: error: {spec} (commit {rev[:12]}): "), lines[0]
    assert "bucketing bs=64 mml=2048" in lines[0], lines[0]
    assert "still ran after 3 s" in lines[0] and "--subject-timeout" in lines[0]
    assert elapsed < 60  # 3 s of subject code plus the command's start-up


def test_help_says_a_subjects_code_runs_in_a_worker_of_its_own():
    done = subprocess.run([sys.executable, "-m", "harness", "cost", "--help"],
                          capture_output=True, text=True, check=True)
    text = " ".join(done.stdout.split())
    assert "code runs (import, bucketer, metadata builder) in a worker process of its own" in text
    assert "only name checkouts you trust" in text and "--subject-timeout" in text
