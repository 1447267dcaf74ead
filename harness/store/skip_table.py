"""Skip reasons stored once per commit in the identity sidecar.

A commit the harness cannot drive skips every figure for the same reason (a missing bucketer, a
vLLM name no stand-in covers): stored per figure, that one sentence filled 180 kB of a 212 kB
sidecar. On disk each distinct reason is kept once (``reasons``) and every skip refers to it by
index: ``skipped`` holds one ``{"reason": i, "benchmarks": [...]}`` per reason, and a config's
ladders ``{"skipped": i}``. In memory (``Identity``) skips stay ``{"benchmark", "reason"}``
entries and ladders ``{"skipped": reason}``, so readers see the sentence itself. Sidecars written
before this (a reason per entry) read as they are.
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
            "skipped": [{"reason": i, "benchmarks": names} for i, names in groups.items()]}


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
        if isinstance(entry, dict) and isinstance(entry.get("benchmarks"), list):
            why = sentence(entry.get("reason"))
            skipped += [{"benchmark": name, "reason": why} for name in entry["benchmarks"]]
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
