"""Untrusted text inside GitHub markdown: shown exactly as written, never acted on.

Benchmark names, parameters and branch names come from the code under review (a PR can name a
branch ``@org/team <img src=x onerror=...> | #1``). In a PR comment such text must not ping people,
inject HTML, break out of its table cell, format, link, or cross-reference issues. ``escape`` makes
one line of markdown inline text that renders to the same characters, with these changes:

- ``&``, ``<``, ``>`` become entities (no HTML tag or comment can start; a forged marker comment
  ``<!-- spyre-bench:... -->`` becomes visible text), and ``$`` too (no math);
- ASCII punctuation that markdown acts on gets a backslash (``|`` cannot end a table cell,
  backticks open no code span, ``*_~[]()!`` make no emphasis, link or image);
- a zero-width joiner (U+200D) follows ``@``, separates ``#``/``GH-`` from digits and splits
  ``://``: GitHub's mention, issue-reference and autolink filters match ``@name``, ``#123`` and
  URLs in the rendered text, which backslashes and entities do not hide (a reference would also
  put a "mentioned this" event on the referenced issue);
- line breaks and other control characters become spaces (one table row stays one row); bidi
  controls are dropped (text cannot be shown reordered).
"""

from __future__ import annotations

import re

ZWJ = "\u200d"

# Characters CommonMark lets a backslash escape and that GFM acts on inline or in tables.
_BACKSLASHED = set("\\`*_{}[]()#+-.!|~:")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "$": "&#36;"}
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_LINE_BREAKS = set("\n\r\x0b\x0c\x85\u2028\u2029")
# After backslashing: '#' reads '\#', 'GH-' reads 'GH\-', '://' reads '\://'.
_LINKISH = re.compile(r"(\\#|GH\\-)(?=\d)|(\\:)(?=//)", re.IGNORECASE)


def escape(text: object) -> str:
    """``text`` (str() of anything) as safe inline markdown, e.g. for a table cell."""
    s = "".join(_char(c) for c in str(text))
    s = s.replace("@", "@" + ZWJ)
    return _LINKISH.sub(lambda m: m.group(0) + ZWJ, s)


def _char(c: str) -> str:
    if c in _ENTITIES:
        return _ENTITIES[c]
    if c in _BACKSLASHED:
        return "\\" + c
    if c in _LINE_BREAKS or c == "\t":
        return " "
    if c in _BIDI:
        return ""
    if ord(c) < 32 or 0x7f <= ord(c) < 0xa0:
        return " "
    return c


def code(text: object) -> str:
    """``text`` as an inline code span (for SHAs, commands): backticks inside widen the fence.

    Code spans show text literally, so mentions and references in them do nothing; only line
    breaks and pipes need care (GitHub splits table cells on ``|`` even inside code: use ``\\|``).
    """
    s = "".join(" " if c in _LINE_BREAKS or ord(c) < 32 else c for c in str(text) if c not in _BIDI)
    s = s.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{fence}{pad}{s}{pad}{fence}"
