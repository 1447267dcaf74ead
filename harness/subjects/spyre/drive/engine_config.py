"""What the engine hands the commit's code: its config (a stand-in VllmConfig, one object for
the bucketer and the builder), constructor arguments by name, and vLLM's CommonAttentionMetadata
from the values it takes."""

from __future__ import annotations

import inspect
import sys

from harness.config import LAYER_FIELDS, EngineConfig
from harness.subjects.spyre.drive.errors import NotDrivable


class Section:
    """Exactly the attributes given; any other is an AttributeError naming what is provided."""

    def __init__(self, path: str, **values):
        self.__dict__.update(values)
        self.__dict__["_path"] = path

    def __getattr__(self, name: str):
        given = ", ".join(k for k in self.__dict__ if not k.startswith("_"))
        raise AttributeError(f"{self._path}.{name} is not provided by spyre-bench (it provides "
                             f"{given})")


class ArchConfig(Section):
    """``model_config.model_arch_config`` (vLLM's ``ModelArchitectureConfig``): the model-wide
    head layout, and ``per_layer_overrides`` (None unless a layer differs); ``arch[i]`` is layer
    i's own, as vLLM's ``__getitem__`` gives it."""

    def __getitem__(self, index: int):
        if index < 0:
            raise IndexError(f"layer index must not be negative, got {index}")
        if self.per_layer_overrides is None:
            return self
        return ArchConfig(f"{self._path}[{index}]", **{
            **{k: v for k, v in self.__dict__.items() if not k.startswith("_")},
            "per_layer_overrides": None, **self.per_layer_overrides[index]})


def _arch(config: EngineConfig) -> ArchConfig:
    layers = None
    if config.layer_overrides is not None:
        layers = [{LAYER_FIELDS[name]: value for name, value in layer}
                  for layer in config.layer_overrides]
    return ArchConfig("vllm_config.model_config.model_arch_config",
                      total_num_attention_heads=config.num_heads,
                      total_num_kv_heads=config.num_kv_heads, head_size=config.head_size,
                      total_num_hidden_layers=config.num_layers, per_layer_overrides=layers)


#: One device, no decode context parallelism: what vLLM's ParallelConfig says for it.
TENSOR_PARALLEL_SIZE = 1


def engine_vllm_config(config: EngineConfig):
    """The engine config the commit's code reads, the same for the bucketer and the builder
    (the builder of today's trees constructs its own bucketer from it): every section and method
    of vLLM's ``VllmConfig`` the attention path reads, from ``config`` alone. Call it inside a
    load window: the compilation mode is the loaded vLLM's (stand-in or real) torch.compile."""
    import torch

    from harness.subjects.load.vllm_standins import VllmConfig

    modes = getattr(sys.modules.get("vllm.config"), "CompilationMode", None)
    arch = _arch(config)
    parallel = Section("vllm_config.parallel_config", tensor_parallel_size=TENSOR_PARALLEL_SIZE,
                       decode_context_parallel_size=1, pipeline_parallel_size=1)

    def kv_heads(parallel_config=None, arch_config=None):
        """``get_num_kv_heads``: a layer's (``arch_config``) or the model's, over the TP
        split, at least one (vLLM's rule)."""
        total = (arch_config or arch).total_num_kv_heads
        return max(1, total // (parallel_config or parallel).tensor_parallel_size)

    def attention_heads(parallel_config=None, arch_config=None):
        total = (arch_config or arch).total_num_attention_heads
        return total // (parallel_config or parallel).tensor_parallel_size

    model = Section("vllm_config.model_config", max_model_len=config.max_model_len,
                    dtype=getattr(torch, config.dtype), runner_type="generate",
                    model_arch_config=arch, use_mla=False,
                    get_num_attention_heads=attention_heads, get_num_kv_heads=kv_heads,
                    get_head_size=lambda: arch.head_size,
                    get_total_num_kv_heads=lambda: arch.total_num_kv_heads,
                    get_sliding_window=lambda: config.sliding_window)
    speculative = None
    if config.spec_tokens:
        # a draft model proposing one token at a time (parallel drafting off): what vLLM's
        # builder base reads of it (AttentionMetadataBuilder._init_reorder_batch_threshold)
        speculative = Section("vllm_config.speculative_config",
                              num_speculative_tokens=config.spec_tokens, parallel_drafting=False)
    return VllmConfig(
        cache_config=Section("vllm_config.cache_config", block_size=config.block_size,
                             cache_dtype=config.kv_cache_dtype),
        model_config=model,
        scheduler_config=Section("vllm_config.scheduler_config",
                                 max_num_batched_tokens=config.max_num_batched_tokens,
                                 max_num_seqs=config.max_num_seqs),
        parallel_config=parallel,
        speculative_config=speculative,
        compilation_config=Section("vllm_config.compilation_config",
                                   mode=getattr(modes, "STOCK_TORCH_COMPILE", None),
                                   static_forward_context={}))


def kv_cache_torch_dtype(config: EngineConfig):
    """The K/V cache spec's dtype: the model's for "auto", else the named one, an FP8 cache as
    vLLM sizes it (bytes: ``torch.uint8``; the backend allocates its pages as e4m3)."""
    import torch

    if config.kv_cache_dtype == "auto":
        return getattr(torch, config.dtype)
    if config.kv_cache_dtype.startswith("fp8"):
        return torch.uint8
    return getattr(torch, config.kv_cache_dtype)


def construct(cls, known: dict, what: str):
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

