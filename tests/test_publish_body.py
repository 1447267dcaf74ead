"""The comment body's marker and GitHub's size guard (fit_body)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from harness.report.fit import GITHUB_BODY_LIMIT, fit_body
from harness.report.marker import MARKER, has_marker, marker, with_marker


def test_marker_is_an_html_comment_line_per_key():
    assert MARKER == "<!-- spyre-bench:pr-comment v1 -->" == marker()
    assert marker("hardware") == "<!-- spyre-bench:hardware v1 -->"
    for bad in ("", "PR", "a b", "x-->", "-x", "a" * 65):
        with pytest.raises(ValueError):
            marker(bad)


def test_has_marker_wants_a_whole_line_of_its_own_key():
    assert has_marker(f"{MARKER}\n# verdict")
    assert has_marker(f"# verdict\n\n  {MARKER}\r\n")                     # anywhere, as a line
    assert has_marker("<!-- spyre-bench:pr-comment v7 -->\nx")              # any format version
    assert not has_marker(f"> {MARKER}\n> quoted")                          # a quote
    assert not has_marker(f"the bot writes {MARKER} on top")                # prose
    assert not has_marker(f"{MARKER}\nx", key="hardware")                   # another key
    assert not has_marker("<!-- spyre-bench:pr-comment-x v1 -->")


def test_with_marker_adds_it_once():
    body = with_marker("verdict")
    assert body == f"{MARKER}\nverdict" and with_marker(body) == body


def test_with_marker_removes_forged_markers_of_any_key():
    forged = ("# verdict\n<!-- spyre-bench:hardware v1 -->\n  <!--spyre-bench:pr-comment v9-->\n"
              "text <!-- spyre-bench:hardware v1 --> inline\n")
    body = with_marker(forged, "pr-comment")
    assert body.count("<!--") == 1 and body.startswith(MARKER + "\n# verdict\n")
    assert not has_marker(body, "hardware")
    assert "text &lt;!-- spyre-bench:hardware v1 --> inline" in body


def test_fit_body_leaves_a_body_that_fits_alone():
    body = "x" * GITHUB_BODY_LIMIT
    assert fit_body(body) is body


def test_fit_body_cuts_at_a_line_and_points_to_the_artifact():
    lines = [MARKER, "## verdict: 3 ladder changes"] + [f"| row {i} | 1 → 2 |" for i in range(9000)]
    out = fit_body("\n".join(lines), pointer_text="Full report: https://ci.invalid/run/7")
    assert len(out) <= GITHUB_BODY_LIMIT
    assert out.startswith(MARKER + "\n## verdict")
    assert out.endswith("Full report: https://ci.invalid/run/7\n")
    kept = out.split("\n\n---\n")[0].split("\n")
    assert kept == lines[:len(kept)]  # whole lines, in order, none cut
    assert len(out) > GITHUB_BODY_LIMIT - 40  # and not much room wasted


def test_fit_body_closes_a_fence_and_details_left_open_by_the_cut():
    body = "top\n<details><summary>all rows</summary>\n\n```text\n" + "row\n" * 500 + "```\n</details>"
    out = fit_body(body, limit=400, pointer_text="see artifact")
    head, pointer = out.rsplit("\n\n---\n", 1)
    assert head.endswith("row\n```\n\n</details>") and pointer == "✂️ see artifact\n"
    assert len(out) <= 400


def test_fit_body_closes_details_after_a_table_with_a_blank_line():
    body = "<details><summary>rows</summary>\n\n| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 500 + "</details>"
    out = fit_body(body, limit=500, pointer_text="p")
    assert "| 1 | 2 |\n\n</details>\n\n---\n✂️ p\n" in out
    html = MarkdownIt("commonmark").enable("table").render(out)
    assert html.endswith("</table>\n</details>\n<hr />\n<p>✂️ p</p>\n")


def test_fit_body_cuts_inside_a_single_long_line():
    out = fit_body("y" * 1000, limit=120, pointer_text="p")
    assert len(out) <= 120 and out.startswith("yyy") and out.endswith("✂️ p\n")
    with pytest.raises(ValueError, match="no room for the pointer"):
        fit_body("y" * 1000, limit=10, pointer_text="a long pointer text")


LINE = st.one_of(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=60),
                 st.sampled_from(["```", "````", "~~~", "```python", "``` `x`", "<details>", "</details>", "",
                                  "<!-- note", "-->", "<?x", "?>", "<!DOC", "<![CDATA[", "]]>",
                                  "<pre>", "</pre>", "<script>", "  <!-- one line -->"]))


@settings(max_examples=400, deadline=None)
@given(st.lists(LINE, max_size=80), st.integers(min_value=60, max_value=2000))
def test_fit_body_fits_keeps_whole_lines_and_leaves_the_pointer_outside_any_block(lines, limit):
    body = "\n".join(lines)
    out = fit_body(body, limit=limit, pointer_text="see the artifact")
    assert len(out) <= limit
    if len(body) <= limit:
        assert out == body
        return
    head, sep, pointer = out.rpartition("\n\n---\n")
    assert sep and pointer == "✂️ see the artifact\n"
    k = max(k for k in range(len(lines) + 1) if head.startswith("\n".join(lines[:k])))
    added = head[len("\n".join(lines[:k])):].split("\n")[1:] if k else head.split("\n")[1:]
    closers = {"", "</details>", "-->", "?>", ">", "]]>", "</pre>"}
    assert all(a in closers or set(a) <= set("`~") for a in added), added
    html = MarkdownIt("commonmark").render(out)
    assert html.endswith("<hr />\n<p>✂️ see the artifact</p>\n"), html[-200:]
