"""Workloads: named, seeded batch mixes sized from the config, and replayed trace files.

A workload is a sequence of scheduler steps; a step is the batch the metadata builder sees: one
(seq_len, query_len) per sequence, where seq_len counts every KV token including the new ones and
query_len is 1 for a decode. Generators are deterministic for a (name, config, steps, seed).
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.config import MIN_BATCHED_SEQS, EngineConfig
from harness.errors import HarnessError, TraceError

DEFAULT_STEPS = 32


@dataclass(frozen=True)
class Seq:
    seq_len: int
    query_len: int = 1

    @property
    def is_decode(self) -> bool:
        return self.query_len == 1


Step = tuple[Seq, ...]


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    steps: tuple[Step, ...]
    #: Where each step came from ("trace.txt:7", "mix uniform-short step 3"), for error messages.
    origins: tuple[str, ...] = ()

    def origin(self, index: int) -> str:
        return self.origins[index] if self.origins else f"{self.name} step {index}"

    def check_fits(self, config: EngineConfig) -> None:
        """Reject steps the engine could never schedule under ``config``, naming the step."""
        for i, step in enumerate(self.steps):
            where = self.origin(i)
            if len(step) > config.max_num_seqs:
                raise TraceError(f"{where}: {len(step)} sequences > max_num_seqs "
                                 f"{config.max_num_seqs}")
            tokens = sum(s.query_len for s in step)
            if tokens > config.max_num_batched_tokens:
                raise TraceError(f"{where}: {tokens} scheduled tokens > max_num_batched_tokens "
                                 f"{config.max_num_batched_tokens}")
            longest = max(s.seq_len for s in step)
            if longest > config.max_model_len:
                raise TraceError(f"{where}: seq_len {longest} > max_model_len "
                                 f"{config.max_model_len}")


# -- generated mixes ---------------------------------------------------------------------------

Generator = Callable[[EngineConfig, random.Random], Step]


def _batch_size(config: EngineConfig, rng: random.Random) -> int:
    """A batch the batched path can take: between the minimum and max_num_seqs."""
    lo = min(MIN_BATCHED_SEQS, config.max_num_seqs)
    return rng.randint(lo, config.max_num_seqs)


def _decodes(config, rng, length: Callable[[], int]) -> Step:
    return tuple(Seq(max(1, min(config.max_model_len, length())))
                 for _ in range(_batch_size(config, rng)))


def _uniform_short(c: EngineConfig, rng: random.Random) -> Step:
    return _decodes(c, rng, lambda: rng.randint(1, max(1, c.max_model_len // 8)))


def _uniform_long(c: EngineConfig, rng: random.Random) -> Step:
    return _decodes(c, rng, lambda: rng.randint(max(1, c.max_model_len // 2), c.max_model_len))


def _long_tail(c: EngineConfig, rng: random.Random) -> Step:
    scale = max(1, c.max_model_len // 64)
    return _decodes(c, rng, lambda: round(scale * rng.paretovariate(1.1)))


def _bimodal(c: EngineConfig, rng: random.Random) -> Step:
    short = min(c.max_model_len, 2 * c.block_size)
    def length() -> int:
        if rng.random() < 0.5:
            return rng.randint(1, short)
        return rng.randint(max(1, 3 * c.max_model_len // 4), c.max_model_len)
    return _decodes(c, rng, length)


def _all_at_max(c: EngineConfig, rng: random.Random) -> Step:
    return _decodes(c, rng, lambda: c.max_model_len)


def _below_minimum(c: EngineConfig, rng: random.Random) -> Step:
    n = rng.randint(1, min(MIN_BATCHED_SEQS - 1, c.max_num_seqs))
    return tuple(Seq(rng.randint(1, c.max_model_len)) for _ in range(n))


def _four_3_block_decodes(c: EngineConfig, rng: random.Random) -> Step:
    """The #810 review's probe: four decodes of 3 blocks each (fewer if max_num_seqs is lower)."""
    length = min(c.max_model_len, 3 * c.block_size - c.block_size // 2)
    return tuple(Seq(length) for _ in range(min(MIN_BATCHED_SEQS, c.max_num_seqs)))


def _mixed_prefill_decode(c: EngineConfig, rng: random.Random) -> Step:
    """Decodes first (the builder's order), then one or two prefill chunks within the budget."""
    if c.max_num_batched_tokens < 2 or c.max_model_len < 2:
        # A prefill chunk has at least 2 tokens: the mix cannot exist here (a skip, not a crash).
        raise TraceError(f"mixed-prefill-decode needs room for a prefill chunk of 2 tokens; "
                         f"max_num_batched_tokens is {c.max_num_batched_tokens}, max_model_len "
                         f"{c.max_model_len}")
    # Each prefill keeps at least 2 tokens of the budget, so every step has one.
    prefills = min(rng.randint(1, 2), c.max_num_seqs, c.max_num_batched_tokens // 2)
    decodes = rng.randint(0, c.max_num_seqs - prefills)
    decodes = min(decodes, max(0, c.max_num_batched_tokens - 2 * prefills))
    step = [Seq(rng.randint(1, c.max_model_len)) for _ in range(decodes)]
    budget = c.max_num_batched_tokens - decodes
    for i in range(prefills):
        share = budget // (prefills - i)
        if share < 2 or c.max_model_len < 2:
            break
        q = rng.randint(2, min(share, c.max_model_len))
        budget -= q
        step.append(Seq(rng.randint(q, c.max_model_len), q))
    return tuple(step)


@dataclass(frozen=True)
class Mix:
    description: str
    step: Generator


MIXES: dict[str, Mix] = {
    "uniform-short": Mix("decodes, lengths uniform up to max_model_len/8", _uniform_short),
    "uniform-long": Mix("decodes, lengths uniform in [max_model_len/2, max_model_len]",
                        _uniform_long),
    "long-tail": Mix("decodes, mostly short with a Pareto tail to max_model_len", _long_tail),
    "bimodal": Mix("decodes, half within two blocks, half above 3/4 of max_model_len", _bimodal),
    "all-at-max": Mix("decodes, every sequence at max_model_len", _all_at_max),
    "below-minimum": Mix("1-3 decodes per step: below the batched-decode minimum of 4",
                         _below_minimum),
    "four-3-block-decodes": Mix("the review's probe: four decodes of 3 blocks each, every step",
                                _four_3_block_decodes),
    "mixed-prefill-decode": Mix("decodes plus one or two prefill chunks within the token budget",
                                _mixed_prefill_decode),
}


@functools.lru_cache(maxsize=8192)
def generate(name: str, config: EngineConfig, steps: int = DEFAULT_STEPS, seed: int = 0) -> Workload:
    """The named mix for ``config``: ``steps`` independent batches, reproducible from ``seed``.
    Kept per arguments (a Workload is immutable): a tier asks for the same ones many times."""
    if name not in MIXES:
        raise TraceError(f"unknown workload {name!r}; known: {', '.join(MIXES)}")
    if steps < 1:
        raise TraceError(f"steps must be >= 1, got {steps}")
    rng = random.Random(f"{name}:{seed}")
    mix = MIXES[name]
    made = tuple(mix.step(config, rng) for _ in range(steps))
    return Workload(name, mix.description, made)


# -- traces ------------------------------------------------------------------------------------

_INTS = re.compile(r"[\s,]+")


def _ints(text: str, what: str, where: str) -> list[int]:
    out = []
    for field in _INTS.split(text.strip()):
        if not field:
            continue
        try:
            value = int(field)
        except ValueError:
            raise TraceError(f"{where}: {what} {field!r} is not an integer") from None
        if value < 1:
            raise TraceError(f"{where}: {what} must be >= 1, got {value}")
        out.append(value)
    return out


def parse_step(text: str, where: str = "step") -> Step:
    """One step: ``SEQ_LENS [| QUERY_LENS]``, comma or space separated; queries default to 1."""
    seq_part, bar, query_part = text.partition("|")
    seq_lens = _ints(seq_part, "seq_len", where)
    if not seq_lens:
        raise TraceError(f"{where}: no sequence lengths in {text.strip()!r}")
    query_lens = _ints(query_part, "query_len", where) if bar else [1] * len(seq_lens)
    if len(query_lens) != len(seq_lens):
        raise TraceError(f"{where}: {len(seq_lens)} seq_lens but {len(query_lens)} query_lens "
                         f"in {text.strip()!r}")
    for s, q in zip(seq_lens, query_lens):
        if q > s:
            raise TraceError(f"{where}: query_len {q} > seq_len {s} (seq_len counts the new "
                             f"tokens too)")
    return tuple(Seq(s, q) for s, q in zip(seq_lens, query_lens))


def load_trace(path: str | Path) -> Workload:
    """A trace file: one step per line, ``#`` comments and blank lines ignored."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceError(f"trace {path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise TraceError(f"trace {path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at "
                         f"offset {exc.start}); expected one step per line") from None
    steps, origins = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0]
        if not line.strip():
            continue
        where = f"{path}:{number}"
        steps.append(parse_step(line, where))
        origins.append(where)
    if not steps:
        raise TraceError(f"trace {path}: no steps in it")
    return Workload(f"trace:{path.name}", f"replayed from {path}", tuple(steps), tuple(origins))


def inline(texts: list[str]) -> Workload:
    """Steps given on the command line (``--step``)."""
    steps = tuple(parse_step(t, f"--step #{i + 1}") for i, t in enumerate(texts))
    return Workload("steps", "given on the command line", steps,
                    tuple(f"--step #{i + 1}" for i in range(len(texts))))


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload to build per config: a generated mix, or a fixed trace / inline steps."""

    name: str
    mix: str | None = None
    fixed: Workload | None = None
    steps: int = DEFAULT_STEPS
    seed: int = 0

    def build(self, config: EngineConfig) -> Workload:
        if self.fixed is not None:
            return self.fixed
        return generate(self.mix, config, self.steps, self.seed)


def buildable(wanted: list[WorkloadSpec], config: EngineConfig) -> list[Workload]:
    """The workloads of ``wanted`` at ``config`` that build (the rest are skips, said later)."""
    out = []
    for spec in wanted:
        try:
            out.append(spec.build(config))
        except HarnessError:
            pass
    return out


def specs(mixes: list[str] | None = None, traces: list[str] | None = None,
          steps_inline: list[str] | None = None, steps: int = DEFAULT_STEPS,
          seed: int = 0) -> list[WorkloadSpec]:
    """Workloads named on a command line; every mix when none is named."""
    out = []
    for path in traces or []:
        w = load_trace(path)
        out.append(WorkloadSpec(w.name, fixed=w))
    if steps_inline:
        w = inline(steps_inline)
        out.append(WorkloadSpec(w.name, fixed=w))
    chosen = mixes if mixes else ([] if out else list(MIXES))
    for name in chosen:
        if name not in MIXES:
            raise TraceError(f"unknown workload {name!r}; known: {', '.join(MIXES)}")
        out.append(WorkloadSpec(name, mix=name, steps=steps, seed=seed))
    return out
