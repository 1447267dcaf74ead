"""Which attention-path module plays which part, and each one's content hash.

A finding that a ladder changed reads as "the bucketer did it"; when the head also changed its
builder or kernels, that credit may be wrong. So every side of a comparison (and every kernel
row) carries the content hash of each attention-path module it was computed from, read from
the snapshot (none of the subject's code run), and a comparison says which part's code changed
between base and head: bucketer, builder, kernel, env parsing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

#: (part, path prefix or file) in spyre-inference's tree, first match wins. The builder is the
#: backend (metadata builder and impl), the layer that installs it, the jagged plan and the
#: transfer function (``custom_ops/utils.py``'s ``convert``); kernels are ``ops/*``.
PARTS: tuple[tuple[str, str], ...] = (
    ("bucketer", "spyre_inference/v1/attention/spyre_attn_bucketer.py"),
    ("kernel", "spyre_inference/v1/attention/ops/"),
    ("builder", "spyre_inference/v1/attention/backends/"),
    ("builder", "spyre_inference/v1/attention/attn_layer.py"),
    ("builder", "spyre_inference/v1/attention/jagged_plan.py"),
    ("builder", "spyre_inference/custom_ops/utils.py"),
    ("env", "spyre_inference/envs.py"),
    ("env", "spyre_inference/platform.py"),
)
#: The parts in the order a reader looks for them.
PART_ORDER = ("bucketer", "builder", "kernel", "env")
#: Hex digits of a module's hash kept (collisions among a few dozen files: never in practice).
HASH_CHARS = 12


def part_of(rel: str) -> str | None:
    """The part a module plays (``bucketer``, ``builder``, ``kernel``, ``env``), or None when it
    is not on the attention path."""
    for part, prefix in PARTS:
        if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix)):
            return part
    return None


def module_hashes(files: Mapping[str, bytes]) -> dict[str, str]:
    """Every attention-path module of a snapshot: relative path -> sha256 prefix of its bytes."""
    return {rel: hashlib.sha256(files[rel]).hexdigest()[:HASH_CHARS]
            for rel in sorted(files) if part_of(rel) is not None}


def changed_parts(base: Mapping[str, str], head: Mapping[str, str]) -> dict[str, list[str]]:
    """Part -> the modules of that part whose content differs (added, removed or edited), in
    :data:`PART_ORDER`; parts with no change are absent."""
    out: dict[str, list[str]] = {}
    for rel in sorted(set(base) | set(head)):
        if base.get(rel) != head.get(rel):
            out.setdefault(part_of(rel) or "other", []).append(rel)
    return {p: out[p] for p in (*PART_ORDER, "other") if p in out}


def short_path(rel: str) -> str:
    """A module's path without the package prefix every one shares."""
    return rel.removeprefix("spyre_inference/v1/attention/").removeprefix("spyre_inference/")
