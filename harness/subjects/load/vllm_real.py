"""The real vLLM for a subject's imports, where this process can import it.

``SPYRE_BENCH_VLLM`` picks what ``vllm.*`` a loaded commit sees: ``standins`` (the harness's own
:mod:`harness.subjects.load.vllm_standins`), ``real`` (the installed vLLM; an error when it cannot be
imported) or ``auto`` (the default: real when ``import vllm`` works in the subject's process,
else the stand-ins, saying why). The choice is made once per process, outside any load window.

The real vLLM is imported once and stays imported (it takes seconds): every module of the
attention path's surface (``vllm_surface.tsv``) is imported up front, so vLLM's own custom ops
land in its own library, never in a load's. Its platform is forced to CPU before anything reads
it (on a machine with neither a CPU build of vLLM nor a GPU it would otherwise resolve to
"unspecified"); its log lines go to stderr, never into a command's ``--json`` output.

What the stand-ins isolate per load, :class:`RealWindow` isolates for the real vLLM: custom ops a
commit registers go into a ``torch.library`` fragment of that load (destroyed when it closes),
backends it registers are forgotten, and its loggers are new ones that report to the load's
handler only, dropped afterwards (vLLM's ``warning_once`` remembers a logger, not a load; an
enclosing load's loggers and handler are set aside meanwhile and come back after).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import NamedTuple

from harness.errors import SubjectError

ENV = "SPYRE_BENCH_VLLM"
MODES = ("auto", "real", "standins")
#: The namespace whose loggers a load captures (every subject module's ``init_logger(__name__)``).
SUBJECT_LOGGERS = "spyre_inference"
SURFACE = Path(__file__).with_name("vllm_surface.tsv")
#: Where vLLM keeps the backends ``register_backend`` registers (module, dict names).
_REGISTRY = ("vllm.v1.attention.backends.registry", ("_ATTN_OVERRIDES", "_MAMBA_ATTN_OVERRIDES"))


class Choice(NamedTuple):
    """Which vLLM a process's loads see, and why."""

    real: bool
    version: str
    why: str

    def label(self) -> str:
        if self.real:
            return f"vLLM {self.version} (real)"
        return f"vLLM stand-ins (following {self.version}; {self.why})"


def requested() -> str:
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in MODES:
        raise SubjectError(f"{ENV}={value!r}: expected one of {', '.join(MODES)}")
    return value


_CHOSEN: dict[str, Choice] = {}


def choice() -> Choice:
    """The vLLM this process's loads see (decided on first call, per value of the env)."""
    mode = requested()
    found = _CHOSEN.get(mode)
    if found is None:
        found = _CHOSEN[mode] = _decide(mode)
    return found


def _decide(mode: str) -> Choice:
    from harness.subjects.load.vllm_standins import VLLM_VERSION

    if mode == "standins":
        return Choice(False, VLLM_VERSION, f"{ENV}=standins")
    try:
        version = load()
    except Exception as exc:
        if mode == "real":
            raise SubjectError(f"{ENV}=real, but vLLM cannot be imported here: "
                               f"{type(exc).__name__}: {exc}") from None
        return Choice(False, VLLM_VERSION, f"vllm not importable: {type(exc).__name__}: {exc}")
    return Choice(True, version, f"{ENV}={mode}")


def surface_modules() -> list[str]:
    """The ``vllm.*`` modules the attention path imports (vllm_surface.tsv), in file order."""
    found: dict[str, None] = {}
    for line in SURFACE.read_text().splitlines():
        if line.startswith("vllm"):
            found.setdefault(line.split("\t")[0], None)
    return list(found)


def load() -> str:
    """Import the real vLLM on the CPU platform, and every module of the surface; its version.

    Raises ImportError (or whatever vLLM's import raised) when it cannot be had."""
    standin = sys.modules.get("vllm")
    if standin is not None and hasattr(standin, "__spyre_bench_standin__"):
        raise ImportError("called inside a stand-in load window")
    with contextlib.redirect_stdout(sys.stderr):
        platforms = importlib.import_module("vllm.platforms")
        if platforms._current_platform is None:
            from vllm.platforms.cpu import CpuPlatform

            platforms._current_platform = CpuPlatform()
        for name in surface_modules():
            importlib.import_module(name)
    return str(getattr(sys.modules["vllm"], "__version__", "unknown"))


class RealWindow:
    """One load's isolation under the real vLLM (module docstring); a context manager."""

    def __init__(self, handler: logging.Handler):
        self.handler = handler

    def __enter__(self) -> RealWindow:
        import torch
        from torch.library import Library

        self._utils = sys.modules["vllm.utils.torch_utils"]
        self._lib_before = self._utils.vllm_lib
        self._ops_before = set(vars(torch.ops.vllm))
        self._utils.vllm_lib = Library("vllm", "FRAGMENT")
        registry = sys.modules[_REGISTRY[0]]
        self._registered = {n: dict(getattr(registry, n)) for n in _REGISTRY[1]
                            if isinstance(getattr(registry, n, None), dict)}
        log = logging.getLogger(SUBJECT_LOGGERS)
        self._log_state = (log.propagate, log.level, list(log.handlers))
        for handler in self._log_state[2]:
            log.removeHandler(handler)
        log.propagate = False
        log.setLevel(logging.DEBUG)
        log.addHandler(self.handler)
        self._loggers = _set_aside_loggers(SUBJECT_LOGGERS)
        return self

    def __exit__(self, *exc) -> None:
        import torch

        lib, self._utils.vllm_lib = self._utils.vllm_lib, self._lib_before
        lib._destroy()
        for name in set(vars(torch.ops.vllm)) - self._ops_before:
            vars(torch.ops.vllm).pop(name, None)
        registry = sys.modules[_REGISTRY[0]]
        for name, before in self._registered.items():
            table = getattr(registry, name)
            table.clear()
            table.update(before)
        _set_aside_loggers(SUBJECT_LOGGERS, restore=self._loggers)
        log = logging.getLogger(SUBJECT_LOGGERS)
        log.removeHandler(self.handler)
        log.propagate, level, handlers = self._log_state
        log.setLevel(level)
        for handler in handlers:
            log.addHandler(handler)


def _set_aside_loggers(prefix: str, restore: dict | None = None) -> dict:
    """Take the loggers below ``prefix`` out of logging's registry (the next ``getLogger`` of
    those names makes new ones) and return them; with ``restore``, put those back instead of the
    ones there now."""
    manager = logging.Logger.manager
    with _logging_lock():
        taken = {n: manager.loggerDict.pop(n) for n in list(manager.loggerDict)
                 if n.startswith(prefix + ".")}
        manager.loggerDict.update(restore or {})
    return taken


@contextlib.contextmanager
def _logging_lock():
    acquire = getattr(logging, "_acquireLock", None)
    release = getattr(logging, "_releaseLock", None)
    if acquire is None or release is None:
        with logging._lock:   # Python 3.13+
            yield
        return
    acquire()
    try:
        yield
    finally:
        release()
