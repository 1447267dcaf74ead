"""Cost per decode step and per workload: loop iterations, padding, host-to-device bytes, keys.

Formulas (docs/spyre-inference.md, section 4), e = dtype bytes, S(x) = 32·ceil(x/32):

* batched, generation A: B_b loop iterations per layer; H2D = query_row_ids 8·B_s +
  block_ids 4·B_b·S(B_s) + mask e·B_b·B_s·KV·bs, three transfers.
* batched, generation B (chunked): num_chunks iterations; the kernel walks
  num_chunks·blocks_per_chunk blocks; block_ids 4·(chunks·per_chunk)·S(B_s); the mask is
  fp16, [chunks, B_s·per_chunk·KV, 1, bs].
* per-sequence: one launch per sequence of P_s iterations. spyre-inference gives no transfer layout for
  this path; the model assumes a block table (4·P_s) and a key mask (e·q_bucket·P_s·bs) per
  sequence, two transfers each, and says so wherever the figure is shown.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from harness.config import EngineConfig, check_step_bytes
from harness.ladders import stick_padded
from harness.model.dispatch import CompileKey, Dispatch, attn_key, batched_key, dispatch
from harness.subjects.base import Bucketing
from harness.workloads import Step, Workload

FP16_BYTES = 2


@dataclass(frozen=True)
class StepCost:
    dispatch: Dispatch
    iterations_per_layer: int
    launches_per_layer: int
    real_kv_tokens: int
    padded_kv_slots: int
    decode_tokens: int
    #: Host-to-device bytes per step by tensor ("mask", "block_ids", ...).
    h2d: dict[str, int]
    transfers: int
    keys: tuple[CompileKey, ...]

    @property
    def h2d_bytes(self) -> int:
        return sum(self.h2d.values())


def step_cost(bucketing: Bucketing, config: EngineConfig, step: Step) -> StepCost:
    d = dispatch(bucketing, config.block_size, step)
    bs, kv, e = config.block_size, config.num_kv_heads, config.dtype_bytes
    iterations = launches = padded = transfers = 0
    h2d: Counter[str] = Counter()
    keys = []
    if d.batched:
        launches, transfers = 1, 3
        if d.num_chunks is None:
            iterations, walked, mask_bytes = d.b_blocks, d.b_blocks, e
        else:
            iterations = d.num_chunks
            walked, mask_bytes = d.num_chunks * d.blocks_per_chunk, FP16_BYTES
        padded = d.b_seqs * walked * bs
        h2d["query_row_ids"] = 8 * d.b_seqs
        h2d["block_ids"] = 4 * walked * stick_padded(d.b_seqs)
        h2d["mask"] = mask_bytes * walked * d.b_seqs * kv * bs
        keys.append(batched_key(bucketing, d.b_seqs, d.b_blocks))
    for nb, qb in d.per_sequence:
        iterations += nb
        launches += 1
        padded += nb * bs
        h2d["per_seq_block_table"] += 4 * nb
        h2d["per_seq_mask"] += e * qb * nb * bs
        transfers += 2
        keys.append(attn_key(nb, qb))
    check_step_bytes(sum(h2d.values()), "keys " + " ".join(map(str, keys)))
    return StepCost(
        dispatch=d, iterations_per_layer=iterations, launches_per_layer=launches,
        real_kv_tokens=sum(s.seq_len for s in step), padded_kv_slots=padded,
        decode_tokens=sum(1 for s in step if s.is_decode), h2d=dict(h2d), transfers=transfers,
        keys=tuple(keys),
    )


def warmup_keys(bucketing: Bucketing) -> frozenset[CompileKey]:
    """Every compile key the subject records at warmup (per-sequence and batched)."""
    keys = {attn_key(nb, qb) for nb, qb in bucketing.variants}
    keys.update(batched_key(bucketing, ns, nb) for ns, nb in bucketing.batched_variants)
    return frozenset(keys)


@dataclass(frozen=True)
class WorkloadCost:
    workload: str
    num_layers: int
    steps: list[StepCost] = field(repr=False)
    warmup: frozenset[CompileKey] = field(repr=False)
    #: The engine's one-time transfers ({"transfers": n, "by_tensor": {name: bytes}}), which no
    #: step pays for; None where the subject does not say (the reference model).
    setup: dict | None = field(default=None, repr=False)

    def _sum(self, attr: str) -> int:
        return sum(getattr(s, attr) for s in self.steps)

    @property
    def paths(self) -> Counter[str]:
        return Counter(s.dispatch.path for s in self.steps)

    @property
    def reasons(self) -> Counter[str]:
        return Counter(s.dispatch.reason for s in self.steps)

    @property
    def iterations_per_layer(self) -> int:
        return self._sum("iterations_per_layer")

    @property
    def iterations_per_step(self) -> float:
        """Mean kernel loop iterations per step, all layers."""
        return self.iterations_per_layer * self.num_layers / len(self.steps)

    @property
    def real_kv_tokens(self) -> int:
        return self._sum("real_kv_tokens")

    @property
    def padded_kv_slots(self) -> int:
        return self._sum("padded_kv_slots")

    @property
    def padded_per_real_token(self) -> float:
        return self.padded_kv_slots / self.real_kv_tokens

    @property
    def h2d_bytes(self) -> int:
        return sum(s.h2d_bytes for s in self.steps)

    @property
    def h2d_by_tensor(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for s in self.steps:
            total.update(s.h2d)
        return dict(sorted(total.items()))

    @property
    def mask_bytes(self) -> int:
        """Bytes of the batched mask: ``mask`` here, ``mask_by_block`` / ``mask_by_chunk`` where
        a subject's own builder names its tensors."""
        return sum(v for k, v in self.h2d_by_tensor.items() if k == "mask" or
                   k.startswith("mask_"))

    @property
    def transfers(self) -> int:
        return self._sum("transfers")

    @property
    def keys(self) -> tuple[CompileKey, ...]:
        """Distinct compile keys reached, sorted."""
        return tuple(sorted({k for s in self.steps for k in s.keys}))

    @property
    def late_compiles(self) -> tuple[CompileKey, ...]:
        """Keys the workload reaches that warmup does not record: compiled while serving."""
        return tuple(k for k in self.keys if k not in self.warmup)

    def keys_of(self, kernel_prefix: str) -> tuple[CompileKey, ...]:
        return tuple(k for k in self.keys if k.kernel.startswith(kernel_prefix))

    def step_rows(self) -> list[dict]:
        """One row per step: the dispatch decision and its exact cost."""
        rows = []
        for i, s in enumerate(self.steps):
            d = s.dispatch
            rows.append({
                "step": i, "path": d.path, "reason": d.reason, "batched_seqs": d.batched,
                "b_seqs": d.b_seqs, "b_blocks": d.b_blocks,
                "blocks_per_chunk": d.blocks_per_chunk, "num_chunks": d.num_chunks,
                "per_sequence_buckets": [list(p) for p in d.per_sequence],
                "iterations_per_layer": s.iterations_per_layer,
                "iterations_per_step": s.iterations_per_layer * self.num_layers,
                "launches_per_layer": s.launches_per_layer,
                "real_kv_tokens": s.real_kv_tokens, "padded_kv_slots": s.padded_kv_slots,
                "h2d_bytes": s.h2d_bytes, "h2d_bytes_by_tensor": s.h2d, "transfers": s.transfers,
                "compile_keys": sorted({str(k) for k in s.keys}),
            })
        return rows

    def as_dict(self, per_step: bool = False) -> dict:
        n = len(self.steps)
        return {
            "workload": self.workload,
            "steps": n,
            "paths": dict(sorted(self.paths.items())),
            "reasons": dict(sorted(self.reasons.items())),
            "iterations_per_layer_total": self.iterations_per_layer,
            "iterations_per_layer_mean": self.iterations_per_layer / n,
            "iterations_per_step_mean": self.iterations_per_step,
            "launches_per_layer_mean": self._sum("launches_per_layer") / n,
            "real_kv_tokens": self.real_kv_tokens,
            "padded_kv_slots": self.padded_kv_slots,
            "padded_slots_per_real_token": self.padded_per_real_token,
            "padding_efficiency": self.real_kv_tokens / self.padded_kv_slots,
            "h2d_bytes_total": self.h2d_bytes,
            "h2d_bytes_per_step": self.h2d_bytes / n,
            "h2d_bytes_by_tensor": self.h2d_by_tensor,
            "mask_bytes_per_step": self.mask_bytes / n,
            "transfers_per_step": self.transfers / n,
            "distinct_compile_keys": len(self.keys),
            "distinct_batched_keys": len(self.keys_of("batched")),
            "compile_keys": [str(k) for k in self.keys],
            "warmup_variants": len(self.warmup),
            "late_compiles": len(self.late_compiles),
            "late_compile_keys": [str(k) for k in self.late_compiles],
            **({"setup_transfers": self.setup["transfers"],
                "setup_h2d_bytes": sum(self.setup["by_tensor"].values()),
                "setup_h2d_bytes_by_tensor": dict(sorted(self.setup["by_tensor"].items()))}
               if self.setup is not None else {}),
            **({"per_step": self.step_rows()} if per_step else {}),
            # what the commit's code warned while its builder was built (only where it did)
            **({"notes": list(self.setup["notes"])}
               if self.setup is not None and self.setup.get("notes") else {}),
        }


def workload_cost(bucketing: Bucketing, config: EngineConfig, workload: Workload) -> WorkloadCost:
    workload.check_fits(config)
    steps = [step_cost(bucketing, config, step) for step in workload.steps]
    return WorkloadCost(workload.name, config.num_layers, steps, warmup_keys(bucketing))
