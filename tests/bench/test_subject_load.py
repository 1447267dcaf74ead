"""Benchmarks: load a spyre-inference commit from git and compute the quick analytic matrix.

Target: under 2 s for one commit on 2 cores (resolve the revision, read its tree, probe, then a
fresh isolated load per (config, override set) and every workload's exact cost). The 20-commit
figure is what a history backfill pays per 20 commits. Run with ``make bench``.
"""

from __future__ import annotations

import pytest

from harness.evaluate import config_figures, workload_figures
from harness.matrix import TIERS, tier_cases
from harness.subjects import resolve_subject
from harness.workloads import specs
from tests.fixtures.spyre_repo import BUCKETER, REFERENCE_POLICY, build_repo

CASES = tier_cases("quick")
WORKLOADS = specs(steps=TIERS["quick"].steps)


def quick_matrix(spec: str) -> int:
    subject = resolve_subject(spec)
    computed = 0
    for case in CASES:
        computed += "skipped" not in config_figures(subject, case)
        workload_figures(subject, case, WORKLOADS)
    return computed


def test_quick_matrix_one_commit(benchmark, spyre_repo):
    benchmark.extra_info.update(cases=len(CASES), workloads=len(WORKLOADS), target_s=2.0)
    computed = benchmark.pedantic(quick_matrix, args=(spyre_repo.spec("gen3"),), rounds=5,
                                  iterations=1)
    assert computed == len(CASES)


def test_quick_matrix_twenty_commits(benchmark, tmp_path):
    if benchmark.disabled:
        pytest.skip("20 commits x the quick matrix: a benchmark (make bench)")
    repo = build_repo(tmp_path / "si")
    revs = [repo.commits[g] for g in REFERENCE_POLICY]
    while len(revs) < 20:
        parent = list(REFERENCE_POLICY)[len(revs) % len(REFERENCE_POLICY)]
        text = repo.read(parent, BUCKETER) + f"\n# revision {len(revs)}\n"
        revs.append(repo.add_commit({BUCKETER: text}, f"touch {len(revs)}", parent=parent))
    specs_ = [repo.spec(r) for r in revs]
    benchmark.extra_info.update(commits=len(specs_), cases=len(CASES))
    total = benchmark.pedantic(lambda: sum(quick_matrix(s) for s in specs_), rounds=1,
                               iterations=1)
    assert total == 20 * len(CASES)
