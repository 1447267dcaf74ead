"""Compiled graphs, counted exactly: a workload through ``torch.compile(kernel, dynamic=False)``.

What serving does, in order: record the subject's warmup variants (the model's ``warmup_keys``),
then run every step of the workload, dispatched on the subject's bucketing by the model. Each
kernel is compiled through its own counting backend, so graphs are counted per kernel and per
phase; graphs compiled after warmup are "late compiles". Dynamo's cache belongs to the code
object, so it is reset (with the counters) before every session.

Past ``recompile_limit`` graphs per code object (8 by default) Dynamo silently runs the function
eagerly. Here every call knows its compile key: a key seen for the first time that compiles no
graph is a fall-back, reported as such (and cross-checked with Dynamo's own "recompile limit
exceeded" counter). A variant's compile time is Dynamo's own timer of its frame compile (tracing,
guards, backend) for the cheap backends; for a real one, with a cold compile cache (a fresh
TORCHINDUCTOR_CACHE_DIR), the first call of each key less a second call of it (the backend's
one-time start-up is paid beforehand on a trivial graph, so it is charged to no variant).

Counting is what costs, so it is done once where once gives the same figures: warmup variants
are compiled shape-only (:class:`_CountingBackend`: compiled, their outputs not computed); a key
computes once, checked against the oracle (the harness calls a key with the same shapes and
arguments every time, so Dynamo's guards pass and a later call compiles nothing); and the
workloads of one case share one session (:class:`GraphSession`), its warmup compiled once,
wherever that cannot change a figure.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
import types
from dataclasses import dataclass, field

import torch
import torch._dynamo
from torch._dynamo.utils import counters

from harness.config import EngineConfig
from harness.errors import HarnessError
from harness.generations import Generation
from harness.measure.device import Device
from harness.measure.inputs import BatchedCall, Workspace, check_generation
from harness.measure.oracle import check_call
from harness.model.cost import workload_cost
from harness.model.dispatch import CompileKey
from harness.subjects.base import Bucketing
from harness.subjects.reference.kernels import attend_sequence
from harness.workloads import Workload

#: Backends cheap enough for counting in CI; anything else is the real compiler.
CHEAP_BACKENDS = ("eager", "aot_eager")
_LIMIT_EXCEEDED = "Dynamo recompile limit exceeded"


@dataclass
class GraphCount:
    """Graphs compiled for one workload, next to what the exact model predicts."""

    backend: str
    recompile_limit: int
    recorded_warmup: bool
    #: Distinct keys the model predicts the workload reaches, and those warmup does not record.
    model_keys: tuple[CompileKey, ...]
    model_late: tuple[CompileKey, ...]
    warmup_keys: tuple[CompileKey, ...]
    graphs_warmup: int = 0
    graphs_workload: int = 0
    graphs_by_kernel: dict[str, int] = field(default_factory=dict)
    #: Dynamo's own tally (counters["stats"]["unique_graphs"]), a cross-check.
    unique_graphs: int = 0
    #: Keys that compiled during the workload phase (measured late compiles).
    late_keys: list[CompileKey] = field(default_factory=list)
    #: Keys called for the first time that compiled no graph past the recompile limit: eager.
    fallbacks: list[CompileKey] = field(default_factory=list)
    #: Keys called for the first time that compiled no graph below the limit: Dynamo skipped
    #: the kernel (disabled, or nothing to trace) or an earlier graph served a new key.
    uncompiled: list[CompileKey] = field(default_factory=list)
    #: Dynamo counted "recompile limit exceeded" at least once.
    limit_hit: bool = False
    compile_seconds: dict[CompileKey, float] = field(default_factory=dict)
    checked_calls: int = 0
    max_abs_error: float = 0.0
    inductor_cache: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    #: The subject's own Dynamo settings the run applied (its platform module's).
    compile_settings: dict = field(default_factory=dict)

    @property
    def graphs(self) -> int:
        return self.graphs_warmup + self.graphs_workload

    @property
    def expected_graphs(self) -> int:
        """What the model says: one graph per distinct key, warmup's included when recorded."""
        keys = set(self.model_keys) | (set(self.warmup_keys) if self.recorded_warmup else set())
        return len(keys)

    @property
    def expected_late(self) -> int:
        return len(self.model_late) if self.recorded_warmup else len(self.model_keys)

    @property
    def verdict(self) -> str:
        """"yes" when the measured graphs are the model's, else why not."""
        why = []
        if self.fallbacks:
            why.append(f"{len(self.fallbacks)} fall-backs")
        if self.uncompiled:
            why.append(f"{len(self.uncompiled)} keys compiled no graph")
        if self.graphs != self.expected_graphs:
            why.append(f"{self.graphs} graphs for {self.expected_graphs} keys")
        elif self.graphs_workload != self.expected_late:
            why.append(f"{self.graphs_workload} late for {self.expected_late}")
        return "NO: " + ", ".join(why) if why else "yes"

    @property
    def matches_model(self) -> bool:
        return (self.graphs == self.expected_graphs and self.graphs_workload == self.expected_late
                and not self.fallbacks and not self.uncompiled)

    def as_dict(self) -> dict:
        secs = list(self.compile_seconds.values())
        return {
            "backend": self.backend, "recompile_limit": self.recompile_limit,
            "compile_settings": {k: repr(v) for k, v in self.compile_settings.items()},
            "recorded_warmup": self.recorded_warmup, "steps": self.steps,
            "graphs": self.graphs, "graphs_warmup": self.graphs_warmup,
            "graphs_workload": self.graphs_workload, "graphs_by_kernel": self.graphs_by_kernel,
            "unique_graphs": self.unique_graphs, "expected_graphs": self.expected_graphs,
            "model_keys": len(self.model_keys), "model_late": len(self.model_late),
            "warmup_variants": len(self.warmup_keys),
            "late_compiles": self.graphs_workload, "expected_late": self.expected_late,
            "late_compile_keys": [str(k) for k in self.late_keys],
            "fallbacks": len(self.fallbacks), "fallback_keys": [str(k) for k in self.fallbacks],
            "uncompiled_keys": [str(k) for k in self.uncompiled],
            "recompile_limit_hit": self.limit_hit, "matches_model": self.matches_model,
            "verdict": self.verdict,
            "compile_seconds": {str(k): v for k, v in self.compile_seconds.items()},
            "compile_seconds_total": sum(secs),
            "compile_seconds_mean": sum(secs) / len(secs) if secs else None,
            "compile_seconds_max": max(secs) if secs else None,
            "checked_calls": self.checked_calls, "max_abs_error": self.max_abs_error,
            "inductor_cache": self.inductor_cache,
        }


class BackendError(HarnessError):
    """A torch.compile backend name this torch does not know."""


def check_backend(name: str) -> None:
    """Fail early, in one line, on a backend name torch.compile would reject mid-run."""
    from torch._dynamo.backends.registry import list_backends, lookup_backend
    try:
        lookup_backend(name)
    except Exception:  # noqa: BLE001 - torch raises several kinds here
        known = sorted(set(list_backends(exclude_tags=())) | set(CHEAP_BACKENDS))
        raise BackendError(f"--backend {name!r}: not a torch.compile backend here; known: "
                           f"{', '.join(known)}") from None


@contextlib.contextmanager
def _quiet_recompile_warnings():
    """Dynamo logs the limit hit as a warning; the count reports it, so keep stderr clean."""
    logger = logging.getLogger("torch._dynamo.convert_frame")
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextlib.contextmanager
def cold_compile_cache():
    """A fresh, empty TORCHINDUCTOR_CACHE_DIR (and cleared in-memory caches) for the block."""
    with tempfile.TemporaryDirectory(prefix="spyre-bench-inductor-") as tmp:
        try:
            from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir
        except ImportError:  # pragma: no cover - older torch
            import os
            from unittest import mock
            with mock.patch.dict(os.environ, {"TORCHINDUCTOR_CACHE_DIR": tmp}):
                yield tmp
            return
        with temporary_cache_dir(tmp):
            yield tmp


_PRIMED: set[str] = set()


def prime_backend(backend: str, device=None) -> None:
    """Compile one trivial graph with ``backend`` (own throwaway cache), once per process.

    The first compile in a process pays the backend's one-time start-up (inductor: ~10 s of
    imports and toolchain probing on a CPU); without this it would be charged to whichever
    variant happens to compile first.
    """
    if backend in _PRIMED or backend in CHEAP_BACKENDS:
        return
    with cold_compile_cache():
        fn = torch.compile(lambda x: torch.tanh(x) * 2 + 1, backend=backend, dynamic=False)
        fn(torch.ones(8, device=device))
    torch._dynamo.reset()
    _PRIMED.add(backend)


def _limit_hits() -> int:
    return sum(n for reason, n in counters["unimplemented"].items()
               if str(reason).startswith(_LIMIT_EXCEEDED))


def _graph_breaks() -> int:
    return sum(counters["graph_break"].values())


def _unique_graphs() -> int:
    return int(counters["stats"]["unique_graphs"])


def _dynamo_compile_s() -> float:
    """Seconds Dynamo has spent compiling frames (tracing, guards, backend) since its reset."""
    from torch._dynamo.utils import compilation_time_metrics

    return sum(compilation_time_metrics.get("_compile.compile_inner", ()))


def _output_shapes(gm) -> list | None:
    """(size, stride, dtype, device) of each output of a Dynamo graph, or None when one is not a
    tensor Dynamo knows the shape of."""
    out = next((n for n in gm.graph.nodes if n.op == "output"), None)
    values = out.args[0] if out is not None else None
    if not isinstance(values, (list, tuple)):
        return None
    shapes = []
    for v in values:
        meta = v.meta.get("example_value") if isinstance(v, torch.fx.Node) else None
        if not isinstance(meta, torch.Tensor):
            return None
        shapes.append((tuple(meta.size()), tuple(meta.stride()), meta.dtype, meta.device))
    return shapes


class _CountingBackend:
    """The backend a kernel is compiled through: counts the frames it compiles, and skips the
    compute of a whole-kernel graph while ``shape_only`` is set.

    A graph is whole-kernel when it is the only frame its call compiled and no graph break came
    before it: its outputs are the kernel's return value, so empty tensors of its output shapes
    change nothing Dynamo does next (no frame traces them). Warmup variants are compiled this way
    (their dummy-data outputs were never more than a compile trigger); any other graph runs.
    """

    def __init__(self, backend: str):
        from torch._dynamo.backends.registry import lookup_backend

        self.compile = lookup_backend(backend)
        self.frame_count = 0
        self.shape_only = False
        #: Calls whose compute was skipped (a call that skipped none computed its output).
        self.skipped = 0
        self._call_frames = 0
        self._call_breaks = 0

    def begin_call(self) -> None:
        self._call_frames, self._call_breaks = self.frame_count, _graph_breaks()

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        compiled = self.compile(gm, example_inputs)
        whole = (self.frame_count == self._call_frames + 1
                 and _graph_breaks() == self._call_breaks)
        shapes = _output_shapes(gm) if whole else None
        kind = type(next(n for n in gm.graph.nodes if n.op == "output").args[0])

        def run(*args):
            if self.shape_only and shapes is not None:
                self.skipped += 1
                return kind(torch.empty_strided(size, stride, dtype=dtype, device=device)
                            for size, stride, dtype, device in shapes)
            return compiled(*args)
        return run


class _Counted:
    """One kernel compiled through its own counting backend."""

    def __init__(self, fn, backend: str):
        self.fn = fn
        self.counter = _CountingBackend(backend)
        self.compiled = torch.compile(fn, backend=self.counter, dynamic=False)
        #: Dynamo gave up on this kernel's code object: later new keys run eagerly.
        self.fell_back = False

    def entries(self) -> int | None:
        """Graphs Dynamo holds for the kernel's code object (None: not a plain function)."""
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        code = getattr(self.fn, "__code__", None)
        return None if code is None else len(_debug_get_cache_entry_list(code))


@dataclass(frozen=True)
class _Outcome:
    """What a key's first call did in a session."""

    kernel: str
    frames: int
    #: Dynamo's own tally for the call (counters["stats"]["unique_graphs"]).
    unique: int
    fell_back: bool
    uncompiled: bool
    limit_hit: bool
    compile_s: float | None


class GraphSession:
    """One Dynamo session for a case: its warmup variants compiled once, then each workload's
    steps, every key's first call remembered.

    The first workload counted in a session is exactly the single run the module docstring
    describes. A later one reuses what the session has (warmup graphs, keys an earlier workload
    compiled) only while that gives the same figures as a run of its own: every key so far
    compiled exactly one graph, with no graph break and no key compiling none, and no kernel
    fell back after warmup unless warmup already filled it (then every new key falls back in
    either run). Otherwise :meth:`count` returns None and the caller starts a fresh session.
    """

    def __init__(self, kernel, generation: Generation, bucketing: Bucketing,
                 config: EngineConfig, workspace: Workspace, *, device: Device | None = None,
                 backend: str = "eager", recompile_limit: int | None = None,
                 record_warmup: bool = True, check: bool = True, seed: int = 0,
                 sequence_kernel=attend_sequence, settings: dict | None = None,
                 shape_only: tuple[str, ...] = ("warmup",), isolated: bool = False):
        """``isolated``: the kernels are code copies (:func:`code_copy`) whose Dynamo caches
        start empty, so Dynamo is not reset (another session's graphs stay)."""
        check_generation(generation, bucketing)
        self.bucketing, self.config, self.ws = bucketing, config, workspace
        self.device, self.backend, self.record_warmup = device, backend, record_warmup
        self.check, self.seed = check, seed
        self.settings = dict(settings or {})
        with torch._dynamo.config.patch(**self.settings):
            subject_limit = torch._dynamo.config.recompile_limit
        self.limit = recompile_limit if recompile_limit is not None else subject_limit
        #: The phases ("warmup", "workload") whose calls compile shape-only (cheap backends).
        self.shape_only = tuple(shape_only) if backend in CHEAP_BACKENDS else ()
        self.outcomes: dict[CompileKey, _Outcome] = {}
        #: Key -> max abs error of its checked call (its first call that computed an output).
        self.checked: dict[CompileKey, float] = {}
        self.warmup_keys: list[CompileKey] = []
        #: Warmup keys whose warmup call computed its output (fall-backs): checked there.
        self.warmup_checked: set[CompileKey] = set()
        self.full_at_warmup: set[str] = set()
        self.clean = True
        self.workloads = 0
        prime_backend(backend, workspace.device)
        if not isolated:
            torch._dynamo.reset()
            counters.clear()
        self.kernels = {"batched": _Counted(kernel, backend),
                        "attn": _Counted(sequence_kernel, backend)}
        if record_warmup:
            with self._context():
                for c in workspace.warmup(bucketing):
                    self.warmup_keys.append(c.key)
                    self._call(c, "warmup")
            self.warmup_checked = set(self.checked)

    @contextlib.contextmanager
    def _context(self):
        with _quiet_recompile_warnings(), torch._dynamo.config.patch(**self.settings), \
                torch._dynamo.config.patch(recompile_limit=self.limit):
            yield

    def intact(self) -> bool:
        """Dynamo still holds exactly the graphs this session compiled (no reset since)."""
        return all(k.entries() == k.counter.frame_count for k in self.kernels.values())

    def _sync(self) -> None:
        if self.device:
            self.device.synchronize()

    def _check(self, c, out) -> None:
        if self.check and c.key not in self.checked:
            self.checked[c.key] = check_call(c, out).max_abs_error

    def _call(self, c, phase: str) -> None:
        name = "batched" if isinstance(c, BatchedCall) else "attn"
        k = self.kernels[name]
        if c.key in self.outcomes:
            if self.check and c.key not in self.checked and phase not in self.shape_only:
                self._check(c, c.run(k.compiled))   # a shape-only warmup key's first real run
            return
        counter = k.counter
        counter.shape_only = phase in self.shape_only
        before, hits, unique, breaks = (counter.frame_count, _limit_hits(), _unique_graphs(),
                                        _graph_breaks())
        skipped, compiling = counter.skipped, _dynamo_compile_s()
        counter.begin_call()
        t0 = time.perf_counter()
        out, declined = self._run(c, k, counter.shape_only)
        self._sync()
        first = time.perf_counter() - t0
        new = counter.frame_count - before
        hit = _limit_hits() > hits
        k.fell_back = k.fell_back or hit
        computed = counter.skipped == skipped and not declined
        compile_s = None
        if new and self.backend in CHEAP_BACKENDS and _dynamo_compile_s() > compiling:
            compile_s = _dynamo_compile_s() - compiling   # Dynamo's own timer: no second call
        elif new:
            t0 = time.perf_counter()
            counter.begin_call()
            c.run(k.compiled)
            self._sync()
            compile_s = max(0.0, first - (time.perf_counter() - t0))
        counter.shape_only = False
        o = _Outcome(name, new, _unique_graphs() - unique, new == 0 and k.fell_back,
                     new == 0 and not k.fell_back, hit, compile_s)
        self.outcomes[c.key] = o
        if new > 1 or o.uncompiled or _graph_breaks() != breaks:
            self.clean = False
        if o.fell_back:
            if phase == "warmup":
                self.full_at_warmup.add(name)
            elif name not in self.full_at_warmup:
                self.clean = False
        if computed:
            self._check(c, out)

    def fits(self, workload: Workload) -> bool:
        """The workload's new keys fit under every kernel's limit here (or the kernel fell back
        at warmup already): counting it here cannot hit the limit where its own run would not.
        Only chooses where to count (the model's keys): what is counted is always measured."""
        model = workload_cost(self.bucketing, self.config, workload)
        new: dict[str, int] = {}
        for key in set(model.keys) - set(self.outcomes):
            name = "attn" if key.kernel == "attn" else "batched"
            new[name] = new.get(name, 0) + 1
        return all(name in self.full_at_warmup
                   or self.kernels[name].counter.frame_count + n <= self.limit
                   for name, n in new.items())

    @staticmethod
    def _run(c, k: _Counted, shape_only: bool) -> tuple[object, bool]:
        """The call's output, and whether Dynamo declined it at the recompile limit.

        Shape-only, Dynamo is asked to raise at the limit instead of running the kernel eagerly
        (its fall-back): the same decision, taken before the kernel computes anything.
        """
        if not shape_only:
            return c.run(k.compiled), False
        from torch._dynamo.exc import FailOnRecompileLimitHit

        try:
            with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
                return c.run(k.compiled), False
        except FailOnRecompileLimitHit:
            return None, True

    def count(self, workload: Workload) -> GraphCount | None:
        """The workload's figures, or None where this session cannot give them exactly."""
        if self.workloads and not (self.clean and self.intact()):
            return None
        order: dict[CompileKey, None] = {}
        with self._context():
            for i, step in enumerate(workload.steps):
                for c in self.ws.step(self.bucketing, step, seed=self.seed + i).calls:
                    order.setdefault(c.key)
                    self._call(c, "workload")
        self.workloads += 1
        if self.workloads > 1 and not self.clean:
            return None
        return self._figures(workload, list(order))

    def _figures(self, workload: Workload, reached: list[CompileKey]) -> GraphCount:
        model = workload_cost(self.bucketing, self.config, workload)
        r = GraphCount(self.backend, self.limit, self.record_warmup, model.keys,
                       model.late_compiles, tuple(sorted(model.warmup)),
                       steps=len(workload.steps), compile_settings=self.settings,
                       graphs_by_kernel={name: 0 for name in self.kernels})
        warm = set(self.warmup_keys)
        for key in self.warmup_keys + [k for k in reached if k not in warm]:
            o = self.outcomes[key]
            if key in warm:
                r.graphs_warmup += o.frames
            else:
                r.graphs_workload += o.frames
                if o.frames:
                    r.late_keys.append(key)
            r.graphs_by_kernel[o.kernel] += o.frames
            r.unique_graphs += o.unique
            if o.fell_back:
                r.fallbacks.append(key)
            elif o.uncompiled:
                r.uncompiled.append(key)
            r.limit_hit = r.limit_hit or o.limit_hit
            if o.compile_s is not None:
                r.compile_seconds[key] = o.compile_s
            if key in self.checked and (key not in warm or key in reached
                                        or key in self.warmup_checked):
                r.checked_calls += 1
                r.max_abs_error = max(r.max_abs_error, self.checked[key])
        r.inductor_cache = {k: int(v) for k, v in counters["inductor"].items() if "cache" in k}
        return r


def count_graphs(kernel, generation: Generation, bucketing: Bucketing, config: EngineConfig,
                 workload: Workload, *, device: Device | None = None, backend: str = "eager",
                 recompile_limit: int | None = None, record_warmup: bool = True,
                 check: bool = True, seed: int = 0, sequence_kernel=attend_sequence,
                 workspace: Workspace | None = None, settings: dict | None = None,
                 shape_only: tuple[str, ...] = ("warmup",)) -> GraphCount:
    """Run ``workload`` through compiled kernels and count the graphs, exactly: a session of
    its own (see :class:`GraphSession`).

    ``settings``: the subject's own ``torch._dynamo.config`` values (its platform module's),
    applied for the run; fall-backs are judged against the limit they give (unless
    ``recompile_limit`` overrides it).
    """
    dev = device.torch_device if device else torch.device("cpu")
    ws = workspace or Workspace.for_steps(config, workload.steps, dev, seed)
    cache = cold_compile_cache() if backend not in CHEAP_BACKENDS else contextlib.nullcontext()
    with cache:
        session = GraphSession(kernel, generation, bucketing, config, ws, device=device,
                               backend=backend, recompile_limit=recompile_limit,
                               record_warmup=record_warmup, check=check, seed=seed,
                               sequence_kernel=sequence_kernel, settings=settings,
                               shape_only=shape_only)
        result = session.count(workload)
    torch._dynamo.reset()
    return result


def code_copy(fn):
    """``fn`` on a code object of its own (None where ``fn`` is no plain function): Dynamo's
    cache and recompile limit belong to the code object, so a copy starts with none."""
    if not isinstance(fn, types.FunctionType):
        return None
    copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


#: The last case's session (one at a time: a session holds its workspace and Dynamo's graphs).
_SESSION: dict = {}


def case_workspace(config: EngineConfig, workload: Workload, device, seed: int,
                   soft_cap: float, max_cache_bytes: int) -> Workspace:
    """A workspace every workload of the case fits (each sequence up to max_model_len), or the
    workload's own where that one would pass the cache limit."""
    from harness.ladders import ceil_div

    pages = 1 + config.max_num_seqs * ceil_div(config.max_model_len, config.block_size)
    per_page = 2 * config.block_size * config.num_kv_heads * config.head_size * config.dtype_bytes
    if pages * per_page <= max_cache_bytes:
        return Workspace(config, pages, device, seed, soft_cap, max_cache_bytes)
    return Workspace.for_steps(config, workload.steps, device, seed, soft_cap, max_cache_bytes)


def case_graphs(kernel, generation: Generation, bucketing: Bucketing, config: EngineConfig,
                workload: Workload, *, device: Device, backend: str = "eager",
                recompile_limit: int | None = None, record_warmup: bool = True, seed: int = 0,
                soft_cap: float = 0.0, max_cache_bytes: int, settings: dict | None = None,
                shape_only: tuple[str, ...] = ("warmup",)) -> GraphCount:
    """count_graphs for one workload of a case, in the case's session when the workload before
    it was of the same case and kernel (its warmup variants are then compiled once per case);
    a fresh session wherever sharing could change a figure. Real backends always run alone
    (each in its own cold compile cache)."""
    if backend not in CHEAP_BACKENDS:
        return count_graphs(kernel, generation, bucketing, config, workload, device=device,
                            backend=backend, recompile_limit=recompile_limit,
                            record_warmup=record_warmup, seed=seed, settings=settings,
                            shape_only=shape_only,
                            workspace=Workspace.for_steps(config, workload.steps,
                                                          device.torch_device, seed, soft_cap,
                                                          max_cache_bytes))
    key = (kernel, generation, bucketing, config, str(device.torch_device), backend,
           recompile_limit, record_warmup, seed, soft_cap, shape_only,
           repr(sorted((settings or {}).items())))
    from harness.ladders import ceil_div

    need = 1 + max((sum(ceil_div(s.seq_len, config.block_size) for s in step)
                    for step in workload.steps), default=1)
    session = _SESSION.get(key)
    copies = code_copy(kernel), code_copy(attend_sequence)
    if session is not None and session.ws.num_pages >= need and session.clean:
        if not session.fits(workload) and None not in copies:
            # counted alone, on code copies: the case session stays as it is, for the next
            alone = GraphSession(
                copies[0], generation, bucketing, config,
                Workspace.for_steps(config, workload.steps, device.torch_device, seed, soft_cap,
                                    max_cache_bytes),
                device=device, backend=backend, recompile_limit=recompile_limit,
                record_warmup=record_warmup, seed=seed, sequence_kernel=copies[1],
                settings=settings, shape_only=shape_only, isolated=True)
            return alone.count(workload)
        result = session.count(workload)
        if result is not None:
            return result
    _SESSION.clear()
    torch._dynamo.reset()
    ws = case_workspace(config, workload, device.torch_device, seed, soft_cap, max_cache_bytes)
    session = GraphSession(kernel, generation, bucketing, config, ws, device=device,
                           backend=backend, recompile_limit=recompile_limit,
                           record_warmup=record_warmup, seed=seed, settings=settings,
                           shape_only=shape_only)
    result = session.count(workload)
    _SESSION[key] = session
    return result


def session_workloads() -> int:
    """Workloads the live case session has counted (0: none live)."""
    return sum(session.workloads for session in _SESSION.values())


def end_sessions() -> None:
    """Forget the case session (its workspace and graphs)."""
    _SESSION.clear()
    torch._dynamo.reset()
