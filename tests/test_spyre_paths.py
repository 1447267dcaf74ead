"""Every path a commit offers, as the commit decides it: its own default layout and switches
(never the harness's), when it batches (found by driving it), its jagged groups' loop counts and
warmup, the torch-spyre layout helpers its head-major mirror needs, and its own compile guard as
a second opinion on spyre-bench's late compiles. Real subprocesses on the fixture's ``today``
generation and small commits planted on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.store.history import load_history, load_identity
from tests.fixtures.spyre_repo import TODAY
from tests.fixtures.spyre_today import HEAD_MAJOR_BACKEND

BACKEND = "spyre_inference/v1/attention/backends/spyre_attn.py"
SMALL = ["--block-size", "64", "--max-model-len", "512", "--max-num-seqs", "8",
         "--max-num-batched-tokens", "256", "--num-kv-heads", "2", "--queries-per-kv", "2",
         "--head-size", "64"]
EIGHT_DECODES = ",".join(["300"] * 8)
MIXED = "300,300,300,300,200 | 1,1,1,1,100"
TOKEN_MAJOR = ["--env", "SPYRE_ATTN_KV_LAYOUT=token_major"]
#: today's record_graphs, and the same with no batched variant recorded (a warmup-coverage gap)
RECORDS_BATCHED = ("batched = (builder.attn_bucketer.batched_decode_variants()\n"
                   "                   if self._batched_decode_supported() else [])")
RECORDS_NONE = "batched = []"
WATCHED = ('compile_guard.watch(batched_decode_head_major_kernel, '
           '"batched decode kernel (head-major)")\n')


def spyre_bench(*args: str, home=None) -> tuple[subprocess.CompletedProcess, object]:
    env = {**os.environ, "COLUMNS": "200", **({"HOME": str(home)} if home else {})}
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, (json.loads(proc.stdout) if proc.stdout.strip().startswith(("[", "{")) else None)


def _figures(done, spec: str) -> dict:
    proc, rows = done
    assert proc.returncode == 0, proc.stderr
    (row,) = rows
    figures = row["subjects"][spec]
    assert "skipped" not in figures, figures
    return figures


def _step(spyre_repo, *args: str, rev: str = TODAY) -> dict:
    spec = spyre_repo.spec(rev)
    (step,) = _figures(spyre_bench("cost", "--subject", spec, *SMALL, *args, "--per-step",
                                   "--json"), spec)["per_step"]
    return step


def test_the_default_ladders_follow_the_commit_token_major_records_and_reaches_no_batched_key(
        spyre_repo):
    """today defaults to head-major with batched decode on, and batches from one decode: every
    batched key it records some batch reaches. Token-major (its knob) runs no batched kernel
    under the tiled walk, and its warmup records none (its record_graphs asks the impl)."""
    spec = spyre_repo.spec(TODAY)
    default = _figures(spyre_bench("ladders", "--subject", spec, *SMALL, "--json"), spec)
    assert default["ladders"]["batched_num_seqs"] == [1, 2, 4, 8]
    assert default["batched_variants_recorded"] == default["batched_keys_reachable"] == 16
    assert default["dead_variants"] == 0
    token = _figures(spyre_bench("ladders", "--subject", spec, *SMALL, *TOKEN_MAJOR, "--json"),
                     spec)
    assert token["batched_variants_recorded"] == token["batched_keys_reachable"] == 0
    assert token["dead_variants"] == 0
    assert token["batched_declined"].startswith("SpyreAttentionImpl runs no batched decode under "
                                                "the tiled walk")
    assert "batched_declined" not in default


def test_why_a_step_did_not_batch_names_the_side_that_declined(spyre_repo):
    token = _step(spyre_repo, *TOKEN_MAJOR, "--step", EIGHT_DECODES)
    assert token["path"] == "per-sequence" and token["iterations_per_layer"] == 8 * 8
    assert token["reason"] == (
        "impl declined the batched path the builder prepared: SpyreAttentionImpl runs no "
        "batched decode under the tiled walk (SPYRE_ATTN_FOR_EACH_TILE on): its "
        "_tiled_batched_decode_supported() is False")
    # the Python walk batches token-major; the head-major default batches a single decode
    walk = _step(spyre_repo, *TOKEN_MAJOR, "--env", "SPYRE_ATTN_FOR_EACH_TILE=0",
                 "--step", EIGHT_DECODES)
    one = _step(spyre_repo, "--step", "300")
    assert (walk["path"], walk["b_seqs"]) == ("batched", 8)
    assert (one["path"], one["b_seqs"], one["reason"]) == ("batched", 1, "batched")
    off = _step(spyre_repo, "--env", "SPYRE_BATCHED_DECODE=0", "--step", EIGHT_DECODES)
    assert off["reason"] == "SPYRE_BATCHED_DECODE off"


def test_a_jagged_step_is_its_own_path_and_its_warmup_the_commits_recorder(spyre_repo):
    """The mixed step's plan: a decode group (4 one-row tiles of 5 pages over 8 entries, 1 group
    x 4 chunks) and a tile group (one 128-row tile over 4 pages); both keys are among those the
    commit's own record_graphs compiles, so nothing compiles late."""
    spec = spyre_repo.spec(TODAY)
    figures = _figures(spyre_bench("cost", "--subject", spec, *SMALL, "--env",
                                   "SPYRE_JAGGED_ATTENTION=1", "--step", MIXED, "--per-step",
                                   "--json"), spec)
    (step,) = figures["per_step"]
    assert step["path"] == "jagged"
    assert step["reason"] == "jagged: 1 decode group(s), 1 query-tile group(s)"
    assert step["compile_keys"] == ["jagged_decode[1, 4, 8, 4]", "jagged_tile[1, 4, 128]"]
    assert step["padded_kv_slots"] == (4 * 8 + 4) * 64
    assert figures["warmup_variants"] > 2 and figures["late_compiles"] == 0


@pytest.fixture(scope="module")
def placed(spyre_repo):
    """today with its head-major mirror placing the chunk index as the real backend does:
    ``.to(device, device_layout=...)`` whatever the device (torch-spyre's layout helpers)."""
    return spyre_repo.edit(
        HEAD_MAJOR_BACKEND,
        "m.chunk_page_ids_dev = convert(\n"
        "            index, device, device_layout=temporary_chunk_major_page_index_layout(\n"
        "                chunks, per_chunk * b) if device.type == \"spyre\" else None)",
        "m.chunk_page_ids_dev = index.to(\n"
        "            device, device_layout=temporary_chunk_major_page_index_layout(\n"
        "                chunks, per_chunk * b))",
        parent=TODAY, message="head-major: the chunk index placed with its device layout")


def test_a_layout_placement_is_stood_in_counted_and_computes_what_the_oracle_says(
        spyre_repo, placed):
    step = _step(spyre_repo, "--step", EIGHT_DECODES, rev=placed)
    assert step["h2d_bytes_by_tensor"]["chunk_page_ids"] == 2 * 32 * 4   # [2 chunks, E 32, 1]
    spec = spyre_repo.spec(placed)
    proc, doc = spyre_bench("kernel", "--subject", spec, *SMALL, "--overrides", "none",
                            "--step", EIGHT_DECODES, "--no-graphs", "--repeat", "2",
                            "--warmup", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = doc["rows"]
    (shape,) = row["timing"]["shapes"]
    assert shape["path"] == "batched" and shape["max_abs_error"] < 1e-2
    assert row["oracle"] == "float16: |out - ref| <= 0.01 + 0.01*|ref|"


@pytest.fixture(scope="module")
def gaps(spyre_repo):
    """Two planted warmup-coverage gaps: today's recorder records no batched variant; and on
    that, its guard no longer watches the head-major batched kernel."""
    unrecorded = spyre_repo.edit(BACKEND, RECORDS_BATCHED, RECORDS_NONE, parent=TODAY,
                                 message="warmup: no batched decode variant recorded")
    unwatched = spyre_repo.edit(HEAD_MAJOR_BACKEND, WATCHED, "", parent=unrecorded,
                                message="compile guard: the batched kernel unwatched")
    return unrecorded, unwatched


def _guard(spyre_repo, rev: str) -> dict:
    spec = spyre_repo.spec(rev)
    proc, doc = spyre_bench("kernel", "--subject", spec, *SMALL, "--overrides", "none",
                            "--step", EIGHT_DECODES, "--no-timing", "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = doc["rows"]
    return row["graphs"]["compile_guard"]


def test_the_commits_guard_agrees_where_its_recorder_covers_the_workload(spyre_repo):
    guard = _guard(spyre_repo, TODAY)
    assert (guard["level"], guard["violations"], guard["late_compiles"],
            guard["model_late"]) == ("error_all", 0, 0, 0)
    assert guard["agrees"] and guard["finding"] is None


def test_a_warmup_gap_is_a_guard_violation_and_a_finding_where_the_model_misses_it(
        spyre_repo, gaps):
    """The bucketer still lists the batched variant (the model: no late key); the commit's
    recorder skips it, so the step compiles late: the guard raises, spyre-bench counts it."""
    guard = _guard(spyre_repo, gaps[0])
    assert guard["violations"] == guard["late_compiles"] == 1 and guard["model_late"] == 0
    assert guard["violation_keys"] == guard["late_compile_keys"] == ["batched_chunked[8, 4, 2]"]
    assert guard["first_violation"]["message"].startswith(
        "batched decode kernel (head-major) compiled unexpectedly")
    assert not guard["agrees"]
    assert guard["finding"].startswith(
        "the commit's guard would fail this workload at key batched_chunked[8, 4, 2] (step 0: ")
    assert guard["finding"].endswith("; spyre-bench counts 1 late compile(s) "
                                     "(batched_chunked[8, 4, 2]) and the exact model 0 late "
                                     "key(s)")


def test_a_late_compile_the_guard_does_not_watch_is_said(spyre_repo, gaps):
    guard = _guard(spyre_repo, gaps[1])
    assert (guard["violations"], guard["late_compiles"]) == (0, 1)
    assert guard["finding"] == ("the commit's guard raises for no compile of this workload; "
                                "spyre-bench counts 1 late compile(s) (batched_chunked[8, 4, 2])"
                                " and the exact model 0 late key(s)")


def test_guard_violations_are_an_asv_series(spyre_repo, gaps, tmp_path):
    """A real ``asv run``: the figure is 0 where the recorder covers the workload, 1 where it
    does not; a commit without a guard skips, naming that."""
    revs = [spyre_repo.rev("gen4"), spyre_repo.rev(TODAY), gaps[0]]
    proc, _ = spyre_bench("run", "--repo", str(spyre_repo.path), *revs, "--results-dir",
                          str(tmp_path / "results"), "--machine", "ci-box", "--device", "cpu",
                          "--tier", "tiny", "--bench", r"^kernel\.Guard\.", home=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    frame = load_history(tmp_path / "results")
    rows = frame[frame.benchmark == "kernel.Guard.track_guard_violations"]
    found = {commit: list(rows[rows.commit == commit]["value"]) for commit in revs[1:]}
    assert found == {revs[1]: [0], revs[2]: [1]}
    gen4 = rows[rows.commit == revs[0]]
    assert set(gen4.status) == {"skipped"}
    assert any("has no compile guard" in s["reason"]
               for s in load_identity(gen4.iloc[0]["file"])["skipped"])


def test_compare_checks_the_paths_a_commit_offers_and_says_where_a_guard_disagrees(
        spyre_repo, gaps, tmp_path):
    """--oracle runs the quick tier's four probes and, where a side's registry declares their
    knobs, the jagged (decodes; decodes beside a prefill chunk) and token-major probes: seven
    outputs of each side's own forward, each against the float64 oracle. Each side's compile
    guard runs beside spyre-bench's late compiles; the head's planted warmup gap is a finding
    in the comment."""
    base, head = spyre_repo.spec(TODAY), spyre_repo.spec(gaps[0])
    proc, _ = spyre_bench("compare", "--base", base, "--head", head, "--oracle", *SMALL,
                          "--workload", "four-3-block-decodes", "--json",
                          str(tmp_path / "c.json"), "--markdown", str(tmp_path / "c.md"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["oracle"] == {"matched": 7, "checked": 7}
    assert not (doc["skipped"] or doc["lost"] or doc["mismatches"])
    sides = {g["side"]: g for g in doc["guard"]}
    assert (sides["base"]["agrees"], sides["base"]["violations"]) == (True, 0)
    assert (sides["head"]["agrees"], sides["head"]["violations"]) == (False, 1)
    comment = (tmp_path / "c.md").read_text().replace("\\", "")   # markdown escapes
    assert ("- ℹ️ head's compile guard (error_all, four-3-block-decodes): the commit's guard "
            "would fail this workload at key batched_chunked[4, 4, 1] (step 0: ") in comment
    assert ("- ℹ️ base's compile guard (error_all, four-3-block-decodes): agrees: it raised for "
            "0 compile(s); spyre-bench counts 0 late compile(s) and the exact model 0 late "
            "key(s)") in comment
