"""``make run``'s command: where it writes (where every reader looks by default), what of it git
ignores, and its closing verdict: calm on identical code, an exit status that says why."""

import os
import subprocess
import sys
from pathlib import Path

from harness.cli import parser
from harness.cli.common import HISTORY_DIR
from harness.runner.asv_config import PROJECT_ROOT
from harness.runner.reference_repo import ORDER, ensure_reference_repo
from harness.store.history import load_history

# the exact tier's two cheapest series and one kernel probe: seconds, not minutes
BENCH = (r"^(exact\.Config\.track_batched_num_blocks_distinct\("
         r"|exact\.Ladder\.track_batched_num_blocks\(.*'192', '2048'"
         r"|kernel\.Decode\.time_layer\('small-4x8'\))")


def _default(command: str, *args: str) -> Path:
    ns = parser().parse_args([command, *args])
    path = Path(ns.results_dir)
    return path if path.is_absolute() else PROJECT_ROOT / path   # relative: from the clone


def test_every_reader_defaults_to_where_run_writes():
    from harness.cli import run as run_cli
    assert run_cli.HISTORY_DIR == HISTORY_DIR          # run's default (--repo or not)
    for command, args in (("history", ()), ("changes", ()), ("compare", ("a", "b")),
                          ("report", ("--out", "site"))):
        assert _default(command, *args).resolve() == HISTORY_DIR.resolve(), command


def test_reference_results_are_never_committed(tmp_path):
    commits = ensure_reference_repo(tmp_path / "reference")
    assert set(commits) == set(ORDER)
    names = [f"results/box/{c[:8]}-spyre-bench-py3.11-cpu{suffix}"
             for c in commits.values() for suffix in (".json", ".identity")]
    names += ["results/box/machine.json", "results/box/benchmarks.json", "results/benchmarks.json"]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=PROJECT_ROOT,
                          capture_output=True, text=True)
    assert sorted(proc.stdout.split()) == sorted(names)
    other = "results/box/0123abcd-spyre-bench-py3.11-cpu.json"        # a real commit's
    assert subprocess.run(["git", "check-ignore", "--no-index", "-q", other],
                          cwd=PROJECT_ROOT).returncode == 1


def _run(tmp_path, *args):
    env = {**os.environ, "HOME": str(tmp_path), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path)


def test_make_run_twice_is_calm_and_history_shows_it(tmp_path):
    results = tmp_path / "results"
    common = ["--tier", "tiny", "--bench", BENCH, "--device", "cpu", "--machine", "box",
              "--results-dir", str(results)]
    first = _run(tmp_path, "run", *common)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "timing reference:pre-810 and reference:post-810-clamp interleaved" in first.stdout
    assert first.stdout.rstrip().splitlines()[-1].startswith("exit status 0: measured")
    # again, and the reference compared with itself: nothing measured again, nothing flagged
    again = _run(tmp_path, "run", "--reference", "post-810-clamp,post-810-clamp", *common)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "kept from an earlier run" in again.stdout
    assert "🔴" not in again.stdout and "regression" not in again.stdout
    assert "oracle: 2/2 probes match" in again.stdout
    frame = load_history(results)
    assert frame["complete"].all() and frame["commit"].nunique() == 2
    shown = _run(tmp_path, "history", "--results-dir", str(results))
    assert shown.returncode == 0
    for commit in frame["commit"].unique():
        assert commit[:12] in shown.stdout
