"""Escaping untrusted text for PR comments: properties over arbitrary text, checked on the source
and on what a CommonMark + tables renderer (markdown-it-py) makes of it."""

import html
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from harness.report.markdown_escape import ZWJ, code, escape

MD = MarkdownIt("commonmark").enable("table")

# Text that leans on what matters here, plus anything at all.
HOSTILE = st.lists(st.sampled_from([
    "@", "@octocat", "@org/team", "#", "#12", "GH-7", "gh-7", "<", ">", "<!--", "-->", "<img src=x>",
    "&", "&lt;", "&#64;", "|", "\\", "\\|", "`", "``", "*", "_", "~~", "[", "](", ")", "![x](y)",
    "$", "$$", "\n", "\r\n", "\t", "\u2028", "\x00", "\x1b", "\u202e", "://", "https://x.io/1",
    " ", "a", "bs192", "é", "🌈",
]), max_size=12).map("".join)
TEXT = st.one_of(HOSTILE, st.text(max_size=40))


def visible(text: str) -> str:
    """What a reader should see for ``text``: the same characters, but for the documented changes."""
    out = []
    for c in text:
        if c in "\n\r\x0b\x0c\x85\u2028\u2029\t" or ord(c) < 32 or 0x7f <= ord(c) < 0xa0:
            out.append(" ")
        elif c not in "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069":
            out.append(c)
    s = "".join(out).replace("@", "@" + ZWJ)
    s = re.sub(r"(#|GH-)(?=\d)", lambda m: m.group(0) + ZWJ, s, flags=re.IGNORECASE)
    return s.replace("://", ":" + ZWJ + "//")


def cell_html(markdown_cell: str) -> str:
    rendered = MD.render(f"| name | value |\n|---|---|\n| {markdown_cell} | end |\n")
    m = re.search(r"<tbody>\n<tr>\n<td>(.*?)</td>\n<td>end</td>\n</tr>\n</tbody>", rendered, re.S)
    assert m, rendered  # still exactly one row of exactly two cells
    return m.group(1)


@settings(max_examples=300, deadline=None)
@given(TEXT)
@example("@octocat <script>alert(1)</script> | #1 `x` **b** [l](http://e) $x$ \n next")
@example("<!-- spyre-bench:pr-comment v1 -->")
def test_escaped_source_has_no_mention_tag_pipe_or_newline(text):
    out = escape(text)
    assert not re.search(r"@[A-Za-z0-9]", out)                  # no raw @user
    assert "<" not in out and ">" not in out                     # no tag, no comment
    assert not re.search(r"(?<!\\)(?:\\\\)*\|", out.replace("\\\\", ""))  # every | is \|
    assert not re.search(r"(?<!\\)`", out.replace("\\\\", ""))  # every backtick is \`
    assert not re.search(r"[\n\r\u2028\u2029\x85]", out)
    plain = re.sub(r"&#\d+;", "", out).replace("\\", "")         # entities are not references
    assert not re.search(r"#\d|GH-\d", plain, re.IGNORECASE)


@settings(max_examples=300, deadline=None)
@given(TEXT)
@example("a | b")
@example("**bold** _em_ ~~strike~~ [link](http://x) ![img](y) `code` <b>x</b> &amp; $m$")
def test_a_table_cell_renders_the_text_itself_and_no_markup(text):
    inner = cell_html(escape(text))
    assert "<" not in inner                                      # no element: no link, code, em...
    assert html.unescape(inner) == visible(text).strip()


@given(TEXT)
def test_code_spans_keep_text_literal_in_one_cell(text):
    inner = cell_html(code(text))
    shown = html.unescape(re.sub(r"</?code>", "", inner))
    assert inner.count("<code>") <= 1 and "<" not in re.sub(r"</?code>", "", inner)
    assert "\n" not in shown


def test_examples_read_as_documented():
    assert escape("@octocat") == "@" + ZWJ + "octocat"
    assert escape("a|b") == "a\\|b"
    assert escape("<!-- x -->") == "&lt;\\!\\-\\- x \\-\\-&gt;"
    assert escape("fix #12") == "fix \\#" + ZWJ + "12"
    assert escape("line1\nline2") == "line1 line2"
    assert escape(192) == "192"
    assert code("a`b") == "``a`b``" and code("x|y") == "`x\\|y`"
