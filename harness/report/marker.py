"""The sticky comment's hidden marker: the one place marker text is made, found and added.

A rendering fact, so it lives with the renderers; the publisher (harness.publish.github) imports it
from here, never the other way round.

The marker is an HTML comment on a line of its own. It is invisible in the rendered comment, and
it is what the publisher looks for to update its comment in place. A *key* separates independent
sticky comments on one PR (the CPU comparison and the hardware run each keep their own); the
version number lets the format change without orphaning old comments (any version is found).
"""

from __future__ import annotations

import re
from functools import lru_cache

DEFAULT_KEY = "pr-comment"
MARKER_VERSION = 1

_KEY = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


def _check_key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise ValueError(f"marker key {key!r}: use lowercase letters, digits and '-' (at most 64)")
    return key


def marker(key: str = DEFAULT_KEY) -> str:
    """The hidden marker line, e.g. ``<!-- spyre-bench:pr-comment v1 -->``.

    :func:`with_marker` puts it first in a body.
    """
    return f"<!-- spyre-bench:{_check_key(key)} v{MARKER_VERSION} -->"


MARKER = marker()


def has_marker(body: str, key: str = DEFAULT_KEY) -> bool:
    """True when a line of ``body`` is exactly this key's marker (any version).

    A whole line, not a substring: a reply quoting the comment (``> <!-- ... -->``) or prose that
    mentions the marker does not count.
    """
    line = _marker_line(key)
    return any(line.fullmatch(text.strip(" \t\r")) for text in body.split("\n"))


@lru_cache(maxsize=16)
def _marker_line(key: str) -> re.Pattern:
    return re.compile(rf"<!-- spyre-bench:{re.escape(_check_key(key))} v\d+ -->")


_ANY_MARKER_LINE = re.compile(r"[ \t]*<!--\s*spyre-bench:[^\n]*?-->[ \t\r]*")
_ANY_MARKER_START = re.compile(r"<!--(?=\s*spyre-bench)", re.IGNORECASE)


def with_marker(body: str, key: str = DEFAULT_KEY) -> str:
    """``body`` with this key's marker as its first line: the one place a marker is added.

    Any marker-like text already in ``body`` (any key, any version: a forged one would make
    another sticky comment's update land here) is removed as a line, or shown as text inside one.
    """
    lines = [line for line in body.split("\n") if not _ANY_MARKER_LINE.fullmatch(line)]
    text = _ANY_MARKER_START.sub("&lt;!--", "\n".join(lines)).lstrip("\n")
    return f"{marker(key)}\n{text}"


def regression_marker(key: str) -> str:
    """The hidden first line of a regression's GitHub issue, e.g.
    ``<!-- spyre-bench:regression 1a2b3c4d..5e6f7a8b -->`` (``Regression.key``).

    Unversioned, and kept in exactly this form: the nightly workflow finds an issue to update by
    matching it (.github/workflows/nightly.yml).
    """
    return f"<!-- spyre-bench:regression {key} -->"
