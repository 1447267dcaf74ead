"""The exact optimiser behind the ladder frontier: the best ladder of each size for a workload.

Pure Python on the workload's lengths: no torch, no subject code. A ladder's cost over a
workload is separable: every kernel launch rounds one value up on the axis (a batched step the
longest decode's blocks on the kv axis, its decode count on the num_seqs axis; a per-sequence
launch its own blocks, or its query length on the query axis) and pays a cost that depends only
on the bucket it lands on. So the best ladder of k buckets is a shortest path over the sorted
candidate values (one-dimensional bucketing by dynamic programming), exact for the costs
modelled here. Which launches a workload makes comes from the subject's own dispatch of each
step (its per-step figures). It only proposes: every ladder it proposes is then evaluated by the
subject's own code (:mod:`harness.analyze.frontier`), so no figure shown is the optimiser's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from harness.config import EngineConfig
from harness.errors import TraceError
from harness.ladders import ceil_div, chunking, round_up, stick_padded
from harness.matrix import Case
from harness.workloads import Workload

#: What a ladder is chosen to minimise; each is one of the per-step costs the frontier shows.
OBJECTIVES = ("padding", "iterations", "bytes")
#: The axes an env override sets, and the env variable that sets each.
AXES = {"kv": "SPYRE_ATTN_KV_BUCKETS", "num_seqs": "SPYRE_ATTN_NUM_SEQS_BUCKETS",
        "query": "SPYRE_ATTN_QUERY_BUCKETS"}
#: Bytes per mask element of the chunked kernel (fp16 whatever the model dtype).
_CHUNK_MASK_BYTES = 2
#: Up to this top value the optimiser tries every value (exact for any cost: the chunked
#: kernel's padding is not monotone in num_seqs); above it, only the values launches round up
#: (exact for costs that grow with the bucket, which every kv and query cost does).
_FULL_RANGE = 256


@dataclass(frozen=True)
class Launch:
    """One kernel launch's shape: ``x`` is the value the axis rounds up; the other fields are
    what the launch pads to on the axes not being chosen."""

    batched: bool
    x: int
    seqs: int = 1
    blocks: int = 1
    query: int = 1


@dataclass(frozen=True)
class CostModel:
    """The per-launch cost of spyre-inference's attention path (docs/spyre-inference.md,
    section 4): padded KV slots, loop iterations per layer, host-to-device bytes."""

    axis: str
    config: EngineConfig
    chunked: bool

    def cost(self, launch: Launch, bucket: int) -> tuple[int, int, int]:
        """(padded slots, iterations, bytes) of ``launch`` when its axis value pads to
        ``bucket``."""
        seqs, blocks, query = launch.seqs, launch.blocks, launch.query
        if self.axis == "kv":
            blocks = bucket
        elif self.axis == "num_seqs":
            seqs = bucket
        else:
            query = bucket
        c = self.config
        bs, heads = c.block_size, c.num_kv_heads
        if not launch.batched:
            return blocks * bs, blocks, 4 * blocks + c.dtype_bytes * query * blocks * bs
        if self.chunked:
            per_chunk, chunks = chunking(seqs, blocks)
            walked, iterations, mask = per_chunk * chunks, chunks, _CHUNK_MASK_BYTES
        else:
            walked, iterations, mask = blocks, blocks, c.dtype_bytes
        return (seqs * walked * bs, iterations,
                8 * seqs + 4 * walked * stick_padded(seqs) + mask * walked * seqs * heads * bs)


@dataclass(frozen=True)
class Proposal:
    """The optimiser's best ladder of one size for one objective, and its modelled costs."""

    ladder: tuple[int, ...]
    objective: str
    modelled: tuple[int, int, int]


def candidate_values(launches: Counter[Launch], top: int) -> list[int]:
    """Bucket values worth trying: every value up to the top (forced: the limit is always a
    bucket), or only the launched values and the top when that range is wide."""
    if top <= _FULL_RANGE:
        return list(range(1, top + 1))
    return sorted({launch.x for launch in launches} | {top})


def best_ladders(launches: Counter[Launch], model: CostModel, top: int,
                 sizes: range) -> dict[int, list[Proposal]]:
    """Per ladder size in ``sizes`` (at most the number of candidate values), the best ladder
    ending at ``top`` for each objective that the axis moves; launches above ``top`` cannot be
    bucketed and are refused by the caller before this."""
    values = candidate_values(launches, top)
    n = len(values)
    slot_of = {}
    for launch in launches:
        slot_of[launch] = next(i for i, v in enumerate(values) if v >= launch.x)
    by_slot: list[list[tuple[Launch, int]]] = [[] for _ in range(n)]
    for launch, count in launches.items():
        by_slot[slot_of[launch]].append((launch, count))
    # cum[j][s]: every objective's cost of the launches in slots 0..s, all padded to values[j]
    cum: list[list[tuple[int, int, int]]] = []
    for j in range(n):
        row, total = [], (0, 0, 0)
        for s in range(j + 1):
            for launch, count in by_slot[s]:
                p, it, b = model.cost(launch, values[j])
                total = (total[0] + count * p, total[1] + count * it, total[2] + count * b)
            row.append(total)
        cum.append(row)
    out: dict[int, list[Proposal]] = {k: [] for k in sizes if 1 <= k <= n}
    for o, objective in enumerate(OBJECTIVES):
        if objective != "padding" and _flat(launches, model, values, o):
            continue   # this axis does not move this cost: padding's ladders stand for it
        for k, ladder in _shortest_paths(cum, n, o, max(out, default=0)).items():
            if k in out:
                modelled = _modelled(cum, [values[i] for i in ladder], values)
                out[k].append(Proposal(tuple(values[i] for i in ladder), objective, modelled))
    return out


def _flat(launches, model: CostModel, values: list[int], o: int) -> bool:
    """Whether no launch's cost ``o`` differs between its own smallest bucket and the top."""
    return all(model.cost(launch, next(v for v in values if v >= launch.x))[o]
               == model.cost(launch, values[-1])[o] for launch in launches)


def _shortest_paths(cum, n: int, o: int, most: int) -> dict[int, list[int]]:
    """For k = 1..most, the indices of the best k-bucket ladder ending at the last value under
    objective ``o``: dp[k][j] = min over i < j of dp[k-1][i] + cost of slots i+1..j at j."""
    inf = float("inf")
    dp = [cum[j][j][o] for j in range(n)]
    back: list[list[int]] = [[-1] * n]
    out = {1: [n - 1]}
    for k in range(2, most + 1):
        new, arg = [inf] * n, [-1] * n
        for j in range(k - 1, n):
            row, here = cum[j], cum[j][j][o]
            best, at = inf, -1
            for i in range(k - 2, j):
                value = dp[i] + here - row[i][o]
                if value < best:
                    best, at = value, i
            new[j], arg[j] = best, at
        dp = new
        back.append(arg)
        ladder, j = [n - 1], n - 1
        for level in range(k - 1, 0, -1):
            j = back[level][j]
            ladder.append(j)
        out[k] = ladder[::-1]
    return out


def _modelled(cum, ladder: list[int], values: list[int]) -> tuple[int, int, int]:
    """Every objective's modelled cost of ``ladder`` (values), from the prefix table."""
    index = {v: i for i, v in enumerate(values)}
    total, previous = [0, 0, 0], -1
    for v in ladder:
        j = index[v]
        row = cum[j]
        for o in range(3):
            total[o] += row[j][o] - (row[previous][o] if previous >= 0 else 0)
        previous = j
    return tuple(total)


def modelled_cost(launches: Counter[Launch], model: CostModel,
                  ladder: tuple[int, ...]) -> tuple[int, int, int] | None:
    """The modelled costs of any ladder (None when a launch is above its top): what the
    optimiser minimises, computed directly (its own tests check the dynamic programme by it)."""
    total = [0, 0, 0]
    for launch, count in launches.items():
        bucket = next((v for v in ladder if v >= launch.x), None)
        if bucket is None:
            return None
        for o, value in enumerate(model.cost(launch, bucket)):
            total[o] += count * value
    return tuple(total)


def blocks_of(seq_len: int, block_size: int) -> int:
    return ceil_div(seq_len, block_size)


# -- the optimiser's view of a workload --------------------------------------------------------

def check_workload(workload: Workload, axis: str) -> None:
    """A workload the axis is chosen for: decodes for the decode ladders, prefills for query."""
    seqs = [s for step in workload.steps for s in step]
    if axis == "query" and all(s.is_decode for s in seqs):
        raise TraceError(f"{workload.name}: no prefill in it (every query_len is 1): the query "
                         "ladder pads prefills only")
    if axis != "query" and not any(s.is_decode for s in seqs):
        raise TraceError(f"{workload.name}: no decode in it (every sequence has query_len > 1): "
                         f"the {axis} ladder's frontier is over decodes")


def launches(workload: Workload, rows: list[dict], case: Case, axis,
             ladders: dict) -> Counter[Launch]:
    """Every launch of the workload whose cost the axis moves, from the subject's own dispatch
    of each step at the config's own ladders (``rows``: its per-step figures; ``axis``: how its
    code takes the axis, a :class:`harness.analyze.frontier.Axis`)."""
    bs = case.config.block_size
    out: Counter[Launch] = Counter()
    for step, row in zip(workload.steps, rows):
        n = row.get("batched_seqs") or 0
        buckets = row.get("per_sequence_buckets") or []
        single = step[n:]
        queries = [q for _, q in buckets] if len(buckets) == len(single) else \
            [1 if s.is_decode else s.query_len for s in single]
        blocks = [b for b, _ in buckets] if len(buckets) == len(single) else \
            [blocks_of(s.seq_len, bs) for s in single]
        if n:
            longest = max(blocks_of(s.seq_len, bs) for s in step[:n])
            if axis.name == "kv" and "batched_num_blocks" in axis.follows:
                out[Launch(True, longest, seqs=row["b_seqs"])] += 1
            elif axis.name == "num_seqs":
                padded = row.get("b_blocks") or round_up(ladders["batched_num_blocks"], longest)
                out[Launch(True, n, blocks=padded)] += 1
        for s, nb, qb in zip(single, blocks, queries):
            if axis.name == "kv" and "num_blocks" in axis.follows:
                out[Launch(False, blocks_of(s.seq_len, bs), query=qb)] += 1
            elif axis.name == "query" and not s.is_decode:
                out[Launch(False, s.query_len, blocks=nb)] += 1
    return out
