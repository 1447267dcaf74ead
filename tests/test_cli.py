"""The CLI as users run it: real subprocesses, exit codes, tables and JSON."""

import json
import subprocess
import sys

import pytest


def spyre_bench(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"})
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def test_ladders_shows_the_three_review_changes_at_block_size_192():
    out = spyre_bench("ladders", "--base", "reference:pre-810", "--head", "reference:post-810-topup",
                      "--block-size", "192", "--max-model-len", "256,2048,32768").stdout
    for change in ("[1,2] → [2]", "[1,2,4,8,11] → [2,3,6,11]",
                   "[1,2,4,8,16,32,64,128,171] → [2,3,6,11,22,43,86,171]"):
        assert change in out


def test_ladders_json_block_size_128_unchanged_192_changed():
    rows = json.loads(spyre_bench(
        "ladders", "--base", "reference:pre-810", "--head", "reference:post-810-topup",
        "--block-size", "128,192", "--max-model-len", "256,2048,32768", "--json").stdout)
    changed = {(r["case"]["block_size"], r["case"]["max_model_len"]): r["changed"] for r in rows}
    assert len(changed) == 6
    for mml in (256, 2048, 32768):
        assert "ladders.batched_num_blocks" not in changed[(128, mml)]
        assert "ladders.batched_num_blocks" in changed[(192, mml)]
    row = next(r for r in rows if r["case"]["block_size"] == 192 and r["case"]["max_model_len"] == 2048)
    assert row["subjects"]["reference:pre-810"]["ladders"]["batched_num_blocks"] == [1, 2, 4, 8, 11]


def test_cost_reproduces_4_128_32_iterations():
    args = ["--batched", "--env", "SPYRE_ATTN_KV_BUCKETS=128,8192", "--block-size", "64",
            "--max-model-len", "2048", "--step", "150,150,150,150", "--json"]
    per_layer = {}
    for spec in ("pre-810", "post-810-topup", "post-810-clamp"):
        [row] = json.loads(spyre_bench("cost", "--subject", f"reference:{spec}", *args).stdout)
        fig = row["subjects"][f"reference:{spec}"]
        per_layer[spec] = (fig["iterations_per_layer_mean"], fig["mask_bytes_per_step"])
    assert per_layer == {"pre-810": (4, 16384), "post-810-topup": (128, 524288),
                         "post-810-clamp": (32, 131072)}


def test_cost_table_marks_changes():
    out = spyre_bench("cost", "--base", "reference:pre-810", "--head", "reference:post-810-topup",
                      "--batched", "--env", "SPYRE_ATTN_KV_BUCKETS=128,8192", "--step",
                      "150,150,150,150", "--per-step").stdout
    assert "4 → 128" in out and "160 → 5,120" in out and "16 KiB → 512 KiB" in out
    assert "1 of 1 rows changed" in out


@pytest.mark.parametrize("args,message", [
    (["ladders", "--block-size", "96"], "block_size must be a multiple of 64"),
    (["ladders", "--max-model-len", "0"], "max_model_len must be >= 1"),
    (["ladders", "--env", "SPYRE_ATTN_KV_BUCKETS=128,x"], "'x' is not an integer"),
    (["ladders", "--env", "SPYRE_ATTN_KV_BUCKETS=,"], "no bucket sizes"),
    (["ladders", "--subject", "reference:nope"], "unknown policy 'nope'"),
    (["ladders", "--base", "reference:pre-810"], "--base and --head go together"),
    (["ladders", "--overrides", "fast"], "unknown override set 'fast'"),
    (["cost", "--workload", "uniform"], "unknown workload 'uniform'"),
    (["cost", "--step", "100,abc"], "--step #1: seq_len 'abc' is not an integer"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    proc = spyre_bench(*args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert proc.stdout == ""


def test_trace_not_fitting_a_config_is_a_skipped_row(tmp_path):
    trace = tmp_path / "t.trace"
    trace.write_text("150,150,150,150\n3000,3000,3000,3000\n")
    rows = json.loads(spyre_bench("cost", "--trace", str(trace), "--max-model-len", "2048,4096",
                                  "--json").stdout)
    skipped = rows[0]["subjects"]["reference:post-810-clamp"]
    assert rows[0]["case"]["max_model_len"] == 2048
    assert skipped == {"skipped": f"{trace}:2: seq_len 3000 > max_model_len 2048"}
    assert "skipped" not in rows[1]["subjects"]["reference:post-810-clamp"]
    proc = spyre_bench("cost", "--trace", str(trace), check=False)
    assert proc.returncode == 2 and "skipped" in proc.stdout


def test_help_explains_each_command():
    top = spyre_bench("--help").stdout
    assert "ladders" in top and "cost" in top
    for command, phrase in [("ladders", "--changed-only"), ("cost", "SPYRE_BATCHED_DECODE=1")]:
        assert phrase in spyre_bench(command, "--help").stdout


def test_exact_path_never_imports_torch():
    code = ("import sys, harness.cli, harness.model, harness.evaluate, harness.matrix;"
            "from harness.cli import main;"
            "main(['cost', '--tier', 'quick', '--workload', 'bimodal', '--json']);"
            "assert 'torch' not in sys.modules, 'torch imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


SMALL_KERNEL = ["--max-model-len", "512", "--max-num-seqs", "8", "--max-num-batched-tokens", "256",
                "--num-kv-heads", "2", "--queries-per-kv", "2", "--head-size", "16",
                "--device", "cpu"]


def test_kernel_gates_on_fallbacks_and_reports_progress_in_a_pipe():
    args = ["kernel", "--subject", "reference:chunked", "--workload", "bimodal", "--steps", "6",
            *SMALL_KERNEL, "--no-timing", "--recompile-limit", "1"]
    proc = spyre_bench(*args, "--fail-on", "wrong,fallbacks", check=False)
    assert proc.returncode == 1, proc.stderr
    assert "fall-backs" in proc.stdout and "NO:" in proc.stdout
    # stderr is a pipe here: one line per unit of work, no bar
    lines = proc.stderr.splitlines()
    assert lines and all(ln.startswith("[kernel ") for ln in lines), proc.stderr
    assert any("compiled graphs" in ln for ln in lines) and lines[-1].endswith(": done")
    # the same verdict does not gate unless asked
    assert spyre_bench(*args, check=False).returncode == 0


def test_kernel_absurd_bucket_is_a_skip_with_the_figure_not_wrong():
    proc = spyre_bench("kernel", "--subject", "reference:post-810-topup", "--env",
                       "SPYRE_ATTN_KV_BUCKETS=99999999999999999999", "--batched", "--step",
                       "150,150,150,150", *SMALL_KERNEL, "--no-graphs", check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "WRONG" not in proc.stdout and "skipped" in proc.stdout
    [error] = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert "(1.68e+12 GiB), above the 64 GiB limit" in error


def test_progress_heartbeat_in_a_pipe(tmp_path):
    """A unit of work longer than the heartbeat still shows a line per period."""
    import io
    import time

    from harness.progress import Progress
    out = io.StringIO()
    with Progress(2, "test", stream=out, heartbeat_s=0.5) as advance:
        advance("a", "working")
        time.sleep(2.2)
        advance("a", "done", 1)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[test 0/2 0s] a: working"
    assert sum("still at a: working" in ln for ln in lines) >= 2
    assert lines[-1].startswith("[test 1/2") and lines[-1].endswith("a: done")


def test_progress_is_quiet_for_quick_commands():
    import io

    from harness.progress import Progress
    out = io.StringIO()
    with Progress(1, "cost", stream=out, quiet_s=5) as advance:
        advance("x", "done", 1)
    assert out.getvalue() == ""


def test_changes_follows_the_checked_out_branch_and_warns_when_nothing_is_on_it(tmp_path):
    from tests.test_bad_input_catalogue import _git
    from tests.test_compare_stored import results
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "trunk")
    (repo / "f").write_text("x")
    _git(repo, "add", "f")
    _git(repo, "commit", "-q", "-m", "one")
    stored = tmp_path / "stored"
    stored.mkdir()
    results(stored)
    proc = spyre_bench("changes", "--results-dir", str(stored), "--repo", str(repo), check=False)
    # no branch "main" here: the checked-out one is used; nothing measured on it is no pass
    assert proc.returncode == 2, proc.stderr
    assert "none of the 2 measured commit(s) is on branch 'trunk'" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("spyre-bench: error: nothing measured")
