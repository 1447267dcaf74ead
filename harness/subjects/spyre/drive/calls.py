"""A step's recorded kernel calls read as figures: how many times a kernel's loop runs (from its
arguments, by name) and what the calls of each path add up to (:class:`StepFigures`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.subjects.spyre.drive.errors import NotDrivable
from harness.subjects.spyre.drive.kernel_proxy import KernelCall

#: The per-chunk index argument of a chunked kernel, by the names stored kernels give it
#: (``chunk_page_ids``; ``chunk_row_ids`` in the head-major kernel that indexes rows; the
#: backend hook's ``chunk_index_tables``): a list with one entry per loop step, a block-major
#: table ``[chunks * blocks_per_chunk, num_seqs]``, or the head-major tiled walk's split index
#: ``[chunks, entries, 1]`` (one page id per stick; ``batched_decode_head_major`` walks its
#: first axis).
CHUNK_INDEX_ARGS = ("chunk_page_ids", "chunk_row_ids", "chunk_index_tables")


def loop_iterations(call: KernelCall) -> int:
    """How many times the kernel's loop runs, read from its arguments by name."""
    a = call.args
    if isinstance(a.get("num_chunks"), int):
        return a["num_chunks"]
    name = next((n for n in CHUNK_INDEX_ARGS if a.get(n) is not None), None)
    pages = a.get(name) if name else None
    if isinstance(pages, (list, tuple)):
        return len(pages)
    if pages is not None and isinstance(a.get("blocks_per_chunk"), int):
        if pages.dim() == 3:
            return int(pages.shape[0])
        return int(pages.shape[0]) // a["blocks_per_chunk"]
    if isinstance(a.get("num_blocks"), int):
        return a["num_blocks"]
    raise NotDrivable(f"kernel {call.kernel}({', '.join(a)}): cannot tell its loop count (no "
                      f"num_chunks, {', '.join(CHUNK_INDEX_ARGS)} or num_blocks argument)")



def blocks_per_step(call: KernelCall) -> int:
    bpc = call.args.get("blocks_per_chunk")
    return loop_iterations(call) * (bpc if isinstance(bpc, int) else 1)


@dataclass
class StepFigures:
    """What one step's kernel calls add up to, path by path
    (:mod:`harness.subjects.spyre.drive.paths`), before it becomes the model's StepCost."""

    #: compile keys, in the order the paths read their calls
    keys: list = field(default_factory=list)
    padded: int = 0
    iterations: int = 0
    #: the batched call's fields of the Dispatch (b_seqs, b_blocks, blocks_per_chunk, ...)
    fields: dict = field(default_factory=dict)
    batched: bool = False
    #: the real rows the batched call served
    n_batched: int = 0
    #: (iterations, padded query width) per per-sequence call
    per_sequence: list = field(default_factory=list)
    #: sequences a jagged plan served (every one of the step's, where the builder planned it)
    jagged: int = 0
    #: the jagged plan's groups, one kernel call each ("jagged_decode", "jagged_tile", ...)
    jagged_groups: list = field(default_factory=list)
    #: why the step took its path
    reason: str = ""
