"""What the engine hands the commit's code: its config (a stand-in VllmConfig), constructor
arguments by name, and vLLM's CommonAttentionMetadata from the values it takes."""

from __future__ import annotations

import inspect

from harness.config import EngineConfig
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

