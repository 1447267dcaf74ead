"""The GitHub issue body for one regression, as markdown.

``harness.analyze.changepoints`` finds regressions and returns them as data; what an issue says
about one is decided here, beside the PR comment. Every string from the history goes through
``escape`` or ``code``. The hidden marker line comes first so the nightly job updates the issue
instead of opening another (``harness.report.marker.regression_marker``).
"""

from __future__ import annotations

from harness.analyze.changepoints import Regression
from harness.matrix import case_label
from harness.report.markdown_escape import code, escape
from harness.report.marker import regression_marker

_CAP = 100


def issue_markdown(r: Regression, repo_url: str | None = None) -> str:
    """The body of the GitHub issue for one regression (marker first: updated, not repeated)."""
    link = (lambda c: f"[{c[:12]}]({repo_url.rstrip('/')}/commit/{c})") if repo_url else \
        (lambda c: code(c[:12]))
    lines = [regression_marker(r.key),
             f"### {'Exact figures' if r.kind == 'exact' else 'Timings'} changed in "
             f"{link(r.first_bad)}", "",
             f"First bad commit measured: {link(r.first_bad)}; last good: {link(r.last_good)}.",
             f"The change is in one of these {len(r.candidates)} commit(s): "
             + ", ".join(link(c) for c in r.candidates) + "."]
    if len(r.candidates) > 1:
        # The flags of ``spyre-bench bisect`` (harness.cli.bisect): one series, named exactly.
        lines.append(f"Pin it: `spyre-bench bisect --repo <spyre-inference> {r.last_good[:12]} "
                     f"{r.first_bad[:12]} --benchmark <benchmark> --param NAME=VALUE ...`.")
    lines += ["", "| series | machine | before → after | |", "| --- | --- | --- | --- |"]
    for p in sorted(r.points, key=lambda p: (p.direction != "worse", p.benchmark))[:_CAP]:
        lines.append(f"| {escape(p.benchmark)} {escape(case_label(p.params))} | "
                     f"{escape(p.machine)} | {escape(p.change_text())} | "
                     f"{p.direction} |")
    if len(r.points) > _CAP:
        lines.append(f"| … {len(r.points) - _CAP} more series | | | |")
    return "\n".join(lines) + "\n"
