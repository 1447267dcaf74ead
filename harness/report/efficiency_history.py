"""Efficiency per commit, from what the history stores: how good the kernels are, not only how fast.

- padding efficiency (exact): real KV tokens per padded KV slot walked, the inverse of the stored
  ``exact.Workload.track_padded_slots_per_real_token``, per config and workload;
- kernel efficiency and fraction of the roofline (timed): a probe's stored bytes
  (``kernel.DecodeBytes``) over its stored ``kernel.Decode.time_layer``, against the bandwidth
  stored with the machine's info in the same results file (``harness.measure.efficiency
  .MACHINE_FIELD``): each point is judged against the roofline its own run recorded. A row whose
  file records no bandwidth for its device gives no point (never a guessed one).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from harness.measure.efficiency import MACHINE_FIELD, parse_machine_value
from harness.store.jsonfile import read_json

PADDED = "exact.Workload.track_padded_slots_per_real_token"
TIME = "kernel.Decode.time_layer"
WALKED = "kernel.DecodeBytes.track_walked_bytes"
LOGICAL = "kernel.DecodeBytes.track_logical_bytes"


def device_of(env_name: str) -> str:
    """The device kind an environment ran on (``spyre-bench-py3.11-cpu`` -> ``cpu``)."""
    return str(env_name).rsplit("-", 1)[-1]


def _ok(frame, benchmark: str):
    return frame[(frame["benchmark"] == benchmark) & (frame["status"] == "ok")]


def padding_series(frame, where: dict) -> dict[str, dict[str, float]]:
    """Padding efficiency (%) per workload and commit for the configs matching ``where``
    (parameter -> value); the max_num_seqs is named when several are stored."""
    rows = _ok(frame, PADDED)
    for name, value in where.items():
        col = f"param:{name}"
        rows = rows[rows[col] == value] if col in rows else rows.iloc[0:0]
    rows = rows[rows["value"] > 0]
    several = "param:max_num_seqs" in rows and rows["param:max_num_seqs"].nunique() > 1
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for _, r in rows.iterrows():
        label = str(r["param:workload"]) + (f", mns {r['param:max_num_seqs']}" if several else "")
        out[label][r["commit"]] = 100.0 / float(r["value"])
    return dict(out)


def stored_machine_value(results_file: str) -> str | None:
    """The bandwidth text a results file's machine info holds (None: none stored)."""
    try:
        data = read_json(results_file)
    except (OSError, ValueError):
        return None   # the history reader already warned about a file it could not read
    params = data.get("params") if isinstance(data, dict) else None
    value = params.get(MACHINE_FIELD) if isinstance(params, dict) else None
    return value if isinstance(value, str) else None


@dataclass
class Roofline:
    """One device's efficiency series (percent, per ``probe (machine)`` and commit)."""

    kernel: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    roofline: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    #: machine -> the stored bandwidth texts its points were judged against
    judged: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    #: timed rows with bytes but no bandwidth stored for their device
    unjudged: int = 0


def roofline_series(frame) -> dict[str, Roofline]:
    """Kernel efficiency and fraction of the roofline per device, probe, machine and commit."""
    key = ["machine", "env_name", "commit", "param:probe"]
    times = _ok(frame, TIME)
    if times.empty or "param:probe" not in frame:
        return {}
    walked = _ok(frame, WALKED).set_index(key)["value"]
    logical = _ok(frame, LOGICAL).set_index(key)["value"]
    out: dict[str, Roofline] = defaultdict(Roofline)
    stored: dict[str, str | None] = {}     # one read per results file
    for _, r in times.iterrows():
        k = tuple(r[c] for c in key)
        if k not in walked.index or k not in logical.index or not r["value"] > 0:
            continue
        device = device_of(r["env_name"])
        if r["file"] not in stored:
            stored[r["file"]] = stored_machine_value(r["file"])
        text = stored[r["file"]]
        gbps = parse_machine_value(text, device)
        found = out[device]
        if gbps is None:
            found.unjudged += 1
            continue
        found.judged[r["machine"]].add(text)
        per_second = 1e9 * gbps * float(r["value"])   # bytes the roofline moves in that time
        label = f"{r['param:probe']} ({r['machine']})"
        found.kernel[label][r["commit"]] = 100.0 * float(_one(walked[k])) / per_second
        found.roofline[label][r["commit"]] = 100.0 * float(_one(logical[k])) / per_second
    return dict(out)


def _one(value):
    """A stored figure looked up by key: one value (a repeated key keeps its first)."""
    return value.iloc[0] if hasattr(value, "iloc") else value
