"""Which cores a timed worker runs on: the same ones for base and head.

Two subject workers timing identical code differed by about 5 % on a 2-core box, consistently
within a pair of workers and not between pairs: each process settles on its own core, and the
cores are not alike (interrupts, the parent's wake-ups, what else runs there). Interleaved rounds
cancel drift, not a difference that belongs to one side's process. So before a probe is sampled
both workers, every thread of each, are pinned to the same cores, away from CPU 0 where the
system's interrupts land first; with that, the same pairs agreed within 1.5 %.
"""

from __future__ import annotations

import os


def timing_cpus(threads: int) -> frozenset[int] | None:
    """The cores both sides are timed on: the last ``threads`` this process may use; None when
    that is all of them (nothing to choose) or the platform cannot pin."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if threads >= len(allowed):
        return None
    return frozenset(allowed[-threads:])


def pin_process(pid: int, cpus: frozenset[int]) -> bool:
    """Pin every thread of ``pid`` (one of this user's processes) to ``cpus``; False when the
    process or the call is not there (it is then timed wherever it runs)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        threads = [str(pid)]
    pinned = False
    for tid in threads:
        try:
            os.sched_setaffinity(int(tid), cpus)
            pinned = True
        except (OSError, ValueError, AttributeError):
            continue
    return pinned


def describe(cpus: frozenset[int]) -> str:
    return ", ".join(str(c) for c in sorted(cpus))
