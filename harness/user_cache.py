"""Where spyre-bench keeps what outlives one command: ``$XDG_CACHE_HOME/spyre-bench``, else
``~/.cache/spyre-bench`` (the figure memo, the measured bandwidth, torch's compile cache)."""

from __future__ import annotations

import os
from pathlib import Path


def folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spyre-bench"
