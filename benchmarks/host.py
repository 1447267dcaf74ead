"""Host benchmarks: CPU seconds of the subject's own ``build()`` per step and ``forward()`` per
layer outside its kernels (harness.measure.host), per workload of the tier and attention path,
at the one config of the tier harness.measure.host.host_config picks.

A sample is one call: each step of the workload in turn. ASV re-runs ``setup`` before every
sample when a class has one: the prepared probe, with its place in the steps, is kept per process,
and ``setup`` makes what the next call needs untimed (a forward's metadata and first layer).
torch and Dynamo are imported at module level on purpose: ASV's forkserver imports the suite
once, and a forward probe's first recorded call needs Dynamo (seconds to import) in every
benchmark process otherwise.
"""

import torch  # noqa: F401  (preloaded for the forkserver; see the module docstring)
import torch._dynamo  # noqa: F401

from harness import suite
from harness.errors import HarnessError
from harness.measure import host
from harness.measure.device import select
from harness.registry import describe
from harness.workloads import specs

_SPECS = {s.name: s for s in specs(steps=suite.tier().steps)}
#: (kind, workload, path) -> a prepared probe, or the reason it cannot be (kept per process).
_PREPARED: dict = {}


def _probe(kind: str, workload: str, path: str) -> host.HostProbe:
    config = host.host_config([c.config for c in suite.cases()])
    return host.HostProbe(kind, path, _SPECS[workload].build(config), config)


class _HostTime:
    KIND = ""
    params = [list(_SPECS), list(host.PATHS)]
    param_names = ["workload", "path"]
    timer = host.CLOCK
    timeout = 300
    #: Every step at least once, each up to four times, within 5 s a combination.
    repeat = (suite.tier().steps, 4 * suite.tier().steps, 5.0)
    warmup_time = 0.05

    def setup(self, workload, path):
        key = (self.KIND, workload, path)
        if key not in _PREPARED:
            try:
                cpu = select("cpu")
                cpu.prepare(suite.torch_threads())
                _PREPARED[key] = host.prepare(_probe(self.KIND, workload, path),
                                              suite.subject(), cpu)
            except HarnessError as exc:
                _PREPARED[key] = str(exc)
        prepared = _PREPARED[key]
        if isinstance(prepared, str):
            suite.skip(f"{host.BENCHMARKS[self.KIND]}[{workload}, {path}]", prepared)
        prepared.ready()
        self.prepared = prepared


class Build(_HostTime):
    """The subject's own ``build()``, one step of the workload per call."""

    KIND = "build"

    def time_build(self, workload, path):
        self.prepared.call()
    describe(time_build, host.BENCHMARKS["build"])


class Forward(_HostTime):
    """One layer of the subject's own ``forward()`` outside its kernels, one step per call."""

    KIND = "forward"

    def time_forward(self, workload, path):
        self.prepared.call()
    describe(time_forward, host.BENCHMARKS["forward"])
