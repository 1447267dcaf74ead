"""Per-config figures that need no workload: ladder sizes, warmup records, reachable and dead keys.

"Reachable" means some admissible batch lands on it: batched num_seqs buckets reached by 4 to
max_num_seqs decodes, num_blocks buckets reached by 1 to ceil(max_model_len / bs) blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import EngineConfig
from harness.ladders import ceil_div, reachable
from harness.model.cost import warmup_keys
from harness.model.dispatch import CompileKey, attn_key, batched_key
from harness.subjects.base import Bucketing


@dataclass(frozen=True)
class ConfigSummary:
    bucketing: Bucketing
    #: Batched keys some admissible batch reaches (none while batched decode is off).
    batched_reachable: frozenset[CompileKey]
    #: Per-sequence keys some admissible sequence reaches: every decode bucket (nb, 1), and the
    #: recorded prefill variants whose buckets some sequence reaches.
    attn_reachable: frozenset[CompileKey]
    warmup: frozenset[CompileKey]

    @property
    def dead_variants(self) -> tuple[CompileKey, ...]:
        """Recorded at warmup, reached by no batch: compile time spent for nothing."""
        return tuple(sorted(self.warmup - self.batched_reachable - self.attn_reachable))

    @property
    def unrecorded(self) -> tuple[CompileKey, ...]:
        """Keys a batch can reach that warmup does not record: potential late compiles."""
        return tuple(sorted((self.batched_reachable | self.attn_reachable) - self.warmup))

    def as_dict(self) -> dict:
        b = self.bucketing
        return {
            "ladders": {k: (list(v) if v is not None else None) for k, v in b.ladders().items()},
            "kv_buckets": len(b.kv),
            "query_buckets": len(b.query),
            "num_blocks_buckets": len(b.num_blocks),
            "variants": len(b.variants),
            "batched_variants_recorded": len(b.batched_variants),
            "batched_num_blocks_distinct": len(b.batched_num_blocks),
            "batched_keys_reachable": len(self.batched_reachable),
            "unrecorded_keys": len(self.unrecorded),
            "unrecorded_key_list": [str(k) for k in self.unrecorded],
            "dead_variants": len(self.dead_variants),
            "dead_variant_keys": [str(k) for k in self.dead_variants],
            "notes": list(b.notes),
            **({"batched_declined": b.batched_declined} if b.batched_declined else {}),
        }


def bucketer_figures(bucketing: Bucketing) -> dict:
    """:meth:`ConfigSummary.as_dict`'s figures that need only the bucketer (its ladders and
    per-sequence variants): those of a bucketing whose batched ladders are None."""
    b = bucketing
    return {"ladders": {k: (list(v) if v is not None else None) for k, v in b.ladders().items()},
            "kv_buckets": len(b.kv), "query_buckets": len(b.query),
            "num_blocks_buckets": len(b.num_blocks), "variants": len(b.variants),
            "notes": list(b.notes), "batched_unavailable": b.builder_failed}


def summarize(bucketing: Bucketing, config: EngineConfig) -> ConfigSummary:
    max_blocks = ceil_div(config.max_model_len, config.block_size)
    seqs = reachable(bucketing.batched_num_seqs, bucketing.min_batched_seqs, config.max_num_seqs)
    blocks = reachable(bucketing.batched_num_blocks, 1, max_blocks)
    batched = frozenset(batched_key(bucketing, ns, nb) for ns in seqs for nb in blocks
                        if bucketing.batched_enabled)
    per_seq_blocks = reachable(bucketing.num_blocks, 1, max_blocks)
    queries = reachable(bucketing.query, 2, config.max_num_batched_tokens)
    attn = {attn_key(nb, 1) for nb in per_seq_blocks}
    attn.update(attn_key(nb, qb) for nb, qb in bucketing.variants
                if nb in per_seq_blocks and qb in queries)
    return ConfigSummary(bucketing, batched, frozenset(attn), warmup_keys(bucketing))
