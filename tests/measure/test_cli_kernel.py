"""``spyre-bench kernel`` end to end, and the promise that the other commands never import torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli import options as cli_options
from harness.measure.settings import FIRST_LOOK_BUDGET_S
from tests.measure.test_oracle import _KernelSubject, dropped_rescale

SPYRE_BENCH = str(Path(sys.executable).with_name("spyre-bench"))
SMALL_ARGS = ["--block-size", "64", "--max-model-len", "256", "--max-num-seqs", "8",
              "--max-num-batched-tokens", "256", "--num-kv-heads", "2", "--queries-per-kv", "2",
              "--head-size", "16", "--num-layers", "2", "--device", "cpu"]


def test_help_ladders_and_cost_do_not_import_torch():
    code = """
import sys
from harness.cli import main
for argv in (["--help"], ["kernel", "--help"]):
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code == 0, exc.code
assert main(["ladders", "--block-size", "192", "--max-model-len", "2048"]) == 0
assert main(["cost", "--batched", "--step", "150,150,150,150"]) == 0
print("torch imported:", "torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("torch imported: False")
    assert "spyre-bench kernel --base reference:post-810-clamp" in out.stdout  # kernel --help


def test_kernel_json_in_a_real_process():
    out = subprocess.run(
        [SPYRE_BENCH, "kernel", "--subject", "reference:chunked", *SMALL_ARGS,
         "--workload", "bimodal", "--steps", "4", "--repeat", "3", "--warmup", "1", "--json"],
        capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["device"]["name"] == "cpu" and doc["options"]["backend"] == "eager"
    (row,) = doc["rows"]
    assert row["subject"] == "reference:chunked" and row["generation"] == "B"
    g = row["graphs"]
    assert g["matches_model"] and g["graphs"] == g["expected_graphs"] and g["fallbacks"] == 0
    assert g["late_compiles"] == g["expected_late"] == 0  # chunked records its batched grid
    shapes = row["timing"]["shapes"]
    assert shapes and all(len(s["samples_us"]) == 3 for s in shapes)
    assert sum(s["steps"] for s in shapes) == row["timing"]["steps_timed"] <= 4
    for s in shapes:
        assert s["max_abs_error"] < 1e-2 and s["us_per_layer"] > 0
        assert s["us_per_step"] == pytest.approx(s["us_per_layer"] * 2)
        assert s["stats"]["ci_low"] <= s["stats"]["median"] <= s["stats"]["ci_high"]


def test_two_subjects_with_the_per_sequence_path(capsys):
    code = main(["kernel", "--base", "reference:post-810-clamp", "--head", "reference:chunked",
                 *SMALL_ARGS, "--step", "256,256,256,256", "--per-sequence", "--no-graphs",
                 "--repeat", "3", "--warmup", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "batched[4, 4]" in out and "batched_chunked[4, 4, 1]" in out
    assert out.count("(forced)") == 2 and "4xattn[4, 1]" in out
    assert "time vs base" in out


def test_a_wrong_kernel_exits_1_and_shows_no_time(monkeypatch, capsys):
    monkeypatch.setattr(cli_options, "open_subject",
                        lambda spec: _KernelSubject(dropped_rescale))
    code = main(["kernel", *SMALL_ARGS, "--step", "256,1,65,130", "--repeat", "2"])
    out = capsys.readouterr().out
    assert code == 1
    assert "WRONG" in out and "differs from the oracle" in out and "µs/layer" not in out


@pytest.mark.parametrize("argv,message", [
    (["--repeat", "0"], "--repeat: must be >= 1"),
    (["--device", "tpu"], "--device 'tpu': expected one of"),
    (["--no-graphs", "--no-timing"], "leave nothing to measure"),
    (["--subject", "reference:nope"], "unknown policy 'nope'"),
    (["--step", "300,x"], "'x' is not an integer"),
    (["--backend", "nope"], "--backend 'nope': not a torch.compile backend here"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    try:
        code = main(["kernel", *argv])
    except SystemExit as exc:   # refused while parsing (argparse's own exit)
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(("spyre-bench: error: ", "spyre-bench kernel: error: "))
    assert message in err and err.count("\n") == 1


def test_a_subject_without_a_kernel_is_skipped_with_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(cli_options, "open_subject", lambda spec: _KernelSubject(None))
    assert main(["kernel", *SMALL_ARGS, "--step", "256,1,65,130"]) == 2
    assert "skipped" in capsys.readouterr().out


def _kernel_json(capsys, *flags) -> dict:
    code = main(["kernel", "--subject", "reference:post-810-clamp", *SMALL_ARGS,
                 "--workload", "bimodal", "--workload", "mixed-prefill-decode", "--steps", "4",
                 "--repeat", "7", "--warmup", "1", "--json", *flags])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_a_first_look_counts_what_the_full_run_counts(capsys):
    first, full = _kernel_json(capsys), _kernel_json(capsys, "--full")
    assert first["options"]["time_budget_s"] == FIRST_LOOK_BUDGET_S
    assert full["options"]["time_budget_s"] is None
    assert first["options"]["shape_only"] == ["warmup", "workload"]
    assert full["options"]["shape_only"] == []
    exact = ("graphs", "graphs_warmup", "graphs_workload", "graphs_by_kernel", "unique_graphs",
             "late_compile_keys", "fallback_keys", "uncompiled_keys", "verdict")
    for a, b in zip(first["rows"], full["rows"]):
        assert {k: a["graphs"][k] for k in exact} == {k: b["graphs"][k] for k in exact}
        # the full run computed every key and checked it; the first look checks what it times
        assert b["graphs"]["checked_calls"] >= b["graphs"]["model_keys"] > 0
        assert b["timing"]["timed_shapes"] == b["timing"]["distinct_shapes"]
        for shape in a["timing"]["shapes"] + b["timing"]["shapes"]:
            assert shape["samples_asked"] == 7
            assert len(shape["samples_us"]) <= 7 and shape["stats"]["n"] == len(
                shape["samples_us"])
        assert all(s["sampling_stopped"] == "repeat" and len(s["samples_us"]) == 7
                   for s in b["timing"]["shapes"])


def test_a_spent_time_budget_times_the_first_shape_only_and_says_so(capsys):
    doc = _kernel_json(capsys, "--time-budget", "0.000001")
    for row in doc["rows"]:
        t = row["timing"]
        (shape,) = t["shapes"]   # the most frequent shape; none after the budget is spent
        assert shape["sampling_stopped"] == "time budget" and len(shape["samples_us"]) == 5
        assert t["timed_shapes"] == 1
        assert t["shapes_left_by_budget"] == min(t["distinct_shapes"], 6) - 1
    assert any(row["timing"]["shapes_left_by_budget"] for row in doc["rows"])


def test_a_commit_whose_build_raises_is_a_failure_said_first_not_a_skip(spyre_repo, tmp_path):
    """The subject's own build() raising: the row is FAILED (JSON: ``failed``), the first
    stderr line says so, and the command exits 1 (a commit's failure, never a skip)."""
    from tests.fixtures.spyre_repo import BACKEND
    from tests.test_pr_comment import BUILD_RAISES

    broken = spyre_repo.edit(BACKEND, *BUILD_RAISES, parent="gen3", message="build() raises")
    argv = [sys.executable, "-m", "harness", "kernel", "--subject", spyre_repo.spec(broken),
            "--workload", "four-3-block-decodes", "--overrides", "batched", "--no-timing"]
    table = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert table.returncode == 1, table.stderr
    first = next(line for line in table.stderr.splitlines() if line.startswith("spyre-bench:"))
    assert first.startswith("spyre-bench: FAILED: subject failed in 1 row(s)")
    assert "metadata builder is broken" in first
    assert "FAILED" in table.stdout and "skipped" not in table.stdout
    rows = json.loads(subprocess.run(argv + ["--json"], capture_output=True, text=True,
                                     timeout=300, cwd=tmp_path).stdout)["rows"]
    assert [r.get("failed") for r in rows] == [True]
    # every row says which code it is of: each attention module's content hash
    import hashlib
    assert rows[0]["sources"][BACKEND] == hashlib.sha256(
        spyre_repo.read(broken, BACKEND).encode()).hexdigest()[:12]
