"""Results files without blanks: ASV's own JSON, written with ``,`` and ``:`` separators.

``asv.results.Results.save`` writes ``json.dump``'s default separators, a blank after every comma
and colon: one per stored number, about 9,800 of them (15 %) in a quick-tier commit's file.
Rewritten from its own parsed data with no blanks, a file keeps every key, value and order
(floats round-trip exactly, NaN stays ``NaN``), and ASV and every reader parse it as before.
ASV expands the blanks again whenever it saves the file (``asv run`` of a later group), so the
writers compact after their last save.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.store.jsonfile import StoredFileError, parse_json, read_bytes
from harness.store.results_format import results_problem

SEPARATORS = (",", ":")


def compact_results(path: Path) -> bool:
    """Rewrite the results file ``path`` without blanks; False (untouched) when it is not a
    results file this harness reads, or is compact already."""
    try:
        raw = read_bytes(path)
        data = parse_json(raw)
    except (OSError, StoredFileError):
        return False
    if results_problem(data):
        return False
    text = json.dumps(data, separators=SEPARATORS).encode()
    if text == raw:
        return False
    tmp = path.with_name(f".{path.name}.compact.tmp")
    tmp.write_bytes(text)
    tmp.replace(path)        # never half-written
    return True
