"""What a command starts ends when the command does, even when it is killed outright.

An interrupt reaches a command's cleanup (:mod:`harness.interrupts`), ``kill -9`` does not: its
fork server and the exact tier's process, ASV and its benchmark processes and subject workers
would run on, holding cores, the subject's code and files, and a CI runner that kills a job would
find them on its next one. So every process of the harness a command starts asks Linux for a
signal when its parent ends (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, which the subject's code
cannot catch), and every fork such a process makes later does the same (``os.register_at_fork``):
the death of the command ends its children, whose deaths end theirs, down the tree.

The command's process is the root (:func:`rooted`, in ``main``): it names itself in
``SPYRE_BENCH_PARENT``, and a process started with that variable set calls :func:`hold` first
thing. A process whose named parent is already gone ends at once. Elsewhere than Linux nothing is
armed (the children end when they next read from the parent, as before).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Iterator

ENV_VAR = "SPYRE_BENCH_PARENT"
PR_SET_PDEATHSIG = 1

_state: dict = {"armed": False, "pid": 0, "prctl": None}


@contextlib.contextmanager
def rooted() -> Iterator[None]:
    """For the block, processes this one starts end with it (they call :func:`hold`)."""
    before = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = str(os.getpid())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before


def hold() -> None:
    """In a process a rooted command started: end when the parent does, and so do this
    process's forks; names this process as the parent of what it starts next."""
    named = os.environ.get(ENV_VAR)
    if (not named or not named.isdigit() or int(named) == os.getpid()
            or not sys.platform.startswith("linux")):
        return   # not started by a rooted command, or the command itself, or not Linux
    _arm()
    if os.getppid() != int(named) and not _alive(int(named)):
        os._exit(1)    # the command ended before this process could arm: nothing to do
    _state["pid"] = os.getpid()
    os.environ[ENV_VAR] = str(os.getpid())
    if not _state["armed"]:
        _state["armed"] = True
        os.register_at_fork(after_in_child=_forked)


def _arm() -> None:
    # resolved once, before any fork: a fork's child only makes the system call (no dlopen,
    # whose lock another thread of the parent may have held at the fork)
    if _state["prctl"] is None:
        _state["prctl"] = ctypes.CDLL(None, use_errno=True).prctl
    _state["prctl"](PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _forked() -> None:
    """In a fork (the parent's memory, so the parent's pid is still here)."""
    parent = _state["pid"]
    _arm()
    if os.getppid() != parent:
        os._exit(1)    # the parent ended between the fork and here
    _state["pid"] = os.getpid()
    os.environ[ENV_VAR] = str(os.getpid())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
