"""Timed workers share their cores, and their CPU time is not a neighbour's load."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness.measure.device import HostLoad
from harness.measure.placement import pin_process, timing_cpus

#: A child with a second thread that spins, so pinning must reach every thread.
BUSY = ("import threading, time\n"
        "def spin():\n    while True: pass\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "print('ready', flush=True)\ntime.sleep(60)\n")


def allowed(pid: int) -> set[str]:
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        for line in open(f"/proc/{pid}/task/{tid}/status"):
            if line.startswith("Cpus_allowed_list:"):
                out.add(line.split(":")[1].strip())
    return out


@pytest.fixture
def busy_child():
    proc = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one usable core: nothing to pin")
def test_every_thread_of_a_worker_is_pinned_to_the_chosen_cores(busy_child):
    cpus = timing_cpus(1)
    assert cpus is not None and len(cpus) == 1 and cpus <= os.sched_getaffinity(0)
    assert pin_process(busy_child.pid, cpus)
    assert allowed(busy_child.pid) == {str(next(iter(cpus)))}
    assert len(os.listdir(f"/proc/{busy_child.pid}/task")) == 2


def test_all_cores_is_nothing_to_choose():
    assert timing_cpus(len(os.sched_getaffinity(0))) is None
    assert not pin_process(2 ** 22 + 12345, frozenset({0}))   # no such process


def test_a_timed_workers_cpu_is_the_measurements_own_not_a_neighbours(busy_child):
    with HostLoad() as neighbour, HostLoad(own_pids=[busy_child.pid]) as own:
        time.sleep(0.5)
    # the same half second, read both ways: the spinning child's share of a core is a
    # neighbour's load, unless it is the worker being timed
    assert neighbour.others_cores - own.others_cores > 0.25
