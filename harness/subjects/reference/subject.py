"""The embedded reference subject: spyre-inference's ladder policies, written from docs/spyre-inference.md.

Each named policy is one generation of the bucketer plus metadata builder, so the harness can
answer the #810 review's questions with no checkout: ``pre-810`` (builder-owned batched ladders
from 1, env-blind), ``post-810-topup`` (#810 as reviewed), ``post-810-clamp`` (#810 as merged),
``chunked`` (generation 3: chunked kernel, batched grid recorded at warmup) and ``latest``
(generation 4: decode prefix of mixed batches batched, no num_seqs ladder below 4). Any policy
takes a ``+chunked`` suffix to swap in the chunked kernel.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from harness import __version__
from harness.config import MIN_BATCHED_SEQS, EngineConfig, Overrides
from harness.errors import CapabilityMissing, HarnessError, SubjectError
from harness.generations import Generation
from harness.ladders import (
    blocks_ladder,
    ceil_div,
    chunking,
    default_query_ladder,
    is_power_of_two,
    powers_of_two,
    previous_bucket,
    resolve_clamp,
    resolve_topup,
)
from harness.subjects.base import Bucketing, Subject


@dataclass(frozen=True)
class Policy:
    description: str
    override_rule: Literal["topup", "clamp"]
    #: "builder": the builder's own P(mns, 1) / P(ceil(mml/bs), 1); "bucketer": kv-derived.
    batched_ladders: Literal["builder", "bucketer"]
    chunked: bool = False
    records_batched: bool = False
    #: Generation 4 gives no num_seqs ladder at all below the batching minimum.
    empty_num_seqs_below_min: bool = False
    decode_prefix_batched: bool = False


POLICIES: dict[str, Policy] = {
    "pre-810": Policy("builder-owned batched ladders from 1, env-blind; top-up overrides",
                      "topup", "builder"),
    "post-810-topup": Policy("#810 as reviewed: bucketer-owned batched ladders, top-up overrides",
                             "topup", "bucketer"),
    "post-810-clamp": Policy("#810 as merged: bucketer-owned batched ladders, clamp overrides",
                             "clamp", "bucketer"),
    "chunked": Policy("generation 3: chunked batched kernel, batched grid recorded at warmup",
                      "clamp", "bucketer", chunked=True, records_batched=True),
    "latest": Policy("generation 4: as chunked, decode prefix of mixed batches batched, "
                     "no num_seqs ladder below 4", "clamp", "bucketer", chunked=True,
                     records_batched=True, empty_num_seqs_below_min=True,
                     decode_prefix_batched=True),
}


def min_real_query_len(query_ladder: tuple[int, ...], padded_q: int) -> int:
    """The shortest real query that pads to ``padded_q``: previous bucket + 1, or 1."""
    return previous_bucket(query_ladder, padded_q) + 1


def per_sequence_variants(num_blocks, query, block_size):
    """num_blocks descending × query descending, keeping pairs a real query can fill."""
    return tuple(
        (nb, qb)
        for nb in sorted(num_blocks, reverse=True)
        for qb in sorted(query, reverse=True)
        if min_real_query_len(query, qb) <= nb * block_size
    )


class ReferenceSubject(Subject):
    def __init__(self, name: str, policy: Policy):
        self.spec = f"reference:{name}"
        self.name = name
        self.policy = policy
        self.identity = f"reference:{name}@harness-{__version__}"
        caps = {"bucketer"}
        if policy.batched_ladders == "bucketer":
            caps.add("num_seqs_axis")
        if policy.records_batched:
            caps.add("batched_decode_variants")
        if policy.chunked:
            caps.add("chunking")
        caps.add("decode_kernel_b" if policy.chunked else "decode_kernel_a")
        if policy.decode_prefix_batched:
            caps.add("decode_prefix")
        self.capabilities = frozenset(caps)

    def decode_kernel(self):
        """The reference batched kernel: generation B (chunked) when the policy chunks, else A."""
        from harness.subjects.reference.kernels import BATCHED_KERNELS

        generation = Generation.B if self.policy.chunked else Generation.A
        return BATCHED_KERNELS[generation], generation

    def workload_costs(self, config: EngineConfig, overrides: Overrides, workloads) -> list:
        """The reference's builder is the pure-Python model (harness/model, which imports this
        package's base: hence imported here)."""
        from harness.model.cost import workload_cost

        bucketing = self.bucketing(config, overrides)
        out = []
        for workload in workloads:
            try:
                out.append(workload_cost(bucketing, config, workload))
            except HarnessError as exc:
                out.append(exc)
        return out

    def bucketing(self, config: EngineConfig, overrides: Overrides) -> Bucketing:
        if config.sliding_window:
            raise CapabilityMissing(f"{self.spec} does not model sliding-window attention (a "
                                    "spyre-inference commit's own builder does)")
        if overrides.knobs:
            raise CapabilityMissing(f"{self.spec} does not model {', '.join(overrides.knobs)} "
                                    "(a spyre-inference commit's own code does)")
        unmodelled = [what for what, given in (
            (f"speculative decoding ({config.spec_tokens} tokens)", config.spec_tokens),
            (f"a {config.kv_cache_dtype} K/V cache", config.kv_cache_dtype != "auto"),
            ("per-layer head counts", config.layer_overrides)) if given]
        if unmodelled:
            raise CapabilityMissing(f"{self.spec} does not model {', '.join(unmodelled)} (a "
                                    "spyre-inference commit's own code does)")
        p = self.policy
        resolve = resolve_topup if p.override_rule == "topup" else resolve_clamp
        bs, mml, mns = config.block_size, config.max_model_len, config.max_num_seqs
        mnbt = config.max_num_batched_tokens
        notes = [] if is_power_of_two(bs) else [f"block_size {bs} is not a power of two"]

        kv, kv_notes = resolve(overrides.kv, mml, powers_of_two(mml, start=bs))
        query, q_notes = resolve(overrides.query, mnbt, default_query_ladder(mnbt))
        notes += [f"kv: {n}" for n in kv_notes] + [f"query: {n}" for n in q_notes]
        num_blocks = blocks_ladder(kv, bs)

        if p.batched_ladders == "builder":
            num_seqs = None
            batched_seqs = powers_of_two(mns, start=1)
            batched_blocks = powers_of_two(ceil_div(mml, bs), start=1)
        else:
            if p.empty_num_seqs_below_min and mns < MIN_BATCHED_SEQS:
                num_seqs = ()
            else:
                num_seqs, s_notes = resolve(overrides.num_seqs, mns,
                                            powers_of_two(mns, start=MIN_BATCHED_SEQS))
                notes += [f"num_seqs: {n}" for n in s_notes]
            batched_seqs, batched_blocks = num_seqs, num_blocks

        enabled = overrides.batched_decode
        recorded = ()
        if p.records_batched and enabled:
            recorded = tuple((ns, nb) for nb in sorted(batched_blocks, reverse=True)
                             for ns in sorted(batched_seqs, reverse=True))
        return Bucketing(
            kv=kv, query=query, num_blocks=num_blocks, num_seqs=num_seqs,
            batched_num_seqs=batched_seqs, batched_num_blocks=batched_blocks,
            variants=per_sequence_variants(num_blocks, query, bs),
            batched_variants=recorded, batched_enabled=enabled,
            chunking=chunking if p.chunked else None,
            decode_prefix_batched=p.decode_prefix_batched,
            min_batched_seqs=MIN_BATCHED_SEQS, notes=tuple(notes),
        )


def reference_subject(policy_spec: str) -> ReferenceSubject:
    """``pre-810``, ``post-810-clamp+chunked`` ... (the part after ``reference:``)."""
    name, *options = policy_spec.split("+")
    if name not in POLICIES:
        raise SubjectError(f"reference:{policy_spec}: unknown policy {name!r}; "
                           f"known: {', '.join(POLICIES)}")
    policy = POLICIES[name]
    for option in options:
        if option != "chunked":
            raise SubjectError(f"reference:{policy_spec}: unknown option +{option}; known: +chunked")
        policy = dataclasses.replace(policy, chunked=True)
    return ReferenceSubject(policy_spec, policy)
