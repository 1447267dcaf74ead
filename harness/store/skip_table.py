"""Skip reasons stored once per commit in the identity sidecar.

A commit the harness cannot drive skips every figure for the same reason (a missing bucketer, a
vLLM name no stand-in covers): stored per figure, that one sentence filled 180 kB of a 212 kB
sidecar. On disk each distinct reason is kept once (``reasons``) and every skip refers to it by
index: ``skipped`` holds one ``{"reason": i, "benchmarks": {...}}`` per reason, its figures by
benchmark (``{"exact.Frontier": ["64, 256, 32, 'kv-sparse'", ...]}``: the name once, each
figure's parameters; ``null`` for a figure without), and a config's ladders
``{"skipped": i}``. In memory (``Identity``) skips stay ``{"benchmark", "reason"}`` entries and
ladders ``{"skipped": reason}``, so readers see the sentence itself. Sidecars written before this
(a reason per entry, or a list of names per reason) read as they are.
"""

from __future__ import annotations


def pack(record: dict) -> dict:
    """``record`` (an Identity as a dict) with each distinct reason stored once."""
    reasons: list[str] = []
    index: dict[str, int] = {}

    def ref(reason: str) -> int:
        if reason not in index:
            index[reason] = len(reasons)
            reasons.append(reason)
        return index[reason]

    groups: dict[int, list[str]] = {}
    for entry in record.get("skipped") or []:
        groups.setdefault(ref(str(entry.get("reason", ""))), []).append(entry.get("benchmark"))
    ladders = []
    for entry in record.get("ladders") or []:
        lad = entry.get("ladders") if "config" in entry else entry
        if isinstance(lad, dict) and isinstance(lad.get("skipped"), str):
            packed = {"skipped": ref(lad["skipped"])}
            entry = {**entry, "ladders": packed} if "config" in entry else packed
        ladders.append(entry)
    return {**record, "reasons": reasons, "ladders": ladders,
            "skipped": [{"reason": i, "benchmarks": _by_benchmark(names)}
                        for i, names in groups.items()]}


def _by_benchmark(names: list) -> dict:
    """``exact.Frontier[64, 256, 32, 'none']`` as ``{"exact.Frontier": ["64, 256, 32, 'none']}``
    (a name without parameters: ``[None]``), first-seen order kept: each name once, not per
    figure (a quick-tier reference commit's skips: 5.0 kB -> 2.6 kB)."""
    out: dict[str, list] = {}
    for name in names:
        head, bracket, tail = str(name).partition("[")
        if bracket and tail.endswith("]"):
            out.setdefault(head, []).append(tail[:-1])
        else:
            out.setdefault(str(name), []).append(None)
    return out


def _names(benchmarks) -> list:
    """The figures' names back from :func:`_by_benchmark` (a list, as stored before: as is)."""
    if not isinstance(benchmarks, dict):
        return benchmarks
    return [name if params is None else f"{name}[{params}]"
            for name, each in benchmarks.items() if isinstance(each, list) for params in each]


def unpack(data: dict) -> dict:
    """A sidecar's dict with every reason index replaced by its sentence (old sidecars as is)."""
    reasons = data.get("reasons")
    if not isinstance(reasons, list):
        return data

    def sentence(i) -> str:
        ok = isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(reasons)
        return str(reasons[i]) if ok else f"(reason {i!r} not stored)"

    skipped = []
    for entry in data.get("skipped") or []:
        if isinstance(entry, dict) and isinstance(entry.get("benchmarks"), (list, dict)):
            why = sentence(entry.get("reason"))
            skipped += [{"benchmark": name, "reason": why} for name in _names(entry["benchmarks"])]
        else:
            skipped.append(entry)
    if not isinstance(data.get("ladders"), list):   # an older layout: read by its own reader
        return {**{k: v for k, v in data.items() if k != "reasons"}, "skipped": skipped}
    ladders = []
    for entry in data["ladders"]:
        lad = entry.get("ladders") if isinstance(entry, dict) and "config" in entry else entry
        if isinstance(lad, dict) and "skipped" in lad and not isinstance(lad["skipped"], str):
            plain = {"skipped": sentence(lad["skipped"])}
            entry = {**entry, "ladders": plain} if "config" in entry else plain
        ladders.append(entry)
    out = {k: v for k, v in data.items() if k != "reasons"}
    return {**out, "skipped": skipped, "ladders": ladders}
