"""The exact tier of one commit (:func:`harness.runner.inprocess.write_exact`) in a process of
its own.

The tier drives the commit's own builder in the process that runs it, and spreads over the cores
by forking that process (:mod:`harness.subjects.spyre.prefetch`). A fork is safe only where no other
thread runs: ``run``'s own process has its progress heartbeats, and a fork taken while one of
them held a lock hung ``run`` for good (a child blocked on the lock, its parent waiting on it).
So each commit's tier runs in a child forked by multiprocessing's fork server: a
single-threaded process started once per ``run`` with torch, asv and the harness already
imported, so a child costs a fork, not an interpreter's start-up. The child leads a session of
its own (its forks are ended with it on an interrupt), takes ``run``'s environment and folder,
and writes its output to the commit's log; whatever the commit's code does there (exit, hang
past its time limit, kill itself) ends that child, which ``run`` reports as the tier's failure,
never ``run`` itself. The machine's bandwidth field is read in such a child too, so ``run``'s own
process never imports torch.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
from pathlib import Path

from harness.errors import HarnessError
from harness.interrupts import Deferred
from harness.lifeline import hold
from harness.runner.sessions import end_session

#: Imported once, in the fork server: first what makes it end with ``run`` (and so every child
#: it forks, :mod:`harness.lifeline`), then what every commit's tier needs before its own code.
PRELOAD = ["harness.runner.fork_server_held", "torch", "asv.results", "asv.machine", "asv.runner",
           "asv_runner.discovery",
           "harness.runner.inprocess", "harness.subjects.spyre.locate",
           "harness.subjects.spyre.drive.session", "harness.model.cost",
           "harness.measure.efficiency", "harness.measure.device"]


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
    done, code = in_child(_exact, kwargs, log)
    if isinstance(done, dict):
        return int(done["stored"]), int(done["failed"]), ""
    return 0, 1, f"the exact tier's process ended with exit status {code} (log)"


def machine_fields(device: str) -> dict | None:
    """:func:`harness.measure.efficiency.machine_fields` in a child: ``run``'s own process never
    imports torch (the fork server has it already); None if the child ended without them. A
    device not available here is the same one-line error as in this process."""
    done, _ = in_child(_machine_fields, {"device": device})
    if isinstance(done, dict) and "error" in done:
        raise HarnessError(str(done["error"]))
    return done if isinstance(done, dict) else None


def in_child(target, kwargs: dict, log=None):
    """``target(**kwargs)`` in a fork-server child with ``run``'s environment and folder, its
    output appended to ``log`` (else this process's own): (its JSON result or None, exit code)."""
    with tempfile.TemporaryDirectory(prefix="spyre-bench-child-") as tmp:
        result = Path(tmp) / "result.json"
        if log is not None:
            log.flush()
        child = _context().Process(
            target=_child, args=(target, kwargs, str(result),
                                 str(Path(log.name).resolve()) if log is not None else None,
                                 dict(os.environ), os.getcwd()), daemon=False)
        # An interrupt while the fork server starts the child would leave it running unknown
        # (no pid yet), and this process's exit would then wait on it for good (multiprocessing
        # joins its children at exit): an interrupt waits until the child is known.
        with Deferred() as interrupt:
            child.start()
        try:
            interrupt.deliver()
            child.join()
        finally:
            if child.exitcode is None:   # an interrupt: the child and all it started
                end_session(_Leader(child))
        try:
            return json.loads(result.read_text()), child.exitcode
        except (OSError, ValueError):
            return None, child.exitcode


def _child(target, kwargs: dict, result: str, log: str | None, environ: dict,
           cwd: str) -> None:
    """In the child: ``run``'s environment, folder and log, then the work, then its result."""
    os.setsid()
    os.environ.clear()
    os.environ.update(environ)
    hold()   # armed at the fork already; names this process the parent of what it starts
    os.chdir(cwd)
    if log is not None:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    done = target(**kwargs)
    sys.stdout.flush()
    sys.stderr.flush()
    Path(result).write_text(json.dumps(done))


def _exact(**kwargs) -> dict:
    from harness.runner.inprocess import write_exact

    stored, failed = write_exact(**kwargs)
    return {"stored": stored, "failed": failed}


def _machine_fields(device: str) -> dict:
    from harness.measure.efficiency import machine_fields as fields

    try:
        return fields(device)
    except HarnessError as exc:
        return {"error": str(exc)}
