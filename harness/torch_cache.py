"""Torch's own cache folder for one command.

Importing ``torch._dynamo`` makes ``$TMPDIR/torchinductor_<user>`` (torch's default cache folder)
in whichever process imports it first: a command's subject workers, its exact child and ASV's
benchmark processes. A command leaves nothing behind, so unless the user names a folder
(``TORCHINDUCTOR_CACHE_DIR``, kept as given), every process it starts shares one that the command
owns and removes when it ends (compiled kernels are still shared within the command).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


@contextlib.contextmanager
def command_torch_cache():
    if os.environ.get(CACHE_ENV):
        yield
        return
    folder = tempfile.mkdtemp(prefix="spyre-bench-torch-")
    os.environ[CACHE_ENV] = folder
    try:
        yield
    finally:
        if os.environ.get(CACHE_ENV) == folder:
            del os.environ[CACHE_ENV]
        shutil.rmtree(folder, ignore_errors=True)
