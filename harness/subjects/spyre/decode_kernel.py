"""The commit's own decode kernel, loaded for the harness to compile and time.

Generation A is compiled from its own source in ``backends/spyre_attn.py`` with only the
top-level helpers, constants and torch/stdlib imports it uses, so none of that module's vLLM
imports run; ``ops/batched_decode.py`` (torch only) is loaded by path.
"""

from __future__ import annotations

import builtins
import importlib

from harness.errors import SubjectError
from harness.subjects.load.loader import (
    BACKEND_MODULE,
    OPS_KERNEL_FILE,
    OPS_KERNEL_MODULE,
    CaptureHandler,
    SourceTree,
    isolated,
    vllm_standins,
    where,
)
from harness.subjects.source.extract import KERNEL_IMPORTS, KernelDef


def load_decode_kernel(tree: SourceTree, origin: str, kernel_def: tuple[str, KernelDef]):
    """``(function, Generation)`` of ``kernel_def`` (its file and definition), undecorated:
    the caller compiles it."""
    import torch  # noqa: F401  (imported outside the window: it must stay imported)

    rel, kdef = kernel_def
    try:
        fn = _load(tree, rel, kdef)
    except Exception as exc:
        raise SubjectError(f"{origin}: cannot load the generation-{kdef.generation}"
                           f" kernel {kdef.name} from {rel}: {type(exc).__name__}: {exc}"
                           f"{where(exc, tree)}") from None
    while hasattr(fn, "__wrapped__") or hasattr(fn, "_torchdynamo_orig_callable"):
        fn = getattr(fn, "_torchdynamo_orig_callable", None) or fn.__wrapped__
    return fn, kdef.generation


def _load(tree: SourceTree, rel: str, kdef: KernelDef):
    if rel == OPS_KERNEL_FILE:
        with isolated({}, tree, vllm_standins(CaptureHandler())):
            return getattr(importlib.import_module(OPS_KERNEL_MODULE), kdef.name)
    code = tree.parsed(rel).compile([kdef.name], KERNEL_IMPORTS)
    namespace = {"__name__": BACKEND_MODULE, "__builtins__": builtins}
    exec(code, namespace)
    return namespace[kdef.name]
