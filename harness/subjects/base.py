"""The subject protocol: one version of the code under test, reduced to the data the model needs.

Every subject (the embedded reference policies, or spyre-inference loaded from a checkout) answers
the same question — "what does your bucketer say for this config and these overrides?" — with a
:class:`Bucketing`. The model never sees the subject's code, only this value.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.config import EngineConfig, Overrides
from harness.errors import CapabilityMissing, HarnessError
from harness.ladders import Ladder
from harness.subjects.source.knobs import Knob

#: Capabilities a subject may have; anything a command needs and the subject lacks is a skip.
CAPABILITIES = {
    "bucketer": "the attention bucketer (kv / query / num_blocks axes and variants())",
    "num_seqs_axis": "the bucketer owns the batched-decode ladders (num_seqs axis, post-#810)",
    "batched_decode_variants": "warmup records the batched decode grid (batched_decode_variants)",
    "chunking": "chunked batched decode (batched_decode_chunking: blocks_per_chunk, num_chunks)",
    "decode_prefix": "the decode prefix of a mixed batch runs batched",
    "sliding_window": "the bucketer takes a sliding_window (generation 4)",
    "decode_kernel_a": "the batched decode kernel, one block per loop step (generation A)",
    "decode_kernel_b": "the chunked batched decode kernel (generation B)",
    "forward": "the attention impl's forward, run on its own builder's metadata (any kernel "
               "convention)",
    "compile_guard": "its own compile guard (v1/worker/compile_guard.py: watched kernels, armed "
                     "after warmup)",
}


@dataclass
class ChunkTable:
    """A subject's ``batched_decode_chunking`` over its batched grid, computed inside the load
    (so the model never calls back into subject code after the window closed); plain data, so a
    bucketing is kept in the figure memo like any figure."""

    table: dict[tuple[int, int], tuple[int, int]]
    #: Who computed it (named when asked for a pair off the grid).
    spec: str

    def __call__(self, b_seqs: int, b_blocks: int) -> tuple[int, int]:
        try:
            return self.table[(b_seqs, b_blocks)]
        except KeyError:
            raise HarnessError(f"{self.spec}: no chunking for ({b_seqs}, {b_blocks}), which is "
                               f"off its batched ladders") from None


@dataclass(frozen=True)
class Bucketing:
    """A subject's ladders and warmup records for one (config, overrides) pair."""

    kv: Ladder
    query: Ladder
    #: Per-sequence num_blocks axis (ceil(kv / bs) over the kv ladder).
    num_blocks: Ladder
    #: The bucketer's own num_seqs axis, or None where the bucketer has none (pre-#810).
    num_seqs: Ladder | None
    #: The ladders the metadata builder dispatches batched decode on (None only in
    #: :meth:`Subject.bucketer_bucketing`'s, where the builder could not be driven).
    batched_num_seqs: Ladder | None
    batched_num_blocks: Ladder | None
    #: Per-sequence kernel variants recorded at warmup: (num_blocks, query_bucket) pairs.
    variants: tuple[tuple[int, int], ...]
    #: Batched kernel variants recorded at warmup: (num_seqs, num_blocks); empty if none are.
    batched_variants: tuple[tuple[int, int], ...]
    batched_enabled: bool
    #: (b_seqs, b_blocks) -> (blocks_per_chunk, num_chunks) for the chunked kernel, else None.
    chunking: Callable[[int, int], tuple[int, int]] | None = field(default=None, compare=False)
    decode_prefix_batched: bool = False
    min_batched_seqs: int = 4
    #: What the bucketer warned about (non-power-of-two bs, appended or dropped override entries).
    notes: tuple[str, ...] = ()
    #: Why no step batches although the switch is on, where the commit's impl declines what its
    #: builder prepares (None: it does not, or the switch is off).
    batched_declined: str | None = None
    #: Why the builder's batched ladders are None (:meth:`Subject.bucketer_bucketing`).
    builder_failed: str | None = None

    def ladders(self) -> dict[str, Ladder | None]:
        """The axes by name, in display order."""
        return {
            "kv": self.kv,
            "query": self.query,
            "num_blocks": self.num_blocks,
            "num_seqs": self.num_seqs,
            "batched_num_seqs": self.batched_num_seqs,
            "batched_num_blocks": self.batched_num_blocks,
        }


class Subject(ABC):
    """One version of the code under test."""

    #: How the user named it (``reference:pre-810``, ``git:../si@abc123`` ...).
    spec: str
    #: A stable identity for results: a commit hash, or policy plus harness version.
    identity: str
    capabilities: frozenset[str]
    #: Content hash of each attention-path module it runs (:mod:`harness.subjects.source.sources`);
    #: None for a subject with no source tree (the embedded reference).
    sources: dict[str, str] | None = None
    #: The knobs its ``envs.py`` registry declares, by name (:mod:`harness.subjects.source.knobs`);
    #: None where it has none to read (the reference models only the bucket variables).
    knobs: dict[str, Knob] | None = None

    @abstractmethod
    def bucketing(self, config: EngineConfig, overrides: Overrides) -> Bucketing:
        """The subject's ladders for one config; raises HarnessError on configs it rejects."""

    def bucketer_bucketing(self, config: EngineConfig, overrides: Overrides) -> Bucketing:
        """The ladders its bucketer alone gives (kv, query, num_blocks, num_seqs, its variants):
        :meth:`bucketing`'s, or where the builder of the commit's default path cannot be driven,
        those with ``batched_num_seqs`` and ``batched_num_blocks`` None (the batched ladders and
        records are the builder's and the impl's)."""
        return self.bucketing(config, overrides)

    def workload_costs(self, config: EngineConfig, overrides: Overrides, workloads) -> list:
        """Per workload, its exact cost (a ``harness.model.WorkloadCost``) as the subject's own
        metadata builder decides it, or the HarnessError saying why that workload cannot be
        evaluated. Raises HarnessError when no workload can be (the config is rejected, the
        builder cannot be driven). A subject without a builder has no such figures."""
        raise CapabilityMissing(f"{self.spec} has no metadata builder to drive")

    def decode_kernel(self):
        """The subject's batched decode kernel as ``(callable, generation)``, or None.

        generation is a :class:`~harness.generations.Generation`: A (one block per loop step) or
        B (chunked). Only measurement calls this, so implementations may import torch here, never
        at module level. The argument conventions of both generations are spelled out in
        harness/subjects/reference/kernels.py.
        """
        return None

    def prefetch_workloads(self, requests: list) -> int:
        """Compute ``workload_costs`` of many (config, overrides, workloads) ahead, where that
        is cheaper together (in parallel); the calls that follow return the same figures.
        Returns how many step figures were computed ahead; the reference computes none."""
        return 0

    def compile_settings(self) -> dict:
        """``torch._dynamo.config`` values the subject's platform sets at import (applied while
        graphs are counted); the reference sets none."""
        return {}

    def close(self) -> None:
        """Release what the subject holds (a worker process ends); a loaded one holds nothing."""

    def lacks(self, capability: str) -> str | None:
        """A skip reason if the subject lacks ``capability``, else None."""
        if capability in self.capabilities:
            return None
        return f"{self.spec} has no {capability} ({CAPABILITIES.get(capability, capability)})"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec}>"
