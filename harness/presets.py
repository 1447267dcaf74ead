"""Named model shapes: what a model hands the attention path (heads, head size, layers, per-layer
differences, dtypes), so a config says "this model" rather than six flags.

Each preset is the shape of a published model configuration (``config.json``: attention and
key/value heads, head size, layers, window), or a shape that exercises a rule of today's code
(a layer with one K/V head: the head-major bucketer's two-page minimum). The engine's own sizes
(block size, max_model_len, batch limits) stay the matrix's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.config import EngineConfig
from harness.errors import ConfigError

#: Layers of :data:`PRESETS` ``mixed-kv-heads``: every sixth one a full-attention layer with a
#: single K/V head, the others grouped-query with the model-wide eight.
_MIXED_LAYERS = 12


@dataclass(frozen=True)
class Preset:
    description: str
    #: EngineConfig fields the preset sets (the rest keep their defaults).
    fields: dict = field(default_factory=dict)


PRESETS: dict[str, Preset] = {
    # the harness's default shape: 32 query heads over 8 K/V heads of 128, 40 layers, float16
    "granite-3.3-8b": Preset("32 query / 8 KV heads of 128, 40 layers, float16 (the default)"),
    "llama-3.1-8b": Preset("32 query / 8 KV heads of 128, 32 layers, bfloat16",
                           {"num_layers": 32, "dtype": "bfloat16"}),
    "mistral-7b-v0.1": Preset("32 query / 8 KV heads of 128, 32 layers, a 4096-token window",
                              {"num_layers": 32, "sliding_window": 4096}),
    "mqa": Preset("multi-query: 32 query heads over one KV head of 128, 40 layers",
                  {"num_kv_heads": 1, "queries_per_kv": 32}),
    "mixed-kv-heads": Preset(
        "16 query / 8 KV heads of 256 over 12 layers, every sixth a full-attention layer with "
        "one KV head (per-layer overrides, as vLLM's model_arch_config holds them)",
        {"num_kv_heads": 8, "queries_per_kv": 2, "head_size": 256, "num_layers": _MIXED_LAYERS,
         "layer_overrides": tuple(((("num_kv_heads", 1),) if i % 6 == 5 else ())
                                  for i in range(_MIXED_LAYERS))}),
    "granite-3.3-8b-fp8": Preset("the default shape with an FP8 (e4m3) K/V cache",
                                 {"kv_cache_dtype": "fp8"}),
}
DEFAULT_PRESET = "granite-3.3-8b"


def preset(name: str) -> Preset:
    found = PRESETS.get(name)
    if found is None:
        raise ConfigError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return found


def preset_config(name: str, **changes) -> EngineConfig:
    """The preset's config with ``changes`` (the matrix's sizes, flags given) on top."""
    return EngineConfig(**{**preset(name).fields, **changes})
