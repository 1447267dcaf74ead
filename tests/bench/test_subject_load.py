"""Benchmarks: load a spyre-inference commit from git and compute the quick analytic matrix.

Target: under 2 s for one commit on 2 cores (resolve the revision, read its tree, probe, then a
fresh isolated load per (config, override set) and every workload's exact cost). The 20-commit
figure is what a history backfill pays per 20 commits. Run with ``make bench``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

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
    if benchmark.disabled:   # the quick matrix's figures are tested elsewhere; this times them
        pytest.skip("one commit x the quick matrix: a benchmark (make bench)")
    benchmark.extra_info.update(cases=len(CASES), workloads=len(WORKLOADS), target_s=2.0)
    computed = benchmark.pedantic(quick_matrix, args=(spyre_repo.spec("gen3"),), rounds=5,
                                  iterations=1)
    assert computed == len(CASES)


def twenty_commits(path: Path) -> list[str]:
    """The five generations with a bucketer, plus 15 commits touching their bucketers."""
    repo = build_repo(path)
    revs = [repo.commits[g] for g in REFERENCE_POLICY]
    while len(revs) < 20:
        parent = list(REFERENCE_POLICY)[len(revs) % len(REFERENCE_POLICY)]
        text = repo.read(parent, BUCKETER) + f"\n# revision {len(revs)}\n"
        revs.append(repo.add_commit({BUCKETER: text}, f"touch {len(revs)}", parent=parent))
    return [repo.spec(r) for r in revs]


def test_quick_matrix_twenty_commits(benchmark, tmp_path):
    if benchmark.disabled:
        pytest.skip("20 commits x the quick matrix: a benchmark (make bench)")
    specs_ = twenty_commits(tmp_path / "si")
    benchmark.extra_info.update(commits=len(specs_), cases=len(CASES))
    total = benchmark.pedantic(lambda: sum(quick_matrix(s) for s in specs_), rounds=1,
                               iterations=1)
    assert total == 20 * len(CASES)


def load_only(spec: str) -> None:
    """Resolve and one fresh isolated load per case, without the model: the loader's share."""
    subject = resolve_subject(spec)
    for case in CASES:
        subject.bucketing(case.config, case.overrides)


def main() -> None:
    """Plain wall-clock timings: ``python -m tests.bench.test_subject_load [ROUNDS]``."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as tmp:
        specs_ = twenty_commits(Path(tmp) / "si")
        for label, fn, targets in (("load + quick matrix, 1 commit", quick_matrix, specs_[2:3]),
                                   ("load only (64 loads), 1 commit", load_only, specs_[2:3]),
                                   ("load + quick matrix, 20 commits", quick_matrix, specs_)):
            samples = []
            for _ in range(rounds if len(targets) == 1 else 1):
                start = time.perf_counter()
                for spec in targets:
                    fn(spec)
                samples.append(time.perf_counter() - start)
            print(f"{label}: median {statistics.median(samples):.3f} s, min {min(samples):.3f} s,"
                  f" max {max(samples):.3f} s over {len(samples)} run(s)")


if __name__ == "__main__":
    main()
