"""Small stand-ins for the vLLM names spyre-inference's attention path imports.

Which names: ``vllm_surface.tsv`` beside this file lists every ``vllm.*`` name any stored version of
the attention path imports (``envs.py``, ``platform.py``, ``custom_ops/utils.py``, ``attn_layer``,
``backends/*``, ``ops/*``, the jagged plan), with the real files that use it;
tests/test_vllm_surface.py asserts that each one resolves here. They follow vLLM 0.28.0 (the
release today's spyre-inference pins: ``vllm>=0.28.0,<0.29``), reduced to what a metadata builder,
an attention impl and a platform module do with them: plain classes and dataclasses, field names
as in 0.28.0.

Any name not provided here is missing on purpose: ``from vllm.x import Name`` then fails with
Python's own "cannot import name 'Name' from 'vllm.x'", which the harness reports as the exact
thing a commit needs that no stand-in covers. ``torch_spyre`` is not stood in at all.

A fresh set of modules is made per load (:func:`modules`); ``direct_register_custom_op`` registers
into a ``torch.library`` fragment of that load, destroyed when the load closes
(:func:`close_modules`), so two commits loaded one after the other each register their own op.
"""

from __future__ import annotations

import enum
import functools
import logging
import types
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, ClassVar

#: The vLLM release these stand-ins follow.
VLLM_VERSION = "0.28.0"


# -- vllm.config ----------------------------------------------------------------------------------

class CompilationMode(enum.IntEnum):
    """vLLM's compilation modes; spyre-inference compiles its kernels under STOCK_TORCH_COMPILE."""

    NONE = 0
    STOCK_TORCH_COMPILE = 1
    DYNAMO_TRACE_ONCE = 2
    VLLM_COMPILE = 3


class VllmConfig:
    """vLLM's engine config: a bag of sections (cache, model, scheduler, parallel, compilation)."""

    def __init__(self, **sections: Any):
        self.__dict__.update(sections)


class IrOpPriorityConfig:
    """``vllm.config.kernel.IrOpPriorityConfig``: which implementation of an IR op wins; the
    platform module only names it."""

    def __init__(self, **priorities: Any):
        self.__dict__.update(priorities)


class _CurrentConfig:
    """``set_current_vllm_config`` / ``get_current_vllm_config``, one stack per load."""

    def __init__(self):
        self.stack: list[Any] = []

    def get(self) -> Any:
        if not self.stack:
            raise RuntimeError("get_current_vllm_config() outside set_current_vllm_config() "
                               "(spyre-bench stand-in)")
        return self.stack[-1]

    def get_or_none(self) -> Any:
        return self.stack[-1] if self.stack else None

    @contextmanager
    def set(self, config: Any, check_compile: bool = False, prefix: str | None = None):
        self.stack.append(config)
        try:
            yield config
        finally:
            self.stack.pop()

    def compilation_config(self) -> Any:
        return self.get().compilation_config


# -- vllm.logger ----------------------------------------------------------------------------------

class _Logger(logging.Logger):
    """vLLM's logger adds ``*_once`` methods that log a given message a single time."""

    def __init__(self, name: str):
        super().__init__(name, logging.DEBUG)
        self._said: set = set()

    def _once(self, level: int, msg, *args):
        key = (level, msg, args)
        if key not in self._said:
            self._said.add(key)
            self.log(level, msg, *args)

    def debug_once(self, msg, *args, **_):
        self._once(logging.DEBUG, msg, *args)

    def info_once(self, msg, *args, **_):
        self._once(logging.INFO, msg, *args)

    def warning_once(self, msg, *args, **_):
        self._once(logging.WARNING, msg, *args)


def _init_logger(handler: logging.Handler):
    """``init_logger`` returning a fresh logger outside logging's registry, whose records go to
    ``handler`` only (nothing of it outlives the load)."""

    def init_logger(name: str) -> logging.Logger:
        log = _Logger(name)
        log.propagate = False
        log.addHandler(handler)
        return log

    return init_logger


# -- vllm.platforms ---------------------------------------------------------------------------------

class PlatformEnum(enum.Enum):
    CUDA = enum.auto()
    ROCM = enum.auto()
    TPU = enum.auto()
    XPU = enum.auto()
    CPU = enum.auto()
    OOT = enum.auto()
    UNSPECIFIED = enum.auto()


class Platform:
    """vLLM's platform base: class attributes a platform plugin overrides."""

    _enum = PlatformEnum.UNSPECIFIED
    device_name: str = ""
    device_type: str = ""
    dispatch_key: str = "CPU"
    dist_backend: str = ""

    @classmethod
    def is_cpu(cls) -> bool:
        return cls._enum == PlatformEnum.CPU


class CpuPlatform(Platform):
    _enum = PlatformEnum.CPU
    device_name = "cpu"
    device_type = "cpu"
    dispatch_key = "CPU"
    dist_backend = "gloo"


# -- vllm.engine.arg_utils -------------------------------------------------------------------------

class EngineArgs:
    """vLLM's engine arguments; the platform module patches one of its methods (never called
    here: the harness builds configs itself)."""

    max_num_seqs: int | None = None

    def _set_default_max_num_seqs_and_batched_tokens_args(self, usage_context, model_config,
                                                          parallel_config):
        return None


# -- vllm.model_executor.layers.attention.attention -------------------------------------------------

class Attention:
    """vLLM's attention layer, as far as a platform's attention path reads it: the head layout,
    its name, its impl and its K/V cache (bound after construction, as ``bind_kv_cache`` does;
    empty until then). vLLM's own is an ``nn.Module`` that picks a backend; the harness makes
    one per session and puts it in ``static_forward_context`` as the engine does."""

    def __init__(self, num_heads: int, head_size: int, scale: float, num_kv_heads: int,
                 prefix: str = "", attn_type: str = "decoder", impl=None,
                 head_size_v: int | None = None, kv_sharing_target_layer_name=None, **_):
        self.num_heads, self.head_size, self.scale = num_heads, head_size, scale
        self.num_kv_heads = num_kv_heads
        self.head_size_v = head_size if head_size_v is None else head_size_v
        self.layer_name = prefix
        self.attn_type = attn_type
        self.impl = impl
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.query_quant = None
        self.calculate_kv_scales = False
        self.kv_cache: Any = ()

    def forward(self, query, key, value, output_shape=None, output_dtype=None):
        """vLLM's writes the K/V cache and calls the impl through its custom op. A commit's
        encoder wraps this method at import (keeps it and calls it back); the harness drives
        the impl's ``forward`` itself, so a call here is a path it does not drive."""
        raise NotImplementedError("spyre-bench's stand-in Attention.forward is not driven (the "
                                  "harness calls the attention impl's forward itself)")


def cdiv(a: int, b: int) -> int:
    """``vllm.utils.math_utils.cdiv``: ceiling division."""
    return -(a // -b)


def next_power_of_2(n: int) -> int:
    """``vllm.utils.math_utils.next_power_of_2``: the smallest power of two >= n (1 for n < 1)."""
    return 1 if n < 1 else 1 << (n - 1).bit_length()


def _encode_layer_name(layer_name: str) -> str:
    """vLLM wraps a layer name for its custom ops only when an experimental flag is on."""
    return layer_name


# -- vllm.utils.torch_utils -----------------------------------------------------------------------

class _CustomOps:
    """``direct_register_custom_op`` into a ``torch.library`` fragment of this load only."""

    def __init__(self):
        self._lib = None
        self.registered: list[str] = []

    @property
    def lib(self):
        if self._lib is None:
            from torch.library import Library
            self._lib = Library("vllm", "FRAGMENT")
        return self._lib

    def register(self, op_name: str, op_func, mutates_args: list[str] | None = None,
                 fake_impl=None, target_lib=None, dispatch_key: str | None = None,
                 tags: tuple = ()):
        """vLLM's ``direct_register_custom_op``: the schema inferred from ``op_func``, the
        implementation under ``dispatch_key``. vLLM's default key is the platform's; here it is
        CompositeExplicitAutograd, which serves every device the harness runs on."""
        from torch.library import infer_schema

        lib = target_lib or self.lib
        lib.define(op_name + infer_schema(op_func, mutates_args=mutates_args or []), tags=tags)
        lib.impl(op_name, op_func, dispatch_key=dispatch_key or "CompositeExplicitAutograd")
        if fake_impl is not None:
            lib._register_fake(op_name, fake_impl)
        self.registered.append(op_name)

    def close(self) -> None:
        """Remove every op this load registered (``torch.ops.vllm.<name>`` goes too)."""
        if self._lib is None:
            return
        import torch

        self._lib._destroy()
        self._lib = None
        for name in self.registered:
            torch.ops.vllm.__dict__.pop(name, None)
        self.registered.clear()


# -- vllm.v1.attention.backend ----------------------------------------------------------------------

class AttentionType:
    DECODER = "decoder"
    ENCODER = "encoder"
    ENCODER_ONLY = "encoder_only"
    ENCODER_DECODER = "encoder_decoder"


class AttentionCGSupport(enum.Enum):
    ALWAYS = 3
    UNIFORM_BATCH = 2
    UNIFORM_SINGLE_TOKEN_DECODE = 1
    NEVER = 0


@dataclass(frozen=True)
class MultipleOf:
    base: int


class AttentionBackend:
    """Base of a backend: static accessors only."""

    accept_output_buffer: bool = False


class AttentionLayer:
    """What vLLM hands ``forward`` as ``layer``; the impls read nothing from it here."""


class AttentionMetadata:
    """Base of a backend's per-step metadata (a dataclass in every backend)."""


class _Subscriptable:
    """Subscripted as vLLM's generic bases are (``AttentionMetadataBuilder[SpyreMetadata]``);
    the subscription is the class itself. ``typing.Generic`` would keep every subscription in its
    process-wide cache, and with it each loaded commit's classes, modules and whatever their
    globals hold (a recorded step's tensors: about a GiB per config at max_model_len 131072)."""

    def __class_getitem__(cls, item):
        return cls


class AttentionImpl(_Subscriptable):
    """Base of a backend's attention implementation."""


class AttentionMetadataBuilder(_Subscriptable):
    """vLLM's builder base: keeps the constructor arguments; ``reorder_batch_threshold`` is the
    query length up to which a request counts as a decode (None: no reordering)."""

    _cudagraph_support: ClassVar[AttentionCGSupport] = AttentionCGSupport.NEVER
    reorder_batch_threshold: int | None = None

    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        self.kv_cache_spec = kv_cache_spec
        self.layer_names = layer_names
        self.vllm_config = vllm_config
        self.device = device

    def _init_reorder_batch_threshold(self, reorder_batch_threshold: int | None = 1,
                                      supports_spec_as_decode: bool = False,
                                      supports_dcp_with_varlen: bool = False) -> None:
        """As 0.28.0 documents it, reading the same config: a backend that runs speculative
        tokens as decodes counts a request with 1 + k (2k with parallel drafting) queries as one;
        under decode context parallelism without varlen support only single-token queries are."""
        threshold = reorder_batch_threshold
        spec = self.vllm_config.speculative_config if supports_spec_as_decode else None
        if threshold is not None and spec is not None and spec.num_speculative_tokens is not None:
            per_token = 2 if spec.parallel_drafting else 1
            threshold = max(threshold, 1 + per_token * spec.num_speculative_tokens)
        if (self.vllm_config.parallel_config.decode_context_parallel_size > 1
                and not supports_dcp_with_varlen):
            threshold = 1
        self.reorder_batch_threshold = threshold


@dataclass
class CommonAttentionMetadata:
    """Per-step metadata every backend's builder receives: vLLM 0.28.0's fields, in its order
    (tests/vllm_contract holds them to the real class); the host copies of seq_lens and computed
    tokens are the deprecated properties of that release."""

    query_start_loc: Any
    query_start_loc_cpu: Any
    seq_lens: Any
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: Any
    slot_mapping: Any
    causal: Any = True
    logits_indices_padded: Any = None
    num_logits_indices: int | None = None
    max_logits_per_req: int | None = None
    encoder_seq_lens: Any = None
    encoder_seq_lens_cpu: Any = None
    dcp_local_seq_lens: Any = None
    dcp_local_seq_lens_cpu: Any = None
    positions: Any = None
    is_prefilling: Any = None
    seq_lens_cpu_upper_bound: Any = None
    mm_req_doc_ranges: Any = None
    rswa_prefix_lens: Any = None
    replayssm_decode_base_cpu: Any = None
    _seq_lens_cpu: Any = None
    _num_computed_tokens_cpu: Any = None
    _num_computed_tokens_cache: Any = None
    _token_to_req_indices_cache: Any = None

    def batch_size(self) -> int:
        return self.seq_lens.shape[0]

    def naive_query_lens(self):
        return self.query_start_loc[1:] - self.query_start_loc[:-1]

    def replace(self, **kwargs) -> CommonAttentionMetadata:
        return replace(self, **kwargs)

    @property
    def seq_lens_cpu(self):
        if self._seq_lens_cpu is None:
            self._seq_lens_cpu = self.seq_lens.to("cpu")
        return self._seq_lens_cpu

    @property
    def num_computed_tokens_cpu(self):
        if self._num_computed_tokens_cpu is None:
            starts = self.query_start_loc_cpu
            self._num_computed_tokens_cpu = self.seq_lens_cpu - (starts[1:] - starts[:-1])
        return self._num_computed_tokens_cpu

    def compute_num_computed_tokens(self):
        if self._num_computed_tokens_cache is None:
            self._num_computed_tokens_cache = self.seq_lens - (self.query_start_loc[1:]
                                                               - self.query_start_loc[:-1])
        return self._num_computed_tokens_cache


# -- vllm.v1.attention.backends.utils --------------------------------------------------------------

def split_decodes_and_prefills(common_attn_metadata, decode_threshold: int = 1,
                               require_uniform: bool = False,
                               treat_short_extends_as_decodes: bool = True):
    """(num_decodes, num_prefills, num_decode_tokens, num_prefill_tokens) of a batch whose
    decodes come first: the leading requests with query_len <= decode_threshold (and, unless
    short extends count as decodes, not prefilling) are decodes, the rest prefills."""
    m = common_attn_metadata
    starts = [int(x) for x in m.query_start_loc_cpu.tolist()]
    n = m.num_reqs
    lens = [starts[i + 1] - starts[i] for i in range(n)]
    prefilling = ([bool(x) for x in m.is_prefilling.tolist()] if m.is_prefilling is not None
                  else [False] * n)
    decodes = 0
    for i in range(n):
        is_decode = lens[i] <= decode_threshold and (treat_short_extends_as_decodes
                                                     or not prefilling[i])
        if require_uniform and decodes and lens[i] != lens[0]:
            is_decode = False
        if not is_decode:
            break
        decodes += 1
    decode_tokens = starts[decodes]
    return decodes, n - decodes, decode_tokens, starts[n] - decode_tokens


# -- vllm.v1.attention.backends.registry -----------------------------------------------------------

class AttentionBackendEnum(enum.Enum):
    """The members spyre-inference names (vLLM has more, each a backend class path)."""

    TORCH_SDPA = "torch_sdpa"
    FLEX_ATTENTION = "flex_attention"
    CUSTOM = None


class _Registry:
    """``register_backend``: the class paths registered during this load."""

    def __init__(self):
        self.backends: dict[Any, str] = {}

    def register(self, backend, class_path: str | None = None, is_mamba: bool = False):
        def decorator(cls):
            self.backends[backend] = f"{cls.__module__}.{cls.__qualname__}"
            return cls

        if class_path is None:
            return decorator
        self.backends[backend] = class_path
        return lambda cls: cls


# -- vllm.v1.kv_cache_interface --------------------------------------------------------------------

@dataclass(frozen=True)
class KVCacheSpec:
    block_size: int


@dataclass(frozen=True)
class AttentionSpec(KVCacheSpec):
    num_kv_heads: int
    head_size: int
    dtype: Any
    page_size_padded: int | None = None


@dataclass(frozen=True)
class FullAttentionSpec(AttentionSpec):
    """What the engine hands a decoder layer's builder; ``sliding_window`` set for a windowed
    layer kept in full blocks."""

    head_size_v: int | None = None
    sliding_window: int | None = None
    attention_chunk_size: int | None = None


@dataclass(frozen=True)
class SlidingWindowSpec(AttentionSpec):
    sliding_window: int = 0
    head_size_v: int | None = None


@dataclass(frozen=True)
class EncoderOnlyAttentionSpec(AttentionSpec):
    """An encoder-only layer: no K/V cache."""


# -- the module table ------------------------------------------------------------------------------

def _module(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    mod.__spyre_bench_standin__ = VLLM_VERSION
    return mod


#: The hooks :func:`open_modules` and :func:`close_modules` call on a stand-in module when its
#: load's window opens and ends.
OPEN, CLOSE = "__spyre_bench_open__", "__spyre_bench_close__"


def modules(handler: logging.Handler) -> dict[str, types.ModuleType]:
    """Every stand-in module by dotted name, packages with an empty ``__path__``; state (the
    current config, registered backends and custom ops) is this set's own."""
    current, registry, ops = _CurrentConfig(), _Registry(), _CustomOps()
    config = dict(VllmConfig=VllmConfig, CompilationMode=CompilationMode,
                  get_current_vllm_config=current.get,
                  get_current_vllm_config_or_none=current.get_or_none,
                  set_current_vllm_config=current.set,
                  get_cached_compilation_config=functools.partial(current.compilation_config))
    backend = dict(AttentionBackend=AttentionBackend, AttentionCGSupport=AttentionCGSupport,
                   AttentionImpl=AttentionImpl, AttentionLayer=AttentionLayer,
                   AttentionMetadata=AttentionMetadata,
                   AttentionMetadataBuilder=AttentionMetadataBuilder, AttentionType=AttentionType,
                   CommonAttentionMetadata=CommonAttentionMetadata, MultipleOf=MultipleOf)
    table = {
        "vllm": _module("vllm"),
        "vllm.config": _module("vllm.config", **config),
        "vllm.config.cache": _module("vllm.config.cache", CacheDType=str),
        "vllm.config.compilation": _module("vllm.config.compilation",
                                           CompilationMode=CompilationMode),
        "vllm.config.kernel": _module("vllm.config.kernel",
                                      IrOpPriorityConfig=IrOpPriorityConfig),
        "vllm.engine": _module("vllm.engine"),
        "vllm.engine.arg_utils": _module("vllm.engine.arg_utils", EngineArgs=EngineArgs),
        "vllm.logger": _module("vllm.logger", init_logger=_init_logger(handler)),
        "vllm.platforms": _module("vllm.platforms", PlatformEnum=PlatformEnum,
                                  Platform=Platform, current_platform=CpuPlatform()),
        "vllm.platforms.cpu": _module("vllm.platforms.cpu", CpuPlatform=CpuPlatform),
        "vllm.utils": _module("vllm.utils"),
        "vllm.utils.math_utils": _module("vllm.utils.math_utils", cdiv=cdiv,
                                         next_power_of_2=next_power_of_2),
        "vllm.utils.torch_utils": _module("vllm.utils.torch_utils",
                                          direct_register_custom_op=ops.register,
                                          _encode_layer_name=_encode_layer_name,
                                          **{CLOSE: ops.close}),
        "vllm.model_executor": _module("vllm.model_executor"),
        "vllm.model_executor.layers": _module("vllm.model_executor.layers"),
        "vllm.model_executor.layers.attention": _module("vllm.model_executor.layers.attention"),
        "vllm.model_executor.layers.attention.attention": _module(
            "vllm.model_executor.layers.attention.attention", Attention=Attention),
        "vllm.v1": _module("vllm.v1"),
        "vllm.v1.attention": _module("vllm.v1.attention"),
        "vllm.v1.attention.backend": _module("vllm.v1.attention.backend", **backend),
        "vllm.v1.attention.backends": _module("vllm.v1.attention.backends"),
        "vllm.v1.attention.backends.utils": _module(
            "vllm.v1.attention.backends.utils",
            split_decodes_and_prefills=split_decodes_and_prefills),
        "vllm.v1.attention.backends.registry": _module(
            "vllm.v1.attention.backends.registry", AttentionBackendEnum=AttentionBackendEnum,
            register_backend=registry.register, registered=registry.backends),
        "vllm.v1.kv_cache_interface": _module(
            "vllm.v1.kv_cache_interface", KVCacheSpec=KVCacheSpec, AttentionSpec=AttentionSpec,
            FullAttentionSpec=FullAttentionSpec, SlidingWindowSpec=SlidingWindowSpec,
            EncoderOnlyAttentionSpec=EncoderOnlyAttentionSpec),
    }
    # vllm_lib: the fragment ops register into (made on first use, like the ops)
    table["vllm.utils.torch_utils"].__getattr__ = (
        lambda name: ops.lib if name == "vllm_lib" else _no_attribute(name))
    for name, mod in table.items():
        if any(other.startswith(name + ".") for other in table):
            mod.__path__ = []
    for name, mod in table.items():
        parent, _, leaf = name.rpartition(".")
        if parent:
            setattr(table[parent], leaf, mod)
    return table


def _no_attribute(name: str):
    raise AttributeError(name)


def open_modules(table: dict[str, types.ModuleType]) -> None:
    """Start what a load's stand-ins do outside themselves while its window is open."""
    for mod in table.values():
        opened = mod.__dict__.get(OPEN)
        if opened is not None:
            opened()


def close_modules(table: dict[str, types.ModuleType]) -> None:
    """End what a load's stand-ins hold outside themselves (custom ops registered with torch)."""
    for mod in table.values():
        close = mod.__dict__.get(CLOSE)
        if close is not None:
            close()

