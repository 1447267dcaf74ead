"""Named kernel probes: one config, env overrides and batch, timed for whichever subject.

A probe fixes the batch; the subject's own bucketing decides the bucket and its own kernel runs,
so the same probe times generation A at one commit and generation B at another. Shared by the
ASV suite (benchmarks/kernel.py) and the pytest-benchmark microbenchmarks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from harness.config import BATCHED_DECODE, EngineConfig, Overrides
from harness.errors import HarnessError
from harness.generations import Generation
from harness.measure.inputs import StepCalls, Workspace, check_generation
from harness.measure.oracle import check_step
from harness.measure.timing import TimedLayer
from harness.subjects.base import Subject
from harness.subjects.reference.kernels import attend_sequence
from harness.worker import is_worker
from harness.workloads import parse_step

#: Small shapes: cheap enough for every PR run and the default test run.
SMALL = dict(block_size=64, max_model_len=512, max_num_seqs=8, max_num_batched_tokens=512,
             num_kv_heads=2, queries_per_kv=2, head_size=32, num_layers=4)
#: The standard microbenchmark: 4 sequences, 16 blocks of 128, KV 8, QPKV 4, D 128, 40 layers.
NOTES = dict(block_size=128, max_model_len=2048, num_kv_heads=8, queries_per_kv=4,
             head_size=128, num_layers=40)
#: The #810 review's example: block_size 64, max_model_len 2048.
REVIEW = dict(NOTES, block_size=64)
ON = {BATCHED_DECODE: "1"}
KV_ABOVE = {**ON, "SPYRE_ATTN_KV_BUCKETS": "128,8192"}


@dataclass(frozen=True)
class Probe:
    name: str
    config: dict
    step: str
    env: dict = field(default_factory=lambda: dict(ON))
    #: Force the per-sequence path for the same batch (the baseline batching must beat).
    per_sequence: bool = False

    def engine_config(self) -> EngineConfig:
        return EngineConfig(**self.config)


QUICK = (
    Probe("small-4x8", SMALL, "512,512,512,512"),
    Probe("small-4x8-per-seq", SMALL, "512,512,512,512", per_sequence=True),
    Probe("notes-4x16", NOTES, "2048,2048,2048,2048"),
    Probe("review-4x3-kv-above", REVIEW, "150,150,150,150", env=KV_ABOVE),
)
FULL = QUICK + (
    Probe("notes-4x16-per-seq", NOTES, "2048,2048,2048,2048", per_sequence=True),
    Probe("review-4x3", REVIEW, "150,150,150,150"),
    Probe("notes-16x16", dict(NOTES, max_num_seqs=16), ",".join(["2048"] * 16)),
)
TIERS = {"quick": QUICK, "full": FULL, "tiny": (QUICK[0], QUICK[3])}

#: A small shape the newest backends take (their kernels want a head size of 64 or more).
SMALL_FORWARD = dict(SMALL, head_size=64)
#: Paths a commit offers through a knob of its own (its envs.py registry), each driven through
#: the commit's forward: jagged attention's decode groups alone and beside a query-tile group,
#: and the token-major cache where a commit defaults to head-major (its default layout is
#: what every probe above runs).
PATH_PROBES = (
    Probe("small-jagged-decodes", SMALL_FORWARD, "300,300,300,300",
          env={"SPYRE_JAGGED_ATTENTION": "1"}),
    Probe("small-jagged-mixed", SMALL_FORWARD, "300,300,300,300,200 | 1,1,1,1,100",
          env={"SPYRE_JAGGED_ATTENTION": "1"}),
    Probe("small-token-major", SMALL_FORWARD, "300,300,300,300",
          env={"SPYRE_ATTN_KV_LAYOUT": "token_major"}),
)


def for_subjects(tier: str, *subjects) -> tuple[Probe, ...]:
    """The tier's probes, then each path probe whose knobs some subject's registry declares (a
    side without them skips it, naming the knob; subjects that have none never run it)."""
    declared = set().union(*((getattr(s, "knobs", None) or {}) for s in subjects))
    return TIERS[tier] + tuple(p for p in PATH_PROBES if set(p.env) <= declared)


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

