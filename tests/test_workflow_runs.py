"""The PR workflows run as written, end to end: a comment is posted for every kind of PR.

Each scenario runs ``pr-bench.yml``'s job (the PR's code, read-only) and then ``pr-comment.yml``'s
(the poster, triggered by its ``workflow_run``) step by step with tests/actions_runner.py: every
``run:`` step as written, ``uses:`` steps by their documented effect (checkout: a local clone at
the ref; artifacts: a folder). spyre-bench is checked out at the workflows' pinned
``SPYRE_BENCH_REF`` (from this repository), spyre-inference is the fixture repository
(tests/fixtures/spyre_repo.py) and GitHub is the loopback fake (tests/fixtures/fake_github.py).
The adopters' knobs are set for speed: the tiny tier, kernels checked by the oracle, not timed.

Scenarios: the review's PR (pre-810 -> 810-topup: the ladder at block_size 192), the same PR
compared under an env override, a head whose bucketer fails to import, an A/A PR (a docs-only
commit), and ``/spyre-bench <sha>`` (spyre-bench-command.yml: gate, bench, post) on the head that
fails to import.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.report.marker import MARKER, marker
from tests.actions_runner import Runner
from tests.fixtures.fake_github import FakeGitHub
from tests.fixtures.spyre_repo import BROKEN, BROKEN_MISSING

#: Long end-to-end runs: `make test-extended` (CI runs it after `make test`).
pytestmark = pytest.mark.extended

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
REPO = "torch-spyre/spyre-inference"
FORK = "contributor/spyre-inference"
TOKEN = "ghs_actions_TOKEN_runner"
FAST = {"SPYRE_BENCH_TIER": "tiny", "SPYRE_BENCH_KERNELS": "oracle"}


def bench_repository() -> str:
    return yaml.safe_load((WORKFLOWS / "pr-comment.yml").read_text())["env"]["SPYRE_BENCH_REPOSITORY"]


def pinned() -> str:
    return yaml.safe_load((WORKFLOWS / "pr-comment.yml").read_text())["env"]["SPYRE_BENCH_REF"]


@pytest.fixture(scope="module")
def actions(tmp_path_factory, spyre_repo):
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{pinned()}^{{commit}}"],
                      capture_output=True).returncode:
        pytest.skip(f"the pinned spyre-bench {pinned()[:12]} is not in this clone (shallow?)")
    with FakeGitHub() as gh:
        gh.add_account(TOKEN, "github-actions[bot]", type="Bot", installation=True)
        runner = Runner(tmp_path_factory.mktemp("actions"),
                        {REPO: spyre_repo.path, bench_repository(): ROOT},
                        env={"GITHUB_API_URL": gh.url})
        yield runner, gh


_runs = iter(range(9000, 10000))


def pull_request(actions, repo, number: int, base: str, head: str, env: dict | None = None):
    """pr-bench.yml on a fork PR (base -> head), then pr-comment.yml on its completion."""
    runner, gh = actions
    base, head = repo.rev(base), repo.rev(head)
    gh.add_pull(REPO, number, head_sha=head, head_repo=FORK, head_ref="feature")
    run_id = str(next(_runs))
    event = {"repository": {"name": "spyre-inference", "full_name": REPO},
             "pull_request": {"number": number, "head": {"sha": head, "ref": "feature",
                                                         "repo": {"full_name": FORK}},
                              "base": {"sha": base, "ref": "main"}}}
    bench = runner.run_job(WORKFLOWS / "pr-bench.yml", "bench",
                           {"repository": REPO, "event_name": "pull_request", "event": event,
                            "sha": head, "token": "ghs_read_only", "run_id": run_id},
                           run_id=run_id, env_overrides={**FAST, **(env or {})})
    url = f"https://github.com/{REPO}/actions/runs/{run_id}"
    trigger = {"repository": {"name": "spyre-inference", "full_name": REPO},
               "workflow_run": {"id": run_id, "event": "pull_request",
                                "conclusion": bench["result"], "head_sha": head,
                                "head_branch": "feature", "html_url": url,
                                "head_repository": {"full_name": FORK}}}
    post_id = str(next(_runs))
    post = runner.run_job(WORKFLOWS / "pr-comment.yml", "post",
                          {"repository": REPO, "event_name": "workflow_run", "event": trigger,
                           "token": TOKEN, "run_id": post_id}, run_id=post_id)
    assert post["result"] == "success", runner.transcript()[-6000:]
    comments = gh.comments_on(REPO, number)
    assert len(comments) == 1, runner.transcript()[-6000:]
    artifact = runner.artifacts[(run_id, "spyre-bench-comparison")]
    return bench, comments[0]["body"], artifact


def comparison(artifact: Path) -> dict:
    return json.loads((artifact / "comparison.json").read_text())


def test_the_reviews_pr_the_ladder_at_block_size_192(actions, spyre_repo):
    bench, body, artifact = pull_request(actions, spyre_repo, 810, "pre-810", "810-topup")
    assert bench["result"] == "failure"                       # unacknowledged exact changes
    assert bench["steps"]["compare"]["outputs"]["exit-code"] == "1"
    assert body.startswith(f"{MARKER}\n### spyre-bench: 🔴")
    assert "at block\\_size 192" in body and "oracle\\: 4/4 probes match" in body
    assert sorted(p.name for p in artifact.iterdir()) == ["comparison.json",
                                                          "expected-changes.jsonl", "pr-number"]
    # it ends with the lines that acknowledge these changes: those of the run's expected file
    assert body.rstrip().endswith("```\n\n</details>")
    listed = body.rpartition("```jsonl\n")[2].split("\n```")[0].splitlines()
    written = (artifact / "expected-changes.jsonl").read_text().splitlines()
    assert listed == [x for x in written if not x.startswith("#")] and len(listed) > 10


def test_a_pr_compared_under_an_env_override(actions, spyre_repo):
    env = {"SPYRE_BENCH_ENV": "SPYRE_ATTN_KV_BUCKETS=128,8192 SPYRE_BATCHED_DECODE=1"}
    bench, body, artifact = pull_request(actions, spyre_repo, 811, "pre-810", "810-topup", env)
    assert list(comparison(artifact)["envs"]) == ["kv=128,8192+batched=1"]
    assert bench["result"] == "failure" and body.startswith(f"{MARKER}\n### spyre-bench: 🔴")
    assert "SPYRE\\_ATTN\\_KV\\_BUCKETS=128,8192" in body


def test_a_head_that_fails_to_import(actions, spyre_repo):
    bench, body, artifact = pull_request(actions, spyre_repo, 812, "gen4", BROKEN)
    assert bench["result"] == "failure" and bench["steps"]["compare"]["outputs"]["exit-code"] == "2"
    assert not (artifact / "comparison.json").exists()
    assert body.startswith(f"{MARKER}\n### spyre-bench: ❌ the head failed to import")
    lines = body.splitlines()
    assert "ModuleNotFoundError" in lines[5] and BROKEN_MISSING.replace("_", "\\_").replace(
        ".", "\\.") in lines[5]


def test_an_a_a_pr(actions, spyre_repo):
    docs = spyre_repo.add_commit({"docs/notes.md": "docs only\n"}, "docs only", parent="810-clamp")
    bench, body, artifact = pull_request(actions, spyre_repo, 813, "810-clamp", docs)
    assert bench["result"] == "success"
    assert comparison(artifact)["exact_changed"] == [] and comparison(artifact)["ladders"] == []
    assert body.startswith(f"{MARKER}\n### spyre-bench: ⚪ exact figures unchanged")
    assert "🟢" not in body and len(body.splitlines()) <= 12


GH_STUB = """#!/bin/bash
case "$*" in
  *collaborators/*/permission*) printf '%s\\n' write ;;
  *reactions*) printf '%s\\n' "$*" >> "$RUNNER_TEMP/../../reactions" ;;
  *pulls/*) printf '%s %s\\n' "$STUB_BASE" "$STUB_HEAD" ;;
  *) exit 9 ;;
esac
"""


def test_the_hardware_command_on_a_head_that_fails_to_import(actions, spyre_repo):
    """/spyre-bench <sha>: the gate pins the head, the bench job (the card's) fails to load it,
    the post job says so in the hardware comment."""
    runner, gh = actions
    base, head = spyre_repo.rev("gen4"), spyre_repo.rev(BROKEN)
    gh.add_pull(REPO, 814, head_sha=head, head_repo=FORK, head_ref="feature")
    (runner.tools / "gh").write_text(GH_STUB)
    (runner.tools / "gh").chmod(0o755)
    runner.env.update(STUB_BASE=base, STUB_HEAD=head)
    workflow, run_id = WORKFLOWS / "spyre-bench-command.yml", str(next(_runs))
    event = {"repository": {"name": "spyre-inference", "full_name": REPO},
             "issue": {"number": 814, "pull_request": {"url": "..."}},
             "comment": {"id": 5, "body": f"/spyre-bench {head}", "user": {"login": "maintainer"},
                         "author_association": "MEMBER"}}
    github = {"repository": REPO, "event_name": "issue_comment", "event": event, "token": TOKEN,
              "run_id": run_id, "server_url": "https://github.com"}
    try:
        gate = runner.run_job(workflow, "gate", github, run_id=run_id)
        assert gate["result"] == "success", runner.transcript()[-4000:]
        assert gate["outputs"] == {"pr": "814", "base-sha": base, "head-sha": head}
        needs = {"gate": {"result": "success", "outputs": gate["outputs"]}}
        bench = runner.run_job(workflow, "bench", github, run_id=run_id, needs=needs)
        needs["bench"] = {"result": bench["result"], "outputs": {}}
        post = runner.run_job(workflow, "post", github, run_id=run_id, needs=needs)
    finally:
        (runner.tools / "gh").unlink()
    assert post["result"] == "success", runner.transcript()[-6000:]
    [comment] = gh.comments_on(REPO, 814)
    assert comment["body"].startswith(f"{marker('hardware')}\n### spyre-bench: ❌ the head failed "
                                      "to import")
