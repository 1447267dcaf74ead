"""When the commit batches decodes, found by driving its code, not assumed.

Two sides decide it: the metadata builder prepares a batched call (``padded_num_seqs`` in its
metadata) for some number of decodes, and the impl runs it or not. The fewest decodes the builder
batches is found by building all-decode steps of 1, 2, ... one-block sequences (an early builder
wants 4; the newest batches any number its ``num_seqs`` ladder holds, from 1); the impl's side by
forwarding that step with recorded kernels and seeing whether a batched kernel was called. Where
the builder batches and the impl does not (token-major caches under the tiled walk, in the newest
trees), the figures say the impl declines, and why, as far as the impl's own methods tell.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.subjects.spyre.drive.steps import one_block_decodes

#: The builder's metadata field that holds the padded batch (None: the step is not batched).
PREPARED = "padded_num_seqs"


@dataclass(frozen=True)
class Batching:
    """What driving the commit showed for one config and env.

    ``minimum``: the fewest decodes it batches (None: none found, where the builder prepares no
    batched call or its metadata does not say); ``impl_declines``: why the impl runs no batched
    call the builder prepared (None: it runs them, or the builder prepares none);
    ``records_batched``: whether the impl's warmup records batched variants, where its own
    ``_batched_decode_supported()`` says (the commit's ``record_graphs`` consults it), else None;
    ``batches``: whether it batches any step at all (None: driving could not tell).
    """

    minimum: int | None
    impl_declines: str | None = None
    records_batched: bool | None = None
    batches: bool | None = None

    def as_tuple(self) -> tuple:
        return (self.minimum, self.impl_declines, self.records_batched, self.batches)


def _supported(impl, name: str) -> bool | None:
    """The impl's own answer from its method ``name`` (None where it has none or it raises)."""
    method = getattr(impl, name, None)
    if not callable(method):
        return None
    try:
        return bool(method())
    except Exception:
        return None


def _why_impl_declines(impl, for_each_tile: bool | None, decodes: int) -> str:
    cls = type(impl).__name__
    if _supported(impl, "_batched_decode_supported") is False:
        if for_each_tile and _supported(impl, "_tiled_batched_decode_supported") is False:
            return (f"{cls} runs no batched decode under the tiled walk "
                    "(SPYRE_ATTN_FOR_EACH_TILE on): its _tiled_batched_decode_supported() is "
                    "False")
        return f"{cls}._batched_decode_supported() is False"
    return f"{cls}.forward() made no batched call for the {decodes} decode(s) its builder batched"


def probe(session, batched_on: bool, constant: int | None) -> Batching:
    """Drive ``session``'s builder (and impl) to find when the commit batches; ``batched_on``:
    the commit's own batched-decode switch; ``constant``: its ``_MIN_BATCHED_SEQS`` where it has
    one (the answer where driving cannot tell)."""
    if not batched_on:
        return Batching(constant, batches=False)
    config = session.config
    minimum = None
    for n in range(1, config.max_num_seqs + 1):
        metadata, _ = session.build(one_block_decodes(config, n))
        if not hasattr(metadata, PREPARED):
            return Batching(constant)
        if getattr(metadata, PREPARED) is not None:
            minimum = n
            break
    if minimum is None:
        return Batching(constant)
    calls, _, _ = session.drive(one_block_decodes(config, minimum))
    records = _supported(session.impl, "_batched_decode_supported")
    if any(c.batched for c in calls):
        return Batching(minimum, None, records, True)
    return Batching(minimum, _why_impl_declines(session.impl, session.env.for_each_tile,
                                                minimum), records, False)
