"""The PR comment, pinned as golden files: #810, A/A, a wrong kernel, a lost bucketer, a planted 2×
slowdown with and without timings.

Regenerate after an intended change with ``SPYRE_BENCH_UPDATE_GOLDEN=1 pytest tests/test_pr_comment.py``
and review the diff like code.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from markdown_it import MarkdownIt

from harness.analyze.comparison import add_timings, as_document
from harness.analyze.subjects_now import add_kernel_run, compare_subjects
from harness.matrix import TIERS, tier_cases
from harness.measure.interleaved import check_kernels
from harness.report.fit import GITHUB_BODY_LIMIT
from harness.report.markdown import render
from harness.report.markdown_escape import escape
from harness.report.schema import validate
from harness.report.verdict import FAIL_ON, exit_code
from harness.subjects import resolve_subject
from harness.workloads import specs
from tests.fixtures.spyre_repo import BACKEND, plant_kv_ladder, plant_slowdown

GOLDEN = Path(__file__).parent / "golden"
UPDATE = bool(os.environ.get("SPYRE_BENCH_UPDATE_GOLDEN"))
WRONG_SCALE = ("* scale  # [B_s, KV, QPKV, bs]", "* (scale * 1.5)  # [B_s, KV, QPKV, bs]")


def plant_wrong_kernel(repo, parent="810-clamp") -> str:
    """A commit whose batched decode kernel scales the logits by 1.5: wrong output, same figures."""
    return repo.edit(BACKEND, *WRONG_SCALE, parent=parent, message="decode kernel: wrong scale")


def document(repo, base, head, cases=None, workloads=None, oracle=False) -> dict:
    b, h = resolve_subject(repo.spec(base)), resolve_subject(repo.spec(head))
    # what the PR workflow runs: `compare --tier quick` (the tier's cases and steps)
    c = compare_subjects(b, h, cases or tier_cases("quick"),
                         specs(workloads, steps=TIERS["quick"].steps))
    if oracle:
        add_kernel_run(c, check_kernels(b, h, device="cpu"))
    doc = as_document(c)
    validate(doc)
    return doc


def pinned(name: str, doc: dict, repo, **names) -> str:
    """The rendered comment, equal to its golden file; ``names``: commits added by this test.
    Commits appear by name (``<810-topup>``), so editing a fixture file changes no golden file
    unless the comment itself changes."""
    text = render(doc).replace(str(repo.path), "<fixture>").replace(escape(str(repo.path)),
                                                                    "<fixture>")
    for label, rev in {**repo.commits, **names}.items():
        text = text.replace(repo.rev(rev), f"<{label}>").replace(repo.rev(rev)[:12], f"<{label}>")
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed: see the module docstring"
    return text


def first_screen(text: str, lines: int = 16) -> str:
    return "\n".join(text.splitlines()[:lines])


def plain(text: str) -> str:
    """The rendered comment's text (what a reader sees), for assertions."""
    html = MarkdownIt("commonmark").enable("table").render(text)
    return re.sub(r"<[^>]+>", "", html).replace("&amp;", "&").replace("\u200d", "")


# -- #810 -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pr810(spyre_repo):
    doc = document(spyre_repo, "pre-810", "810-topup", oracle=True)
    return doc, pinned("pr810-comment.md", doc, spyre_repo)


def test_810_first_screen_carries_the_reviews_five_findings(pr810):
    doc, text = pr810
    top = plain(first_screen(text))
    assert len(text) < GITHUB_BODY_LIMIT and exit_code(doc, set(FAIL_ON)) == 1
    # 1: block_size 192 moves the default ladder: fewer graphs bought with more padding for
    # short decodes (a trade-off, said as one), and where both ladders sit on the head's frontier
    line = next(x for x in top.splitlines() if x.startswith("⚖️ trade-off in the default config"))
    assert "block_size 192" in line and "−4 compiled graphs for −31.2 % to +100 % iterations" in line
    assert ("on the head's frontier at max_model_len 2048 (its code, every mix compared): the "
            "base's [1,2,4,8,11] (36 graphs) pads 0.194 % more than [2,3,8,11] (30 graphs)") in line
    assert "the head's [2,3,6,11] (30 graphs) pads 1.02 % more than [2,3,8,11]" in line
    for change in ("max_model_len 256 [1,2] → [2]", "max_model_len 2048 [1,2,4,8,11] → [2,3,6,11]",
                   "max_model_len 32768 [1,2,4,8,16,32,64,128,171] → [2,3,6,11,22,43,86,171]"):
        assert change in top, change
    # 2: the override above max_model_len, spelled out, with its factor
    line = next(x for x in top.splitlines() if "SPYRE_ATTN_KV_BUCKETS=128,8192" in x)
    assert "block_size 64, max_model_len 2048 [1,2,4,8,16,32] → [2,128]" in line
    assert "iters/layer 4 → 128, 32×" in line and "× 16 configs" in line
    # 3: host-to-device bytes scale with it (the mask tensor)
    assert re.search(r"mask/step [\d.]+ KiB → [\d.]+ MiB, 32×", line)
    # 4: correctness preserved: the oracle ran and every probe matched
    assert "oracle: 4/4 probes match" in top
    # 5: zero fewer compiles by default; fewer only where the ladder shortens
    assert "default config at block_size 64, 128, 256" in top and "0 fewer compiles" in top
    sparse = next(x for x in top.splitlines() if "SPYRE_ATTN_KV_BUCKETS=512,1024,2048" in x)
    assert "block_size 64, max_model_len 2048 6 → 3 (3 fewer)" in sparse
    # findings first, ranked: default regression before the override-only ones
    assert top.index("default config (no env override)") < top.index("SPYRE_ATTN_KV_BUCKETS")
    # no rounding hides a change
    assert not re.search(r"(\d[\d.,]* [KM]iB) → \1\b", text)
    # it ends with how to acknowledge the changes: too many to list, the command that writes them
    intro, blank, fence, command, end = text.rstrip().splitlines()[-5:]
    assert intro.startswith("**To acknowledge these 970 changes**") and (blank, fence, end) == (
        "", "```sh", "```")
    assert command.endswith(" --tier quick --write-expected .github/spyre-bench-expected-changes.jsonl")
    assert len(first_screen(text, 40).split("<details>")[0].splitlines()) <= 16   # one screen


def test_810_full_tables_are_folded_below(pr810):
    _, text = pr810
    head, _, folded = text.partition("<details>")
    assert "| --- |" not in head and text.count("<details>") >= 3


# -- A/A, wrong kernel, lost bucketer ---------------------------------------------------------

def test_a_a_comparison_is_at_most_ten_lines(spyre_repo):
    doc = document(spyre_repo, "810-clamp", "810-clamp")
    text = pinned("aa-comment.md", doc, spyre_repo)
    assert len(text.strip().splitlines()) <= 10
    assert "timings not measured" in text and "🟢" not in text
    assert exit_code(doc, set(FAIL_ON)) == 0


def compare_cli(repo, base, head, *extra):
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", "--base", repo.spec(base),
                           "--head", repo.spec(head), "--block-size", "64",
                           "--max-model-len", "2048", "--json", "-", *extra],
                          capture_output=True, text=True)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None, proc


def test_wrong_kernel_is_red_x_at_the_top_and_exit_1(spyre_repo):
    wrong = plant_wrong_kernel(spyre_repo)
    code, doc, proc = compare_cli(spyre_repo, "810-clamp", wrong, "--oracle")
    assert code == 1, proc.stderr
    assert doc["mismatches"] and doc["exact_changed"] == []   # same figures, wrong output
    text = pinned("wrong-kernel-comment.md", doc, spyre_repo, wrong=wrong)
    assert text.startswith("### spyre-bench: ❌ wrong kernel")
    assert "❌ wrong kernel: probe" in plain(first_screen(text, 8)) and "🟢" not in text


def test_lost_bucketer_is_red_x_and_exit_1(spyre_repo):
    code, doc, proc = compare_cli(spyre_repo, "pre-810", "no-bucketer")
    assert code == 1, proc.stderr
    text = pinned("lost-bucketer-comment.md", doc, spyre_repo)
    assert text.startswith("### spyre-bench: ❌ lost")
    assert f"{len(doc['lost'])} not compared" in text and "🟢" not in text


BUILD_RAISES = ("        m = common_attn_metadata\n",
                "        m = common_attn_metadata\n"
                "        raise RuntimeError(\"metadata builder is broken\")\n")


def test_a_head_whose_build_raises_leads_with_that_failure_once(spyre_repo):
    """One cause, one finding: the failure where and what, the figures it made unavailable
    folded into it, not one finding per step it met."""
    broken = spyre_repo.edit(BACKEND, *BUILD_RAISES, parent="gen4", message="build raises")
    code, doc, proc = compare_cli(spyre_repo, "gen4", broken, "--block-size", "64,192",
                                  "--overrides", "batched,kv-above-limit")
    assert code == 1 and len({x["why"] for x in doc["lost"]}) > 1, proc.stderr   # per step
    text = pinned("head-fails-comment.md", doc, spyre_repo, broken=broken)
    lines = plain(text).splitlines()
    assert lines[0] == ("spyre-bench: ❌ the head failed: RuntimeError in "
                        "SpyreAttentionMetadataBuilder.build() · oracle not run, timings not "
                        "measured")
    failures = [x for x in lines if "the head failed: subject raised" in x]
    assert len(failures) == 1 and "metadata builder is broken" in failures[0]
    assert f"Unavailable because of it: {len(doc['lost'])} figures at 4 configs" in failures[0]
    assert "spyre_attn.py:" in failures[0] and "on step" not in failures[0]
    assert sum(x.startswith("lost: subject raised") for x in lines) == 1   # folded: one line


def test_the_acknowledge_lines_round_trip_through_compare_expected(spyre_repo, tmp_path, capsys):
    """The lines the comment ends with, added to the expected-changes file, make the next
    compare pass on exactly these changes; the command it gives instead writes the same lines.
    (spyre-bench's own main() in this process: the figures of these commits are memoised.)"""
    from harness.cli import main
    from harness.report import markdown
    sides = ["--base", spyre_repo.spec("pre-810"), "--head", spyre_repo.spec("810-topup"),
             "--tier", "tiny"]
    out = tmp_path / "comparison.json"
    assert main(["compare", *sides, "--json", str(out)]) == 1
    capsys.readouterr()
    assert main(["comment", "--comparison-json", str(out)]) == 0
    body = capsys.readouterr().out
    doc = json.loads(out.read_text())
    n = len(doc["exact_changed"]) + len(doc["ladders"])
    head, _, block = body.rpartition("```jsonl\n")
    assert f"**To acknowledge these {n} changes**" in head.splitlines()[-5]
    lines = block.split("\n```\n")[0].splitlines()
    assert len(lines) == n and body.rstrip().endswith("</details>")
    expected = tmp_path / "spyre-bench-expected-changes.jsonl"
    expected.write_text("\n".join(lines) + "\n")
    assert main(["compare", *sides, "--expected", str(expected), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["expected"] == {
        "file": str(expected), "acknowledged": n, "unacknowledged": 0, "stale": 0}
    # too many to list: the command, run as given, writes exactly those lines
    listed, markdown.ACK_LISTED = markdown.ACK_LISTED, 0
    try:
        command = render(doc).rstrip().splitlines()[-2]
    finally:
        markdown.ACK_LISTED = listed
    assert command.startswith("spyre-bench compare --base git:<spyre-inference>@")
    argv = command.replace("<spyre-inference>", str(spyre_repo.path)).split()[1:]
    written = tmp_path / "written.jsonl"
    argv[argv.index("--write-expected") + 1] = str(written)
    assert main([*argv, "--json", "-"]) == 1
    capsys.readouterr()
    assert [x for x in written.read_text().splitlines() if not x.startswith("#")] == lines


def test_acknowledge_lines_from_a_hostile_document_are_inert_and_still_acknowledge(tmp_path):
    """Names in the document come from where PR code ran: in the lines they are JSON escapes
    (no mention, reference, tag or fence-closing backticks), which the gate reads back as is."""
    from harness.analyze import expected
    from harness.analyze.comparison import Comparison, Side
    from harness.report.markdown import acknowledge_lines
    c = Comparison(Side("reference:a"), Side("reference:b"))
    evil = "@everyone #1 <img src=x> ``` & `x`"
    c.configs = [{"block_size": 64, "max_model_len": 2048, "max_num_seqs": 32, "overrides": evil}]
    c.add_exact("iterations_per_layer_mean", {**c.configs[0], "workload": evil}, 4, 128)
    doc = as_document(c)
    validate(doc)
    lines = acknowledge_lines(doc)
    assert len(lines) == 1 and not set("@#<>&`") & set(lines[0])
    text = render(doc)
    assert text.rstrip().endswith("```\n\n</details>") and "@everyone" not in text.split("jsonl")[-1]
    path = tmp_path / "expected.jsonl"
    path.write_text(lines[0] + "\n")
    expected.apply(doc, expected.load(path), str(path))
    assert doc["expected"]["unacknowledged"] == 0 and doc["expected"]["acknowledged"] == 1


# -- the planted 2× slowdown --------------------------------------------------------------------

def test_slowdown_without_timings_says_timings_not_measured(spyre_repo):
    slow = plant_slowdown(spyre_repo, "810-clamp")
    doc = document(spyre_repo, "810-clamp", slow, tier_cases("quick")[:4], ["bimodal"])
    text = pinned("slowdown-untimed-comment.md", doc, spyre_repo, slow=slow)
    assert "timings not measured" in first_screen(text, 4) and "🟢" not in text


def test_slowdown_with_timings_is_red_with_ratio_and_interval(spyre_repo):
    """Timing samples are seeded here (real ones: tests/test_compare_timings.py) to pin the text."""
    slow = plant_slowdown(spyre_repo, "810-clamp")
    b, h = resolve_subject(spyre_repo.spec("810-clamp")), resolve_subject(spyre_repo.spec(slow))
    c = compare_subjects(b, h, tier_cases("quick")[:4], specs(["bimodal"]))
    rng = np.random.default_rng(1)
    rows = []
    for probe, factor in (("notes-4x16", 2.0), ("small-4x8", 2.0), ("small-4x8-per-seq", 1.0)):
        base = list(rng.lognormal(np.log(1e-3), 0.05, 15))
        rows.append(("kernel.Decode.time_layer", {"probe": probe}, "seconds", base,
                     [x * factor for x in rng.lognormal(0, 0.05, 15) * 1e-3]))
    add_timings(c, rows)
    c.timings_measured, c.oracle = True, (3, 3)
    c.timing_notes.append("base and head measured interleaved on this machine")
    doc = as_document(c)
    validate(doc)
    text = pinned("slowdown-timed-comment.md", doc, spyre_repo, slow=slow)
    assert text.startswith("### spyre-bench: 🔴 2 regressions")
    assert re.search(r"🔴 timing regression: kernel\.Decode\.time_layer at probe notes-4x16 "
                     r"\(block_size 128, max_model_len 2048, step 2048,2048,2048,2048\), default "
                     r"config \(no env override\): [12]\.\d\d× \(slower; .*95% CI "
                     r"[12]\.\d\d–[12]\.\d\d×", plain(text))
    assert exit_code(doc, set(FAIL_ON)) == 1


# -- ladder changes: trade-off, regression, improvement ---------------------------------------

#: Short decodes only (at bs 64, mml 2048: 1-4 blocks), so each plant moves every cost one way.
SHORT = ("--batched", "--workload", "four-3-block-decodes", "--workload", "uniform-short")


@pytest.mark.parametrize("plant,kind,code,gate,said", [
    ("midpoints", "trade-off", 0, {"variants": 1, "regression": 0},
     "+27 compiled graphs for −25 % to −0.781 % iterations, −25 % to −0.284 % padding and "
     "−25 % to −0.286 % H2D bytes"),
    ("floor-8", "regression", 1, {"variants": 1, "regression": 1},
     "+14 compiled graphs, +100 % iterations, +100 % padding"),
    ("short-exact", "improvement", 0, {"variants": 0, "regression": 0},
     "−7 compiled graphs, −25 % to −0.781 % iterations"),
])
def test_a_ladder_change_is_said_as_a_trade_off_regression_or_improvement(
        spyre_repo, plant, kind, code, gate, said):
    """Planted default kv ladders of #810's bucketer, through ``compare`` (exit status under
    ``--fail-on regression``: a trade-off is not a regression) and the rendered comment."""
    head = plant_kv_ladder(spyre_repo, plant)
    status, doc, proc = compare_cli(spyre_repo, "810-clamp", head, *SHORT,
                                    "--fail-on", "regression")
    assert status == code, proc.stderr
    validate(doc)
    for flag, expected in gate.items():
        assert exit_code(doc, {flag}) == expected, flag
    text = plain(render(doc))
    icon = {"trade-off": "⚖️", "regression": "🔴", "improvement": "🟢"}[kind]
    first = next(x for x in text.splitlines() if x.startswith(icon))
    assert first.startswith(f"{icon} {kind} in the default config (no env override) at "
                            "block_size 64, max_model_len 2048"), first
    assert said in first, first
    assert "batched num_blocks ladder [1,2,4,8,16,32] → " in first
    assert "on the head's frontier (its code, every mix compared): the base's " \
           "[1,2,4,8,16,32] (40 graphs)" in first
    assert sum(x.startswith(("⚖️", "🔴", "🟢")) for x in text.splitlines()) == 1
    if kind == "trade-off":
        pinned("tradeoff-comment.md", doc, spyre_repo, midpoints=head)
        assert text.startswith("spyre-bench: 🟡 1 trade-off") and "🔴" not in text


# -- escaping ----------------------------------------------------------------------------------

def test_untrusted_text_is_escaped(spyre_repo, tmp_path):
    """A subject named like an attack renders inert: no mention, no HTML, no table break."""
    repo = tmp_path / "repo <b>x</b> | y"
    subprocess.run(["git", "clone", "-q", str(spyre_repo.path), str(repo)], check=True)
    tag = "@org/team<img_src=x>|#12"
    subprocess.run(["git", "-C", str(repo), "tag", tag, "pre-810"], check=True)
    comparison = compare_subjects(resolve_subject(f"git:{repo}@{tag}"),
                                  resolve_subject(f"git:{repo}@810-clamp"),
                                  tier_cases("quick")[:1], specs(["bimodal"]))
    html = MarkdownIt("commonmark").enable("table").render(render(as_document(comparison)))
    assert "<img" not in html and "<b>" not in html            # shown as text, never as HTML
    outside_code = re.sub(r"<code>.*?</code>", "", html, flags=re.S)
    assert "@org" not in outside_code and "#12" not in outside_code   # no mention, no reference
