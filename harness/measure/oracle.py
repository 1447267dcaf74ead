"""The oracle: plain softmax attention over each sequence's real tokens, in float64 on the host.

It reads the same pages the kernel was given, but none of the kernel's machinery: no mask, no
padding, no online softmax. Only real rows are compared (padded rows are undefined by contract),
with tolerances set by the model dtype. A mismatch raises :class:`KernelMismatch`: a wrong kernel
fails loudly and is never timed or reported as fast.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.errors import HarnessError

#: (atol, rtol) per model dtype: |out - ref| <= atol + rtol * |ref| on every real element.
TOLERANCES = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (3e-2, 3e-2),
}


class KernelMismatch(HarnessError):
    """A kernel's output disagrees with the oracle beyond the dtype's tolerance."""


@dataclass(frozen=True)
class Check:
    """The outcome of comparing one call's output with the oracle."""

    max_abs_error: float
    #: The largest error relative to that element's allowance (<= 1 passes).
    worst_ratio: float
    atol: float
    rtol: float
    rows: int

    @property
    def ok(self) -> bool:
        return self.worst_ratio <= 1.0


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
              scale: float, soft_cap: float) -> torch.Tensor:
    """q [Q, H, D] at absolute ``positions``; k, v [L, KV, D]: causal softmax attention, GQA."""
    rows, heads, head_size = q.shape
    kv_heads = k.shape[1]
    # query head h reads KV head h // group: [Q, KV, group, D] against K/V as they are (no copy)
    q = q.reshape(rows, kv_heads, heads // kv_heads, head_size)
    scores = torch.einsum("qkgd,lkd->kgql", q, k) * scale
    if soft_cap > 0:
        scores = soft_cap * torch.tanh(scores / soft_cap)
    keys = torch.arange(k.shape[0]).view(1, 1, 1, -1)
    scores = scores.masked_fill(keys > positions.view(1, 1, -1, 1), float("-inf"))
    out = torch.einsum("kgql,lkd->qkgd", torch.softmax(scores, dim=-1), v)
    return out.reshape(rows, heads, head_size)


def _tokens(pages_tensor: torch.Tensor, pages: list[int], length: int) -> torch.Tensor:
    """The first ``length`` tokens of a sequence from its pages: [length, KV, D] float64."""
    ids = torch.tensor(pages, dtype=torch.int64, device=pages_tensor.device)
    gathered = pages_tensor.index_select(0, ids).to("cpu", torch.float64)
    return gathered.reshape(-1, *pages_tensor.shape[2:])[:length]


def expected_batched(call) -> torch.Tensor:
    """Oracle output of a batched call's real rows: [n, H, D] float64."""
    w = call.workspace
    rows = call.query_row_ids[:len(call.seq_lens)].to("cpu")
    queries = call.query.index_select(0, rows.to(call.query.device)).to("cpu", torch.float64)
    out = []
    for s, (length, pages) in enumerate(zip(call.seq_lens, call.pages)):
        k = _tokens(w.k_pages, pages, length)
        v = _tokens(w.v_pages, pages, length)
        out.append(attention(queries[s:s + 1], k, v, torch.tensor([length - 1]), w.scale,
                             w.soft_cap))
    return torch.cat(out)


#: Long prefill chunks are checked on this many evenly spaced real rows (first and last included).
MAX_CHECKED_ROWS = 32


def checked_rows(query_len: int) -> torch.Tensor:
    """The real query rows the oracle computes: all of them, or an even spread of a long chunk."""
    if query_len <= MAX_CHECKED_ROWS:
        return torch.arange(query_len)
    return torch.linspace(0, query_len - 1, MAX_CHECKED_ROWS).round().long().unique()


def expected_sequence(call) -> torch.Tensor:
    """Oracle output of a per-sequence call's checked rows (see checked_rows), float64."""
    w = call.workspace
    rows = checked_rows(call.query_len)
    k = _tokens(w.k_pages, call.pages, call.seq_len)
    v = _tokens(w.v_pages, call.pages, call.seq_len)
    q = call.query[:call.query_len].to("cpu", torch.float64)[rows]
    positions = call.seq_len - call.query_len + rows
    return attention(q, k, v, positions, w.scale, w.soft_cap)


def compare(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype,
            tolerance: tuple[float, float] | None = None) -> Check:
    atol, rtol = tolerance or TOLERANCES[dtype]
    got = actual.to("cpu", torch.float64)
    if got.shape != expected.shape:
        raise KernelMismatch(f"output shape {tuple(got.shape)} != expected "
                             f"{tuple(expected.shape)} on the real rows")
    err = (got - expected).abs()
    allowance = atol + rtol * expected.abs()
    ratio = torch.where(torch.isfinite(err), err / allowance, torch.full_like(err, float("inf")))
    return Check(float(err.max()), float(ratio.max()), atol, rtol, expected.shape[0])


def check_call(call, output, tolerance=None) -> Check:
    """Compare one call's output with the oracle; raise KernelMismatch if it is wrong."""
    from harness.measure.inputs import BatchedCall

    if output is None:
        raise KernelMismatch(f"{call.key}: the kernel returned None")
    if isinstance(call, BatchedCall):
        n = len(call.seq_lens)
        if output.dim() != 3 or output.shape[0] < n:
            raise KernelMismatch(f"{call.key}: output shape {tuple(output.shape)}, expected "
                                 f"[>= {n}, H, D]")
        expected, actual = expected_batched(call), output[:n]
    else:
        expected = expected_sequence(call)
        actual = output[:call.query_len].index_select(
            0, checked_rows(call.query_len).to(output.device))
    result = compare(actual, expected, call.workspace.dtype, tolerance)
    if not result.ok:
        raise KernelMismatch(
            f"{call.key}: output differs from the oracle: max abs error {result.max_abs_error:.3g} "
            f"(allowed {result.atol:g} + {result.rtol:g}*|ref|, worst element at "
            f"{result.worst_ratio:.3g}x its allowance) over {result.rows} real rows")
    return result


def check_step(step_calls, outputs, tolerance=None) -> list[Check]:
    return [check_call(c, o, tolerance) for c, o in zip(step_calls.calls, outputs)]


def check_live(live, output, scale: float, dtype) -> float:
    """Every real row of a live step's forward output (``live``: a
    :class:`harness.subjects.spyre.drive.live.LiveStep`, its dense K/V kept per sequence) against
    the oracle; the largest absolute error, or KernelMismatch."""
    worst, start = 0.0, 0
    out = output.to("cpu", torch.float64)
    query = live.query.to("cpu", torch.float64)
    for i, s in enumerate(live.step):
        rows = slice(start, start + s.query_len)
        start += s.query_len
        positions = torch.arange(s.seq_len - s.query_len, s.seq_len)
        expected = attention(query[rows], live.keys[i].double(), live.values[i].double(),
                             positions, scale, 0.0)
        result = compare(out[rows], expected, dtype, TOLERANCES[dtype])
        if not result.ok:
            raise KernelMismatch(
                f"sequence {i} (seq_len {s.seq_len}, query_len {s.query_len}): forward output "
                f"differs from the oracle: max abs error {result.max_abs_error:.3g} (allowed "
                f"{result.atol:g} + {result.rtol:g}*|ref|, worst element at "
                f"{result.worst_ratio:.3g}x its allowance)")
        worst = max(worst, result.max_abs_error)
    return worst
