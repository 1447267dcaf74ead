"""The fault catalogue (issue 21): interrupts, stored data a reader cannot trust, results folders
that cannot be used, and the exit-status contract, each as a real ``spyre-bench`` subprocess.

Every case asserts: the documented exit status (README "Exit status", checked against
``harness.errors`` here too), no traceback, one line on stderr for an error (or one warning
line naming a skipped file), nothing stored changed, and nothing left behind (no process of the
command's session or of what it held, no temporary folder). Interrupts land on a commit whose
bucketer waits while a file exists (in the process, under ASV, or in a worker child only), so
the signal always arrives mid-run; those commands all run at once to keep the file quick.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness import errors
from harness.runner.sessions import members
from harness.store.history import load_history
from harness.store.identity import read as read_identity
from tests.fixtures.spyre_repo import BACKEND, BUCKETER
from tests.fixtures.spyre_sources import bucketer, generation_files
from tests.test_compare_stored import NB, A, B
from tests.test_compare_stored import results as _results

ROOT = Path(__file__).resolve().parent.parent
IS_ROOT = os.geteuid() == 0
BENCH = (r"^(exact\.Config\.track_batched_num_blocks_distinct\("
         r"|kernel\.Decode\.time_layer\('small-4x8'\))")


def results(folder: Path, **kwargs) -> None:
    """Stored results of commits A and B (tests.test_compare_stored) in a new ``folder``."""
    folder.mkdir(parents=True)
    _results(folder, **kwargs)


def _env(home: Path, **extra) -> dict:
    tmp = home / "tmp"
    if not tmp.is_symlink():
        tmp.mkdir(parents=True, exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "COLUMNS": "200",
            "TMPDIR": str(tmp.resolve()),
            "SPYRE_BENCH_JOBS": "1", **extra}


def _child_defaults() -> None:
    """Signals at their defaults in the command (a background shell starts children with SIGINT
    ignored, and Python then never raises KeyboardInterrupt)."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def spyre_bench(args: list[str], home: Path, timeout: float = 60, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=home, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=_env(home, **env))


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` -> digest, "dir" or its kind (a FIFO is never opened)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(root))] = "link:" + os.readlink(p)
        elif p.is_dir():
            out[str(p.relative_to(root))] = "dir"
        elif p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[str(p.relative_to(root))] = "special"
    return out


def no_traceback(proc) -> str:
    both = proc.stdout + proc.stderr
    assert "Traceback" not in both, both
    return both


def one_error_line(proc, text: str = "") -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("[")]
    assert len(lines) == 1 and "spyre-bench: error:" in lines[0], proc.stderr
    assert text in lines[0], proc.stderr
    return lines[0]


# -- the README's table is the code's contract ---------------------------------------------------

def test_the_readme_exit_status_table_matches_the_code():
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Exit status\n", 1)[1].split("\n## ", 1)[0]
    rows = {int(m.group(1)): m.group(2) for m in
            re.finditer(r"^\| (\d) \| ([^|]+) \|", section, re.MULTILINE)}
    assert rows.keys() == {0, 1, 2, 3}, section
    words = {errors.EXIT_OK: "measured", errors.EXIT_FLAGGED: "regression",
             errors.EXIT_INPUT: "bad input", errors.EXIT_INTERRUPTED: "interrupted"}
    assert {code: word in rows[code] for code, word in words.items()} == dict.fromkeys(words, True)
    assert errors.HarnessError.exit_status == errors.EXIT_INPUT
    assert errors.SubjectFailed(["x"]).exit_status == errors.EXIT_FLAGGED
    assert errors.Interrupted().exit_status == errors.EXIT_INTERRUPTED
    assert "130" not in section


# -- stored data a reader cannot trust -----------------------------------------------------------

def _valid(commit="c" * 40, **change) -> dict:
    row = [[3], [["'x'"]], "1", 0, 1.0]
    data = {"commit_hash": commit, "env_name": "spyre-bench-py3.11-cpu", "date": 1_700_000_000_000,
            "params": {}, "python": "3.11", "requirements": {}, "env_vars": {},
            "result_columns": ["result", "params", "version", "started_at", "duration",
                               "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75",
                               "stats_number", "stats_repeat", "samples", "profile"],
            "results": {NB: row}, "durations": {}, "version": 2}
    data.update(change)
    return data


def _row(**cells) -> dict:
    row = [[3], [["'x'"]], "1", 0, 1.0, None, None, None, None, None, None, None]
    names = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
             "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
             "samples"]
    for k, v in cells.items():
        row[names.index(k)] = v
    return {"results": {NB: row}}


#: (id, file name in the machine folder, bytes or a writer(path)); every one is skipped with
#: one warning naming it, and the rest of the history still reads.
CORRUPT = [
    ("invalid-json", "cccccccc-x.json", b"{not json"),
    ("truncated", "cccccccc-x.json", json.dumps(_valid()).encode()[:120]),
    ("empty", "cccccccc-x.json", b""),
    ("not-utf8", "cccccccc-x.json", b"\xff\xfe{}"),
    ("deep-nesting", "cccccccc-x.json", b"[" * 200_000 + b"]" * 200_000),
    ("deep-in-results", "cccccccc-x.json",
     json.dumps(_valid()).encode().replace(b'"durations": {}', b'"durations": ' + b"[" * 50_000
                                           + b"]" * 50_000)),
    ("huge-int", "cccccccc-x.json", json.dumps(_valid(**_row(result=[10 ** 400]))).encode()),
    ("too-many-digits", "cccccccc-x.json",
     json.dumps(_valid()).encode().replace(b"[[3]", b"[[" + b"9" * 5000 + b"]")),
    ("huge-float", "cccccccc-x.json",
     json.dumps(_valid()).encode().replace(b"[[3]", b"[[1e999]")),
    ("infinity", "cccccccc-x.json", json.dumps(_valid(**_row(result=[math.inf]))).encode()),
    ("result-string", "cccccccc-x.json", json.dumps(_valid(**_row(result=["fast"]))).encode()),
    ("result-bool", "cccccccc-x.json", json.dumps(_valid(**_row(result=[True]))).encode()),
    ("result-dict", "cccccccc-x.json", json.dumps(_valid(**_row(result={"a": 1}))).encode()),
    ("result-count", "cccccccc-x.json", json.dumps(_valid(**_row(result=[1, 2]))).encode()),
    ("params-not-strings", "cccccccc-x.json", json.dumps(_valid(**_row(params=[[1]]))).encode()),
    ("samples-strings", "cccccccc-x.json",
     json.dumps(_valid(**_row(samples=[["a", "b"]]))).encode()),
    ("started-at-text", "cccccccc-x.json",
     json.dumps(_valid(**_row(started_at="noon"))).encode()),
    ("stats-dict", "cccccccc-x.json", json.dumps(_valid(**_row(stats_q_25={}))).encode()),
    ("row-not-list", "cccccccc-x.json", json.dumps(_valid(results={NB: "x"})).encode()),
    ("results-list", "cccccccc-x.json", json.dumps(_valid(results=[])).encode()),
    ("commit-int", "cccccccc-x.json", json.dumps(_valid(commit=12345678)).encode()),
    ("commit-not-hex", "cccccccc-x.json", json.dumps(_valid(commit="../../etc")).encode()),
    ("date-huge", "cccccccc-x.json", json.dumps(_valid(date=10 ** 20)).encode()),
    ("date-text", "cccccccc-x.json", json.dumps(_valid(date="today")).encode()),
    ("env-name-list", "cccccccc-x.json", json.dumps(_valid(env_name=["a"])).encode()),
    ("columns-not-names", "cccccccc-x.json",
     json.dumps(_valid(result_columns=[1, 2])).encode()),
    ("version-1", "cccccccc-x.json", json.dumps(_valid(version=1)).encode()),
    ("foreign-json", "cccccccc-x.json", b'{"name": "not a results file"}'),
    ("json-array", "cccccccc-x.json", b"[1, 2, 3]"),
    ("fifo", "cccccccc-x.json", os.mkfifo),
    ("device", "cccccccc-x.json", lambda p: p.symlink_to("/dev/zero")),
    ("folder", "cccccccc-x.json", lambda p: p.mkdir()),
    ("identity-wrong-types", f"{A[:8]}-spyre-bench-py3.11-cpu.identity",
     json.dumps({"subject": "x", "commit": A, "ladders": "x", "interrupted": "no"}).encode()),
    ("identity-fifo", f"{A[:8]}-spyre-bench-py3.11-cpu.identity", os.mkfifo),
    ("identity-deep", f"{A[:8]}-spyre-bench-py3.11-cpu.identity", b"[" * 200_000),
    ("benchmarks-wrong-types", "benchmarks.json",
     json.dumps({NB: {"type": 1, "unit": [], "param_names": "bs"}}).encode()),
    ("benchmarks-fifo", "benchmarks.json", os.mkfifo),
    ("machine-json-list", "machine.json", b"[]"),
]

#: reader -> (argv after the command, exit status with the stored fixture); compare and changes
#: see an exact regression between A and B (1), history and report read (0).
READERS = {
    "history": (["history", "--results-dir", "{s}"], 0),
    "compare": (["compare", A[:8], B[:8], "--results-dir", "{s}", "--fail-on", "exact"], 1),
    "changes": (["changes", "--results-dir", "{s}"], 1),
    "report": (["report", "--results-dir", "{s}", "--out", "{w}/site"], 0),
}
#: Every corruption through ``history``; these through every reader.
EVERY_READER = ("invalid-json", "deep-nesting", "huge-int", "result-string", "fifo", "device",
                "identity-wrong-types", "benchmarks-fifo")


def _write_corrupt(stored: Path, name: str, content) -> Path:
    # the machine's own copy of benchmarks.json sits beside its results
    path = stored / "box" / name
    if callable(content):
        content(path)
    else:
        path.write_bytes(content)
    return path


CASES = [(c[0], reader) for c in CORRUPT for reader in READERS
         if reader == "history" or c[0] in EVERY_READER]


@pytest.fixture(scope="module")
def read_back(tmp_path_factory) -> dict:
    """Every (corruption, reader) case, run three at a time (each is a Python start-up and a
    pandas import, most of the file's time otherwise): case -> (process, stored, file, before)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(case):
        case_id, reader = case
        _, name, content = next(c for c in CORRUPT if c[0] == case_id)
        w = tmp_path_factory.mktemp(f"{case_id}-{reader}")
        stored = w / "stored"
        results(stored)
        bad = _write_corrupt(stored, name, content)
        before = snapshot(stored)
        argv, _ = READERS[reader]
        proc = spyre_bench([a.format(s=stored, w=w) for a in argv], w, timeout=30)
        return case, (proc, w, bad, before)

    with ThreadPoolExecutor(3) as pool:
        return dict(pool.map(one, CASES))


@pytest.mark.parametrize("case_id,reader", CASES, ids=[f"{c}-{r}" for c, r in CASES])
def test_a_reader_skips_what_it_cannot_trust(read_back, case_id, reader):
    proc, w, bad, before = read_back[(case_id, reader)]
    no_traceback(proc)
    assert proc.returncode == READERS[reader][1], proc.stdout + proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("[")]
    assert len(warnings) == 1, proc.stderr
    assert warnings[0].startswith("spyre-bench: warning:") and str(bad) in warnings[0], warnings
    assert snapshot(w / "stored") == before
    assert not list((w / "tmp").iterdir())


@pytest.mark.skipif(IS_ROOT, reason="root reads every folder whatever its mode")
@pytest.mark.parametrize("reader", sorted(READERS))
def test_an_unreadable_machine_folder_is_named_and_skipped(tmp_path, reader):
    stored = tmp_path / "stored"
    results(stored, head_machine="other")
    (stored / "other").chmod(0)
    try:
        argv, _ = READERS[reader]
        proc = spyre_bench([a.format(s=stored, w=tmp_path) for a in argv], tmp_path)
    finally:
        (stored / "other").chmod(0o755)
    no_traceback(proc)
    assert f"{stored / 'other'}: unreadable machine folder" in proc.stderr


def test_an_unlistable_machine_folder_warns_in_process(tmp_path, monkeypatch):
    """The same as the case above where root reads everything: the listing itself fails."""
    import warnings

    from harness.store import history
    stored = tmp_path / "stored"
    results(stored, head_machine="other")
    real = history._json_names

    def refuse(folder):
        if folder.name == "other":
            raise PermissionError(13, "Permission denied")
        return real(folder)
    monkeypatch.setattr(history, "_json_names", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = history.load_history(stored)
    assert set(frame.commit) == {A}
    assert [str(w.message) for w in caught] == [
        f"{stored / 'other'}: unreadable machine folder (Permission denied); skipped"]


# -- results folders that cannot be used -------------------------------------------------------

FOLDER_CASES = [
    # (id, argv, error text): {f} is a plain file, {m} a folder that does not exist, {g} a repo
    ("history-file", "history --results-dir {f}", "is not a folder"),
    ("compare-file", f"compare {A[:8]} {B[:8]} --results-dir {{f}}", "is not a folder"),
    ("changes-file", "changes --results-dir {f}", "is not a folder"),
    ("report-file", "report --results-dir {f} --out {w}/site", "is not a folder"),
    ("run-file", "run --repo {g} HEAD --results-dir {f} --machine box --device cpu --tier tiny",
     "a file is in the way"),
    ("run-under-file", "run --repo {g} HEAD --results-dir {f}/sub --machine box --device cpu "
     "--tier tiny", "cannot write results into"),
    ("nightly-file", "nightly --repo {g} --branch trunk --results-dir {f} --machine box "
     "--device cpu --no-commit", "a file is in the way"),
    ("bisect-file", "bisect --repo {g} HEAD HEAD --benchmark x --results-dir {f}",
     "unknown benchmark"),
    ("history-missing", "history --results-dir {m}", "does not exist"),
    ("compare-missing", f"compare {A[:8]} {B[:8]} --results-dir {{m}}", "does not exist"),
    ("changes-missing", "changes --results-dir {m}", "does not exist"),
    ("report-missing", "report --results-dir {m} --out {w}/site", "does not exist"),
]


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict[str, Path]:
    """A plain file, and a one-commit git repository (branch trunk) with no bucketer."""
    w = tmp_path_factory.mktemp("plain")
    (w / "a-file").write_text("not a folder\n")
    repo = w / "git"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q", "-b", "trunk"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
    return {"w": w, "f": w / "a-file", "g": repo}


@pytest.mark.parametrize("case_id,argv,text", FOLDER_CASES, ids=[c[0] for c in FOLDER_CASES])
def test_a_results_folder_that_cannot_be_used_is_one_line(plain, tmp_path, case_id, argv, text):
    fill = {"f": plain["f"], "g": plain["g"], "m": tmp_path / "missing", "w": tmp_path}
    before = snapshot(plain["w"])
    proc = spyre_bench([a.format(**fill) for a in shlex.split(argv)], tmp_path)
    no_traceback(proc)
    assert proc.returncode == errors.EXIT_INPUT, proc.stdout + proc.stderr
    one_error_line(proc, text)
    assert snapshot(plain["w"]) == before and not (tmp_path / "missing").exists()
    assert not list((tmp_path / "tmp").iterdir())


@pytest.mark.skipif(IS_ROOT, reason="root writes into every folder whatever its mode")
def test_an_unwritable_results_folder_is_one_line(plain, tmp_path):
    stored = tmp_path / "stored"
    stored.mkdir()
    stored.chmod(0o555)
    try:
        proc = spyre_bench(["run", "--repo", str(plain["g"]), "HEAD", "--results-dir",
                            str(stored), "--machine", "box", "--device", "cpu"], tmp_path)
    finally:
        stored.chmod(0o755)
    no_traceback(proc)
    assert proc.returncode == errors.EXIT_INPUT
    one_error_line(proc, "cannot write results into")


def _file_modes_bind() -> None:
    """``preexec_fn``: the command obeys file modes even as root (CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH leave its bounding set, so it starts without them); as another user it
    does anyway."""
    if IS_ROOT:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2):                          # PR_CAPBSET_DROP of the two overrides
            if libc.prctl(24, cap, 0, 0, 0):
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


#: (id, what is done to the stored machine folder ``box``): a run into it is refused at once
MACHINE_FOLDERS = [
    ("unwritable-folder", lambda box: box.chmod(0o555)),
    ("unwritable-machine-json", lambda box: (box / "machine.json").chmod(0o444)),
    ("file-in-its-place", lambda box: (shutil.rmtree(box), box.write_text("not a folder\n"))),
]


def _can_shed_overrides() -> bool:
    """Not root, or root holding CAP_SETPCAP (bit 8), which dropping from the bounding set needs."""
    if not IS_ROOT:
        return True
    status = Path("/proc/self/status").read_text()
    effective = int(re.search(r"^CapEff:\s*([0-9a-f]+)", status, re.MULTILINE).group(1), 16)
    return bool(effective >> 8 & 1)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _can_shed_overrides(),
                    reason="root here cannot shed its permission overrides (prctl, CAP_SETPCAP)")
@pytest.mark.parametrize("case_id,spoil", MACHINE_FOLDERS, ids=[c[0] for c in MACHINE_FOLDERS])
def test_a_machine_folder_that_cannot_be_written_is_one_line(plain, tmp_path, case_id, spoil):
    stored = tmp_path / "stored"
    results(stored)
    (stored / "box" / "machine.json").write_text('{"machine": "box", "version": 1}')
    spoil(stored / "box")
    before = snapshot(stored)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "run", "--repo", str(plain["g"]), "HEAD",
             "--results-dir", str(stored), "--machine", "box", "--device", "cpu", "--tier",
             "tiny"], capture_output=True, text=True, cwd=tmp_path, timeout=60,
            stdin=subprocess.DEVNULL, env=_env(tmp_path), preexec_fn=_file_modes_bind)
    finally:
        for path in (stored / "box", stored / "box" / "machine.json"):
            if path.exists() and not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)
    no_traceback(proc)
    assert proc.returncode == errors.EXIT_INPUT, proc.stdout + proc.stderr
    one_error_line(proc, f"cannot write results into {stored / 'box'}: ")
    assert snapshot(stored) == before
    assert not list((tmp_path / "tmp").iterdir())


# -- the contract, outcome by outcome ----------------------------------------------------------

OUTCOMES = [
    # (id, argv, exit status, text on stdout or stderr)
    ("history-reads", "history --results-dir {s}", 0, "history in"),
    ("compare-flags-exact", f"compare {A[:8]} {B[:8]} --results-dir {{s}} --fail-on exact", 1,
     "exact: 1 of 2 figures changed"),
    ("compare-gate-off", f"compare {A[:8]} {B[:8]} --results-dir {{s}} --fail-on ''", 0, ""),
    ("compare-not-comparable", f"compare {A[:8]} {B[:8]} --results-dir {{o}}", 2,
     "not comparable"),
    ("changes-regression", "changes --results-dir {s}", 1, "1 regression(s)"),
    ("cost-measured", "cost --step 150,150 --block-size 64 --max-model-len 2048", 0, ""),
    ("cost-nothing", "cost --max-num-seqs 1 --max-num-batched-tokens 1 --workload "
     "mixed-prefill-decode", 2, "nothing computed"),
    ("bad-flag", "history --bogus", 2, "unrecognized arguments"),
]


@pytest.fixture(scope="module")
def stored_pair(tmp_path_factory) -> dict[str, Path]:
    w = tmp_path_factory.mktemp("pair")
    results(w / "same")
    results(w / "other", head_machine="other")
    return {"s": w / "same", "o": w / "other"}


@pytest.mark.parametrize("case_id,argv,code,text", OUTCOMES, ids=[c[0] for c in OUTCOMES])
def test_each_outcome_has_its_documented_status(stored_pair, tmp_path, case_id, argv, code, text):
    before = {k: snapshot(v) for k, v in stored_pair.items()}
    proc = spyre_bench([a.format(**stored_pair) for a in shlex.split(argv)], tmp_path)
    both = no_traceback(proc)
    assert proc.returncode == code, both
    assert text in both
    if code == errors.EXIT_INPUT:
        one_error_line(proc)
    assert {k: snapshot(v) for k, v in stored_pair.items()} == before


# -- a subject's own failure -------------------------------------------------------------------

#: command -> (file edited, text, replacement): the subject's code fails at block size 192 only,
#: so the other rows are measured and shown
SUBJECT_FAILURES = {
    "ladders": (BUCKETER, "        self._block_size = vllm_config.cache_config.block_size\n",
                "        if vllm_config.cache_config.block_size == 192:\n"
                "            import os\n            os._exit(0)\n"
                "        self._block_size = vllm_config.cache_config.block_size\n"),
    "cost": (BACKEND, "        m = common_attn_metadata\n",
             "        m = common_attn_metadata\n        if self.block_size == 192:\n"
             "            raise RuntimeError('no bs 192 here')\n"),
}


@pytest.mark.parametrize("command", sorted(SUBJECT_FAILURES))
def test_a_subject_failure_is_said_once(spyre_repo, tmp_path, command):
    relpath, old, new = SUBJECT_FAILURES[command]
    commit = spyre_repo.edit(relpath, old, new, parent="gen4", message=f"fails at 192 ({command})")
    proc = spyre_bench([command, "--subject", f"git:{spyre_repo.path}@{commit}", "--tier", "tiny"],
                       tmp_path, timeout=180)
    no_traceback(proc)
    assert proc.returncode == errors.EXIT_FLAGGED, proc.stdout + proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("[")]
    assert len(said) == 1, proc.stderr
    assert said[0].startswith("spyre-bench: FAILED: subject failed in "), proc.stderr
    assert "192" in said[0] and commit in proc.stdout          # and the table after it


def test_a_subject_that_ends_a_prefetch_worker_is_said_once(spyre_repo, tmp_path):
    """The exact tier over two worker processes (SPYRE_BENCH_JOBS=2), on a commit whose builder
    calls os._exit at block size 192: the pool waited for good for the config whose worker was
    gone (multiprocessing's Pool replaces a dead worker and loses its task); now the dead worker
    breaks the pool, and the serial pass meets the failure and says it once."""
    relpath, old, _ = SUBJECT_FAILURES["cost"]
    commit = spyre_repo.edit(relpath, old, old + "        if self.block_size == 192:\n"
                             "            import os\n            os._exit(0)\n",
                             parent="gen4", message="ends its process at 192 in build()")
    proc = spyre_bench(["cost", "--subject", f"git:{spyre_repo.path}@{commit}", "--tier", "tiny"],
                       tmp_path, timeout=180, SPYRE_BENCH_JOBS="2")
    no_traceback(proc)
    assert proc.returncode == errors.EXIT_FLAGGED, proc.stdout + proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("[")]
    assert len(said) == 1 and "ended the worker" in said[0] and "bs=192" in said[0], proc.stderr


#: A bucketer that moves its process to TMPDIR when imported and each time one is made.
CHDIR_CLASS = "class SpyreAttnBucketer:"
CHDIR_INIT = "        self._block_size = vllm_config.cache_config.block_size\n"


def test_a_subject_that_changes_folder_moves_nothing_of_run(spyre_repo, tmp_path):
    """``run`` with a relative --results-dir on a commit whose code calls ``os.chdir``: the
    results are where the flag said, every figure measured (it was 'nothing measured: all 0
    figures ... skipped; first reason: none recorded', the exact tier's file written under the
    subject's folder and ASV's benchmarks failing on their own relative files)."""
    (tmp_path / "tmp").symlink_to(tempfile.mkdtemp(prefix="cf-", dir="/tmp"))  # ASV's socket
    moved = spyre_repo.edit(BUCKETER, CHDIR_CLASS,
                            "import os as _os, tempfile as _tf\n_os.chdir(_tf.gettempdir())\n"
                            + CHDIR_CLASS, parent="gen4", message="chdir at import")
    commit = spyre_repo.edit(BUCKETER, CHDIR_INIT, CHDIR_INIT + "        _os.chdir(_tf.mkdtemp())\n",
                             parent=moved, message="chdir at import and when made")
    try:
        proc = spyre_bench(["run", "--repo", str(spyre_repo.path), commit, "--results-dir",
                            "stored", "--machine", "box", "--device", "cpu", "--tier", "tiny",
                            "--bench", BENCH], tmp_path, timeout=300)
        no_traceback(proc)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        frame = load_history(tmp_path / "stored")
        mine = frame[(frame.commit == commit) & (frame["param:probe"] != "review-4x3-kv-above")]
        assert set(mine.status) == {"ok"}, mine[["benchmark", "status"]]  # what BENCH selects
        assert {b.split(".")[0] for b in mine.benchmark} == {"exact", "kernel"}
        strays = [p for p in (tmp_path / "tmp").resolve().rglob("*")
                  if p.suffix in (".json", ".identity")]
        assert strays == [], strays         # where the subject went
    finally:
        shutil.rmtree((tmp_path / "tmp").resolve(), ignore_errors=True)


# -- interrupts ----------------------------------------------------------------------------------

#: Where the held bucketer waits: everywhere, only under ASV, or only in a child of the command.
HOLD_WHERE = {"process": "True",
              "asv": 'any(b"asv/benchmark.py" in open(f"/proc/{{p}}/cmdline", "rb").read() '
                     'for p in ("self", _os.getppid()))',
              "child": "_os.getppid() != {test_pid}"}


def _hold_code(hold: Path, where: str) -> str:
    condition = HOLD_WHERE[where].format(test_pid=os.getpid())
    return f'''

import os as _os  # noqa: E402
import time as _time  # noqa: E402


def _hold():
    if {condition} and _os.path.exists({str(hold)!r}):
        open({str(hold)!r} + ".at-" + str(_os.getpid()), "w").close()
        while _os.path.exists({str(hold)!r}):
            _time.sleep(0.05)


_hold()
'''


def held_source(generation: str, hold: Path, where: str) -> str:
    """A bucketer that, where asked, writes ``<hold>.at-<pid>`` and waits while ``hold`` exists,
    when imported and each time a bucketer is made (so a forked worker holds too)."""
    return bucketer(generation) + _hold_code(hold, where) + '''

_made = SpyreAttnBucketer.__init__


def _holding(self, *args, **kwargs):
    _hold()
    _made(self, *args, **kwargs)


SpyreAttnBucketer.__init__ = _holding
_hold()
'''


SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
#: (id, command, where the subject holds, signal)
INTERRUPTS = ([(f"run-in-process-{s}", "run", "process", s) for s in SIGNALS]
              + [(f"run-under-asv-{s}", "run", "asv", s) for s in SIGNALS]
              + [(f"cost-{s}", "cost", "process", s) for s in SIGNALS]
              + [(f"compare-workers-{s}", "compare", "child", s) for s in ("SIGTERM", "SIGINT")])


def _argv(command: str, repo, commit: str, stored: Path) -> list[str]:
    spec = f"git:{repo.path}@{commit}"
    if command == "run":
        return ["run", "--repo", str(repo.path), commit, "--results-dir", str(stored),
                "--machine", "box", "--device", "cpu", "--tier", "tiny", "--bench", BENCH]
    if command == "cost":
        return ["cost", "--subject", spec, "--tier", "tiny"]
    return ["compare", "--base", f"git:{repo.path}@{repo.commits['810-clamp']}", "--head", spec,
            "--tier", "tiny"]


@pytest.fixture(scope="module")
def interrupted(spyre_repo, tmp_path_factory, request):
    """Every interrupt case started at once; each signalled once its subject holds. Returns
    case id -> (process, its outputs, folder, commit, pids that held)."""
    started = {}
    for case_id, command, where, sig in INTERRUPTS:
        w = tmp_path_factory.mktemp(case_id)
        # a short TMPDIR: ASV's server socket lives under it, and AF_UNIX paths end at 107 bytes
        (w / "tmp").symlink_to(tempfile.mkdtemp(prefix="cf-", dir="/tmp"))
        hold = w / "hold"
        hold.touch()
        files = {BUCKETER: held_source("810-clamp", hold, where)}
        if where == "asv":
            # under ASV the kernel benchmark loads the backend, whatever the bucketer does
            files[BACKEND] = generation_files("810-clamp")[BACKEND] + _hold_code(hold, where)
        commit = spyre_repo.add_commit(files, f"bucketer held ({case_id})", parent="810-clamp")
        jobs = "2" if command == "compare" else "1"
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness", *_argv(command, spyre_repo, commit, w / "stored")],
            cwd=w, env=_env(w, SPYRE_BENCH_JOBS=jobs), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            start_new_session=True, preexec_fn=_child_defaults)
        started[case_id] = (proc, w, hold, commit, sig)
    out = {}
    deadline = time.monotonic() + 150
    waiting = dict(started)
    request.addfinalizer(lambda: [shutil.rmtree((w / "tmp").resolve(), ignore_errors=True)
                                  for _, w, *_ in started.values()])
    while waiting:
        for case_id, (proc, w, hold, commit, sig) in list(waiting.items()):
            held = [int(p.name.rsplit("-", 1)[1]) for p in w.glob("hold.at-*")]
            if held:
                time.sleep(0.3)         # let every holder of the group get there
                proc.send_signal(getattr(signal, sig))
                stdout, stderr = proc.communicate(timeout=60)
                out[case_id] = (proc, stdout, stderr, w, commit, held)
                del waiting[case_id]
            elif proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                stdout, stderr = proc.communicate()
                pytest.fail(f"{case_id} never held: exit {proc.returncode}\n{stdout}\n{stderr}")
        time.sleep(0.1)
    yield out
    for proc, w, hold, *_ in started.values():
        hold.unlink(missing_ok=True)
        shutil.rmtree((w / "tmp").resolve(), ignore_errors=True)   # the test said if not empty


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"


@pytest.mark.parametrize("case_id", [c[0] for c in INTERRUPTS])
def test_an_interrupt_ends_everything_and_keeps_what_was_measured(interrupted, case_id):
    proc, stdout, stderr, w, commit, held = interrupted[case_id]
    assert "Traceback" not in stdout + stderr, stderr
    assert proc.returncode == errors.EXIT_INTERRUPTED, stdout + stderr
    # warnings aside (the held commits are off the followed branch), one line, and the last
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("[")]
    said = [ln for ln in lines if not ln.startswith("spyre-bench: warning:")]
    assert len(said) == 1 and said == lines[-1:], stderr
    assert said[0].startswith("spyre-bench: interrupted"), stderr
    lines = said
    deadline = time.monotonic() + 10        # a SIGKILL'd straggler takes a moment to go
    while (members(proc.pid) or any(map(_alive, held))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not members(proc.pid), "a process of the command's session outlived it"
    assert not [p for p in held if _alive(p)], "a process holding the subject outlived it"
    assert not list((w / "tmp").iterdir()), "a temporary folder was left behind"
    if case_id.startswith("run-"):
        assert "0 of 1 target(s) complete" in lines[0]
    if case_id.startswith("cost-"):
        assert "of 4 done" in lines[0] or "cost" not in lines[0]
    if case_id.startswith("run-under-asv-"):
        # the exact group finished before ASV started: kept, and the commit is incomplete
        frame = load_history(w / "stored")
        kept = frame[(frame.commit == commit) & frame.benchmark.str.startswith("exact.")]
        assert len(kept) and set(kept.status) == {"ok"} and not frame.complete.any()
        found = read_identity(next((w / "stored" / "box").glob(f"{commit[:8]}-*.json")))
        assert found.interrupted and found.groups_done == ["exact (in process)"]


def test_a_rerun_after_sigterm_measures_only_what_is_missing(interrupted, spyre_repo):
    proc, _, _, w, commit, _ = interrupted["run-under-asv-SIGTERM"]
    (w / "hold").unlink()
    again = subprocess.run([sys.executable, "-m", "harness",
                            *_argv("run", spyre_repo, commit, w / "stored")], cwd=w,
                           env=_env(w), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "kept from an earlier run: exact (in process)" in again.stdout
    assert load_history(w / "stored").complete.all()
    assert not list((w / "tmp").iterdir())


def test_two_first_runs_share_the_reference_repository(tmp_path):
    """Started together in a fresh checkout, the second waits for the first's repository."""
    code = ("import sys; from pathlib import Path; "
            "from harness.runner.reference_repo import ensure_reference_repo as e; "
            "print(len(e(Path(sys.argv[1]))))")
    repo = tmp_path / ".asv" / "reference-repo"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(repo)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    assert [o for o, _ in outs] == ["5\n"] * 4
    assert sorted(p.name for p in repo.parent.iterdir()) == ["reference-repo",
                                                             "reference-repo.lock"]


def test_a_reference_repository_build_cut_short_is_built_again(tmp_path):
    from harness.runner.reference_repo import ensure_reference_repo
    repo = tmp_path / "reference-repo"
    (tmp_path / "reference-repo.tmp-99999").mkdir()      # a killed build's leftover
    assert len(ensure_reference_repo(repo)) == 5
    assert not (tmp_path / "reference-repo.tmp-99999").exists()


# -- kill -9: what a run started ends with it ----------------------------------------------------

def _process_table() -> dict[int, tuple[int, int]]:
    """Every live process: pid -> (parent pid, session id)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] != "Z":
            out[int(entry.name)] = (int(fields[1]), int(fields[3]))
    return out


def _descendants(root: int) -> set[int]:
    table = _process_table()
    found, frontier = set(), {root}
    while frontier:
        frontier = {p for p, (ppid, _) in table.items() if ppid in frontier} - found
        found |= frontier
    return found


def _left(pids: set[int], sessions: set[int]) -> set[int]:
    """Of ``pids`` and the members of ``sessions``, those still running."""
    return {p for p, (_, sid) in _process_table().items() if p in pids or sid in sessions}


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
@pytest.mark.parametrize("where", ["process", "asv"], ids=["exact-tier", "under-asv"])
def test_a_run_killed_with_sigkill_leaves_no_process(spyre_repo, tmp_path, where):
    """``kill -9`` of ``run`` while the subject's code holds (in the exact tier's process, or in
    an ASV benchmark process): nothing it started (fork server and its children, resource
    tracker, ASV and its benchmark processes, subject workers) outlives it by more than moments."""
    (tmp_path / "tmp").symlink_to(tempfile.mkdtemp(prefix="cf-", dir="/tmp"))
    hold = tmp_path / "hold"
    hold.touch()
    files = {BUCKETER: held_source("810-clamp", hold, where)}
    if where == "asv":
        files[BACKEND] = generation_files("810-clamp")[BACKEND] + _hold_code(hold, where)
    commit = spyre_repo.add_commit(files, f"bucketer held (kill -9, {where})", parent="810-clamp")
    proc = subprocess.Popen([sys.executable, "-m", "harness",
                             *_argv("run", spyre_repo, commit, tmp_path / "stored")],
                            cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=_child_defaults)
    tree: set[int] = set()
    try:
        deadline = time.monotonic() + 150
        while not list(tmp_path.glob("hold.at-*")):
            assert proc.poll() is None and time.monotonic() < deadline, "the subject never held"
            time.sleep(0.1)
        time.sleep(0.5)                     # every holder of the group gets there
        tree = _descendants(proc.pid)
        sessions = {proc.pid} | {_process_table().get(p, (0, 0))[1] for p in tree} - {0}
        assert tree, "run had started nothing"
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while _left(tree, sessions) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _left(tree, sessions)
        said = {p: Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")[:120]
                for p in left if Path(f"/proc/{p}").exists()}
        assert not left, f"outlived run's kill -9: {said}"
    finally:
        hold.unlink(missing_ok=True)
        if proc.poll() is None:
            proc.kill()
        for pid in _left(tree, set()):      # what this test started, never anything else
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree((tmp_path / "tmp").resolve(), ignore_errors=True)
