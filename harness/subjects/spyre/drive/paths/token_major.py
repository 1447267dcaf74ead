"""Token-major K/V caches ([pages, block, KV heads, D]): spyre-inference's first decoder attention
backend, and the engine's where the commit's env names no layout."""

from __future__ import annotations

from harness.subjects.load.loader import BACKEND_MODULE

#: The value of the layout knob (:data:`harness.subjects.spyre.drive.paths.LAYOUT_KNOB`).
LAYOUT = "token_major"
MODULE = BACKEND_MODULE
CLASS = "SpyreAttentionBackend"
