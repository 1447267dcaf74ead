"""The exact tier of one commit (:func:`harness.runner.inprocess.write_exact`) in a process of
its own.

The tier drives the commit's own builder in the process that runs it, and spreads over the cores
by forking that process (:mod:`harness.subjects.prefetch`). A fork is safe only where no other
thread runs: ``run``'s own process has its progress heartbeats, and a fork taken while one of
them held a lock hung ``run`` for good (a child blocked on the lock, its parent waiting on it).
So each commit's tier runs in a child forked by multiprocessing's fork server: a
single-threaded process started once per ``run`` with torch, asv and the harness already
imported, so a child costs a fork, not an interpreter's start-up. The child leads a session of
its own (its forks are ended with it on an interrupt), takes ``run``'s environment and folder,
and writes its output to the commit's log; whatever the commit's code does there (exit, hang
past its time limit, kill itself) ends that child, which ``run`` reports as the tier's failure,
never ``run`` itself.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
from pathlib import Path

from harness.runner.sessions import end_session

#: Imported once, in the fork server: what every commit's tier needs before its own code.
PRELOAD = ["torch", "asv.results", "asv.machine", "asv.runner", "asv_runner.discovery",
           "harness.runner.inprocess", "harness.subjects.spyre_inference",
           "harness.subjects.builder", "harness.model.cost"]


def _context():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


class _Leader:
    """A multiprocessing child as :func:`end_session` ends it (as it ends a Popen)."""

    def __init__(self, process):
        self.pid, self._process = process.pid, process

    def poll(self):
        return self._process.exitcode

    def wait(self):
        self._process.join()
        return self._process.exitcode


def run_exact(log, **kwargs) -> tuple[int, int, str]:
    """``write_exact(**kwargs)`` in a child, its output appended to ``log`` (a file):
    (stored, failed, cause); cause is empty unless the child ended without a result."""
    with tempfile.TemporaryDirectory(prefix="spyre-bench-exact-") as tmp:
        result = Path(tmp) / "result.json"
        log.flush()
        child = _context().Process(
            target=_child, args=(kwargs, str(result), str(Path(log.name).resolve()),
                                 dict(os.environ), os.getcwd()), daemon=False)
        child.start()
        try:
            child.join()
        finally:
            if child.exitcode is None:   # an interrupt: the child and all it started
                end_session(_Leader(child))
        try:
            done = json.loads(result.read_text())
            return int(done["stored"]), int(done["failed"]), ""
        except (OSError, ValueError, KeyError, TypeError):
            return 0, 1, (f"the exact tier's process ended with exit status {child.exitcode} "
                          "(log)")


def _child(kwargs: dict, result: str, log: str, environ: dict, cwd: str) -> None:
    """In the child: ``run``'s environment, folder and log, then the tier, then its result."""
    os.setsid()
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    from harness.runner.inprocess import write_exact

    stored, failed = write_exact(**kwargs)
    sys.stdout.flush()
    sys.stderr.flush()
    Path(result).write_text(json.dumps({"stored": stored, "failed": failed}))
