"""Where a commit's host time goes: a profile of one pass over a workload's steps, taken apart
from the timed samples (a profiler slows what it watches), by the commit's own functions,
in CPU time as the samples are.

cProfile (builtins not profiled, so a C call's time is its Python caller's) gives every
function's self time; a function outside the commit's code (torch's Python layer, the vLLM
stand-ins) has its self time charged to the commit's functions that called it, split by how
much of its time each call site took. So "``_mirror_mask_tiles`` 61 %" is the share of the pass
spent in that function's own lines and in what it called outside the commit. Time no function of
the commit called (the harness's loop around the calls) is nobody's and is left out of the list.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections import defaultdict
from collections.abc import Callable

#: A call chain this long without a commit's function in it is nobody's.
_MAX_DEPTH = 200
#: Profiled passes over the steps: until this many CPU seconds, at most MAX_PASSES.
MIN_SECONDS = 0.25
MAX_PASSES = 20


def profile_calls(calls: list[Callable[[], object]], ours: dict[str, str], top: int,
                  clock: Callable[[], float] = time.process_time) -> dict:
    """Run every one of ``calls`` under the profiler, pass after pass until ``MIN_SECONDS`` of
    ``clock`` (at most ``MAX_PASSES``); the ``top`` functions of the files in ``ours`` (code
    filename -> path in the commit) by charged self time: ``{"seconds": one pass, "passes",
    "functions": [{"name", "where", "share"}]}``, largest share first. The profiler reads
    ``clock`` too (CPU time: a neighbour's load moves no share)."""
    profiler = cProfile.Profile(clock, builtins=False)
    start, passes = clock(), 0
    profiler.enable()
    try:
        while passes < MAX_PASSES and (not passes or clock() - start < MIN_SECONDS):
            for call in calls:
                call()
            passes += 1
    finally:
        profiler.disable()
    stats = pstats.Stats(profiler).stats
    total = sum(entry[2] for entry in stats.values())
    charged = charge(stats, lambda func: func[0] in ours)
    rows = sorted(charged.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return {"seconds": total / passes, "passes": passes,
            "functions": [{"name": func[2], "where": f"{ours[func[0]]}:{func[1]}",
                           "share": seconds / total if total else 0.0}
                          for func, seconds in rows if seconds > 0]}


def charge(stats: dict, ours: Callable[[tuple], bool]) -> dict[tuple, float]:
    """Each of our functions' self time plus what it is charged of the others' (see the module
    docstring); ``stats`` as pstats keeps it: func -> (cc, nc, tt, ct, callers), each caller's
    edge (nc, cc, tt, ct)."""
    owners: dict[tuple, dict[tuple, float]] = {}
    out: dict[tuple, float] = defaultdict(float)
    for func, entry in stats.items():
        if entry[2] <= 0:
            continue
        for owner, share in _owners(func, stats, ours, owners, ()).items():
            out[owner] += entry[2] * share
    return dict(out)


def _owners(func, stats, ours, memo, chain) -> dict[tuple, float]:
    """Our functions that ``func``'s time belongs to, each with its share (summing to at most 1:
    time reached from no function of ours belongs to nobody)."""
    if ours(func):
        return {func: 1.0}
    if func in memo:
        return memo[func]
    callers = stats.get(func, (0, 0, 0, 0, {}))[4]
    weights = {c: edge[3] or edge[0] for c, edge in callers.items() if c not in chain}
    total = sum(weights.values())
    out: dict[tuple, float] = defaultdict(float)
    if total and len(chain) < _MAX_DEPTH:
        for caller, weight in weights.items():
            for owner, share in _owners(caller, stats, ours, memo, chain + (func,)).items():
                out[owner] += share * weight / total
    memo[func] = dict(out)
    return memo[func]
