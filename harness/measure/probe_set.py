"""The named kernel probes as data: each one config, env overrides and batch (torch-free, so the
comparison document can say what a probe's figures are of without a device; the timing itself is
:mod:`harness.measure.probes`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.config import BATCHED_DECODE, EngineConfig

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


def describe(name: str) -> dict | None:
    """What a probe is, for a reader of its figures: its config, step and env in full (None for
    a name no tier has)."""
    probe = next((p for p in FULL + PATH_PROBES if p.name == name), None)
    if probe is None:
        return None
    config = {k: v for k, v in probe.config.items()
              if k in ("block_size", "max_model_len", "max_num_seqs")}
    return {"config": config, "step": probe.step, "env": dict(probe.env),
            "per_sequence": probe.per_sequence}
