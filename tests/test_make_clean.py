"""``make clean`` removes everything the project creates, in a copy of the project's files (never
this checkout's own .venv) and its per-user cache (figures memo, bandwidth), and keeps committed
results."""

import os
import shutil
import subprocess

import pytest

from harness.runner.asv_config import PROJECT_ROOT

CREATED = [".venv/bin/python", ".venv-vllm/bin/python", ".asv/env-test/lib/x", ".asv/logs/a.log",
           ".asv/reference-repo/README.md", ".pytest_cache/v", ".ruff_cache/x", ".benchmarks/k.json",
           ".hypothesis/examples/x", "build/lib/x", "dist/x.whl", "html/index.html",
           "test-artifacts/x", "spyre_bench.egg-info/PKG-INFO", ".spyre-bench.lock",
           "harness/__pycache__/x.pyc", "harness/cli/__pycache__/y.pyc",
           "results/box/0ef10100-spyre-bench-py3.11-cpu.json",        # the reference's
           "results/box/0ef10100-spyre-bench-py3.11-cpu.identity",
           "results/benchmarks.json", "results/box/machine.json", "results/.spyre-bench.lock"]
KEPT = ["Makefile", "results/README.md", "results/.gitignore",
        "results/hw/0123abcd-spyre-bench-py3.11-spyre.json", "results/hw/machine.json"]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_clean_removes_what_the_project_creates(tmp_path):
    for name in ("Makefile", ".gitignore", "results/.gitignore", "results/README.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT_ROOT / name, tmp_path / name)
    for name in KEPT[3:]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "-f", "."], cwd=tmp_path, check=True)   # committed history
    subprocess.run([*git, "commit", "-qm", "x"], cwd=tmp_path, check=True)
    for name in CREATED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    cache = tmp_path.parent / f"{tmp_path.name}-cache"     # the user's cache: ours goes
    for name in ("spyre-bench/figures/ab.json", "spyre-bench/bandwidth.json", "pip/kept"):
        (cache / name).parent.mkdir(parents=True, exist_ok=True)
        (cache / name).write_text("x")
    subprocess.run(["make", "-s", "clean"], cwd=tmp_path, check=True, capture_output=True,
                   env={**os.environ, "XDG_CACHE_HOME": str(cache)})
    assert not (cache / "spyre-bench").exists() and (cache / "pip/kept").exists()
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
                  if p.is_file() and ".git" not in p.relative_to(tmp_path).parts)
    assert left == sorted([*KEPT, ".gitignore"])
