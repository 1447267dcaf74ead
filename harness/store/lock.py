"""One writer per results folder: run, nightly and bisect take this lock before writing.

ASV rewrites a commit's results file and ``benchmarks.json`` whole, so two writers into one folder
lose each other's results. The lock is ``flock`` on ``<results>/.spyre-bench.lock`` (released by
the kernel when the holder dies, so a killed run never leaves a stale lock); the holder writes its
pid, command and start time into it so the refusal names who holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from harness.errors import HarnessError

LOCK_NAME = ".spyre-bench.lock"
#: Folders this process holds: a command that locks and then calls the runner locks once.
_HELD: set[Path] = set()


class ResultsLocked(HarnessError):
    """Another spyre-bench command is writing into the same results folder."""


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text())
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"]))
        return f"pid {info['pid']} ({info['command']}, since {started})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _open_lock(results_dir: Path, path: Path) -> int:
    """The lock file's descriptor; a results folder that cannot be made or written (a file in
    its place, no permission, a read-only disk) is the user's input: one line, exit 2."""
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise HarnessError(f"cannot write results into {results_dir}: "
                           f"{_why(exc, results_dir)}") from None
    if not os.access(results_dir, os.W_OK | os.X_OK):
        os.close(fd)
        raise HarnessError(f"cannot write results into {results_dir}: permission denied")
    return fd


def check_writable(results_dir: Path, machine: str) -> None:
    """What a run rewrites in a results folder (the machine's folder, its ``machine.json`` and
    ``benchmarks.json``, the folder's ``benchmarks.json``), read before anything is written: a
    file in the folder's place or a path this user may not write is one line, exit 2, and
    nothing stored changes (ASV's write was a PermissionError traceback)."""
    folder = results_dir / machine
    if folder.exists() and not folder.is_dir():
        raise HarnessError(f"cannot write results into {folder}: a file is in the way of that "
                           "folder")
    for path in (results_dir / "benchmarks.json", folder, folder / "machine.json",
                 folder / "benchmarks.json"):
        if path.exists() and not os.access(path, os.W_OK | (os.X_OK if path.is_dir() else 0)):
            raise HarnessError(f"cannot write results into {folder}: {path} is not writable "
                               "(permission denied)")


def _why(exc: OSError, results_dir: Path) -> str:
    if isinstance(exc, FileExistsError) or (isinstance(exc, NotADirectoryError)
                                            and results_dir.exists()):
        return "a file is in the way of that folder"
    return exc.strerror or str(exc)


@contextlib.contextmanager
def wait_lock(path: Path) -> Iterator[None]:
    """Hold ``path``'s flock for the block, waiting for another holder to finish (for work that
    takes seconds, such as creating a shared folder, where refusing would fail a command)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def results_lock(results_dir: Path, command: str | None = None) -> Iterator[Path]:
    """Hold the folder's lock for the block, or refuse at once naming the holder."""
    path = (results_dir / LOCK_NAME).resolve()
    if path in _HELD:
        yield path
        return
    fd = _open_lock(results_dir, path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ResultsLocked(f"{results_dir} is being written by {_holder(path)}; wait for it "
                                f"to finish or use another --results-dir") from None
        info = {"pid": os.getpid(), "started": time.time(),
                "command": command or " ".join(["spyre-bench", *sys.argv[1:]])[:200]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        _HELD.add(path)
        try:
            yield path
        finally:
            _HELD.discard(path)
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)   # releases the flock
