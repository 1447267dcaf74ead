"""How good a kernel is, not only how fast: bytes it must move against bytes it walks and time.

Decode attention is memory-bound: per layer it must read every real K/V token once
(2 · H_kv · head_size · dtype bytes per token), read the query and write the output. What it
walks is more, the padded slots of its bucket included. So a row splits in two:

- padding efficiency = logical K/V bytes / walked K/V bytes (what the bucketing wastes: the #810
  KV-override case walks 128 slots per 3-block sequence),
- kernel efficiency = walked bytes per second / the machine's memory bandwidth (how close the
  kernel runs to the roofline on the bytes it does move),

and achieved bandwidth on logical bytes is their product times the bandwidth. The bandwidth is a
copy benchmark measured once per machine and cached (``~/.cache/spyre-bench/bandwidth.json``,
keyed by machine and device), with published figures as defaults for known devices. The figure a
run is judged against is also written into the machine's info (:func:`machine_fields`, one field
ASV copies into every results file), so each stored row says which roofline it was judged against.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness import user_cache

#: Published peak memory bandwidth (GB/s) by device-name substring (NVIDIA's data sheets, SXM
#: parts): the defaults before (or instead of) a measurement. Spyre has no entry yet: its card's
#: figure belongs here once confirmed; until then a Spyre row uses the copy benchmark.
PUBLISHED_GBPS = {"H200": 4800.0, "H100": 3350.0, "A100": 2039.0, "L40S": 864.0}


def logical_bytes(config, seq_lens, query_lens=None) -> dict:
    """Bytes one layer must move for a step: every real K/V token read once, query and output."""
    query_lens = list(query_lens) if query_lens is not None else [1] * len(seq_lens)
    token = config.num_kv_heads * config.head_size * config.dtype_bytes
    heads = config.num_kv_heads * config.queries_per_kv
    q_tokens = sum(query_lens)
    kv = 2 * token * sum(seq_lens)
    io = 2 * heads * config.head_size * config.dtype_bytes * q_tokens   # query in, output out
    return {"kv": kv, "query_output": io, "total": kv + io}


def walked_kv_bytes(config, padded_kv_slots: int) -> int:
    """K/V bytes a layer walks over ``padded_kv_slots`` slots (the exact model's padded slots)."""
    return 2 * padded_kv_slots * config.num_kv_heads * config.head_size * config.dtype_bytes


def step_bytes(config, step, padded_kv_slots: int) -> dict:
    """Logical and walked bytes of one layer of a step, both exact: what the ASV suite tracks per
    probe so the history can turn a stored time into efficiency."""
    logical = logical_bytes(config, [s.seq_len for s in step], [s.query_len for s in step])
    return {"logical_bytes": logical["total"],
            "walked_bytes": walked_kv_bytes(config, padded_kv_slots) + logical["query_output"]}


def row_efficiency(config, seq_lens, query_lens, walked_kv_bytes: int, seconds_per_layer: float,
                   bandwidth_gbps: float | None) -> dict:
    """Efficiency figures of one timed step shape (see the module docstring)."""
    logical = logical_bytes(config, seq_lens, query_lens)
    walked = walked_kv_bytes + logical["query_output"]
    out = {"logical_bytes": logical["total"], "logical_kv_bytes": logical["kv"],
           "walked_bytes": walked, "walked_kv_bytes": walked_kv_bytes,
           "padding_efficiency": logical["kv"] / walked_kv_bytes if walked_kv_bytes else None,
           "achieved_gb_per_s": logical["total"] / seconds_per_layer / 1e9
           if seconds_per_layer > 0 else None,
           "walked_gb_per_s": walked / seconds_per_layer / 1e9 if seconds_per_layer > 0 else None,
           "bandwidth_gb_per_s": bandwidth_gbps}
    if bandwidth_gbps and out["walked_gb_per_s"] is not None:
        out["kernel_efficiency"] = out["walked_gb_per_s"] / bandwidth_gbps
        out["roofline_fraction"] = out["achieved_gb_per_s"] / bandwidth_gbps
    else:
        out["kernel_efficiency"] = out["roofline_fraction"] = None
    return out


def published_gbps(description: str) -> float | None:
    for name, gbps in PUBLISHED_GBPS.items():
        if name.lower() in description.lower():
            return gbps
    return None


def _cache_file() -> Path:
    return user_cache.folder() / "bandwidth.json"


def machine_bandwidth(device, measure: bool = True, cache: Path | None = None) -> dict:
    """The device's memory bandwidth: cached measurement, else measured now (once per machine
    and device), else the published figure. {"gb_per_s", "source"}."""
    from harness.runner.machine import default_machine_name

    cache = cache or _cache_file()
    key = f"{default_machine_name()}/{device.description}"
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known.get(key), dict) and known[key].get("gb_per_s"):
        return known[key]
    published = published_gbps(device.description)
    if not measure:
        return {"gb_per_s": published, "source": "published" if published else None}
    found = {"gb_per_s": copy_bandwidth(device), "source": "copy benchmark",
             "published_gb_per_s": published, "measured_at": time.time()}
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps({**known, key: found}, indent=1))
        tmp.replace(cache)
    except OSError:
        pass   # an unwritable cache costs a measurement next time, nothing else
    return found


#: The machine-info field (ASV's machine.json, each results file's ``params``) that holds the
#: bandwidth a run was judged against, as ``"<GB/s> GB/s <device kind> (<source>)"``.
MACHINE_FIELD = "bandwidth"


def machine_value(found: dict, kind: str) -> str | None:
    """The machine-info text of a :func:`machine_bandwidth` answer (None when nothing is known)."""
    gbps = found.get("gb_per_s")
    if not isinstance(gbps, (int, float)) or not 0 < gbps < float("inf"):
        return None
    return f"{gbps:.1f} GB/s {kind} ({found.get('source') or 'unknown source'})"


def parse_machine_value(text, kind: str) -> float | None:
    """GB/s from a stored :func:`machine_value`, when it was measured for device ``kind``."""
    parts = text.split(" ", 3) if isinstance(text, str) else []
    if len(parts) < 3 or parts[1] != "GB/s" or parts[2] != kind:
        return None
    try:
        gbps = float(parts[0])
    except ValueError:
        return None
    return gbps if gbps > 0 else None


def judged_bandwidth(device, cache: Path | None = None) -> dict:
    """:func:`machine_bandwidth`, or the published figure when the copy benchmark cannot run
    (out of device memory, a backend torch was not built with): a run still records a roofline."""
    try:
        return machine_bandwidth(device, cache=cache)
    except (RuntimeError, AssertionError, MemoryError):   # torch: "not compiled with CUDA" asserts
        return machine_bandwidth(device, measure=False, cache=cache)


def machine_fields(kind: str, cache: Path | None = None) -> dict:
    """The machine-info fields for a run on device ``kind`` (:func:`judged_bandwidth`)."""
    from harness.measure.device import select
    device = select(kind)
    return {MACHINE_FIELD: machine_value(judged_bandwidth(device, cache), device.name)}


def copy_bandwidth(device, size: int = 256 << 20, repeat: int = 5) -> float:
    """GB/s of the best of ``repeat`` copies of ``size`` bytes (read + write counted)."""
    import torch

    src = torch.ones(size, dtype=torch.uint8, device=device.torch_device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = float("inf")
    for _ in range(repeat):
        seconds, _ = device.elapsed(lambda: dst.copy_(src), 1)
        best = min(best, seconds)
    return 2 * size / best / 1e9
