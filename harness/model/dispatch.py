"""The metadata builder's dispatch rules: which path a step takes, on which buckets, and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from harness.errors import HarnessError
from harness.ladders import ceil_div, round_up
from harness.subjects.base import Bucketing
from harness.workloads import Step


class CompileKey(NamedTuple):
    """One compiled graph: the kernel and the constants it specialises on."""

    kernel: str  # "attn" (per-sequence), "batched" (generation A), "batched_chunked" (B)
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.kernel}{list(self.shape)}"


def attn_key(num_blocks: int, query_bucket: int) -> CompileKey:
    return CompileKey("attn", (num_blocks, query_bucket))


def batched_key(bucketing: Bucketing, b_seqs: int, b_blocks: int) -> CompileKey:
    if bucketing.chunking is None:
        return CompileKey("batched", (b_seqs, b_blocks))
    return CompileKey("batched_chunked", (b_seqs, *bucketing.chunking(b_seqs, b_blocks)))


@dataclass(frozen=True)
class Dispatch:
    """How one step runs: the first ``batched`` sequences in one batched call, the rest alone."""

    batched: int
    reason: str
    b_seqs: int | None = None
    b_blocks: int | None = None
    blocks_per_chunk: int | None = None
    num_chunks: int | None = None
    #: (padded num_blocks, query bucket) of every sequence on the per-sequence path.
    per_sequence: tuple[tuple[int, int], ...] = ()
    #: Sequences a jagged-attention plan served (the commit's builder packs the whole step).
    jagged: int = 0

    @property
    def path(self) -> str:
        if self.jagged:
            return "jagged"
        if not self.batched:
            return "per-sequence"
        return "batched" if not self.per_sequence else "mixed"


class ModelError(HarnessError):
    """A step that the subject's ladders cannot bucket at all."""


def _batched_candidates(bucketing: Bucketing, step: Step) -> tuple[int, str | None]:
    """How many leading sequences may go batched, or 0 and the reason none can."""
    if not bucketing.batched_enabled:
        return 0, bucketing.batched_declined or "SPYRE_BATCHED_DECODE off"
    decodes = next((i for i, s in enumerate(step) if not s.is_decode), len(step))
    if decodes < len(step) and not bucketing.decode_prefix_batched:
        return 0, f"{len(step) - decodes} prefill sequence(s) in the batch"
    if decodes < bucketing.min_batched_seqs:
        return 0, f"{decodes} decode(s) < minimum {bucketing.min_batched_seqs}"
    return decodes, None


def dispatch(bucketing: Bucketing, block_size: int, step: Step) -> Dispatch:
    n, reason = _batched_candidates(bucketing, step)
    fields = {}
    if n:
        b_seqs = round_up(bucketing.batched_num_seqs, n)
        real_blocks = max(ceil_div(s.seq_len, block_size) for s in step[:n])
        b_blocks = round_up(bucketing.batched_num_blocks, real_blocks)
        if b_seqs is None:
            n, reason = 0, f"{n} decodes above the top num_seqs bucket {bucketing.batched_num_seqs}"
        elif b_blocks is None:
            n, reason = 0, (f"{real_blocks} blocks above the top num_blocks bucket "
                            f"{bucketing.batched_num_blocks}")
        else:
            reason = "batched" if n == len(step) else "decode prefix batched"
            fields = {"b_seqs": b_seqs, "b_blocks": b_blocks}
            if bucketing.chunking is not None:
                per_chunk, chunks = bucketing.chunking(b_seqs, b_blocks)
                fields.update(blocks_per_chunk=per_chunk, num_chunks=chunks)
    return Dispatch(n, reason, per_sequence=tuple(
        _per_sequence_bucket(bucketing, block_size, s) for s in step[n:]), **fields)


def _per_sequence_bucket(bucketing: Bucketing, block_size: int, seq) -> tuple[int, int]:
    blocks = ceil_div(seq.seq_len, block_size)
    nb = round_up(bucketing.num_blocks, blocks)
    if nb is None:
        raise ModelError(f"sequence of {seq.seq_len} tokens ({blocks} blocks) is above the top "
                         f"num_blocks bucket {bucketing.num_blocks[-1:]}")
    if seq.is_decode:
        return nb, 1  # decodes pad to query width 1 without asking the bucketer
    qb = round_up(bucketing.query, seq.query_len)
    if qb is None:
        raise ModelError(f"query of {seq.query_len} tokens is above the top query bucket "
                         f"{bucketing.query[-1:]}")
    return nb, qb
