"""The bad-input catalogue (issue 13): every input a new user could get wrong, as a real
``spyre-bench`` subprocess, held to the README's contract.

Each case asserts: no traceback, the documented exit code (2 bad input, 1 flagged, 3 not
comparable), for exit 2 exactly one ``error:`` line naming the problem, and nothing stored
changed (every file under the case's working folder hashed before and after).

Add a case as one line in CASES: (id, argv, exit code, text the error must contain). In argv,
``{w}`` is the working folder (see ``work``), ``{git}`` a one-commit git repository with no
bucketer, ``{detached}`` one with a detached HEAD.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CASES = [
    # -- configs (every exact command shares these flags) --
    ("block-size-96", "ladders --block-size 96", 2, "block_size must be a multiple of 64"),
    ("block-size-text", "ladders --block-size x", 2, "expected comma-separated integers"),
    ("block-size-empty", "ladders --block-size ,", 2, "expected at least one integer"),
    ("max-model-len-0", "ladders --max-model-len 0", 2, "max_model_len must be >= 1"),
    ("max-num-seqs-0", "ladders --max-num-seqs 0", 2, "max_num_seqs must be >= 1"),
    ("head-size-0", "cost --head-size 0", 2, "head_size must be >= 1"),
    ("num-layers-neg", "cost --num-layers -3", 2, "num_layers must be >= 1"),
    ("num-kv-heads-0", "cost --num-kv-heads 0", 2, "num_kv_heads must be >= 1"),
    ("dtype-float8", "ladders --dtype float8", 2, "dtype must be one of"),
    ("tier-unknown", "ladders --tier nightly", 2, "invalid choice: 'nightly'"),
    ("mnbt-1", "cost --max-num-batched-tokens 1", 2, "max_num_batched_tokens (1) must be >="),
    ("mnbt-below-mns", "cost --max-num-seqs 16 --max-num-batched-tokens 15 --workload "
     "mixed-prefill-decode", 2, "must be >= max_num_seqs (16)"),
    ("mixed-no-room", "cost --max-num-seqs 1 --max-num-batched-tokens 1 --workload "
     "mixed-prefill-decode", 2, "needs room for a prefill chunk"),
    ("axes-unknown", "ladders --axes kv,bogus", 2, "unknown axes ['bogus']"),
    # -- env overrides --
    ("env-not-int", "ladders --env SPYRE_ATTN_KV_BUCKETS=128,x", 2, "'x' is not an integer"),
    ("env-no-sizes", "ladders --env SPYRE_ATTN_KV_BUCKETS=,", 2, "no bucket sizes"),
    ("env-zero", "ladders --env SPYRE_ATTN_KV_BUCKETS=0,128", 2, "must be >= 1, got 0"),
    ("env-negative", "ladders --env SPYRE_ATTN_QUERY_BUCKETS=-64", 2, "must be >= 1, got -64"),
    ("env-unknown", "ladders --env SPYRE_FAST=1", 2, "unknown knob SPYRE_FAST: no subject "
     "given declares it"),
    ("env-not-a-name", "ladders --env spyre-fast=1", 2, "unknown override 'spyre-fast': not an"),
    ("env-no-equals", "ladders --env SPYRE_ATTN_KV_BUCKETS", 2, "expected KEY=VALUE"),
    ("env-twice", "cost --env SPYRE_ATTN_KV_BUCKETS=128 --env SPYRE_ATTN_KV_BUCKETS=256", 2,
     "given twice ('128' and '256')"),
    ("env-batched-twice", "cost --batched --env SPYRE_BATCHED_DECODE=0", 2,
     "--batched sets SPYRE_BATCHED_DECODE=1"),
    ("env-flag-true", "ladders --env SPYRE_BATCHED_DECODE=true", 2, "must be an integer"),
    ("overrides-unknown", "ladders --overrides fast", 2, "unknown override set 'fast'"),
    ("absurd-kv-bucket", "cost --subject reference:post-810-topup --batched --env "
     "SPYRE_ATTN_KV_BUCKETS=99999999999999999999 --step 150,150,150,150", 2,
     "(6.15e+12 GiB), above the 64 GiB limit"),
    # -- workloads: mixes, inline steps, traces --
    ("workload-unknown", "cost --workload uniform", 2, "unknown workload 'uniform'"),
    ("steps-0", "cost --steps 0", 2, "--steps: must be >= 1, got 0"),
    ("steps-negative", "cost --steps -5", 2, "--steps: must be >= 1, got -5"),
    ("seed-text", "cost --seed x", 2, "--seed: expected an integer, got 'x'"),
    ("step-text", "cost --step 100,abc", 2, "--step #1: seq_len 'abc' is not an integer"),
    ("step-empty", "cost --step ,", 2, "no sequence lengths"),
    ("step-zero", "cost --step 0,5", 2, "seq_len must be >= 1, got 0"),
    ("step-query-above-seq", "cost --step '10 | 20'", 2, "query_len 20 > seq_len 10"),
    ("step-count-mismatch", "cost --step '5,6 | 1'", 2, "2 seq_lens but 1 query_lens"),
    ("trace-missing", "cost --trace {w}/nope.trace", 2, "cannot read"),
    ("trace-folder", "cost --trace {w}/folder", 2, "cannot read"),
    ("trace-not-utf8", "cost --trace {w}/binary.trace", 2, "not UTF-8 text (byte 0xff"),
    ("trace-malformed", "cost --trace {w}/malformed.trace", 2, "malformed.trace:2: seq_len 'x'"),
    ("trace-no-steps", "cost --trace {w}/comments.trace", 2, "no steps in it"),
    ("trace-query-above-seq", "cost --trace {w}/prefill.trace", 2, "query_len 9 > seq_len 3"),
    ("trace-too-long", "cost --trace {w}/long.trace --max-model-len 256", 2,
     "seq_len 3000 > max_model_len 256"),
    # -- frontier (no plot is written when the input is refused) --
    ("frontier-budget-0", "frontier --budget 0 --plot {w}/f.png", 2,
     "--budget: ladder sizes must be >= 1, got '0'"),
    ("frontier-budget-range-0", "frontier --budget 0:4 --plot {w}/f.png", 2,
     "ladder sizes must be >= 1, got '0:4'"),
    ("frontier-no-decodes", "frontier --trace {w}/prefills.trace --plot {w}/f.png", 2,
     "prefills.trace: no decode in it"),
    ("frontier-axis-no-override", "frontier --subject reference:pre-810 --axis num_seqs "
     "--workload bimodal --plot {w}/f.png", 2,
     "reference:pre-810 has no env override for the num_seqs axis"),
    ("frontier-plot-pdf", "frontier --plot {w}/f.pdf", 2, "expected a .png or .svg file"),
    # -- subjects --
    ("subject-policy", "ladders --subject reference:nope", 2, "unknown policy 'nope'"),
    ("subject-kind", "ladders --subject svn:x", 2, "svn:x"),
    ("base-alone", "ladders --base reference:pre-810", 2, "--base and --head go together"),
    ("base-and-subject", "ladders --subject reference:chunked --base reference:pre-810 --head "
     "reference:chunked", 2, "either --subject or --base/--head"),
    ("git-no-folder", "ladders --subject git:{w}/nope@HEAD", 2, "no such directory"),
    ("git-not-repo", "ladders --subject git:{w}/folder@HEAD", 2, "is not a git repository"),
    ("git-no-revision", "ladders --subject git:{git}@nope", 2, "revision 'nope' does not exist"),
    ("git-no-bucketer", "ladders --subject git:{git}@HEAD", 2, "has no spyre_inference/ package"),
    ("git-alone-form", "cost --subject git:{git}@HEAD^! --step 5", 2, "(commit "),
    ("path-missing", "ladders --subject path:{w}/nope", 2, "nope"),
    # -- kernel flags (all rejected before torch is imported) --
    ("kernel-repeat-0", "kernel --repeat 0", 2, "--repeat: must be >= 1, got 0"),
    ("kernel-warmup-0", "kernel --warmup 0", 2, "--warmup: must be >= 1, got 0"),
    ("kernel-number-0", "kernel --number 0", 2, "--number: must be >= 1, got 0"),
    ("kernel-threads-0", "kernel --threads 0", 2, "--threads: must be >= 1, got 0"),
    ("kernel-soft-cap", "kernel --soft-cap -1", 2, "--soft-cap: must be >= 0"),
    ("kernel-cache-0", "kernel --max-cache-gib 0", 2, "--max-cache-gib"),
    ("kernel-nothing", "kernel --no-graphs --no-timing", 2, "leave nothing to measure"),
    ("kernel-fail-on", "kernel --fail-on speed", 2, "--fail-on 'speed': unknown speed"),
    ("kernel-timing", "kernel --timing fast", 2, "invalid choice: 'fast'"),
    # -- stored results: history, compare, changes, report --
    ("export-missing-folder", "history --results-dir {w}/stored --export {w}/nope/h.csv", 2,
     "cannot export to"),
    ("export-under-a-file", "history --results-dir {w}/stored --export {w}/a-file/h.parquet", 2,
     "cannot export to"),
    ("export-suffix", "history --results-dir {w}/stored --export {w}/h.txt", 2,
     "use a .parquet or .csv file name"),
    ("compare-unknown-commit", "compare cccccccc bbbbbbbb --results-dir {w}/stored", 2,
     "no stored results for commit 'cccccccc'"),
    ("compare-fail-on", "compare aaaaaaaa bbbbbbbb --results-dir {w}/stored --fail-on speed", 2,
     "speed"),
    ("compare-not-comparable", "compare aaaaaaaa bbbbbbbb --results-dir {w}/stored", 2,
     "machine differs"),
    ("compare-flagged", "compare aaaaaaaa bbbbbbbb --results-dir {w}/stored --fail-on exact", 1,
     "exact: 1 of 2 figures changed"),
    ("changes-not-repo", "changes --results-dir {w}/stored --repo {w}/folder", 2,
     "not a git repository"),
    ("changes-no-branch", "changes --results-dir {w}/stored --repo {git} --branch nope", 2,
     "no branch 'nope'"),
    ("changes-detached", "changes --results-dir {w}/stored --repo {detached}", 2,
     "HEAD is detached"),
    ("changes-json-missing-folder", "changes --results-dir {w}/stored --json {w}/nope/c.json", 2,
     "cannot write {w}/nope/c.json"),
    ("changes-issues-under-a-file", "changes --results-dir {w}/stored --issues-dir "
     "{w}/a-file/issues", 2, "cannot write {w}/a-file/issues"),
    ("report-out-under-a-file", "report --results-dir {w}/stored --out {w}/a-file/site", 2,
     "cannot write {w}/a-file/site"),
    ("report-asv-no-repo", "report --results-dir {w}/stored --asv --out {w}/site", 2,
     "--asv needs --repo"),
    # -- comment --
    ("comment-no-body", "comment", 2, "no comment body"),
    ("comment-body-missing", "comment --body-file {w}/nope.md", 2, "nope.md"),
    # -- run, nightly, bisect --
    ("run-not-repo", "run --repo {w}/folder HEAD", 2, "not a git repository"),
    ("run-no-revision", "run --repo {git} nope --results-dir {w}/stored", 2,
     "revision 'nope' does not exist"),
    ("run-reference-unknown", "run --reference nope --results-dir {w}/stored", 2,
     "unknown reference policies"),
    ("nightly-not-repo", "nightly --repo {w}/folder --results-dir {w}/stored --dry-run", 2,
     "{w}/folder"),
    ("bisect-unknown-benchmark", "bisect --repo {w}/folder a b --benchmark x --results-dir "
     "{w}/stored", 2, "unknown benchmark 'x'"),
    # -- the command line itself --
    ("no-command", "", 2, "required: COMMAND"),
    ("unknown-command", "bench", 2, "invalid choice: 'bench'"),
    ("unknown-flag", "ladders --bogus", 2, "unrecognized arguments: --bogus"),
]

TRACES = {
    "binary.trace": b"\xff\xfe150,150\n",
    "malformed.trace": b"150,150\nx,1\n",
    "comments.trace": b"# only a comment\n\n",
    "prefill.trace": b"3 | 9\n",
    "long.trace": b"150,150\n3000\n",
    "prefills.trace": b"300,400 | 20,30\n",
}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "PATH": "/usr/bin:/bin",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> dict[str, Path]:
    """Traces, a plain folder, a file, stored results of two machines, two git repositories."""
    from tests.test_compare_stored import results
    w = tmp_path_factory.mktemp("catalogue")
    for name, data in TRACES.items():
        (w / name).write_bytes(data)
    (w / "folder").mkdir()
    (w / "a-file").write_text("not a folder\n")
    (w / "stored").mkdir()
    results(w / "stored", head_machine="other")
    repos = {}
    for name in ("git", "detached"):
        repo = w / name
        repo.mkdir()
        _git(repo, "init", "-q", "-b", "trunk")
        (repo / "README").write_text("no bucketer here\n")
        _git(repo, "add", "README")
        _git(repo, "commit", "-q", "-m", "one")
        repos[name] = repo
    _git(repos["detached"], "checkout", "-q", "--detach")
    return {"w": w, **repos}


def snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` (git's own bookkeeping aside) -> digest or "dir"."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "dir"
            for p in sorted(root.rglob("*")) if ".git" not in p.parts}


@pytest.mark.parametrize("case_id,argv,code,text", CASES, ids=[c[0] for c in CASES])
def test_bad_input(work, case_id, argv, code, text):
    import shlex
    w = work["w"]
    fill = {"w": str(w), "git": str(work["git"]), "detached": str(work["detached"])}
    args = [a.format(**fill) for a in shlex.split(argv)]
    text = text.format(**fill)
    before = snapshot(w)
    home = w.parent / f"home-{case_id}"
    home.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=w, timeout=60, stdin=subprocess.DEVNULL,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "HOME": str(home)})
    both = proc.stdout + proc.stderr
    assert "Traceback" not in both, both
    assert proc.returncode == code, both
    if code == 2:
        errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
        assert len(errors) == 1, proc.stderr
        others = [ln for ln in proc.stderr.splitlines()
                  if ln not in errors and not ln.startswith(("spyre-bench: warning:", "["))]
        assert others == [], proc.stderr
        assert text in errors[0], proc.stderr
    else:
        assert text in both
    assert snapshot(w) == before, "a rejected command changed stored files"
    shutil.rmtree(home)


def test_the_catalogue_is_large_and_its_ids_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 70


def test_a_revision_alone_form_names_its_commit(work):
    """``X^!`` (ASV's "X alone") resolves to X wherever revisions are."""
    from harness.subjects.source import gitrev
    repo = work["git"]
    assert gitrev.resolve("t", repo, "HEAD^!") == gitrev.resolve("t", repo, "HEAD")
    assert gitrev.current_branch(repo) == "trunk"


def test_json_of_a_skipped_cost_still_parses(work):
    """All rows skipped: JSON on stdout for scripts, the one error line on stderr."""
    proc = subprocess.run([sys.executable, "-m", "harness", "cost", "--max-num-seqs", "1",
                           "--max-num-batched-tokens", "1", "--workload", "mixed-prefill-decode",
                           "--json"], capture_output=True, text=True)
    assert proc.returncode == 2
    [row] = json.loads(proc.stdout)
    assert "prefill chunk" in row["subjects"]["reference:post-810-clamp"]["skipped"]
