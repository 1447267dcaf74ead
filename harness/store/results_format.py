"""What a stored ASV results file must hold before any reader trusts its values.

A value of the wrong type (a string where ASV writes a number, a dict where it writes a list), a
number float64 cannot hold or a date pandas cannot place would otherwise surface far from the
file, as a traceback in ``history``, ``compare``, ``changes`` or ``report``. Checked here once,
such a file is skipped with one warning naming it and what is wrong.
"""

from __future__ import annotations

import itertools
import re

from harness.store.jsonfile import is_number

RESULTS_VERSION = 2
_HEX = re.compile(r"[0-9a-f]{4,64}")
#: Milliseconds since the epoch that pandas can place (its datetime64[ns] range, about 1677-2262).
_DATE_MS = 9_000_000_000_000_000


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _numbers(values, allow_none: bool = True) -> bool:
    return isinstance(values, list) and all(
        (v is None and allow_none) or is_number(v) for v in values)


def _row_problem(name: str, row, columns: list[str]) -> str | None:
    if not isinstance(row, list):
        return f"{name}: a row is {type(row).__name__}, not a list"
    cell = dict(zip(columns, row))
    params = cell.get("params") or []
    if not (isinstance(params, list) and all(
            isinstance(p, list) and all(isinstance(v, str) for v in p) for p in params)):
        return f"{name}: params {_short(params)} are not lists of strings"
    combos = len(list(itertools.product(*params))) if params else 1
    result = cell.get("result")
    if isinstance(result, list):
        if not _numbers(result) or len(result) != combos:
            return (f"{name}: result {_short(result)} is not {combos} number(s) "
                    "(one per parameter combination)")
    elif result is not None and not is_number(result):
        return f"{name}: result {_short(result)} is not a number"
    for key in ("started_at", "duration"):
        if cell.get(key) is not None and not is_number(cell[key]):
            return f"{name}: {key} {_short(cell[key])} is not a number"
    if cell.get("version") is not None and not isinstance(cell["version"], str):
        return f"{name}: version {_short(cell['version'])} is not a string"
    for key in ("stats_q_25", "stats_q_75", "stats_ci_99_a", "stats_ci_99_b", "stats_number",
                "stats_repeat"):
        if cell.get(key) is not None and not _numbers(cell[key]):
            return f"{name}: {key} {_short(cell[key])} is not a list of numbers"
    samples = cell.get("samples")
    if samples is not None and not (isinstance(samples, list) and all(
            s is None or _numbers(s, allow_none=False) for s in samples)):
        return f"{name}: samples {_short(samples)} are not lists of numbers"
    return None


def results_problem(data) -> str | None:
    """Why ``data`` (a parsed results file) is not one this harness can read, or None."""
    if not isinstance(data, dict) or "results" not in data or "commit_hash" not in data:
        return "not an ASV results file (no commit_hash/results)"
    if data.get("version") != RESULTS_VERSION:
        return (f"results format version {_short(data.get('version'))}, expected "
                f"{RESULTS_VERSION}")
    commit = data["commit_hash"]
    if not isinstance(commit, str) or not _HEX.fullmatch(commit):
        return f"commit_hash {_short(commit)} is not a commit hash"
    if data.get("env_name") is not None and not isinstance(data["env_name"], str):
        return f"env_name {_short(data['env_name'])} is not a string"
    date = data.get("date")
    if date is not None and not (is_number(date) and abs(date) < _DATE_MS):
        return f"date {_short(date)} is not a time in milliseconds"
    columns = data.get("result_columns") or []
    if not (isinstance(columns, list) and all(isinstance(c, str) for c in columns)):
        return f"result_columns {_short(columns)} are not a list of names"
    results = data["results"]
    if not isinstance(results, dict):
        return f"results are {type(results).__name__}, not an object"
    for name, row in results.items():
        problem = _row_problem(name, row, columns)
        if problem:
            return problem
    return None


def benchmarks_problem(data) -> str | None:
    """Why ``data`` (a parsed benchmarks.json) cannot be read, or None."""
    if not isinstance(data, dict):
        return f"{type(data).__name__}, not an object"
    for name, b in data.items():
        if name == "version" or not isinstance(b, dict):
            continue
        if not (isinstance(b.get("type", ""), str) and isinstance(b.get("unit", ""), str)):
            return f"{name}: type or unit is not a string"
        names = b.get("param_names", [])
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            return f"{name}: param_names {_short(names)} are not a list of strings"
    return None
