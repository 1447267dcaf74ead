"""The source key of memoized figures: what of a commit, the harness and the process decides them.

Three parts, hashed together:

* the commit's attention closure (:mod:`harness.subjects.source.closure`): the modules a load can
  reach, by content, so a docs-only commit or one touching models or the worker shares its
  parent's figures, and one touching the bucketer, a backend or an op does not;
* the harness itself (every file of the ``harness`` package, torch's, vLLM's and Python's
  versions): the stand-ins, the driver and the figure classes decide the figures as much as the
  commit does;
* the process's env beyond the overrides (which are in every entry's key): the variables a
  closure module names in a string literal, and every ``SPYRE_`` / ``VLLM_`` one (the harness's
  own ``SPYRE_BENCH_`` settings too: ``SPYRE_BENCH_VLLM`` picks what the commit imports) but
  those that only say where, how fast or which subject (:data:`NOT_DECIDING`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import platform
import sys
from pathlib import Path

from harness.config import ENV_VARS
from harness.subjects.source import closure

#: Env prefixes always counted (spyre-inference's, vLLM's and the harness's settings) ...
COUNTED_PREFIXES = ("SPYRE_", "VLLM_")
#: ... but for the harness's settings that decide nothing a driven step computes.
NOT_DECIDING = frozenset(f"SPYRE_BENCH_{n}" for n in (
    "JOBS", "MEMO", "MEMO_DIR", "MEMO_MB", "IN_PROCESS", "WORKER_MEMORY_GIB", "SUBJECT_TIMEOUT",
    "TIER", "SUBJECT", "REF", "ENV", "GITHUB_TOKEN", "UPDATE_GOLDEN", "SKIP_LOG",
    "REQUIRE_BROWSER", "JS_DIR", "ARTIFACTS", "DIR", "ASV_REPO", "REPOSITORY", "NIGHTLY", "PARENT"))

def source_key(tree) -> str:
    """The key of a :class:`~harness.subjects.load.loader.SourceTree` (cached per tree content and
    env, in this process)."""
    modules, literals = _reach(tree.digest(), tree)
    env = {k: v for k, v in os.environ.items()
           if k not in ENV_VARS and k not in NOT_DECIDING
           and (k.startswith(COUNTED_PREFIXES) or k in literals)}
    h = hashlib.sha256(harness_fingerprint().encode() + b"\0" + modules.encode())
    for name, value in sorted(env.items()):
        h.update(f"\0{name}={value}".encode())
    return h.hexdigest()


def _reach(full_digest: str, tree) -> tuple[str, frozenset[str]]:
    found = _REACHED.get(full_digest)
    if found is None:
        modules, literals = closure.reach(tree.files)
        found = _REACHED[full_digest] = (closure.digest(modules), literals)
    return found


#: full tree digest -> (closure digest, literals): a tree is parsed once per process.
_REACHED: dict[str, tuple[str, frozenset[str]]] = {}


@functools.cache
def harness_fingerprint() -> str:
    """Every file of the harness package (paths and bytes), torch's, vLLM's (where installed)
    and Python's versions (from the installed metadata: a fully memoised commit imports no torch)."""
    versions = []
    for package in ("torch", "vllm"):
        try:
            versions.append(importlib.metadata.version(package))
        except importlib.metadata.PackageNotFoundError:
            versions.append("none")
    torch_version, vllm = versions
    root = Path(__file__).resolve().parents[2]   # the harness package
    h = hashlib.sha256(f"{torch_version}\0{vllm}\0{sys.version}\0{platform.machine()}"
                       .encode())
    for folder, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(folder) / name
            try:
                body = path.read_bytes()
            except OSError:
                continue
            h.update(f"\0{path.relative_to(root).as_posix()}\0{len(body)}\0".encode() + body)
    return h.hexdigest()
