"""Named kernel probes: one config, env overrides and batch, timed for whichever subject.

A probe fixes the batch; the subject's own bucketing decides the bucket and its own kernel runs,
so the same probe times generation A at one commit and generation B at another. Shared by the
ASV suite (benchmarks/kernel.py) and the pytest-benchmark microbenchmarks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from harness.config import BATCHED_DECODE, Overrides
from harness.errors import HarnessError
from harness.generations import Generation
from harness.measure.inputs import StepCalls, Workspace, check_generation
from harness.measure.oracle import check_step
from harness.measure.probe_set import (  # noqa: F401  (the table, re-exported)
    FULL,
    KV_ABOVE,
    NOTES,
    ON,
    QUICK,
    REVIEW,
    SMALL,
    TIERS,
    Probe,
    for_subjects,
)
from harness.measure.timing import TimedLayer
from harness.subjects.base import Subject
from harness.subjects.reference.kernels import attend_sequence
from harness.worker import is_worker
from harness.workloads import parse_step


class ProbeSkipped(HarnessError):
    """The subject cannot run this probe (no kernel, generation mismatch, cache too large)."""


@dataclass
class Prepared(TimedLayer):
    """A probe's calls for one subject, already checked against the oracle once."""

    probe: Probe
    bucketing: object
    calls: StepCalls
    kernel: object
    generation: Generation
    device: object

    def run_layer(self):
        """One layer's kernel calls, synchronised (what a timer should wrap)."""
        out = self.calls.run(self.kernel, attend_sequence)
        self.device.synchronize()
        return out

    def check(self, outputs=None) -> None:
        check_step(self.calls, outputs if outputs is not None else self.run_layer())


def prepare(probe: Probe, subject: Subject, device) -> Prepared:
    """Build the probe's inputs for ``subject`` and check its kernel once (KernelMismatch)."""
    if is_worker(subject):
        from harness.worker.proxy import RemoteProbe
        return RemoteProbe(subject, probe, device)
    found = subject.decode_kernel()
    if found is None and "forward" in subject.capabilities:
        return _prepare_forward(probe, subject, device)
    if found is None:
        raise ProbeSkipped(subject.lacks("decode_kernel_a") or
                           f"{subject.spec} has no batched decode kernel")
    kernel, generation = found
    config = probe.engine_config()
    bucketing = subject.bucketing(config, Overrides.from_env(probe.env))
    if probe.per_sequence:
        bucketing = dataclasses.replace(bucketing, batched_enabled=False)
    check_generation(generation, bucketing)
    step = parse_step(probe.step, probe.name)
    ws = Workspace.for_steps(config, [step], device.torch_device)
    prepared = Prepared(probe, bucketing, ws.step(bucketing, step), kernel, generation, device)
    prepared.check()
    return prepared


def _prepare_forward(probe: Probe, subject: Subject, device):
    """The probe through the subject's own builder and forward (kernels of any convention); the
    per-sequence baseline is the same batch with batched decode off (said: a commit's own
    default may be on)."""
    from harness.measure.forward import PreparedForward

    env = dict(probe.env)
    if probe.per_sequence:
        env[BATCHED_DECODE] = "0"
    overrides = Overrides.from_env(env)
    unknown = subject.unknown_knobs(overrides)
    if unknown:   # it would run its default path under this probe's name
        raise ProbeSkipped(f"{subject.origin} has no knob {', '.join(unknown)}")
    return PreparedForward(subject, probe.engine_config(), overrides,
                           parse_step(probe.step, probe.name), device)

