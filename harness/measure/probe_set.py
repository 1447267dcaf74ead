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


def describe(name: str) -> dict | None:
    """What a probe is, for a reader of its figures: its config, step and env in full (None for
    a name no tier has)."""
    probe = next((p for p in FULL if p.name == name), None)
    if probe is None:
        return None
    config = {k: v for k, v in probe.config.items()
              if k in ("block_size", "max_model_len", "max_num_seqs")}
    return {"config": config, "step": probe.step, "env": dict(probe.env),
            "per_sequence": probe.per_sequence}
