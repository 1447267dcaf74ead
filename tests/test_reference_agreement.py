"""The generated repository's commits against the embedded reference policies, over the quick tier.

Two implementations written separately from the same notes (the fixture's bucketer code, run by
the loader; the harness's reference policies) must give identical ladders, warmup records and
workload costs in every case. A mismatch means one of them misreads docs/spyre-inference.md, or the loader
maps the subject's output wrongly. Bucketer notes (log lines) are worded differently and are not
compared.
"""

from __future__ import annotations

import pytest

from harness.evaluate import config_figures, workload_figures
from harness.matrix import TIERS, tier_cases
from harness.subjects import resolve_subject
from harness.workloads import specs
from tests.fixtures.spyre_repo import REFERENCE_POLICY

#: Every 8th quick-tier case: each case drives the commit's own builder through every step.
CASES = tier_cases("quick")[::8]
WORKLOADS = specs(steps=TIERS["quick"].steps)


def figures(subject):
    """Exact figures; tensors by name are dropped (a builder names its own tensors), and so are
    the one-time set-up transfers (the model has no engine to stage buffers in)."""
    out = []
    for case in CASES:
        config = config_figures(subject, case)
        config.pop("notes", None)
        work = workload_figures(subject, case, WORKLOADS)
        for row in work.values():
            row.pop("h2d_bytes_by_tensor", None)
            row.pop("notes", None)   # the builder's log lines: worded by each, not compared
            for key in [k for k in row if k.startswith("setup_")]:
                del row[key]
        out.append((config, work))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("generation, policy", sorted(
    (g, p) for g, p in REFERENCE_POLICY.items() if g not in ("gen3", "gen4")))
def test_fixture_commit_equals_reference_policy(spyre_repo, generation, policy):
    got = figures(resolve_subject(spyre_repo.spec(generation)))
    want = figures(resolve_subject(f"reference:{policy}"))
    assert not any("skipped" in c for c, _ in got)
    mismatches = [case.label() for case, g, w in zip(CASES, got, want, strict=True) if g != w]
    assert mismatches == []


def test_the_comparison_can_tell_generations_apart(spyre_repo):
    """Control: pre-810 vs #810 differ exactly where the review says the batched ladder moves."""
    pre = resolve_subject(spyre_repo.spec("pre-810"))
    topup = resolve_subject("reference:post-810-topup")
    differ = [c for c in CASES if config_figures(pre, c)["ladders"]["batched_num_blocks"]
              != config_figures(topup, c)["ladders"]["batched_num_blocks"]]
    expected = [c for c in CASES if c.config.block_size == 192
                or c.overrides_name in ("kv-above-limit", "kv-sparse")]
    assert differ == expected
