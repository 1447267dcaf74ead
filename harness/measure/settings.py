"""What a kernel measurement is asked to do, and its defaults, importable without torch.

The kernel command derives its flags' defaults from :class:`KernelOptions` while building the
parser (``spyre-bench --help`` never imports torch), and the rest of :mod:`harness.measure`
reads the same values, so each default is written once, here.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the Device class imports torch
    from harness.measure.device import Device

#: A relative spread (IQR / median) above this marks a result unstable.
UNSTABLE_SPREAD = 0.10
#: Refuse workspaces above this many bytes of K/V cache unless told otherwise.
DEFAULT_MAX_CACHE_BYTES = 8 << 30
#: Wall seconds one workload's timing may take by default (a first look; ``--full`` lifts it):
#: step shapes are timed most frequent first, each with the samples that fit (at least
#: timing.MIN_SAMPLES), and none starts once the budget is spent (the first always does).
FIRST_LOOK_BUDGET_S = 1.0
#: Where the commit's own compile guard is run for ASV (kernel.Guard) and by ``compare``
#: (harness.measure.guard): a small engine the newest backends take, four steps of a decode mix,
#: on the commit's default path.
GUARD_CONFIG = dict(block_size=64, max_model_len=512, max_num_seqs=8,
                    max_num_batched_tokens=512, num_kv_heads=2, queries_per_kv=2,
                    head_size=64, num_layers=4)
GUARD_WORKLOAD, GUARD_STEPS, GUARD_OVERRIDES = "four-3-block-decodes", 4, "none"


@dataclass(frozen=True)
class KernelOptions:
    device: Device
    repeat: int = 20
    warmup: int = 3
    number: int | None = None
    min_sample_s: float = 2e-3
    #: torch.compile backend for graph counting (and for timing when timing == "compiled").
    backend: str = "eager"
    #: "eager": call the kernel directly; "compiled": through torch.compile(backend).
    timing: str = "eager"
    recompile_limit: int | None = None
    record_warmup: bool = True
    graphs: bool = True
    time: bool = True
    #: Also time each batched shape's sequences on the per-sequence path.
    per_sequence: bool = False
    max_shapes: int = 6
    soft_cap: float = 0.0
    seed: int = 0
    unstable_threshold: float = UNSTABLE_SPREAD
    max_cache_bytes: int = DEFAULT_MAX_CACHE_BYTES
    #: torch intra-op threads for timing (None: torch's default).
    threads: int | None = None
    #: The machine's memory bandwidth (GB/s) and where it came from, for efficiency figures.
    bandwidth_gbps: float | None = None
    bandwidth_source: str | None = None
    #: Wall seconds per workload's timing (None: every shape up to max_shapes, every sample).
    time_budget_s: float | None = FIRST_LOOK_BUDGET_S
    #: The graph count's phases whose calls compile without computing outputs (cheap backends;
    #: the counts are the same): a first look checks what it times against the oracle, a full
    #: run (empty) every key the count reaches as well.
    shape_only: tuple[str, ...] = ("warmup", "workload")

    #: What a result records of its options (the device is recorded on its own).
    RECORDED = ("repeat", "warmup", "number", "backend", "timing", "recompile_limit",
                "record_warmup", "per_sequence", "max_shapes", "soft_cap", "seed", "threads",
                "bandwidth_gbps", "bandwidth_source", "time_budget_s", "shape_only")

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.RECORDED}


def defaults() -> dict:
    """KernelOptions' field defaults by name (fields without one are left out)."""
    return {f.name: f.default for f in fields(KernelOptions) if f.default is not MISSING}
