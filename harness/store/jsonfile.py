"""Read one stored JSON file (results, benchmarks.json, identity) without trusting it.

Stored files come from other machines, other versions and hand edits: a FIFO or a device named
like a results file must not hang or flood a reader, and nesting deep enough to exhaust the
parser's recursion is a malformed file like any other. Every way a file can be unreadable is a
:class:`StoredFileError` (a ValueError), which readers turn into one warning naming the file.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

#: Far above any results file (a full-tier commit is about 200 kB): a bigger one is not ours.
MAX_BYTES = 64 << 20


class StoredFileError(ValueError):
    """A stored file that cannot be read as what it claims to be."""


def read_json(path: Path):
    """The JSON value in ``path``: a regular file of at most MAX_BYTES of UTF-8 JSON.

    ASV writes the non-standard tokens NaN and Infinity, which are accepted here as they are by
    ``json``; anything else wrong raises StoredFileError (or OSError for a file that cannot be
    opened)."""
    return parse_json(read_bytes(path))


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``, a regular file of at most MAX_BYTES (StoredFileError otherwise)."""
    # O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoredFileError("not a regular file")
        if info.st_size > MAX_BYTES:
            raise StoredFileError(f"{info.st_size:,} bytes, more than a stored file holds")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)


def parse_json(raw: bytes):
    """The JSON value of a stored file's bytes (StoredFileError if it is not UTF-8 JSON)."""
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise StoredFileError("nested too deeply") from None
    except ValueError as exc:   # JSONDecodeError, UnicodeDecodeError, too many int digits
        raise StoredFileError(f"not JSON ({exc})") from None


def is_number(value) -> bool:
    """A stored measurement: an int or float, finite or NaN (ASV's skip), that float64 holds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return abs(value) <= 2 ** 63
    return math.isnan(value) or math.isfinite(value)
