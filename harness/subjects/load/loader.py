"""Load spyre-inference modules from a source snapshot, without vLLM, and leave no trace.

spyre-inference's package root imports vLLM, but the bucketer needs only the standard library,
``vllm.config.VllmConfig`` (annotations), ``vllm.logger.init_logger`` and ``spyre_inference.envs``
(docs/spyre-inference.md, section 6). So a load runs inside an :func:`isolated` window:

* the four env overrides are set exactly as asked (and unset otherwise, so the caller's shell
  cannot leak in); every other change to ``os.environ`` is undone on exit;
* ``vllm``, ``vllm.config`` and ``vllm.logger`` are small stand-ins; any other ``vllm`` module
  fails to import, which is the honest answer for a by-path load. Where the real vLLM can be
  imported (``SPYRE_BENCH_VLLM``, :mod:`harness.subjects.load.vllm_real`) the commit imports it
  instead: it stays imported across windows, and what a load registers with it is undone;
* every ``spyre_inference...`` name is served from the snapshot by a meta-path finder: packages
  are bare (no ``__init__`` runs: the real root imports vLLM), modules run from their own source
  and are registered in ``sys.modules`` before they execute (dataclasses need that);
* ``backends/spyre_attn.py`` (vLLM throughout) is a stand-in that hands out the subject's own
  self-contained helpers (``_powers_of_two_up_to``) and, for names it cannot know (the flag
  resolvers generation-1 ``variants()`` imports), a resolver that answers False;
* on exit every ``vllm`` / ``spyre_inference`` entry goes from ``sys.modules`` and whatever they
  shadowed comes back, so two revisions loaded in one process never see each other.

Modules imported along the way that belong to neither namespace (standard library, torch) stay
imported, as after any import. Windows are serialised by a lock; they are not for threads that
import vLLM concurrently.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.abc
import importlib.machinery
import logging
import os
import sys
import threading
import traceback
import types
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from harness.config import ENV_VARS
from harness.ladders import powers_of_two
from harness.subjects.load import torch_spyre_standins, vllm_real
from harness.subjects.load.vllm_standins import close_modules, open_modules
from harness.subjects.load.vllm_standins import modules as vllm_standin_modules
from harness.subjects.source.extract import ModuleSource, NotSelfContained
from harness.subjects.source.knobs import ENVS_FILE, declared

PACKAGE = "spyre_inference"
#: The namespaces a window owns: removed from sys.modules on exit.
OWNED = (PACKAGE, "vllm")
BUCKETER_MODULE = "spyre_inference.v1.attention.spyre_attn_bucketer"
ENVS_MODULE = "spyre_inference.envs"
BACKEND_MODULE = "spyre_inference.v1.attention.backends.spyre_attn"
OPS_KERNEL_MODULE = "spyre_inference.v1.attention.ops.batched_decode"

_LOCK = threading.RLock()


def module_path(dotted: str) -> str:
    return dotted.replace(".", "/") + ".py"


BUCKETER_FILE = module_path(BUCKETER_MODULE)
BACKEND_FILE = module_path(BACKEND_MODULE)
OPS_KERNEL_FILE = module_path(OPS_KERNEL_MODULE)


class SourceTree:
    """A snapshot of a checkout's ``spyre_inference/**.py``: relative path -> source bytes.

    Taken once, when the subject is resolved: later edits to a checkout do not change a run.
    Code objects are compiled once and executed afresh by every load.
    """

    def __init__(self, files: Mapping[str, bytes], label: str, root: Path | None = None):
        self.files = dict(files)
        #: Where the files came from, for filenames in tracebacks and error messages.
        self.label = label
        #: The folder on disk when there is one (its files then carry their real paths).
        self.root = root
        #: Every folder holding a file, with its ancestors: the packages of the snapshot.
        self.dirs = {"/".join(p.split("/")[:i]) for p in self.files
                     for i in range(1, p.count("/") + 1)}
        self._code: dict[str, types.CodeType] = {}
        self._parsed: dict[str, ModuleSource] = {}
        self._digest: str | None = None

    def __getstate__(self) -> dict:
        """What crosses to a subject worker: the files, not the compiled or parsed caches."""
        return {**self.__dict__, "_code": {}, "_parsed": {}}

    @classmethod
    def from_dir(cls, root: Path) -> SourceTree:
        files = {}
        for folder, subdirs, names in os.walk(root / PACKAGE):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    path = Path(folder) / name
                    files[path.relative_to(root).as_posix()] = path.read_bytes()
        return cls(files, str(root), root)

    def has(self, rel: str) -> bool:
        return rel in self.files

    def filename(self, rel: str) -> str:
        return str(self.root / rel) if self.root else f"{self.label}/{rel}"

    def code(self, rel: str) -> types.CodeType:
        if rel not in self._code:
            self._code[rel] = compile(self.files[rel], self.filename(rel), "exec",
                                      dont_inherit=True)
        return self._code[rel]

    def parsed(self, rel: str) -> ModuleSource | None:
        """The file parsed (not run), for extraction and static probes; None if absent."""
        if rel not in self.files:
            return None
        if rel not in self._parsed:
            self._parsed[rel] = ModuleSource(self.files[rel], self.filename(rel))
        return self._parsed[rel]

    def digest(self) -> str:
        """The content of the snapshot (paths and bytes): what every figure depends on."""
        if self._digest is None:
            h = hashlib.sha256()
            for rel in sorted(self.files):
                h.update(rel.encode() + b"\0" + self.files[rel] + b"\0")
            self._digest = h.hexdigest()
        return self._digest

    def line(self, filename: str, lineno: int | None) -> str:
        """A source line of one of the tree's files, for error messages."""
        for rel in self.files:
            if self.filename(rel) == filename and lineno:
                lines = self.files[rel].decode(errors="replace").splitlines()
                return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
        return ""


# -- the finder: spyre_inference.* from the snapshot -----------------------------------------------

class _BarePackage(importlib.abc.Loader):
    """A package whose ``__init__`` does not run (the real root imports vLLM)."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        pass


class _SnapshotModule(importlib.abc.Loader):
    def __init__(self, tree: SourceTree, rel: str):
        self.tree, self.rel = tree, rel

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__file__ = self.tree.filename(self.rel)
        exec(self.tree.code(self.rel), module.__dict__)


class SnapshotFinder(importlib.abc.MetaPathFinder):
    def __init__(self, tree: SourceTree):
        self.tree = tree

    def find_spec(self, fullname, path=None, target=None):
        if fullname != PACKAGE and not fullname.startswith(PACKAGE + "."):
            return None
        rel = fullname.replace(".", "/")
        if rel in self.tree.dirs:
            spec = importlib.machinery.ModuleSpec(fullname, _BarePackage(), is_package=True)
            spec.submodule_search_locations = []
            return spec
        if self.tree.has(rel + ".py"):
            return importlib.machinery.ModuleSpec(
                fullname, _SnapshotModule(self.tree, rel + ".py"),
                origin=self.tree.filename(rel + ".py"))
        return None


# -- stand-ins ------------------------------------------------------------------------------------

class CaptureHandler(logging.Handler):
    """Keeps what the subject logged at WARNING and above (its notes on a config)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


class StandIns(dict):
    """Modules a window puts in ``sys.modules`` by name; ``real`` is the window's isolation of
    the real vLLM when the subject imports that instead of stand-ins (None otherwise)."""

    real: vllm_real.RealWindow | None = None


def vllm_standins(handler: logging.Handler) -> StandIns:
    """The vLLM stand-ins (:mod:`harness.subjects.load.vllm_standins`): ``vllm.config``,
    ``vllm.logger`` (what the bucketer needs) and the names the attention path imports, or none
    where the real vLLM is used (:func:`harness.subjects.load.vllm_real.choice`); and, where
    torch-spyre is not installed, the few ``torch_spyre`` names its kernels use
    (:mod:`harness.subjects.load.torch_spyre_standins`). Call it outside any window."""
    table = StandIns()
    if vllm_real.choice().real:
        table.real = vllm_real.RealWindow(handler)
    else:
        table.update(vllm_standin_modules(handler))
    if torch_spyre_standins.needed():
        table.update(torch_spyre_standins.modules())
    return table


def harmless_resolver(*args, **kwargs) -> bool:
    """Stand-in for a flag resolver of ``backends/spyre_attn.py`` that needs vLLM: never set."""
    return False


def backend_standin(tree: SourceTree) -> types.ModuleType:
    """``backends/spyre_attn.py`` as generation-1 bucketers see it, without importing vLLM.

    A name is served, in order: the subject's own definition when it is self-contained (standard
    library only; compiled from the snapshot, executed fresh for this window); a correct
    powers-of-two helper for ``_powers_of_two*`` names the file lacks or cannot give; otherwise
    :func:`harmless_resolver`. Dunder names raise AttributeError, as the import system expects.
    """
    mod = types.ModuleType(BACKEND_MODULE)
    mod.__file__ = tree.filename(BACKEND_FILE)
    try:
        parsed = tree.parsed(BACKEND_FILE)
    except SyntaxError:
        parsed = None  # nothing can be taken from it: the fallbacks below answer

    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        value = None
        if parsed is not None and name in parsed.bindings:
            try:
                namespace = {"__name__": BACKEND_MODULE, "__builtins__": __builtins__}
                exec(parsed.compile([name]), namespace)
                value = namespace[name]
            except NotSelfContained:
                value = None
        if value is None:
            value = _powers_of_two_up_to if "powers_of_two" in name else harmless_resolver
        setattr(mod, name, value)
        return value

    mod.__getattr__ = __getattr__
    return mod


def _powers_of_two_up_to(n: int, start: int = 1) -> tuple[int, ...]:
    """P(n, start), for checkouts whose helper cannot be extracted."""
    return powers_of_two(n, start)


# -- the window ---------------------------------------------------------------------------------

def _owned(name: str, vllm: bool = True) -> bool:
    """Whether a window removes ``name`` on entry and exit; ``vllm`` False where the window's
    commit imports the real vLLM (imported once, kept)."""
    top = name.partition(".")[0]
    if top in OWNED and (vllm or top != "vllm"):
        return True
    # torch_spyre only where it is the harness's stand-in (a real one stays imported)
    return name.startswith("torch_spyre") and hasattr(sys.modules.get(name),
                                                      torch_spyre_standins.MARK)


@contextmanager
def isolated(env: Mapping[str, str], tree: SourceTree | None = None,
             standins: Mapping[str, types.ModuleType] | None = None) -> Iterator[list]:
    """Run a load with exactly ``env`` for the override variables and the snapshot's modules;
    restore ``sys.modules``, ``os.environ`` and ``sys.meta_path`` afterwards, whatever happens.

    Without ``tree`` (the installed full stack) nothing is shadowed: only the env is managed.
    With ``standins`` whose ``real`` is set, ``vllm`` is the real one (left imported) and that
    window isolates what the load does to it. Yields the list of Python warnings raised inside.
    """
    real = getattr(standins, "real", None)
    vllm = real is None
    with _LOCK, contextlib.ExitStack() as stack:
        saved_modules = dict(sys.modules)
        saved_env = dict(os.environ)
        saved_meta_path = list(sys.meta_path)
        try:
            for name in ENV_VARS + (declared_names(tree.files.get(ENVS_FILE))
                                    if tree is not None else ()):
                os.environ.pop(name, None)
            os.environ.update(env)
            if tree is not None:
                for name in [n for n in sys.modules if _owned(n, vllm)]:
                    del sys.modules[name]
                sys.modules.update(standins or {})
                open_modules(standins or {})
                sys.meta_path.insert(0, SnapshotFinder(tree))
                if real is not None:
                    stack.enter_context(real)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                yield caught
        finally:
            stack.close()
            sys.meta_path[:] = saved_meta_path
            if tree is not None:
                restore_modules(saved_modules, vllm)
                close_modules(standins or {})
            _restore_env(saved_env)


@functools.lru_cache(maxsize=16)
def declared_names(envs_source: bytes | None) -> tuple[str, ...]:
    """The variables an ``envs.py`` registry declares (cleared in a window, so the caller's shell
    never decides a default the commit would read)."""
    found = declared({ENVS_FILE: envs_source}) if envs_source is not None else None
    return tuple(found or ())


def restore_modules(saved: dict, vllm: bool = True) -> None:
    for name in list(sys.modules):
        if name not in saved and _owned(name, vllm):
            del sys.modules[name]
    for name, module in saved.items():
        if sys.modules.get(name) is not module:
            sys.modules[name] = module


def _restore_env(saved: dict) -> None:
    for name in set(os.environ) | set(saved):
        if name not in saved:
            del os.environ[name]
        elif os.environ.get(name) != saved[name]:
            os.environ[name] = saved[name]


def load_failure(exc: BaseException, tree: SourceTree) -> str:
    """Why a module of the commit failed to load, naming whose the missing piece is: a
    ``spyre_inference`` module its tree lacks is the commit's own gap; a name the vLLM its loads
    see (stand-ins or real) or torch-spyre's stand-ins lack is the harness's."""
    said = f"{type(exc).__name__}: {exc}{where(exc, tree)}"
    missing = exc.name if isinstance(exc, ImportError) else None
    if missing and missing.split(".")[0] == PACKAGE:
        what = missing if isinstance(exc, ModuleNotFoundError) else f"a name from {missing}"
        return f"imports {what}, which is not in this commit's tree ({said})"
    if isinstance(exc, ImportError):
        chosen = vllm_real.choice()
        vllm = f"the real vLLM {chosen.version}" if chosen.real else "spyre-bench's vLLM stand-ins"
        return f"cannot be loaded with {vllm}: {said}"
    return f"raised while importing: {said}"


def where(exc: BaseException, tree: SourceTree) -> str:
    """`` (file:line: source)`` of the deepest frame in the subject's own files, or ""."""
    ours = {tree.filename(rel): rel for rel in tree.files}
    if isinstance(exc, SyntaxError) and exc.filename in ours:
        return f" ({ours[exc.filename]}:{exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in ours]
    if not frames:
        return ""
    f = frames[-1]
    return f" ({ours[f.filename]}:{f.lineno}: {tree.line(f.filename, f.lineno)})"
