"""Every document ``spyre-bench compare`` writes is one ``spyre-bench comment`` accepts, and a
hostile one ends in one line (exit 2), never a traceback.

The property test drives compare's own code path (its parser, ``comparison_from_args``,
``document_of``, JSON as ``--json`` writes it) over generated env overrides (every variable
spyre-bench hands a subject, in every spelling the commit's own parser accepts), named override
sets, configs, workloads (a trace file whose name is odd) and an expected-changes file, on the
reference subjects (pure Python: milliseconds per document).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import parser
from harness.cli.compare import comparison_from_args, document_of
from harness.config import BATCHED_DECODE, BUCKET_VARS
from harness.matrix import OVERRIDE_SETS, SET_VARIABLES
from harness.report.markdown import render
from harness.report.schema import MAX_DEPTH, MAX_NUMBER_CHARS, load_document
from harness.subjects import POLICIES

# Integer spellings Python's int() (and so spyre-inference's parser) accepts.
_INT_SPELLINGS = st.sampled_from(["{}", "+{}", " {} ", "{}\t", "0{}"])


@st.composite
def integer_text(draw, low=1, high=200_000):
    value = draw(st.integers(low, high))
    text = draw(_INT_SPELLINGS).format(value)
    if draw(st.booleans()) and value >= 1000:
        text = text.replace(str(value), f"{str(value)[:-3]}_{str(value)[-3:]}")
    if draw(st.integers(0, 9)) == 0:   # Unicode digits are digits to int()
        text = text.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    return text


@st.composite
def bucket_list(draw):
    parts = draw(st.lists(integer_text(), min_size=1, max_size=8))
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), "")     # empty fields are skipped
    return ",".join(parts)


@st.composite
def env_overrides(draw) -> list[str]:
    """``--env`` arguments: a few of every variable the harness accepts."""
    knobs = {n: sorted({env[n] for env in OVERRIDE_SETS.values() if n in env})
             for n in SET_VARIABLES if n not in BUCKET_VARS}
    names = draw(st.lists(st.sampled_from([*BUCKET_VARS, *sorted(knobs)]), unique=True,
                          max_size=4))
    out = []
    for name in names:
        if name == BATCHED_DECODE:
            value = draw(st.sampled_from(["0", "1", " 1", "+1"]))
        elif name in knobs:
            value = draw(st.sampled_from(knobs[name]))
        else:
            value = draw(st.just("") | bucket_list())
        out.append(f"{name}={value}")
    return out


FILE_NAME = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"),
                    min_size=1, max_size=60).filter(lambda s: s not in (".", "..")
                                                    and len(s.encode()) < 200)


@st.composite
def compare_argv(draw, tmp) -> list[str]:
    base, head = draw(st.lists(st.sampled_from(sorted(POLICIES)), min_size=2, max_size=2))
    argv = ["compare", "--base", f"reference:{base}", "--head", f"reference:{head}"]
    mns = draw(st.integers(1, 64))
    argv += ["--block-size", ",".join(str(64 * k) for k in draw(
                 st.lists(st.integers(1, 8), min_size=1, max_size=2, unique=True))),
             "--max-model-len", ",".join(map(str, draw(
                 st.lists(st.integers(1, 40_000), min_size=1, max_size=2, unique=True)))),
             "--max-num-seqs", str(mns),
             "--max-num-batched-tokens", str(draw(st.integers(max(mns, 64), 4096)))]
    if draw(st.booleans()):
        argv += ["--sliding-window", str(draw(st.integers(1, 8192)))]
    if draw(st.booleans()):
        argv += ["--overrides", ",".join(draw(st.lists(st.sampled_from(sorted(OVERRIDE_SETS)),
                                                       min_size=1, max_size=2, unique=True)))]
    env = draw(env_overrides())
    for item in env:
        argv += ["--env", item]
    if draw(st.booleans()) and not any(e.startswith(BATCHED_DECODE + "=") for e in env):
        argv.append("--batched")
    argv += ["--steps", "2", "--workload", draw(st.sampled_from(["uniform-short", "bimodal",
                                                                  "mixed-prefill-decode"]))]
    if draw(st.booleans()):
        trace = tmp / draw(FILE_NAME)
        trace.write_text("150,150,150,150\n300,20 | 1,20\n")
        argv += ["--trace", str(trace)]
    if draw(st.booleans()):
        expected = tmp / ("expected " + draw(FILE_NAME))
        expected.write_text(draw(st.sampled_from(["", "# nothing acknowledged\n"])))
        argv += ["--expected", str(expected)]
    return argv


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("schema-compare")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_every_document_compare_writes_is_accepted_by_comment(scratch, data):
    argv = data.draw(compare_argv(scratch))
    args = parser().parse_args(argv)
    doc = document_of(comparison_from_args(args), args)
    raw = json.dumps(doc, indent=1).encode()          # as compare --json writes it
    assert load_document(raw) == json.loads(raw), argv
    assert render(load_document(raw)).startswith("### spyre-bench: ")


def test_the_readme_chain_with_an_env_override(tmp_path):
    """The README's example: compare with --env, then comment on its JSON (refused before)."""
    out = tmp_path / "comparison.json"
    compare = subprocess.run(
        [sys.executable, "-m", "harness", "compare", "--base", "reference:pre-810", "--head",
         "reference:post-810-topup", "--batched", "--env", "SPYRE_ATTN_KV_BUCKETS=128,8192",
         "--block-size", "64", "--max-model-len", "2048", "--workload", "uniform-short",
         "--json", str(out)], capture_output=True, text=True)
    assert compare.returncode == 1 and out.exists(), compare.stderr
    assert list(json.loads(out.read_text())["envs"]) == ["kv=128,8192+batched=1"]
    proc = subprocess.run([sys.executable, "-m", "harness", "comment", "--comparison-json",
                           str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "SPYRE\\_ATTN\\_KV\\_BUCKETS=128,8192" in proc.stdout


# -- hostile input: one line, exit 2 ------------------------------------------------------------

BIG = "1" * 400
HOSTILE = {
    "a 400-digit number": (f'{{"schema": {BIG}}}', f"a number of 400 characters (at most "
                                                     f"{MAX_NUMBER_CHARS})"),
    "a 5000-digit number": ('{"a": [' + "9" * 5000 + "]}", "a number of 5,000 characters"),
    "a long exponent": ('{"a": 1.0e' + "0" * 50 + "1}", "a number of 55 characters"),
    "deep nesting": ("[" * 100_000 + "]" * 100_000, f"nests deeper than {MAX_DEPTH} levels"),
    "deep objects": ('{"a":' * 50 + "1" + "}" * 50, f"nests deeper than {MAX_DEPTH} levels"),
    "brackets in strings do not count": ('{"a": "' + "[" * 100 + '"}', "$ lacks 'schema'"),
    "an infinite float": ('{"schema": 1e400}', "$ lacks 'base'"),
    "NaN": ('{"schema": NaN}', "not JSON: NaN is not allowed"),
    "a lone surrogate": ('"\\ud800"', "$ must be object"),
    "not JSON": ("{", "not JSON"),
    "not an object": ("[]", "$ must be object"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_documents_are_one_line_and_exit_2(tmp_path, name):
    text, message = HOSTILE[name]
    path = tmp_path / "comparison.json"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "harness", "comment", "--comparison-json",
                           str(path)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("spyre-bench: error: comparison document") and \
        message in proc.stderr, proc.stderr


def test_a_lone_surrogate_inside_a_valid_document_is_refused(tmp_path):
    doc = json.loads(subprocess.run(
        [sys.executable, "-m", "harness", "compare", "--base", "reference:pre-810", "--head",
         "reference:pre-810", "--workload", "uniform-short", "--steps", "1", "--json", "-"],
        capture_output=True, text=True).stdout)
    doc["base"]["label"] = "x\ud800"
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(doc))       # ensure_ascii: written as \ud800
    proc = subprocess.run([sys.executable, "-m", "harness", "comment", "--comparison-json",
                           str(path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "$.base.label is not Unicode text" in proc.stderr


@pytest.mark.parametrize("source", ["/dev/zero", "-"])
def test_an_endless_input_is_read_only_up_to_the_limit(source):
    """/dev/zero (or a pipe that never ends) is cut at the limit, not read into memory whole."""
    stdin = subprocess.Popen(["cat", "/dev/zero"], stdout=subprocess.PIPE) if source == "-" else None
    try:
        proc = subprocess.run([sys.executable, "-m", "harness", "comment", "--comparison-json",
                               source], stdin=stdin.stdout if stdin else subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)
    finally:
        if stdin:
            stdin.kill()
            stdin.wait()
    assert proc.returncode == 2 and "bytes, over 67,108,864" in proc.stderr, proc.stderr
