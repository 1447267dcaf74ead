"""Findings on hand-made comparison documents: the verdict never greener than what was checked,
one finding per cause, values never rounded into sameness."""

import copy

import pytest

from harness.analyze.comparison import Comparison, Side, as_document
from harness.report.findings import change, change_with_factor, findings, headline, status
from harness.report.markdown import render
from harness.report.schema import validate
from harness.report.verdict import FAIL_ON, exit_code

KV = "SPYRE_ATTN_KV_BUCKETS"


def doc(**fields) -> dict:
    c = Comparison(Side("reference:a"), Side("reference:b"))
    c.envs = {"batched": {"SPYRE_BATCHED_DECODE": "1"},
              "kv-above-limit": {"SPYRE_BATCHED_DECODE": "1", KV: "128,8192"}}
    c.configs = [{"block_size": bs, "max_model_len": 2048, "max_num_seqs": 32, "overrides": o}
                 for o in c.envs for bs in (64, 192)]
    for _ in range(4):
        c.add_exact("variants", c.configs[0], 3, 3)
    for k, v in fields.items():
        setattr(c, k, v)
    d = as_document(c)
    validate(d)
    return d


def cfg(bs, env="batched", **more):
    return {"block_size": bs, "max_model_len": 2048, "max_num_seqs": 32, "overrides": env, **more}


def test_rounding_never_hides_a_change():
    assert change(135_168, 135_300, "bytes") == "135,168 B → 135,300 B"
    assert change(1.97, 1.9701, "iterations") == "1.97 → 1.9701"
    assert change(16384, 524288, "bytes") == "16 KiB → 512 KiB"
    assert change_with_factor(4, 128, "iterations") == "4 → 128, 32×"


@pytest.mark.parametrize("fields,icon", [
    ({}, "⚪"),                                                           # nothing timed: not green
    ({"timings_measured": True, "oracle": (4, 4)}, "🟢"),
    ({"timings_measured": True, "oracle": (4, 4), "timing_advisory": True}, "⚪"),
    ({"mismatches": [("probe x (head)", "max abs error 0.3")], "oracle": (3, 4)}, "❌"),
    ({"lost": [("bs 64", "no bucketer")]}, "❌"),
    ({"problems": ["machine differs"]}, "⚠️"),
])
def test_the_headline_is_never_greener_than_what_was_checked(fields, icon):
    d = doc(**fields)
    assert headline(d, findings(d)).startswith(icon)
    assert exit_code(d, set(FAIL_ON)) == {"❌": 1, "⚠️": 2}.get(icon, 0)


def test_the_status_line_counts_what_was_not_compared():
    d = doc(skipped=[("a", "b")], lost=[("c", "d")])
    assert "2 not compared" in status(d) and "timings not measured" in status(d)
    assert "oracle not run" in status(d)
    assert "oracle: 3/4 probes match" in status(doc(oracle=(3, 4)))


def test_one_cause_is_one_finding_ranked_default_first():
    d = doc()
    d["ladders"] = [{"params": cfg(bs, env), "axis": "batched_num_blocks", "base": [1, 2, 4, 8, 16, 32],
                     "head": [2, 128]} for bs in (64, 192) for env in ("kv-above-limit",)]
    d["ladders"].append({"params": cfg(192), "axis": "batched_num_blocks",
                         "base": [1, 2, 4, 8, 11], "head": [2, 3, 6, 11]})
    d["exact_changed"] = [
        {"metric": "iterations_per_layer_mean", "params": cfg(64, "kv-above-limit", workload="w"),
         "base": 4, "head": 128},
        {"metric": "mask_bytes_per_step", "params": cfg(64, "kv-above-limit", workload="w"),
         "base": 16384, "head": 524288},
        {"metric": "iterations_per_layer_mean", "params": cfg(192, workload="w"), "base": 1,
         "head": 2},
        {"metric": "batched_num_blocks_distinct", "params": cfg(192), "base": 5, "head": 4}]
    validate(d)
    found = findings(d)
    kinds = [(f.kind, f.text.split(":")[0]) for f in found]
    assert kinds[:2] == [("regression", "regression in the default config (no env override) at "
                                        "block_size 192, max_model_len 2048, max_num_seqs 32 × 1 configs"),
                         ("regression", f"regression under {KV}=128,8192 at max_model_len 2048, "
                                        "max_num_seqs 32 × 2 configs")]
    assert "iters/layer 4 → 128, 32×; mask/step 16 KiB → 512 KiB, 32×" in found[1].text
    assert "5 → 4 (1 fewer)" in found[0].text
    assert found[-1].kind == "info" and "block_size 64" in found[-1].text
    text = render(d)
    assert text.index("default config") < text.index(f"{KV}=128,8192".replace("_", "\\_"))


def test_an_unchanged_comparison_is_a_few_lines():
    text = render(doc(timings_measured=True, oracle=(4, 4)))
    assert text.startswith("### spyre-bench: 🟢 no change") and len(text.splitlines()) <= 10


def test_documents_round_trip_through_the_schema():
    d = doc(mismatches=[("p", "r")], timing_notes=["n"])
    bad = copy.deepcopy(d)
    bad["base"]["extra"] = 1
    with pytest.raises(Exception, match="unknown key 'extra'"):
        validate(bad)
