"""A sidecar's ladders stored once per distinct ladder.

A tier's configs share most of their ladders (the quick tier's 64 configs hold 6 axes each, 384
ladders, about 30 of them distinct: every config has the same query and num_seqs ladders), and
stored per config with its config's names they were 17.5 kB of a commit's 23 kB sidecar. On disk
the ladders are one table: the config's field names once (``configs``), the axes once
(``axes``), each distinct ladder once (``values``) and per config its field values and, per axis,
the index of its ladder (``rows``: ``[[64, 2048, 32, "none"], [0, 1, 2, 3, 3, 2]]``, null for an
axis it lacks). An entry without a config (the subject could not be loaded) is kept as it is. In
memory (``Identity``) ladders stay ``{"config": {..}, "ladders": {axis: [..]}}`` entries, in
their order; a list of entries the table cannot say exactly (configs named differently, axes in
another order) is stored as the list. Sidecars written before this read as they are.
"""

from __future__ import annotations

import copy
import json

#: The keys of the table, to tell it from the older layout keyed by config.
_KEYS = frozenset({"configs", "axes", "values", "rows"})


def pack(entries: list) -> list | dict:
    """``entries`` (Identity.ladders) as a table, or as they are when it cannot hold them."""
    configs = [e for e in entries if isinstance(e, dict) and "config" in e]
    if not configs or not all(isinstance(e["config"], dict) and isinstance(e.get("ladders"), dict)
                              for e in configs):
        return entries
    names = list(configs[0]["config"])
    axes: list[str] = []
    for e in configs:
        if list(e["config"]) != names:
            return entries
        axes += [a for a in e["ladders"] if a not in axes]
    if not all(list(e["ladders"]) == [a for a in axes if a in e["ladders"]] for e in configs):
        return entries
    values: list = []
    index: dict[str, int] = {}

    def ref(value) -> int:
        key = json.dumps(value, sort_keys=True)
        if key not in index:
            index[key] = len(values)
            values.append(value)
        return index[key]

    rows = [[list(e["config"].values()),
             [ref(e["ladders"][a]) if a in e["ladders"] else None for a in axes]]
            if isinstance(e, dict) and "config" in e else e for e in entries]
    return {"configs": names, "axes": axes, "values": values, "rows": rows}


def is_table(ladders) -> bool:
    return isinstance(ladders, dict) and set(ladders) == _KEYS


def table_problem(ladders) -> str | None:
    """Why a stored table cannot be read back, or None (not a table: None)."""
    if not is_table(ladders):
        return None
    names, axes, values, rows = (ladders[k] for k in ("configs", "axes", "values", "rows"))
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)
            and isinstance(axes, list) and all(isinstance(a, str) for a in axes)
            and isinstance(values, list) and isinstance(rows, list)):
        return "ladders table: configs, axes, values and rows are not lists"
    for row in rows:
        if isinstance(row, dict):
            continue
        if not (isinstance(row, list) and len(row) == 2 and isinstance(row[0], list)
                and len(row[0]) == len(names) and isinstance(row[1], list)
                and len(row[1]) == len(axes)
                and all(i is None or (isinstance(i, int) and not isinstance(i, bool)
                                      and 0 <= i < len(values)) for i in row[1])):
            return "ladders table: a row is not [config values, ladder indexes]"
    return None


def unpack(ladders) -> list | dict:
    """The entries a table holds (anything else as it is); call on a table
    :func:`table_problem` accepts."""
    if not is_table(ladders):
        return ladders
    names, axes, values = ladders["configs"], ladders["axes"], ladders["values"]
    return [row if isinstance(row, dict) else
            {"config": dict(zip(names, row[0])),
             "ladders": {a: copy.deepcopy(values[i])
                         for a, i in zip(axes, row[1]) if i is not None}}
            for row in ladders["rows"]]
