"""Drive a spyre-inference commit's own metadata builder and attention impl, on CPU torch.

The backend module (``v1/attention/backends/spyre_attn.py``) is loaded from the snapshot with what
it imports from ``spyre_inference`` and stand-ins for vLLM only (:mod:`vllm_standins`). Per config
its ``SpyreAttentionMetadataBuilder`` and ``SpyreAttentionImpl`` are constructed; per step the
builder's ``build()`` gets metadata made from the step (scattered page ids) and the impl's
``forward()`` runs one layer. Two things are observed, never modelled:

* every host-to-device copy, by wrapping the subject's ``custom_ops.utils.convert`` (tensor,
  shape, dtype, bytes), named after the metadata field that holds the tensor;
* every kernel call, because ``torch.compile`` is intercepted while the module loads: each kernel
  the subject compiles becomes a :class:`KernelProxy` that records its bound arguments and either
  returns a placeholder (exact figures: nothing is computed) or runs the kernel (measurement).

From those come the path, B_s / B_b / blocks_per_chunk / num_chunks, loop iterations, padded
slots and compile keys of a step. What cannot be driven (a vLLM name no stand-in covers, a
constructor argument the harness does not know, a kernel whose loop count it cannot read) raises
:class:`NotDrivable` with exactly that; callers turn it into a skip, never into the model's answer.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
import zlib
from collections import Counter
from dataclasses import dataclass, field

from harness.config import MIN_BATCHED_SEQS, EngineConfig, Overrides
from harness.errors import CapabilityMissing, SubjectRaised
from harness.ladders import ceil_div
from harness.subjects.load.loader import (
    BACKEND_MODULE,
    CaptureHandler,
    SourceTree,
    isolated,
    module_path,
    vllm_standins,
    where,
)
from harness.subjects.load.vllm_standins import Attention, VllmConfig

BUILDER_CLASS = "SpyreAttentionMetadataBuilder"
IMPL_CLASS = "SpyreAttentionImpl"
BACKEND_CLASS = "SpyreAttentionBackend"
CONVERT_MODULE = "spyre_inference.custom_ops.utils"
#: The one attention layer a session drives (its name in the engine's forward context).
LAYER_NAME = "model.layers.0.self_attn.attn"


class NotDrivable(CapabilityMissing):
    """The subject's builder or impl cannot be driven: the figures it decides are skips."""


class KernelRaised(Exception):
    """A subject's kernel, really called, raised: a wrong kernel, not a skip."""

    def __init__(self, kernel: str, exc: BaseException):
        super().__init__(f"{kernel} raised {type(exc).__name__}: {exc}")
        self.kernel, self.exc = kernel, exc


# -- kernels: recorded, placeholder or run ------------------------------------------------------

@dataclass
class KernelCall:
    kernel: str
    args: dict

    @property
    def batched(self) -> bool:
        """A kernel over a batch of sequences (it takes their padded count), not one sequence's
        (a per-sequence decode kernel such as the head-major one is not batched)."""
        seqs = self.args.get("num_seqs")
        return "batched" in self.kernel or (isinstance(seqs, int) and not isinstance(seqs, bool))


class KernelProxy:
    """Stands where the subject's ``torch.compile(kernel, ...)`` result would be.

    ``mode``: "record" returns ``out`` when the call passes one, else read-only zeros shaped as
    the kernel's own result for those arguments (found once per argument shape on fake tensors:
    [B_s, H, D] for a batched decode of any batch size); "run" calls ``target`` (the kernel
    itself, or a harness-compiled version of it).
    """

    def __init__(self, fn, compile_kwargs: dict):
        self.fn = fn
        self.compile_kwargs = compile_kwargs
        self.signature = inspect.signature(fn)
        self.mode = "record"
        self.target = fn
        self.calls: list[KernelCall] = []
        #: what the kernel returns per _shape_key of its arguments (recorded calls' placeholders)
        self._results: dict[tuple, object] = {}
        #: the kernel needs its int32 indices widened to run eagerly here (found on first refusal)
        self._widen = False
        params = self.signature.parameters.values()
        plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
        #: (positional names, defaults, every name) when the kernel takes only named parameters,
        #: so a call binds with dicts (a recorded step makes hundreds); else None: inspect binds
        self._simple = (tuple(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD),
                        {p.name: p.default for p in params if p.default is not p.empty},
                        frozenset(self.signature.parameters)) if plain else None

    def bind(self, args: tuple, kwargs: dict) -> dict:
        """The call's arguments by name, defaults filled in (what ``Signature.bind`` gives)."""
        if self._simple is not None:
            positional, defaults, names = self._simple
            given = dict(zip(positional, args))
            if (len(args) <= len(positional) and kwargs.keys() <= names
                    and not kwargs.keys() & given.keys()):
                arguments = {**defaults, **given, **kwargs}
                if len(arguments) == len(names):   # else a required one is missing
                    return {n: arguments[n] for n in self.signature.parameters}
        bound = self.signature.bind(*args, **kwargs)   # raises the TypeError a call would
        bound.apply_defaults()
        return dict(bound.arguments)

    def __call__(self, *args, **kwargs):
        arguments = self.bind(args, kwargs)
        self.calls.append(KernelCall(self.fn.__name__, arguments))
        if self.mode == "run":
            try:
                if self._widen:
                    with _int32_indices():
                        return self.target(*args, **kwargs)
                try:
                    return self.target(*args, **kwargs)
                except RuntimeError as exc:
                    if "long tensor for index" not in str(exc):
                        raise
                # eager torch refused an int32 index the device takes: from now on run this
                # kernel with such indices widened (only then: the mode costs time per op)
                self._widen = True
                with _int32_indices():
                    return self.target(*args, **kwargs)
            except Exception as exc:
                raise KernelRaised(self.fn.__name__, exc) from exc
        out = arguments.get("out")
        if out is not None:
            return out
        code = self.fn.__code__
        if _RULE_HOLDS.get(code):
            return _placeholder(_documented_result(arguments))
        key = _shape_key(arguments)
        result = self._results.get(key)
        if result is None:
            result = self._results[key] = self._infer_result(arguments)
            if code not in _RULE_HOLDS:
                # First call of this kernel's code (a session's small set-up step; the code
                # object is the tree's, shared by every load of it): does the documented output
                # hold? Then it answers every later call without running anything.
                _RULE_HOLDS[code] = result == _documented_result(arguments)
        return _placeholder(result)

    def _infer_result(self, arguments: dict):
        """The structure of what the kernel returns for these arguments ((shape, dtype) leaves),
        found by running it on fake tensors (shapes only, nothing computed); a kernel that needs
        values is taken at its documented output."""
        from torch._subclasses.fake_tensor import FakeTensorMode

        try:
            with FakeTensorMode() as mode:
                fake = {k: _map_tensors(v, mode.from_tensor) for k, v in arguments.items()}
                return _map_tensors(self.fn(**fake), lambda t: (tuple(t.shape), t.dtype))
        except Exception:
            return _documented_result(arguments)


def _int32_indices():
    """While a commit's kernel runs on CPU or CUDA: int32 index tensors, which Spyre (and the
    commit's own compiled kernels) take as they are, widened to int64 where eager torch refuses
    them (``index_copy``), so the kernel computes what it computes on the device.

    One mode object for the process: Dynamo guards on the active mode, so a fresh one per call
    recompiled the kernel every call ("24 graphs for 1 key")."""
    global _WIDEN_MODE
    if _WIDEN_MODE is None:
        _WIDEN_MODE = _int32_indices_mode()
    return _WIDEN_MODE


_WIDEN_MODE = None


def _int32_indices_mode():
    import torch
    from torch.overrides import TorchFunctionMode

    widen = {torch.Tensor.index_copy_, torch.Tensor.index_copy, torch.index_copy}

    class Int32Indices(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in widen:
                args = tuple(a.long() if i and isinstance(a, torch.Tensor)
                             and a.dtype == torch.int32 else a for i, a in enumerate(args))
                if kwargs and isinstance(kwargs.get("index"), torch.Tensor):
                    kwargs = {**kwargs, "index": kwargs["index"].long()}
            return func(*args, **(kwargs or {}))

    return Int32Indices()


def _map_tensors(value, fn):
    """``value`` with every tensor (also inside lists and tuples) replaced by ``fn(tensor)``."""
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def _shape_key(arguments: dict) -> tuple:
    """What a kernel's output shape can depend on: every tensor's shape and dtype, every other
    argument's value."""
    import torch

    def leaf(v):
        if isinstance(v, torch.Tensor):
            return ("T", tuple(v.shape), v.dtype)
        if isinstance(v, (list, tuple)):
            return ("L", tuple(leaf(x) for x in v))
        return v if isinstance(v, (int, float, bool, str, type(None))) else repr(type(v))

    return tuple((k, leaf(v)) for k, v in arguments.items())


#: Per kernel code object (compiled once per source tree): whether _documented_result gives its
#: output, checked on fake tensors at its first recorded call.
_RULE_HOLDS: dict = {}


def _documented_result(arguments: dict):
    """A kernel's output as spyre-inference's kernels document it: [num_seqs, H, D] for a batched
    decode (any batch size), else the shape of its first tensor argument (the query rows)."""
    import torch

    first = next(v for v in arguments.values() if isinstance(v, torch.Tensor))
    seqs = arguments.get("num_seqs")
    if isinstance(seqs, int) and not isinstance(seqs, bool) and first.dim() == 3:
        return (seqs, *first.shape[1:]), first.dtype
    return tuple(first.shape), first.dtype


def _placeholder(result):
    """Read-only zero tensors (no memory) shaped as the kernel's result."""
    import torch

    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], torch.dtype):
        shape, dtype = result
        return torch.zeros((), dtype=dtype).expand(shape)
    if isinstance(result, (list, tuple)):
        return type(result)(_placeholder(r) for r in result)
    return result


@contextlib.contextmanager
def intercepted_compile(proxies: list[KernelProxy]):
    """``torch.compile(fn, ...)`` returns a proxy while the subject's modules load."""
    import torch

    real = torch.compile

    def compile_(fn=None, **kwargs):
        if fn is None:
            return lambda f: compile_(f, **kwargs)
        proxy = KernelProxy(fn, kwargs)
        proxies.append(proxy)
        return proxy

    torch.compile = compile_
    try:
        yield
    finally:
        torch.compile = real


# -- transfers ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Transfer:
    name: str
    shape: tuple
    dtype: str
    bytes: int


def _caller_name(known: dict) -> str:
    """The subject's function that called convert (past comprehensions and lambdas); ``known``:
    code object -> name, for the functions met before."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        name = known.get(code)
        if name is not None:
            return name
        if not code.co_name.startswith("<"):
            known[code] = code.co_name
            return code.co_name
        frame = frame.f_back
    return "other"


#: torch dtype -> its name without the module ("float16"), filled on first sight.
_DTYPE_NAMES: dict = {}


def _dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


class TransferLog:
    """Wraps the subject's ``convert``: every call is one host-to-device transfer.

    ``copy`` False (recording exact figures on the host): the call is counted and the host tensor
    handed back (cast when a ``dtype`` is asked for) without the subject's copy, whose only
    effect there is time; a long prefill's mask is hundreds of MB. Measurement runs copy.

    Transfers are counted by (name, shape, dtype, bytes), not kept one object each: a builder
    that mirrors every per-block mask tile makes millions of calls a run, and the figures need
    only how many of each and their bytes by name. :meth:`counts` hands them out, in the order
    each kind was first made.
    """

    def __init__(self, convert):
        self.convert = convert
        self.copy = True
        #: (name, torch.Size, torch dtype, bytes) -> calls
        self._counts: dict[tuple, int] = {}
        self.names: dict[int, str] = {}
        #: code object -> function name, of the subject's functions that called convert
        self._callers: dict = {}

    def __call__(self, tensor, *args, **kwargs):
        if tensor is None:   # the real convert passes None through: no transfer
            return self.convert(tensor, *args, **kwargs)
        # named after the metadata field holding it, else after the subject's function that
        # made the copy (kv_write_index, _staging_buffers, ...)
        name = self.names.get(id(tensor)) or _caller_name(self._callers)
        key = (name, tensor.shape, tensor.dtype, tensor.nbytes)
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1
        if self.copy:
            return self.convert(tensor, *args, **kwargs)
        dtype = kwargs.get("dtype")
        return tensor if dtype is None or dtype == tensor.dtype else tensor.to(dtype)

    def clear(self) -> None:
        self._counts.clear()

    def counts(self) -> dict[Transfer, int]:
        """The transfers since the last :meth:`clear`: each kind and how many times."""
        return {Transfer(name, tuple(shape), _dtype_name(dtype), nbytes): n
                for (name, shape, dtype, nbytes), n in self._counts.items()}

    def name_fields(self, metadata, clear: bool = True) -> None:
        """Name tensors after the metadata attribute (or dict key) that holds them."""
        if clear:
            self.names.clear()
        import torch

        tensor, name_of = torch.Tensor, self.names.setdefault

        def visit(value, name):
            if isinstance(value, tensor):
                name_of(id(value), name)
            elif isinstance(value, dict):
                for k, v in value.items():
                    visit(v, str(k))
            elif isinstance(value, (list, tuple)):
                for v in value:   # mostly one tensor per sequence: named here, not recursed into
                    if type(v) is tensor:
                        name_of(id(v), name)
                    elif isinstance(v, (list, tuple)) and v and type(v[0]) is tensor:
                        for t in v:   # a row of per-block tiles: no call per tile
                            if type(t) is tensor:
                                name_of(id(t), name)
                            else:
                                visit(t, name)
                    else:
                        visit(v, name)

        for attr, value in vars(metadata).items():
            visit(value, attr.removesuffix("_cpu"))


# -- the config handed to the subject ------------------------------------------------------------

class Section:
    """Exactly the attributes given; any other is an AttributeError naming what is provided."""

    def __init__(self, path: str, **values):
        self.__dict__.update(values)
        self.__dict__["_path"] = path

    def __getattr__(self, name: str):
        given = ", ".join(k for k in self.__dict__ if not k.startswith("_"))
        raise AttributeError(f"{self._path}.{name} is not provided by spyre-bench (it provides "
                             f"{given})")


def engine_vllm_config(config: EngineConfig, vllm_config_cls, compilation_mode):
    import torch

    dtype = getattr(torch, config.dtype)
    model = Section("vllm_config.model_config", max_model_len=config.max_model_len,
                    dtype=dtype, runner_type="generate",
                    get_num_attention_heads=lambda parallel=None: config.num_heads,
                    get_num_kv_heads=lambda parallel=None: config.num_kv_heads,
                    get_head_size=lambda: config.head_size)
    return vllm_config_cls(
        cache_config=Section("vllm_config.cache_config", block_size=config.block_size,
                             cache_dtype="auto"),
        model_config=model,
        scheduler_config=Section("vllm_config.scheduler_config",
                                 max_num_batched_tokens=config.max_num_batched_tokens,
                                 max_num_seqs=config.max_num_seqs),
        # one device, no decode context parallelism, no speculative decoding: what vLLM's own
        # builder base reads of them (AttentionMetadataBuilder._init_reorder_batch_threshold)
        parallel_config=Section("vllm_config.parallel_config", tensor_parallel_size=1,
                                decode_context_parallel_size=1),
        speculative_config=None,
        compilation_config=Section("vllm_config.compilation_config", mode=compilation_mode,
                                   static_forward_context={}))


def _construct(cls, known: dict, what: str):
    """Call ``cls`` with the arguments its signature names, by name; unknown required ones are a
    NotDrivable naming them."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError) as exc:
        raise NotDrivable(f"{what}: unreadable signature ({exc})") from None
    kwargs, unknown = {}, []
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        # ``__init__(*args, **kwargs)`` handing on to a base class (the head-major impl):
        # what the nearest base that names its parameters takes
        for base in getattr(cls, "__mro__", ())[1:]:
            try:
                named = inspect.signature(base).parameters
            except (TypeError, ValueError):
                continue
            if not any(p.kind is p.VAR_KEYWORD for p in named.values()):
                params = {**named, **{n: p for n, p in params.items()
                                      if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}}
                break
    for name, p in params.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if name in known:
            kwargs[name] = known[name]
        elif p.default is p.empty:
            unknown.append(name)
    if unknown:
        raise NotDrivable(f"{what}({', '.join(params)}): spyre-bench cannot supply "
                          f"{', '.join(unknown)}")
    return cls(**kwargs)


#: CommonAttentionMetadata class -> the names of ``common_attention_metadata``'s values it takes
_METADATA_FIELDS: dict = {}


def common_attention_metadata(cls, **values):
    """``cls`` (the loaded vLLM's CommonAttentionMetadata) from the values it takes, by name:
    its fields differ between releases (0.32 dropped ``_seq_lens_cpu``), so what it does not
    name is left out, and a required field the harness has no value for is a NotDrivable."""
    names = _METADATA_FIELDS.get(cls)
    if names is None:
        try:
            params = inspect.signature(cls).parameters
        except (TypeError, ValueError) as exc:
            raise NotDrivable(f"CommonAttentionMetadata: unreadable signature ({exc})") from None
        unknown = [n for n, p in params.items() if p.default is p.empty and n not in values
                   and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if unknown:
            raise NotDrivable(f"CommonAttentionMetadata({', '.join(params)}): spyre-bench "
                              f"cannot supply {', '.join(unknown)}")
        names = _METADATA_FIELDS[cls] = tuple(n for n in values if n in params)
    return cls(**{n: values[n] for n in names})


# -- which backend ---------------------------------------------------------------------------

#: The knob whose value picks the decoder attention backend (the newest envs.py).
LAYOUT_KNOB = "SPYRE_ATTN_KV_LAYOUT"
#: Backend module and class per KV layout, as the commit's platform registers them.
BACKENDS = {
    "token_major": (BACKEND_MODULE, BACKEND_CLASS),
    "head_major": ("spyre_inference.v1.attention.backends.spyre_head_major_attn",
                   "SpyreHeadMajorAttentionBackend"),
}


def backend_for(overrides: Overrides) -> tuple[str, str]:
    """(module, backend class) the engine would run under these overrides."""
    return BACKENDS[overrides.knobs.get(LAYOUT_KNOB, "token_major")]


def _accessor(backend, name: str):
    """What a backend's static accessor (get_builder_cls, get_impl_cls) returns, or None."""
    get = getattr(backend, name, None)
    try:
        found = get() if callable(get) else None
    except Exception:
        return None
    return found if isinstance(found, type) else None


# -- per-step figures ------------------------------------------------------------------------------

@dataclass
class DrivenStep:
    """What one step did through the subject's code, before it becomes a model StepCost."""

    calls: list[KernelCall]
    transfers: list[Transfer]
    metadata: object
    batched_seqs: int = 0
    reason: str = ""
    extra: dict = field(default_factory=dict)


#: The per-chunk index argument of a chunked kernel, by the names stored kernels give it
#: (``chunk_page_ids``; ``chunk_row_ids`` in the head-major kernel that indexes rows; the
#: backend hook's ``chunk_index_tables``): one entry per loop step.
CHUNK_INDEX_ARGS = ("chunk_page_ids", "chunk_row_ids", "chunk_index_tables")


def loop_iterations(call: KernelCall) -> int:
    """How many times the kernel's loop runs, read from its arguments by name."""
    a = call.args
    if isinstance(a.get("num_chunks"), int):
        return a["num_chunks"]
    name = next((n for n in CHUNK_INDEX_ARGS if a.get(n) is not None), None)
    pages = a.get(name) if name else None
    if isinstance(pages, (list, tuple)):
        return len(pages)
    if pages is not None and isinstance(a.get("blocks_per_chunk"), int):
        return int(pages.shape[0]) // a["blocks_per_chunk"]
    if isinstance(a.get("num_blocks"), int):
        return a["num_blocks"]
    raise NotDrivable(f"kernel {call.kernel}({', '.join(a)}): cannot tell its loop count (no "
                      f"num_chunks, {', '.join(CHUNK_INDEX_ARGS)} or num_blocks argument)")


def _step_text(step) -> str:
    """A step as the trace format writes it (``SEQ_LENS | QUERY_LENS``), for messages."""
    seqs = ",".join(str(s.seq_len) for s in step)
    queries = ",".join(str(s.query_len) for s in step)
    return f"step {seqs} | {queries}" if any(s.query_len != 1 for s in step) else f"step {seqs}"


def setup_step(config: EngineConfig) -> tuple:
    """A step that takes every path of a config: up to four one-block decodes (batched where
    the builder batches) and a two-token prefill (per sequence)."""
    from harness.workloads import Seq

    decodes = max(0, min(MIN_BATCHED_SEQS, config.max_num_seqs - 1))
    length = min(config.block_size, config.max_model_len)
    return tuple([Seq(length, 1)] * decodes + [Seq(min(2, config.max_model_len), 2)])


def step_pages(step, block_size: int) -> int:
    """K/V pages a step's sequences use, with vLLM's null page 0."""
    return 1 + sum(ceil_div(s.seq_len, block_size) for s in step)


def step_seed(step) -> int:
    """A page-layout seed that depends only on the step's (seq_len, query_len) pairs."""
    return zlib.crc32(repr([(s.seq_len, s.query_len) for s in step]).encode())


def blocks_per_step(call: KernelCall) -> int:
    bpc = call.args.get("blocks_per_chunk")
    return loop_iterations(call) * (bpc if isinstance(bpc, int) else 1)


class BuilderSession:
    """One open load of a subject's backend for one (config, overrides); use as a context manager.

    Everything of the load (modules, env) is undone on exit, like every other window.
    """

    def __init__(self, tree: SourceTree, origin: str, config: EngineConfig, overrides: Overrides):
        self.tree, self.origin, self.config, self.overrides = tree, origin, config, overrides
        self.handler = CaptureHandler()
        self.proxies: list[KernelProxy] = []
        self.transfers: TransferLog | None = None
        self._kv_cache: tuple | None = None
        self.layer = None
        #: The engine's one-time transfers (staging, set-up), found by :meth:`warm_up`.
        self.setup: list[Transfer] | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> BuilderSession:
        try:
            self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc):
        self.release()
        self._stack.close()

    def _open(self) -> None:
        import torch

        dotted, backend_name = backend_for(self.overrides)
        rel = module_path(dotted)
        if not self.tree.has(rel):
            layout = self.overrides.knobs.get(LAYOUT_KNOB)
            raise NotDrivable(f"{self.origin}: no {rel}" + (
                f" (the backend {LAYOUT_KNOB}={layout} selects)" if layout else ""))
        standins = vllm_standins(self.handler)
        self._stack.enter_context(isolated(self.overrides.as_env(), self.tree, standins))
        with intercepted_compile(self.proxies):
            try:
                module = importlib.import_module(dotted)
            except Exception as exc:
                raise NotDrivable(f"{self.origin}: {rel} cannot be loaded with "
                                  f"spyre-bench's vLLM stand-ins: {type(exc).__name__}: {exc}"
                                  f"{where(exc, self.tree)}") from None
        self.module = module
        self.backend = getattr(module, backend_name, None)
        self.builder_cls = _accessor(self.backend, "get_builder_cls") or getattr(
            module, BUILDER_CLASS, None)
        self.impl_cls = _accessor(self.backend, "get_impl_cls") or getattr(module, IMPL_CLASS,
                                                                           None)
        missing = [n for n, c in ((BUILDER_CLASS, self.builder_cls), (IMPL_CLASS, self.impl_cls))
                   if not isinstance(c, type)]
        if missing:
            raise NotDrivable(f"{self.origin}: {rel} has no {' or '.join(missing)}")
        self._wrap_convert()
        vllm_config_mod = sys.modules["vllm.config"]
        c = self.config
        # the engine's config and layer are the harness's own (it plays the engine): vLLM's
        # VllmConfig needs a model to be built; the compilation mode is the loaded vLLM's
        self.vllm_config = engine_vllm_config(c, VllmConfig,
                                              vllm_config_mod.CompilationMode.STOCK_TORCH_COMPILE)
        self._stack.enter_context(vllm_config_mod.set_current_vllm_config(self.vllm_config))
        # what the engine hands a decoder layer's builder: a full-attention spec, windowed
        # when the model is
        spec = sys.modules["vllm.v1.kv_cache_interface"].FullAttentionSpec(
            block_size=c.block_size, num_kv_heads=c.num_kv_heads, head_size=c.head_size,
            dtype=getattr(torch, c.dtype), sliding_window=c.sliding_window)
        self.device = torch.device("cpu")
        try:
            # As the engine orders it: the model's layers (each with its impl) exist, and sit
            # in the compilation config's forward context, before the builder is made; their
            # K/V caches are bound later (kv_cache()), before the first step.
            self.impl = _construct(self.impl_cls, {
                "num_heads": c.num_heads, "head_size": c.head_size,
                "scale": c.head_size ** -0.5, "num_kv_heads": c.num_kv_heads,
                "alibi_slopes": None, "sliding_window": c.sliding_window, "kv_cache_dtype": "auto",
                "logits_soft_cap": None}, IMPL_CLASS)
            self.layer = Attention(c.num_heads, c.head_size, c.head_size ** -0.5,
                                   c.num_kv_heads, prefix=LAYER_NAME, impl=self.impl)
            self.vllm_config.compilation_config.static_forward_context[LAYER_NAME] = self.layer
            self.builder = _construct(self.builder_cls, {
                "kv_cache_spec": spec, "layer_names": [LAYER_NAME],
                "vllm_config": self.vllm_config, "device": self.device}, BUILDER_CLASS)
        except NotDrivable as exc:
            raise NotDrivable(f"{self.origin}: {exc}") from None
        except Exception as exc:
            raise NotDrivable(f"{self.origin}: constructing {BUILDER_CLASS}/{IMPL_CLASS} for "
                              f"{c.label()} failed: {type(exc).__name__}: {exc}"
                              f"{where(exc, self.tree)}") from None

    def _wrap_convert(self) -> None:
        utils = sys.modules.get(CONVERT_MODULE)
        convert = getattr(utils, "convert", None)
        if convert is None:
            raise NotDrivable(f"{self.origin}: no {CONVERT_MODULE}.convert, the transfer function "
                              "spyre-bench counts host-to-device copies with")
        register = getattr(utils, "register", None)
        if callable(register):
            # what the platform does at start-up: the op convert routes through
            # (torch.ops.vllm.spyre_convert), registered into this load's stand-in library
            try:
                register()
            except Exception as exc:
                raise NotDrivable(f"{self.origin}: {CONVERT_MODULE}.register() raised "
                                  f"{type(exc).__name__}: {exc}{where(exc, self.tree)}") from None
        self.transfers = TransferLog(convert)
        for name, mod in list(sys.modules.items()):
            if name.startswith("spyre_inference") and getattr(mod, "convert", None) is convert:
                mod.convert = self.transfers

    # -- what the builder owns -----------------------------------------------------------------

    def batched_ladders(self) -> tuple[tuple[int, ...], tuple[int, ...], str]:
        """(num_seqs, num_blocks, owner): the builder's own ladders when it keeps them,
        else those of the bucketer it holds."""
        b = self.builder
        own = (getattr(b, "_num_seqs_buckets", None), getattr(b, "_num_blocks_buckets", None))
        if all(isinstance(x, (list, tuple)) for x in own):
            return tuple(map(int, own[0])), tuple(map(int, own[1])), "builder"
        bucketer = getattr(b, "_attn_bucketer", None) or getattr(b, "attn_bucketer", None)
        ladders = (getattr(bucketer, "num_seqs_buckets", None),
                   getattr(bucketer, "num_blocks_buckets", None))
        if bucketer is None or not all(isinstance(x, (list, tuple)) for x in ladders):
            raise NotDrivable(f"{self.origin}: {BUILDER_CLASS} keeps neither its own batched "
                              "ladders (_num_seqs_buckets, _num_blocks_buckets) nor a bucketer "
                              "with num_seqs_buckets / num_blocks_buckets")
        return tuple(map(int, ladders[0])), tuple(map(int, ladders[1])), "bucketer"

    # -- one step ------------------------------------------------------------------------------

    def common_metadata(self, step, seed: int = 0):
        """vLLM's CommonAttentionMetadata for ``step``: decodes first, pages scattered (a seeded
        permutation of pages 1.., page 0 being vLLM's null block)."""
        import torch

        bs = self.config.block_size
        n = len(step)
        query_lens = [s.query_len for s in step]
        seq_lens = [s.seq_len for s in step]
        starts = [0]
        for q in query_lens:
            starts.append(starts[-1] + q)
        blocks = [ceil_div(x, bs) for x in seq_lens]
        width = max(ceil_div(self.config.max_model_len, bs), max(blocks))
        total = sum(blocks)
        pages = torch.randperm(total, generator=torch.Generator().manual_seed(seed)).to(
            torch.int32) + 1
        # row s holds the next blocks[s] pages of the permutation (a boolean fill is row-major)
        table = torch.zeros(n, width, dtype=torch.int32)
        table[torch.arange(width) < torch.tensor(blocks).unsqueeze(1)] = pages
        # the new tokens of sequence s are positions seq_len - query_len .. seq_len - 1
        q = torch.tensor(query_lens)
        seq_of_token = torch.repeat_interleave(torch.arange(n), q)
        first_new = torch.tensor([x - y for x, y in zip(seq_lens, query_lens)])
        tokens = (torch.arange(starts[-1]) - torch.tensor(starts[:-1])[seq_of_token]
                  + first_new[seq_of_token])
        slot_mapping = table[seq_of_token, tokens // bs].to(torch.int64) * bs + tokens % bs
        qsl = torch.tensor(starts, dtype=torch.int32)
        lens = torch.tensor(seq_lens, dtype=torch.int32)
        return common_attention_metadata(
            sys.modules["vllm.v1.attention.backend"].CommonAttentionMetadata,
            query_start_loc=qsl, query_start_loc_cpu=qsl, seq_lens=lens, _seq_lens_cpu=lens,
            num_reqs=n, num_actual_tokens=starts[-1], max_query_len=max(query_lens),
            max_seq_len=max(seq_lens), block_table_tensor=table, slot_mapping=slot_mapping,
            causal=True, is_prefilling=torch.tensor([q > 1 for q in query_lens]))

    def build(self, step, seed: int = 0):
        """The step's metadata through the subject's ``build()``; the transfer log starts here,
        so copies ``build()`` makes (a slot mapping published to the device) are the step's."""
        cm = self.common_metadata(step, seed)
        self.transfers.clear()
        self.transfers.name_fields(cm)
        try:
            return self.builder.build(common_prefix_len=0, common_attn_metadata=cm), cm
        except Exception as exc:
            raise self.raised(f"{BUILDER_CLASS}.build() on {_step_text(step)}", exc) from None

    def raised(self, what: str, exc: BaseException) -> SubjectRaised:
        """The subject's own code raised: "subject raised X at file:line" for this commit."""
        return SubjectRaised(f"{self.origin}: subject raised {type(exc).__name__} in {what}: "
                             f"{exc}{where(exc, self.tree)}")

    def forward(self, metadata, query, kv_cache, output):
        """One layer through the subject's impl; returns (kernel calls, transfers) of it, the
        transfers since the step's build() counted by kind (:meth:`TransferLog.counts`)."""
        for p in self.proxies:
            p.calls.clear()
        self.transfers.name_fields(metadata, clear=False)
        try:
            self.impl.forward(self.layer, query, query, query, kv_cache, metadata, output)
        except NotDrivable:
            raise
        except Exception as exc:
            raise self.raised(f"{IMPL_CLASS}.forward()", exc) from None
        calls = [c for p in self.proxies for c in p.calls]
        return calls, self.transfers.counts()

    def release(self) -> None:
        """Drop what the last forward recorded (its kernel arguments are the step's tensors,
        hundreds of MiB for a long prefill): nothing keeps them until the next step."""
        for p in self.proxies:
            p.calls.clear()
        if self.transfers is not None:
            self.transfers.clear()
            self.transfers.names.clear()

    def kv_cache_shape(self, num_pages: int) -> tuple[int, ...]:
        c = self.config
        get = getattr(self.backend, "get_kv_cache_shape", None)
        if get is None:
            return (num_pages, c.block_size, c.num_kv_heads, c.head_size)
        return tuple(get(num_pages, c.block_size, c.num_kv_heads, c.head_size))

    def max_pages(self) -> int:
        """Pages a step of this config can use: the null page and every sequence at
        max_model_len."""
        c = self.config
        return 1 + max(1, c.max_num_seqs) * ceil_div(c.max_model_len, c.block_size)

    def kv_cache(self, device, pages: int, placeholder: bool = False):
        """The session's one K/V cache, allocated on first use and bound to its layer before
        the first step, as vLLM allocates it once per engine: the impl may keep views of the
        first cache it is handed, so every step of a session gets the same one. A live cache
        holds ``pages``; a placeholder cache (recorded steps) is read-only zeros that take no
        memory, so it holds every page of the config. A step needing more pages than the cache
        has is NotDrivable."""
        import torch

        if self._kv_cache is None:
            dtype = getattr(torch, self.config.dtype)
            shape = self.kv_cache_shape(max(pages, self.max_pages()) if placeholder else pages)
            if placeholder:
                cache = torch.zeros((), dtype=dtype).expand(*shape)
                self._kv_cache = (cache, cache)
            else:
                self._kv_cache = (torch.zeros(shape, dtype=dtype, device=device),
                                  torch.zeros(shape, dtype=dtype, device=device))
            self.layer.kv_cache = self._kv_cache   # vLLM's bind_kv_cache
        have = int(self._kv_cache[0].shape[0])
        if pages > have:
            raise NotDrivable(f"{self.origin}: a step needs {pages} K/V pages; the session's "
                              f"cache (allocated once, as vLLM does) has {have}")
        return self._kv_cache

    def reserve(self, device, steps) -> None:
        """Allocate the session's K/V cache for the largest of ``steps`` (live measurement:
        real memory, so sized by what will run, not by the config's bound)."""
        bs = self.config.block_size
        self.kv_cache(device, max(step_pages(step, bs) for step in steps))

    def placeholders(self, step, cache):
        """Zero-cost tensors for a recorded forward: nothing is computed from them."""
        import torch

        c = self.config
        dtype = getattr(torch, c.dtype)
        tokens = sum(s.query_len for s in step)
        query = torch.zeros((), dtype=dtype).expand(tokens, c.num_heads, c.head_size)
        return query, cache, torch.empty(tokens, c.num_heads, c.head_size, dtype=dtype)

    def record_step(self, step, seed: int | None = None):
        """Build and forward one step with recorded kernels: the exact figures of that step.

        The page layout is seeded from the step itself (``seed`` None), so the same step always
        gets the same inputs and its figures can be reused (:mod:`harness.subjects.memo.figures`)."""
        if seed is None:
            seed = step_seed(step)
        from harness.model.cost import StepCost
        from harness.model.dispatch import CompileKey, Dispatch

        if self.setup is None:
            self.setup = self.warm_up()
        calls, transfers, metadata = self._drive(step, seed)
        bs = self.config.block_size
        batched = [c for c in calls if c.batched]
        single = [c for c in calls if not c.batched]
        fields: dict = {}
        keys, padded, iterations = [], 0, 0
        n_batched = 0
        for c in batched:
            it = loop_iterations(c)
            b_seqs = int(c.args.get("num_seqs"))
            bpc = c.args.get("blocks_per_chunk")
            iterations += it
            padded += b_seqs * blocks_per_step(c) * bs
            if isinstance(bpc, int):
                keys.append(CompileKey("batched_chunked", (b_seqs, bpc, it)))
                fields.update(blocks_per_chunk=bpc, num_chunks=it)
            else:
                keys.append(CompileKey("batched", (b_seqs, it)))
            b_blocks = getattr(metadata, "padded_batch_blocks", None)
            fields.update(b_seqs=b_seqs, b_blocks=b_blocks if isinstance(b_blocks, int) else None)
            # the real rows the batched call served: the builder's own count where its metadata
            # keeps one (num_decode_seqs), else the step's leading decodes (a pre-#810 builder
            # batches whole all-decode steps), never more than the padded batch
            built = getattr(metadata, "num_decode_seqs", None)
            leading = next((i for i, q in enumerate(step) if not q.is_decode), len(step))
            n_batched = min(b_seqs, built if isinstance(built, int) and built > 0 else leading)
        per_sequence = []
        for c in single:
            it = loop_iterations(c)
            width = c.args.get("padded_query_len")
            iterations += it
            padded += it * bs
            per_sequence.append((it, int(width) if isinstance(width, int) else 0))
            keys.append(CompileKey("attn", (it, per_sequence[-1][1])))
        reason = self._reason(step, metadata, bool(batched), n_batched)
        h2d = Counter()
        for t, n in transfers.items():
            h2d[t.name] += t.bytes * n
        return StepCost(
            dispatch=Dispatch(n_batched, reason, per_sequence=tuple(per_sequence), **fields),
            iterations_per_layer=iterations, launches_per_layer=len(calls),
            real_kv_tokens=sum(s.seq_len for s in step), padded_kv_slots=padded,
            decode_tokens=sum(1 for s in step if s.is_decode), h2d=dict(h2d),
            transfers=sum(transfers.values()), keys=tuple(keys)), transfers

    def _drive(self, step, seed: int):
        """Build and forward ``step`` with recorded kernels: (kernel calls, transfers, metadata)."""
        self.transfers.copy = False
        for p in self.proxies:
            p.mode = "record"
        cache = self.kv_cache(None, step_pages(step, self.config.block_size), placeholder=True)
        metadata, _ = self.build(step, seed)
        query, cache, output = self.placeholders(step, cache)
        calls, transfers = self.forward(metadata, query, cache, output)
        self.release()
        return calls, transfers, metadata

    def warm_up(self) -> list[Transfer]:
        """The engine's one-time transfers: a set-up step (decodes and a short prefill, so both
        paths run) driven twice; what the first copies and the second does not repeat is
        staged once per engine (staging buffers and the like), and is no step's cost."""
        step = setup_step(self.config)
        first = self._drive(step, 0)[1]
        again = self._drive(step, 0)[1]
        return [t for t, n in first.items() for _ in range(n - again.get(t, 0))]

    def _reason(self, step, metadata, batched: bool, n_batched: int) -> str:
        """Why a step took its path, from the env and what the builder left in its metadata."""
        if batched:
            return "batched" if n_batched >= len(step) else "decode prefix batched"
        if not self.overrides.batched_decode:
            return "SPYRE_BATCHED_DECODE off"
        minimum = getattr(self.module, "_MIN_BATCHED_SEQS", None)
        decodes = next((i for i, s in enumerate(step) if not s.is_decode), len(step))
        built = getattr(metadata, "num_decode_seqs", None)
        if isinstance(built, int) and built < decodes:
            prefills = sum(1 for s in step if not s.is_decode)
            return f"{prefills} prefill sequence(s) in the batch"
        if isinstance(minimum, int) and decodes < minimum:
            return f"{decodes} decode(s) < minimum {minimum}"
        return f"builder declined the batched path ({decodes} leading decodes)"


# -- live forwards (measurement) -----------------------------------------------------------------

@dataclass
class LiveStep:
    """One step's real inputs for the subject's forward: its own builder's metadata, a K/V cache
    filled through its own ``do_kv_cache_update``, and each sequence's dense K/V for the oracle."""

    step: tuple
    metadata: object
    query: object
    kv_cache: tuple
    output: object
    keys: list  # per sequence [seq_len, KV, D]
    values: list


def live_step(session: BuilderSession, step, device, seed: int = 0) -> LiveStep:
    """Build ``step`` through the subject and make its inputs on ``device`` (random, seeded)."""
    import torch

    c = session.config
    dtype = getattr(torch, c.dtype)
    bs = c.block_size
    # bound before build(), as the engine binds it
    cache = session.kv_cache(device, step_pages(step, bs))
    metadata, cm = session.build(step, step_seed(step))
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32).to(dtype)

    keys = [rand(s.seq_len, c.num_kv_heads, c.head_size) for s in step]
    values = [rand(s.seq_len, c.num_kv_heads, c.head_size) for s in step]
    slots = []
    for i, s in enumerate(step):
        t = torch.arange(s.seq_len)
        slots.append(cm.block_table_tensor[i, t // bs].to(torch.int64) * bs + t % bs)
    update = getattr(session.impl, "do_kv_cache_update", None)
    if update is None:
        raise NotDrivable(f"{session.origin}: {IMPL_CLASS} has no do_kv_cache_update(), through "
                          "which spyre-bench fills the K/V cache in the subject's own layout")
    # Every token of every sequence written, as the steps before this one would have: the
    # impl's own store kernel (run, not recorded) through its own slot index (kv_write_index
    # where the impl turns a slot mapping into its layout's index, as attn_layer does).
    for p in session.proxies:
        p.mode = "run"
    try:
        slot_mapping = torch.cat(slots)
        index = getattr(session.impl, "kv_write_index", None)
        slot_mapping = (index(slot_mapping, device) if index is not None
                        else slot_mapping.to(device))
        update(session.layer, torch.cat(keys).to(device), torch.cat(values).to(device), cache,
               slot_mapping)
    except KernelRaised as exc:
        raise session.raised(f"{IMPL_CLASS}.do_kv_cache_update()", exc.exc) from None
    except Exception as exc:
        raise session.raised(f"{IMPL_CLASS}.do_kv_cache_update()", exc) from None
    tokens = sum(s.query_len for s in step)
    query = rand(tokens, c.num_heads, c.head_size).to(device)
    output = torch.zeros(tokens, c.num_heads, c.head_size, dtype=dtype, device=device)
    return LiveStep(tuple(step), metadata, query, cache, output, keys, values)


def run_forward(session: BuilderSession, live: LiveStep):
    """One layer of the subject's forward on ``live`` with its kernels really called (the device
    mirror is made by the first call and reused after, as for every later layer of a step)."""
    session.transfers.copy = True
    session.transfers.clear()
    for p in session.proxies:
        p.mode = "run"
        p.calls.clear()
    try:
        session.impl.forward(session.layer, live.query, live.query, live.query, live.kv_cache,
                             live.metadata, live.output)
    except (NotDrivable, KernelRaised):
        raise
    except Exception as exc:
        raise session.raised(f"{IMPL_CLASS}.forward()", exc) from None
    return live.output
