"""Change points of a timing series: a point whose own samples spread wider than the step
threshold (a busy host) is represented by its fastest sample, or left out when no samples were
stored, and said; a real step stays at its commit either way it was measured."""

from __future__ import annotations

import re

import pandas as pd

from harness.analyze.changepoints import detect

BENCH = "kernel.Decode.time_layer"
THRESHOLDS = [(re.compile(r"kernel\..*\.time_.*"), 0.5)]


def series(points):
    """A history frame of one timing series: (median, q_25, q_75[, samples]) per commit c0, c1..."""
    return pd.DataFrame([
        {"machine": "m", "env_name": "e", "commit": f"c{i}", "date": i, "benchmark": BENCH,
         "params": {"probe": "small-4x8"}, "status": "ok", "unit": "seconds", "value": p[0],
         "q_25": p[1], "q_75": p[2], "samples": p[3] if len(p) > 3 else None}
        for i, p in enumerate(points)])


def steps(points, said=None):
    found = detect(series(points), thresholds=THRESHOLDS,
                   on_noisy=(said if said is not None else []).append)
    return [(p.last_good, p.first_bad) for p in found]


#: two commits at 2 ms, then a planted slowdown to 15 ms (a nightly's measured points)
SLOWED = [(0.00215, 0.00205, 0.00225), (0.00213, 0.00204, 0.00228), (0.0147, 0.0141, 0.0153)]
#: the fourth commit's code is the third's; on a busy host its samples ran from 7 ms to 1 s
BUSY = (0.2873, 0.2354, 0.6393, [0.0071, 0.0152, 0.236, 0.251, 0.2873, 0.31, 0.64, 1.063])


def test_a_point_measured_on_a_busy_host_makes_no_step_and_is_said():
    said = []
    assert steps(SLOWED + [BUSY], said) == [("c1", "c2")]
    assert len(said) == 1 and "at c3 " in said[0] and "141% of the median" in said[0]
    assert "fastest sample, 7.1 ms" in said[0]


def test_without_samples_a_busy_point_is_left_out_and_said():
    said = []
    assert steps(SLOWED + [BUSY[:3]], said) == [("c1", "c2")]
    assert len(said) == 1 and "left out of step detection" in said[0]


def test_a_slowdown_measured_on_a_busy_host_still_shows_at_its_commit():
    # CI: the slowed commit's own samples spread 73 %, the next commit (same code) measured tightly
    busy_slow = (0.0203, 0.0147, 0.0295, [0.0142, 0.0144, 0.0151, 0.0203, 0.026, 0.033, 0.051])
    said = []
    found = steps(SLOWED[:2] + [busy_slow, (0.0141, 0.0138, 0.0145)], said)
    assert found == [("c1", "c2")] and len(said) == 1 and "at c2 " in said[0]


def test_the_same_point_measured_tightly_is_a_step():
    said = []
    assert steps(SLOWED + [(0.2873, 0.2860, 0.2886)], said) == [("c1", "c2"), ("c2", "c3")]
    assert said == []


def test_points_without_quartiles_are_kept():
    nan = float("nan")
    assert steps([(0.002, nan, nan), (0.002, nan, nan), (0.015, nan, nan),
                  (0.015, nan, nan)]) == [("c1", "c2")]
