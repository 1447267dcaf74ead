"""A step as the commit's builder gets it: vLLM's CommonAttentionMetadata with scattered pages
(seeded from the step itself), the pages it uses, and the set-up step that takes every path."""

from __future__ import annotations

import sys
import zlib

from harness.config import MIN_BATCHED_SEQS, EngineConfig
from harness.ladders import ceil_div
from harness.subjects.spyre.drive.engine_config import common_attention_metadata


def step_text(step) -> str:
    """A step as the trace format writes it (``SEQ_LENS | QUERY_LENS``), for messages."""
    seqs = ",".join(str(s.seq_len) for s in step)
    queries = ",".join(str(s.query_len) for s in step)
    return f"step {seqs} | {queries}" if any(s.query_len != 1 for s in step) else f"step {seqs}"


def setup_step(config: EngineConfig) -> tuple:
    """A step that takes every path of a config: up to four one-block decodes (batched where
    the builder batches) and a two-token prefill (per sequence)."""
    from harness.workloads import Seq

    decodes = max(0, min(MIN_BATCHED_SEQS, config.max_num_seqs - 1))
    length = min(config.block_size, config.max_model_len)
    return tuple([Seq(length, 1)] * decodes + [Seq(min(2, config.max_model_len), 2)])


def one_block_decodes(config: EngineConfig, n: int) -> tuple:
    """``n`` decodes of one block each (a step every builder can batch, if it batches ``n``)."""
    from harness.workloads import Seq

    return tuple([Seq(min(config.block_size, config.max_model_len), 1)] * n)


def step_pages(step, block_size: int) -> int:
    """K/V pages a step's sequences use, with vLLM's null page 0."""
    return 1 + sum(ceil_div(s.seq_len, block_size) for s in step)


def step_seed(step) -> int:
    """A page-layout seed that depends only on the step's (seq_len, query_len) pairs."""
    return zlib.crc32(repr([(s.seq_len, s.query_len) for s in step]).encode())


def common_metadata(config: EngineConfig, step, seed: int = 0):
    """vLLM's CommonAttentionMetadata for ``step``: decodes first, pages scattered (a seeded
    permutation of pages 1.., page 0 being vLLM's null block)."""
    import torch

    bs = config.block_size
    n = len(step)
    query_lens = [s.query_len for s in step]
    seq_lens = [s.seq_len for s in step]
    starts = [0]
    for q in query_lens:
        starts.append(starts[-1] + q)
    blocks = [ceil_div(x, bs) for x in seq_lens]
    width = max(ceil_div(config.max_model_len, bs), max(blocks))
    total = sum(blocks)
    pages = torch.randperm(total, generator=torch.Generator().manual_seed(seed)).to(
        torch.int32) + 1
    # row s holds the next blocks[s] pages of the permutation (a boolean fill is row-major)
    table = torch.zeros(n, width, dtype=torch.int32)
    table[torch.arange(width) < torch.tensor(blocks).unsqueeze(1)] = pages
    # the new tokens of sequence s are positions seq_len - query_len .. seq_len - 1
    q = torch.tensor(query_lens)
    # output_size given: without it torch first sizes the output in a pass of its own, which
    # on torch's default threads beside a busy core took 7 ms a step (0.07 ms with it)
    seq_of_token = torch.repeat_interleave(torch.arange(n), q, output_size=starts[-1])
    first_new = torch.tensor([x - y for x, y in zip(seq_lens, query_lens)])
    tokens = (torch.arange(starts[-1]) - torch.tensor(starts[:-1])[seq_of_token]
              + first_new[seq_of_token])
    slot_mapping = table[seq_of_token, tokens // bs].to(torch.int64) * bs + tokens % bs
    qsl = torch.tensor(starts, dtype=torch.int32)
    lens = torch.tensor(seq_lens, dtype=torch.int32)
    return common_attention_metadata(
        sys.modules["vllm.v1.attention.backend"].CommonAttentionMetadata,
        query_start_loc=qsl, query_start_loc_cpu=qsl, seq_lens=lens, _seq_lens_cpu=lens,
        num_reqs=n, num_actual_tokens=starts[-1], max_query_len=max(query_lens),
        max_seq_len=max(seq_lens), block_table_tensor=table, slot_mapping=slot_mapping,
        causal=True, is_prefilling=torch.tensor([q > 1 for q in query_lens]))
