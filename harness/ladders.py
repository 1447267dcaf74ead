"""Ladder arithmetic shared by every subject: the behaviour spyre-inference's helpers promise.

Pure functions over tuples of ints, so ladders compare exactly and hash as dict keys.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

Ladder = tuple[int, ...]

#: Spyre core count; the chunked kernel splits 32 cores across the sequences of a batch.
SPYRE_CORES = 32
#: Token slots per stick: block ids are padded to a multiple of this many sequences.
STICK_WIDTH = 32


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def powers_of_two(n: int, start: int = 1) -> Ladder:
    """P(n, start): the smallest power of two >= start, doubling while < n, then n itself.

    ``n < 1`` gives ``()``; ``start > n`` gives ``(n,)``.
    """
    if n < 1:
        return ()
    v = 1
    while v < max(start, 1):
        v *= 2
    out = []
    while v < n:
        out.append(v)
        v *= 2
    out.append(n)
    return tuple(out)


def round_up(ladder: Sequence[int], x: int) -> int | None:
    """The smallest bucket >= x, or None above the top bucket."""
    i = bisect.bisect_left(ladder, x)
    return ladder[i] if i < len(ladder) else None


def previous_bucket(ladder: Sequence[int], bucket: int) -> int:
    """The bucket below ``bucket`` in the ladder, or 0 for the first one."""
    i = bisect.bisect_left(ladder, bucket)
    return ladder[i - 1] if i > 0 else 0


def reachable(ladder: Sequence[int], lo: int, hi: int) -> Ladder:
    """Buckets that some input in [lo, hi] rounds up to (each bucket owns (previous, bucket])."""
    out = []
    prev = 0
    for b in ladder:
        if max(prev + 1, lo) <= min(b, hi):
            out.append(b)
        prev = b
    return tuple(out)


def resolve_topup(override: Ladder | None, limit: int, default: Ladder) -> tuple[Ladder, list[str]]:
    """Top-up rule: keep every entry (even above the limit); append the limit if all are below."""
    if override is None:
        return default, []
    if override[-1] < limit:
        return override + (limit,), [f"appended limit {limit} to override {list(override)}"]
    above = [v for v in override if v > limit]
    notes = [f"kept entries {above} above limit {limit} (top-up)"] if above else []
    return override, notes


def resolve_clamp(override: Ladder | None, limit: int, default: Ladder) -> tuple[Ladder, list[str]]:
    """Clamp rule: drop entries above the limit, then append the limit if empty or below it."""
    if override is None:
        return default, []
    kept = tuple(v for v in override if v <= limit)
    notes = []
    if len(kept) < len(override):
        notes.append(f"dropped entries {[v for v in override if v > limit]} above limit {limit}")
    if not kept or kept[-1] < limit:
        kept = kept + (limit,)
        notes.append(f"appended limit {limit}")
    return kept, notes


def default_query_ladder(max_num_batched_tokens: int) -> Ladder:
    """{1} ∪ {k·step <= mnbt} ∪ {mnbt}, step = min(512, mnbt)."""
    step = min(512, max_num_batched_tokens)
    values = {1, max_num_batched_tokens}
    values.update(range(step, max_num_batched_tokens + 1, step))
    return tuple(sorted(values))


def blocks_ladder(kv_ladder: Sequence[int], block_size: int) -> Ladder:
    """The num_blocks axis derived from kv buckets: sorted set of ceil(kv / bs)."""
    return tuple(sorted({ceil_div(kv, block_size) for kv in kv_ladder}))


def stick_padded(x: int) -> int:
    """S(x) = 32·ceil(x/32): sequences padded to the stick width."""
    return STICK_WIDTH * ceil_div(x, STICK_WIDTH)


def chunking(b_seqs: int, b_blocks: int, cores: int = SPYRE_CORES) -> tuple[int, int]:
    """(blocks_per_chunk, num_chunks) of the chunked batched decode kernel."""
    per_chunk = max(1, min(cores // b_seqs, b_blocks))
    return per_chunk, ceil_div(b_blocks, per_chunk)


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def ladder_sum(ladder: Sequence[int], positions: int) -> int:
    """The ladder's entries summed over ``positions``, its top entry repeated past its end (every
    entry of a longer ladder counts): one number that grows when any position's bucket grows,
    so a ladder of fewer, larger buckets sums higher."""
    return sum(ladder) + ladder[-1] * max(0, positions - len(ladder))
