"""Jagged attention (``SPYRE_JAGGED_ATTENTION``): the builder packs every sequence of a step into
one plan (``jagged_plan.py``), grouped by query width, and the impl calls one kernel per group,
each over static-capacity tables rather than per-sequence block counts.

How many times a kernel's loop runs is read from its page table as the kernels define their
loops (``ops/jagged_*_attn.py``): the last axis of ``page_indices`` is the int32 stick the page
id sits in, the first is walked by the outer ``for_each_tile`` and the second, where there is
one, by the inner one; what is left is pages gathered at once per visit:

* decode groups (``jagged_decode_attn``, one-row query tiles): ``[groups, chunks, entries, 32]``,
  ``groups x chunks`` visits of ``entries`` pages each;
* query-tile groups (``jagged_tile_attn``): ``[tiles, pages, 32]``, ``tiles x pages`` visits of one;
* the flat kernel (``jagged_page_attn``): ``[work, 32]``, ``work`` visits of one.

A call's compile key is what its graph specialises on beyond the config: the page table's extents
and the query tile width (``output_indices``' last extent).
"""

from __future__ import annotations

from math import prod

from harness.subjects.spyre.drive.calls import StepFigures
from harness.subjects.spyre.drive.errors import NotDrivable
from harness.subjects.spyre.drive.kernel_proxy import KernelCall

#: The arguments every jagged kernel takes (its packed plan's tables).
PLAN_ARGS = ("query_indices", "output_indices", "page_indices")
#: Key names by the page table's rank.
KINDS = {4: "jagged_decode", 3: "jagged_tile", 2: "jagged_flat"}


def takes(call: KernelCall) -> bool:
    return all(name in call.args for name in PLAN_ARGS)


def _table(call: KernelCall) -> tuple[int, ...]:
    """The page table's extents without its stick axis."""
    pages = call.args["page_indices"]
    shape = tuple(int(n) for n in getattr(pages, "shape", ()))
    if len(shape) not in KINDS:
        raise NotDrivable(f"kernel {call.kernel}: page_indices of shape {list(shape)}: not a "
                          "jagged plan table spyre-bench can read ([groups, chunks, entries, "
                          "32], [tiles, pages, 32] or [work, 32])")
    return shape[:-1]


def loop_iterations(call: KernelCall) -> int:
    """Visits of the kernel's page body: the outer loop's extent times the inner one's."""
    return prod(_table(call)[:2])


def read(calls: list[KernelCall], step, metadata, block_size: int, into: StepFigures) -> None:
    """Each group's loop iterations, padded slots (every page slot its table walks) and key."""
    from harness.model.dispatch import CompileKey

    for c in calls:
        table = _table(c)
        width = int(c.args["output_indices"].shape[-1])
        into.iterations += loop_iterations(c)
        into.padded += prod(table) * block_size
        into.keys.append(CompileKey(KINDS[len(table) + 1], (*table, width)))
        into.jagged_groups.append(KINDS[len(table) + 1])
    if calls:
        into.jagged = len(step)


def reason(figures: StepFigures) -> str:
    """Which groups the step's plan made."""
    groups = figures.jagged_groups
    decode, tiles = groups.count("jagged_decode"), len(groups) - groups.count("jagged_decode")
    return (f"jagged: {decode} decode group(s), {tiles} query-tile group(s)")
