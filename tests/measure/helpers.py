"""Small shapes shared by the measurement tests: every kernel call takes milliseconds."""

from __future__ import annotations

from harness.config import EngineConfig, Overrides
from harness.subjects import resolve_subject

SMALL = EngineConfig(block_size=64, max_model_len=256, max_num_seqs=8,
                     max_num_batched_tokens=256, num_kv_heads=2, queries_per_kv=2, head_size=16,
                     dtype="float16", num_layers=2)
BATCHED = Overrides.from_env({"SPYRE_BATCHED_DECODE": "1"})


def subject_and_bucketing(policy: str, config: EngineConfig = SMALL,
                          overrides: Overrides = BATCHED):
    subject = resolve_subject(f"reference:{policy}")
    return subject, subject.bucketing(config, overrides)
