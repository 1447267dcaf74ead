"""A sidecar's ladders are stored once per distinct ladder (harness.store.ladder_table) and read
back as one entry per config, in order, through Identity and the history loader alike."""

import dataclasses
import itertools
import json

import pytest

from harness.store.history import load_identity
from harness.store.identity import Identity, read

WHY = "git:repo@abc (commit abc) has no bucketer: spyre_attn_bucketer.py is not in it"
NAMES = ("block_size", "max_model_len", "max_num_seqs", "overrides")


def _doubling(low: int, high: int) -> list[int]:
    return [low << i for i in range((high // low).bit_length())]


def _quick_ladders() -> list[dict]:
    """The quick tier's shape: 64 configs, 6 axes, a few distinct ladders."""
    out = []
    for bs, mml, ov in itertools.product((64, 128, 192, 256), (256, 2048, 8192, 32768),
                                         ("none", "batched", "kv-above-limit", "kv-sparse")):
        kv = [128, 8192] if ov == "kv-above-limit" else _doubling(64, mml)
        out.append({"config": dict(zip(NAMES, (bs, mml, 32, ov))),
                    "ladders": {"kv": kv, "query": [1, 512, 1024, 1536, 2048],
                                "num_blocks": [max(1, k // bs) for k in kv],
                                "num_seqs": [4, 8, 16, 32], "batched_num_seqs": [4, 8, 16, 32],
                                "batched_num_blocks": [max(1, k // bs) for k in kv]}})
    return out


def _identity(ladders) -> Identity:
    return Identity(subject="git:repo@abc", commit="abc", interrupted=False, ladders=ladders)


def _stored(tmp_path, ident: Identity) -> dict:
    ident.write(tmp_path / "abc.json")
    return json.loads((tmp_path / "abc.identity").read_text())


def test_each_distinct_ladder_is_stored_once_and_every_config_reads_back_its_own(tmp_path):
    ident = _identity(_quick_ladders())
    stored = _stored(tmp_path, ident)["ladders"]
    distinct = {json.dumps(v) for e in ident.ladders for v in e["ladders"].values()}
    assert len(stored["values"]) == len(distinct) < 64 * 6 // 10
    assert stored["configs"] == list(NAMES) and len(stored["rows"]) == 64
    back = read(tmp_path / "abc.json")
    assert json.dumps(dataclasses.asdict(back)) == json.dumps(dataclasses.asdict(ident))
    assert load_identity(tmp_path / "abc.json")["ladders"] == ident.ladders
    listed = len(json.dumps(ident.ladders, separators=(",", ":")))
    assert len(json.dumps(stored, separators=(",", ":"))) < listed / 3


def test_a_config_that_could_not_be_driven_and_a_subject_that_could_not_load(tmp_path):
    ladders = [{"config": dict(zip(NAMES, (64, 256, 32, "none"))), "ladders": {"skipped": WHY}},
               {"config": dict(zip(NAMES, (64, 2048, 32, "none"))), "ladders": {"kv": [64]}}]
    for entries in (ladders, [{"skipped": WHY}], []):
        ident = _identity(entries)
        assert WHY not in json.dumps(_stored(tmp_path, ident)["ladders"])   # a reason index
        assert read(tmp_path / "abc.json").ladders == entries
        assert load_identity(tmp_path / "abc.json")["ladders"] == entries


@pytest.mark.parametrize("entries", [
    [{"config": {"block_size": 64}, "ladders": {"kv": [64]}},
     {"config": {"max_model_len": 256}, "ladders": {"kv": [64]}}],           # named otherwise
    [{"config": {"block_size": 64}, "ladders": {"kv": [64], "query": [1]}},
     {"config": {"block_size": 128}, "ladders": {"query": [1], "kv": [64]}}],  # another order
])
def test_entries_a_table_cannot_say_exactly_are_stored_as_they_are(tmp_path, entries):
    ident = _identity(entries)
    assert _stored(tmp_path, ident)["ladders"] == entries
    back = read(tmp_path / "abc.json").ladders
    assert json.dumps(back) == json.dumps(entries)


def test_ladders_read_back_are_each_configs_own(tmp_path):
    _stored(tmp_path, _identity(_quick_ladders()))
    back = read(tmp_path / "abc.json")
    back.ladders[0]["ladders"]["query"].append(4096)
    assert back.ladders[1]["ladders"]["query"] == [1, 512, 1024, 1536, 2048]


@pytest.mark.parametrize("table", [
    {"configs": ["block_size"], "axes": ["kv"], "values": [[64]], "rows": [[[64], [1]]]},
    {"configs": ["block_size"], "axes": ["kv"], "values": [[64]], "rows": [[[64, 2], [0]]]},
    {"configs": ["block_size"], "axes": ["kv"], "values": [[64]], "rows": [[[64], [True]]]},
    {"configs": "block_size", "axes": ["kv"], "values": [[64]], "rows": []},
])
def test_a_damaged_table_is_a_bad_sidecar_never_a_traceback(tmp_path, table):
    (tmp_path / "abc.identity").write_text(json.dumps(
        {"subject": "s", "commit": "abc", "interrupted": False, "ladders": table}))
    assert read(tmp_path / "abc.json") is None
    with pytest.warns(UserWarning, match="abc.identity"):
        assert load_identity(tmp_path / "abc.json") == {}
