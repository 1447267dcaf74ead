"""The exact tier of one commit (:func:`harness.runner.inprocess.write_exact`) in a fresh
interpreter of its own.

The tier drives the commit's own builder in the process that runs it, and spreads over the cores
by forking that process (:mod:`harness.subjects.prefetch`). A fork is safe only where no other
thread runs: ``run``'s own process has its progress heartbeats, and a fork taken while one of
them held a lock hung ``run`` for good (a child blocked on the lock, its parent waiting on it).
A fresh interpreter has no other thread; and whatever the commit's code does there (exit, hang
past its time limit, kill itself) ends that process, which ``run`` reports as the tier's
failure, never ``run`` itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.runner.sessions import end_session

#: Where the harness package lives: the child imports it from there, whatever its cwd.
_ROOT = str(Path(__file__).resolve().parents[2])


def run_exact(log, **kwargs) -> tuple[int, int, str]:
    """``write_exact(**kwargs)`` in a child, its output to ``log``: (stored, failed, cause);
    cause is empty unless the child ended without a result."""
    args = {k: str(Path(v).resolve()) if isinstance(v, Path) else v for k, v in kwargs.items()}
    with tempfile.TemporaryDirectory(prefix="spyre-bench-exact-") as tmp:
        result = Path(tmp) / "result.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)}
        log.flush()
        child = subprocess.Popen(
            [sys.executable, "-m", "harness.runner.exact_process", json.dumps(args), str(result)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)   # its forks too are ended with it (an interrupt)
        try:
            code = child.wait()
        finally:
            if child.returncode is None:
                end_session(child)
        try:
            done = json.loads(result.read_text())
            return int(done["stored"]), int(done["failed"]), ""
        except (OSError, ValueError, KeyError, TypeError):
            return 0, 1, f"the exact tier's process ended with exit status {code} (log)"


def _main(argv: list[str]) -> int:
    from harness.runner.inprocess import write_exact

    args = json.loads(argv[0])
    for key in ("repo", "results_dir", "skip_log"):
        if args.get(key) is not None:
            args[key] = Path(args[key])
    stored, failed = write_exact(**args)
    Path(argv[1]).write_text(json.dumps({"stored": stored, "failed": failed}))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
