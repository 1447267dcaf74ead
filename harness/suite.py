"""Support for the ASV suite in ``benchmarks/``: which subject and tier, cached figures, skips.

The benchmark classes stay thin: parameters come from the tier, values from the same
``harness.evaluate`` rows the CLI prints. Everything is decided from the environment so a tier or
subject is chosen without editing files:

* ``SPYRE_BENCH_SUBJECT``: a subject spec (set by ``spyre-bench run``); without it, the
  commit ASV checked out into ``$ASV_ENV_DIR/project`` (``$ASV_COMMIT``; plain ``asv run``), or
  in an existing environment (``--python=same``), the code at hand (:func:`code_at_hand`).
* ``SPYRE_BENCH_TIER``: ``quick`` (default, PR CI) or ``full`` (nightly).
* ``SPYRE_BENCH_SKIP_LOG``: a file the reasons of skipped benchmarks are appended to (ASV itself
  stores a skip only as NaN).
* ``SPYRE_BENCH_THREADS``: torch's intra-op threads in benchmark processes (default
  ``OMP_NUM_THREADS``, else 1).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from pathlib import Path

from harness.errors import CapabilityMissing, HarnessError
from harness.matrix import TIERS, Tier, tier_cases
from harness.presets import DEFAULT_PRESET

SUBJECT_ENV = "SPYRE_BENCH_SUBJECT"
TIER_ENV = "SPYRE_BENCH_TIER"
SKIP_LOG_ENV = "SPYRE_BENCH_SKIP_LOG"
THREADS_ENV = "SPYRE_BENCH_THREADS"
STAGED_PROJECT = "project"


def torch_threads() -> int:
    """torch's intra-op threads for timing: ``SPYRE_BENCH_THREADS``, else ``OMP_NUM_THREADS``,
    else 1. Set in every process that times a kernel (ASV's benchmark processes, ``run``'s
    interleaved closing timings): torch's default, one thread per core, stalls behind any other
    process on a shared CPU and leaves forked benchmark processes many times slower."""
    for name in (THREADS_ENV, "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                threads = int(value)
            except ValueError:
                raise HarnessError(f"{name}={value!r}: expected a whole number of threads") \
                    from None
            if threads < 1:
                raise HarnessError(f"{name}={value!r}: expected at least 1 thread")
            return threads
    return 1


def tier_name() -> str:
    name = os.environ.get(TIER_ENV, "quick")
    if name not in TIERS:
        raise HarnessError(f"{TIER_ENV}={name!r}: expected one of {', '.join(TIERS)}")
    return name


def tier() -> Tier:
    return TIERS[tier_name()]


def subject_spec() -> str:
    spec = os.environ.get(SUBJECT_ENV)
    if spec:
        return spec
    env_dir = os.environ.get("ASV_ENV_DIR")
    commit = os.environ.get("ASV_COMMIT")
    if env_dir and commit and (Path(env_dir) / STAGED_PROJECT).is_dir():
        # read by revision from the checkout's object store: the same subject spyre-bench run
        # gives the commit, whatever state the work tree is in
        return f"git:{Path(env_dir) / STAGED_PROJECT}@{commit}"
    return code_at_hand()


#: Where an existing ASV environment's configured repo is (set by harness.asv_plugin).
ASV_REPO_ENV = "SPYRE_BENCH_ASV_REPO"


def code_at_hand() -> str:
    """The subject when ASV checked nothing out: an existing environment (``asv run
    --python=same``, ``-E existing:PYTHON``), where ``--set-commit-hash`` records results as a
    commit the user vouches for. The spyre-inference installed in this interpreter, else the
    working tree (``path:``) of asv.conf.json's ``repo``."""
    import importlib.util
    if importlib.util.find_spec("spyre_inference") is not None:
        return "spyre-inference"
    repo = os.environ.get(ASV_REPO_ENV)
    if not repo:
        from harness.runner.asv_config import PROJECT_CONFIG, load_project_config
        repo = str(PROJECT_CONFIG.parent / (load_project_config().get("repo") or ""))
    if not Path(repo).is_dir():
        raise HarnessError(f"no subject: set {SUBJECT_ENV} (spyre-bench run does), run under "
                           "plain ASV (it checks each commit out), or install spyre-inference "
                           f"or check it out at asv.conf.json's repo ({repo})")
    return f"path:{Path(repo).resolve()}"


@functools.cache
def subject():
    from harness.subjects import resolve_subject
    return resolve_subject(subject_spec())


def skip(benchmark: str, reason: str):
    """Skip a benchmark with a reason that survives into the history (ASV keeps only NaN)."""
    log = os.environ.get(SKIP_LOG_ENV)
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"benchmark": benchmark, "reason": reason}) + "\n")
    raise NotImplementedError(reason)


def skipped_when_not_drivable(setup_cache):
    """``setup_cache`` whose subject cannot be driven (:class:`CapabilityMissing`, e.g. the
    builder's ``NotDrivable``) returns ``{"skipped": reason}``: each benchmark's ``setup`` then
    skips (ASV's NotImplementedError). Raised from ``setup_cache`` itself, ASV would count every
    benchmark of the class as failed."""
    @functools.wraps(setup_cache)
    def wrapped(self):
        try:
            return setup_cache(self)
        except CapabilityMissing as exc:
            return {"skipped": str(exc)}
    return wrapped


@contextlib.contextmanager
def skipping(benchmark: str):
    """In ``setup`` or a benchmark: a capability the subject lacks is a skip with its reason."""
    try:
        yield
    except CapabilityMissing as exc:
        skip(benchmark, str(exc))


#: The names of a case's key (:func:`case_key`), which are the config benchmarks' parameters.
CASE_KEY_NAMES = ("block_size", "max_model_len", "max_num_seqs", "overrides")


def swept(t: Tier) -> tuple[str, ...]:
    """The axes beyond :data:`CASE_KEY_NAMES` that tier ``t`` sweeps (model shapes, speculative
    tokens): each is a parameter only where it is swept, so a tier that sweeps none keeps the
    parameters (and the histories) it always had."""
    return tuple(name for name, values, default in (
        ("preset", t.presets, (DEFAULT_PRESET,)), ("spec_tokens", t.spec_tokens, (0,)))
        if tuple(values) != default)


def key_names(t: Tier | None = None) -> list[str]:
    """The config benchmarks' parameter names on tier ``t`` (default: this process's)."""
    return list(CASE_KEY_NAMES) + list(swept(t or tier()))


def config_params() -> tuple[list, list[str]]:
    t = tier()
    return ([list(t.block_sizes), list(t.max_model_lens), list(t.max_num_seqs),
             list(t.override_sets), *(list(getattr(t, f"{n}s" if n == "preset" else n))
                                      for n in swept(t))], key_names(t))


def cases():
    """The tier's configs crossed with its override sets (as ``--tier`` gives the CLI)."""
    return tier_cases(tier_name())


#: Parameter combinations an in-process run will read (None: all, as under plain ASV).
_wanted: set[tuple] | None = None


@contextlib.contextmanager
def only(combinations: set[tuple] | None):
    """While open, ``setup_cache`` computes only ``combinations`` (``spyre-bench run --bench``
    and ``bisect`` read one series: the rest of the tier is not driven through the builder)."""
    global _wanted
    before, _wanted = _wanted, combinations
    try:
        yield
    finally:
        _wanted = before


def wanted(key: tuple) -> bool:
    """Whether some wanted combination starts with ``key``."""
    return _wanted is None or any(c[:len(key)] == key for c in _wanted)


def case_key(case, t: Tier | None = None) -> tuple:
    c = case.config
    extra = {"preset": case.preset, "spec_tokens": c.spec_tokens}
    return (c.block_size, c.max_model_len, c.max_num_seqs, case.overrides_name,
            *(extra[n] for n in swept(t or tier())))
