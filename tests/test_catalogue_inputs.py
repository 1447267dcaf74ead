"""The inputs catalogue (issue 21, parts 3 and 6): numbers, sizes, revisions handed to git and
output targets, each as a real ``spyre-bench`` subprocess.

Every case asserts: exactly one line on stderr naming the problem, exit status 2, no traceback,
nothing under the working folder changed (kinds, link targets and digests of every entry, so a
FIFO replaced by a file or a truncated file shows), no file ``F`` that a revision like
``--output=F`` would make git create, and no temporary file left (in the folder, or in the
case's own TMPDIR). Refusals happen before any work, so a case costs one interpreter start.

Add a case as one line: (id, argv, text the error must contain). In argv, ``{w}`` is the working
folder, ``{git}`` a small git repository with branch ``trunk``; ``{F}`` is the file git must
never write. STDOUT_FULL cases run with standard output on /dev/full.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shlex
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_bad_input_catalogue import _git

HUGE_INT = "99999999999"
FOOTPRINT = "--max-num-seqs 65536 --max-num-batched-tokens 65536 --max-model-len 2147483647"
STORED = "aaaaaaaa bbbbbbbb --results-dir {w}/stored"

#: (command and arguments before the flag, flag, bad values): the error names the flag.
NUMBERS = [
    ("ladders", "--subject-timeout", ["nan", "inf", "-1", "1e9", "x"]),
    (f"compare {STORED}", "--factor", ["nan", "inf", "1", "-2", "1e9"]),
    (f"compare {STORED}", "--alpha", ["nan", "0", "1", "-0.5"]),
    (f"compare {STORED}", "--timing-seconds", ["nan", "inf", "0", "1e9"]),
    ("kernel", "--soft-cap", ["nan", "inf", "-1", "1e6"]),
    ("kernel", "--unstable-threshold", ["nan", "-inf", "0", "1e6"]),
    ("kernel", "--max-cache-gib", ["nan", "inf", "0", "-1", "1e9"]),
    ("kernel", "--repeat", ["-1", "1e3", HUGE_INT]),
    ("kernel", "--warmup", ["x", "10000000"]),
    ("kernel", "--number", ["-3", "10000000000"]),
    ("kernel", "--threads", ["-1", "100000"]),
    ("kernel", "--max-shapes", ["0", "10000000"]),
    ("kernel", "--recompile-limit", ["0", "nan"]),
    ("cost", "--steps", ["1000000", "nan"]),
    ("cost", "--seed", ["-1", "1e3", "99999999999999999999999"]),
    ("nightly --repo {git} --dry-run --results-dir {w}/stored", "--max-new", ["-1", "nan",
                                                                             "10000000"]),
    ("nightly --repo {git} --dry-run --results-dir {w}/stored", "--backfill", ["-1", "1e9"]),
    ("nightly --repo {git} --dry-run --results-dir {w}/stored", "--backfill-step", ["0", "x"]),
]
#: Flags that take a count: ``nan`` is no integer at all.
COUNTS = {"--repeat", "--warmup", "--number", "--threads", "--max-shapes", "--recompile-limit",
          "--steps", "--seed", "--max-new", "--backfill", "--backfill-step"}


def _says(flag: str, value: str) -> str:
    if value.lstrip("-") not in ("nan", "inf"):
        return f"{flag}: "
    return f"{flag}: expected an integer" if flag in COUNTS else f"{flag}: must be a finite number"


CASES = [(f"{flag[2:]}={value}", f"{cmd} {flag}={value}", _says(flag, value))
         for cmd, flag, values in NUMBERS for value in values]

CASES += [
    # -- sizes: int32 on the device, and a full step's index tensors within the machine --
    ("mns-huge", f"ladders --max-num-seqs {HUGE_INT}", "max_num_seqs must be <= 2147483647"),
    ("mml-huge", f"ladders --max-model-len {HUGE_INT}", "max_model_len must be <= 2147483647"),
    ("block-size-huge", "ladders --block-size 137438953472", "block_size must be <= 2147483647"),
    ("mnbt-huge", f"cost --max-num-batched-tokens {HUGE_INT} --max-num-seqs 4 --step 5",
     "max_num_batched_tokens must be <="),
    ("num-layers-huge", f"cost --num-layers {HUGE_INT} --step 5", "num_layers must be <="),
    ("head-size-huge", f"cost --head-size {HUGE_INT} --step 5", "head_size must be <="),
    ("kv-heads-huge", f"cost --num-kv-heads {HUGE_INT} --step 5", "num_kv_heads must be <="),
    ("sliding-window-huge", f"ladders --sliding-window {HUGE_INT}", "sliding_window must be <="),
    ("footprint-ladders", f"ladders {FOOTPRINT}", "index tensors, above half this machine"),
    ("footprint-cost", f"cost {FOOTPRINT} --step 5", "index tensors, above half this machine"),
    ("footprint-kernel", f"kernel {FOOTPRINT} --step 5", "index tensors, above half this machine"),
    ("footprint-compare", f"compare --base reference:pre-810 --head reference:chunked {FOOTPRINT}",
     "index tensors, above half this machine"),
    ("mns-nan", "ladders --max-num-seqs nan", "expected comma-separated integers"),
    ("mnbt-inf", "cost --max-num-batched-tokens inf", "invalid int value: 'inf'"),
    # -- model presets and speculative tokens (issue 32) --
    ("preset-unknown", "ladders --preset granite-9000", "unknown preset 'granite-9000'; known: "),
    ("preset-unknown-in-list", "cost --preset mqa,nope --step 5", "unknown preset 'nope'"),
    ("preset-empty", "compare --base reference:pre-810 --head reference:chunked --preset ''",
     "unknown preset ''"),
    ("spec-tokens-negative", "ladders --spec-tokens -1", "--spec-tokens: expected non-negative"),
    ("spec-tokens-word", "cost --spec-tokens three --step 5", "--spec-tokens: expected non-"),
    ("spec-tokens-fraction", "kernel --spec-tokens 1.5 --step 5", "--spec-tokens: expected non-"),
    ("spec-tokens-huge", f"compare --base reference:pre-810 --head reference:chunked "
     f"--spec-tokens {HUGE_INT}", "--spec-tokens: expected non-negative integers up to 64"),
    ("preset-layers", "ladders --preset mixed-kv-heads --num-layers 40",
     "layer_overrides must hold one entry per layer (40)"),
    # -- patterns and names --
    ("run-bench-paren", "run --bench ( --results-dir {w}/stored", "is not a regular expression"),
    ("run-bench-class", "run --bench [a- --results-dir {w}/stored", "is not a regular expression"),
    ("nightly-bench-paren", "nightly --repo {git} --dry-run --results-dir {w}/stored --bench (",
     "is not a regular expression"),
    ("bisect-tier", "bisect --repo {git} a b --benchmark x --tier nonsense",
     "invalid choice: 'nonsense'"),
    ("bisect-tier-empty", "bisect --repo {git} a b --benchmark x --tier ''", "invalid choice: ''"),
    # -- revisions and branches that git would read as options (F must never appear) --
    ("run-rev-output-range", "run --repo {git} --results-dir {w}/stored -- --output={F}..HEAD",
     "begins with '-'"),
    ("run-rev-output", "run --repo {git} --results-dir {w}/stored -- --output={F}",
     "begins with '-'"),
    ("run-rev-dash", "run --repo {git} --results-dir {w}/stored -- -n", "begins with '-'"),
    ("run-rev-empty", "run --repo {git} --results-dir {w}/stored ''", "expected a revision"),
    ("run-branch", "run --repo {git} --results-dir {w}/stored --branch=--output={F} HEAD",
     "begins with '-'"),
    ("nightly-branch", "nightly --repo {git} --results-dir {w}/stored --dry-run "
     "--branch=--output={F}", "begins with '-'"),
    ("changes-branch", "changes --results-dir {w}/stored --repo {git} --branch=--output={F}",
     "begins with '-'"),
    ("report-branch", "report --results-dir {w}/stored --repo {git} --branch=--output={F} "
     "--out {w}/site", "begins with '-'"),
    ("bisect-good", "bisect --repo {git} --benchmark x -- --output={F} HEAD", "begins with '-'"),
    ("bisect-bad", "bisect --repo {git} --benchmark x -- HEAD --output={F}", "begins with '-'"),
    ("subject-git-rev", "ladders --subject git:{git}@--output={F}", "does not exist"),
    ("cost-base-git-rev", "cost --base git:{git}@--output={F} --head reference:pre-810 --step 5",
     "does not exist"),
    ("compare-head-git-rev", "compare --base reference:pre-810 --head git:{git}@--output={F}",
     "does not exist"),
    ("run-rev-newline", "run --repo {git} --results-dir {w}/stored $'HEAD\\n--output={F}'",
     "control characters"),
]

#: Settings from the environment, held to a flag's rules: (variable, bad values, commands).
ENV_NUMBERS = [("SPYRE_BENCH_SUBJECT_TIMEOUT", ["inf", "-inf", "nan", "-1", "1e300", "86401", "x"],
                {"ladders": "ladders --subject git:{git}@HEAD", "cost": "cost --step 5",
                 "run": "run --repo {git} HEAD --results-dir {w}/stored --machine box "
                        "--device cpu --tier tiny"})]
ENV_CASES = [(f"env-{name.removeprefix('SPYRE_BENCH_').lower()}={value}-{cmd}", {name: value},
              argv, f"{name}={value!r}: expected") for name, values, commands in ENV_NUMBERS
             for value in values for cmd, argv in commands.items()]

#: Output targets that are not regular files, refused before any work: (id, path, text).
TARGETS = [("fifo", "{w}/fifo", "it is a FIFO"), ("folder", "{w}/folder", "it is a directory"),
           ("device", "/dev/null", "it is a character device"),
           ("socket", "{w}/sock", "it is a socket"),
           ("link-to-fifo", "{w}/link-to-fifo", "it is a FIFO (via symlink to"),
           ("loop", "{w}/loop", "a symlink loop")]
CASES += [(f"compare-{flag[2:]}-{name}", f"compare {STORED} {flag} {path}", text)
          for flag in ("--json", "--markdown", "--write-expected") for name, path, text in TARGETS]
CASES += [
    ("changes-json-fifo", "changes --results-dir {w}/stored --json {w}/fifo", "it is a FIFO"),
    ("changes-json-folder", "changes --results-dir {w}/stored --json {w}/folder",
     "it is a directory"),
    ("history-export-fifo", "history --results-dir {w}/stored --export {w}/fifo.csv",
     "cannot export to {w}/fifo.csv: it is a FIFO"),
    ("history-export-folder", "history --results-dir {w}/stored --export {w}/folder.parquet",
     "it is a directory"),
    ("history-export-device", "history --results-dir {w}/stored --export {w}/link-to-null.csv",
     "it is a character device"),
]

#: Standard output on a full device: the output is lost, so never exit 0.
STDOUT_FULL = [
    ("ladders", "ladders"),
    ("ladders-json", "ladders --json"),
    ("cost", "cost --step 150,150"),
    ("cost-json", "cost --step 150,150 --json"),
    ("comment", "comment --body-file {w}/body.md"),
    ("history", "history --results-dir {w}/stored"),
    ("compare-json", "compare --base reference:pre-810 --head reference:post-810-topup "
     "--block-size 64 --max-model-len 256 --max-num-seqs 4 --step 5 --json - --fail-on wrong"),
    ("compare-expected", "compare --base reference:pre-810 --head reference:post-810-topup "
     "--block-size 64 --max-model-len 256 --max-num-seqs 4 --step 5 --write-expected - "
     "--fail-on wrong"),
]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> dict[str, Path]:
    """Stored results, a git repository, and every kind of output target."""
    from tests.test_compare_stored import results
    w = tmp_path_factory.mktemp("inputs")
    (w / "stored").mkdir()
    results(w / "stored", head_machine="other")
    (w / "folder").mkdir()
    (w / "folder.parquet").mkdir()
    os.mkfifo(w / "fifo")
    os.mkfifo(w / "fifo.csv")
    (w / "link-to-fifo").symlink_to(w / "fifo")
    (w / "link-to-null.csv").symlink_to("/dev/null")
    (w / "loop").symlink_to(w / "loop")
    (w / "body.md").write_text("a comment body\n" * 2000)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(w / "sock"))
    repo = w / "git"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "trunk")
    for name in ("one", "two"):
        (repo / "README").write_text(f"{name}\n")
        _git(repo, "add", "README")
        _git(repo, "commit", "-q", "-m", name)
    yield {"w": w, "git": repo}
    sock.close()


def state(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (git's bookkeeping aside), not following links: its kind and,
    for a file its digest, for a link its target."""
    out = {}
    for p in sorted(root.rglob("*")):
        if ".git" in p.parts:
            continue
        mode = p.lstat().st_mode
        out[str(p.relative_to(root))] = (
            "link " + os.readlink(p) if stat.S_ISLNK(mode) else
            hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(mode) else
            f"kind {stat.S_IFMT(mode):o}")
    return out


def spyre_bench(work, case_id: str, argv: str, stdout=subprocess.PIPE, env: dict | None = None):
    """Run one case as a subprocess; returns (process, the case's TMPDIR, the filled argv)."""
    w, repo = work["w"], work["git"]
    fill = {"w": str(w), "git": str(repo), "F": str(w / "F")}
    args = [a.format(**fill) for a in shlex.split(argv.replace("$'HEAD\\n", "'HEAD\n"))]
    tmp = w.parent / f"tmp-{case_id}"
    tmp.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "harness", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, cwd=w, timeout=60,
                          stdin=subprocess.DEVNULL,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "HOME": str(tmp),
                               "TMPDIR": str(tmp), **(env or {})})
    return proc, tmp, fill


def check_refused(work, case_id: str, argv: str, text: str, stdout=subprocess.PIPE,
                  env: dict | None = None) -> None:
    w, repo = work["w"], work["git"]
    before, repo_before = state(w), state(repo)
    proc, tmp, fill = spyre_bench(work, case_id, argv, stdout, env)
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr + (proc.stdout or ""), proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "error:" in lines[0], proc.stderr
    assert text.format(**fill) in lines[0], proc.stderr
    assert not (w / "F").exists() and not (repo / "F").exists(), "git wrote --output's file"
    assert state(w) == before and state(repo) == repo_before, "a refused command changed files"
    assert list(tmp.iterdir()) == [], f"left behind in TMPDIR: {list(tmp.iterdir())}"
    tmp.rmdir()


@pytest.mark.parametrize("case_id,argv,text", CASES, ids=[c[0] for c in CASES])
def test_refused(work, case_id, argv, text):
    check_refused(work, case_id, argv, text)


@pytest.mark.parametrize("case_id,env,argv,text", ENV_CASES, ids=[c[0] for c in ENV_CASES])
def test_refused_from_the_environment(work, case_id, env, argv, text):
    """A bad value is one line before any work (it was an OverflowError traceback from the
    timer for inf or 1e300), whatever command meets it first."""
    check_refused(work, case_id, argv, text, env=env)


@pytest.mark.parametrize("case_id,argv", STDOUT_FULL, ids=[c[0] for c in STDOUT_FULL])
def test_standard_output_on_a_full_device(work, case_id, argv):
    with open("/dev/full", "w") as full:
        check_refused(work, f"full-{case_id}", argv, "cannot write standard output: No space "
                      "left on device", stdout=full)


def test_the_catalogue_is_large_and_its_ids_unique():
    ids = [c[0] for c in CASES + ENV_CASES] + [f"full-{c[0]}" for c in STDOUT_FULL]
    assert len(ids) == len(set(ids)) and len(ids) >= 100


# -- written targets: a symlink is written through, a regular file replaced whole --

TINY_COMPARE = ("compare --base reference:pre-810 --head reference:post-810-topup --block-size 64 "
                "--max-model-len 256 --max-num-seqs 4 --step 5 --fail-on wrong")


def test_a_symlinked_target_is_written_through_and_stays_a_link(work, tmp_path):
    import json
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out.json").symlink_to(real / "doc.json")          # dangling: created there
    (real / "body.md").write_text("old\n")
    os.chmod(real / "body.md", 0o640)
    (tmp_path / "body.md").symlink_to(real / "body.md")
    argv = f"{TINY_COMPARE} --json {tmp_path}/out.json --markdown {tmp_path}/body.md"
    proc, tmp, _ = spyre_bench(work, "through", argv)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.json").is_symlink() and (tmp_path / "body.md").is_symlink()
    assert json.loads((real / "doc.json").read_text())["ladders"]
    assert (real / "body.md").read_text() != "old\n"
    assert stat.S_IMODE((real / "body.md").stat().st_mode) == 0o640   # the file's mode kept
    assert sorted(p.name for p in real.iterdir()) == ["body.md", "doc.json"]   # no temp left
    assert list(tmp.iterdir()) == []


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    from harness.errors import HarnessError
    from harness.outputs import replacing, write_text
    target = tmp_path / "doc.json"
    target.write_text("old")
    with pytest.raises(HarnessError, match=r"cannot write .*doc.json: No space left on device"):
        with replacing(target) as tmp:
            tmp.write_text("partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["doc.json"]
    with pytest.raises(HarnessError, match="cannot write .*nope/doc.json: No such file"):
        write_text(tmp_path / "nope" / "doc.json", "x")
    assert write_text(target, "new") == target and target.read_text() == "new"


# -- git never sees an option where a revision goes, whoever calls it --

def test_runner_git_calls_refuse_option_like_revisions(work, tmp_path):
    from harness.errors import HarnessError
    from harness.runner.nightly import first_parent_history
    from harness.runner.targets import commit_targets
    from harness.subjects.source import gitrev
    repo, f = work["git"], tmp_path / "F"
    with pytest.raises(HarnessError, match="begins with '-'"):
        first_parent_history(repo, f"--output={f}")
    with pytest.raises(HarnessError, match="begins with '-'"):
        commit_targets(repo, [f"--output={f}..HEAD"])
    with pytest.raises(HarnessError, match="does not exist"):
        gitrev.resolve("t", repo, f"--output={f}")
    assert len(first_parent_history(repo, "trunk")) == 2     # a plain one still works
    assert len(commit_targets(repo, ["HEAD~1..HEAD"])) == 1
    assert not f.exists() and not (repo / "F").exists()
