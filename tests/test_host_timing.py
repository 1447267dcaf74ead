"""Host time of the commit's own build() in a PR verdict: ``compare --timings`` on fixture
commits, end to end (subject workers, interleaved ABBA rounds, the comment).

The slowdown is planted in a commit's build() (tests.fixtures.spyre_repo.plant_build_slowdown:
the batched builder's loop visits each sequence 2.5 times on average, writing the same values:
1.50x measured on the batched path, the same metadata). Host time is CPU time of the worker
(a loaded runner delays it, it does not lengthen it), and the planted change is far past the
1.1x factor's decision edge (√1.1); the paths and the forward it does not touch are asserted
never to be credited with it. The exact figures are the same with and without host timing.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.fixtures.spyre_repo import plant_build_slowdown

#: Long end-to-end runs: `make test-extended` (CI runs it after `make test`).
pytestmark = pytest.mark.extended

ONE_THREAD = {"OMP_NUM_THREADS": "1", "SPYRE_BENCH_THREADS": "1"}
ARGS = ["--block-size", "64", "--max-model-len", "512", "--workload", "bimodal", "--json", "-"]
#: What the exact figures are: every key of the document but the timings' own.
EXACT_KEYS = ("exact_compared", "exact_changed", "ladders", "configs", "envs")


def compare(base, head, *extra, memo):
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", "--base", base, "--head",
                           head, *ARGS, *extra], capture_output=True, text=True,
                          env={**os.environ, **ONE_THREAD, "SPYRE_BENCH_MEMO_DIR": str(memo)})
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def host_rows(doc) -> dict:
    return {(t["benchmark"].split(".")[1], t["params"]["path"]): t for t in doc["timings"]
            if t["benchmark"].startswith("host.")}


def test_planted_build_slowdown_is_a_host_regression_in_compare_and_the_comment(spyre_repo,
                                                                                 tmp_path):
    slow = plant_build_slowdown(spyre_repo, "gen4")
    base, head = spyre_repo.spec("gen4"), spyre_repo.spec(slow)
    code, doc = compare(base, head, "--timings", "--markdown", str(tmp_path / "c.md"),
                        memo=tmp_path / "memo-timed")
    rows = host_rows(doc)
    assert set(rows) == {("Build", "batched"), ("Build", "per-sequence"),
                         ("Forward", "batched"), ("Forward", "per-sequence")}, doc["timings"]
    batched = rows[("Build", "batched")]
    assert batched["verdict"]["kind"] == "regression", batched["verdict"]
    assert 1.25 < batched["verdict"]["ratio"] < 1.9, batched["verdict"]   # 1.47-1.50x measured
    for untouched in (("Build", "per-sequence"), ("Forward", "batched"),
                      ("Forward", "per-sequence")):
        assert rows[untouched]["verdict"]["kind"] in ("no change", "inconclusive"), \
            rows[untouched]["verdict"]
    # where the time goes: the commit's own functions, the loop's function on top for the head
    profile = batched["profile"]
    assert profile["head"]["functions"][0]["name"] == "_build_batched", profile
    shares = {side: {f["name"]: f["share"] for f in profile[side]["functions"]}
              for side in ("base", "head")}
    assert shares["head"]["_build_batched"] > shares["base"]["_build_batched"]
    assert code == 1 and doc["exact_changed"] == [] and doc["ladders"] == []
    text = (tmp_path / "c.md").read_text().replace("\\", "")
    assert text.startswith("### spyre-bench: 🔴")
    assert re.search(r"🔴 timing regression.*: host build\(\) per step at [^:]*workload "
                     r"bimodal, path batched[^:]*: 1\.\d\d× \(slower; median \d[\d.]* [mµ]s → "
                     r"\d[\d.]* [mµ]s; 95% CI \d\.\d\d–\d\.\d\d×, p=", text), text
    assert re.search(r"<summary>where the head's time goes, host build\(\) per step, workload "
                     r"bimodal, path batched: `_build_batched` \d+ %", text), text
    # the exact figures are what compare gives without any timing, byte for byte
    _, untimed = compare(base, head, memo=tmp_path / "memo-untimed")
    assert not untimed["timings"] and untimed["exact_compared"] > 0
    for key in EXACT_KEYS:
        assert json.dumps(doc[key]) == json.dumps(untimed[key]), key


def test_a_docs_only_head_is_not_timed_and_says_why(spyre_repo, tmp_path):
    docs = spyre_repo.add_commit({"docs/notes.md": "docs only\n"}, "docs only", parent="gen4")
    code, doc = compare(spyre_repo.spec("gen4"), spyre_repo.spec(docs), "--timings",
                        "--markdown", str(tmp_path / "c.md"), memo=tmp_path / "memo")
    assert code == 0 and doc["timings"] == [] and not doc["timings_measured"]
    assert doc["oracle"] == {"matched": 4, "checked": 4}          # both kernels still checked
    assert any("run the same code" in n for n in doc["timing_notes"]), doc["timing_notes"]
    text = (tmp_path / "c.md").read_text().replace("\\", "")
    assert text.startswith("### spyre-bench: ⚪ exact figures unchanged; timings not measured")
    assert "different commits that run the same code" in text
