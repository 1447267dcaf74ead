"""What the tool prints by default is true of the subject it is about: a real commit is never
described by the reference's model, and every finding of ``make run``'s own comparison names the
env and the config of the figures it came from, as the sources of those figures define them
(harness.matrix's override sets, harness.measure.probe_set's probes), never an empty place."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from harness.analyze.comparison import add_timings, as_document
from harness.analyze.stored import compare_stored
from harness.config import BATCHED_DECODE
from harness.matrix import OVERRIDE_SETS
from harness.measure import probe_set
from harness.report.findings import change_with_factor, findings, label, unit
from harness.report.schema import validate
from harness.runner.asv_suite import env_name
from harness.store.history import load_history

#: `make run`'s figures without its timings (the expensive part; they are added below as rows
#: of the same probes): the exact tier and the kernel's walked bytes, default targets and tier.
UNTIMED = r"^(exact\.|kernel\.DecodeBytes\.)"
DEFAULT = "default config (no env override)"


def spyre_bench(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=900,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


# -- help texts and notes ----------------------------------------------------------------------

def test_the_help_says_where_exact_figures_come_from(tmp_path):
    text = " ".join(spyre_bench("--help", cwd=tmp_path).stdout.split())
    assert "pure-Python model of the subject's bucketer" not in text
    assert "a spyre-inference commit's bucketer and metadata builder" in text
    cost = " ".join(spyre_bench("cost", "--help", cwd=tmp_path).stdout.split())
    assert "through the subject's metadata builder (a spyre-inference commit's own" in cost


@pytest.mark.parametrize("subject,said", [("reference:post-810-clamp", True), ("gen4", False)])
def test_the_reference_models_note_is_said_only_for_the_reference(spyre_repo, tmp_path, subject,
                                                                   said):
    spec = subject if subject.startswith("reference:") else spyre_repo.spec(subject)
    proc = spyre_bench("cost", "--subject", spec, "--block-size", "64", "--workload",
                       "four-3-block-decodes", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert ("per-sequence H2D is the model's assumption" in text) is said, text[-400:]
    assert (f"{spec}: per-sequence H2D" in text) is said


# -- the findings of make run's own comparison ---------------------------------------------------

@pytest.fixture(scope="module")
def make_run_doc(tmp_path_factory) -> dict:
    """`spyre-bench run`'s default targets and tier (the reference's pre-#810 and #810 as merged,
    quick) stored, compared as run's closing comparison does, with a timing row per quick probe
    (a 2x slowdown, seeded) where run measures them interleaved."""
    w = tmp_path_factory.mktemp("make-run")
    proc = spyre_bench("run", "--bench", UNTIMED, "--no-compare", "--results-dir",
                       str(w / "results"), "--machine", "box", "--device", "cpu", cwd=w,
                       env={"HOME": str(w)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "tier quick" in proc.stdout
    frame = load_history(w / "results")
    labels = dict(zip(frame.subject, frame.commit))
    base, head = labels["reference:pre-810"], labels["reference:post-810-clamp"]
    c = compare_stored(frame, base, head, machine="box", env_name=env_name("cpu"), timings=False)
    rng = np.random.default_rng(7)
    add_timings(c, [("kernel.Decode.time_layer", {"probe": p.name}, "seconds",
                     list(rng.lognormal(np.log(1e-3), 0.02, 20)),
                     list(rng.lognormal(np.log(2e-3), 0.02, 20))) for p in probe_set.QUICK])
    c.timings_measured = True
    doc = as_document(c)
    validate(doc)
    return doc


def _env_of(params: dict) -> dict[str, str]:
    """An item's env in full, from where the figures' own definitions live."""
    if "probe" in params:
        return dict(next(p for p in probe_set.FULL if p.name == params["probe"]).env)
    return dict(OVERRIDE_SETS[params["overrides"]])


def _config_of(params: dict) -> dict:
    if "probe" in params:
        probe = next(p for p in probe_set.FULL if p.name == params["probe"])
        return {k: probe.config[k] for k in ("block_size", "max_model_len", "max_num_seqs")
                if k in probe.config}
    return {k: params[k] for k in ("block_size", "max_model_len", "max_num_seqs")}


def _said_env(text: str, items: list[dict], doc: dict) -> None:
    envs = [{k: v for k, v in _env_of(i["params"]).items() if k != BATCHED_DECODE}
            for i in items]
    if "every env compared" in text:
        named = {i["params"].get("overrides") for i in items}
        assert named >= {c["overrides"] for c in doc["configs"] if "overrides" in c}, text
    elif not any(envs):
        assert DEFAULT in text, text
    else:
        assert DEFAULT not in text, text
        for env in envs:
            assert " ".join(f"{k}={v}" for k, v in sorted(env.items())) in text, (env, text)


def _said_place(at: str, items: list[dict]) -> None:
    assert at.strip(), "an empty location"
    for field, value in re.findall(r"\b(block_size|max_model_len|max_num_seqs) (\d+)", at):
        assert all(_config_of(i["params"]).get(field) == int(value) for i in items), (field, at)
    for name in re.findall(r"\bprobe (\S+)", at):
        assert all(i["params"].get("probe") == name for i in items), (name, at)


HEAD = re.compile(r"^(?:regression|improvement|trade-off|change|acknowledged change) "
                  r"(?:in the default config \(no env override\)|in every env compared|under .+?)"
                  r"(?: at (?P<at>.*?))? × (?P<n>\d+) configs: ")
TIMED = re.compile(r"^timing (?:regression|improvement)(?: \(advisory\))?: "
                   r"(?:host \S+ per [a-z ]+?|\S+) at (?P<at>.+?): "
                   r"\d+\.\d\d×")


def test_every_finding_names_the_env_and_place_of_its_rows(make_run_doc):
    doc = make_run_doc
    found = [f for f in findings(doc) if f.kind != "info"]
    assert found and all(f.items for f in found)
    assert any("probe" in i["params"] for f in found for i in f.items)       # walked bytes
    assert sum(f.text.startswith("timing ") for f in found) == len(probe_set.QUICK)
    for f in found:
        assert " at  " not in f.text and " at ×" not in f.text, f.text
        m = HEAD.match(f.text) or TIMED.match(f.text)
        assert m, f.text
        _said_env(f.text, f.items, doc)
        at = m["at"]
        assert at, f"no location: {f.text}"
        _said_place(at, f.items)
        if "n" in m.groupdict() and m["n"]:
            where = {tuple(sorted(_config_of(i["params"]).items())) + (i["params"].get("probe"),)
                     for i in f.items}
            assert int(m["n"]) == len(where), f.text


def test_the_kv_override_probe_is_named_with_its_env(make_run_doc):
    """`make run`'s first exact finding was 'regression in the default config (no env override)
    at  × 1 configs: ... kernel.DecodeBytes.track_walked_bytes': the probe is the KV override's."""
    text = next(f.text for f in findings(make_run_doc)
                if "kernel.DecodeBytes.track_walked_bytes" in f.text)
    assert text.startswith("regression under SPYRE_ATTN_KV_BUCKETS=128,8192 at probe "
                           "review-4x3-kv-above (block_size 64, max_model_len 2048, step "
                           "150,150,150,150) × 1 configs: "), text


def test_a_regressions_largest_figure_is_one_that_got_worse(make_run_doc):
    """`make run`'s num_seqs-ladder regression said 'largest: exact.Frontier.track_excess_padding
    0.29 → 0', its one figure that got better, when none of its worse ones was a workload's."""
    regressions = [f for f in findings(make_run_doc)
                   if f.kind == "regression" and "largest: " in f.text]
    assert regressions
    for f in regressions:
        said = f.text.split("largest: ", 1)[1]
        worse = [e for e in f.items if "metric" in e and e["base"] is not None
                 and e["head"] is not None and e["head"] > e["base"]]
        assert any(said.startswith(f"{label(e['metric'])} "
                                   f"{change_with_factor(e['base'], e['head'], unit(e['metric']))}")
                   for e in worse), f.text
