"""The bandwidth efficiency is judged against lives in the machine's info: taken from the cached
copy benchmark (measured once per machine and device), the published figure where the copy cannot
run, and replaced in ASV's machine file without touching other entries."""

from __future__ import annotations

import json

import torch

from harness.measure.device import Device, select
from harness.measure.efficiency import (
    MACHINE_FIELD,
    judged_bandwidth,
    machine_fields,
    machine_value,
    parse_machine_value,
)
from harness.runner.machine import default_machine_name, ensure_machine


def test_measured_fields_replace_the_entry_and_none_removes_them(tmp_path):
    path = tmp_path / ".asv-machine.json"
    path.write_text(json.dumps({"other": {"machine": "other", "bandwidth": "1.0 GB/s cpu (x)"},
                                "box": {"machine": "box", "cpu": "custom cpu",
                                        "bandwidth": "9.9 GB/s cpu (copy benchmark)"},
                                "version": 1}))
    entry = ensure_machine("box", path, fields={MACHINE_FIELD: "5.3 GB/s cpu (copy benchmark)"})
    data = json.loads(path.read_text())
    assert entry["bandwidth"] == data["box"]["bandwidth"] == "5.3 GB/s cpu (copy benchmark)"
    assert data["box"]["cpu"] == "custom cpu"            # what ASV's fields held is kept
    assert data["other"] == {"machine": "other", "bandwidth": "1.0 GB/s cpu (x)"}
    ensure_machine("box", path, fields={MACHINE_FIELD: None})   # nothing known any more
    assert "bandwidth" not in json.loads(path.read_text())["box"]
    ensure_machine("box", path)                                  # no fields: nothing changes
    assert "bandwidth" not in json.loads(path.read_text())["box"]


def test_the_cached_measurement_is_the_source(tmp_path):
    cache = tmp_path / "bandwidth.json"
    key = f"{default_machine_name()}/{select('cpu').description}"
    cache.write_text(json.dumps({key: {"gb_per_s": 123.456, "source": "copy benchmark",
                                       "measured_at": 1.0}}))
    before = cache.read_text()
    assert machine_fields("cpu", cache) == {"bandwidth": "123.5 GB/s cpu (copy benchmark)"}
    assert cache.read_text() == before                           # read, not measured again


def test_an_unmeasured_machine_is_measured_once_and_cached(tmp_path):
    cache = tmp_path / "cache" / "bandwidth.json"
    first = machine_fields("cpu", cache)
    gbps = parse_machine_value(first[MACHINE_FIELD], "cpu")
    assert gbps is not None and gbps > 0.1 and first[MACHINE_FIELD].endswith("(copy benchmark)")
    [stored] = json.loads(cache.read_text()).values()
    assert stored["source"] == "copy benchmark" and round(stored["gb_per_s"], 1) == gbps
    assert machine_fields("cpu", cache) == first                 # the second call reads it
    [again] = json.loads(cache.read_text()).values()
    assert again["measured_at"] == stored["measured_at"]


def test_a_device_that_cannot_copy_falls_back_to_its_published_figure(tmp_path):
    cache = tmp_path / "bandwidth.json"
    # no such GPU on any box: the copy fails (torch asserts without CUDA, or an invalid ordinal)
    h200 = Device("cuda", torch.device("cuda", 999), "NVIDIA H200 (no such ordinal)")
    found = judged_bandwidth(h200, cache)
    assert found == {"gb_per_s": 4800.0, "source": "published"}
    assert machine_value(found, "cuda") == "4800.0 GB/s cuda (published)"
    assert not cache.exists()                                    # a default is never cached
    unknown = Device("cuda", torch.device("cuda", 999), "some unlisted accelerator")
    assert machine_value(judged_bandwidth(unknown, cache), "cuda") is None


def test_a_stored_value_counts_only_for_its_own_device():
    assert parse_machine_value("4800.0 GB/s cuda (published)", "cuda") == 4800.0
    assert parse_machine_value("4800.0 GB/s cuda (published)", "cpu") is None
    for junk in (None, 12, "", "fast", "x GB/s cpu (copy benchmark)", "0.0 GB/s cpu (x)",
                 "-3 GB/s cpu (x)"):
        assert parse_machine_value(junk, "cpu") is None, junk
