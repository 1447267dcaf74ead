"""The per-sequence path: one kernel call per sequence (prefills, and decodes the batched path
did not take), each over its own blocks and padded query width."""

from __future__ import annotations

from harness.subjects.spyre.drive.calls import StepFigures, loop_iterations
from harness.subjects.spyre.drive.kernel_proxy import KernelCall


def takes(call: KernelCall) -> bool:
    return not call.batched


def read(calls: list[KernelCall], step, metadata, block_size: int, into: StepFigures) -> None:
    """Each call's loop iterations, padded slots and compile key (iterations, query width)."""
    from harness.model.dispatch import CompileKey

    for c in calls:
        it = loop_iterations(c)
        width = c.args.get("padded_query_len")
        into.iterations += it
        into.padded += it * block_size
        into.per_sequence.append((it, int(width) if isinstance(width, int) else 0))
        into.keys.append(CompileKey("attn", (it, into.per_sequence[-1][1])))
