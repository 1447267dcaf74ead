"""Progress of long commands on stderr: a bar on a terminal, plain lines in a pipe (CI logs).

In a pipe every unit of work is a line, and a heartbeat line names what is still running at
least every ``HEARTBEAT_S`` seconds, so a silent log always means a stuck process, never a slow
one. Quick commands stay quiet: nothing is printed before ``quiet_s`` seconds have passed.
"""

from __future__ import annotations

import sys
import threading
import time

HEARTBEAT_S = 10.0


class Progress:
    """``with Progress(total, "kernel") as advance: advance(label, what, n)``."""

    def __init__(self, total: int, name: str, quiet_s: float = 0.0, stream=None,
                 heartbeat_s: float = HEARTBEAT_S):
        self.total, self.name, self.quiet_s = total, name, quiet_s
        self.stream = stream or sys.stderr
        self.heartbeat_s = heartbeat_s
        self.done = 0
        self.current = "starting"
        self.bar = None

    def __enter__(self):
        self.start = self.last = time.monotonic()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar
            self.bar = Bar(TextColumn("{task.description}"), BarColumn(),
                           TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                           console=Console(file=self.stream), transient=True)
            self.bar.__enter__()
            self.task = self.bar.add_task(self.name, total=self.total)
        else:
            self.beat = threading.Thread(target=self._heartbeat, daemon=True)
            self.beat.start()
        return self.advance

    def advance(self, label: str, what: str, n: int = 0) -> None:
        with self.lock:
            self.done += n
            self.current = f"{label}: {what}"
            if self.bar is not None:
                self.bar.update(self.task, advance=n, description=self.current[:100])
            else:
                self._line(self.current)

    def _line(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if now - self.start < self.quiet_s and not force:
            return
        self.last = now
        print(f"[{self.name} {self.done}/{self.total} {now - self.start:.0f}s] {text}",
              file=self.stream, flush=True)

    def _heartbeat(self) -> None:
        while not self.stop.wait(1.0):
            with self.lock:
                now = time.monotonic()
                if now - self.last >= self.heartbeat_s and now - self.start >= self.quiet_s:
                    self._line(f"still at {self.current}", force=True)

    def __exit__(self, *exc):
        self.stop.set()
        if self.bar is not None:
            self.bar.__exit__(*exc)
        else:
            self.beat.join()
        if exc[0] is KeyboardInterrupt:
            # the command's last line says how far it got (exit status 3)
            from harness.errors import Interrupted
            raise Interrupted(f"{self.name}: {self.done} of {self.total} done, none shown "
                              "(nothing is stored)") from None
        return None
