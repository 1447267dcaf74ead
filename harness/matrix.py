"""Config matrices: named tiers of block sizes, max_model_len, and env override sets.

``quick`` is sized for PR CI (tens of seconds per commit on two cores through a commit's own
builder), ``full`` for nightly hardware runs, ``tiny`` for tests and a first look. The named
override sets are the configurations the #810 review reasoned about.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from harness.config import (
    BATCHED_DECODE,
    KV_BUCKETS,
    NUM_SEQS_BUCKETS,
    QUERY_BUCKETS,
    EngineConfig,
    Overrides,
)
from harness.errors import ConfigError
from harness.presets import DEFAULT_PRESET, preset_config

_ON = {BATCHED_DECODE: "1"}

OVERRIDE_SETS: dict[str, dict[str, str]] = {
    "none": {},
    "batched": dict(_ON),
    # review point 2: entries above max_model_len (top-up keeps them)
    "kv-above-limit": {**_ON, KV_BUCKETS: "128,8192"},
    # review point 5: a sparse kv ladder, the only way the batched ladder shortens
    "kv-sparse": {**_ON, KV_BUCKETS: "512,1024,2048"},
    # recorded num_seqs entries below the batching minimum of 4: dead warmup variants
    "num-seqs-low": {**_ON, NUM_SEQS_BUCKETS: "1,2,4"},
    # no query bucket 1: decodes compile outside warmup
    "query-no-1": {**_ON, QUERY_BUCKETS: "512,2048"},
    # the attention paths the newest envs.py offers (a commit without the knob: a skip naming it)
    "head-major": {**_ON, "SPYRE_ATTN_KV_LAYOUT": "head_major"},
    "python-loops": {**_ON, "SPYRE_ATTN_FOR_EACH_TILE": "0"},
    "jagged": {"SPYRE_JAGGED_ATTENTION": "1"},
}
#: Every variable a named set gives: known to the harness, so a subject lacking one skips
#: (one no set names and no subject declares is a usage error: harness.cli.options).
SET_VARIABLES = frozenset(name for env in OVERRIDE_SETS.values() for name in env)
#: The override sets of the original review's questions (every subject, the reference included).
REVIEW_SETS = ("none", "batched", "kv-above-limit", "kv-sparse", "num-seqs-low", "query-no-1")


@dataclass(frozen=True)
class Tier:
    description: str
    block_sizes: tuple[int, ...]
    max_model_lens: tuple[int, ...]
    override_sets: tuple[str, ...]
    max_num_seqs: tuple[int, ...] = (32,)
    steps: int = 32
    #: The mixes ``kernel`` runs on this tier when none is named (None: every mix). Exact
    #: figures take every mix (milliseconds each); a kernel unit compiles and times.
    kernel_mixes: tuple[str, ...] | None = None
    #: Speculative tokens per step (0: no drafter), and the model shapes (harness.presets).
    spec_tokens: tuple[int, ...] = (0,)
    presets: tuple[str, ...] = (DEFAULT_PRESET,)

    @property
    def ladder_positions(self) -> int:
        """Entries of the tier's longest doubling ladder: num_blocks from 1 block to its largest
        max_model_len at its smallest block size (as many as kv from 64 tokens): quick 10, full
        12, tiny 6. ``exact.Ladder`` sums each ladder over that many positions."""
        return (max(self.max_model_lens) // min(self.block_sizes)).bit_length()


TIERS: dict[str, Tier] = {
    "quick": Tier("PR CI: 4 block sizes x 4 max_model_len x 4 override sets",
                  (64, 128, 192, 256), (256, 2048, 8192, 32768),
                  ("none", "batched", "kv-above-limit", "kv-sparse"), steps=8),
    # The review's two findings in four configs (bs 192's ladder, the kv override above the
    # limit): the suite's own integration tests, and a first look on a laptop. Its kernel run
    # times the review's four 3-block decodes and a two-length mix: under 30 s on two cores.
    "tiny": Tier("tests and a first look: 2 block sizes x 1 max_model_len x 2 override sets",
                 (64, 192), (2048,), ("batched", "kv-above-limit"), steps=4,
                 kernel_mixes=("four-3-block-decodes", "bimodal")),
    # Sized for a nightly ASV run: every tracked figure is one benchmark process per combination
    # (about 10 ms each), so 360 configs x 8 workloads is minutes, not hours.
    "full": Tier("nightly: 6 block sizes x 5 max_model_len x every override set x 2 max_num_seqs "
                 "x 0 and 3 speculative tokens",
                 (64, 128, 192, 256, 320, 512), (256, 2048, 8192, 32768, 131072),
                 tuple(OVERRIDE_SETS), max_num_seqs=(8, 32), steps=64, spec_tokens=(0, 3)),
}


@dataclass(frozen=True)
class Case:
    """One cell of the matrix: a config and the overrides it runs under."""

    config: EngineConfig
    overrides: Overrides
    overrides_name: str = field(default="custom")
    #: The model shape it was made from (harness.presets)
    preset: str = DEFAULT_PRESET

    def label(self) -> str:
        shape = f" preset={self.preset}" if self.preset != DEFAULT_PRESET else ""
        return f"{self.config.label()}{shape} env={self.overrides_name}"

    def key(self) -> dict:
        """The identifying fields, for JSON rows and ASV params."""
        return {"block_size": self.config.block_size, "max_model_len": self.config.max_model_len,
                "max_num_seqs": self.config.max_num_seqs,
                "max_num_batched_tokens": self.config.max_num_batched_tokens,
                "overrides": self.overrides_name, "env": self.overrides.as_env(),
                # only when set: every full-attention case keeps the key it always had, and so
                # does one of the default shape without a drafter
                **({"sliding_window": self.config.sliding_window}
                   if self.config.sliding_window else {}),
                **({"preset": self.preset} if self.preset != DEFAULT_PRESET else {}),
                **({"spec_tokens": self.config.spec_tokens} if self.config.spec_tokens else {})}


def override_set(name: str) -> Overrides:
    if name not in OVERRIDE_SETS:
        raise ConfigError(f"unknown override set {name!r}; known: {', '.join(OVERRIDE_SETS)}")
    return Overrides.from_env(OVERRIDE_SETS[name])


def expand(base: EngineConfig, block_sizes, max_model_lens, max_num_seqs,
           overrides: list[tuple[str, Overrides]], spec_tokens=(0,),
           presets: dict[str, EngineConfig] | None = None) -> list[Case]:
    """The cross product, in a stable order (presets outermost, then speculative tokens,
    overrides, bs, mml, mns); ``presets`` maps a preset's name to its base (default: ``base``
    as the default preset)."""
    cases = []
    for (shape, config0), spec, (name, ov), bs, mml, mns in itertools.product(
            (presets or {DEFAULT_PRESET: base}).items(), spec_tokens, overrides, block_sizes,
            max_model_lens, max_num_seqs):
        config = config0.replace(block_size=bs, max_model_len=mml, max_num_seqs=mns,
                                 spec_tokens=spec)
        cases.append(Case(config, ov, name, shape))
    return cases


def tier_cases(name: str, base: EngineConfig | None = None) -> list[Case]:
    if name not in TIERS:
        raise ConfigError(f"unknown tier {name!r}; known: {', '.join(TIERS)}")
    t = TIERS[name]
    presets = ({DEFAULT_PRESET: base} if base is not None
               else {p: preset_config(p) for p in t.presets})
    return expand(base or EngineConfig(), t.block_sizes, t.max_model_lens, t.max_num_seqs,
                  [(o, override_set(o)) for o in t.override_sets], t.spec_tokens, presets)


#: The fields of a case key that name a case, in label order.
CASE_FIELDS = ("preset", "block_size", "max_model_len", "max_num_seqs", "sliding_window",
               "spec_tokens", "overrides", "workload")
#: Short names of the case parameters, in labels and comment headings.
PARAM_SHORT = {"block_size": "bs", "max_model_len": "mml", "max_num_seqs": "mns", "overrides": "env",
               "workload": "workload", "sliding_window": "sw", "preset": "preset",
               "spec_tokens": "spec"}


def case_variant(params: dict) -> str:
    """A table's overrides cell: the override set, and the model shape and speculative tokens
    where they are not the default (``batched · spec 3``)."""
    extra = [f"{PARAM_SHORT[k]} {params[k]}" for k in ("preset", "spec_tokens") if k in params]
    return " · ".join([str(params["overrides"]), *extra])


def case_label(params: dict) -> str:
    """``bs 192, mml 2048, mns 32, env batched`` (+ workload), in a stable field order."""
    parts = [f"{PARAM_SHORT[k]} {params[k]}" for k in CASE_FIELDS if k in params]
    parts += [f"{k} {v}" for k, v in sorted(params.items()) if k not in PARAM_SHORT]
    return ", ".join(parts)
