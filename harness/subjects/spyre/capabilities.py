"""What a spyre-inference commit can do, probed on its code (not on version numbers):

* ``bucketer``: ``spyre_inference/v1/attention/spyre_attn_bucketer.py`` exists (a revision
  without it is "no bucketer yet": every figure is a skip with that reason);
* ``num_seqs_axis``: ``find_sequence_bucket`` or ``num_seqs_buckets`` on the bucketer class
  (#810 on). Which batched ladders dispatch is not inferred from it: it is read from the
  constructed metadata builder (:func:`harness.subjects.spyre.bucketing.builder_ladders`: its
  own before #810, its bucketer's after);
* ``batched_decode_variants``: the method of that name; ``chunking``: ``batched_decode_chunking``
  on the class or, as in generations 3-4, at module level;
* ``sliding_window``: the bucketer's constructor takes it (generation 4);
* ``decode_prefix``: the backend module uses vLLM's ``split_decodes_and_prefills`` (generation 3
  on): the builder, not the bucketer, decides whether a mixed batch batches its decodes;
* ``decode_kernel_a`` / ``decode_kernel_b``: a top-level function with the kernel's signature in
  ``backends/spyre_attn.py`` or ``ops/batched_decode.py`` (found by parsing, not importing);
* ``forward``: the backend defines ``SpyreAttentionMetadataBuilder`` and ``SpyreAttentionImpl``,
  which :mod:`harness.subjects.spyre.drive` drives per step;
* ``compile_guard``: ``v1/worker/compile_guard.py`` exists (its own check on warmup coverage,
  run beside spyre-bench's late compiles by :mod:`harness.measure.guard`).

What probing the bucketer found is plain data, kept in the figure memo by source key: a commit
whose attention sources were probed before is not loaded again to learn it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.config import MIN_BATCHED_SEQS
from harness.errors import SubjectError
from harness.generations import Generation
from harness.subjects.load.loader import (
    BACKEND_FILE,
    BUCKETER_FILE,
    OPS_KERNEL_FILE,
    CaptureHandler,
    SourceTree,
    where,
)
from harness.subjects.memo.figures import FIGURES, probe_key
from harness.subjects.source.extract import KernelDef
from harness.subjects.spyre.bucketing import BUCKETER_CLASS, bucketer_window

#: The commit's own compile guard, where it has one.
GUARD_FILE = "spyre_inference/v1/worker/compile_guard.py"


@dataclass
class Capabilities:
    """A commit's capabilities, why each missing one is missing, its batched minimum and the
    decode kernel it would run: ``(file, KernelDef)``, or None."""

    names: set[str] = field(default_factory=set)
    missing: dict[str, str] = field(default_factory=dict)
    min_batched: int = MIN_BATCHED_SEQS   # until the bucketer says otherwise
    kernel_def: tuple[str, KernelDef] | None = None


def stored_probe(tree: SourceTree, source: Callable[[], str]) -> dict | None:
    """What probing this commit's bucketer found before (the figure memo, by ``source()`` key),
    or None: a commit whose attention sources were probed before (a docs-only commit, a later
    process) is not loaded, nor torch imported, to learn its capabilities."""
    if not tree.has(BUCKETER_FILE):
        return None
    return FIGURES.get(source(), probe_key())


def probe(tree: SourceTree, mode: str, origin: str, source: Callable[[], str],
          probed: dict | None) -> Capabilities:
    """The commit's capabilities: its bucketer's from ``probed`` (else probed now, and kept),
    its kernels' and its forward's from their parsed sources."""
    found = Capabilities()
    if tree.has(BUCKETER_FILE):
        if probed is None:
            probed = probe_bucketer(tree, mode, origin)
            FIGURES.put(source(), probe_key(), probed)
            FIGURES.flush()
        found.names |= set(probed["capabilities"])
        found.missing.update(probed["missing"])
        found.min_batched = probed["min_batched"]
    else:
        found.missing["bucketer"] = f"{BUCKETER_FILE} is not in it (no bucketer yet)"
        for cap in ("num_seqs_axis", "batched_decode_variants", "chunking", "decode_prefix",
                    "sliding_window"):
            found.missing[cap] = "no bucketer"
    found.names |= _probe_kernels(tree, found)
    return found


def probe_bucketer(tree: SourceTree, mode: str, origin: str) -> dict:
    """Capabilities read from the commit's bucketer module and its backend's source, what is
    missing and why, and the batched minimum: plain data (kept in the figure memo)."""
    missing: dict[str, str] = {}
    min_batched = MIN_BATCHED_SEQS
    with bucketer_window(tree, mode, {}, CaptureHandler()) as load:
        try:
            module = load()
        except Exception as exc:
            raise SubjectError(f"{origin}: {BUCKETER_FILE} failed to import: "
                               f"{type(exc).__name__}: {exc}{where(exc, tree)}") from None
        cls = getattr(module, BUCKETER_CLASS, None)
        minimum = getattr(module, "_MIN_BATCHED_SEQS", None)
        on_module = {n for n in ("batched_decode_chunking",) if callable(getattr(module, n,
                                                                                  None))}
    if not isinstance(cls, type):
        raise SubjectError(f"{origin}: {BUCKETER_FILE} has no {BUCKETER_CLASS} class")
    backend = _parsed(tree, BACKEND_FILE)
    if not isinstance(minimum, int) and backend is not None:
        minimum = backend.literal("_MIN_BATCHED_SEQS")
    if isinstance(minimum, int) and not isinstance(minimum, bool):
        min_batched = minimum

    caps = {"bucketer"}
    checks = {
        "num_seqs_axis": (("find_sequence_bucket", "num_seqs_buckets"),
                          f"{BUCKETER_CLASS} has no find_sequence_bucket or num_seqs_buckets "
                          "(pre-#810: the metadata builder owns the batched ladders)"),
        "batched_decode_variants": (("batched_decode_variants",),
                                    f"{BUCKETER_CLASS} has no batched_decode_variants()"),
        "chunking": (("batched_decode_chunking",),
                     f"neither {BUCKETER_CLASS} nor its module has batched_decode_chunking()"),
    }
    # What the builder uses counts too: a backend that imports or defines the chunking
    # rule chunks, whichever module the rule lives in.
    builder_names = set(backend.bindings) if backend is not None else set()
    for cap, (names, reason) in checks.items():
        if any(hasattr(cls, n) or n in on_module or (cap == "chunking" and n in builder_names)
               for n in names):
            caps.add(cap)
        else:
            missing[cap] = reason
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        params = {}
    if "sliding_window" in params:
        caps.add("sliding_window")
    else:
        missing["sliding_window"] = f"{BUCKETER_CLASS}() takes no sliding_window"
    # The builder, not the bucketer, decides whether mixed batches batch their decodes.
    if backend is not None and "split_decodes_and_prefills" in backend.bindings:
        caps.add("decode_prefix")
    else:
        missing["decode_prefix"] = (f"{BACKEND_FILE} does not use vLLM's "
                                    "split_decodes_and_prefills")
    return {"capabilities": tuple(sorted(caps)), "missing": missing,
            "min_batched": min_batched}


def _parsed(tree: SourceTree, rel: str):
    """``rel`` parsed (not run), or None where it is absent or not valid Python."""
    try:
        return tree.parsed(rel)
    except SyntaxError:
        return None


def _probe_kernels(tree: SourceTree, probed: Capabilities) -> set[str]:
    """The kernel and forward capabilities, from the parsed sources; sets ``probed``'s kernel
    (the generation its bucketer's capabilities imply first) and why the missing ones are."""
    found: list[tuple[str, KernelDef]] = []
    for rel in (OPS_KERNEL_FILE, BACKEND_FILE):
        source = _parsed(tree, rel)
        if source is not None:
            defs = source.kernels()
            defs.sort(key=lambda k: "batched_decode" not in k.name)
            found += [(rel, k) for k in defs]
    have = {k.generation for _, k in found}
    for gen in Generation:
        if gen not in have:
            probed.missing[f"decode_kernel_{gen.lower()}"] = (
                f"no function with the generation-{gen} kernel signature in "
                f"{OPS_KERNEL_FILE} or {BACKEND_FILE}")
    # The chunked bucketer dispatches the chunked kernel: prefer the generation it implies.
    prefer = Generation.B if "chunking" in probed.names else Generation.A
    found.sort(key=lambda f: f[1].generation != prefer)
    probed.kernel_def = found[0] if found else None
    caps = {f"decode_kernel_{g.lower()}" for g in have}
    backend = _parsed(tree, BACKEND_FILE)
    classes = ("SpyreAttentionMetadataBuilder", "SpyreAttentionImpl")
    if backend is not None and all(c in backend.bindings for c in classes):
        caps.add("forward")
        if not have:
            for gen in "ab":
                probed.missing[f"decode_kernel_{gen}"] += (
                    "; its kernels follow their own convention and run through its "
                    "SpyreAttentionImpl.forward() (harness.measure.forward)")
    else:
        probed.missing["forward"] = f"{BACKEND_FILE} defines no {' and '.join(classes)}"
    if tree.has(GUARD_FILE):
        caps.add("compile_guard")
    else:
        probed.missing["compile_guard"] = f"{GUARD_FILE} is not in it"
    return caps
