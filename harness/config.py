"""Engine config and env overrides: the inputs a bucketer sees, validated before they reach it.

Validation mirrors what spyre-inference (or the platform under it) would reject, with messages
that name the field, so a bad matrix fails on the harness's side in one clear line.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.ladders import Ladder, ceil_div

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
#: K/V cache dtypes a config may name (vLLM's ``CacheDType`` names the Spyre backends know of:
#: "auto" is the model dtype; the FP8 names are those the newest head-major backends accept).
#: Whether a commit takes one is its own answer: a backend that refuses it is that config's skip.
KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")
#: Fields one layer of a heterogeneous model may override (vLLM's ``per_layer_overrides``),
#: by the harness's name, with the name of vLLM's ``ModelArchitectureConfig`` field.
LAYER_FIELDS = {"num_kv_heads": "total_num_kv_heads", "head_size": "head_size"}
#: Most speculative tokens a config may name: past this no verify step fits a token budget.
MAX_SPEC_TOKENS = 64

KV_BUCKETS = "SPYRE_ATTN_KV_BUCKETS"
QUERY_BUCKETS = "SPYRE_ATTN_QUERY_BUCKETS"
NUM_SEQS_BUCKETS = "SPYRE_ATTN_NUM_SEQS_BUCKETS"
BATCHED_DECODE = "SPYRE_BATCHED_DECODE"
#: The bucket overrides and the batched-decode switch: every generation of the bucketer reads
#: them, and the embedded reference models them.
BUCKET_VARS = (KV_BUCKETS, QUERY_BUCKETS, NUM_SEQS_BUCKETS, BATCHED_DECODE)

#: Short names (in labels) of knobs the tiers sweep. Which knobs a commit offers, their defaults
#: and how it reads them are its own ``envs.py``'s (harness.subjects.source.knobs), never a list
#: here: a knob its registry lacks is a skip naming it, one no subject declares a usage error.
LABELS = {KV_BUCKETS: "kv", QUERY_BUCKETS: "query", NUM_SEQS_BUCKETS: "num_seqs",
          BATCHED_DECODE: "batched", "SPYRE_ATTN_KV_LAYOUT": "layout",
          "SPYRE_ATTN_FOR_EACH_TILE": "for_each_tile", "SPYRE_ATTN_MAX_CORES": "max_cores",
          "SPYRE_ATTN_RECORD": "record", "SPYRE_JAGGED_ATTENTION": "jagged",
          "SPYRE_JAGGED_PARALLEL_ENTRIES": "jagged_entries",
          "SPYRE_MAX_NUM_PARTIAL_PREFILLS": "partial_prefills",
          "SPYRE_COMPILE_GRANULARITY": "granularity"}
#: The variables a load window always clears (with every one the commit's registry declares).
ENV_VARS = tuple(LABELS)
#: What an env variable's name may be (an override naming anything else is a typo).
ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
#: Batched decode needs at least this many decodes in a step (spyre-inference's metadata builder,
#: docs/spyre-inference.md, section 2); fewer run per sequence.
MIN_BATCHED_SEQS = 4
#: Host-to-device bytes one step may need before the config is called absurd: more than any
#: accelerator's memory, so no engine could run such a step and the figure would mislead.
MAX_STEP_BYTES = 64 << 30
#: Largest size field: block ids, sequence lengths and slot numbers are int32 on the device, so a
#: size past it is no config the code under test could run.
MAX_SIZE = 2**31 - 1
#: Bytes per K/V page and per token of the index tensors a full step needs on the harness's side
#: (page permutation int64, block table int32, fill mask; slot mapping and positions int64).
PAGE_INDEX_BYTES, TOKEN_INDEX_BYTES = 16, 24

@dataclass(frozen=True)
class EngineConfig:
    """The vLLM settings the attention path depends on, plus the model's head layout."""

    block_size: int = 64
    max_model_len: int = 2048
    max_num_seqs: int = 32
    max_num_batched_tokens: int = 2048
    num_kv_heads: int = 8
    queries_per_kv: int = 4
    head_size: int = 128
    dtype: str = "float16"
    num_layers: int = 40
    #: The model's attention window in tokens (None: full attention), handed to the builder's
    #: K/V cache spec, the impl and (generation 4 on) the bucketer, as the engine does.
    sliding_window: int | None = None
    #: The K/V cache's dtype (``cache_config.cache_dtype``, the impl's ``kv_cache_dtype``).
    kv_cache_dtype: str = "auto"
    #: Draft tokens a speculative-decoding engine verifies per step
    #: (``speculative_config.num_speculative_tokens``; 0: no speculative config at all).
    spec_tokens: int = 0
    #: Per layer, the fields of :data:`LAYER_FIELDS` whose value differs from the model-wide one
    #: (vLLM's ``model_arch_config.per_layer_overrides``), as ``((name, value), ...)`` per layer;
    #: None for a model whose layers all agree.
    layer_overrides: tuple[tuple[tuple[str, int], ...], ...] | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in ("sliding_window", "layer_overrides") and value is None:
                continue
            if field.name == "dtype":
                if value not in DTYPE_BYTES:
                    raise ConfigError(f"dtype must be one of {sorted(DTYPE_BYTES)}, got {value!r}")
                continue
            if field.name == "kv_cache_dtype":
                if value not in KV_CACHE_DTYPES:
                    raise ConfigError(f"kv_cache_dtype must be one of "
                                      f"{', '.join(KV_CACHE_DTYPES)}, got {value!r}")
                continue
            if field.name == "layer_overrides":
                self._check_layers(value)
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{field.name} must be an integer, got {value!r}")
            if field.name == "spec_tokens":
                if not 0 <= value <= MAX_SPEC_TOKENS:
                    raise ConfigError(f"spec_tokens must be a non-negative integer <= "
                                      f"{MAX_SPEC_TOKENS}, got {value}")
                continue
            if value < 1:
                raise ConfigError(f"{field.name} must be >= 1, got {value}")
            if value > MAX_SIZE:
                raise ConfigError(f"{field.name} must be <= {MAX_SIZE} (int32 on the device), "
                                  f"got {value}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            # vLLM's SchedulerConfig refuses this: a step could not hold one token per sequence.
            raise ConfigError(f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                              f"max_num_seqs ({self.max_num_seqs}), as vLLM requires")
        if self.block_size % 64:
            raise ConfigError(
                f"block_size must be a multiple of 64 (Spyre's stick width), got {self.block_size}")
        self._check_footprint()

    def _check_layers(self, layers) -> None:
        """One entry per layer, each naming fields of :data:`LAYER_FIELDS` with a value no
        larger than the model-wide one (vLLM's whole-model value is the largest layer's)."""
        if not isinstance(layers, tuple) or len(layers) != self.num_layers:
            raise ConfigError(f"layer_overrides must hold one entry per layer ({self.num_layers})")
        for index, layer in enumerate(layers):
            for name, value in layer:
                if name not in LAYER_FIELDS:
                    raise ConfigError(f"layer {index}: {name!r} cannot differ per layer; "
                                      f"known: {', '.join(LAYER_FIELDS)}")
                if isinstance(value, bool) or not isinstance(value, int) or \
                        not 1 <= value <= getattr(self, name):
                    raise ConfigError(f"layer {index}: {name} must be an integer from 1 to the "
                                      f"model-wide {getattr(self, name)}, got {value!r}")

    def layer(self, index: int) -> dict[str, int]:
        """Layer ``index``'s own values of :data:`LAYER_FIELDS` (the model-wide ones where it
        overrides none)."""
        own = dict(self.layer_overrides[index]) if self.layer_overrides else {}
        return {name: own.get(name, getattr(self, name)) for name in LAYER_FIELDS}

    def footprint(self) -> int:
        """Bytes the index tensors of one full step take (every sequence at max_model_len, a
        full token budget): what the harness allocates for this config before any kernel."""
        pages = 1 + self.max_num_seqs * ceil_div(self.max_model_len, self.block_size)
        return PAGE_INDEX_BYTES * pages + TOKEN_INDEX_BYTES * self.max_num_batched_tokens

    def _check_footprint(self) -> None:
        """Refuse, before anything is allocated, a config whose full step would need more than
        half this machine's memory: one line, not an allocator's traceback or a swap storm."""
        need, have = self.footprint(), machine_memory()
        if need > have // 2:
            raise ConfigError(
                f"max_num_seqs={self.max_num_seqs} x max_model_len={self.max_model_len} "
                f"(block_size {self.block_size}), max_num_batched_tokens="
                f"{self.max_num_batched_tokens}: a full step needs {need / 2**30:.3g} GiB of "
                f"index tensors, above half this machine's {have / 2**30:.3g} GiB")

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def num_heads(self) -> int:
        return self.num_kv_heads * self.queries_per_kv

    def replace(self, **changes) -> EngineConfig:
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def label(self) -> str:
        window = f" sw={self.sliding_window}" if self.sliding_window else ""
        spec = f" spec={self.spec_tokens}" if self.spec_tokens else ""
        kv = f" kv={self.kv_cache_dtype}" if self.kv_cache_dtype != "auto" else ""
        return f"bs={self.block_size} mml={self.max_model_len}{window}{spec}{kv}"


@functools.cache
def machine_memory() -> int:
    """Physical memory of this machine in bytes (64 GiB where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 64 << 30


def parse_bucket_list(name: str, raw: str | None) -> Ladder | None:
    """Parse a comma-separated bucket override the way spyre-inference does, with clear errors.

    Unset or exactly "" means no override; empty fields are skipped; the result is sorted and
    de-duplicated; Python int spellings (``+64``, ``1_024``) are accepted.
    """
    if raw is None or raw == "":
        return None
    fields = [f for f in raw.split(",") if f != ""]
    if not fields:
        raise ConfigError(f"{name}={raw!r}: no bucket sizes in it (expected e.g. 128,512,2048)")
    values = set()
    for field in fields:
        try:
            value = int(field)
        except ValueError:
            raise ConfigError(f"{name}={raw!r}: {field!r} is not an integer") from None
        if value < 1:
            raise ConfigError(f"{name}={raw!r}: bucket sizes must be >= 1, got {value}")
        values.add(value)
    return tuple(sorted(values))


def parse_flag(name: str, raw: str | None) -> int | None:
    """SPYRE_BATCHED_DECODE is parsed as an integer by spyre-inference ("" and "true" raise)."""
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: must be an integer (0 = off, 1 = on)") from None


@dataclass(frozen=True)
class Overrides:
    """The env overrides of one run, parsed; ``raw`` keeps the exact strings for the subject."""

    raw: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # Parse eagerly so a malformed override fails when the matrix is built, not mid-run.
        for name, value in self.raw:
            if not ENV_NAME.fullmatch(name):
                raise ConfigError(f"unknown override {name!r}: not an environment variable name "
                                  f"(e.g. {KV_BUCKETS})")
            if name == BATCHED_DECODE:
                parse_flag(name, value)
            elif name in BUCKET_VARS:
                parse_bucket_list(name, value)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Overrides:
        env = env or {}
        return cls(tuple(sorted((k, str(v)) for k, v in env.items())))

    @classmethod
    def parse(cls, assignments: list[str]) -> Overrides:
        """From ``KEY=VALUE`` strings (the CLI's ``--env``)."""
        env: dict[str, str] = {}
        for item in assignments:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--env {item!r}: expected KEY=VALUE, e.g. {KV_BUCKETS}=128,8192")
            key = key.strip()
            if key in env:
                # Keeping the last one silently would measure something the user did not ask.
                raise ConfigError(f"--env {key} given twice ({env[key]!r} and {value!r}); "
                                  "give it once")
            env[key] = value
        return cls.from_env(env)

    def get(self, name: str) -> str | None:
        return dict(self.raw).get(name)

    @property
    def kv(self) -> Ladder | None:
        return parse_bucket_list(KV_BUCKETS, self.get(KV_BUCKETS))

    @property
    def query(self) -> Ladder | None:
        return parse_bucket_list(QUERY_BUCKETS, self.get(QUERY_BUCKETS))

    @property
    def num_seqs(self) -> Ladder | None:
        return parse_bucket_list(NUM_SEQS_BUCKETS, self.get(NUM_SEQS_BUCKETS))

    @property
    def batched_decode(self) -> bool:
        return bool(parse_flag(BATCHED_DECODE, self.get(BATCHED_DECODE)))

    def as_env(self) -> dict[str, str]:
        return dict(self.raw)

    @property
    def knobs(self) -> dict[str, str]:
        """The attention-path knobs given (beyond the bucket overrides)."""
        return {k: v for k, v in self.raw if k not in BUCKET_VARS}

    def label(self) -> str:
        if not self.raw:
            return "none"
        return " ".join(f"{LABELS.get(k, k)}={v}" for k, v in self.raw)

    def with_env(self, **env: str) -> Overrides:
        merged = self.as_env()
        merged.update(env)
        return Overrides.from_env(merged)


def is_default_env(env: Mapping[str, str]) -> bool:
    """No env override beyond the batched-decode switch: the ladders are the code's defaults."""
    return not (set(env) - {BATCHED_DECODE})


def check_step_bytes(nbytes: int, where: str, limit: int = MAX_STEP_BYTES) -> None:
    """Refuse a step whose host-to-device bytes exceed ``limit``, naming the figure."""
    if nbytes > limit:
        raise ConfigError(f"{where}: a step needs {nbytes:.3g} bytes host-to-device "
                          f"({nbytes / 2**30:.3g} GiB), above the {limit / 2**30:g} GiB limit; "
                          "an absurd bucket override?")
