"""A subject's code runs in its worker process: whatever it does is that subject's failure.

Each misbehaviour is written into a fixture commit (gen4 with its bucketer edited) and run through
real ``spyre-bench`` subprocesses: the command says "subject failed" (or the row is FAILED) and
exits non-zero, its own output intact (``--json`` parses), and nothing is left behind: no worker
process, no scratch folder, no file where the subject pointed its cwd.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.config import KV_BUCKETS, EngineConfig, Overrides
from harness.matrix import Case
from harness.subjects import resolve_subject
from harness.worker import IN_PROCESS_ENV, open_subject
from harness.worker.proxy import SubjectWorker
from tests.fixtures.spyre_repo import BUCKETER

ROOT = Path(__file__).resolve().parent.parent
CLASS = "class SpyreAttnBucketer:"
INIT = "        self._block_size = vllm_config.cache_config.block_size\n"


def at_import(code: str) -> tuple[str, str]:
    return CLASS, code + "\n" + CLASS


def in_init(code: str) -> tuple[str, str]:
    """``code`` runs when the bucketer is built for block_size 192 (other configs are fine)."""
    body = "".join(f"            {line}\n" for line in code.splitlines())
    return INIT, f"        if vllm_config.cache_config.block_size == 192:\n{body}{INIT}"


#: name -> (edit, where it bites: "load" (every row) or "row" (bs 192 rows only))
MISBEHAVIOURS = {
    "sys.exit(0) at import": (at_import("import sys\nsys.exit(0)"), "load"),
    "os._exit(3) at import": (at_import("import os\nos._exit(3)"), "load"),
    "os._exit(0) at import": (at_import("import os\nos._exit(0)"), "load"),
    "BaseException at import": (at_import(
        "class Boom(BaseException):\n    pass\nraise Boom('no')"), "load"),
    "SIGKILL to itself at import": (at_import(
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"), "load"),
    "sys.exit(0) while bucketing": (in_init("import sys\nsys.exit(0)"), "row"),
    "os._exit(0) while bucketing": (in_init("import os\nos._exit(0)"), "row"),
    "KeyboardInterrupt while bucketing": (in_init("raise KeyboardInterrupt"), "row"),
    "garbage on the reply pipe while bucketing": (in_init(
        "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'\\xff' * 64)\n"
        "    except OSError:\n        pass\nos._exit(0)"), "row"),
}

#: Misbehaviours that must not change the outcome at all (figures as on gen4, exit 0).
HARMLESS = {
    "print at import and while bucketing": at_import("print('{\"not\": \"json\"'); import sys; "
                                                      "print('noise', file=sys.stderr)"),
    "chdir at import": at_import("import os, tempfile\nos.chdir(tempfile.gettempdir())"),
    "atexit exit 0 at import": at_import("import atexit, os\natexit.register(os._exit, 0)"),
    "non-daemon thread at import": at_import(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(3600,)).start()"),
    "fork at import": at_import("import os\nos.fork()"),
    "SIGTERM ignored at import": at_import("import signal\n"
                                           "signal.signal(signal.SIGTERM, signal.SIG_IGN)"),
}


def spyre_bench(*args, cwd: Path, tmp: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    env.pop(IN_PROCESS_ENV, None)   # these test the worker
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def scratch(tmp_path):
    (tmp_path / "tmp").mkdir()
    (tmp_path / "cwd").mkdir()
    return tmp_path


def left_behind(scratch: Path) -> list[str]:
    return sorted(p.name for p in (scratch / "tmp").iterdir())


def worker_processes(marker: str) -> list[int]:
    """Processes still running whose command line or scratch folder names ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker in os.readlink(proc / "cwd"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("name", sorted(MISBEHAVIOURS))
def test_a_misbehaving_subject_is_that_subjects_failure(spyre_repo, scratch, name):
    (old, new), bites = MISBEHAVIOURS[name]
    commit = spyre_repo.edit(BUCKETER, old, new, parent="gen4", message=name)
    proc = spyre_bench("ladders", "--subject", f"git:{spyre_repo.path}@{commit}", "--tier",
                       "tiny", "--json", cwd=scratch / "cwd", tmp=scratch / "tmp")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("spyre-bench:")]
    assert len(said) == 1 and "subject failed" in said[0], proc.stderr
    if bites == "row":   # the other rows were measured, and the JSON says which failed
        rows = json.loads(proc.stdout)
        failed = [r for r in rows for f in r["subjects"].values() if f.get("failed")]
        assert failed and all(r["case"]["block_size"] == 192 for r in failed)
        assert any("ladders" in f for r in rows for f in r["subjects"].values())
    assert left_behind(scratch) == []
    assert worker_processes(str(scratch)) == []


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_what_a_subject_does_to_its_own_process_changes_nothing(spyre_repo, scratch, name):
    old, new = HARMLESS[name]
    commit = spyre_repo.edit(BUCKETER, old, new, parent="gen4", message=name)
    proc = spyre_bench("ladders", "--base", spyre_repo.spec("gen4"), "--head",
                       f"git:{spyre_repo.path}@{commit}", "--tier", "tiny", "--json",
                       cwd=scratch / "cwd", tmp=scratch / "tmp", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(proc.stdout)   # the subject's prints went elsewhere
    for row in rows:
        base, head = row["subjects"].values()
        assert base == head
    assert sorted(p.name for p in (scratch / "cwd").iterdir()) == []
    assert left_behind(scratch) == []
    assert worker_processes(str(scratch)) == []


def test_a_hang_that_ignores_the_alarm_is_stopped_by_the_harness(spyre_repo, scratch):
    code = ("import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
            "while True:\n    time.sleep(1)")
    commit = spyre_repo.edit(BUCKETER, *at_import(code), parent="gen4", message="hang")
    started = time.monotonic()
    proc = spyre_bench("ladders", "--subject", f"git:{spyre_repo.path}@{commit}", "--tier",
                       "tiny", "--subject-timeout", "1", cwd=scratch / "cwd",
                       tmp=scratch / "tmp")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "its worker was stopped" in proc.stderr, proc.stderr
    assert time.monotonic() - started < 60
    assert left_behind(scratch) == []
    assert worker_processes(str(scratch)) == []


def test_the_worker_gives_the_figures_of_the_subject_in_process(spyre_repo, monkeypatch):
    """The boundary changes where the code runs, not one figure."""
    from harness.evaluate import config_figures, workload_figures
    from harness.workloads import specs

    monkeypatch.delenv(IN_PROCESS_ENV, raising=False)
    spec = spyre_repo.spec("gen3")
    here, there = resolve_subject(spec), open_subject(spec)
    loads = specs(["bimodal"], steps=4)
    try:
        assert isinstance(there, SubjectWorker) and there.capabilities == here.capabilities
        assert there.identity == here.identity
        for bs, env in ((64, {}), (192, {KV_BUCKETS: "128"})):
            case = Case(EngineConfig(block_size=bs), Overrides.from_env(env))
            want = json.loads(json.dumps(config_figures(here, case)))
            assert config_figures(there, case) == want and "ladders" in want
            want = json.loads(json.dumps(workload_figures(here, case, loads)))
            assert workload_figures(there, case, loads) == want
            assert all("skipped" not in w for w in want.values()), want
    finally:
        there.close()


def test_a_closed_worker_leaves_no_process(spyre_repo, monkeypatch):
    monkeypatch.delenv(IN_PROCESS_ENV, raising=False)
    worker = open_subject(spyre_repo.spec("gen4"))
    pid = worker._pid
    worker.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


COMMANDS = {
    "ladders": ["ladders", "--subject", "{bad}", "--tier", "tiny"],
    "cost": ["cost", "--subject", "{bad}", "--tier", "tiny", "--workload", "bimodal"],
    "kernel": ["kernel", "--subject", "{bad}", "--tier", "tiny", "--workload", "bimodal",
               "--no-graphs", "--repeat", "1"],
    "compare": ["compare", "--base", "{good}", "--head", "{bad}", "--tier", "tiny"],
    "crosscheck": ["crosscheck", "--subject", "{bad}", "--policy", "latest", "--tier", "tiny"],
    "frontier": ["frontier", "--subject", "{bad}", "--workload", "bimodal"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_that_loads_subjects_says_subject_failed(spyre_repo, scratch, command):
    """sys.exit(0) when the bucketer is imported: never exit 0, never a traceback, one line."""
    (old, new), _ = MISBEHAVIOURS["sys.exit(0) at import"]
    commit = spyre_repo.edit(BUCKETER, old, new, parent="gen4", message="sys.exit at import")
    argv = [a.format(bad=f"git:{spyre_repo.path}@{commit}", good=spyre_repo.spec("gen4"))
            for a in COMMANDS[command]]
    proc = spyre_bench(*argv, cwd=scratch / "cwd", tmp=scratch / "tmp")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("spyre-bench: error")]
    assert len(errors) == 1 and "subject failed" in errors[0] and "sys.exit(0)" in errors[0]
    assert left_behind(scratch) == []
    assert worker_processes(str(scratch)) == []
