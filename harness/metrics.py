"""Every figure the harness reports: its unit, its direction and whether it is exact.

ASV treats every number as lower-is-better, so each metric is phrased that way. Exact metrics are
deterministic functions of (subject, config, workload): any change is a real change. Timings are
not exact and are judged with statistics.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    label: str
    description: str
    exact: bool = True
    #: Tracked as an ASV benchmark. Figures derivable from another tracked one are not: every
    #: tracked figure costs one benchmark process per parameter combination.
    tracked: bool = True
    #: Significant digits ASV stores of a ratio (0: the figure as computed). Ten keep every
    #: padded slot: two paddings of one mix that differ by a slot differ at ten digits while
    #: the mix pads fewer than 10^9 slots (a quick-tier mix pads at most ~10^7).
    significant: int = 0


def _m(name, unit, label, description, exact=True, tracked=True, significant=0) -> Metric:
    return Metric(name, unit, label, description, exact, tracked, significant)


#: Per-config figures (from harness.model.summary).
CONFIG_METRICS = {m.name: m for m in [
    _m("kv_buckets", "buckets", "kv", "kv ladder size"),
    _m("query_buckets", "buckets", "query", "query ladder size"),
    _m("num_blocks_buckets", "buckets", "nb", "per-sequence num_blocks ladder size"),
    _m("variants", "variants", "variants", "per-sequence kernel variants recorded at warmup"),
    _m("batched_variants_recorded", "variants", "batched rec.",
       "batched decode variants recorded at warmup"),
    _m("batched_num_blocks_distinct", "buckets", "batched nb",
       "distinct batched num_blocks buckets (one compiled graph each, per num_seqs bucket)"),
    _m("batched_keys_reachable", "keys", "batched reach.",
       "batched compile keys some admissible batch reaches"),
    _m("unrecorded_keys", "keys", "unrecorded",
       "reachable compile keys warmup does not record (potential late compiles)"),
    _m("dead_variants", "variants", "dead", "variants recorded at warmup that no batch reaches"),
]}

#: Per-workload figures (from harness.model.cost.WorkloadCost.as_dict).
WORKLOAD_METRICS = {m.name: m for m in [
    _m("iterations_per_layer_mean", "iterations", "iters/layer",
       "kernel loop iterations per layer, mean over steps"),
    _m("iterations_per_step_mean", "iterations", "iters/step",
       "kernel loop iterations per step (all layers), mean over steps", tracked=False),
    _m("padded_slots_per_real_token", "slots/token", "padded/real",
       "padded KV slots walked per real KV token", significant=10),
    _m("h2d_bytes_per_step", "bytes", "H2D/step", "host-to-device bytes per step, mean"),
    # part of h2d_bytes_per_step, which ASV tracks (a mask that grows moves it); compare shows
    # the H2D bytes by tensor, masks apart: 2.9 kB a quick-tier commit not stored twice
    _m("mask_bytes_per_step", "bytes", "mask/step", "batched mask bytes per step, mean",
       tracked=False),
    _m("transfers_per_step", "transfers", "xfers/step", "host-to-device transfers per step, mean"),
    _m("distinct_compile_keys", "keys", "keys", "distinct compiled graphs the workload reaches"),
    _m("late_compiles", "keys", "late", "keys reached that warmup does not record"),
    _m("warmup_variants", "variants", "warmup", "compile keys recorded at warmup",
       tracked=False),  # per config: exact.Config's variants and batched_variants_recorded
]}

METRICS = {**CONFIG_METRICS, **WORKLOAD_METRICS}


def format_value(value, unit: str) -> str:
    """Human form for tables; JSON keeps the exact number."""
    if value is None:
        return "-"
    if unit == "bytes":
        return format_bytes(value)
    if unit in ("s", "seconds"):
        return format_seconds(value)
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def ladder_text(ladder) -> str:
    """``[64,128,192]``, or ``(none)`` for a missing ladder: the one way ladders are shown."""
    return "(none)" if ladder is None else "[" + ",".join(map(str, ladder)) + "]"


def format_seconds(s: float) -> str:
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(s) >= size:
            return f"{s / size:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def format_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{n:.0f} B" if n == int(n) else f"{n:.1f} B"
