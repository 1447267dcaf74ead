"""The regression issue's body: marker first, and a bisect hint the CLI accepts."""

from harness.analyze.changepoints import ChangePoint, Regression
from harness.cli import parser
from harness.report.issues import issue_markdown
from harness.report.marker import regression_marker

GOOD, MID, BAD = "a" * 40, "b" * 40, "c" * 40


def _regression() -> Regression:
    point = ChangePoint("spyre-0", "env", "kernel.Decode.time_layer", {"probe": "small-4x8"}, "s",
                        False, GOOD, BAD, 1.0, 2.0)
    return Regression(GOOD, BAD, candidates=[MID, BAD], points=[point])


def test_the_marker_comes_first_in_the_form_the_nightly_workflow_matches():
    body = issue_markdown(_regression())
    assert body.startswith(regression_marker("aaaaaaaa..cccccccc") + "\n")
    assert body.splitlines()[0] == "<!-- spyre-bench:regression aaaaaaaa..cccccccc -->"


def test_the_bisect_hint_parses_as_spyre_bench_bisect():
    body = issue_markdown(_regression())
    hint = body.split("Pin it: `", 1)[1].split("`", 1)[0]
    words = hint.replace("<spyre-inference>", "repo").replace("NAME=VALUE ...", "probe=small-4x8")
    args = parser().parse_args(words.split()[1:])
    assert args.benchmark == "<benchmark>" and args.good == GOOD[:12] and args.bad == BAD[:12]
