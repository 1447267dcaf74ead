"""The attention paths a commit's code can take, one module each: which backend the engine runs
(a knob of the commit's env chooses it) and how a path's kernel calls read as a step's figures.
A new path is a new module here, named in :data:`BACKENDS` or :data:`KERNEL_PATHS`: the
session that drives the commit does not change."""

from __future__ import annotations

from harness.subjects.spyre.drive.calls import StepFigures
from harness.subjects.spyre.drive.commit_env import LAYOUT as LAYOUT_KNOB
from harness.subjects.spyre.drive.paths import (
    batched,
    head_major,
    jagged,
    per_sequence,
    token_major,
)

__all__ = ["BACKENDS", "KERNEL_PATHS", "LAYOUT_KNOB", "backend_for", "read_step"]

#: Backend module and class per KV layout, as the commit's platform registers them.
BACKENDS = {p.LAYOUT: (p.MODULE, p.CLASS) for p in (token_major, head_major)}
#: The kernel paths: a call is read by the first that takes it, and a step's figures list their
#: calls' keys in this order.
KERNEL_PATHS = (batched, jagged, per_sequence)


def backend_for(layout: str | None) -> tuple[str, str]:
    """(module, backend class) the engine runs for the layout the commit reads (None: it reads
    no layout knob, so it has only the token-major backend)."""
    return BACKENDS[layout or token_major.LAYOUT]


def read_step(calls, step, metadata, block_size: int, why_not_batched) -> StepFigures:
    """What a step's recorded kernel calls add up to, each call read by the path that takes it,
    and why the step took its path (``why_not_batched``: the batched path's decision, asked only
    where neither a batched nor a jagged kernel ran)."""
    figures = StepFigures()
    left = list(calls)
    for path in KERNEL_PATHS:
        mine = [c for c in left if path.takes(c)]
        left = [c for c in left if not path.takes(c)]
        path.read(mine, step, metadata, block_size, figures)
    if figures.jagged:
        figures.reason = jagged.reason(figures)
    elif figures.batched:
        figures.reason = batched.served(step, figures)
    else:
        figures.reason = why_not_batched(step, metadata)
    return figures
