"""SIGTERM (a CI cancel) and SIGHUP (a closed terminal) end a command the way Ctrl-C does.

Python turns only SIGINT into KeyboardInterrupt; the others kill the process where it stands,
so no ``finally`` runs: no interrupted record, temporary folders and ASV's process group left
behind. Here all three raise KeyboardInterrupt in the main thread, and every command's cleanup
is one path. A forked child (a prefetch worker) inherits the handler: there it dies of the
signal at once and quietly, as it would have without the handler, and its parent, which got the
interrupt or terminates its pool, says what happened. A signal ignored at start (``nohup``, a
background job's SIGINT) stays ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _handler(owner: int):
    def interrupt(signum, frame):
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise KeyboardInterrupt
    return interrupt


@contextlib.contextmanager
def as_keyboard_interrupt() -> Iterator[None]:
    """For the block, SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt in this process; the
    previous handlers come back after it (a test calling ``main()`` keeps its own)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler, previous = _handler(os.getpid()), {}
    for sig in SIGNALS:
        current = signal.getsignal(sig)
        if current is not signal.SIG_IGN:
            previous[sig] = current
            signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


class Deferred:
    """For the block, SIGINT, SIGTERM and SIGHUP are noted, not acted on; the previous handlers
    come back after it. :meth:`deliver` acts on a noted one as it arrived then (for a step that
    must not be cut in two: a child started whose pid is not known yet). A block left by an
    exception delivers at once. Masking the signal would not do: the process's other threads
    still take it, and Python runs the handler in the main thread regardless."""

    def __init__(self):
        self.noted: list[int] = []
        self._previous: dict = {}

    def __enter__(self) -> Deferred:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                current = signal.getsignal(sig)
                if current is not signal.SIG_IGN:
                    self._previous[sig] = current
                    signal.signal(sig, lambda signum, frame: self.noted.append(signum))
        return self

    def __exit__(self, kind, *exc) -> bool:
        for sig, old in self._previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._previous = {}
        if kind is not None:
            self.deliver()
        return False

    def deliver(self) -> None:
        """The first signal noted, raised again now that its handler is back."""
        if self.noted:
            sig, self.noted = self.noted[0], []
            signal.raise_signal(sig)

