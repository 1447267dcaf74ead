"""``kernel.DecodeBytes``: the bytes the suite stores per probe (exact, no kernel run: the
commit's own builder where it has one, else the model on the subject's bucketing) are the bytes
the probe's kernel calls really gather, so efficiency over the history is computed on the right
numerator."""

from __future__ import annotations

import importlib

import pytest

from harness import suite
from harness.measure import probes
from harness.measure.device import select
from harness.measure.efficiency import logical_bytes


@pytest.fixture
def table_for(monkeypatch):
    monkeypatch.setenv(suite.TIER_ENV, "quick")

    def table(spec: str):
        monkeypatch.setenv(suite.SUBJECT_ENV, spec)
        suite.subject.cache_clear()
        kernel = importlib.reload(importlib.import_module("benchmarks.kernel"))
        return kernel.DecodeBytes().setup_cache(), suite.subject()
    yield table
    suite.subject.cache_clear()


@pytest.mark.parametrize("spec", ["reference:pre-810", "reference:post-810-clamp"])
def test_stored_bytes_are_what_the_probes_kernel_calls_gather(table_for, spec):
    table, subject = table_for(spec)
    assert set(table) == {p.name for p in probes.QUICK}
    for probe in probes.QUICK:
        calls = probes.prepare(probe, subject, select("cpu")).calls   # oracle-checked once
        config = probe.engine_config()
        logical = logical_bytes(config, [s.seq_len for s in calls.step],
                                [s.query_len for s in calls.step])
        assert table[probe.name] == {"logical_bytes": logical["total"],
                                     "walked_bytes": calls.kv_bytes() + logical["query_output"]}
    # the #810 KV case: the override above the limit walks 8x the bytes after the top-up
    kv = table["review-4x3-kv-above"]
    ratio = kv["walked_bytes"] / kv["logical_bytes"]
    assert (1.5 < ratio < 2) if spec == "reference:pre-810" else (10 < ratio < 20), ratio


def test_a_commit_without_a_bucketer_skips(table_for, spyre_repo):
    table, _ = table_for(spyre_repo.spec("no-bucketer"))
    assert set(table) == {"skipped"} and table["skipped"]


def test_a_commits_own_builder_decides_the_walked_bytes(table_for, spyre_repo):
    """A builder edited to pad a batch to the bucket of twice its sequences (bucketer unchanged):
    the stored walked bytes follow the commit's builder, not the model on its bucketing."""
    from tests.fixtures.spyre_repo import BACKEND

    padded = spyre_repo.edit(BACKEND, "find_sequence_bucket(num_seqs),",
                             "find_sequence_bucket(2 * num_seqs),", parent="gen3",
                             message="builder: pad batched decodes to twice the sequences")
    before, _ = table_for(spyre_repo.spec("gen3"))
    after, _ = table_for(spyre_repo.spec(padded))
    batched = [p.name for p in probes.QUICK if not p.per_sequence]
    assert batched
    for name in batched:
        assert after[name]["logical_bytes"] == before[name]["logical_bytes"]
        assert after[name]["walked_bytes"] > before[name]["walked_bytes"], name
    for probe in probes.QUICK:
        if probe.per_sequence:   # batched decode off: the edit does not reach it
            assert after[probe.name] == before[probe.name]
