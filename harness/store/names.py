"""Names that become paths in a results folder (machine, environment, benchmark ids) are checked
before anything is written: a name like ``../../evil`` would otherwise write outside it."""

from __future__ import annotations

import re

from harness.errors import HarnessError

#: What ASV and git cope with everywhere: letters, digits, ``_ . -``, not starting with a dot.
_SAFE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$")


def checked_name(kind: str, name: str) -> str:
    """``name`` if it is one safe path component, else a HarnessError naming the flag."""
    if not isinstance(name, str) or not _SAFE.match(name) or name in (".", ".."):
        raise HarnessError(f"{kind} {name!r}: expected letters, digits, '_', '.' or '-' "
                           "(at most 100, not starting with '.'); it becomes a folder name")
    return name
