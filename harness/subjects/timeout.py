"""A time bound on subject code: loading, probing and driving a spyre-inference commit.

Loading a subject *executes its code* (its bucketer, envs, backend and metadata builder run in
this process, as any import does). A commit that loops forever would hang every command, so each
outermost piece of subject work runs under a wall-clock limit (``--subject-timeout``, or
``SPYRE_BENCH_SUBJECT_TIMEOUT``, default 60 s): ``SIGALRM`` from ``setitimer`` raises inside the
subject's code, as an exception its own ``except Exception`` cannot swallow, and leaves here as
one :class:`SubjectTimeout` (a HarnessError: one error line, exit status 2).

The bound needs the main thread of a POSIX process (ASV's spawn and forkserver benchmark
processes run benchmarks there); elsewhere the work runs unbounded. It bounds time only: it is
no sandbox, and an untrusted checkout can still do anything its code does when imported.
"""

from __future__ import annotations

import math
import os
import signal
import threading
from contextlib import contextmanager

from harness.errors import SubjectError

DEFAULT_SECONDS = 60.0
#: A day: a longer limit is no bound at all (0 says that), and the timer takes no more.
MAX_SECONDS = 86400.0
ENV_VAR = "SPYRE_BENCH_SUBJECT_TIMEOUT"

_seconds: list[float | None] = [None]
_armed = threading.local()


class SubjectTimeout(SubjectError):
    """Subject code ran past the limit: the whole command stops (never a per-config skip)."""


class _Expired(BaseException):
    """Raised by the alarm inside subject code; BaseException so ``except Exception`` in the
    subject (or the harness's wrappers) lets it through."""


def set_limit(seconds: float | None) -> None:
    """The limit for this process (None: the env var, else the default); 0 disables it."""
    if seconds is not None and seconds < 0:
        raise SubjectError(f"--subject-timeout {seconds:g}: expected seconds >= 0")
    _seconds[0] = seconds


def limit() -> float:
    if _seconds[0] is not None:
        return _seconds[0]
    raw = os.environ.get(ENV_VAR)
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and 0 <= value <= MAX_SECONDS:
            return value
        raise SubjectError(f"{ENV_VAR}={raw[:40]!r}: expected seconds from 0 (no limit) to "
                           f"{MAX_SECONDS:g}")
    return DEFAULT_SECONDS


def _can_arm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextmanager
def bounded(what: str):
    """Run the block under the limit, in the folder it started in (a subject's ``os.chdir``
    moved a ``run``'s relative paths and ASV's own files); nested blocks share the outermost
    one's deadline."""
    with _same_folder(), _time_bounded(what):
        yield


@contextmanager
def _same_folder():
    try:
        here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        try:
            os.fchdir(here)
        finally:
            os.close(here)


@contextmanager
def _time_bounded(what: str):
    seconds = limit()
    if getattr(_armed, "on", False) or not seconds or not _can_arm():
        yield
        return

    def expire(signum, frame):
        raise _Expired()

    previous = signal.signal(signal.SIGALRM, expire)
    _armed.on = True
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        yield
    except _Expired:
        raise SubjectTimeout(
            f"{what}: the subject's code still ran after {seconds:g} s and was stopped (loading "
            "a subject executes its code; raise the limit with --subject-timeout SECONDS, 0 for "
            "none)") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _armed.on = False
