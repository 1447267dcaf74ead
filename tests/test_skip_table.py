"""Skip reasons are stored once per commit (harness.store.skip_table) and read back whole."""

import json

from harness.store.identity import Identity, read

WHY = "git:repo@abc (commit abc) has no bucketer: spyre_attn_bucketer.py is not in it"
CONFIG = {"block_size": 64, "max_model_len": 256, "max_num_seqs": 32, "overrides": "none"}


def _identity(n: int) -> Identity:
    skipped = [{"benchmark": f"exact.Workload[64, 256, 32, 'none', 'w{i}']", "reason": WHY}
               for i in range(n)] + [{"benchmark": "kernel.Compile", "reason": "no kernel"}]
    ladders = [{"config": {**CONFIG, "block_size": 64 * (i + 1)}, "ladders": {"skipped": WHY}}
               for i in range(4)] + [{"config": CONFIG, "ladders": {"kv": [128, 256]}}]
    return Identity(subject="git:repo@abc", commit="abc", skipped=skipped, ladders=ladders,
                    interrupted=False)


def test_each_reason_is_stored_once_and_read_back_per_figure(tmp_path):
    ident = _identity(500)
    ident.write(tmp_path / "abc.json")
    text = (tmp_path / "abc.identity").read_text()
    assert text.count(WHY) == 1 and text.count("no kernel") == 1
    stored = json.loads(text)
    assert stored["reasons"] == [WHY, "no kernel"]
    assert [{b: len(figures) for b, figures in e["benchmarks"].items()}
            for e in stored["skipped"]] == [{"exact.Workload": 500}, {"kernel.Compile": 1}]
    assert text.count("exact.Workload") == 1       # each benchmark's name once, too
    back = read(tmp_path / "abc.json")
    assert back.skipped == ident.skipped and back.ladders == ident.ladders
    assert back.ladders_by_config()[0][1] == {"skipped": WHY}


def test_a_sidecar_with_a_reason_per_figure_reads_as_before(tmp_path):
    ident = _identity(3)
    import dataclasses
    (tmp_path / "abc.identity").write_text(json.dumps(dataclasses.asdict(ident)))
    back = read(tmp_path / "abc.json")
    assert back.skipped == ident.skipped and back.ladders == ident.ladders


def test_a_reason_index_out_of_range_says_so(tmp_path):
    (tmp_path / "abc.identity").write_text(json.dumps(
        {"subject": "s", "commit": "abc", "reasons": ["only"],
         "skipped": [{"reason": 3, "benchmarks": ["exact.Config"]}],
         "ladders": [{"config": CONFIG, "ladders": {"skipped": 0}}]}))
    back = read(tmp_path / "abc.json")
    assert back.skipped == [{"benchmark": "exact.Config", "reason": "(reason 3 not stored)"}]
    assert back.ladders[0]["ladders"] == {"skipped": "only"}


def test_a_sidecar_with_a_list_of_names_per_reason_reads_as_before(tmp_path):
    (tmp_path / "abc.identity").write_text(json.dumps(
        {"subject": "s", "commit": "abc", "reasons": ["why"],
         "skipped": [{"reason": 0, "benchmarks": ["exact.Config[64]", "kernel.Compile"]}],
         "ladders": []}))
    assert read(tmp_path / "abc.json").skipped == [
        {"benchmark": "exact.Config[64]", "reason": "why"},
        {"benchmark": "kernel.Compile", "reason": "why"}]


def test_names_of_any_shape_come_back_as_written(tmp_path):
    names = ["a[1]", "a[2, 'x']", "b", "c[d", "e[f]g]", "a[]"]
    ident = Identity(subject="s", commit="abc", skipped=[{"benchmark": n, "reason": "r"}
                                                         for n in names],
                     ladders=[], interrupted=False)
    ident.write(tmp_path / "abc.json")
    assert [e["benchmark"] for e in read(tmp_path / "abc.json").skipped] == [
        "a[1]", "a[2, 'x']", "a[]", "b", "c[d", "e[f]g]"]   # grouped by benchmark, in order
