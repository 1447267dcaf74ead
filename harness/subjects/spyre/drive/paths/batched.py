"""The batched decode path: one kernel call over a padded batch of decode sequences (it takes
their padded count, ``num_seqs``), and why a step did or did not take it."""

from __future__ import annotations

from harness.subjects.spyre.drive.calls import StepFigures, blocks_per_step, loop_iterations
from harness.subjects.spyre.drive.kernel_proxy import KernelCall


def takes(call: KernelCall) -> bool:
    return call.batched


def read(calls: list[KernelCall], step, metadata, block_size: int, into: StepFigures) -> None:
    """The batched calls' keys, loop iterations, padded slots and Dispatch fields."""
    from harness.model.dispatch import CompileKey

    into.batched = into.batched or bool(calls)
    for c in calls:
        it = loop_iterations(c)
        b_seqs = int(c.args.get("num_seqs"))
        bpc = c.args.get("blocks_per_chunk")
        into.iterations += it
        into.padded += b_seqs * blocks_per_step(c) * block_size
        if isinstance(bpc, int):
            into.keys.append(CompileKey("batched_chunked", (b_seqs, bpc, it)))
            into.fields.update(blocks_per_chunk=bpc, num_chunks=it)
        else:
            into.keys.append(CompileKey("batched", (b_seqs, it)))
        b_blocks = getattr(metadata, "padded_batch_blocks", None)
        into.fields.update(b_seqs=b_seqs, b_blocks=b_blocks if isinstance(b_blocks, int) else None)
        # the real rows the batched call served: the builder's own count where its metadata
        # keeps one (num_decode_seqs), else the step's leading decodes (a pre-#810 builder
        # batches whole all-decode steps), never more than the padded batch
        built = getattr(metadata, "num_decode_seqs", None)
        leading = next((i for i, q in enumerate(step) if not q.is_decode), len(step))
        into.n_batched = min(b_seqs, built if isinstance(built, int) and built > 0 else leading)


def served(step, figures: StepFigures) -> str:
    return "batched" if figures.n_batched >= len(step) else "decode prefix batched"


def declined(step, metadata, batched_on: bool, batching) -> str:
    """Why a step ran no batched call, from the commit's own switch, what its builder left in
    the metadata and what driving it showed (``batching``: a
    :class:`harness.subjects.spyre.drive.batching.Batching`): the builder declined, or it
    prepared the call and the impl declined it."""
    from harness.subjects.spyre.drive.batching import PREPARED

    if not batched_on:
        return "SPYRE_BATCHED_DECODE off"
    decodes = next((i for i, s in enumerate(step) if not s.is_decode), len(step))
    built = getattr(metadata, "num_decode_seqs", None)
    if isinstance(built, int) and built < decodes:
        prefills = sum(1 for s in step if not s.is_decode)
        return f"{prefills} prefill sequence(s) in the batch"
    if getattr(metadata, PREPARED, None) is not None:
        why = batching.impl_declines or "its forward made no batched call"
        return f"impl declined the batched path the builder prepared: {why}"
    minimum = batching.minimum
    if isinstance(minimum, int) and decodes < minimum:
        return f"{decodes} decode(s) < minimum {minimum}"
    return f"builder declined the batched path ({decodes} leading decodes)"
