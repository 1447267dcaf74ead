"""Change points of a timing series: a point whose own samples spread wider than the step
threshold (a busy host) is left out of ASV's step detection, and said; a real step stays."""

from __future__ import annotations

import re

import pandas as pd

from harness.analyze.changepoints import detect

BENCH = "kernel.Decode.time_layer"
THRESHOLDS = [(re.compile(r"kernel\..*\.time_.*"), 0.5)]


def series(points):
    """A history frame of one timing series: (median, q_25, q_75) per commit c0, c1, ..."""
    return pd.DataFrame([
        {"machine": "m", "env_name": "e", "commit": f"c{i}", "date": i, "benchmark": BENCH,
         "params": {"probe": "small-4x8"}, "status": "ok", "unit": "seconds", "value": v,
         "q_25": a, "q_75": b} for i, (v, a, b) in enumerate(points)])


def steps(points, said=None):
    found = detect(series(points), thresholds=THRESHOLDS,
                   on_noisy=(said if said is not None else []).append)
    return [(p.last_good, p.first_bad) for p in found]


#: two commits at 2 ms, then a planted slowdown to 15 ms (a nightly's measured points)
SLOWED = [(0.00215, 0.00205, 0.00225), (0.00213, 0.00204, 0.00228), (0.0147, 0.0141, 0.0153)]


def test_a_point_measured_on_a_busy_host_makes_no_step_and_is_said():
    said = []
    # the fourth commit's code is the third's; its samples ran from 7 ms to 1 s (seen in a test)
    assert steps(SLOWED + [(0.2873, 0.2354, 0.6393)], said) == [("c1", "c2")]
    assert len(said) == 1 and "at c3 " in said[0] and "141% of the median" in said[0]


def test_the_same_point_measured_tightly_is_a_step():
    said = []
    assert steps(SLOWED + [(0.2873, 0.2860, 0.2886)], said) == [("c1", "c2"), ("c2", "c3")]
    assert said == []


def test_points_without_quartiles_are_kept():
    nan = float("nan")
    assert steps([(0.002, nan, nan), (0.002, nan, nan), (0.015, nan, nan),
                  (0.015, nan, nan)]) == [("c1", "c2")]
