"""Timing verdicts on real kernels: an A/A comparison never cries wolf, a 2x slowdown is caught.

Both sides are the fixture repository's own decode kernels, timed interleaved on this machine by
``spyre-bench compare --timings``; the slowdown is planted in a commit (every block visited four
times: the same output, four times the work). So that a loaded runner cannot fail these for the
wrong reason: one torch thread (two intra-op threads on a 2-core box with one core busy ran the
kernels 20-85x slower, test_nightly), and a planted change far above the noise and the 1.25x
factor, while the exact figures (none changed, the per-sequence kernel untouched) stay exact.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from harness.analyze.stats import judge
from tests.fixtures.spyre_repo import plant_slowdown

#: Long end-to-end runs: `make test-extended` (CI runs it after `make test`).
pytestmark = pytest.mark.extended

#: One torch thread for the timed kernels (torch reads it at import).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "SPYRE_BENCH_THREADS": "1"}
ARGS = ["--block-size", "64", "--max-model-len", "512", "--workload", "bimodal", "--timings",
        "--json", "-"]


def compare(base, head, *extra, markdown=None):
    more = ["--markdown", str(markdown)] if markdown else []
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", "--base", base, "--head",
                           head, *ARGS, *more, *extra], capture_output=True, text=True,
                          env={**os.environ, **ONE_THREAD})
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def verdicts(data) -> dict[str, str]:
    """Kernel probe -> its verdict (the host timings of build() and forward() apart)."""
    return {t["params"]["probe"]: t["verdict"]["kind"] for t in data["timings"]
            if "probe" in t["params"]}


def host_verdicts(data) -> dict[tuple, str]:
    return {(t["benchmark"], t["params"]["workload"], t["params"]["path"]): t["verdict"]["kind"]
            for t in data["timings"] if "probe" not in t["params"]}


def test_a_a_comparison_reports_no_timing_change(spyre_repo, tmp_path):
    spec = spyre_repo.spec("810-clamp")
    code, data = compare(spec, spec, markdown=tmp_path / "c.md")
    kinds = verdicts(data)
    assert set(kinds) == {"small-4x8", "small-4x8-per-seq", "notes-4x16", "review-4x3-kv-above"}
    assert not {"regression", "improvement"} & set(kinds.values()), data["timings"]
    assert not {"regression", "improvement"} & set(host_verdicts(data).values()), data["timings"]
    if len(os.sched_getaffinity(0)) > 1:   # both workers timed on the same core
        assert any("pinned to CPU" in note for note in data["timing_notes"]), data
    assert code == 0 and data["exact_changed"] == []
    assert data["oracle"] == {"matched": 4, "checked": 4} and data["timings_measured"]
    text = (tmp_path / "c.md").read_text()
    assert "oracle\\: 4/4 probes match" in text and "timings not measured" not in text
    if not data["timing_advisory"] and "inconclusive" not in kinds.values():
        assert text.startswith("### spyre-bench: 🟢 no change")   # nothing left to doubt
    else:
        assert text.startswith("### spyre-bench: ⚪ no change found")


def test_planted_4x_slowdown_is_a_regression(spyre_repo, tmp_path):
    slow = plant_slowdown(spyre_repo, "810-clamp", times=4)
    code, data = compare(spyre_repo.spec("810-clamp"), spyre_repo.spec(slow),
                         markdown=tmp_path / "c.md")
    kinds = verdicts(data)
    batched = ("small-4x8", "notes-4x16", "review-4x3-kv-above")
    assert all(kinds[p] == "regression" for p in batched), data["timings"]
    # its kernel is unchanged: never credited with the planted 4x, nor with any change
    assert kinds["small-4x8-per-seq"] in ("no change", "inconclusive"), data["timings"]
    ratios = [t["verdict"]["ratio"] for t in data["timings"]
              if t["params"].get("probe") in batched]
    # 4.3-7.4x measured (the kernel's fixed cost aside); never near the 1.25x a noisy A/A shows
    assert all(2.5 < r < 12 for r in ratios), ratios
    assert code == 1 and data["exact_changed"] == []          # a pure timing change
    text = (tmp_path / "c.md").read_text().replace("\\", "")
    assert text.startswith("### spyre-bench: 🔴")
    assert re.search(r"🔴 timing regression.*probe notes-4x16 [^:]*: \d\.\d\d× \(slower; .*95% CI "
                     r"\d\.\d\d–\d\.\d\d×", text)


@pytest.mark.parametrize("scale,expected", [(1.0, {"no change"}), (1.6, {"regression"}),
                                            (0.5, {"improvement"})])
def test_judge_on_synthetic_noise(scale, expected):
    rng = np.random.default_rng(7)
    base = rng.lognormal(0, 0.08, 20)
    assert judge(base, rng.lognormal(0, 0.08, 20) * scale).kind in expected


def test_judge_says_what_would_settle_an_inconclusive_result():
    v = judge([1.0, 1.5, 0.8, 1.3, 0.9], [1.6, 1.1, 2.0, 1.2, 1.9])
    assert v.kind == "inconclusive" and "more samples" in v.advice and "quieter" in v.advice
    assert judge([1.0], [2.0]).kind == "inconclusive"
