"""A comparison says which part's code changed (bucketer, builder, kernels, env parsing), by the
content hash of each attention-path module, and never credits a builder's or kernel's change to a
ladder: real ``spyre-bench compare`` runs on fixture commits edited one part at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness.report.findings import findings
from harness.store.identity import Identity, read
from tests.fixtures.spyre_repo import BACKEND, BUCKETER, plant_slowdown


def compare(repo, base: str, head: str, tmp) -> tuple[dict, str, int]:
    out_json, out_md = tmp / f"{base}-{head[:8]}.json", tmp / f"{base}-{head[:8]}.md"
    done = subprocess.run([sys.executable, "-m", "harness", "compare", "--base", repo.spec(base),
                           "--head", repo.spec(head), "--tier", "tiny", "--workload",
                           "uniform-short", "--json", str(out_json), "--markdown", str(out_md)],
                          capture_output=True, text=True, timeout=500, cwd=tmp,
                          env={**os.environ, "NO_COLOR": "1"})
    assert out_json.exists(), done.stderr
    return json.loads(out_json.read_text()), out_md.read_text(), done.returncode

def infos(doc: dict) -> list[str]:
    return [f.text for f in findings(doc) if f.kind == "info"]

def test_each_side_carries_the_hash_of_every_attention_module(spyre_repo, tmp_path):
    doc, _, _ = compare(spyre_repo, "gen3", "gen3", tmp_path)
    sources = doc["base"]["sources"]
    assert sources == doc["head"]["sources"]
    assert BUCKETER in sources and BACKEND in sources
    assert "spyre_inference/envs.py" in sources
    assert all(len(h) == 12 and int(h, 16) >= 0 for h in sources.values())
    assert "no attention-path module changed between base and head" in " ".join(infos(doc))

def test_a_kernel_only_edit_is_said_to_be_the_kernels(spyre_repo, tmp_path):
    slow = plant_slowdown(spyre_repo, "gen3")
    doc, markdown, code = compare(spyre_repo, "gen3", slow, tmp_path)
    assert code == 0, markdown
    changed = [t for t in infos(doc) if t.startswith("code changed")]
    assert changed == ["code changed between base and head: kernels (ops/batched_decode.py); "
                       "bucketer, builder, env parsing unchanged"]
    assert "kernels \\(ops/batched\\_decode\\.py\\)" in markdown
    assert not doc["ladders"]

def test_a_ladder_change_is_the_bucketers_alone_when_only_the_bucketer_changed(spyre_repo,
                                                                                tmp_path):
    head = spyre_repo.edit(BUCKETER, "_MIN_BATCHED_SEQS = 4", "_MIN_BATCHED_SEQS = 8",
                           parent="gen3", message="bucketer: batch from 8 decodes")
    doc, _, _ = compare(spyre_repo, "gen3", head, tmp_path)
    texts = [f.text for f in findings(doc) if f.kind in ("regression", "improvement", "change")]
    assert any("ladder" in t for t in texts), texts
    assert not any("changed too" in t for t in texts), texts
    assert ("code changed between base and head: bucketer (spyre_attn_bucketer.py); builder, "
            "kernels, env parsing unchanged") in infos(doc)

def test_a_ladder_change_beside_a_builder_edit_is_not_credited_to_the_ladder(spyre_repo,
                                                                             tmp_path):
    bucketer = spyre_repo.read("gen3", BUCKETER).replace("_MIN_BATCHED_SEQS = 4",
                                                          "_MIN_BATCHED_SEQS = 8")
    backend = spyre_repo.read("gen3", BACKEND) + "\n# the builder edited in the same commit\n"
    head = spyre_repo.add_commit({BUCKETER: bucketer, BACKEND: backend},
                                 "bucketer and builder", parent="gen3")
    doc, _, _ = compare(spyre_repo, "gen3", head, tmp_path)
    laddered = [f.text for f in findings(doc)
                if f.kind in ("regression", "improvement", "change") and "ladder" in f.text]
    assert laddered and all("builder (backends/spyre_attn.py) changed too: these effects are not "
                            "the ladder's alone" in t for t in laddered if "largest" in t)
    assert any("largest" in t for t in laddered), laddered

def test_stored_sides_read_the_sources_from_the_identity_sidecar(tmp_path):
    results = tmp_path / "machine" / "abc-env.json"
    results.parent.mkdir()
    results.write_text("{}")
    Identity(subject="git:x@abc", commit="a" * 40,
             sources={BUCKETER: "0123456789ab"}).write(results)
    assert read(results).sources == {BUCKETER: "0123456789ab"}
    side = results.with_suffix(".identity")
    data = json.loads(side.read_text())
    data["sources"] = {BUCKETER: 7}
    side.write_text(json.dumps(data))
    assert read(results) is None   # a sidecar holding something else is not trusted
