"""Torch's own compile cache for a command.

Importing ``torch._dynamo`` makes torch's default cache folder, ``$TMPDIR/torchinductor_<user>``,
in whichever process imports it first (subject workers, the exact child, ASV's benchmark
processes), so a command left it behind in the temporary folder. Unless the user names one
(``TORCHINDUCTOR_CACHE_DIR``, kept as given), every process a command starts uses
spyre-bench's cache folder instead: compiled kernels are kept between commands, as before, and
nothing is left in ``$TMPDIR``.
"""

from __future__ import annotations

import contextlib
import os

from harness import user_cache

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


@contextlib.contextmanager
def command_torch_cache():
    if os.environ.get(CACHE_ENV):
        yield
        return
    folder = str(user_cache.folder() / "torchinductor")
    os.environ[CACHE_ENV] = folder
    try:
        yield
    finally:
        if os.environ.get(CACHE_ENV) == folder:   # main() called in-process leaves it as found
            del os.environ[CACHE_ENV]
