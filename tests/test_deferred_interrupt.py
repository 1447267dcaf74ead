"""An interrupt held over a step that must not be cut in two, then acted on (harness.interrupts)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from harness.interrupts import Deferred


@pytest.fixture(autouse=True)
def _sigint_handled():
    """A suite started in the background (``nohup``, ``cmd &``) inherits SIGINT ignored, which
    Deferred rightly leaves alone; these tests are about a process that handles it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_self() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)   # the handler runs in the main thread at its next check


def test_an_interrupt_inside_the_block_waits_for_deliver_even_with_another_thread():
    stop = threading.Event()
    beside = threading.Thread(target=stop.wait, daemon=True)   # as run's progress heartbeats
    beside.start()
    try:
        with Deferred() as interrupt:
            _interrupt_self()
            finished = True                       # not cut short
        assert finished and interrupt.noted == [signal.SIGINT]
        with pytest.raises(KeyboardInterrupt):
            interrupt.deliver()
            time.sleep(0.05)
        interrupt.deliver()                        # delivered once
    finally:
        stop.set()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # handler back


def test_a_block_left_by_an_error_delivers_at_once():
    with pytest.raises(KeyboardInterrupt):
        with Deferred():
            _interrupt_self()
            raise ValueError("start failed")


def test_nothing_noted_delivers_nothing():
    with Deferred() as interrupt:
        pass
    interrupt.deliver()
    assert interrupt.noted == []
