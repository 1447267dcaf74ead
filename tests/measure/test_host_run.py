"""What time_host says about paths and probes a side cannot take, on fake sides (no timing):
once per path, skipped where the base cannot, lost where only the head cannot."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config import EngineConfig
from harness.errors import CapabilityMissing, SubjectRaised
from harness.matrix import Case, override_set
from harness.measure import host_run
from harness.workloads import specs


class FakeSubject:
    def __init__(self, name, lacks=(), raises=()):
        self.spec = self.identity = name
        self.capabilities = frozenset({"forward"})
        self.lacks_paths, self.raises = set(lacks), set(raises)

    def lacks(self, capability):
        return None


class FakeSide:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.closed = False

    def calls_per_sample(self, min_sample_s):
        return 1

    def sample(self, number):
        return float(np.exp(self.rng.normal(0, 0.01)))

    def profile(self, top):
        return {"seconds": 1.0, "passes": 1, "functions": []}

    def close(self):
        self.closed = True


@pytest.fixture
def prepared(monkeypatch):
    sides = []

    def prepare(probe, subject, device):
        if probe.path in subject.lacks_paths:
            raise CapabilityMissing(f"{subject.spec} does not know the {probe.path} knob")
        if (probe.kind, probe.workload.name) in subject.raises:
            raise SubjectRaised(f"{subject.spec}: subject raised in build()")
        side = FakeSide(len(sides))
        sides.append(side)
        return side

    monkeypatch.setattr(host_run, "prepare", prepare)
    monkeypatch.setattr(host_run, "select", lambda name: None)
    return sides


def run(base, head):
    case = Case(EngineConfig(block_size=64, max_model_len=512), override_set("batched"))
    return host_run.time_host(base, head, [case], specs(["bimodal", "uniform-short"], steps=2))


def test_a_path_the_base_lacks_is_one_skip_and_one_the_head_lacks_is_lost(prepared):
    found = run(FakeSubject("base", lacks={"jagged", "head-major"}),
                FakeSubject("head", lacks={"jagged", "per-sequence"}))
    timed = {(t[0].split(".")[1], t[1]["path"], t[1]["workload"]) for t in found.timings}
    # only the batched path is taken by both: build() and forward() of both workloads
    assert timed == {(k, "batched", w) for k in ("Build", "Forward")
                     for w in ("bimodal", "uniform-short")}
    assert found.lost == [("host timing, path per-sequence",
                           "head does not know the per-sequence knob")]
    assert found.skipped == [("host timing, path head-major (base)",
                              "base does not know the head-major knob"),
                             ("host timing, path jagged", "base does not know the jagged knob")]
    assert all(side.closed for side in prepared)
    assert all(t[6] is not None for t in found.timings if t[0].endswith("time_build"))
    assert all(t[6] is None for t in found.timings if t[0].endswith("time_forward"))


def test_a_head_whose_own_code_fails_on_one_probe_loses_that_probe_only(prepared):
    found = run(FakeSubject("base", lacks={"jagged", "head-major", "per-sequence"}),
                FakeSubject("head", lacks={"jagged", "head-major", "per-sequence"},
                            raises={("build", "bimodal")}))
    assert found.lost == [("host.Build.time_build workload bimodal, path batched",
                           "head: subject raised in build()")]
    assert len(found.timings) == 3 and all(side.closed for side in prepared)


def test_neither_side_with_a_builder_is_one_skip():
    class Reference(FakeSubject):
        def lacks(self, capability):
            return "reference has no forward"
    base = Reference("reference")
    base.capabilities = frozenset()
    found = run(base, base)
    assert found.timings == [] and found.skipped == [("host timing", "reference has no forward")]
