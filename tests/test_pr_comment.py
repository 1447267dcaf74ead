"""The PR comment for the generated repo's pre-#810 -> #810 commits, pinned as a golden file.

Regenerate after an intended change with ``SPYRE_BENCH_UPDATE_GOLDEN=1 pytest tests/test_pr_comment.py``
and review the diff like code.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from harness.analyze.compare import compare_subjects
from harness.matrix import tier_cases
from harness.publish.body import GITHUB_BODY_LIMIT, MARKER
from harness.report.markdown import render
from harness.subjects import resolve_subject
from harness.workloads import specs

GOLDEN = Path(__file__).parent / "golden" / "pr810-comment.md"


@pytest.fixture(scope="module")
def comment(spyre_repo):
    comparison = compare_subjects(resolve_subject(spyre_repo.spec("pre-810")),
                                  resolve_subject(spyre_repo.spec("810-topup")),
                                  tier_cases("quick"), specs())
    return render(comparison).replace(str(spyre_repo.path), "<fixture>")


def test_comment_matches_the_golden_file(comment):
    if os.environ.get("SPYRE_BENCH_UPDATE_GOLDEN"):
        GOLDEN.write_text(comment)
    assert comment == GOLDEN.read_text(), "comment changed: see the module docstring"


def test_comment_says_what_the_review_found(comment):
    assert comment.startswith(MARKER + "\n") and len(comment) < GITHUB_BODY_LIMIT
    # point 1: block_size 192 ladder changes, by default
    for change in ("[1,2] → [2]", "[1,2,4,8,11] → [2,3,6,11]",
                   "[1,2,4,8,16,32,64,128,171] → [2,3,6,11,22,43,86,171]"):
        assert re.search(re.escape(change) + r" \| bs 192, mml \d+", comment), change
    # point 2: the 4 -> 128 iterations case under the kv override
    assert re.search(r"iters/layer \| bs 64, mml 2048, mns 32, env kv\\-above\\-limit, "
                     r"workload four\\-3\\-block\\-decodes \| 4 → 128", comment)
    # point 5: zero fewer compiles at power-of-two block sizes, by default (env batched)
    row = next(line for line in comment.splitlines() if line.startswith("| env batched |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert all("(0 fewer)" in cells[i] for i in (1, 2, 4)), row     # bs 64, 128, 256
    assert "fewer)" in cells[3] and "(0 fewer)" not in cells[3]    # bs 192


def test_untrusted_text_is_escaped(spyre_repo, tmp_path):
    """A subject named like an attack renders inert: no mention, no HTML, no table break."""
    repo = tmp_path / "repo <b>x</b> | y"
    subprocess.run(["git", "clone", "-q", str(spyre_repo.path), str(repo)], check=True)
    tag = "@org/team<img_src=x>|#12"
    subprocess.run(["git", "-C", str(repo), "tag", tag, "pre-810"], check=True)
    comparison = compare_subjects(resolve_subject(f"git:{repo}@{tag}"),
                                  resolve_subject(f"git:{repo}@810-clamp"),
                                  tier_cases("quick")[:1], specs(["bimodal"]))
    html = MarkdownIt("commonmark").enable("table").render(render(comparison))
    assert "<img" not in html and "<b>" not in html            # shown as text, never as HTML
    outside_code = re.sub(r"<code>.*?</code>", "", html, flags=re.S)
    assert "@org" not in outside_code and "#12" not in outside_code   # no mention, no reference
    subject_row = re.search(r"<tr>\s*<td>subject</td>(.*?)</tr>", html, flags=re.S).group(1)
    assert subject_row.count("<td>") == 2                       # the pipes did not split cells


def test_compare_cli_writes_the_markdown_and_exits_1_on_exact_changes(spyre_repo, tmp_path):
    out = tmp_path / "comment.md"
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", "--base",
                           spyre_repo.spec("pre-810"), "--head", spyre_repo.spec("810-topup"),
                           "--markdown", str(out)], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    written = out.read_text().replace(str(spyre_repo.path), "<fixture>")
    # the CLI names the harness commit in the footer; the golden file has none
    assert re.sub(r"spyre-bench (\S+) \(`[0-9a-f]{12}`\)", r"spyre-bench \1", written) \
        == GOLDEN.read_text()
    same = subprocess.run([sys.executable, "-m", "harness", "compare", "--base",
                           spyre_repo.spec("810-clamp"), "--head", spyre_repo.spec("810-clamp")],
                          capture_output=True, text=True)
    assert same.returncode == 0 and "exact figures identical" in same.stdout
