"""The GitHub Actions workflows: actionlint (with shellcheck) finds nothing, the security
properties hold structurally, and the shell steps that guard the privileged jobs behave when run."""

import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
BIN = Path(sys.executable).parent  # actionlint and shellcheck come with the test extras
SHA_PIN = re.compile(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}")
BENCH_REPO = "${{ env.SPYRE_BENCH_REPOSITORY }}"


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def triggers(wf: dict) -> dict:
    return wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True


def steps(wf: dict):
    for job_id, job in wf["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, job, step


def checkouts(job: dict) -> list[dict]:
    return [s.get("with", {}) for s in job.get("steps", [])
            if s.get("uses", "").startswith("actions/checkout@")]


def writes(job: dict, wf: dict) -> bool:
    perms = job.get("permissions", wf.get("permissions"))
    return perms in (None, "write-all") or any(v == "write" for v in (perms or {}).values())


def actionlint(*args, cwd=ROOT):
    exe, shellcheck = BIN / "actionlint", BIN / "shellcheck"
    assert exe.exists() and shellcheck.exists(), "install the test extras: pip install -e '.[test]'"
    return subprocess.run([str(exe), "-no-color", "-shellcheck", str(shellcheck),
                           "-config-file", str(ROOT / ".github" / "actionlint.yaml"), *args],
                          capture_output=True, text=True, cwd=cwd)


ALL = sorted(p.name for p in WORKFLOWS.glob("*.yml"))


def test_the_workflows_exist():
    assert ALL == ["nightly.yml", "pr-bench.yml", "pr-comment.yml", "spyre-bench-command.yml"]


def test_actionlint_and_shellcheck_find_nothing():
    proc = actionlint(*(str(WORKFLOWS / n) for n in ALL))
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_actionlint_does_flag_injection_and_shell_mistakes(tmp_path):
    """The linter really runs, with shellcheck: a planted injection and an unquoted var are caught."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: issue_comment\njobs:\n  j:\n    runs-on: [self-hosted, spyre]\n    steps:\n"
                   "      - run: echo \"${{ github.event.comment.body }}\"\n"
                   "      - run: echo $HOME\n")
    out = actionlint(str(bad), cwd=tmp_path).stdout
    assert '"github.event.comment.body" is potentially untrusted' in out
    assert "SC2086" in out and "spyre" not in out.split("untrusted")[0]


@pytest.mark.parametrize("name", ALL)
def test_common_rules(name):
    wf, text = load(name), (WORKFLOWS / name).read_text()
    assert "pull_request_target" not in triggers(wf)
    assert "permissions" in wf, "default token permissions must be set explicitly"
    for job_id, _job, step in steps(wf):
        if "uses" in step:
            assert SHA_PIN.fullmatch(step["uses"]), f"{job_id}: {step['uses']} not pinned to a SHA"
        if "run" in step:  # values reach scripts through env:, never by expression expansion
            assert "${{" not in step["run"], f"{job_id}: expression inside run: {step['run'][:60]}"
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False
    for job_id, job in wf["jobs"].items():
        runs_pr_code = any("repository" not in c for c in checkouts(job))
        if runs_pr_code:  # the job that checks out the PR holds no write token and no secret
            assert not writes(job, wf), job_id
            assert "secrets." not in yaml.safe_dump(job), job_id
        if writes(job, wf):
            assert all(c["repository"] == BENCH_REPO for c in checkouts(job)), job_id
            assert "self-hosted" not in str(job["runs-on"]), job_id
    assert "secrets." not in text


def test_pull_request_workflow_is_read_only_and_uploads_the_comment():
    wf = load("pr-bench.yml")
    assert set(triggers(wf)) == {"pull_request"}
    assert wf["permissions"] == {"contents": "read"}
    assert all("permissions" not in job for job in wf["jobs"].values())
    [job] = wf["jobs"].values()
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "spyre-bench\" compare" in runs and "--tier quick --timings --markdown out/comment.md" in runs
    [upload] = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "spyre-bench-comment" and upload["with"]["path"] == "out/"


def test_workflow_run_workflow_posts_only_and_never_checks_out_the_pr():
    wf, bench = load("pr-comment.yml"), load("pr-bench.yml")
    assert triggers(wf) == {"workflow_run": {"workflows": [bench["name"]], "types": ["completed"]}}
    assert wf["permissions"] == {}
    [job] = wf["jobs"].values()
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
    assert "github.event.workflow_run.event == 'pull_request'" in job["if"]
    for c in checkouts(job):
        assert c == {"repository": BENCH_REPO, "ref": "${{ env.SPYRE_BENCH_REF }}",
                     "path": "spyre-bench", "persist-credentials": False}
    [download] = [s for s in job["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    assert download["with"]["name"] == "spyre-bench-comment"
    text = (WORKFLOWS / "pr-comment.yml").read_text()
    assert "head_branch }}" not in "".join(s.get("run", "") for s in job["steps"])
    assert "--expect-head-sha \"$HEAD_SHA\"" in text
    assert job["steps"][-1]["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"


def test_command_workflow_checks_association_and_permission_and_splits_the_jobs():
    wf = load("spyre-bench-command.yml")
    assert triggers(wf) == {"issue_comment": {"types": ["created"]}}
    gate, bench, post = (wf["jobs"][k] for k in ("gate", "bench", "post"))
    assert "github.event.issue.pull_request" in gate["if"]
    assert "github.event.comment.author_association" in gate["if"]
    assert "COLLABORATOR" in gate["if"] and "CONTRIBUTOR" not in gate["if"]
    assert "collaborators/$COMMENTER/permission" in gate["steps"][0]["run"]
    assert bench["runs-on"] == ["self-hosted", "spyre"] and bench["needs"] == "gate"
    assert bench["permissions"] == {"contents": "read"}
    assert checkouts(post) and all(c["repository"] == BENCH_REPO for c in checkouts(post))
    assert post["needs"] == ["gate", "bench"] and post["permissions"] == {"pull-requests": "write"}


# -- the guarding shell steps, run for real with stub commands -------------------------------------

def step_script(name: str, job: str, step_name: str) -> str:
    [step] = [s for s in load(name)["jobs"][job]["steps"] if s.get("name") == step_name]
    return step["run"]


def run_step(script: str, tmp_path: Path, env: dict, stubs: dict[str, str]):
    """Run a step as the runner does (bash -eo pipefail) with stub commands first on PATH."""
    stub_dir = tmp_path / "stubs"
    stub_dir.mkdir(exist_ok=True)
    for name, body in stubs.items():
        path = stub_dir / name
        path.write_text(f"#!/bin/bash\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "step.sh").write_text(script)
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(tmp_path / "step.sh")],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": f"{stub_dir}:/usr/bin:/bin", **env})


@pytest.mark.parametrize("content,posted", [
    ("42\n", "42"),
    ("810", "810"),
    ("42\n43\n", None),
    ("$(touch pwned)", None),
    ("42; touch pwned", None),
    ("", None),
    ("0", None),
    ("042", None),
    ("-1", None),
    ("1" * 40, None),
    ("12345678901", None),
])
def test_pr_comment_accepts_only_a_plain_pr_number(tmp_path, content, posted):
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "pr-number").write_text(content)
    (artifact / "comment.md").write_text("body")
    bench = tmp_path / "venv" / "bin"
    bench.mkdir(parents=True)
    (bench / "spyre-bench").write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$RUNNER_TEMP/args"\n')
    (bench / "spyre-bench").chmod(0o755)
    env = {"RUNNER_TEMP": str(tmp_path), "ARTIFACT": str(artifact), "REPO": "o/spyre-inference",
           "HEAD_SHA": "b" * 40, "RUN_URL": "https://github.com/o/r/actions/runs/1", "GITHUB_TOKEN": "t"}
    script = step_script("pr-comment.yml", "post", "Create or update the sticky comment")
    proc = run_step(script, tmp_path, env, {})
    assert not (tmp_path / "pwned").exists()
    if posted is None:
        assert proc.returncode != 0 and not (tmp_path / "args").exists()
        assert "::error::the artifact's pr-number is not a PR number" in proc.stdout
    else:
        assert proc.returncode == 0, proc.stderr
        args = (tmp_path / "args").read_text().split("\n")
        assert args[:6] == ["comment", "--post", "--repo", "o/spyre-inference", "--pr", posted]
        assert args[args.index("--expect-head-sha") + 1] == "b" * 40


GH_STUB = """
case "$*" in
  *collaborators/*/permission*) printf '%s\\n' "$STUB_PERMISSION" ;;
  *reactions*) printf '%s\\n' "$*" >> "$LOG" ;;
  *pulls/*) printf '%s\\n' "$STUB_SHAS" ;;
  *) exit 9 ;;
esac
"""


@pytest.mark.parametrize("permission,ok", [("admin", True), ("write", True), ("maintain", True),
                                           ("triage", False), ("read", False), ("none", False)])
def test_command_gate_requires_write_permission(tmp_path, permission, ok):
    out, log = tmp_path / "out", tmp_path / "log"
    env = {"GH_TOKEN": "t", "REPO": "o/spyre-inference", "PR": "7", "COMMENT_ID": "99",
           "COMMENTER": "alice", "GITHUB_OUTPUT": str(out), "LOG": str(log),
           "STUB_PERMISSION": permission, "STUB_SHAS": f"{'a' * 40} {'b' * 40}"}
    script = step_script("spyre-bench-command.yml", "gate", "Require write access, react, pin base and head")
    proc = run_step(script, tmp_path, env, {"gh": GH_STUB})
    reactions = log.read_text()
    if ok:
        assert proc.returncode == 0, proc.stderr
        assert "content=eyes" in reactions
        assert out.read_text() == f"pr=7\nbase-sha={'a' * 40}\nhead-sha={'b' * 40}\n"
    else:
        assert proc.returncode == 1 and "content=confused" in reactions and not out.exists()


def test_command_gate_refuses_a_malformed_commit_id(tmp_path):
    env = {"REPO": "o/r", "PR": "7", "COMMENT_ID": "1", "COMMENTER": "a",
           "GITHUB_OUTPUT": str(tmp_path / "o"), "LOG": str(tmp_path / "log"),
           "STUB_PERMISSION": "write", "STUB_SHAS": "a" * 40 + " $(id)"}
    script = step_script("spyre-bench-command.yml", "gate", "Require write access, react, pin base and head")
    proc = run_step(script, tmp_path, env, {"gh": GH_STUB})
    assert proc.returncode == 1 and "unexpected commit id" in proc.stdout
    assert not (tmp_path / "o").exists()


def test_pr_bench_packages_a_fallback_comment_and_the_pr_number(tmp_path):
    script = step_script("pr-bench.yml", "bench", "Package the comment for pr-comment.yml")
    env = {"PR_NUMBER": "810", "HEAD_SHA": "c" * 40, "RUN_URL": "https://github.com/o/r/actions/runs/5"}
    proc = run_step(script, tmp_path, env, {})
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert (out / "pr-number").read_text() == "810\n" and (out / "head-sha").read_text() == "c" * 40 + "\n"
    assert "report: https://github.com/o/r/actions/runs/5" in (out / "comment.md").read_text()


def test_nightly_measures_read_only_and_writes_only_from_jobs_that_run_no_measured_code():
    wf = load("nightly.yml")
    assert {"schedule", "workflow_dispatch"} == set(triggers(wf))
    jobs = wf["jobs"]
    measure = jobs["measure"]
    assert "self-hosted" in measure["runs-on"] and measure["permissions"] == {"contents": "read"}
    assert measure["strategy"]["matrix"]["machine"], "the fleet is a matrix of machines"
    nightly_cmd = next(s["run"] for s in measure["steps"] if "run" in s)
    assert "spyre-bench nightly" in nightly_cmd and "--no-commit" in nightly_cmd
    for name in ("record", "publish"):
        job = jobs[name]
        assert writes(job, wf) and "self-hosted" not in str(job["runs-on"])
        repos = [c.get("repository") for c in checkouts(job)]
        assert repos and all(r == BENCH_REPO for r in repos), name   # never spyre-inference
        assert not any("pip install" in s.get("run", "") for s in job["steps"]), name
    assert not writes(jobs["report"], wf)
    # every job is off until the repository opts in
    assert all("vars.SPYRE_BENCH_NIGHTLY" in job["if"] for job in jobs.values())
