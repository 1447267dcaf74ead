"""The pieces around ASV: reference repo, machine file, staging, config, benchmark suite import."""

import json
import os
import subprocess
import sys

import pytest

from harness.errors import HarnessError
from harness.runner.asv_config import PROJECT_CONFIG, load_project_config, write_config
from harness.runner.machine import ensure_machine
from harness.runner.reference_repo import ORDER, ensure_reference_repo


def test_reference_repo_is_deterministic_and_idempotent(tmp_path):
    a = ensure_reference_repo(tmp_path / "a")
    b = ensure_reference_repo(tmp_path / "b")
    assert a == b and set(a) == set(ORDER) and len(set(a.values())) == len(ORDER)
    assert ensure_reference_repo(tmp_path / "a") == a          # second call: nothing to do
    marker = subprocess.run(["git", "-C", str(tmp_path / "a"), "show",
                             f"{a['pre-810']}:SPYRE_BENCH_SUBJECT"], capture_output=True, text=True)
    assert marker.stdout.strip() == "reference:pre-810"


def test_reference_repo_refuses_a_foreign_folder(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "file").write_text("mine")
    with pytest.raises(HarnessError, match="not spyre-bench's reference repository"):
        ensure_reference_repo(tmp_path / "x")


def test_machine_file_keeps_other_entries_and_completes_ours(tmp_path):
    path = tmp_path / ".asv-machine.json"
    path.write_text(json.dumps({"other": {"machine": "other", "cpu": "x"},
                                "box": {"machine": "box", "cpu": "custom cpu", "ram": ""},
                                "version": 1}))
    entry = ensure_machine("box", path)
    data = json.loads(path.read_text())
    assert data["other"] == {"machine": "other", "cpu": "x"}
    assert entry["cpu"] == "custom cpu" and entry["ram"] and entry["arch"] and entry["num_cpu"]


def test_stage_links_the_harness_into_an_environment_and_removes_it(tmp_path):
    """asv.conf.json's install step, run by path with an interpreter that lacks the harness."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = str(env / "bin" / "python")
    stage = str(PROJECT_CONFIG.parent / "harness" / "stage.py")
    probe = [python, "-c", "import harness.stage, sys; print(harness.stage.__file__)"]
    run = dict(capture_output=True, text=True, cwd=tmp_path)   # not from the repo's folder
    assert subprocess.run(probe, **run).returncode != 0
    subprocess.run([python, stage, str(PROJECT_CONFIG.parent)], check=True, cwd=tmp_path)
    found = subprocess.run(probe, check=True, **run).stdout.strip()
    assert found == stage
    subprocess.run([python, stage, "--remove"], check=True, cwd=tmp_path)
    assert subprocess.run(probe, **run).returncode != 0
    bad = subprocess.run([python, stage, str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode != 0 and "not a spyre-bench checkout" in bad.stderr


def test_temporary_config_overrides_paths_only(tmp_path):
    project = load_project_config()
    path = write_config(tmp_path / "asv.conf.json", tmp_path / "repo", tmp_path / "results")
    conf = json.loads(path.read_text())
    assert conf["repo"] == str((tmp_path / "repo").resolve())
    assert conf["results_dir"] == str((tmp_path / "results").resolve())
    assert conf["benchmark_dir"] == str(PROJECT_CONFIG.parent / "benchmarks")
    for key in ("launch_method", "plugins", "regressions_thresholds", "matrix"):
        assert conf[key] == project[key]


def test_suite_discovers_with_units_versions_and_no_torch_in_exact():
    code = ("import sys, benchmarks.exact as e;"
            "assert 'torch' not in sys.modules, 'exact benchmarks imported torch';"
            "names=[n for n in dir(e.Workload) if n.startswith('track_')];"
            "from harness.registry import REGISTRY;"
            "assert all(getattr(e.Workload, n).unit for n in names);"
            "assert all(getattr(e.Workload, n).version == REGISTRY['exact.Workload.' + n].version"
            " for n in names);"
            "print(len(names), len(e.Workload.params[-1]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "SPYRE_BENCH_TIER": "quick"})
    assert proc.returncode == 0, proc.stderr


def test_tier_is_chosen_without_editing_files():
    code = "import benchmarks.exact as e; print(len(e.Config.params[0]), len(e.Config.params[2]))"
    out = {}
    for tier in ("quick", "full"):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "SPYRE_BENCH_TIER": tier})
        assert proc.returncode == 0, proc.stderr
        out[tier] = proc.stdout.split()
    assert out == {"quick": ["4", "1"], "full": ["6", "2"]}
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "SPYRE_BENCH_TIER": "huge"})
    assert bad.returncode != 0 and "SPYRE_BENCH_TIER='huge'" in bad.stderr


def test_a_failed_asv_step_is_reported_by_the_line_that_says_why(spyre_repo, tmp_path,
                                                                  monkeypatch):
    """ASV's own failure (a configured branch the clone lacks), through the runner's real call."""
    import io

    from harness.runner.asv_suite import Options, _asv_command, _run_group
    monkeypatch.setenv("HOME", str(tmp_path))
    ensure_machine("box", tmp_path / ".asv-machine.json")
    conf = write_config(tmp_path / "asv.conf.json", spyre_repo.path, tmp_path / "results",
                        branches=["no-such-branch"])
    options = Options(repo=spyre_repo.path, results_dir=tmp_path / "results", machine="box",
                      device="cpu")
    cmd = _asv_command(conf, spyre_repo.commits["pre-810"], options, "^kernel\\.")
    code, cause = _run_group(cmd, {**os.environ, "HOME": str(tmp_path)}, io.StringIO(),
                             lambda p: None)
    assert code != 0 and "Unknown branch" in cause and "no-such-branch" in cause, cause


def test_progress_in_a_pipe_is_a_line_per_unit_and_a_heartbeat(tmp_path):
    import time

    from harness.runner.asv_suite import Target
    from harness.runner.progress import LineProgress
    lines = []
    target = Target("abc12345 docs", "abc12345" * 5, "reference:pre-810")
    with LineProgress(lines.append, interval=0.3) as progress:
        progress(target, "kernel", 0.5)
        time.sleep(1.0)
        progress(target, "kernel", 0.6)       # same unit: no new "started" line
    assert lines[0] == "  abc12345 docs [kernel] started (50%)"
    beats = [ln for ln in lines[1:] if "elapsed" in ln]
    assert len(beats) >= 2 and all("[kernel]" in ln for ln in beats)
    assert sum("started" in ln for ln in lines) == 1


def test_in_process_the_workload_cache_is_set_up_first_and_results_keep_their_order(
        monkeypatch):
    """Workload's setup_cache fills what Config's reads (the workers' bucketings), so it runs
    first in one process; the stored results stay in discovery order."""
    from harness.runner import inprocess
    benchmarks = inprocess.discover("tiny")
    ran = []
    for b in benchmarks:
        cls = b._attr_sources[1].__class__
        monkeypatch.setattr(cls, "setup_cache",
                            lambda self, name=cls.__name__: ran.append(name) or {"skipped": "x"})
    values = inprocess._values(benchmarks, {b.name: None for b in benchmarks})
    assert ran[0] == "Workload" and sorted(ran) == ["Config", "Frontier", "Ladder", "Workload"]
    assert list(values) == [b.name for b in benchmarks]
    assert all(v != v for vals, *_ in values.values() for v in vals)   # NaN: skipped
