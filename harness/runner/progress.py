"""Progress for a pipe (CI logs): a line per unit of work, and a heartbeat at least every 10 s.

A terminal gets rich's bar; a pipe gets nothing from it until the end, so piped commands report
through this instead: one line when a (target, group) starts, and while one runs, a line every
``interval`` seconds with its percentage and elapsed time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class LineProgress:
    def __init__(self, emit: Callable[[str], None], interval: float = 10.0):
        self.emit, self.interval = emit, interval
        self._lock = threading.Lock()
        self._current: tuple[str, str] | None = None
        self._fraction = 0.0
        self._started = self._last = time.monotonic()
        self._stop = threading.Event()

    def __enter__(self):
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=1)
        return False

    def __call__(self, target, label: str, fraction: float) -> None:
        with self._lock:
            key = (target.label, label)
            self._fraction = fraction
            if key != self._current:
                self._current = key
                self._say(f"  {target.label} [{label}] started ({fraction:.0%})")

    def _say(self, line: str) -> None:
        self._last = time.monotonic()
        self.emit(line)

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.interval / 4)):
            with self._lock:
                if self._current and time.monotonic() - self._last >= self.interval:
                    label, group = self._current
                    self._say(f"  {label} [{group}] {self._fraction:.0%}, "
                              f"{time.monotonic() - self._started:.0f} s elapsed")
