"""Head-major K/V caches: the backend the commit's platform registers for
``SPYRE_ATTN_KV_LAYOUT=head_major`` (its own module and backend class)."""

from __future__ import annotations

#: The value of the layout knob (:data:`harness.subjects.spyre.drive.paths.LAYOUT_KNOB`).
LAYOUT = "head_major"
MODULE = "spyre_inference.v1.attention.backends.spyre_head_major_attn"
CLASS = "SpyreHeadMajorAttentionBackend"
