"""A commit's builder driven over worker processes gives exactly what one process gives.

Real fixture commits, real forked workers: the figures computed ahead in parallel, then read
back by the ordinary serial pass, equal those of a serial pass from an empty memo, skip reasons
included; a bad job count is one clear error.
"""

from __future__ import annotations

import pytest

from harness.config import EngineConfig, Overrides
from harness.errors import ConfigError
from harness.matrix import Case
from harness.subjects import resolve_subject
from harness.subjects.memo.figures import FIGURES
from harness.subjects.spyre.prefetch import JOBS_ENV, jobs
from harness.workloads import specs

CASES = [Case(EngineConfig(block_size=bs, max_model_len=mml), Overrides.from_env(env), "t")
         for bs, mml in ((64, 2048), (192, 2048), (128, 8192))
         for env in ({"SPYRE_BATCHED_DECODE": "1"},
                     {"SPYRE_ATTN_KV_BUCKETS": "128,8192", "SPYRE_BATCHED_DECODE": "1"})]


def serial_figures(subject):
    out = []
    for case in CASES:
        costs = subject.workload_costs(case.config, case.overrides,
                                       [m.build(case.config) for m in specs(steps=3)])
        out.append([c.as_dict() if hasattr(c, "as_dict") else str(c) for c in costs])
    return out


def requests():
    return [(c.config, c.overrides, [m.build(c.config) for m in specs(steps=3)]) for c in CASES]


@pytest.mark.parametrize("generation", ["810-clamp", "gen3"])
def test_parallel_figures_equal_serial_ones(spyre_repo, monkeypatch, generation):
    subject = resolve_subject(spyre_repo.spec(generation))
    FIGURES.clear()
    monkeypatch.setenv(JOBS_ENV, "1")
    assert subject.prefetch_workloads(requests()) == 0          # one job: nothing ahead
    serial = serial_figures(subject)
    FIGURES.clear()
    monkeypatch.setenv(JOBS_ENV, "2")
    ahead = subject.prefetch_workloads(requests())
    steps = sum(len(w.steps) for _, _, ws in requests() for w in ws)
    assert 0 < ahead <= steps
    monkeypatch.setenv(JOBS_ENV, "1")
    assert serial_figures(subject) == serial
    assert subject.prefetch_workloads(requests()) == 0          # all in the memo now
    FIGURES.clear()


def test_the_workers_bucketings_come_back_to_the_parent(spyre_repo, monkeypatch):
    """What the config benchmarks read next is not computed again in the parent."""
    spec = spyre_repo.spec("gen3")
    serial = resolve_subject(spec)
    expected = [serial.bucketing(c.config, c.overrides) for c in CASES]
    FIGURES.clear()
    monkeypatch.setenv(JOBS_ENV, "2")
    parent = resolve_subject(spec)
    assert all(parent.known_bucketing(c.config, c.overrides) is None for c in CASES)
    parent.prefetch_workloads(requests())
    assert [parent.known_bucketing(c.config, c.overrides) for c in CASES] == expected
    FIGURES.clear()


def test_a_subject_without_a_bucketer_has_nothing_to_drive(spyre_repo, monkeypatch):
    monkeypatch.setenv(JOBS_ENV, "2")
    assert resolve_subject(spyre_repo.spec("no-bucketer")).prefetch_workloads(requests()) == 0


@pytest.mark.parametrize("raw", ["0", "-1", "two", "1.5"])
def test_a_bad_job_count_is_one_clear_error(monkeypatch, raw):
    monkeypatch.setenv(JOBS_ENV, raw)
    with pytest.raises(ConfigError, match=f"{JOBS_ENV}='{raw}'"):
        jobs()
