"""The harness's side of a subject worker: a Subject whose code runs in a child process.

:class:`SubjectWorker` answers what the harness asks of a subject without running any of its
code here: who it is and what it can do come from the worker's first reply; figures, kernel
measurements and prepared probes are requests. Each request is bounded in time by the subject
time limit (``--subject-timeout``) times the pieces of subject work it may run, plus a grace: a
worker past it, or one that dies, writes garbage, or exits on its own, is ended with its whole
process group and reported as the subject's failure (:class:`~harness.errors.SubjectCrashed`),
the last lines of its output attached. A later request starts a fresh worker.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from harness.config import ENV_NAME
from harness.errors import HarnessError, SubjectCrashed
from harness.subjects import timeout
from harness.subjects.base import Subject
from harness.subjects.source.knobs import Knob
from harness.worker import protocol

#: Seconds a worker gets on top of its subject work's own limits (start-up, harness work).
GRACE_S = 10.0
#: Where the harness package lives: the worker imports it from there, whatever its cwd.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Seconds a fresh worker may take to start (import torch) before its subject loads.
STARTUP_S = 120.0

#: Errors a worker may name, and where they live: anything else it names is a plain failure.
_ERRORS = {
    "HarnessError": "harness.errors", "ConfigError": "harness.errors",
    "TraceError": "harness.errors", "SubjectError": "harness.errors",
    "CapabilityMissing": "harness.errors", "SubjectRaised": "harness.errors",
    "SubjectTimeout": "harness.subjects.timeout",
    "NotDrivable": "harness.subjects.spyre.drive.errors",
    "SubjectRejected": "harness.subjects.spyre.bucketing",
    "KernelMismatch": "harness.measure.oracle", "ProbeSkipped": "harness.measure.probes",
    "DeviceError": "harness.measure.device", "BackendError": "harness.measure.compiles",
}

_open: set[SubjectWorker] = set()


class SubjectWorker(Subject):
    """A subject loaded and driven in a worker process (see module docstring)."""

    def __init__(self, spec: str, load: Callable[[], Subject], label: str,
                 sources: dict[str, str] | None = None, tree=None):
        self.spec = spec
        self.identity = label
        self.sources = sources
        #: The commit's files as the harness read them (for its source key), or None.
        self._tree = tree
        self._source: str | None = None
        self.capabilities = frozenset()
        self._load, self._label = load, label
        self._pid: int | None = None
        self._hello: dict | None = None
        self._start()

    # -- what the harness reads of a subject --------------------------------------------------

    @property
    def origin(self) -> str:
        return self._hello.get("origin", self.spec) if self._hello else self.spec

    def source(self) -> str | None:
        """The commit's source key (harness.subjects.memo.key), computed here from its files,
        never by its code: two subjects with one key run the same code on every load."""
        if self._source is None and self._tree is not None:
            from harness.subjects.memo.key import source_key
            self._source = source_key(self._tree)
        return self._source

    def lacks(self, capability: str) -> str | None:
        if capability in self.capabilities:
            return None
        return (self._hello or {}).get("lacks", {}).get(capability) or super().lacks(capability)

    def bucketing(self, config, overrides):
        raise HarnessError(f"{self.spec}: its bucketing is computed in its worker process "
                           "(harness.evaluate asks for figures)")

    # -- requests ------------------------------------------------------------------------------

    def call(self, op: str, pieces: float | None = 1,
             progress: Callable[[str], None] | None = None, what: str = "", **args):
        """Run ``op`` in the worker; its value, or the HarnessError it raised (rebuilt here).

        ``pieces``: how many outermost pieces of subject work (each under the subject time
        limit) the request may run; ``None`` for no bound at all."""
        if self._pid is None:
            self._start()
        limit = timeout.limit()
        deadline = (None if not limit or pieces is None
                    else time.monotonic() + limit * pieces + GRACE_S)
        what = what or op.replace("_", " ")
        try:
            protocol.write_all(self._requests, protocol.request(op, limit, args))
        except OSError:
            raise self._crashed(f"while {what}", "it stopped reading requests") from None
        while True:
            message = self._read(deadline, what, limit)
            if "progress" in message:
                if progress is not None:
                    progress(message["progress"])
                continue
            if "ok" in message:
                return message["ok"]
            raise self._rebuilt(message["error"], what)

    def close(self) -> None:
        """End the worker and everything it started; remove its scratch folder."""
        if self._pid is None:
            return
        for fd in (self._requests, self._replies):
            try:
                os.close(fd)
            except OSError:
                pass
        status = _reap(self._pid, 2.0)
        _kill_group(self._pid)
        if status is None:
            _reap(self._pid, None)
        self._pid = None
        _open.discard(self)
        shutil.rmtree(self._scratch, ignore_errors=True)

    # -- the worker's life ---------------------------------------------------------------------

    def _start(self) -> None:
        self._scratch = tempfile.mkdtemp(prefix="spyre-bench-worker-")
        self._capture = os.path.join(self._scratch, "output.log")
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)}
        try:
            with open(self._capture, "ab") as capture:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "harness.worker.child", str(req_r), str(rep_w),
                     self._scratch], pass_fds=(req_r, rep_w), start_new_session=True,
                    cwd=self._scratch, env=env, stdin=subprocess.DEVNULL, stdout=capture,
                    stderr=capture)
        finally:
            os.close(req_r)
            os.close(rep_w)
        proc.returncode = 0   # reaped by _reap (os.waitpid), never by Popen
        self._pid, self._requests, self._replies = proc.pid, req_w, rep_r
        _open.add(self)
        limit = timeout.limit()
        # the harness's own start-up first (torch imported), then the subject's load
        message = self._read(time.monotonic() + STARTUP_S, "starting", limit)
        if "progress" in message:
            try:
                protocol.write_all(self._requests,
                                   protocol.request("load", limit, {"load": self._load}))
            except OSError:
                raise self._crashed("while loading", "it stopped reading requests") from None
            deadline = None if not limit else time.monotonic() + limit + GRACE_S
            message = self._read(deadline, "loading", limit)
        if "error" in message:
            error = self._rebuilt(message["error"], "loading")
            self.close()
            raise error
        hello = message.get("ok")
        if not isinstance(hello, dict) or not isinstance(hello.get("capabilities"), list):
            raise self._crashed("while loading", "its first reply was not a subject's")
        try:
            knobs = hello.get("knobs")
            self.knobs = None if knobs is None else {
                str(n): Knob.from_data(str(n), d) for n, d in dict(knobs).items()
                if ENV_NAME.fullmatch(str(n))}
        except (TypeError, ValueError):
            raise self._crashed("while loading", "its knobs were not a registry's") from None
        self._hello = hello
        self.identity = str(hello.get("identity", self._label))
        self.capabilities = frozenset(str(c) for c in hello["capabilities"])

    def _read(self, deadline, what: str, limit: float) -> dict:
        try:
            return protocol.read_reply(self._replies, deadline)
        except protocol.Overdue:
            self.close()
            raise timeout.SubjectTimeout(
                f"{self.origin}: {what}: the subject's code still ran after its limit "
                f"({limit:g} s per piece of work) and its worker was stopped (raise the limit "
                "with --subject-timeout SECONDS, 0 for none)") from None
        except protocol.Closed:
            raise self._crashed(f"while {what}", None) from None
        except protocol.Unreadable as exc:
            raise self._crashed(f"while {what}", f"it wrote {exc}") from None

    def _crashed(self, when: str, why: str | None) -> SubjectCrashed:
        pid = self._pid
        status = _reap(pid, 2.0) if pid else None
        tail = self._output_tail()
        self.close()
        if why is None:
            why = _how_it_ended(status)
        return SubjectCrashed(f"subject failed: {self.origin}: {why} {when}"
                              + (f"; its last output: {tail}" if tail else ""))

    def _rebuilt(self, error: dict, what: str) -> HarnessError:
        kind, message, where = error["kind"], error["message"], error["where"]
        if kind == "SystemExit":
            return SubjectCrashed(f"subject failed: {self.origin}: its code {message} while "
                                  f"{what}" + (f" ({where})" if where else ""))
        module = _ERRORS.get(kind)
        if module is None:
            return SubjectCrashed(f"subject failed: {self.origin}: {message} while {what}"
                                  + (f" ({where})" if where else ""))
        cls = getattr(importlib.import_module(module), kind)
        exc = cls.__new__(cls)
        Exception.__init__(exc, message)
        return exc

    def _output_tail(self, chars: int = 2000, lines: int = 3) -> str:
        try:
            with open(self._capture, "rb") as f:
                f.seek(max(0, os.path.getsize(self._capture) - chars))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
        return " | ".join(kept)[-300:]

    def __repr__(self) -> str:
        return f"<SubjectWorker {self.spec} pid={self._pid}>"


class RemoteProbe:
    """A probe prepared (and oracle-checked) in a subject's worker; timed there, sample by
    sample, so no pipe round trip is inside a timed region."""

    def __init__(self, worker: SubjectWorker, probe, device):
        self.worker, self.name = worker, probe.name
        worker.call("prepare_probe", pieces=3, probe=probe, device=device)

    def calls_per_sample(self, min_sample_s: float) -> int:
        return int(self.worker.call("calls_per_sample", pieces=1, name=self.name,
                                    min_sample_s=min_sample_s))

    def sample(self, number: int) -> float:
        return float(self.worker.call("sample", pieces=1, name=self.name, number=number))

    def check(self, outputs=None) -> None:
        self.worker.call("check_probe", pieces=1, name=self.name)

    @property
    def pid(self) -> int | None:
        """The worker timing this probe (its CPU time is the timing's own, not a neighbour's)."""
        return self.worker._pid

    def pin(self, cpus) -> bool:
        """Time this probe on ``cpus`` (every thread of the worker; harness.measure.placement)."""
        from harness.measure.placement import pin_process
        return self.worker._pid is not None and pin_process(self.worker._pid, cpus)

    def close(self) -> None:
        self.worker.call("close_probe", pieces=1, name=self.name)


class RemoteHostProbe(RemoteProbe):
    """A host probe (harness.measure.host) prepared in a subject's worker: timed there, and
    profiled there apart from its samples."""

    def __init__(self, worker: SubjectWorker, probe, device):
        self.worker, self.name = worker, probe.name
        worker.call("prepare_host", pieces=3, probe=probe, device=device,
                    what=f"preparing {probe.name}")

    def profile(self, top: int) -> dict:
        return self.worker.call("profile", pieces=2, name=self.name, top=top)


def _how_it_ended(status: int | None) -> str:
    if status is None:
        return "its worker stopped answering"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"its worker was killed by {name}"
    return f"its code ended the worker (exit status {os.WEXITSTATUS(status)})"


def _reap(pid: int, wait_s: float | None) -> int | None:
    """The exit status of ``pid`` (waiting up to ``wait_s``; None: forever), or None."""
    end = None if wait_s is None else time.monotonic() + wait_s
    while True:
        try:
            done, status = os.waitpid(pid, 0 if end is None else os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        if time.monotonic() >= end:
            _kill_group(pid)
            end = time.monotonic() + 5.0
            try:
                done, status = os.waitpid(pid, 0)
            except ChildProcessError:
                return None
            return status
        time.sleep(0.01)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@atexit.register
def close_all() -> None:
    """Every worker this process started ends with it."""
    for worker in list(_open):
        worker.close()
