"""The expected-changes gate: acknowledged exact changes pass, any other fails, in either direction.

Real ``spyre-bench compare`` subprocesses over the fixture repository (block_size 192, where #810
moves the default ladder: some figures get worse, some better).
"""

import json
import subprocess
import sys

import pytest

from harness.analyze import expected

ARGS = ["--block-size", "192", "--max-model-len", "2048", "--workload", "four-3-block-decodes",
        "--workload", "long-tail",
        "--env", "SPYRE_BATCHED_DECODE=1"]


def compare(repo, base, head, *extra):
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", "--base", repo.spec(base),
                           "--head", repo.spec(head), *ARGS, *extra],
                          capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stderr
    return proc


@pytest.fixture(scope="module")
def replacement(spyre_repo, tmp_path_factory):
    path = tmp_path_factory.mktemp("expected") / "expected-changes.jsonl"
    proc = compare(spyre_repo, "pre-810", "810-topup", "--write-expected", str(path))
    assert proc.returncode == 1 and "commit it to acknowledge" in proc.stderr
    return path


def test_the_replacement_file_acknowledges_every_change_and_the_gate_passes(spyre_repo,
                                                                           replacement):
    text = replacement.read_text()
    assert text.startswith(expected.HEADER)
    items = [json.loads(x) for x in text.splitlines() if not x.startswith("#")]
    assert any(i.get("axis") == "batched_num_blocks" for i in items)
    directions = {i["head"] > i["base"] for i in items if "metric" in i}
    assert directions == {True, False}            # worse and better changes both acknowledged
    proc = compare(spyre_repo, "pre-810", "810-topup", "--expected", str(replacement))
    assert proc.returncode == 0, proc.stdout
    assert f"0 unacknowledged, {len(items)} acknowledged" in proc.stdout
    assert "✅ every change acknowledged" in proc.stdout


def test_an_unacknowledged_improvement_fails_the_gate(spyre_repo, replacement, tmp_path):
    items = [x for x in replacement.read_text().splitlines() if not x.startswith("#")]
    better = next(x for x in items if "metric" in x and json.loads(x)["head"] < json.loads(x)["base"])
    partial = tmp_path / "partial.jsonl"
    partial.write_text(expected.HEADER + "".join(x + "\n" for x in items if x != better))
    proc = compare(spyre_repo, "pre-810", "810-topup", "--expected", str(partial), "--json", "-")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert doc["expected"] == {"file": str(partial), "acknowledged": len(items) - 1,
                               "unacknowledged": 1, "stale": 0}
    [flagged] = [e for e in doc["exact_changed"] + doc["ladders"] if not e["acknowledged"]]
    assert flagged["head"] < flagged["base"]


def test_an_acknowledgement_covers_exactly_that_change(spyre_repo, replacement, tmp_path):
    """A different head value for an acknowledged figure is a new change: it fails, and the old
    line is counted stale."""
    items = [json.loads(x) for x in replacement.read_text().splitlines() if not x.startswith("#")]
    shifted = [dict(i, head=i["head"] + 1) if "metric" in i and i["metric"] ==
               "iterations_per_layer_mean" else i for i in items]
    path = tmp_path / "shifted.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in shifted))
    proc = compare(spyre_repo, "pre-810", "810-topup", "--expected", str(path), "--json", "-")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["expected"]["unacknowledged"] == doc["expected"]["stale"] >= 1


def test_a_malformed_file_is_bad_input(spyre_repo, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("# ok\nnot json\n")
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", "--base",
                           spyre_repo.spec("pre-810"), "--head", spyre_repo.spec("810-topup"),
                           *ARGS, "--expected", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "bad.jsonl, line 2" in proc.stderr
