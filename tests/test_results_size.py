"""Results files without blanks (harness.store.compact), sidecars too, whole means as ints,
timings at the clock's resolution: the same data through ASV's own API and the pandas loader (a
timing within 0.1 ns of what ASV wrote), old files (ASV's blanks, indented sidecars) read as
before."""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import json
import math
import os
import subprocess
import sys

import pytest
from asv.results import Results, get_filename
from asv.runner import BenchmarkResult

from benchmarks.exact import _stored
from harness.ladders import ladder_sum
from harness.store.compact import at_clock_resolution, compact_results
from harness.store.history import load_history
from harness.store.identity import Identity, read

MACHINE = "box"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
ENV = "spyre-bench-py3.11-cpu"
PARAMS = {"machine": MACHINE, "arch": "x86_64", "cpu": "c", "num_cpu": "2", "os": "Linux",
          "ram": "1", "python": "3.11"}


def _benchmark(name: str, params: list) -> dict:
    return {"name": name, "params": params, "param_names": [f"p{i}" for i in range(len(params))],
            "version": "v1", "type": "track" if "track_" in name else "time", "unit": "x"}


def _asv_file(results_dir) -> str:
    """A results file as ASV's Results.save writes it (blanks after , and :): exact values of
    every kind (int, float, NaN = skipped, None = failed) and a timing with raw samples."""
    r = Results(PARAMS, {}, COMMIT, 1735689600000, "3.11", ENV, {})
    started = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    exact = _benchmark("exact.Workload.track_padded_slots_per_real_token",
                       [["64", "192"], ["'a'", "'b'"]])
    values = [3.835815474028333, 12, math.nan, None]
    r.add_result(exact, BenchmarkResult(result=values, samples=[None] * 4, number=[None] * 4,
                                        errcode=1, stderr="one failed", profile=None),
                 started_at=started, duration=0.25, record_samples=True)
    timed = _benchmark("kernel.Decode.time_layer", [["'small-4x8'"]])
    samples = [0.0005531319998226536, 0.000557724999907805, 0.0006035000001247681]
    r.add_result(timed, BenchmarkResult(result=[0.000557724999907805], samples=[samples],
                                        number=[1], errcode=0, stderr="", profile=None),
                 started_at=started, duration=3.5, record_samples=True)
    r.save(str(results_dir))
    return get_filename(MACHINE, COMMIT, ENV)


def _machine(results_dir) -> None:
    (results_dir / MACHINE).mkdir(parents=True, exist_ok=True)
    (results_dir / MACHINE / "machine.json").write_text(json.dumps({**PARAMS, "version": 1}))


def _loaded(path) -> dict:
    r = Results.load(str(path))
    return {k: getattr(r, k) for k in ("_results", "_benchmark_params", "_benchmark_version",
                                       "_started_at", "_duration", "_samples", "_stats",
                                       "_profiles", "_params", "_commit_hash", "_date")}


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _numbers(value) -> list:
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _numbers(value[k])]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    return [value] if isinstance(value, float) else []


def _without_timings(loaded: dict) -> dict:
    return {k: ({n: v for n, v in d.items() if ".time_" not in n} if k in ("_results", "_samples")
                else d) for k, d in loaded.items()}


def _timings(loaded: dict) -> list[float]:
    return _numbers({k: {n: v for n, v in loaded[k].items() if ".time_" in n}
                     for k in ("_results", "_samples")})


def test_a_compacted_file_is_the_same_results_to_asv_and_to_pandas(tmp_path):
    plain, compact = tmp_path / "plain", tmp_path / "compact"
    name = _asv_file(plain)
    _asv_file(compact)
    for folder in (plain, compact):
        _machine(folder)
    before = (compact / name).read_bytes()
    assert b", " in before and b": " in before                 # ASV's blanks
    assert compact_results(compact / name)
    after = (compact / name).read_bytes()
    assert after.count(b", ") == after.count(b": ") == 0 and b"NaN" in after
    assert len(after) < len(before)
    ours, asvs = _loaded(compact / name), _loaded(plain / name)
    assert _canonical(_without_timings(ours)) == _canonical(_without_timings(asvs))
    timed, measured = _timings(ours), _timings(asvs)
    assert len(timed) == len(measured) == 4 and timed != measured
    assert all(abs(a - b) <= 0.5e-10 for a, b in zip(timed, measured))
    assert b"0.000557725," in after                        # 0.000557724999907805 as taken
    a, b = load_history(plain), load_history(compact)
    drop = ["file", "samples", "value"]
    assert _canonical(a.drop(columns=drop).to_dict("records")) == \
        _canonical(b.drop(columns=drop).to_dict("records"))
    exact = a["benchmark"].str.contains("track_")
    assert _canonical(a[exact]["value"].tolist()) == _canonical(b[exact]["value"].tolist())
    assert not compact_results(compact / name)              # compact already: untouched


@pytest.mark.parametrize("number,value,stored", [
    (1, 0.0012018700000000215, 0.00120187),            # host build(): a 1 ns clock's difference
    (1, 0.0007759654999999893, 0.0007759655),          # a median of two: half a ns kept
    (1, 1.4173999999977926e-05, 1.4174e-05),
    (10, 1.4173999999977926e-05, 1.4174e-05),
    (10, 1.4173990000000001e-05, 1.417399e-05),        # number 10: 0.01 ns resolved, kept
    (1, 1.4173990000000001e-05, 1.4174e-05),
])
def test_a_timing_keeps_what_its_clock_resolves(number, value, stored):
    data = {"result_columns": ["result", "params", "stats_number", "samples"],
            "results": {"host.Build.time_build": [[value], [], [number], [[value, value]]],
                        "exact.Workload.track_x": [[value], []]}}
    out = at_clock_resolution(data)["results"]
    assert out["host.Build.time_build"] == [[stored], [], [number], [[stored, stored]]]
    assert out["exact.Workload.track_x"] == [[value], []]        # exact figures: as computed


@pytest.mark.parametrize("content", [b'{"not": "results"}', b"{", b""])
def test_anything_but_a_readable_results_file_is_left_alone(tmp_path, content):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    assert not compact_results(path) and path.read_bytes() == content
    assert not compact_results(tmp_path / "absent.json")


def test_a_sidecar_is_written_without_blanks_and_an_indented_one_reads_as_before(tmp_path):
    ident = Identity(subject="git:repo@abc", commit="abc", interrupted=False,
                     ladders=[{"config": {"block_size": 64}, "ladders": {"kv": [64, 128]}}])
    ident.write(tmp_path / "abc.json")
    text = (tmp_path / "abc.identity").read_text()
    assert "\n" not in text and ", " not in text and ": " not in text
    assert dataclasses.asdict(read(tmp_path / "abc.json")) == dataclasses.asdict(ident)
    (tmp_path / "old.identity").write_text(json.dumps(json.loads(text), indent=1))
    assert dataclasses.asdict(read(tmp_path / "old.json")) == dataclasses.asdict(ident)


@pytest.mark.parametrize("value,stored", [(5499.0, 5499), (2887.5, 2887.5), (0.0, 0), (7, 7),
                                          (-3.0, -3), (2.0 ** 60, 2.0 ** 60)])
def test_a_whole_mean_is_stored_as_the_int_it_equals(value, stored):
    out = _stored(value)
    assert out == value and type(out) is type(stored) and out == stored


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_nan_and_inf_stay_floats(value):
    out = _stored(value)
    assert isinstance(out, float) and (out != out or out == value)


#: What one quick-tier commit stores of its exact tier (fixture gen4, the suite's exact.* at
#: 64 configs x 8 mixes): 25,111 bytes of results and 6,677 of sidecar when written, from 42.6 kB
#: (each ladder position a series, the padding ratio at 17 digits, mask bytes apart from H2D)
#: and, before that, 45.5 kB and 22.5 kB. Issue 34 asks 30 kB a commit, so a figure added or a
#: layout undone shows here first.
EXACT_RESULTS_BYTES = 26_000
EXACT_SIDECAR_BYTES = 7_500


@pytest.mark.extended   # a real quick-tier run: about 95 s
def test_a_quick_tier_commit_stores_its_exact_tier_within_its_bound(spyre_repo, tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "COLUMNS": "200", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--repo", str(spyre_repo.path), "--tier", "quick",
         "--bench", r"^exact\.", "--machine", MACHINE, "--device", "cpu", "--no-compare",
         "--results-dir", str(tmp_path / "results"), spyre_repo.commits["gen4"]],
        capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    path = tmp_path / "results" / get_filename(MACHINE, spyre_repo.commits["gen4"], ENV)
    results, sidecar = path.stat().st_size, path.with_suffix(".identity").stat().st_size
    assert results <= EXACT_RESULTS_BYTES and sidecar <= EXACT_SIDECAR_BYTES, (results, sidecar)
    stored = Results.load(str(path))
    params = stored._benchmark_params["exact.Ladder.track_kv"]
    sums = dict(zip(itertools.product(*params), stored._results["exact.Ladder.track_kv"]))
    ident = read(path)
    assert len(ident.ladders_by_config()) == 64 and ident.complete
    for config, ladders in ident.ladders_by_config():     # one number a ladder: its sum over
        key = (str(config["block_size"]), str(config["max_model_len"]),   # the tier's 10
               str(config["max_num_seqs"]), repr(config["overrides"]))    # positions
        assert sums[key] == ladder_sum(ladders["kv"], 10), (key, ladders["kv"])
    frame = load_history(tmp_path / "results")
    assert (frame["status"] == "ok").sum() > 4000
