"""Kernel inputs built the way spyre-inference's metadata builder builds them.

See docs/spyre-inference.md, section 2.

A :class:`Workspace` is what a serving process allocates once: the paged K/V cache (page 0 the
null page) and the query staging buffer. Per step, :meth:`Workspace.step` builds the host-side
metadata for the step's dispatch (the model's, so the buckets are the subject's) and copies it to
the device: scattered page ids, ``block_ids`` zero-padded to the stick width, the additive mask
(0 attended, finfo.min past the end inside the last real block, -inf for padded blocks; padded
rows finfo.min in block 0 so their softmax stays finite) and ``query_row_ids``. The byte sizes of
those tensors are the model's host-to-device figures exactly (tests prove it).

Keeping the cache and staging buffer fixed per workload matters for graph counting: under
``dynamic=False`` a cache of a different size would be a different graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from harness.config import EngineConfig
from harness.errors import HarnessError
from harness.generations import Generation
from harness.ladders import ceil_div, stick_padded
from harness.measure.settings import DEFAULT_MAX_CACHE_BYTES
from harness.model.dispatch import CompileKey, Dispatch, attn_key, batched_key, dispatch
from harness.subjects.base import Bucketing
from harness.workloads import Step

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
#: Generation B's mask is fp16 whatever the model dtype (docs/spyre-inference.md, section 3).
CHUNKED_MASK_DTYPE = torch.float16


class InputError(HarnessError):
    """A batch whose inputs cannot be built (too large for the cache limit, wrong generation)."""


def check_generation(generation: str, bucketing: Bucketing) -> None:
    """A chunked (B) kernel needs a bucketer that chunks, and a per-block (A) one must not."""
    if generation not in tuple(Generation):
        raise InputError(f"kernel generation {generation!r}: expected "
                         + " or ".join(repr(g.value) for g in Generation))
    if (generation == Generation.B) != (bucketing.chunking is not None):
        have = "chunks (batched_decode_chunking)" if bucketing.chunking else "does not chunk"
        raise InputError(f"the decode kernel is generation {generation} but the subject's "
                         f"bucketer {have}: kernel and dispatch disagree")


def torch_dtype(config: EngineConfig) -> torch.dtype:
    return DTYPES[config.dtype]


def batched_mask(seq_lens, b_seqs: int, rows: int, block_size: int, num_kv_heads: int,
                 dtype: torch.dtype) -> torch.Tensor:
    """[rows, b_seqs*KV, 1, bs]: 0 attended, finfo.min past the end in a real block, else -inf.

    Rows beyond a sequence's real blocks (B_b padding, and generation B's walked padding) are
    -inf; padded sequences (s >= n) get finfo.min in block 0 so their softmax stays finite.
    """
    n = len(seq_lens)
    lens = torch.zeros(b_seqs, dtype=torch.int64)
    lens[:n] = torch.tensor(seq_lens, dtype=torch.int64)
    real_blocks = (lens + block_size - 1) // block_size
    pos = torch.arange(rows * block_size).view(rows, 1, block_size)
    blk = torch.arange(rows).view(rows, 1, 1)
    lowest = torch.finfo(dtype).min
    mask = torch.where(pos < lens.view(1, b_seqs, 1), 0.0,
                       torch.where(blk < real_blocks.view(1, b_seqs, 1), lowest, float("-inf")))
    mask[0, n:, :] = lowest
    mask = mask.to(dtype).view(rows, b_seqs, 1, 1, block_size)
    return mask.expand(rows, b_seqs, num_kv_heads, 1, block_size).reshape(
        rows, b_seqs * num_kv_heads, 1, block_size).contiguous()


def sequence_mask(seq_len: int, query_len: int, q_bucket: int, num_blocks: int,
                  block_size: int, dtype: torch.dtype) -> torch.Tensor:
    """[q_bucket, P_s*bs]: causal over the real tokens, finfo.min inside real blocks, -inf past.

    Query token i sits at position seq_len - query_len + i. Padded query rows get finfo.min in
    block 0 (finite softmax), like padded rows of the batched mask.
    """
    keys = torch.arange(num_blocks * block_size).view(1, -1)
    position = (seq_len - query_len + torch.arange(q_bucket)).view(-1, 1)
    lowest = torch.finfo(dtype).min
    inside = keys < ceil_div(seq_len, block_size) * block_size
    mask = torch.where(keys <= position, 0.0, torch.where(inside, lowest, float("-inf")))
    mask[query_len:, :] = float("-inf")
    mask[query_len:, :block_size] = lowest
    return mask.to(dtype).contiguous()


@dataclass
class BatchedCall:
    """One batched decode kernel call: the sequences it carries and its device inputs."""

    generation: Generation
    seq_lens: tuple[int, ...]
    pages: list[list[int]]
    b_seqs: int
    b_blocks: int
    blocks_per_chunk: int | None
    num_chunks: int | None
    query: torch.Tensor
    query_row_ids: torch.Tensor
    block_ids: torch.Tensor
    mask: torch.Tensor
    workspace: Workspace = field(repr=False)

    @property
    def key(self) -> CompileKey:
        if self.generation == Generation.A:
            return CompileKey("batched", (self.b_seqs, self.b_blocks))
        return CompileKey("batched_chunked", (self.b_seqs, self.blocks_per_chunk, self.num_chunks))

    @property
    def walked_blocks(self) -> int:
        if self.generation == Generation.A:
            return self.b_blocks
        return self.blocks_per_chunk * self.num_chunks

    @property
    def iterations(self) -> int:
        return self.b_blocks if self.generation == Generation.A else self.num_chunks

    @property
    def launches(self) -> int:
        return 1

    @property
    def decode_tokens(self) -> int:
        return len(self.seq_lens)

    def args(self) -> tuple:
        """Positional arguments in the kernel convention (see harness.subjects.reference.kernels)."""
        c, w = self.workspace.config, self.workspace
        loop = ((self.b_blocks,) if self.generation == Generation.A
                else (self.blocks_per_chunk, self.num_chunks))
        return (self.query, self.query_row_ids, w.k_pages, w.v_pages, self.block_ids, self.mask,
                w.scale, self.b_seqs, *loop, c.num_kv_heads, c.queries_per_kv, c.block_size,
                c.head_size)

    def run(self, kernel):
        return kernel(*self.args(), logits_soft_cap=self.workspace.soft_cap)

    def h2d(self) -> dict[str, int]:
        """Bytes copied host-to-device for this call, by tensor (the model's names)."""
        return {"query_row_ids": self.query_row_ids.nbytes, "block_ids": self.block_ids.nbytes,
                "mask": self.mask.nbytes}

    def kv_bytes(self) -> int:
        """K and V bytes the kernel gathers (every walked slot, padding included)."""
        c = self.workspace.config
        return (2 * self.b_seqs * self.walked_blocks * c.block_size * c.num_kv_heads
                * c.head_size * c.dtype_bytes)


@dataclass
class SequenceCall:
    """One per-sequence kernel call (the path below the batching gate, or a prefill)."""

    seq_len: int
    query_len: int
    pages: list[int]
    num_blocks: int
    q_bucket: int
    query: torch.Tensor
    block_table: torch.Tensor
    mask: torch.Tensor
    workspace: Workspace = field(repr=False)

    @property
    def key(self) -> CompileKey:
        return attn_key(self.num_blocks, self.q_bucket)

    @property
    def iterations(self) -> int:
        return self.num_blocks

    def args(self) -> tuple:
        c, w = self.workspace.config, self.workspace
        return (self.query, w.k_pages, w.v_pages, self.block_table, self.mask, w.scale,
                self.num_blocks, c.num_kv_heads, c.queries_per_kv, c.block_size, c.head_size)

    def run(self, kernel):
        return kernel(*self.args(), logits_soft_cap=self.workspace.soft_cap)

    def h2d(self) -> dict[str, int]:
        return {"per_seq_block_table": self.block_table.nbytes, "per_seq_mask": self.mask.nbytes}

    def kv_bytes(self) -> int:
        c = self.workspace.config
        return (2 * self.num_blocks * c.block_size * c.num_kv_heads * c.head_size
                * c.dtype_bytes)


@dataclass
class StepCalls:
    """Every kernel call of one step (one layer): the batched call, then per-sequence calls."""

    step: Step
    dispatch: Dispatch
    batched: BatchedCall | None
    sequences: list[SequenceCall]

    @property
    def calls(self) -> list:
        return ([self.batched] if self.batched else []) + list(self.sequences)

    @property
    def keys(self) -> tuple[CompileKey, ...]:
        return tuple(c.key for c in self.calls)

    @property
    def launches(self) -> int:
        return len(self.calls)

    @property
    def iterations(self) -> int:
        return sum(c.iterations for c in self.calls)

    @property
    def decode_tokens(self) -> int:
        return sum(1 for s in self.step if s.is_decode)

    def h2d(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for c in self.calls:
            for name, n in c.h2d().items():
                total[name] = total.get(name, 0) + n
        return total

    def kv_bytes(self) -> int:
        return sum(c.kv_bytes() for c in self.calls)

    def run(self, batched_kernel, sequence_kernel) -> list:
        outs = [self.batched.run(batched_kernel)] if self.batched else []
        return outs + [s.run(sequence_kernel) for s in self.sequences]


class Workspace:
    """The serving process's fixed allocations for one config: K/V cache and staging buffer."""

    def __init__(self, config: EngineConfig, num_pages: int, device="cpu", seed: int = 0,
                 soft_cap: float = 0.0, max_cache_bytes: int = DEFAULT_MAX_CACHE_BYTES):
        self.config = config
        self.device = torch.device(device)
        self.num_pages = max(2, num_pages)
        self.soft_cap = float(soft_cap)
        self.scale = 1.0 / math.sqrt(config.head_size)
        self.dtype = torch_dtype(config)
        bs, kv, d = config.block_size, config.num_kv_heads, config.head_size
        self.check_fits(config, self.num_pages, max_cache_bytes)
        gen = torch.Generator().manual_seed(seed)
        shape = (self.num_pages, bs, kv, d)
        self.k_pages = torch.randn(shape, generator=gen).to(self.dtype).to(self.device)
        self.v_pages = torch.randn(shape, generator=gen).to(self.dtype).to(self.device)
        self.query_rows = max(config.max_num_batched_tokens, config.max_num_seqs)
        self.query = torch.randn((self.query_rows, config.num_heads, d), generator=gen).to(
            self.dtype).to(self.device)
        self.seed = seed

    @staticmethod
    def check_fits(config: EngineConfig, num_pages: int, max_cache_bytes: int) -> None:
        """InputError where a cache of ``num_pages`` pages would pass the limit."""
        bs, kv, d = config.block_size, config.num_kv_heads, config.head_size
        num_pages = max(2, num_pages)
        cache_bytes = 2 * num_pages * bs * kv * d * config.dtype_bytes
        if cache_bytes > max_cache_bytes:
            raise InputError(
                f"the K/V cache for this batch needs {cache_bytes / (1 << 30):.1f} GiB "
                f"({num_pages} pages of {bs} tokens x {kv} KV heads x {d}) > the limit of "
                f"{max_cache_bytes / (1 << 30):.1f} GiB; use smaller configs or a larger limit")

    @staticmethod
    def pages_for(config: EngineConfig, steps) -> int:
        """Pages so every step gets distinct ones (page 0 stays the null page)."""
        return 1 + max((sum(ceil_div(s.seq_len, config.block_size) for s in step)
                        for step in steps), default=1)

    @classmethod
    def for_steps(cls, config: EngineConfig, steps, device="cpu", seed: int = 0,
                  soft_cap: float = 0.0, max_cache_bytes: int = DEFAULT_MAX_CACHE_BYTES):
        """Sized so every step gets distinct pages (page 0 stays the null page)."""
        return cls(config, cls.pages_for(config, steps), device, seed, soft_cap,
                   max_cache_bytes)

    # -- pages -------------------------------------------------------------------------------

    def assign_pages(self, block_counts, seed: int) -> list[list[int]]:
        """Scattered page ids per sequence: a seeded shuffle of pages 1..N-1, never page 0.

        More blocks than pages (shape-only warmup batches) wrap around the shuffle.
        """
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + seed)
        order = (torch.randperm(self.num_pages - 1, generator=gen) + 1).tolist()
        out, i = [], 0
        for n in block_counts:
            out.append([order[(i + j) % len(order)] for j in range(n)])
            i += n
        return out

    # -- calls -------------------------------------------------------------------------------

    def batched(self, seq_lens, pages, b_seqs: int, b_blocks: int,
                chunks: tuple[int, int] | None = None) -> BatchedCall:
        c = self.config
        n = len(seq_lens)
        if n > b_seqs:
            raise InputError(f"{n} sequences do not fit num_seqs bucket {b_seqs}")
        generation = Generation.A if chunks is None else Generation.B
        rows = b_blocks if chunks is None else chunks[0] * chunks[1]
        block_ids = torch.zeros((rows, stick_padded(b_seqs)), dtype=torch.int32)
        for s, seq_pages in enumerate(pages):
            used = min(len(seq_pages), b_blocks)
            block_ids[:used, s] = torch.tensor(seq_pages[:used], dtype=torch.int32)
        row_ids = torch.zeros(b_seqs, dtype=torch.int64)
        row_ids[:n] = torch.arange(n)
        mask_dtype = self.dtype if chunks is None else CHUNKED_MASK_DTYPE
        mask = batched_mask(seq_lens, b_seqs, rows, c.block_size, c.num_kv_heads, mask_dtype)
        if chunks is not None:
            per_chunk, num_chunks = chunks
            mask = mask.view(num_chunks, per_chunk * b_seqs * c.num_kv_heads, 1, c.block_size)
        to = self.device
        return BatchedCall(
            generation, tuple(seq_lens), [list(p) for p in pages], b_seqs, b_blocks,
            chunks[0] if chunks else None, chunks[1] if chunks else None, self.query,
            row_ids.to(to), block_ids.to(to), mask.to(to), self)

    def sequence(self, seq_len: int, query_len: int, pages, num_blocks: int, q_bucket: int,
                 query_offset: int = 0) -> SequenceCall:
        c = self.config
        table = torch.zeros(num_blocks, dtype=torch.int32)
        used = min(len(pages), num_blocks)
        table[:used] = torch.tensor(pages[:used], dtype=torch.int32)
        start = max(0, min(query_offset, self.query_rows - q_bucket))
        if q_bucket <= self.query_rows:
            query = self.query[start:start + q_bucket].clone()
        else:
            query = self.query[:1].expand(q_bucket, -1, -1).clone()
        mask = sequence_mask(seq_len, query_len, q_bucket, num_blocks, c.block_size, self.dtype)
        return SequenceCall(seq_len, query_len, list(pages), num_blocks, q_bucket, query,
                            table.to(self.device), mask.to(self.device), self)

    def step(self, bucketing: Bucketing, step: Step, seed: int = 0) -> StepCalls:
        """The calls of one step, dispatched by the model on the subject's bucketing."""
        bs = self.config.block_size
        d = dispatch(bucketing, bs, step)
        pages = self.assign_pages([ceil_div(s.seq_len, bs) for s in step], seed)
        batched = None
        if d.batched:
            chunks = None if d.num_chunks is None else (d.blocks_per_chunk, d.num_chunks)
            batched = self.batched([s.seq_len for s in step[:d.batched]], pages[:d.batched],
                                   d.b_seqs, d.b_blocks, chunks)
        sequences, offset = [], d.batched
        for seq, seq_pages, (nb, qb) in zip(step[d.batched:], pages[d.batched:], d.per_sequence):
            sequences.append(self.sequence(seq.seq_len, seq.query_len, seq_pages, nb, qb, offset))
            offset += seq.query_len
        return StepCalls(step, d, batched, sequences)

    def warmup(self, bucketing: Bucketing) -> list:
        """One shape-only call per variant the subject records at warmup (model's warmup keys)."""
        bs = self.config.block_size
        calls, seen = [], set()
        for nb, qb in bucketing.variants:
            key = attn_key(nb, qb)
            if key in seen:
                continue
            seen.add(key)
            seq_len = nb * bs
            pages = self.assign_pages([nb], seed=len(calls))[0]
            calls.append(self.sequence(seq_len, min(qb, seq_len), pages, nb, qb))
        for ns, nb in bucketing.batched_variants:
            key = batched_key(bucketing, ns, nb)
            if key in seen:
                continue
            seen.add(key)
            chunks = bucketing.chunking(ns, nb) if bucketing.chunking else None
            pages = self.assign_pages([nb] * ns, seed=len(calls))
            calls.append(self.batched([nb * bs] * ns, pages, ns, nb, chunks))
        return calls
