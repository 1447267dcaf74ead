"""Cutting a markdown body to GitHub's size limit without breaking what it renders.

Pure string functions (markdown-it only when a body is cut): the renderer sizes its own output
with them, and the publisher checks a body before it is sent.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: GitHub refuses comment bodies over 65,536 characters ("Body is too long (maximum is 65536
#: characters)"). Counted here in code points (Python's ``len``). Bodies that fit this also fit the
#: 262,144 UTF-8 byte cap third parties have measured on the same endpoints (<= 4 bytes a code point).
GITHUB_BODY_LIMIT = 65536

DEFAULT_POINTER = "The comment was cut to fit GitHub's size limit; the full report is in the run's artifacts."


def fit_body(body: str, limit: int = GITHUB_BODY_LIMIT, pointer_text: str = DEFAULT_POINTER) -> str:
    """``body`` unchanged when it fits ``limit`` characters; otherwise cut at a line boundary.

    The cut keeps whole lines from the top (the marker and the verdict come first) and ends with
    ``pointer_text``, which should say where the full report is. A code fence or HTML block left
    open by the cut is closed first, as a CommonMark parser sees it (markdown-it), so the pointer
    is not swallowed by it, and so are ``<details>`` sections (the pointer stays visible). A first
    line longer than the room left is cut inside the line. ValueError when the pointer cannot fit.
    """
    if len(body) <= limit:
        return body
    pointer = f"\n\n---\n✂️ {pointer_text.strip()}\n"
    room = limit - len(pointer)
    if room < 1:
        raise ValueError(f"limit {limit} leaves no room for the pointer ({len(pointer)} characters)")
    head = body[:room]
    if body[room] != "\n" and "\n" in head:
        head = head[:head.rindex("\n")]
    while True:
        closing = _closing(head, pointer)
        if len(head) + len(closing) <= room:
            return head + closing + pointer
        head = head[:head.rindex("\n")] if "\n" in head else head[:room - len(closing)]
        if not head:
            raise ValueError(f"limit {limit} leaves no room for the pointer and closing tags")


# CommonMark HTML blocks that only their end marker closes (kinds 1-5), by how they start; the
# other kinds end at the blank line the pointer brings. Any of the raw-text end tags ends kind 1.
_HTML_ENDS = [(re.compile(r"<(?:script|pre|style|textarea)(?:[\s>]|$)", re.IGNORECASE), "</pre>"),
              (re.compile(r"<!--"), "-->"), (re.compile(r"<\?"), "?>"),
              (re.compile(r"<!\[CDATA\["), "]]>"), (re.compile(r"<![A-Za-z]"), ">")]
_DETAILS = re.compile(r"<(/?)details\b", re.IGNORECASE)


def _closing(head: str, pointer: str) -> str:
    """What to append to ``head`` so that ``pointer`` after it renders as its own paragraph."""
    closing = ""
    for _ in range(8):  # each round closes one block; blocks cannot nest deeper at top level
        tokens = _markdown().parse(head + closing + pointer)
        top = [t for t in tokens if t.level == 0]
        if [t.type for t in top[-3:]] == ["hr", "paragraph_open", "paragraph_close"]:
            break
        last = top[-1]
        if last.type == "fence":
            closing += f"\n{last.markup}"
        elif last.type == "html_block":
            start = last.content.lstrip(" ")
            ends = [end for rx, end in _HTML_ENDS if rx.match(start)]
            if not ends:
                break
            closing += f"\n{ends[0]}"
        else:
            break
    depth = 0
    for t in tokens:
        for html in [t] if t.type == "html_block" else (t.children or []):
            if html.type in ("html_block", "html_inline"):
                for slash in _DETAILS.findall(html.content):
                    depth = max(depth + (-1 if slash else 1), 0)
    # A blank line first: it ends a table, which would otherwise take "</details>" as a row.
    return closing + ("\n" + "\n</details>" * depth if depth else "")


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt  # only when a body is cut
    return MarkdownIt("commonmark")
