"""End a child started with ``start_new_session`` and everything it started.

ASV puts each benchmark process in a process group of its own (so it can time it out), inside
the session spyre-bench started it in: ``killpg`` on ASV's group misses them, and a benchmark
left running after an interrupt holds the subject's code, a core and files. The session id is
what they all share, so that is what is ended: every member gets SIGTERM, and SIGKILL whatever
is still there after a grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

GRACE_S = 5.0


def members(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``; only the leader where /proc is absent."""
    proc = Path("/proc")
    if not proc.is_dir():
        return [sid]
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue   # gone since the listing
        # after the command name (which may hold spaces and parentheses): state ppid pgrp session
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 3 and fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def end_session(leader: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """SIGTERM to the session ``leader`` leads, SIGKILL after ``grace_s``; the leader reaped."""
    _signal_all(members(leader.pid) or [leader.pid], signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        leader.poll()
        if not members(leader.pid):
            break
        time.sleep(0.05)
    _signal_all(members(leader.pid), signal.SIGKILL)
    leader.wait()
