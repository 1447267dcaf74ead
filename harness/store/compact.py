"""Results files at their smallest: ASV's own JSON without blanks, timings at the clock's
resolution.

``asv.results.Results.save`` writes ``json.dump``'s default separators, a blank after every comma
and colon: one per stored number, about 9,800 of them (15 %) in a quick-tier commit's file.
Rewritten from its own parsed data with no blanks, a file keeps every key, value and order
(floats round-trip exactly, NaN stays ``NaN``), and ASV and every reader parse it as before.

A timing's samples and result are differences of a clock that resolves 1 ns (``perf_counter``,
``process_time``: ``time.get_clock_info``), divided by ASV's ``number``; the digits float
subtraction leaves below that (``0.0012018700000000215``) carry nothing and were most of a
commit's bytes once host timings stored 2,048 samples (45.7 of 100.2 kB, fixture gen4). They are
kept to 0.1 ns / ``number`` (a median of two samples is a half-ns): ``0.00120187``.

ASV expands the blanks again whenever it saves the file (``asv run`` of a later group), so the
writers compact after their last save.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness.store.jsonfile import StoredFileError, parse_json, read_bytes
from harness.store.results_format import results_problem

SEPARATORS = (",", ":")
#: Decimal places of a timing taken with ``number`` 1: 0.1 ns, a tenth of the clocks' resolution.
TIMING_DECIMALS = 10


def compact_results(path: Path) -> bool:
    """Rewrite the results file ``path`` without blanks and with its timings at the clock's
    resolution; False (untouched) when it is not a results file this harness reads, or is
    compact already."""
    try:
        raw = read_bytes(path)
        data = parse_json(raw)
    except (OSError, StoredFileError):
        return False
    if results_problem(data):
        return False
    text = json.dumps(at_clock_resolution(data), separators=SEPARATORS).encode()
    if text == raw:
        return False
    tmp = path.with_name(f".{path.name}.compact.tmp")
    tmp.write_bytes(text)
    tmp.replace(path)        # never half-written
    return True


def at_clock_resolution(data: dict) -> dict:
    """``data`` (a checked results file) with every timing benchmark's result and samples
    rounded to :data:`TIMING_DECIMALS` plus the digits its ``number`` divides by."""
    columns = data.get("result_columns") or []
    for name, row in data["results"].items():
        if not name.rpartition(".")[2].startswith("time_"):
            continue
        cell = dict(zip(columns, row))
        numbers = cell.get("stats_number")
        for column in ("result", "samples"):
            if column in cell and isinstance(cell[column], list):
                row[columns.index(column)] = [
                    _rounded(v, numbers[i] if isinstance(numbers, list) else None)
                    for i, v in enumerate(cell[column])]
    return data


def _rounded(value, number):
    if isinstance(value, list):
        return [_rounded(v, number) for v in value]
    if not isinstance(value, float) or not math.isfinite(value):
        return value
    extra = math.ceil(math.log10(number)) if isinstance(number, (int, float)) and number > 1 else 0
    return round(value, TIMING_DECIMALS + extra)
