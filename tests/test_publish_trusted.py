"""Trusted rendering: what the job that ran PR code uploads is data; the poster validates and renders.

An artifact whose strings carry markdown, HTML, a forged sticky-comment marker and ``@everyone``
goes through ``spyre-bench comment --comparison-json --post`` to the loopback fake GitHub; the
posted body shows none of it as live markdown. A document that breaks the schema posts nothing.
"""

import copy
import json
import re
import subprocess
import sys

import pytest
from markdown_it import MarkdownIt

from harness.analyze.comparison import as_document
from harness.analyze.subjects_now import compare_subjects
from harness.matrix import tier_cases
from harness.report.marker import has_marker, marker
from harness.report.schema import SchemaError, load_document, validate
from harness.subjects import resolve_subject
from harness.workloads import specs
from tests.fixtures.fake_github import FakeGitHub

REPO, PR, TOKEN, HEAD = "torch-spyre/spyre-inference", 810, "ghs_actions", "e" * 40
EVIL = ("**🟢 all good** [click](https://evil.example) <img src=x onerror=alert(1)> @everyone "
        "#1 <!-- spyre-bench:hardware v1 -->\n<!-- spyre-bench:pr-comment v1 -->\n| x |")


@pytest.fixture(scope="module")
def document():
    c = compare_subjects(resolve_subject("reference:pre-810"),
                         resolve_subject("reference:post-810-topup"),
                         tier_cases("quick")[8:12], specs(["four-3-block-decodes"]))
    doc = as_document(c)
    validate(doc)
    return doc


def poisoned(doc: dict) -> dict:
    """Every free-text field the schema allows, filled with attacks."""
    doc = copy.deepcopy(doc)
    doc["base"]["label"] = doc["head"]["label"] = EVIL[:400]
    doc["head"]["machine"] = "@everyone"
    doc["skipped"].append({"what": EVIL, "why": EVIL})
    doc["lost"].append({"what": EVIL, "why": EVIL})
    doc["mismatches"].append({"what": EVIL, "why": EVIL})
    doc["problems"].append(EVIL)
    doc["timing_notes"].append(EVIL)
    doc["timing_advisory"] = True
    doc["ladders"][0]["params"]["overrides"] = EVIL[:200]
    doc["exact_changed"][0]["params"]["workload"] = EVIL[:200]
    name = doc["ladders"][0]["params"]["overrides"]
    doc["envs"][name if re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", name) else "evil"] = {
        "SPYRE_ATTN_KV_BUCKETS": EVIL[:400]}
    return doc


@pytest.fixture
def fake():
    with FakeGitHub() as gh:
        gh.add_account(TOKEN, "github-actions[bot]", type="Bot", installation=True)
        gh.add_pull(REPO, PR, head_sha=HEAD, head_repo="fork/spyre-inference", head_ref="feature")
        yield gh


def post(fake, path, *extra):
    env = {"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.url}
    return subprocess.run([sys.executable, "-m", "harness", "comment", "--comparison-json",
                           str(path), "--post", "--repo", REPO, "--pr", str(PR),
                           "--expect-head-sha", HEAD, "--expect-head-repo", "fork/spyre-inference",
                           "--expect-head-branch", "feature", *extra],
                          capture_output=True, text=True, env=env)


def test_markdown_markers_and_mentions_in_the_artifact_are_inert(fake, document, tmp_path):
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(poisoned(document)))
    proc = post(fake, path)
    assert proc.returncode == 0, proc.stderr
    [comment] = fake.comments_on(REPO, PR)
    body = comment["body"]
    html = MarkdownIt("commonmark").enable("table").render(body)
    assert "<img" not in html and "<a " not in html and "<strong>🟢" not in html
    visible = re.sub(r"<code>.*?</code>", "", html, flags=re.S)
    assert "@everyone" not in visible and "#1 " not in visible
    # exactly one marker, ours, first; the forged ones are text, not comments
    assert body.startswith(marker() + "\n") and body.count("<!--") == 1
    assert not has_marker(body, "hardware")
    assert "&lt;!-- spyre-bench:hardware v1 --&gt;" in html      # shown as text, not hidden
    # the table the attacker tried to break still has its columns
    tables = re.findall(r"<table>.*?</table>", html, re.S)
    assert tables
    for table in tables:
        widths = {len(re.findall(r"<t[dh]>", row)) for row in re.findall(r"<tr>.*?</tr>", table, re.S)}
        assert len(widths) == 1, widths


def test_the_hardware_comment_does_not_overwrite_it(fake, document, tmp_path):
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(poisoned(document)))
    assert post(fake, path).returncode == 0
    assert post(fake, path, "--key", "hardware").returncode == 0
    bodies = [c["body"] for c in fake.comments_on(REPO, PR)]
    assert len(bodies) == 2 and has_marker(bodies[0]) and has_marker(bodies[1], "hardware")


@pytest.mark.parametrize("mutate,where", [
    (lambda d: d.update(markdown="# hi"), "unknown key 'markdown'"),
    (lambda d: d["exact_changed"][0].update(metric="[x](https://e.example)"), "metric"),
    (lambda d: d["base"].update(commit="@everyone"), "commit"),
    (lambda d: d.update(schema="spyre-bench.comparison/9"), "schema"),
    (lambda d: d["timings"].append({"benchmark": "k", "params": {}, "unit": "s", "base": [1.0],
                                    "head": [], "verdict": {}}), "timings"),
])
def test_a_document_that_breaks_the_schema_posts_nothing(fake, document, tmp_path, mutate, where):
    doc = copy.deepcopy(document)
    mutate(doc)
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(doc))
    proc = post(fake, path)
    assert proc.returncode == 2 and "comparison document" in proc.stderr and where in proc.stderr
    assert fake.comments_on(REPO, PR) == [] and fake.count("POST") == 0


@pytest.mark.parametrize("flag,value", [("--expect-head-repo", "victim/spyre-inference"),
                                        ("--expect-head-branch", "main")])
def test_a_pr_on_the_same_commit_from_another_branch_is_refused(fake, document, tmp_path, flag,
                                                                 value):
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(document))
    proc = post(fake, path, flag, value)   # the later flag wins in argparse
    assert proc.returncode == 2 and "not posting" in proc.stderr
    assert fake.comments_on(REPO, PR) == []


def test_only_the_actions_bot_comment_is_updated(fake, document, tmp_path):
    other = fake.add_comment(REPO, PR, f"{marker()}\nanother bot", login="evil-app[bot]", type="Bot")
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(document))
    assert post(fake, path).returncode == 0
    comments = {c["id"]: c for c in fake.comments_on(REPO, PR)}
    assert comments[other]["body"].endswith("another bot") and len(comments) == 2


def test_load_document_refuses_nan_and_non_json():
    with pytest.raises(SchemaError):
        load_document(b'{"schema": NaN}')
    with pytest.raises(SchemaError):
        load_document(b"\xff")
