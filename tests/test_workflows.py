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
    assert "spyre-bench\" compare" in runs and "--json out/comparison.json" in runs
    # every commit's kernels checked against the oracle by default (and timed), on the quick tier
    assert '--tier "$SPYRE_BENCH_TIER" "--$SPYRE_BENCH_KERNELS"' in runs
    assert (wf["env"]["SPYRE_BENCH_TIER"], wf["env"]["SPYRE_BENCH_KERNELS"]) == ("quick", "timings")
    assert wf["env"]["SPYRE_BENCH_ENV"] == ""
    assert "--expected spyre-inference/.github/spyre-bench-expected-changes.jsonl" in runs
    assert "--markdown" not in runs and ".md" not in runs     # no markdown crosses to the poster
    [upload] = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "spyre-bench-comparison" and upload["with"]["path"] == "out/"


def test_the_pr_job_keeps_figures_of_code_measured_before_and_nothing_else(monkeypatch):
    """The figure memo and torch's compile cache (both keyed by what they hold) between a PR's
    runs, where spyre-bench keeps them on the runner, keyed by spyre-bench's pinned commit
    first: a new spyre-bench never reads figures another version computed; restored before
    compare runs."""
    import os

    from harness.subjects.memo import store
    from harness.torch_cache import CACHE_ENV, command_torch_cache
    monkeypatch.setenv("HOME", "/home/runner")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("SPYRE_BENCH_MEMO_DIR", raising=False)
    monkeypatch.delenv(CACHE_ENV, raising=False)
    with command_torch_cache():
        kept = [str(store.folder()), os.environ[CACHE_ENV]]
    [job] = load("pr-bench.yml")["jobs"].values()
    names = [s.get("uses", "").split("@")[0] or s.get("id") for s in job["steps"]]
    [cache] = [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache@")]
    assert names.index("actions/cache") < names.index("compare")
    assert [p.replace("~", "/home/runner", 1) for p in cache["with"]["path"].split()] == kept
    assert cache["with"]["key"].startswith("spyre-bench-${{ env.SPYRE_BENCH_REF }}-")
    assert cache["with"]["restore-keys"] == "spyre-bench-${{ env.SPYRE_BENCH_REF }}-"


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
    return subprocess.run([str(exe), "--offline", "--no-progress", "--color", "never", *args, str(WORKFLOWS)],
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


@pytest.mark.parametrize("persona", ["regular", "pedantic", "auditor"])
def test_zizmor_finds_nothing_at_any_persona(persona):
    """The stricter personas too; what is ignored inline is explained above it (test above)."""
    proc = zizmor("--persona", persona, "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == [], proc.stdout + proc.stderr


def test_the_self_hosted_runners_are_ignored_inline_not_hidden():
    """zizmor still sees both self-hosted runners (it reports them ignored, not absent)."""
    proc = zizmor("--persona", "auditor")
    assert re.search(r"\(\d+ ignored", proc.stdout + proc.stderr), proc.stdout + proc.stderr
    texts = {n: (WORKFLOWS / n).read_text() for n in ALL}
    ignored = [n for n, t in texts.items() if "zizmor: ignore[self-hosted-runner]" in t]
    assert ignored == ["nightly.yml", "spyre-bench-command.yml"]


# -- fork safety -------------------------------------------------------------------------------

PR_WORKFLOWS = {"pr-bench.yml": "pull_request", "pr-comment.yml": "workflow_run",
                "spyre-bench-command.yml": "issue_comment"}
HOME_REPO = "github.repository == 'torch-spyre/spyre-inference'"


def self_hosted(job: dict) -> bool:
    runs_on = job.get("runs-on")
    return "self-hosted" in str(runs_on) or isinstance(runs_on, dict)


@pytest.mark.parametrize("name", sorted(PR_WORKFLOWS))
def test_every_job_is_guarded_on_its_event_and_the_repository(name):
    wf = load(name)
    event = PR_WORKFLOWS[name]
    assert set(triggers(wf)) == {event}
    for job_id, job in wf["jobs"].items():
        guard = " ".join(str(job.get("if", "")).split())
        assert f"github.event_name == '{event}'" in guard, (name, job_id)
        assert HOME_REPO in guard, (name, job_id)
        assert "||" not in guard.split(HOME_REPO)[0], (name, job_id)   # not an alternative


def test_pr_code_reaches_a_self_hosted_runner_only_through_the_gated_command():
    """pull_request and workflow_run never run on self-hosted machines; the one job that does is
    started by a comment (the default branch's file), after the gate."""
    for name in ALL:
        wf = load(name)
        for job_id, job in wf["jobs"].items():
            if not self_hosted(job):
                continue
            assert set(triggers(wf)) <= {"issue_comment", "schedule", "workflow_dispatch"}, name
            if "issue_comment" in triggers(wf):
                assert (name, job_id, job["needs"]) == ("spyre-bench-command.yml", "bench", "gate")
                assert job["runs-on"]["group"] == "spyre-bench-pr"


def test_the_docs_restrict_the_runner_groups_to_named_workflows_on_the_default_branch():
    text = " ".join((ROOT / "docs" / "adopting.md").read_text().split())
    assert "## Fork safety" in (ROOT / "docs" / "adopting.md").read_text()
    for group, workflow in (("spyre-bench-pr", "torch-spyre/spyre-inference/.github/workflows/"
                                               "spyre-bench-command.yml@refs/heads/main"),
                            ("nightly", "torch-spyre/spyre-bench/.github/workflows/"
                                        "nightly.yml@refs/heads/main")):
        assert group in text and f"`{workflow}`" in text
    assert "Selected workflows" in text and "Require approval for all outside collaborators" in text


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


def test_nightly_fans_out_over_shards_and_only_checked_data_reaches_the_writer():
    """Each machine's commits are split over a matrix of shards; the shards' artifacts (from jobs
    that ran spyre-inference's code) are read only by the merge job, read-only, on a hosted
    runner, with spyre-bench's own code; the job that writes takes the merge job's artifact."""
    jobs = load("nightly.yml")["jobs"]
    measure, merge, record = jobs["measure"], jobs["merge"], jobs["record"]
    assert measure["needs"] == "plan" and not writes(jobs["plan"], load("nightly.yml"))
    assert measure["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    step = next(s for s in measure["steps"] if "spyre-bench nightly" in s.get("run", ""))
    assert '--shard "$SHARD"' in step["run"]
    assert step["env"]["SHARD"] == "${{ matrix.shard }}/${{ needs.plan.outputs.count }}"
    uploads = [s["with"]["name"] for s in measure["steps"] if "upload-artifact" in s.get("uses", "")]
    assert uploads == ["results-${{ matrix.machine }}-${{ matrix.shard }}"]
    assert merge["permissions"] == {"contents": "read"} and merge["needs"] == "measure"
    assert "self-hosted" not in str(merge["runs-on"])
    assert [c.get("repository") for c in checkouts(merge)] == [BENCH_REPO]
    assert "spyre-bench\" merge --results-dir merged" in " ".join(
        s.get("run", "") for s in merge["steps"])
    downloads = [s["with"] for s in record["steps"] if "download-artifact" in s.get("uses", "")]
    assert downloads == [{"name": "merged-results", "path": "incoming"}]
    assert record["needs"] == "merge" and "needs.merge.outputs.merged == 'true'" in record["if"]


# -- the pin: one commit of main for both halves, and it has what the workflows call -----------

SHA = re.compile(r"[0-9a-f]{40}")
PINNED = ["pr-bench.yml", "pr-comment.yml", "spyre-bench-command.yml"]
# How a run: step calls spyre-bench: the installed script, or the module from the pinned checkout.
CALL = re.compile(r"(?:bin/spyre-bench\"?|^[ \t]*spyre-bench|-m harness)[ \t]+([a-z][a-z-]*)", re.M)
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def git(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def the_pin() -> str:
    refs = {load(n)["env"]["SPYRE_BENCH_REF"] for n in PINNED}
    assert len(refs) == 1, f"the workflows pin different spyre-bench commits: {refs}"
    return refs.pop()


#: Flags spelled from a workflow variable -> every value the workflow accepts for it.
VARIABLE_FLAGS = {"--$SPYRE_BENCH_KERNELS": ("--timings", "--oracle")}


def calls(script: str) -> list[tuple[str, set[str]]]:
    """(command, flags) of every spyre-bench call in a run: script; flags kept in a bash array
    (``source=(--comparison-json ...)``, expanded as ``"${source[@]}"``) count where expanded."""
    text = script.replace("\\\n", " ")
    for spelled, values in VARIABLE_FLAGS.items():
        text = text.replace(spelled, " ".join(values))
    arrays: dict[str, set[str]] = {}
    for name, body in re.findall(r"(\w+)\+?=\(([^)]*)\)", text):
        arrays.setdefault(name, set()).update(FLAG.findall(body))
    out = []
    for m in CALL.finditer(text):
        rest = text[m.end():].split("\n", 1)[0]
        flags = set(FLAG.findall(rest))
        for name in re.findall(r"\$\{(\w+)\[@\]\}", rest):
            flags |= arrays.get(name, set())
        out.append((m.group(1), flags))
    return out


def workflow_calls(names=PINNED) -> dict[str, set[str]]:
    wanted: dict[str, set[str]] = {}
    for name in names:
        for _job, _j, step in steps(load(name)):
            for command, flags in calls(step.get("run", "")):
                wanted.setdefault(command, set()).update(flags)
    return wanted


def workflow_files(names=PINNED) -> set[str]:
    """Files of the spyre-bench checkout that run: steps read (``spyre-bench/<path>``)."""
    found = set()
    for name in names:
        for _job, _j, step in steps(load(name)):
            found |= set(re.findall(r"(?<![\w/.-])spyre-bench/([\w./-]+)", step.get("run", "")))
    return found


def cli_at(ref: str, dest: Path) -> dict[str, set[str]]:
    """Each spyre-bench command of commit ``ref`` -> its flags, from its own ``--help``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(dest), "COLUMNS": "200"}

    def help_of(*args):
        return subprocess.run([sys.executable, "-m", "harness", *args, "--help"], cwd=dest,
                              env=env, capture_output=True, text=True)

    top = help_of()
    assert top.returncode == 0, top.stderr
    commands = re.search(r"\{([a-z,-]+)\}", top.stdout)
    names = commands.group(1).split(",") if commands else re.findall(
        r"^    ([a-z][a-z-]+)\s", top.stdout.split("commands:", 1)[1], re.M)
    return {name: set(FLAG.findall(help_of(name).stdout)) for name in names}


def missing_at(ref: str, dest: Path, names=PINNED) -> list[str]:
    """What the workflows call or read that commit ``ref`` of spyre-bench lacks."""
    cli = cli_at(ref, dest)
    out = []
    for command, flags in sorted(workflow_calls(names).items()):
        if command not in cli:
            out.append(f"spyre-bench {command}")
            continue
        out += [f"spyre-bench {command} {flag}" for flag in sorted(flags - cli[command])]
    out += [f"spyre-bench/{path}" for path in sorted(workflow_files(names))
            if git("cat-file", "-e", f"{ref}:{path}").returncode]
    return out


def test_the_workflows_call_spyre_bench_as_this_test_reads_them():
    wanted = workflow_calls()
    assert wanted["compare"] >= {"--base", "--head", "--tier", "--json", "--expected", "--timings",
                                 "--oracle", "--env", "--write-expected"}
    assert wanted["comment"] >= {"--comparison-json", "--compare-error", "--body-file", "--post",
                                 "--expect-head-sha",
                                 "--expect-head-repo", "--expect-head-branch", "--key"}
    assert workflow_files() >= {"requirements/post.txt", "requirements/constraints.txt"}


def test_both_halves_pin_the_same_commit_of_main():
    pin = the_pin()
    assert SHA.fullmatch(pin), pin
    assert PINNED == sorted(n for n in ALL if "SPYRE_BENCH_REF" in load(n).get("env", {}))
    for name in PINNED:   # every checkout of spyre-bench is at the pin
        for _job, job, _s in steps(load(name)):
            for c in checkouts(job):
                if c.get("repository") == BENCH_REPO:
                    assert c["ref"] == "${{ env.SPYRE_BENCH_REF }}", name
    if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone: the pinned commit may not be in it (fetch-depth: 0)")
    assert git("cat-file", "-e", f"{pin}^{{commit}}").returncode == 0, f"{pin} is not a commit here"
    assert git("merge-base", "--is-ancestor", pin, "HEAD").returncode == 0, \
        f"{pin} is not in this branch's history: pin a commit of main (scripts/pin-workflows)"
    check = subprocess.run([str(ROOT / "scripts" / "pin-workflows"), "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_pinned_commit_has_every_command_flag_and_file_the_workflows_use(tmp_path):
    pin = the_pin()
    if git("cat-file", "-e", f"{pin}^{{commit}}").returncode:
        pytest.skip(f"{pin} is not in this clone (shallow?)")
    assert missing_at(pin, tmp_path / "pinned") == []


def test_the_check_catches_a_pin_that_lacks_what_is_called(tmp_path):
    """The workflows' old pin, 21a10f4, predates the comparison document: the check says so."""
    old = "21a10f4892c279ee08134440b914a2c6423846da"
    if git("cat-file", "-e", f"{old}^{{commit}}").returncode:
        pytest.skip("an old commit not in this clone")
    missing = missing_at(old, tmp_path / "old")
    assert "spyre-bench comment --comparison-json" in missing
    assert "spyre-bench comment --expect-head-repo" in missing


def test_pin_workflows_moves_every_pin_and_refuses_a_commit_off_main(tmp_path):
    folder = tmp_path / "workflows"
    folder.mkdir()
    for name in PINNED + ["nightly.yml"]:
        (folder / name).write_text((WORKFLOWS / name).read_text())
    script = str(ROOT / "scripts" / "pin-workflows")
    target = git("rev-parse", "HEAD~1").stdout.strip()
    proc = subprocess.run([script, "--workflows", str(folder), "HEAD~1"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    for name in PINNED:
        text, before = (folder / name).read_text(), (WORKFLOWS / name).read_text()
        assert yaml.safe_load(text)["env"]["SPYRE_BENCH_REF"] == target
        # only the pin line changed
        assert text.replace(target, the_pin()) == before
    assert (folder / "nightly.yml").read_text() == (WORKFLOWS / "nightly.yml").read_text()
    check = subprocess.run([script, "--workflows", str(folder), "--check"], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr
    # a commit that is not on main is refused, and nothing changes
    off = subprocess.run(["git", "commit-tree", "-m", "off main", "HEAD^{tree}"], cwd=ROOT,
                         capture_output=True, text=True).stdout.strip()
    proc = subprocess.run([script, "--workflows", str(folder), off], capture_output=True, text=True)
    assert proc.returncode != 0 and "is not on main" in proc.stderr
    assert yaml.safe_load((folder / "pr-comment.yml").read_text())["env"]["SPYRE_BENCH_REF"] == target
    (folder / "pr-bench.yml").write_text((folder / "pr-bench.yml").read_text().replace(target, "main"))
    check = subprocess.run([script, "--workflows", str(folder), "--check"], capture_output=True,
                           text=True)
    assert check.returncode == 1 and "disagree" in check.stderr
