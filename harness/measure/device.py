"""The device a measurement runs on: Spyre when torch_spyre imports, else CUDA, else the CPU.

A :class:`Device` knows how to wait for queued work (``synchronize``) and how to time a region
correctly on it: CUDA events on CUDA, host wall-clock around a device synchronise elsewhere.
"""

from __future__ import annotations

import gc
import importlib
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.errors import HarnessError

#: ``--device`` kinds (``cuda:N`` names one GPU); ``auto`` picks spyre, else cuda, else cpu.
CHOICES = ("auto", "spyre", "cuda", "cpu")


class DeviceError(HarnessError):
    """A requested device that is not available here."""


@dataclass(frozen=True)
class Device:
    name: str  # "spyre", "cuda" or "cpu"
    torch_device: torch.device
    description: str

    def prepare(self, threads: int | None = None) -> str | None:
        """Settle the host before timing; returns what was done to the allocator, for the record.

        On the CPU, glibc serves large temporaries (the kernels' gathered pages) with mmap and
        trims freed heap back to the OS, so every call page-faults its buffers anew and timings
        swing 2-3x with allocator history. Device backends cache their memory; pinning glibc's
        thresholds makes the CPU behave the same way. ``threads`` sets torch's intra-op threads.
        """
        if threads is not None:
            torch.set_num_threads(threads)
        if self.name != "cpu":
            return None
        return _steady_glibc_allocator()

    def synchronize(self) -> None:
        if self.name == "cuda":
            torch.cuda.synchronize(self.torch_device)
        elif self.name == "spyre":
            torch.spyre.synchronize()

    def elapsed(self, fn: Callable[[], object], number: int) -> tuple[float, object]:
        """Seconds for ``number`` back-to-back calls of ``fn``, all queued work included.

        Returns the total and the last call's result (kept so the caller can check it). The
        garbage collector is off for the calls, as timeit and pyperf have it: a collection
        inside a sample costs with the objects the process happens to hold, so two processes
        running the same kernel (base and head workers) would time differently.
        """
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._elapsed(fn, number)
        finally:
            if enabled:
                gc.enable()

    def _elapsed(self, fn: Callable[[], object], number: int) -> tuple[float, object]:
        result = None
        if self.name == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.synchronize()
            start.record()
            for _ in range(number):
                result = fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3, result
        self.synchronize()
        t0 = time.perf_counter()
        for _ in range(number):
            result = fn()
        self.synchronize()
        return time.perf_counter() - t0, result

    def as_dict(self) -> dict:
        return {"name": self.name, "torch_device": str(self.torch_device),
                "description": self.description, "torch": torch.__version__,
                "threads": torch.get_num_threads(),
                "host_allocator": _STEADY[0] if _STEADY else None}


class HostLoad:
    """CPU time other processes used while a block ran, in cores (Linux /proc/stat).

    On a shared 2-core machine one busy neighbour stalls every parallel region of a
    two-threaded kernel: calls get 10-100x slower yet stay *stable*, so spread alone does not
    reveal it. This does.
    """

    def __init__(self, own_pids=()):
        #: Processes whose CPU time is the measurement's own (the subject workers being timed).
        self.own_pids = tuple(own_pids)
        self.others_cores: float | None = None

    def _snapshot(self):
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        tick = os.sysconf("SC_CLK_TCK")
        busy = sum(fields[:3]) + sum(fields[5:8])  # user nice system, irq softirq steal
        mine = os.times()
        own = mine.user + mine.system + sum(_cpu_ticks(pid) for pid in self.own_pids) / tick
        return busy / tick, own, time.perf_counter()

    def __enter__(self):
        self._start = self._snapshot()
        return self

    def __exit__(self, *exc):
        end = self._snapshot()
        if self._start and end and end[2] > self._start[2]:
            busy = end[0] - self._start[0]
            mine = end[1] - self._start[1]
            self.others_cores = max(0.0, (busy - mine) / (end[2] - self._start[2]))
        return False


def _cpu_ticks(pid: int) -> int:
    """User and system clock ticks ``pid`` has used (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return int(fields[11]) + int(fields[12])   # utime, stime (fields 14 and 15)
    except (OSError, ValueError, IndexError):
        return 0


_STEADY: list[str | None] = []


def _steady_glibc_allocator() -> str | None:
    """mallopt: mmap only above 32 MiB (glibc's maximum), never trim the heap. Once per process."""
    if not _STEADY:
        from harness.allocator import (
            M_MMAP_THRESHOLD,
            M_TRIM_THRESHOLD,
            MAX_MMAP_THRESHOLD,
            NO_TRIM,
            mallopt,
        )
        took = mallopt({M_MMAP_THRESHOLD: MAX_MMAP_THRESHOLD, M_TRIM_THRESHOLD: NO_TRIM})
        _STEADY.append("glibc mallopt: mmap threshold 32 MiB, no heap trim" if took else None)
    return _STEADY[0]


def _spyre_available() -> bool:
    try:
        importlib.import_module("torch_spyre")
    except Exception:  # noqa: BLE001 - any failure to import means "not here"
        return False
    return hasattr(torch, "spyre")


def _cpu_description() -> str:
    return f"cpu ({platform.machine() or 'unknown'}, {torch.get_num_threads()} threads, " \
           f"{os.cpu_count()} cores)"


def select(requested: str | None = "auto") -> Device:
    """``auto``: spyre when torch_spyre imports, else cuda when available, else cpu."""
    requested = (requested or "auto").strip()
    kind = requested.split(":", 1)[0]
    if kind not in CHOICES:
        raise DeviceError(f"--device {requested!r}: expected one of {', '.join(CHOICES)} "
                          "(cuda:N for a given GPU)")
    if kind == "auto":
        if _spyre_available():
            kind, requested = "spyre", "spyre"
        elif torch.cuda.is_available():
            kind, requested = "cuda", "cuda"
        else:
            kind, requested = "cpu", "cpu"
    if kind == "spyre":
        if not _spyre_available():
            raise DeviceError("--device spyre: torch_spyre does not import here")
        try:
            dev = torch.device(requested)
        except RuntimeError:
            raise DeviceError(f"--device {requested}: torch_spyre imported but torch has no "
                              "'spyre' device type") from None
        return Device("spyre", dev, "spyre (torch_spyre)")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"--device {requested}: CUDA is not available in this torch "
                              f"({torch.__version__})")
        dev = torch.device(requested)
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise DeviceError(f"--device {requested}: only {torch.cuda.device_count()} GPU(s)")
        return Device("cuda", dev, f"cuda {torch.cuda.get_device_name(index)}")
    if ":" in requested:
        raise DeviceError(f"--device {requested!r}: the cpu takes no index")
    return Device("cpu", torch.device("cpu"), _cpu_description())
