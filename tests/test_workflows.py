"""The GitHub Actions workflows: actionlint (with shellcheck) finds nothing, the security
properties hold structurally, and the shell steps that guard the privileged jobs behave when run."""

import json
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


def test_pull_request_workflow_is_read_only_and_uploads_data_not_markdown():
    wf = load("pr-bench.yml")
    assert set(triggers(wf)) == {"pull_request"}
    assert wf["permissions"] == {"contents": "read"}
    assert all("permissions" not in job for job in wf["jobs"].values())
    [job] = wf["jobs"].values()
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "spyre-bench\" compare" in runs and "--tier quick --timings --json out/comparison.json" in runs
    assert "--expected spyre-inference/.github/spyre-bench-expected-changes.jsonl" in runs
    assert "--markdown" not in runs and ".md" not in runs     # no markdown crosses to the poster
    [upload] = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "spyre-bench-comparison" and upload["with"]["path"] == "out/"


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
    assert download["with"]["name"] == "spyre-bench-comparison"
    text = (WORKFLOWS / "pr-comment.yml").read_text()
    assert "head_branch }}" not in "".join(s.get("run", "") for s in job["steps"])
    post = job["steps"][-1]
    # the artifact is rendered here from validated data; the PR is bound to repo, branch and SHA
    assert '--comparison-json "$ARTIFACT/comparison.json"' in post["run"]
    assert '--body-file "$ARTIFACT' not in post["run"]
    for flag, var, value in (("--expect-head-sha", "HEAD_SHA", "head_sha"),
                             ("--expect-head-repo", "HEAD_REPO", "head_repository.full_name"),
                             ("--expect-head-branch", "HEAD_BRANCH", "head_branch")):
        assert f'{flag} "${var}"' in text
        assert post["env"][var] == "${{ github.event.workflow_run.%s }}" % value


def test_command_workflow_checks_association_and_permission_and_splits_the_jobs():
    wf = load("spyre-bench-command.yml")
    assert triggers(wf) == {"issue_comment": {"types": ["created"]}}
    gate, bench, post = (wf["jobs"][k] for k in ("gate", "bench", "post"))
    assert "github.event.issue.pull_request" in gate["if"]
    assert "github.event.comment.author_association" in gate["if"]
    assert "COLLABORATOR" in gate["if"] and "CONTRIBUTOR" not in gate["if"]
    assert "collaborators/$COMMENTER/permission" in gate["steps"][0]["run"]
    assert bench["needs"] == "gate" and bench["permissions"] == {"contents": "read"}
    assert checkouts(post) and all(c["repository"] == BENCH_REPO for c in checkouts(post))
    assert post["needs"] == ["gate", "bench"] and post["permissions"] == {"pull-requests": "write"}
    assert '--comparison-json "$ARTIFACT/comparison.json"' in post["steps"][-1]["run"]
    # one run per PR at a time
    assert wf["concurrency"] == {"group": "spyre-bench-command-${{ github.event.issue.number }}",
                                 "cancel-in-progress": False}


def test_pr_code_runs_on_an_ephemeral_group_apart_from_the_nightly_machines():
    bench = load("spyre-bench-command.yml")["jobs"]["bench"]
    nightly = load("nightly.yml")["jobs"]["measure"]
    assert bench["runs-on"] == {"group": "spyre-bench-pr", "labels": ["self-hosted", "spyre-ephemeral"]}
    fleet = set(nightly["strategy"]["matrix"]["machine"]) | {"spyre"}
    assert not fleet & set(bench["runs-on"]["labels"]) and "group" not in nightly["runs-on"]


@pytest.mark.parametrize("name", ["pr-comment.yml", "spyre-bench-command.yml"])
def test_write_token_jobs_pin_spyre_bench_by_sha_and_install_with_hashes(name):
    wf = load(name)
    assert re.fullmatch(r"[0-9a-f]{40}", wf["env"]["SPYRE_BENCH_REF"])
    for job_id, job in wf["jobs"].items():
        if not (writes(job, wf) and checkouts(job)):
            continue
        first = job["steps"][0]
        assert "Refuse a spyre-bench ref" in first["name"], job_id
        installs = [s["run"] for s in job["steps"] if "pip" in s.get("run", "")]
        assert installs and all("--require-hashes" in r and "-r spyre-bench/requirements/post.txt"
                                in r for r in installs), job_id


@pytest.mark.parametrize("ref,ok", [("a" * 40, True), ("main", False), ("v1.2", False),
                                    ("a" * 39, False), ("A" * 40, False)])
def test_the_sha_check_refuses_branches_and_tags(tmp_path, ref, ok):
    script = step_script("pr-comment.yml", "post", "Refuse a spyre-bench ref that is not a full commit SHA")
    proc = run_step(script, tmp_path, {"SPYRE_BENCH_REF": ref}, {})
    assert (proc.returncode == 0) == ok and (ok or "must be a full commit SHA" in proc.stdout)


def test_the_hash_file_pins_every_posting_dependency():
    lines = [x for x in (ROOT / "requirements" / "post.txt").read_text().splitlines()
             if x and not x.startswith("#")]
    pinned = {x.split("==")[0].lower(): x for x in lines}
    assert set(pinned) == {"markdown-it-py", "mdurl", "pygments", "rich", "urllib3"}
    constraints = (ROOT / "requirements" / "constraints.txt").read_text().lower()
    for name, line in pinned.items():
        assert re.search(r"==[\w.]+ --hash=sha256:[0-9a-f]{64}$", line), line
        assert line.split(" ")[0].lower() in constraints, f"{name}: not the constrained version"


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
    (artifact / "comparison.json").write_text("{}")
    bench = tmp_path / "venv" / "bin"
    bench.mkdir(parents=True)
    (bench / "python").write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$RUNNER_TEMP/args"\n')
    (bench / "python").chmod(0o755)
    env = {"RUNNER_TEMP": str(tmp_path), "ARTIFACT": str(artifact), "REPO": "o/spyre-inference",
           "HEAD_SHA": "b" * 40, "HEAD_REPO": "fork/spyre-inference", "HEAD_BRANCH": "feature",
           "RUN_URL": "https://github.com/o/r/actions/runs/1", "GITHUB_TOKEN": "t",
           "GITHUB_WORKSPACE": str(tmp_path)}
    script = step_script("pr-comment.yml", "post", "Render and post the sticky comment")
    proc = run_step(script, tmp_path, env, {})
    assert not (tmp_path / "pwned").exists()
    if posted is None:
        assert proc.returncode != 0 and not (tmp_path / "args").exists()
        assert "::error::the artifact's pr-number is not a PR number" in proc.stdout
    else:
        assert proc.returncode == 0, proc.stderr
        args = (tmp_path / "args").read_text().split("\n")
        assert args[:8] == ["-m", "harness", "comment", "--post", "--repo", "o/spyre-inference",
                            "--pr", posted]
        assert args[args.index("--expect-head-sha") + 1] == "b" * 40
        assert args[args.index("--expect-head-repo") + 1] == "fork/spyre-inference"
        assert args[args.index("--expect-head-branch") + 1] == "feature"
        assert args[args.index("--comparison-json") + 1] == str(artifact / "comparison.json")


GH_STUB = """
case "$*" in
  *collaborators/*/permission*) printf '%s\\n' "$STUB_PERMISSION" ;;
  *reactions*) printf '%s\\n' "$*" >> "$LOG" ;;
  *pulls/*) printf '%s\\n' "$STUB_SHAS" ;;
  *) exit 9 ;;
esac
"""


GATE = "Require write access and the current head's SHA in the command, react, pin"
HEAD = "b" * 40


def run_gate(tmp_path, permission="write", body=f"/spyre-bench {HEAD}", shas=f"{'a' * 40} {HEAD}"):
    out, log = tmp_path / "out", tmp_path / "log"
    log.write_text("")
    env = {"GH_TOKEN": "t", "REPO": "o/spyre-inference", "PR": "7", "COMMENT_ID": "99",
           "COMMENTER": "alice", "GITHUB_OUTPUT": str(out), "LOG": str(log), "BODY": body,
           "STUB_PERMISSION": permission, "STUB_SHAS": shas}
    proc = run_step(step_script("spyre-bench-command.yml", "gate", GATE), tmp_path, env,
                    {"gh": GH_STUB})
    return proc, log.read_text(), out


@pytest.mark.parametrize("permission,ok", [("admin", True), ("write", True), ("maintain", True),
                                           ("triage", False), ("read", False), ("none", False)])
def test_command_gate_requires_write_permission(tmp_path, permission, ok):
    proc, reactions, out = run_gate(tmp_path, permission)
    if ok:
        assert proc.returncode == 0, proc.stderr
        assert "content=eyes" in reactions
        assert out.read_text() == f"pr=7\nbase-sha={'a' * 40}\nhead-sha={HEAD}\n"
    else:
        assert proc.returncode == 1 and "content=confused" in reactions and not out.exists()


@pytest.mark.parametrize("body,message", [
    ("/spyre-bench", "usage: /spyre-bench <full SHA"),
    ("/spyre-bench main", "usage: /spyre-bench <full SHA"),
    (f"/spyre-bench {HEAD[:12]}", "usage: /spyre-bench <full SHA"),
    (f"/spyre-bench {HEAD}; touch pwned", "usage: /spyre-bench <full SHA"),
    (f"/spyre-bench {'c' * 40}", "the PR head moved"),
])
def test_command_gate_takes_the_reviewed_sha_and_refuses_a_moved_head(tmp_path, body, message):
    proc, reactions, out = run_gate(tmp_path, body=body)
    assert proc.returncode == 1 and message in proc.stdout, proc.stdout
    assert "content=confused" in reactions and "content=eyes" not in reactions
    assert not out.exists() and not (tmp_path / "pwned").exists()


def test_command_gate_accepts_a_trailing_newline_from_the_editor(tmp_path):
    proc, reactions, out = run_gate(tmp_path, body=f"/spyre-bench {HEAD}\r\n")
    assert proc.returncode == 0 and f"head-sha={HEAD}" in out.read_text(), proc.stdout


def test_command_gate_refuses_a_malformed_commit_id(tmp_path):
    proc, _, out = run_gate(tmp_path, shas="a" * 40 + " $(id)")
    assert proc.returncode == 1 and "unexpected commit id" in proc.stdout
    assert not out.exists()


def test_pr_bench_packages_only_the_pr_number(tmp_path):
    script = step_script("pr-bench.yml", "bench", "Package the PR number for pr-comment.yml")
    proc = run_step(script, tmp_path, {"PR_NUMBER": "810"}, {})
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["pr-number"]
    assert (tmp_path / "out" / "pr-number").read_text() == "810\n"


# -- zizmor ------------------------------------------------------------------------------------

def zizmor(*args):
    exe = BIN / "zizmor"
    assert exe.exists(), "install the test extras: pip install -e '.[test]'"
    return subprocess.run([str(exe), "--offline", "--no-progress", *args, str(WORKFLOWS)],
                          capture_output=True, text=True, cwd=ROOT)


def test_zizmor_finds_nothing_and_every_ignore_is_explained():
    proc = zizmor("--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == [], proc.stdout + proc.stderr
    for name in ALL:
        lines = (WORKFLOWS / name).read_text().splitlines()
        for i, line in enumerate(lines):
            ignored = re.search(r"zizmor: ignore\[([\w-]+)\]", line)
            if ignored:  # the lines just above say why
                above = "\n".join(lines[max(0, i - 6):i])
                assert re.search(r"#\s*zizmor: \S", above) and len(above) > 120, (name, i)


def test_zizmor_auditor_findings_are_explained_where_they_are():
    """The stricter persona's findings (self-hosted runners) each carry a comment naming the audit."""
    proc = zizmor("--persona", "auditor", "--format", "json")
    findings = json.loads(proc.stdout)
    assert findings and all(f["determinations"]["severity"] != "High" for f in findings)
    for f in findings:
        loc = f["locations"][0]
        path = ROOT / loc["symbolic"]["key"]["Local"]["verbatim_path"]
        row = loc["concrete"]["location"]["start_point"]["row"]
        above = "\n".join(path.read_text().splitlines()[max(0, row - 6):row])
        assert f"zizmor {f['ident']}" in above, (path.name, row, f["ident"])


def test_zizmor_does_flag_a_planted_injection(tmp_path):
    bad = tmp_path / ".github" / "workflows"
    bad.mkdir(parents=True)
    (bad / "bad.yml").write_text(
        "on: pull_request_target\npermissions: {}\njobs:\n  j:\n    runs-on: ubuntu-24.04\n"
        "    steps:\n      - run: echo \"${{ github.event.pull_request.title }}\"\n")
    proc = subprocess.run([str(BIN / "zizmor"), "--offline", "--no-progress", "--format", "json",
                           str(bad)], capture_output=True, text=True)
    idents = {f["ident"] for f in json.loads(proc.stdout)}
    assert {"template-injection", "dangerous-triggers"} <= idents, idents


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
