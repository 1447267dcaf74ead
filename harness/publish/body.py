"""The sticky comment's body: its hidden marker and GitHub's size limit.

Pure string functions (no network, no third-party imports) so the markdown renderer can call them
without pulling in the HTTP client.

The marker is an HTML comment on a line of its own. It is invisible in the rendered comment, and
it is what the publisher looks for to update its comment in place. A *key* separates independent
sticky comments on one PR (the CPU comparison and the hardware run each keep their own); the
version number lets the format change without orphaning old comments (any version is found).
"""

from __future__ import annotations

import re
from functools import lru_cache

#: GitHub refuses comment bodies over 65,536 characters ("Body is too long (maximum is 65536
#: characters)"). Counted here in code points (Python's ``len``). Bodies that fit this also fit the
#: 262,144 UTF-8 byte cap third parties have measured on the same endpoints (<= 4 bytes a code point).
GITHUB_BODY_LIMIT = 65536

DEFAULT_KEY = "pr-comment"
MARKER_VERSION = 1
DEFAULT_POINTER = "The comment was cut to fit GitHub's size limit; the full report is in the run's artifacts."

_KEY = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_DETAILS_OPEN = re.compile(r"<details\b", re.IGNORECASE)
_DETAILS_CLOSE = re.compile(r"</details\s*>", re.IGNORECASE)


def _check_key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise ValueError(f"marker key {key!r}: use lowercase letters, digits and '-' (at most 64)")
    return key


def marker(key: str = DEFAULT_KEY) -> str:
    """The hidden marker line, e.g. ``<!-- spyre-bench:pr-comment v1 -->``.

    The renderer puts it first in the body; :func:`ensure_marker` adds it when it is missing.
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


def ensure_marker(body: str, key: str = DEFAULT_KEY) -> str:
    """``body`` with this key's marker as its first line, unless a marker line is already there."""
    return body if has_marker(body, key) else f"{marker(key)}\n{body}"


def fit_body(body: str, limit: int = GITHUB_BODY_LIMIT, pointer_text: str = DEFAULT_POINTER) -> str:
    """``body`` unchanged when it fits ``limit`` characters; otherwise cut at a line boundary.

    The cut keeps whole lines from the top (the marker and the verdict come first), closes a code
    fence or ``<details>`` sections left open by the cut (so the pointer is not swallowed by them),
    and ends with ``pointer_text``, which should say where the full report is. A single line longer
    than the room left is cut inside the line. Raises ValueError when even the pointer cannot fit.
    """
    if len(body) <= limit:
        return body
    pointer = f"\n\n---\n✂️ {pointer_text.strip()}\n"
    lines = body.split("\n")
    kept = 0        # lines kept
    size = -1       # length of "\n".join(lines[:kept])
    state = _Blocks()
    for line in lines:
        after = state.step(line)
        if size + 1 + len(line) + len(after.closing()) + len(pointer) > limit:
            break
        kept, size, state = kept + 1, size + 1 + len(line), after
    if kept:
        head = "\n".join(lines[:kept])
    else:  # the first line alone is longer than the room left: cut inside it
        room = limit - len(pointer)
        head = lines[0][:max(room, 0)]
        state = _Blocks().step(head)
        head = head[:room - len(state.closing())]
        if not head:
            raise ValueError(f"limit {limit} leaves no room for the pointer ({len(pointer)} characters)")
        state = _Blocks().step(head)
    out = head + state.closing() + pointer
    assert len(out) <= limit, (len(out), limit)
    return out


class _Blocks:
    """Markdown blocks open after some lines: a code fence (its opening run) and <details> depth."""

    __slots__ = ("fence", "details")

    def __init__(self, fence: str | None = None, details: int = 0):
        self.fence, self.details = fence, details

    def step(self, line: str) -> _Blocks:
        m = _FENCE.match(line)
        if self.fence is None:
            if m:
                return _Blocks(m.group(1), self.details)
            opened = len(_DETAILS_OPEN.findall(line)) - len(_DETAILS_CLOSE.findall(line))
            return _Blocks(None, max(self.details + opened, 0))
        run = m.group(1) if m else ""
        if run and run[0] == self.fence[0] and len(run) >= len(self.fence) \
                and not line.strip()[len(run):].strip():
            return _Blocks(None, self.details)
        return self

    def closing(self) -> str:
        return (f"\n{self.fence}" if self.fence else "") + "\n</details>" * self.details
