"""Timing statistics and device selection, on exact inputs (no assertion is about speed)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import pytest
import torch

from harness.measure import device as devices
from harness.measure.device import Device, DeviceError, HostLoad, select
from harness.measure.timing import MIN_SAMPLES, Samples, measure, median_ci, summarize

CPU = Device("cpu", torch.device("cpu"), "cpu (test)")


def test_summary_of_known_samples():
    xs = [float(v) for v in range(1, 21)]  # 1..20
    s = summarize(xs)
    assert s.n == 20 and s.median == 10.5 and s.min == 1.0 and s.max == 20.0
    assert (s.q1, s.q3) == (5.75, 15.25) and s.iqr == 9.5
    assert s.mad == 5.0 and s.mean == 10.5 and s.stdev == pytest.approx(statistics.stdev(xs))
    # distribution-free 95% CI of the median for n = 20: ranks 6 and 15
    assert (s.ci_low, s.ci_high) == (6.0, 15.0)
    assert s.ci_level == pytest.approx(0.9586, abs=1e-4)


def test_median_ci_with_too_few_samples_is_the_range_and_says_so():
    low, high, level = median_ci([1.0, 2.0, 3.0])
    assert (low, high) == (1.0, 3.0) and level == pytest.approx(0.75)


def test_stable_samples_raise_no_warning():
    s = summarize([100.0, 101.0, 99.0, 100.5, 100.2, 99.8, 100.1])
    assert not s.unstable and s.spread < 0.01


def test_unstable_samples_warn_like_pyperf():
    s = summarize([100.0, 140.0, 70.0, 130.0, 90.0, 160.0, 100.0])
    assert s.unstable and any(w.startswith("unstable: IQR is") for w in s.warnings)
    assert not summarize([100.0, 140.0, 70.0, 130.0, 90.0, 160.0, 100.0], threshold=1.0).unstable
    assert any("only 2 samples" in w for w in summarize([1.0, 1.0]).warnings)
    assert any("below the median" in w for w in summarize([10.0, 10.0, 10.0, 10.0, 2.0]).warnings)


def test_measure_keeps_raw_samples_and_checks_first_and_last_results():
    calls, checked = [], []

    def fn():
        calls.append(1)
        return len(calls)

    s = measure(CPU, fn, repeat=5, warmup=2, number=3, check=checked.append)
    assert len(s.us_per_call) == 5 and s.number == 3 and s.warmup == 2
    assert len(calls) == 2 + 5 * 3
    assert checked == [1, len(calls)]  # the first warmup result and the last timed one
    assert all(v > 0 for v in s.us_per_call) and s.first_call_s > 0


def test_measure_calibrates_calls_per_sample():
    s = measure(CPU, lambda: None, repeat=2, warmup=1, min_sample_s=1e-3)
    assert s.number > 1


class _Clock:
    """A clock that each call of the timed function moves on by ``step`` seconds."""

    def __init__(self, step: float):
        self.now, self.step, self.calls = 0.0, step, 0

    def fn(self):
        self.calls += 1
        self.now += self.step

    def __call__(self) -> float:
        return self.now


def test_a_time_budget_stops_sampling_and_says_so():
    clock = _Clock(0.125)
    s = measure(CPU, clock.fn, repeat=50, warmup=3, number=1, budget_s=1.5, clock=clock)
    # 0.375 s of first call and warmup (both extra warmup calls start within half the budget),
    # then samples until the clock reaches 1.5 s: 9 of the 50 asked for
    assert len(s.us_per_call) == 9 and clock.calls == 12
    assert (s.repeat, s.stopped) == (50, "time budget")
    unbounded = measure(CPU, clock.fn, repeat=50, warmup=3, number=1, clock=clock)
    assert len(unbounded.us_per_call) == 50 and unbounded.stopped == "repeat"


def test_a_spent_budget_still_takes_the_fewest_samples_and_no_more_warmup():
    clock = _Clock(0.125)
    s = measure(CPU, clock.fn, repeat=50, warmup=3, number=1, budget_s=0.05, clock=clock)
    assert len(s.us_per_call) == MIN_SAMPLES and clock.calls == 1 + MIN_SAMPLES
    assert s.stopped == "time budget"
    # fewer samples than asked are reported as they are: the summary keeps its n
    assert s.summary().n == MIN_SAMPLES


def test_a_failing_check_stops_before_any_timing():
    timed = []

    def wrong(result):
        raise AssertionError("wrong output")

    with pytest.raises(AssertionError, match="wrong output"):
        measure(CPU, lambda: timed.append(1), repeat=50, warmup=1, number=1, check=wrong)
    assert len(timed) == 1


def test_device_selection_on_this_machine(monkeypatch):
    assert select("cpu").name == "cpu"
    monkeypatch.setattr(devices, "_spyre_available", lambda: False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert select("auto").name == expected
    with pytest.raises(DeviceError, match="torch_spyre does not import"):
        select("spyre")
    with pytest.raises(DeviceError, match="expected one of"):
        select("tpu")
    with pytest.raises(DeviceError, match="takes no index"):
        select("cpu:1")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="CUDA is not available"):
            select("cuda")


def test_auto_prefers_spyre_when_torch_spyre_imports(monkeypatch):
    monkeypatch.setattr(devices, "_spyre_available", lambda: True)
    # auto goes for spyre first; this torch has no 'spyre' device type registered, so it says so
    with pytest.raises(DeviceError, match="--device spyre: torch_spyre imported but torch has"):
        select("auto")


def test_cpu_allocator_is_settled_once_and_recorded():
    note = select("cpu").prepare()
    assert note is None or note.startswith("glibc mallopt")
    assert select("cpu").as_dict()["host_allocator"] == note


def test_host_load_sees_a_busy_neighbour():
    spin = "import time\nend = time.time() + 3\nwhile time.time() < end: pass"
    spinner = subprocess.Popen([sys.executable, "-c", spin])
    try:
        time.sleep(0.3)
        with HostLoad() as load:
            time.sleep(0.8)
    finally:
        spinner.kill()
        spinner.wait()
    assert load.others_cores is not None and load.others_cores >= 0.4


def test_a_busy_host_is_a_warning_even_when_samples_are_tight():
    tight = (100.0, 100.5, 99.5, 100.2, 99.9)
    assert not Samples(tight, 1, 1, 0.0, others_cores=0.05).summary().unstable
    busy = Samples(tight, 1, 1, 0.0, others_cores=0.9).summary()
    assert any(w.startswith("busy host: other processes used 0.90 cores") for w in busy.warnings)
