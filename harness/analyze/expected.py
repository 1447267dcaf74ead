"""The expected-changes gate: exact changes a PR acknowledges, kept in the subject repository.

As PyTorch's compile-time PR gate keeps its expected results in the repository, a spyre-inference
PR that changes an exact figure on purpose commits the change to a file; the check then passes on
that change and still fails on any other, in either direction (an unexpected improvement is as
suspicious as a loss). The file is JSON lines, one change each, exact values included, so an
acknowledgement covers exactly that before → after and nothing else:

    {"base":4,"head":128,"metric":"iterations_per_layer_mean","params":{...}}
    {"axis":"batched_num_blocks","base":[1,2],"head":[2],"params":{...}}

Lines starting with ``#`` are comments. :func:`replacement` writes the file that acknowledges
exactly the changes seen, ready to commit. Works on the comparison document (plain data).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import HarnessError

DEFAULT_PATH = ".github/spyre-bench-expected-changes.jsonl"
HEADER = ("# spyre-bench expected changes: exact figures this branch changes on purpose.\n"
          "# Written by `spyre-bench compare --write-expected`; one change per line, exact values.\n")


def _line(item: dict) -> str:
    keys = ("axis" if "axis" in item else "metric", "params", "base", "head")
    return json.dumps({k: item[k] for k in keys}, sort_keys=True, separators=(",", ":"))


def load(path: str | Path) -> set[str]:
    """The acknowledged changes of a file (canonical lines); an absent file acknowledges none."""
    path = Path(path)
    if not path.exists():
        return set()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"expected-changes file {path}: {exc}") from None
    out = set()
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            item = json.loads(raw)
            out.add(_line(item))
        except (ValueError, KeyError, TypeError):
            raise HarnessError(f"expected-changes file {path}, line {n}: not a change written "
                               "by spyre-bench compare --write-expected") from None
    return out


def apply(doc: dict, acknowledged: set[str], file: str) -> None:
    """Mark each exact and ladder change of ``doc`` acknowledged or not; count the stale ones."""
    seen = set()
    counts = {"acknowledged": 0, "unacknowledged": 0}
    for item in doc["exact_changed"] + doc["ladders"]:
        line = _line(item)
        seen.add(line)
        item["acknowledged"] = line in acknowledged
        counts["acknowledged" if item["acknowledged"] else "unacknowledged"] += 1
    doc["expected"] = {"file": file, **counts, "stale": len(acknowledged - seen)}


def unacknowledged(doc: dict) -> int:
    """Exact and ladder changes the gate fails on (all of them when no file was given)."""
    if "expected" in doc:
        return doc["expected"]["unacknowledged"]
    return len(doc["exact_changed"]) + len(doc["ladders"])


def replacement(doc: dict) -> str:
    """The expected-changes file acknowledging exactly this comparison's changes."""
    lines = sorted(_line(item) for item in doc["exact_changed"] + doc["ladders"])
    return HEADER + "".join(line + "\n" for line in lines)
