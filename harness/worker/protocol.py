"""The subject worker's wire format: length-prefixed messages over a pipe pair, one version.

The harness sends requests (pickled: the worker is the harness's own child and trusts it); the
worker answers in JSON only, because what crosses back was produced next to untrusted subject
code and the harness must be able to read it without running any of it. Every reply is checked
here (version, shape, size) before anything else sees it: a worker that writes anything else is
a subject failure, never a harness crash.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import struct
import time

VERSION = 1
#: Largest reply accepted (a quick tier's per-step figures are a few MiB).
MAX_REPLY_BYTES = 256 << 20
_HEADER = struct.Struct(">I")


class Closed(Exception):
    """The other end closed the pipe (the worker ended)."""


class Unreadable(Exception):
    """A message that is not one of the protocol's (wrong framing, version, type or size)."""


class Overdue(Exception):
    """No complete message before the deadline."""


# -- requests: harness -> worker ------------------------------------------------------------------

def request(op: str, limit_s: float, args: dict) -> bytes:
    return _frame(pickle.dumps({"v": VERSION, "op": op, "limit_s": limit_s, "args": args}))


def read_request(fd: int) -> dict | None:
    """The next request, or None when the harness closed the pipe (time to exit)."""
    try:
        body = _read_frame(fd, None, limit=None)
    except Closed:
        return None
    return pickle.loads(body)


# -- replies: worker -> harness -------------------------------------------------------------------

def ok(value) -> bytes:
    return _json_frame({"v": VERSION, "ok": value})


def failure(kind: str, message: str, where: str = "") -> bytes:
    return _json_frame({"v": VERSION, "error": {"kind": kind, "message": message,
                                                "where": where}})


def progress(what: str) -> bytes:
    return _json_frame({"v": VERSION, "progress": str(what)[:500]})


def read_reply(fd: int, deadline: float | None) -> dict:
    """One reply, checked: ``{"ok": value}``, ``{"error": {...}}`` or ``{"progress": str}``."""
    body = _read_frame(fd, deadline, limit=MAX_REPLY_BYTES)
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise Unreadable("a reply that is not JSON") from None
    if not isinstance(message, dict) or message.get("v") != VERSION:
        raise Unreadable(f"a reply of another protocol version (expected {VERSION})")
    keys = set(message) - {"v"}
    if keys == {"ok"}:
        return message
    if keys == {"progress"} and isinstance(message["progress"], str):
        return message
    error = message.get("error")
    if keys == {"error"} and isinstance(error, dict) and \
            all(isinstance(error.get(k), str) for k in ("kind", "message", "where")):
        return message
    raise Unreadable("a reply of an unknown shape")


# -- framing ------------------------------------------------------------------------------------

def _json_frame(message: dict) -> bytes:
    return _frame(json.dumps(message, allow_nan=True).encode("utf-8"))


def _frame(body: bytes) -> bytes:
    return _HEADER.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_frame(fd: int, deadline: float | None, limit: int | None) -> bytes:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if limit is not None and size > limit:
        raise Unreadable(f"a reply of {size} bytes (more than {limit})")
    return _read_exact(fd, size, deadline)


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Overdue()
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            raise Closed()
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
