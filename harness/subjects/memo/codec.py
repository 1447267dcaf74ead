"""Memoized figures as plain JSON and back, exactly, with no code run on the way in.

The persistent memo (:mod:`harness.subjects.memo.store`) may read files another process or job
wrote, so its format is data only: numbers, strings, lists and objects, with tags for tuples,
dicts with non-string keys and the few figure classes a step is made of, rebuilt while the JSON
is parsed (:func:`object_hook`). A class is rebuilt only when it is on :func:`_classes`' list;
anything else is :class:`Undecodable`. A value is
stored only when it comes back from its encoding equal and with the same ``repr`` (tuples stay
tuples, dict order stays, ``True`` stays ``True``), so a figure read back is the figure computed.
"""

from __future__ import annotations

import dataclasses
import functools
import json


class Undecodable(ValueError):
    """Stored data that is not a figure this harness writes: the entry is a miss."""


@functools.cache
def _classes() -> dict[str, type]:
    """The figure classes an entry may hold, by name."""
    from harness.model.cost import StepCost
    from harness.model.dispatch import CompileKey, Dispatch
    from harness.subjects.base import Bucketing, ChunkTable

    return {c.__name__: c for c in (StepCost, Dispatch, CompileKey, Bucketing, ChunkTable)}


def encode(value):
    """``value`` as JSON-ready data (raises Undecodable for what has no encoding)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"float": repr(value)}
    name = type(value).__name__
    if _classes().get(name) is type(value):
        if dataclasses.is_dataclass(value):   # by position: the harness's fingerprint is
            return {"class": name, "items": [encode(getattr(value, f.name))   # in the key
                                             for f in dataclasses.fields(value)]}
        return {"class": name, "items": [encode(v) for v in value]}   # a NamedTuple
    if type(value) is tuple:
        return {"tuple": [encode(v) for v in value]}
    if type(value) is list:
        return [encode(v) for v in value]
    if type(value) is dict:
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    raise Undecodable(f"no encoding for {type(value).__name__}")


def object_hook(data: dict):
    """What :func:`encode` gave, rebuilt, as ``json.loads``' ``object_hook`` (the parser does
    lists and numbers; this, object by object, from the inside out): a tagged object becomes its
    value, any other (a file's own fields, its entries by name) stays a dict. Raises
    Undecodable, a ValueError, for a class or tag it would not have written."""
    if len(data) == 1:
        tag, value = next(iter(data.items()))
        if tag == "tuple" and isinstance(value, list):
            return tuple(value)
        if tag == "dict" and isinstance(value, list):
            try:
                return {k: v for k, v in value}
            except (TypeError, ValueError):
                raise Undecodable("a dict's items are not pairs") from None
        if tag == "float" and isinstance(value, str):
            return float(value)
    if "class" in data:
        cls = _classes().get(data["class"]) if isinstance(data["class"], str) else None
        if cls is None or len(data) != 2:
            raise Undecodable(f"unknown class {data['class']!r}")
        if not isinstance(data.get("items"), list):
            raise Undecodable(f"{data['class']}: no items")
        try:
            return cls(*data["items"])
        except (TypeError, ValueError) as exc:
            raise Undecodable(f"{data['class']}: {exc}") from None
    return data


def loads(text: str | bytes):
    """JSON text written from :func:`encode`'s data, rebuilt."""
    return json.loads(text, object_hook=object_hook)


def exact(value):
    """``value``'s encoding when reading it back gives ``value`` exactly, else None."""
    try:
        data = encode(value)
        back = loads(json.dumps(data))
    except (Undecodable, RecursionError, TypeError, ValueError):
        return None
    return data if back == value and repr(back) == repr(value) else None
