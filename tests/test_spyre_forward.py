"""``spyre-bench kernel`` on commits whose kernels follow their own conventions (generation B,
head-major): run through the commit's own builder and forward, every output checked against the
float64 oracle, as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fixtures.spyre_repo import HEAD_MAJOR, OPS_KERNEL

REVIEW = ["--block-size", "64", "--max-model-len", "2048", "--batched",
          "--env", "SPYRE_ATTN_KV_BUCKETS=128,8192"]
QUICK = ["--repeat", "2", "--warmup", "1", "--json"]


def kernel(spec: str, *args: str):
    proc = subprocess.run([sys.executable, "-m", "harness", "kernel", "--subject", spec,
                           *REVIEW, *args, *QUICK], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, (json.loads(proc.stdout)["rows"] if proc.stdout.strip() else [])


@pytest.mark.parametrize("commit", ["gen3", HEAD_MAJOR])
def test_the_commits_own_kernel_is_timed_through_its_forward(spyre_repo, commit):
    proc, (row,) = kernel(spyre_repo.spec(commit), "--step", "150,150,150,150")
    assert proc.returncode == 0, proc.stderr
    assert row["generation"] == "forward" and "wrong" not in row and "skipped" not in row
    (shape,) = row["timing"]["shapes"]
    assert shape["through"] == "forward" and shape["path"] == "batched"
    assert shape["iterations_per_layer"] == 4  # 32 blocks in chunks of 8, from its own builder
    assert shape["max_abs_error"] < 1e-2 and len(shape["samples_us"]) == 2
    graphs = row["graphs"]
    assert graphs["through"] == "forward" and graphs["graphs"] == graphs["model_keys"] == 1
    assert graphs["recompile_limit"] == 100_000  # its platform module's, not Dynamo's 8
    assert graphs["checked_calls"] == 1


def test_a_mixed_batch_runs_its_batched_prefix_and_its_prefill_through_forward(spyre_repo):
    proc, (row,) = kernel(spyre_repo.spec("gen3"), "--step", "300,300,300,300,600 | 1,1,1,1,64")
    assert proc.returncode == 0, proc.stderr
    (shape,) = row["timing"]["shapes"]
    assert shape["path"] == "mixed" and shape["launches"] == 2
    assert shape["max_abs_error"] < 1e-2


def test_a_planted_wrong_kernel_is_wrong_with_exit_1(spyre_repo):
    bad = spyre_repo.edit(OPS_KERNEL, "scores = torch.matmul(q, k.transpose(-1, -2)) * scale",
                          "scores = torch.matmul(q, k.transpose(-1, -2)) * (2 * scale)",
                          parent="gen3", message="planted: scores scaled twice")
    proc, (row,) = kernel(spyre_repo.spec(bad), "--step", "150,150,150,150")
    assert proc.returncode == 1, proc.stderr
    assert "differs from the oracle" in row["wrong"] and "timing" not in row


def test_the_asv_kernel_probes_run_a_generation_3_commit_through_its_forward(spyre_repo):
    from harness.measure import probes
    from harness.measure.device import select
    from harness.measure.oracle import KernelMismatch
    from harness.subjects import resolve_subject

    small = probes.QUICK[0]
    prepared = probes.prepare(small, resolve_subject(spyre_repo.spec("gen3")), select("cpu"))
    try:
        prepared.check()  # checked once when prepared, and again here on a fresh run
        assert prepared.live.metadata.padded_num_seqs == 4
    finally:
        prepared.close()
    bad = spyre_repo.edit(OPS_KERNEL, "result = result.to(query.dtype)",
                          "result = (result + 1).to(query.dtype)",
                          parent="gen3", message="planted: output shifted")
    with pytest.raises(KernelMismatch):
        probes.prepare(small, resolve_subject(spyre_repo.spec(bad)), select("cpu"))


def test_every_probe_of_a_pr_comparison_runs_through_the_commits_forward(spyre_repo):
    # each probe opens the commit's load (which registers its custom op) and must close it
    # before the next; a later load must not reuse Dynamo's frames of an earlier one
    spec = spyre_repo.spec("gen3")
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", "--base", spec, "--head",
                           spec, "--block-size", "64", "--max-model-len", "512", "--workload",
                           "bimodal", "--oracle", "--json", "-"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["oracle"] == {"matched": 4, "checked": 4}, data["skipped"]
    assert not data["skipped"] and not data["lost"] and not data["mismatches"]


def test_probes_prepared_one_after_another_in_one_process(spyre_repo):
    from harness.measure import probes
    from harness.measure.device import select
    from harness.subjects import resolve_subject

    subject, device = resolve_subject(spyre_repo.spec("gen3")), select("cpu")
    for probe in (probes.QUICK[0], probes.QUICK[1], probes.QUICK[0]):
        prepared = probes.prepare(probe, subject, device)   # checked against the oracle
        prepared.close()
