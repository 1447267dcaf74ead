"""Reference decode kernels, written here from the spyre-inference notes (section 3).

These are the harness's own implementations of the argument conventions that every subject's
kernel must follow, so that ``Subject.decode_kernel()`` can hand the measurement code either these
or the code under test. They are the reference subject's kernels, so they live with it (the
measurement code imports them from here); this module imports torch, so ``reference.py`` imports
it only when a kernel is asked for. Python loops unroll at trace time: under ``torch.compile(dynamic=False)``
every distinct set of int arguments is its own graph, which is what the graph counter relies on.

Accumulation is float32 whatever the model dtype (scores, running max, sum and output); the result
is cast back to the query's dtype.

Generation A, one block per loop step (:func:`batched_decode_per_block`)::

    kernel(query, query_row_ids, k_pages, v_pages, block_ids, mask_by_block, scale,
           num_seqs, num_blocks, num_kv_heads, num_queries_per_kv, block_size, head_size,
           logits_soft_cap=0.0, out=None) -> [num_seqs, H, D]   (or writes out[:num_seqs])

    query          [rows, H, D]           model dtype; rows = the staging buffer
    query_row_ids  int64 [B_s]            row of each batched sequence in ``query``
    k_pages/v_pages [num_pages, bs, KV, D] page 0 is the null page
    block_ids      int32 [B_b, S(B_s)]    [b, s] = page of sequence s's b-th block, 0 if padded
    mask_by_block  [B_b, B_s*KV, 1, bs]   model dtype, additive (0 / finfo.min / -inf)
    num_seqs = B_s, num_blocks = B_b

Generation B, chunked (:func:`batched_decode_chunked`); the harness's own convention
for the chunked loop and the mask shape (docs/spyre-inference.md, section 3)::

    kernel(query, query_row_ids, k_pages, v_pages, block_ids, mask_by_block, scale,
           num_seqs, blocks_per_chunk, num_chunks, num_kv_heads, num_queries_per_kv,
           block_size, head_size, logits_soft_cap=0.0, out=None) -> [num_seqs, H, D]

    block_ids      int32 [W, S(B_s)]      W = num_chunks * blocks_per_chunk walked blocks: the
                                          generation A table, zero rows appended past B_b
    mask_by_block  fp16 [C, E*KV, 1, bs]  C = num_chunks, E = B_s * blocks_per_chunk pages per
                                          chunk; it is the generation A mask padded to W blocks
                                          (padded blocks -inf) and viewed per chunk, so the E*KV
                                          rows of chunk c run (block j of the chunk, seq s, kv h)

    Loop step c gathers the E pages block_ids[c*bpc:(c+1)*bpc, :B_s] and does one online-softmax
    update over their bpc*bs keys per sequence.

Per-sequence path (:func:`attend_sequence`): one call per sequence per layer over its padded block
count P_s (one block per loop step), query width 1 for decodes::

    attend_sequence(query, k_pages, v_pages, block_table, mask, scale, num_blocks,
                    num_kv_heads, num_queries_per_kv, block_size, head_size,
                    logits_soft_cap=0.0) -> [q_bucket, H, D]

    query          [q_bucket, H, D]       model dtype
    block_table    int32 [P_s]            the sequence's pages, 0 past its real blocks
    mask           [q_bucket, P_s*bs]     model dtype, additive, shared by every head (causal
                                          for prefill chunks)
"""

from __future__ import annotations

import torch

from harness.generations import Generation

ACC = torch.float32


def _soft_cap(scores: torch.Tensor, cap: float) -> torch.Tensor:
    # The cap bounds the raw scores; it must run before the mask (a capped -inf is finite).
    return cap * torch.tanh(scores / cap) if cap > 0 else scores


def _online_update(state, scores, values):
    """One online-softmax step: new running max, rescale what came before, add this block."""
    run_max, run_sum, run_out = state
    new_max = torch.maximum(run_max, scores.amax(dim=-1, keepdim=True))
    alpha = torch.exp(run_max - new_max)
    probs = torch.exp(scores - new_max)
    run_sum = run_sum * alpha + probs.sum(dim=-1, keepdim=True)
    run_out = run_out * alpha + torch.matmul(probs, values)
    return new_max, run_sum, run_out


def _as_acc(x: torch.Tensor, *shape: int) -> torch.Tensor:
    """``x`` (any strides) as a contiguous float32 tensor of ``shape``, in one copy."""
    return torch.empty(x.shape, dtype=ACC, device=x.device).copy_(x).view(*shape)


def _initial_state(shape, head_size, device):
    return (torch.full((*shape, 1), float("-inf"), dtype=ACC, device=device),
            torch.zeros((*shape, 1), dtype=ACC, device=device),
            torch.zeros((*shape, head_size), dtype=ACC, device=device))


def _finish(state, query, num_seqs, num_heads, head_size, out):
    _, run_sum, run_out = state
    result = (run_out / run_sum).to(query.dtype).reshape(num_seqs, num_heads, head_size)
    if out is None:
        return result
    out[:num_seqs].copy_(result)
    return out


def batched_decode_per_block(query, query_row_ids, k_pages, v_pages, block_ids, mask_by_block,
                             scale, num_seqs, num_blocks, num_kv_heads, num_queries_per_kv,
                             block_size, head_size, logits_soft_cap=0.0, out=None):
    """Generation A: B_b loop steps, each gathering one page per sequence."""
    q = query.index_select(0, query_row_ids)
    q = q.view(num_seqs, num_kv_heads, num_queries_per_kv, head_size).to(ACC)
    state = _initial_state((num_seqs, num_kv_heads, num_queries_per_kv), head_size, query.device)
    for b in range(num_blocks):
        pages = block_ids[b, :num_seqs]
        shape = (num_seqs, num_kv_heads, block_size, head_size)
        # [B_s, bs, KV, D] pages -> [B_s, KV, bs, D]: one page per sequence, heads as batch.
        k = _as_acc(k_pages.index_select(0, pages).permute(0, 2, 1, 3), *shape)
        v = _as_acc(v_pages.index_select(0, pages).permute(0, 2, 1, 3), *shape)
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale     # [B_s, KV, QPKV, bs]
        scores = _soft_cap(scores, logits_soft_cap)
        mask = mask_by_block[b].view(num_seqs, num_kv_heads, 1, block_size).to(ACC)
        state = _online_update(state, scores + mask, v)
    return _finish(state, query, num_seqs, num_kv_heads * num_queries_per_kv, head_size, out)


def batched_decode_chunked(query, query_row_ids, k_pages, v_pages, block_ids, mask_by_block,
                           scale, num_seqs, blocks_per_chunk, num_chunks, num_kv_heads,
                           num_queries_per_kv, block_size, head_size, logits_soft_cap=0.0,
                           out=None):
    """Generation B: num_chunks loop steps, each gathering E = B_s * blocks_per_chunk pages."""
    q = query.index_select(0, query_row_ids)
    q = q.view(num_seqs, num_kv_heads, num_queries_per_kv, head_size).to(ACC)
    state = _initial_state((num_seqs, num_kv_heads, num_queries_per_kv), head_size, query.device)
    bpc, keys = blocks_per_chunk, blocks_per_chunk * block_size
    for c in range(num_chunks):
        pages = block_ids[c * bpc:(c + 1) * bpc, :num_seqs].reshape(-1)   # E pages, (j, s)
        paged = (bpc, num_seqs, block_size, num_kv_heads, head_size)
        shape = (num_seqs, num_kv_heads, keys, head_size)
        # E pages (j, s) -> [B_s, KV, bpc*bs, D]: each sequence's keys of the chunk in order.
        k = _as_acc(k_pages.index_select(0, pages).view(paged).permute(1, 3, 0, 2, 4), *shape)
        v = _as_acc(v_pages.index_select(0, pages).view(paged).permute(1, 3, 0, 2, 4), *shape)
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale      # [B_s, KV, QPKV, keys]
        scores = _soft_cap(scores, logits_soft_cap)
        mask = mask_by_block[c].view(bpc, num_seqs, num_kv_heads, 1, block_size)
        mask = mask.permute(1, 2, 3, 0, 4).reshape(num_seqs, num_kv_heads, 1, keys).to(ACC)
        state = _online_update(state, scores + mask, v)
    return _finish(state, query, num_seqs, num_kv_heads * num_queries_per_kv, head_size, out)


def attend_sequence(query, k_pages, v_pages, block_table, mask, scale, num_blocks, num_kv_heads,
                    num_queries_per_kv, block_size, head_size, logits_soft_cap=0.0):
    """Per-sequence path: one sequence, P_s loop steps of one page each."""
    q_rows = query.shape[0]
    rows = q_rows * num_queries_per_kv
    q = query.view(q_rows, num_kv_heads, num_queries_per_kv, head_size)
    q = q.permute(1, 0, 2, 3).reshape(num_kv_heads, rows, head_size).to(ACC)
    state = _initial_state((num_kv_heads, rows), head_size, query.device)
    for b in range(num_blocks):
        page = block_table[b:b + 1]
        shape = (num_kv_heads, block_size, head_size)
        k = _as_acc(k_pages.index_select(0, page)[0].permute(1, 0, 2), *shape)   # [KV, bs, D]
        v = _as_acc(v_pages.index_select(0, page)[0].permute(1, 0, 2), *shape)
        scores = _soft_cap(torch.matmul(q, k.transpose(-1, -2)) * scale, logits_soft_cap)
        m = mask[:, b * block_size:(b + 1) * block_size].to(ACC)         # [q_rows, bs]
        m = m[:, None, :].expand(q_rows, num_queries_per_kv, block_size).reshape(1, rows,
                                                                             block_size)
        state = _online_update(state, scores + m, v)
    _, run_sum, run_out = state
    result = (run_out / run_sum).view(num_kv_heads, q_rows, num_queries_per_kv, head_size)
    return result.permute(1, 0, 2, 3).reshape(q_rows, num_kv_heads * num_queries_per_kv,
                                              head_size).to(query.dtype)


#: The reference kernels by generation, as ``Subject.decode_kernel()`` hands them out.
BATCHED_KERNELS = {Generation.A: batched_decode_per_block, Generation.B: batched_decode_chunked}
