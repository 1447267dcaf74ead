"""Load ASV results (every machine, commit, environment) into one tidy pandas DataFrame.

Reads the documented ASV results format (version 2: ``result_columns`` rows, values in
``itertools.product(*params)`` order, params as ``repr()`` strings, ``null`` = failed, ``NaN`` =
skipped) plus ``benchmarks.json`` for units and types, and the harness's identity sidecars. A
corrupt, partial or foreign file is reported with a :class:`HistoryWarning` naming it; everything
else still loads.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.errors import HarnessError
from harness.store.identity import (
    IDENTITY_SUFFIX,  # noqa: F401  (re-exported)
    identity_problem,
    unpacked,
)
from harness.store.jsonfile import StoredFileError, read_json
from harness.store.results_format import (  # noqa: F401  (RESULTS_VERSION re-exported)
    RESULTS_VERSION,
    benchmarks_problem,
    results_problem,
)

COLUMNS = ["machine", "env_name", "commit", "date", "benchmark", "type", "unit", "version",
           "params", "status", "value", "samples", "q_25", "q_75", "ci_99_a", "ci_99_b",
           "number", "repeat", "started_at", "duration", "harness_commit", "device", "subject",
           "complete", "file"]


class HistoryWarning(UserWarning):
    """A results file that could not be read; the rest of the history still loads."""


@dataclass(frozen=True)
class _Benchmark:
    type: str
    unit: str
    param_names: tuple[str, ...]


def _warn(path: Path, why: str) -> None:
    warnings.warn(f"{path}: {why}; skipped", HistoryWarning, stacklevel=3)


def _load_json(path: Path):
    # a regular file of JSON only: a FIFO named like a results file must not hang the reader
    return read_json(path)


def _benchmarks(results_dir: Path) -> dict[str, _Benchmark]:
    path = results_dir / "benchmarks.json"
    if not path.exists():
        return {}
    try:
        data = _load_json(path)
        problem = benchmarks_problem(data)
        if problem:
            raise StoredFileError(problem)
        return {name: _Benchmark(b.get("type", ""), b.get("unit", ""),
                                 tuple(b.get("param_names", ())))
                for name, b in data.items() if name != "version" and isinstance(b, dict)}
    except (OSError, ValueError) as exc:
        _warn(path, f"unreadable benchmarks.json ({exc})")
        return {}


def _param_value(text: str):
    """ASV stores params as repr() strings; turn literals back into values."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _column(row: list, columns: list[str], name: str):
    i = columns.index(name) if name in columns else -1
    return row[i] if 0 <= i < len(row) else None


def _at(values, i):
    return values[i] if isinstance(values, list) and i < len(values) else None


def _rows_of_file(path: Path, machine: str, benchmarks: dict[str, _Benchmark]) -> list[dict]:
    data = _load_json(path)
    problem = results_problem(data)
    if problem:
        raise StoredFileError(problem)
    columns = data.get("result_columns") or []
    identity = _identity(path)
    base = {"machine": machine, "env_name": data.get("env_name"), "commit": data["commit_hash"],
            "date": pd.to_datetime(data.get("date"), unit="ms", utc=True), "file": str(path),
            **identity}
    rows = []
    for name, row in data["results"].items():
        bench = benchmarks.get(name, _Benchmark("", "", ()))
        params = _column(row, columns, "params") or []
        combos = list(itertools.product(*params)) if params else [()]
        values = _column(row, columns, "result")
        if not isinstance(values, list):
            values = [values] * len(combos)
        names = bench.param_names or tuple(f"param{i}" for i in range(len(params)))
        stats = {k: _column(row, columns, f"stats_{k}") for k in
                 ("q_25", "q_75", "ci_99_a", "ci_99_b", "number", "repeat")}
        samples = _column(row, columns, "samples")
        for i, combo in enumerate(combos):
            value = _at(values, i)
            status = ("failed" if value is None else
                      "skipped" if isinstance(value, float) and math.isnan(value) else "ok")
            rows.append({
                **base, "benchmark": name, "type": bench.type, "unit": bench.unit,
                "version": _column(row, columns, "version"),
                "params": {n: _param_value(v) for n, v in zip(names, combo)},
                "status": status, "value": value if status == "ok" else math.nan,
                "samples": _at(samples, i), **{k: _at(v, i) for k, v in stats.items()},
                "started_at": _column(row, columns, "started_at"),
                "duration": _column(row, columns, "duration"),
            })
    return rows


def load_identity(results_file: str | Path) -> dict:
    """The identity sidecar spyre-bench run wrote beside a results file ({} if none or bad)."""
    side = Path(results_file).with_suffix(IDENTITY_SUFFIX)
    if not side.exists():
        return {}
    try:
        data = _load_json(side)
        problem = identity_problem(data)
        if problem:
            raise StoredFileError(problem)
        return unpacked(data)   # each skip with its sentence, however the sidecar stored it
    except (OSError, ValueError) as exc:
        _warn(side, f"unreadable identity sidecar ({exc})")
        return {}


def is_complete(identity: dict) -> bool:
    """A commit is measured once its identity says the run finished: a killed run (no identity)
    or an interrupted one is incomplete everywhere (history, compare, nightly)."""
    return bool(identity) and identity.get("interrupted") is False


def _identity(path: Path) -> dict:
    data = load_identity(path)
    return {**{k: data.get(k) for k in ("harness_commit", "device", "subject")},
            "complete": is_complete(data)}


def load_history(results_dir: str | Path) -> pd.DataFrame:
    """Every result under ``results_dir`` as one row per (file, benchmark, param combination).

    ``params`` holds a dict of the benchmark's parameters; each parameter also gets a column of
    its own (``param:<name>``) so frames filter and pivot directly.
    """
    results_dir = Path(results_dir)
    shared = _benchmarks(results_dir)
    rows: list[dict] = []
    for machine_dir in _machine_dirs(results_dir):
        try:
            names = _json_names(machine_dir)
        except OSError as exc:
            _warn(machine_dir, f"unreadable machine folder ({exc.strerror or exc})")
            continue
        machine = _machine_name(machine_dir, names)
        if machine is None:
            continue
        # each machine keeps the benchmarks.json of its own last run (see results/README.md)
        benchmarks = {**shared, **_benchmarks(machine_dir)}
        for name in names:
            if name in ("machine.json", "benchmarks.json"):
                continue
            path = machine_dir / name
            try:
                rows.extend(_rows_of_file(path, machine, benchmarks))
            except StoredFileError as exc:
                _warn(path, f"unreadable results file ({exc})")
            except (OSError, ValueError, TypeError, KeyError, AttributeError,
                    OverflowError) as exc:
                _warn(path, f"unreadable results file ({type(exc).__name__}: {exc})")
    frame = pd.DataFrame(rows, columns=COLUMNS)
    names = sorted({n for p in frame["params"] for n in p})
    for n in names:
        frame[f"param:{n}"] = [p.get(n) for p in frame["params"]]
    return frame


def load_history_quietly(results_dir: str | Path, report=None) -> pd.DataFrame:
    """load_history, with each HistoryWarning passed to ``report(message)`` (or dropped)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HistoryWarning)
        frame = load_history(results_dir)
    for w in caught:
        if report and issubclass(w.category, HistoryWarning):
            report(str(w.message))
    return frame


def _machine_dirs(results_dir: Path) -> list[Path]:
    """The machine folders of ``results_dir``; a folder that is missing, not a folder or cannot
    be listed is the command's input: one error line."""
    try:
        with os.scandir(results_dir) as entries:
            return sorted(Path(e.path) for e in entries if e.is_dir())
    except FileNotFoundError:
        raise HarnessError(f"results directory {results_dir} does not exist") from None
    except NotADirectoryError:
        raise HarnessError(f"results directory {results_dir} is not a folder") from None
    except OSError as exc:
        raise HarnessError(f"cannot read results directory {results_dir}: "
                           f"{exc.strerror or exc}") from None


def _json_names(machine_dir: Path) -> list[str]:
    """The ``*.json`` names in a machine folder, sorted (OSError when it cannot be listed:
    a glob would say nothing and skip it silently)."""
    with os.scandir(machine_dir) as entries:
        return sorted(e.name for e in entries if e.name.endswith(".json"))


def _machine_name(machine_dir: Path, names: list[str]) -> str | None:
    path = machine_dir / "machine.json"
    try:
        data = _load_json(path)
        name = data.get("machine") if isinstance(data, dict) else None
        if not isinstance(name, str):
            raise ValueError("no machine name")
        return name
    except (OSError, ValueError) as exc:
        if names:
            _warn(path, f"machine folder without a readable machine.json ({exc})")
        return None


def export(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write the frame as Parquet (``.parquet``) or CSV (``.csv``); nested columns as JSON text."""
    path = Path(path)
    flat = frame.copy()
    for col in ("params", "samples"):
        flat[col] = [json.dumps(v) if v is not None else None for v in flat[col]]
    if path.suffix == ".parquet":
        flat.to_parquet(path, index=False)
    elif path.suffix == ".csv":
        flat.to_csv(path, index=False)
    else:
        raise HarnessError(f"cannot export to {path}: use a .parquet or .csv file name")
    return path
