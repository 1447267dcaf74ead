"""``spyre-bench comment`` as CI runs it: real subprocesses against the loopback fake GitHub."""

import json
import subprocess
import sys

import pytest

from harness.report.marker import MARKER, marker
from tests.fixtures.fake_github import FakeGitHub

REPO = "torch-spyre/spyre-inference"
TOKEN = "ghs_cliTOKEN_7f3a9c_SECRET"


def comment(*args, env=None, stdin=None):
    base = {"PATH": "/usr/bin:/bin", "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "harness", "comment", *args], input=stdin,
                          capture_output=True, text=True, env={**base, **(env or {})})


@pytest.fixture
def fake():
    with FakeGitHub() as gh:
        gh.add_account(TOKEN, "github-actions[bot]", type="Bot", installation=True)
        gh.add_pull(REPO, 810, head_sha="e" * 40)
        yield gh


@pytest.fixture
def body(tmp_path):
    path = tmp_path / "comment.md"
    path.write_text("## spyre-bench: 1 ladder changed\n\n| bs | before | after |\n")
    return path


def env_for(fake, **extra):
    return {"GITHUB_API_URL": fake.url, "GITHUB_TOKEN": TOKEN, **extra}


def test_prints_the_body_with_its_marker(body):
    proc = comment("--body-file", str(body))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{MARKER}\n{body.read_text()}"
    assert proc.stderr == ""


def test_reads_standard_input_and_keys_the_marker():
    proc = comment("--body-file", "-", "--key", "hardware", stdin="hw result")
    assert proc.stdout == f"{marker('hardware')}\nhw result\n"


def test_post_twice_creates_then_updates_one_comment(fake, body):
    args = ["--body-file", str(body), "--post", "--repo", REPO, "--pr", "810"]
    first = comment(*args, env=env_for(fake))
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("created comment 1001 on torch-spyre/spyre-inference PR #810: ")
    body.write_text("## spyre-bench: no change\n")
    second = comment(*args, "--expect-head-sha", "e" * 40, env=env_for(fake))
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("updated comment 1001 ")
    [c] = fake.comments_on(REPO, 810)
    assert c["body"] == f"{MARKER}\n## spyre-bench: no change\n"


def test_the_specific_token_variable_wins(fake, body):
    proc = comment("--body-file", str(body), "--post", "--repo", REPO, "--pr", "810",
                   env=env_for(fake, GITHUB_TOKEN="ghs_wrong", SPYRE_BENCH_GITHUB_TOKEN=TOKEN))
    assert proc.returncode == 0, proc.stderr


def test_bad_token_is_one_line_exit_2_without_the_token(fake, body):
    bad = "ghp_BADTOKEN_0000_SECRET"
    proc = comment("--body-file", str(body), "--post", "--repo", REPO, "--pr", "810",
                   env=env_for(fake, GITHUB_TOKEN=bad))
    assert proc.returncode == 2
    assert proc.stderr == ("spyre-bench: error: GitHub rejected the token (401: Bad credentials) "
                           "for torch-spyre/spyre-inference PR #810; set SPYRE_BENCH_GITHUB_TOKEN "
                           "or GITHUB_TOKEN to a valid token\n")
    assert bad not in proc.stdout + proc.stderr and proc.stdout == ""
    assert fake.count("POST") == 0


@pytest.mark.parametrize("args,env,message", [
    (["--post", "--repo", REPO, "--pr", "810"], {},
     "no GitHub token: set SPYRE_BENCH_GITHUB_TOKEN or GITHUB_TOKEN"),
    (["--post", "--pr", "810"], {"GITHUB_TOKEN": TOKEN}, "--post needs --repo"),
    (["--post"], {"GITHUB_TOKEN": TOKEN}, "--post needs --repo and --pr"),
    (["--repo", REPO], {}, "--repo, --pr, --expect-head-* and --author only apply with --post"),
    (["--post", "--repo", "not a repo", "--pr", "1"], {"GITHUB_TOKEN": TOKEN},
     "repository 'not a repo': expected OWNER/NAME"),
    (["--post", "--repo", REPO, "--pr", "811"], {"GITHUB_TOKEN": TOKEN},
     "not found (404: Not Found): torch-spyre/spyre-inference PR #811 does not exist"),
    (["--post", "--repo", REPO, "--pr", "810", "--expect-head-sha", "f" * 40], {"GITHUB_TOKEN": TOKEN},
     "PR #810 head is eeee"),
])
def test_bad_input_is_one_line_and_exit_2(fake, body, args, env, message):
    proc = comment("--body-file", str(body), *args, env={"GITHUB_API_URL": fake.url, **env})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and proc.stdout == ""
    assert fake.count("POST") == fake.count("PATCH") == 0


@pytest.mark.parametrize("content,message", [
    (None, "--body-file {path}: No such file or directory"),
    (b"  \n", "--body-file {path}: empty"),
    (b"caf\xe9", "--body-file {path}: not UTF-8 text (byte 3)"),
])
def test_unreadable_body_files_are_one_line(tmp_path, content, message):
    path = tmp_path / "c.md"
    if content is not None:
        path.write_bytes(content)
    proc = comment("--body-file", str(path))
    assert proc.returncode == 2 and proc.stderr == f"spyre-bench: error: {message.format(path=path)}\n"


def test_no_body_source_is_an_error():
    proc = comment()
    assert proc.returncode == 2 and "no comment body: give --comparison-json FILE" in proc.stderr


def test_an_oversized_body_is_cut_with_a_pointer_to_the_run(tmp_path):
    path = tmp_path / "big.md"
    path.write_text("## verdict\n" + "| a | b |\n" * 10_000)
    proc = comment("--body-file", str(path), "--artifact-url", "https://github.com/o/r/actions/runs/9")
    assert proc.returncode == 0
    out = proc.stdout.removesuffix("\n")  # printing adds no second newline
    assert len(out) <= 65536 < len(path.read_text())
    assert out.endswith("the full report: https://github.com/o/r/actions/runs/9")
    assert "note: body cut from 100,046 to" in proc.stderr


def test_help_explains_tokens_and_exit_codes():
    text = comment("--help").stdout
    for words in ("SPYRE_BENCH_GITHUB_TOKEN", "GITHUB_TOKEN", "GITHUB_API_URL", "exit codes:",
                  "pull-requests: write", "never duplicated"):
        assert words in text


def test_posting_needs_only_the_hash_pinned_packages(fake, tmp_path):
    """The privileged workflows install only requirements/post.txt (urllib3, rich, markdown-it-py
    and their own dependencies) and run spyre-bench from its checkout: validating, rendering and
    posting a comparison document must import nothing else outside the standard library."""
    from harness.analyze.comparison import as_document
    from harness.analyze.subjects_now import compare_subjects
    from harness.matrix import tier_cases
    from harness.subjects import resolve_subject
    from harness.workloads import specs
    doc = as_document(compare_subjects(resolve_subject("reference:pre-810"),
                                       resolve_subject("reference:post-810-topup"),
                                       tier_cases("quick")[:2], specs(["bimodal"])))
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(doc))
    code = ("import sys\nfrom harness.cli import main\n"
            f"rc = main(['comment', '--comparison-json', {str(path)!r}, '--post', '--repo', {REPO!r}, "
            "'--pr', '810'])\n"
            "top = {m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)\n"
            "import json; print(rc, json.dumps(sorted(m for m in top if m[0] != '_')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **env_for(fake)})
    rc, _, modules = proc.stdout.splitlines()[-1].partition(" ")
    allowed = {"harness", "urllib3", "rich", "markdown_it", "mdurl", "pygments"}  # post.txt
    assert rc == "0" and set(json.loads(modules)) <= allowed, proc.stdout + proc.stderr
    posted = fake.comments_on(REPO, 810)[0]["body"]
    assert posted.startswith(f"{MARKER}\n### spyre-bench: 🟡 2 other changes")
    assert "batched num\\_seqs ladder" in posted


def test_a_compare_error_leads_the_comment_escaped(fake, tmp_path):
    """compare stopped before comparing (the head does not import): its error line is the comment,
    the head named when it is the one that failed, every figure said unavailable in one line."""
    head = "e" * 40
    path = tmp_path / "compare-error.txt"
    path.write_bytes(f"spyre-bench: error: git:spyre-inference@{head} (commit {head[:12]}): "
                     "spyre_inference/x.py failed to import: ModuleNotFoundError: No module named "
                     "'@team <b>' (x.py:3: import y)\n".encode())
    proc = comment("--compare-error", str(path), "--post", "--repo", REPO, "--pr", "810",
                   "--expect-head-sha", head, "--artifact-url", "https://github.com/o/r/actions/runs/7",
                   env=env_for(fake))
    assert proc.returncode == 0, proc.stderr
    [c] = fake.comments_on(REPO, 810)
    lines = c["body"].splitlines()
    assert lines[:2] == [MARKER, "### spyre-bench: ❌ the head failed to import: nothing compared"]
    assert "unavailable" in lines[3] and lines[5].startswith("1. ❌ git\\:spyre\\-inference@")
    assert "<b>" not in c["body"] and "@team" not in c["body"]
    assert "https://github.com/o/r/actions/runs/7" in c["body"]


@pytest.mark.parametrize("content,message", [
    (b"", "--compare-error {path}: empty"),
    (None, "--compare-error {path}: No such file or directory"),
])
def test_a_bad_compare_error_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "compare-error.txt"
    if content is not None:
        path.write_bytes(content)
    proc = comment("--compare-error", str(path))
    assert proc.returncode == 2 and proc.stderr == f"spyre-bench: error: {message.format(path=path)}\n"


def test_only_one_body_source():
    proc = comment("--compare-error", "x", "--body-file", "y")
    assert proc.returncode == 2 and "give one of --comparison-json, --compare-error" in proc.stderr
