"""Command-line options shared by the subcommands: subjects, the config matrix, workloads."""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

from harness.config import (
    BATCHED_DECODE,
    BUCKET_VARS,
    KV_CACHE_DTYPES,
    MAX_SPEC_TOKENS,
    EngineConfig,
    Overrides,
)
from harness.errors import ConfigError
from harness.matrix import OVERRIDE_SETS, SET_VARIABLES, TIERS, Case, expand, override_set
from harness.presets import DEFAULT_PRESET, PRESETS, preset_config
from harness.subjects import SPEC_HELP, Subject, timeout
from harness.subjects.source.knobs import ENVS_FILE
from harness.worker import open_subject
from harness.workloads import DEFAULT_STEPS, MIXES, WorkloadSpec, specs

DEFAULT_SUBJECT = "reference:post-810-clamp"
#: The shape flags of the config matrix: given, each changes that field of every preset.
SHAPE_FLAGS = ("num_kv_heads", "queries_per_kv", "head_size", "dtype", "kv_cache_dtype",
               "num_layers", "sliding_window")


def int_list(text: str) -> list[int]:
    """``64,128,192`` -> [64, 128, 192] (argparse type)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one integer, got {text!r}")
    return values


def number(least: float | None = None, *, above: float | None = None,
           below: float | None = None, most: float | None = None, kind: type = float):
    """An argparse type for a numeric flag: a finite ``kind`` in range. ``nan``, ``inf``, a
    negative count or a huge value is one line (exit 2) before any work, never a crash or an
    unbounded run. The one definition every numeric flag uses."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str):
        shown = text if len(text) <= 40 else text[:37] + "..."
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"expected {noun}, got {shown!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {shown!r}")
        for bound, sign, ok in ((least, ">=", value >= (least or 0)),
                                (above, ">", value > (above or 0)),
                                (below, "<", value < (below or 0)),
                                (most, "<=", value <= (most or 0))):
            if bound is not None and not ok:
                raise argparse.ArgumentTypeError(f"must be {sign} {bound:g}, got {shown}")
        return value

    parse.__name__ = kind.__name__     # argparse names the type in its own messages
    return parse


def spec_token_list(text: str) -> list[int]:
    """``0,3`` -> [0, 3]: speculative tokens per step, each a non-negative integer (argparse
    type: anything else is one line, exit 2)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 0 or v > MAX_SPEC_TOKENS for v in values):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise argparse.ArgumentTypeError(f"expected non-negative integers up to "
                                         f"{MAX_SPEC_TOKENS}, comma-separated, got {shown!r}")
    return list(dict.fromkeys(values))


def name_list(known, noun: str):
    """An argparse type of comma-separated names from ``known``: an unknown one is one line
    naming what is known (exit 2)."""
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown {noun} {(unknown or [text])[0]!r}; "
                                             f"known: {', '.join(known)}")
        return list(dict.fromkeys(names))
    parse.__name__ = noun
    return parse


def revision(text: str) -> str:
    """argparse type of a revision or branch handed to git: one beginning with '-' would reach
    git as an option (``--output=FILE`` writes a file), so it is refused here."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a revision, got ''")
    if text.startswith("-"):
        raise argparse.ArgumentTypeError(f"{text!r} begins with '-': a revision or branch "
                                         "cannot (git would read it as an option)")
    if any(ord(ch) < 32 or ch == "\x7f" for ch in text):
        raise argparse.ArgumentTypeError(f"{text!r}: control characters in a revision")
    return text


def path(text: str) -> Path:
    """argparse type of a file or folder: absolute from the start, so nothing the command does
    later (a subject's code changing the folder included) moves where it points."""
    return Path(os.path.abspath(text))


def regex(text: str) -> str:
    """argparse type of a benchmark filter: a Python regular expression that compiles."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {exc}") from None
    return text


#: Steps per generated mix: beyond this a mix is no workload a scheduler sees in a benchmark.
MAX_STEPS = 100_000


def add_subjects(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("subjects", f"a subject is the code under test: {SPEC_HELP}")
    g.add_argument("--subject", metavar="SPEC",
                   help=f"one subject to show (default {DEFAULT_SUBJECT})")
    g.add_argument("--base", metavar="SPEC", help="baseline subject of a comparison")
    g.add_argument("--head", metavar="SPEC", help="subject compared against --base")
    g.add_argument("--subject-timeout", metavar="SECONDS", default=None,
                   type=number(0, most=timeout.MAX_SECONDS),
                   help="a git:/path:/installed subject's code runs (import, bucketer, metadata "
                        "builder) in a worker process of its own, as this user: only name "
                        "checkouts you trust. Each load or drive of it is stopped after SECONDS "
                        "(default 60, or $SPYRE_BENCH_SUBJECT_TIMEOUT; 0: no limit), one error "
                        "line, exit 2")


def subject_specs(args) -> list[str]:
    """The subject specs given (--subject, or --base and --head), none of them opened."""
    if bool(args.base) != bool(args.head):
        raise ConfigError("--base and --head go together")
    if args.base and args.subject:
        raise ConfigError("give either --subject or --base/--head, not both")
    return [args.base, args.head] if args.base else [args.subject or DEFAULT_SUBJECT]


def subjects(args) -> list[Subject]:
    specs_ = subject_specs(args)
    subject_timeout(args)
    return [open_subject(s) for s in specs_]


def subject_timeout(args) -> float:
    """The subject's time limit, --subject-timeout or else $SPYRE_BENCH_SUBJECT_TIMEOUT, checked
    before any work (a bad value in the environment is one line, as a bad flag is)."""
    timeout.set_limit(getattr(args, "subject_timeout", None))
    return timeout.limit()


def add_matrix(p: argparse.ArgumentParser, default_overrides: str = "none") -> None:
    d = EngineConfig()
    g = p.add_argument_group(
        "config matrix", "comma-separated lists are crossed; --tier supplies the lists not given")
    g.add_argument("--tier", choices=sorted(TIERS),
                   help="; ".join(f"{k}: {t.description}" for k, t in TIERS.items()))
    g.add_argument("--block-size", type=int_list, metavar="N,..",
                   help=f"KV cache block size(s), multiples of 64 (default {d.block_size})")
    g.add_argument("--max-model-len", type=int_list, metavar="N,..",
                   help=f"max_model_len(s) (default {d.max_model_len})")
    g.add_argument("--max-num-seqs", type=int_list, metavar="N,..",
                   help=f"max_num_seqs (default {d.max_num_seqs})")
    g.add_argument("--max-num-batched-tokens", type=int, metavar="N",
                   default=d.max_num_batched_tokens, help="max_num_batched_tokens (default %(default)s)")
    g.add_argument("--preset", type=name_list(PRESETS, "preset"), metavar="NAME,..",
                   help="model shapes (heads, head size, layers, per-layer overrides, dtypes): "
                        + "; ".join(f"{k}: {v.description}" for k, v in PRESETS.items())
                        + f" (default {DEFAULT_PRESET}, or the tier's); the flags below change "
                          "one field of each")
    g.add_argument("--spec-tokens", type=spec_token_list, metavar="N,..",
                   help="speculative tokens a drafter proposes per step, handed to the code as "
                        "vLLM's speculative_config (default 0: no drafter, or the tier's)")
    g.add_argument("--num-kv-heads", type=int, metavar="N",
                   help=f"KV heads (default {d.num_kv_heads})")
    g.add_argument("--queries-per-kv", type=int, metavar="N",
                   help=f"query heads per KV head (default {d.queries_per_kv})")
    g.add_argument("--head-size", type=int, metavar="N", help=f"head size (default {d.head_size})")
    g.add_argument("--dtype", help=f"model dtype (default {d.dtype})")
    g.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES,
                   help=f"K/V cache dtype (default {d.kv_cache_dtype}: the model's)")
    g.add_argument("--num-layers", type=int, metavar="N",
                   help=f"attention layers per step (default {d.num_layers})")
    g.add_argument("--sliding-window", type=int, metavar="TOKENS", default=None,
                   help="the model's attention window (default: full attention); handed to the "
                        "subject's builder, impl and bucketer as the engine hands it")
    g.add_argument("--overrides", metavar="NAME,..",
                   help="named env override sets: " + "; ".join(
                       f"{k}={Overrides.from_env(v).label()}" for k, v in OVERRIDE_SETS.items())
                   + f" (default {default_overrides})")
    g.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help=f"an env override: a bucket variable ({', '.join(BUCKET_VARS)}) or a "
                        f"knob the commit's {ENVS_FILE} declares (its default is measured where "
                        "none is given; a commit without the knob skips, naming it); "
                        "repeatable; merged into each named set, or a set of its own when "
                        "--overrides is not given")
    g.add_argument("--batched", action="store_true",
                   help="shorthand for --env SPYRE_BATCHED_DECODE=1")
    p.set_defaults(default_overrides=default_overrides)


def cases(args) -> list[Case]:
    tier = TIERS[args.tier] if args.tier else None
    d = EngineConfig()
    pick = lambda given, tiered, default: given or (list(tiered) if tier else [default])  # noqa: E731
    block_sizes = pick(args.block_size, tier and tier.block_sizes, d.block_size)
    mmls = pick(args.max_model_len, tier and tier.max_model_lens, d.max_model_len)
    mnss = pick(args.max_num_seqs, tier and tier.max_num_seqs, d.max_num_seqs)
    presets = pick(args.preset, tier and tier.presets, DEFAULT_PRESET)
    spec_tokens = pick(args.spec_tokens, tier and tier.spec_tokens, 0)
    # Every config of the matrix is validated as it is built (expand); each preset's base takes
    # the first sizes, and the shape flags given change that field of every preset.
    given = {k: getattr(args, k) for k in SHAPE_FLAGS if getattr(args, k, None) is not None}
    bases = {name: preset_config(name, block_size=block_sizes[0], max_model_len=mmls[0],
                                 max_num_seqs=mnss[0],
                                 max_num_batched_tokens=args.max_num_batched_tokens, **given)
             for name in presets}

    if args.batched and any(e.partition("=")[0].strip() == BATCHED_DECODE for e in args.env):
        raise ConfigError(f"--batched sets {BATCHED_DECODE}=1: give either it or --env "
                          f"{BATCHED_DECODE}=..., not both")
    extra = Overrides.parse(args.env + ([f"{BATCHED_DECODE}=1"] if args.batched else []))
    if args.overrides:
        names = [n for n in args.overrides.split(",") if n]
    elif extra.raw:
        names = []
    else:
        names = list(tier.override_sets) if tier else [args.default_overrides]
    sets = [(n, override_set(n).with_env(**extra.as_env())) for n in names]
    if not names:
        sets = [(extra.label().replace(" ", "+"), extra)]
    elif extra.raw:
        sets = [(f"{n}+{extra.label().replace(' ', '+')}", ov) for n, ov in sets]
    return expand(bases[presets[0]], block_sizes, mmls, mnss, sets, spec_tokens, bases)


def check_knobs(subjects: list[Subject], cases: list[Case]) -> None:
    """Every knob the cases give is one some subject's ``envs.py`` declares, or one the tiers'
    named sets sweep, and is readable the way each declaring commit reads it (an integer where it
    calls ``int()``): else one line (exit 2). A subject that lacks a known knob skips, naming it."""
    given: dict[str, set[str]] = {}
    for case in cases:
        for name, value in case.overrides.knobs.items():
            given.setdefault(name, set()).add(value)
    for name, values in given.items():
        declaring = [s for s in subjects if s.knobs and name in s.knobs]
        if not declaring and name not in SET_VARIABLES:
            offered = sorted(set().union(*(s.knobs or {} for s in subjects)) - set(BUCKET_VARS))
            said = (f"declared: {', '.join(offered)}" if offered
                    else "they declare only the bucket variables"
                    if any(s.knobs is not None for s in subjects)
                    else "none of them has a knob registry")
            raise ConfigError(f"unknown knob {name}: no subject given declares it in its "
                              f"{ENVS_FILE} ({said})")
        for subject in declaring:
            for value in sorted(values):
                why = subject.knobs[name].check(value)
                if why:
                    raise ConfigError(f"{why} ({subject.spec})")


def add_workloads(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workloads", "default: every named mix")
    g.add_argument("--workload", action="append", default=[], metavar="NAME",
                   help="a named batch mix, repeatable: " + ", ".join(MIXES))
    g.add_argument("--trace", action="append", default=[], metavar="FILE",
                   help="replay a trace: one step per line, 'SEQ_LENS [| QUERY_LENS]'")
    g.add_argument("--step", action="append", default=[], metavar="SEQ_LENS[|QUERY_LENS]",
                   help="one step given inline, e.g. --step 150,150,150,150 (four decodes)")
    g.add_argument("--steps", type=number(1, most=MAX_STEPS, kind=int), default=None, metavar="N",
                   help=f"steps per generated mix (default {DEFAULT_STEPS}, or the tier's)")
    g.add_argument("--seed", type=number(0, most=2**63 - 1, kind=int), default=0,
                   help="seed of the generated mixes")


def workloads(args, kernel: bool = False) -> list[WorkloadSpec]:
    """The workloads named, else every mix (a kernel run on a tier: the tier's kernel mixes)."""
    tier = TIERS[args.tier] if args.tier else None
    steps = args.steps or (tier.steps if tier else DEFAULT_STEPS)
    mixes = args.workload
    if kernel and tier and tier.kernel_mixes and not (mixes or args.trace or args.step):
        mixes = list(tier.kernel_mixes)
    return specs(mixes, args.trace, args.step, steps=steps, seed=args.seed)


def add_output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON rows instead of tables")
