"""Inside the subject worker: load one subject, then answer the harness's requests until it hangs up.

The worker is a fresh interpreter the harness starts (never a fork: a fork of a process with
threads about, torch's among them, can deadlock in the child) in a session of its own, a scratch
folder for its cwd and a capture file for its output. It bounds its memory, builds the subject
(which runs the commit's code) and then serves requests.
Whatever the subject does (``sys.exit``, ``os._exit``, a fork, a stray thread, an ``atexit``
handler, a signal handler, a ``chdir``, printing) stays in here: the worker always leaves through
``os._exit`` (no ``atexit``, no waiting on threads), a fork of it never answers, and the harness
reads only the checked replies of :mod:`harness.worker.protocol`.
"""

from __future__ import annotations

import os
import resource
import sys
import traceback

from harness.errors import HarnessError
from harness.lifeline import hold
from harness.worker import protocol

#: Memory a worker may allocate, GiB (default: the machine's physical memory).
MEMORY_ENV = "SPYRE_BENCH_WORKER_MEMORY_GIB"

_probes: dict = {}
_device_ready: list[bool] = [False]


def main(argv: list[str]) -> None:
    """``python -m harness.worker.child REQUESTS_FD REPLIES_FD SCRATCH``: started by
    :class:`harness.worker.proxy.SubjectWorker` in a session of its own, stdout and stderr on
    the capture file, cwd the scratch folder; it ends when the harness does, killed or not."""
    hold()
    requests_fd, replies_fd, scratch = int(argv[0]), int(argv[1]), argv[2]
    serve(requests_fd, replies_fd, scratch)


def serve(requests_fd: int, replies_fd: int, scratch: str) -> None:
    """The worker's whole life; never returns. The first request carries the subject's loader
    (``Located.load``); each later one an op of :data:`OPS`."""
    me = os.getpid()
    code = 0
    try:
        _bound_memory()
        import torch  # (the harness's own start-up, before the subject's clock starts)
        _one_thread_unless_asked(torch)
        _choose_vllm()
        _reply(replies_fd, me, protocol.progress("loading"))
        first = protocol.read_request(requests_fd)
        if first is None:
            return
        _set_limit(first["limit_s"])
        try:
            subject = first["args"]["load"]()
        except BaseException as exc:   # noqa: BLE001 - whatever the subject's load does
            _reply(replies_fd, me, _failure(exc))
            return
        if os.getpid() != me:
            return   # a fork the subject made while loading: it must never read or answer
        _reply(replies_fd, me, protocol.ok(_hello(subject)))
        env = dict(os.environ)
        while True:
            message = protocol.read_request(requests_fd)
            if message is None:
                return
            os.chdir(scratch)
            _set_limit(message["limit_s"])
            try:
                value = OPS[message["op"]](subject, replies_fd, **message["args"])
                reply = protocol.ok(value)
            except BaseException as exc:   # noqa: BLE001 - SystemExit from the subject included
                reply = _failure(exc)
            if os.getpid() != me:
                return   # a fork the subject made: it must never answer
            _reply(replies_fd, me, reply)
            os.environ.clear()
            os.environ.update(env)
    except BaseException:   # noqa: BLE001 - a broken pipe: the harness is gone
        code = 1
    finally:
        os._exit(code)


def _bound_memory() -> None:
    limit = _memory_limit()
    if limit:
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard == resource.RLIM_INFINITY or hard > limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def _memory_limit() -> int | None:
    raw = os.environ.get(MEMORY_ENV)
    if raw:
        try:
            return int(float(raw) * (1 << 30))
        except ValueError:
            return None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def _set_limit(seconds: float) -> None:
    from harness.subjects import timeout
    timeout.set_limit(seconds)


def _reply(fd: int, me: int, data: bytes) -> None:
    if os.getpid() == me:
        sys.stdout.flush()
        sys.stderr.flush()
        protocol.write_all(fd, data)


def _failure(exc: BaseException) -> bytes:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    if isinstance(exc, SystemExit):
        return protocol.failure("SystemExit", f"called sys.exit({exc.code!r})", where)
    if isinstance(exc, HarnessError):
        return protocol.failure(type(exc).__name__, str(exc), where)
    return protocol.failure("raised", f"{type(exc).__name__}: {exc}"[:2000], where)


def _choose_vllm() -> None:
    """Import the real vLLM now, where it is importable (``SPYRE_BENCH_VLLM``; 10-15 s on two
    cores): the worker's start-up, not the subject's load, whose time limit is the subject's."""
    from harness.errors import HarnessError
    from harness.subjects.load import vllm_real
    try:
        vllm_real.choice()
    except HarnessError:
        pass   # the subject's load meets it again and reports it, with its row


def _hello(subject) -> dict:
    from harness.subjects.base import CAPABILITIES
    return {"spec": subject.spec, "identity": subject.identity,
            "capabilities": sorted(subject.capabilities),
            "lacks": {c: subject.lacks(c) for c in CAPABILITIES},
            "origin": getattr(subject, "origin", subject.spec),
            "knobs": None if subject.knobs is None else {
                name: knob.as_data() for name, knob in subject.knobs.items()}}


# -- what a worker does ---------------------------------------------------------------------------

def _config_figures(subject, out, case, bucketer_only=False):
    from harness.evaluate import config_figures
    return config_figures(subject, case, bucketer_only)


def _workload_figures(subject, out, case, specs, per_step):
    from harness.evaluate import workload_figures
    return workload_figures(subject, case, specs, per_step)


def _prefetch(subject, out, requests):
    return subject.prefetch_workloads(requests)


def _measure_workload(subject, out, case, spec, options):
    from harness.measure.kernel_figures import measure_workload
    me = os.getpid()
    return measure_workload(subject, case, spec, options,
                            lambda what: _reply(out, me, protocol.progress(what)))


def _prepare_probe(subject, out, probe, device):
    from harness.measure import probes
    _ready(device)
    _close_probe(subject, out, probe.name)
    _probes[probe.name] = probes.prepare(probe, subject, device)


def _prepare_host(subject, out, probe, device):
    from harness.measure import host
    _ready(device)
    _close_probe(subject, out, probe.name)
    _probes[probe.name] = host.prepare(probe, subject, device)


def _one_thread_unless_asked(torch) -> None:
    """torch's intra-op threads as every timing process sets them (harness.suite.torch_threads,
    1 unless asked): its default, a thread per core, makes the commit's many small tensor ops
    wait on each other behind any other process (r3-450e577d's quick exact tier, one worker,
    beside one busy core: 71.8 s with torch's default, 33.4 s with one thread; figures
    byte-identical). A bad setting is said by the command that reads it, not here."""
    from harness.errors import HarnessError
    from harness.suite import torch_threads
    try:
        torch.set_num_threads(torch_threads())
    except HarnessError:
        pass


def _ready(device) -> None:
    if not _device_ready[0]:
        from harness.suite import torch_threads
        device.prepare(torch_threads())   # allocator and threads settled where the timing is
        _device_ready[0] = True


def _calls_per_sample(subject, out, name, min_sample_s):
    return _probes[name].calls_per_sample(min_sample_s)


def _sample(subject, out, name, number):
    return _probes[name].sample(number)


def _check_probe(subject, out, name):
    _probes[name].check()


def _profile(subject, out, name, top):
    return _probes[name].profile(top)


def _close_probe(subject, out, name):
    prepared = _probes.pop(name, None)
    close = getattr(prepared, "close", None)
    if close is not None:
        close()


OPS = {"config_figures": _config_figures, "workload_figures": _workload_figures,
       "prefetch": _prefetch, "measure_workload": _measure_workload,
       "prepare_probe": _prepare_probe, "prepare_host": _prepare_host,
       "calls_per_sample": _calls_per_sample, "sample": _sample, "check_probe": _check_probe,
       "profile": _profile, "close_probe": _close_probe}


if __name__ == "__main__":
    main(sys.argv[1:])
