"""The exact tier of one commit in one process, written as ASV results through asv's own API.

Plain ``asv run`` starts a process per benchmark and parameter combination (thousands per commit)
to record figures that take under a second to compute. This runs the same suite classes of
``benchmarks/exact.py`` the way ASV's runner does (``setup_cache`` once per class, then ``setup``
and the ``track_`` method per combination; ``NotImplementedError`` = skipped = NaN, any other error
= failed = null), with the benchmark definitions from asv_runner's own discovery, and stores them
with ``asv.results.Results``: the same file, values, params and versions plain ASV writes. A
commit without a bucketer costs one ``setup_cache`` call per class.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import inspect
import itertools
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from harness import suite
from harness.runner.asv_config import PROJECT_ROOT

BENCHMARK_DIR = PROJECT_ROOT / "benchmarks"
MODULE = "benchmarks.exact"
#: A suite class attribute: run this class's ``setup_cache`` before the others' in process.
FIRST = "setup_cache_first"


@contextlib.contextmanager
def _environ(values: dict) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def discover(tier: str) -> list:
    """asv_runner's benchmark objects for ``benchmarks/exact.py`` at ``tier`` (no torch)."""
    from asv_runner._aux import update_sys_path
    from asv_runner.discovery import _get_benchmark
    update_sys_path(str(BENCHMARK_DIR))
    with _environ({suite.TIER_ENV: tier}):
        module = importlib.import_module(MODULE)
        module = importlib.reload(module)      # params are read from the tier at import
    found = []
    for attr, cls in module.__dict__.items():
        if attr.startswith("_") or not inspect.isclass(cls) or inspect.isabstract(cls):
            continue
        for name, member in inspect.getmembers(cls):
            if inspect.isfunction(member) or inspect.ismethod(member):
                b = _get_benchmark(name, module, cls, member)
                if b is not None:
                    found.append(b)
    return found


def as_json(benchmark) -> dict:
    """The benchmark's entry in benchmarks.json, as asv_runner's ``list_benchmarks`` writes it."""
    return {k: v for k, v in benchmark.__dict__.items()
            if isinstance(v, (str, int, float, list, dict, bool)) and not k.startswith("_")}


def selected(entry: dict, regex: str | None) -> list[int] | None:
    """Indices of the combinations ``regex`` selects, as ASV's ``--bench`` does (None: all)."""
    if not regex:
        return None
    names = (f"{entry['name']}({', '.join(p)})" for p in itertools.product(*entry["params"]))
    return [i for i, n in enumerate(names) if re.search(regex, n)]


def _combinations(benchmarks: list, picks: dict[str, list[int] | None], cls) -> set | None:
    """The parameter combinations of ``cls``'s benchmarks that will be read (None: all)."""
    wanted: set[tuple] = set()
    for b in benchmarks:
        if b._attr_sources[1].__class__ is not cls:
            continue
        pick = picks[b.name]
        if pick is None:
            return None
        combos = list(itertools.product(*b._params))
        wanted.update(combos[i] for i in pick)
    return wanted


def _values(benchmarks: list, picks: dict[str, list[int] | None]) -> dict[str, tuple]:
    """name -> (values, stderr, started_at, duration), running classes the way ASV's runner does."""
    out, tables = {}, {}
    # a class that asks to go first does (its setup_cache computes what the others read), and
    # the results keep the discovery order
    for b in sorted(benchmarks, key=lambda b: not getattr(b._attr_sources[1], FIRST, False)):
        pick = picks[b.name]
        if pick == []:
            continue
        started, t0, errors = datetime.datetime.now(datetime.timezone.utc), time.monotonic(), []
        cls = b._attr_sources[1].__class__
        instance = cls()
        if cls not in tables:
            try:
                with suite.only(_combinations(benchmarks, picks, cls)):
                    tables[cls] = (instance.setup_cache(), None)
            except Exception:  # noqa: BLE001  (ASV: the whole class fails)
                tables[cls] = (None, traceback.format_exc())
        table, failure = tables[cls]
        values = []
        for i, combo in enumerate(itertools.product(*b._params)):
            if pick is not None and i not in pick:
                values.append(math.nan)
                continue
            if failure:
                values.append(None)
                errors.append(failure)
                continue
            try:
                instance.setup(table, *combo)
                values.append(getattr(instance, b.name.rsplit(".", 1)[1])(table, *combo))
            except NotImplementedError:
                values.append(math.nan)
            except Exception:  # noqa: BLE001  (ASV: this combination failed)
                values.append(None)
                errors.append(traceback.format_exc())
        out[b.name] = (values, "".join(errors[:3]), started, time.monotonic() - t0)
    return {b.name: out[b.name] for b in benchmarks if b.name in out}


def commit_date_ms(repo: Path, commit: str) -> int:
    """The commit's date as ASV stores it (author time, JS milliseconds; asv.plugins.git)."""
    from harness.subjects.source.gitrev import output
    return int(output(repo, "rev-list", "-n", "1", "--format=%at", commit).split()[-1]) * 1000


def write_exact(*, spec: str, commit: str, repo: Path, results_dir: Path, machine: str,
                env_name: str, tier: str, bench: str | None = None,
                skip_log: Path | None = None) -> tuple[int, int]:
    """Compute and store the exact tier of one commit; returns (benchmarks stored, failed)."""
    from asv import util
    from asv.machine import Machine
    from asv.results import Results
    from asv.runner import BenchmarkResult

    benchmarks = discover(tier)
    entries = {b.name: as_json(b) for b in benchmarks}
    picks = {name: selected(e, bench) for name, e in entries.items()}
    if not any(p is None or p for p in picks.values()):
        return 0, 0
    env = {suite.SUBJECT_ENV: spec, suite.TIER_ENV: tier}
    if skip_log:
        env[suite.SKIP_LOG_ENV] = str(skip_log)
    with _environ(env):
        suite.subject.cache_clear()
        try:
            values = _values(benchmarks, picks)
        finally:
            suite.subject.cache_clear()
    info = Machine.load(machine_name=machine, interactive=False)
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    params = {**info.__dict__, "python": python}
    results = Results(params, {}, commit, commit_date_ms(repo, commit), python, env_name, {})
    results.load_data(str(results_dir))
    failed = 0
    for name, (vals, stderr, started, duration) in values.items():
        entry = entries[name]
        n = len(vals)
        outcome = BenchmarkResult(result=vals, samples=[None] * n, number=[None] * n,
                                  errcode=1 if stderr else 0, stderr=stderr, profile=None)
        failed += bool(stderr)
        results.add_result(entry, outcome, started_at=started, duration=duration,
                           record_samples=True, selected_idx=picks[name])
    results.save(str(results_dir))
    from asv.results import get_filename

    from harness.store.compact import compact_results
    compact_results(results_dir / get_filename(machine, commit, env_name))
    info.save(str(results_dir))
    _merge_benchmarks_json(results_dir, entries, util)
    return len(values), failed


def _merge_benchmarks_json(results_dir: Path, entries: dict, util) -> None:
    """Add the exact benchmarks' definitions to benchmarks.json, keeping every other entry."""
    path = results_dir / "benchmarks.json"
    data = {}
    if path.exists():
        try:
            data = util.load_json(str(path), api_version=2)
        except util.UserError:
            data = {}
    data.update(entries)
    util.write_json(str(path), data, api_version=2)
