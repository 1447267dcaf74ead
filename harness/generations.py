"""The batched decode kernel's two generations, named once.

``A`` walks one KV block per loop step (``num_blocks``); ``B`` is chunked (``blocks_per_chunk``,
``num_chunks``; docs/spyre-inference.md, section 3). A :class:`~enum.StrEnum`: members equal,
print and serialise as the plain letters, so stored figures and JSON are unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class Generation(StrEnum):
    A = "A"  # one block per loop step
    B = "B"  # chunked
