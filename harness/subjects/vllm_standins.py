"""Small stand-ins for the vLLM names spyre-inference's attention backend imports.

A by-path load of ``v1/attention/backends/spyre_attn.py`` needs vLLM's config objects, its logger,
the attention base classes, ``CommonAttentionMetadata``, ``split_decodes_and_prefills`` and
``AttentionSpec``. These follow vLLM 0.27's documented behaviour (the version spyre-inference pins),
reduced to what a metadata builder and an attention impl use: plain classes and dataclasses, no
torch import here (tensors arrive from the caller and are only duck-typed).

Any name not provided here is missing on purpose: ``from vllm.x import Name`` then fails with
Python's own "cannot import name 'Name' from 'vllm.x'", which the harness reports as the exact
thing a commit needs that no stand-in covers. ``torch_spyre`` is not stood in at all.
"""

from __future__ import annotations

import enum
import logging
import types
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

#: The vLLM release these stand-ins follow.
VLLM_VERSION = "0.27"


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


_CURRENT: list[Any] = []


def get_current_vllm_config() -> Any:
    """The config set by the innermost ``set_current_vllm_config`` (vLLM: a default otherwise)."""
    if not _CURRENT:
        raise RuntimeError("get_current_vllm_config() outside set_current_vllm_config() "
                           "(spyre-bench stand-in)")
    return _CURRENT[-1]


@contextmanager
def set_current_vllm_config(config: Any):
    _CURRENT.append(config)
    try:
        yield config
    finally:
        _CURRENT.pop()


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


def logger_module(handler: logging.Handler) -> types.ModuleType:
    """``vllm.logger``: ``init_logger`` returns a fresh logger outside logging's registry, whose
    records go to ``handler`` only (nothing of it outlives the load)."""
    mod = types.ModuleType("vllm.logger")

    def init_logger(name: str) -> logging.Logger:
        log = _Logger(name)
        log.propagate = False
        log.addHandler(handler)
        return log

    mod.init_logger = init_logger
    return mod


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
                                      supports_spec_as_decode: bool = False) -> None:
        self.reorder_batch_threshold = reorder_batch_threshold


@dataclass
class CommonAttentionMetadata:
    """Per-step metadata every backend's builder receives (vLLM 0.27 field names)."""

    query_start_loc: Any
    query_start_loc_cpu: Any
    seq_lens: Any
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: Any
    slot_mapping: Any
    causal: bool = True
    is_prefilling: Any = None
    seq_lens_cpu: Any = None
    num_computed_tokens_cpu: Any = None


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


# -- vllm.v1.kv_cache_interface --------------------------------------------------------------------

@dataclass(frozen=True)
class AttentionSpec:
    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: Any
    sliding_window: int | None = None


FullAttentionSpec = AttentionSpec


# -- the module table ------------------------------------------------------------------------------

def _module(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    mod.__spyre_bench_standin__ = VLLM_VERSION
    return mod


def modules(handler: logging.Handler) -> dict[str, types.ModuleType]:
    """Every stand-in module by dotted name, packages with an empty ``__path__``."""
    table = {
        "vllm": _module("vllm"),
        "vllm.config": _module("vllm.config", VllmConfig=VllmConfig,
                               CompilationMode=CompilationMode,
                               get_current_vllm_config=get_current_vllm_config,
                               set_current_vllm_config=set_current_vllm_config),
        "vllm.config.cache": _module("vllm.config.cache", CacheDType=str),
        "vllm.logger": logger_module(handler),
        "vllm.v1": _module("vllm.v1"),
        "vllm.v1.attention": _module("vllm.v1.attention"),
        "vllm.v1.attention.backend": _module(
            "vllm.v1.attention.backend", AttentionBackend=AttentionBackend,
            AttentionCGSupport=AttentionCGSupport, AttentionImpl=AttentionImpl,
            AttentionLayer=AttentionLayer, AttentionMetadata=AttentionMetadata,
            AttentionMetadataBuilder=AttentionMetadataBuilder, AttentionType=AttentionType,
            CommonAttentionMetadata=CommonAttentionMetadata, MultipleOf=MultipleOf),
        "vllm.v1.attention.backends": _module("vllm.v1.attention.backends"),
        "vllm.v1.attention.backends.utils": _module(
            "vllm.v1.attention.backends.utils",
            split_decodes_and_prefills=split_decodes_and_prefills),
        "vllm.v1.kv_cache_interface": _module("vllm.v1.kv_cache_interface",
                                              AttentionSpec=AttentionSpec,
                                              FullAttentionSpec=FullAttentionSpec),
    }
    for name, mod in table.items():
        if any(other.startswith(name + ".") for other in table):
            mod.__path__ = []
    for name, mod in table.items():
        parent, _, leaf = name.rpartition(".")
        if parent:
            setattr(table[parent], leaf, mod)
    return table
