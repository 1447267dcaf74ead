"""Every ASV benchmark the suite defines: unit, direction, exact or timed, and its version.

One registry, asked by the suite (to set ``unit`` and ``version`` on each benchmark), and by
everything that reads results back (compare, changes, bisect, the report, the PR comment) to decide
how a series is judged. Nothing else decides whether a series is exact.

A benchmark's version is derived from its definition (name, unit, kind, meaning, revision): a
changed meaning starts a new ASV series instead of mixing with the old one, while editing a
benchmark's code without changing what it measures keeps its history.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from harness.metrics import CONFIG_METRICS, METRICS, WORKLOAD_METRICS, Metric

#: ASV judges every benchmark lower-is-better; the suite phrases every figure that way.
LOWER_IS_BETTER = "lower"


@dataclass(frozen=True)
class BenchmarkDef:
    #: ASV's benchmark name, ``module.Class.method``.
    name: str
    unit: str
    #: Deterministic for a (subject, config, workload): any change at all is real.
    exact: bool
    meaning: str
    direction: str = LOWER_IS_BETTER
    #: Bump when the computation changes meaning without the text above changing.
    revision: int = 1

    @property
    def version(self) -> str:
        text = "\x1f".join([self.name, self.unit, "exact" if self.exact else "timed",
                            self.meaning, self.direction, str(self.revision)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    #: The figure's name in comparisons: a harness.metrics name, or the benchmark's own name.
    figure: str = ""
    #: How a finding names a timed figure in words ("host build() per step"); empty: by name.
    label: str = ""

    def __post_init__(self):
        if not self.figure:
            object.__setattr__(self, "figure", self.name)

    @property
    def timed(self) -> bool:
        return not self.exact


def _exact_metric(cls: str, metric: Metric) -> BenchmarkDef:
    # stored rounded (metric.significant): a new series, never a step from the unrounded one
    return BenchmarkDef(f"exact.{cls}.track_{metric.name}", metric.unit, True, metric.description,
                        revision=2 if metric.significant else 1, figure=metric.name)


#: Ladders tracked as one number each (``exact.Ladder``): axis -> unit of its entries.
LADDER_UNITS = {"kv": "tokens", "query": "tokens", "num_blocks": "blocks",
                "num_seqs": "sequences", "batched_num_seqs": "sequences",
                "batched_num_blocks": "blocks"}


def _ladder(axis: str, unit: str) -> BenchmarkDef:
    return BenchmarkDef(f"exact.Ladder.track_{axis}", unit, True,
                        f"the {axis} ladder's entries summed over the tier's positions, its top "
                        "entry repeated past its end (a bucket grown raises it: it pads more; "
                        "the ladder itself is in the run's identity sidecar)",
                        figure=f"ladders.{axis}")


def _all() -> dict[str, BenchmarkDef]:
    defs = [_exact_metric("Config", m) for m in CONFIG_METRICS.values() if m.tracked]
    defs += [_exact_metric("Workload", m) for m in WORKLOAD_METRICS.values() if m.tracked]
    defs += [_ladder(axis, unit) for axis, unit in LADDER_UNITS.items()]
    defs += [
        BenchmarkDef("exact.Frontier.track_excess_padding", "percent", True,
                     "how much more the config's own kv ladder pads (padded KV slots per real "
                     "token) on the tier's mixes than the best ladder the optimiser finds with "
                     "at most as many compiled graphs, both evaluated by the subject's code "
                     "(0: on the frontier)", revision=2),
        BenchmarkDef("kernel.Decode.time_layer", "seconds", False,
                     "wall time of one layer of batched decode attention for a probe's batch, on "
                     "the bucket the subject picks, after an oracle check"),
        BenchmarkDef("kernel.DecodeBytes.track_walked_bytes", "bytes", True,
                     "bytes one layer of a probe's batch walks on the bucket the subject picks "
                     "(K/V of every padded slot, query and output; the exact model)"),
        BenchmarkDef("kernel.DecodeBytes.track_logical_bytes", "bytes", True,
                     "bytes one layer of a probe's batch must move (K/V of its real tokens, query "
                     "and output)"),
        BenchmarkDef("kernel.Compile.track_graphs", "graphs", True,
                     "graphs torch.compile builds for a workload (warmup variants and steps)"),
        BenchmarkDef("kernel.Compile.track_late_compiles", "graphs", True,
                     "graphs compiled by workload steps after warmup"),
        BenchmarkDef("kernel.Compile.track_graphs_over_model", "graphs", True,
                     "measured graphs minus the model's distinct keys (0 unless the model is "
                     "wrong)"),
        BenchmarkDef("kernel.Compile.track_eager_fallbacks", "keys", True,
                     "keys past Dynamo's default recompile limit that silently ran eagerly"),
        BenchmarkDef("kernel.Guard.track_guard_violations", "compiles", True,
                     "compiles the commit's own compile guard (v1/worker/compile_guard.py, at its "
                     "strictest level, armed after the commit's own warmup) raises for over a "
                     "workload's steps, on the commit's default path"),
        BenchmarkDef("kernel.CompileTime.track_compile_seconds", "seconds", False,
                     "seconds to compile a probe's kernels with inductor from a cold cache"),
        BenchmarkDef("host.Build.time_build", "seconds", False,
                     "CPU seconds the subject's own metadata builder's build() takes per step of "
                     "a workload on an attention path (the host work before every step)",
                     label="host build() per step"),
        BenchmarkDef("host.Forward.time_forward", "seconds", False,
                     "CPU seconds one layer of the subject's own attention forward() takes per "
                     "step of a workload on an attention path, outside its kernels (dispatch "
                     "and launch work)",
                     label="host forward() per layer outside the kernels"),
    ]
    return {d.name: d for d in defs}


REGISTRY: dict[str, BenchmarkDef] = _all()


def lookup(benchmark: str) -> BenchmarkDef | None:
    """The definition of a benchmark by ASV name (``exact.Config.track_kv_buckets``), or None."""
    return REGISTRY.get(benchmark.split("(", 1)[0])


def is_exact(benchmark: str) -> bool:
    """Whether a stored series is compared exactly; an unknown benchmark is not."""
    found = lookup(benchmark)
    return found is not None and found.exact


def label_of(benchmark: str) -> str:
    """How findings name a benchmark in words, or "" where it has no such name."""
    found = lookup(benchmark)
    return found.label if found is not None else ""


def unit_of(figure: str) -> str:
    """The unit of a figure named as comparisons name it (metric or benchmark name)."""
    if figure in METRICS:
        return METRICS[figure].unit
    found = lookup(figure)
    return found.unit if found is not None else ""


def is_timed(benchmark: str) -> bool:
    found = lookup(benchmark)
    return found is not None and found.timed


def describe(method, benchmark: str):
    """Set ASV's ``unit`` and ``version`` on a benchmark method from its registry entry."""
    found = REGISTRY[benchmark]
    method.unit = found.unit
    method.version = found.version
    return method
