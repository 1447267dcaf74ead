"""The adaptive interleaved sampler on deterministic fake sides: no timing, no flakiness.

Statistical power on real kernels is measured by scripts/timing_power.py, not here; these tests
pin the behaviour: ABBA order, stopping early on clear effects, a bound on rounds and seconds,
the cold-cache flush before every timed call, raw samples kept.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.analyze.stats import judge_paired, paired_ratio
from harness.measure.sampler import Plan, sample_pair


class Fake:
    """A side whose samples are ``scale`` times a seeded lognormal noise; logs every call."""

    def __init__(self, name, scale, log, seed, noise=0.05):
        self.name, self.scale, self.log = name, scale, log
        self.rng = np.random.default_rng(seed)
        self.noise = noise

    def calls_per_sample(self, min_sample_s):
        return 7 if self.name == "base" else 3

    def sample(self, number):
        self.log.append((self.name, number))
        return self.scale * float(np.exp(self.rng.normal(0, self.noise)))


def pair(scale, noise=0.05, **plan):
    log = []
    out = sample_pair(Fake("base", 1.0, log, 1, noise), Fake("head", scale, log, 2, noise),
                      Plan(**plan))
    return out, log


@pytest.mark.parametrize("scale,kind", [(1.0, "no change"), (1.25, "regression"),
                                        (2.0, "regression"), (0.5, "improvement")])
def test_verdicts_on_planted_effects(scale, kind):
    out, _ = pair(scale)
    assert out.verdict.kind == kind and out.verdict.stopped == "decided"
    assert out.verdict.ci[0] <= scale * 1.1 and out.verdict.ci[1] >= scale / 1.1


def test_abba_order_same_calls_per_sample_and_raw_samples_kept():
    out, log = pair(2.0)
    assert {n for _, n in log} == {7}            # both sides: the larger calibration
    timed = [name for name, _ in log[2:]]        # after one untimed sample each
    assert timed[:8] == ["base", "head", "head", "base"] * 2
    assert len(out.base) == len(out.head) == out.verdict.rounds
    assert out.verdict.method == "paired" and out.number == 7


def test_clear_effect_stops_early_and_near_the_factor_takes_more_rounds():
    clear, _ = pair(2.0)
    near, _ = pair(1.10, noise=0.08)
    assert clear.verdict.rounds == Plan().looks()[0]
    assert near.verdict.rounds > clear.verdict.rounds


class AfterOther(Fake):
    """A side whose sample is ``penalty`` times slower when the other side ran last (what the
    other's sample left in the caches and on the core)."""

    def __init__(self, name, log, seed, penalty):
        super().__init__(name, 1.0, log, seed, noise=0.03)
        self.penalty = penalty

    def sample(self, number):
        after_other = bool(self.log) and self.log[-1][0] != self.name
        return super().sample(number) * (self.penalty if after_other else 1.0)


@pytest.mark.parametrize("base_penalty,head_penalty", [(1.2, 1.2), (1.25, 1.15)])
def test_a_position_effect_cancels_within_each_abba_quad(base_penalty, head_penalty):
    # identical code, but each side's sample straight after the other side's is 15-25 % slower:
    # judged round by round, the rounds split into two clusters, the interval spans both and
    # deciding took 71-91 rounds on average; each quad holds one sample of each position per
    # side, so the first look decides
    log = []
    out = sample_pair(AfterOther("base", log, 1, base_penalty),
                      AfterOther("head", log, 2, head_penalty), Plan())
    assert out.verdict.kind == "no change" and out.verdict.stopped == "decided"
    assert out.verdict.rounds <= Plan().looks()[1]
    assert 0.93 < out.verdict.ratio < 1.07


class Preparation(Fake):
    """A side whose every sample carries its preparation's own factor: where its buffers landed,
    what its load cached (two preparations of one kernel on a commit's forward, up to 9 % apart)."""

    def __init__(self, name, log, rng):
        super().__init__(name, float(np.exp(rng.normal(0, 0.05))), log, int(rng.integers(1e9)),
                         noise=0.02)


def a_a(seed, fresh):
    rng, log, made = np.random.default_rng(seed), [], []

    def prepared():
        made.append(1)
        return Preparation("base", log, rng), Preparation("head", log, rng)
    out = sample_pair(*prepared(), Plan(), refresh=prepared if fresh else None)
    return out, len(made), log


def test_each_quad_on_preparations_of_its_own_turns_their_difference_into_variance():
    # one preparation per side: their fixed difference is judged a change in most runs
    once = [a_a(seed, fresh=False)[0].verdict.kind for seed in range(20)]
    assert sum(k in ("regression", "improvement") for k in once) >= 5, once
    # prepared anew for every quad: never a false change
    for seed in range(20):
        out, made, log = a_a(seed, fresh=True)
        assert out.verdict.kind in ("no change", "inconclusive"), (seed, out.verdict)
        assert made == out.verdict.rounds // 2           # one preparation per quad
        # after every preparation one untimed sample each (head first), then the quad's four
        assert len(log) == 6 * made and [n for n, _ in log[:6]] == \
            ["head", "base", "base", "head", "head", "base"]


def test_bounded_by_rounds_and_by_seconds():
    out, _ = pair(1.05, noise=0.5, max_rounds=20)
    assert out.verdict.rounds <= 20 and out.verdict.kind == "inconclusive"
    assert out.verdict.stopped == "round bound" and "undecided" in out.verdict.advice
    ticks = iter(range(10_000))
    log = []
    timed = sample_pair(Fake("base", 1, log, 1, 0.5), Fake("head", 1.05, log, 2, 0.5),
                        Plan(max_seconds=5), clock=lambda: float(next(ticks)))
    assert timed.verdict.stopped == "time bound" and timed.verdict.rounds == 10  # a tick a pair


def test_cold_cache_flushes_before_every_timed_call():
    log = []
    flushes = []

    def flush():
        flushes.append(len(log))

    out = sample_pair(Fake("base", 1, log, 1), Fake("head", 2, log, 2),
                      Plan(cold=True, cold_calls=3), flush=flush)
    assert out.cache == "cold" and {n for _, n in log} == {1}
    assert len(flushes) == len(log) and flushes == list(range(len(log)))


def test_paired_ratio_is_the_hodges_lehmann_estimate_of_a_constant_ratio():
    base = [1.0, 2.0, 3.0, 4.0] * 5
    ratio, low, high = paired_ratio(base, [1.3 * b for b in base])
    assert ratio == pytest.approx(1.3) and low == pytest.approx(1.3) and high == pytest.approx(1.3)
    assert judge_paired(base, [1.3 * b for b in base], factor=1.1).kind == "regression"
    assert paired_ratio([1, 2], [1, 2])[1:] == (0.0, float("inf"))   # too few rounds: no interval
