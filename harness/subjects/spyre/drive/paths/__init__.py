"""The attention paths a commit's code can take, one module each: which backend the engine runs
(a knob of the commit's env chooses it) and how a path's kernel calls read as a step's figures.
A new path is a new module here, named in :data:`BACKENDS` or :data:`KERNEL_PATHS`: the
session that drives the commit does not change."""

from __future__ import annotations

from harness.config import Overrides
from harness.subjects.spyre.drive.calls import StepFigures
from harness.subjects.spyre.drive.paths import batched, head_major, per_sequence, token_major

#: The knob whose value picks the decoder attention backend (the newest envs.py).
LAYOUT_KNOB = "SPYRE_ATTN_KV_LAYOUT"
#: Backend module and class per KV layout, as the commit's platform registers them.
BACKENDS = {p.LAYOUT: (p.MODULE, p.CLASS) for p in (token_major, head_major)}
#: The kernel paths, in the order a step's figures list their calls' keys.
KERNEL_PATHS = (batched, per_sequence)


def backend_for(overrides: Overrides) -> tuple[str, str]:
    """(module, backend class) the engine would run under these overrides."""
    return BACKENDS[overrides.knobs.get(LAYOUT_KNOB, token_major.LAYOUT)]


def read_step(calls, step, metadata, block_size: int, overrides: Overrides,
              module) -> StepFigures:
    """What a step's recorded kernel calls add up to, each call read by the path that takes it,
    and why the step took its path (the batched path's decision)."""
    figures = StepFigures()
    for path in KERNEL_PATHS:
        path.read([c for c in calls if path.takes(c)], step, metadata, block_size, figures)
    figures.reason = batched.reason(step, metadata, figures, overrides, module)
    return figures
