"""Where a command's output goes: files the user names (``--json``, ``--markdown``,
``--write-expected``, ``--export``, issue bodies) and standard output.

One rule for every output file, so a typo or a full disk can never lose data or replace what
the user did not mean:

- the target is resolved first: a symlink is written *through* (its target is replaced, the
  link stays), never replaced by a regular file;
- only a regular file, or a name not there yet, is written: a FIFO, a device, a socket or a
  directory is refused with one line (a FIFO is never opened, so nothing blocks on it);
- the bytes go to a temporary file beside the resolved target, are synced, then renamed over
  it: the target is either the old file or the whole new one, and a failed write (disk full)
  is one line, with the temporary file removed.

Standard output is checked the same way (:func:`checked_stdout`): a write or flush that fails
(a full disk behind ``> out.txt``) is one error line and a non-zero exit, never a lost table
with exit status 0.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import secrets
import stat
import sys
from pathlib import Path

from harness.errors import HarnessError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def resolved(path: str | Path, doing: str = "write") -> Path:
    """The file a write to ``path`` lands in: symlinks followed (a dangling one to the file it
    names), refused with one line unless that is a regular file or nothing yet."""
    target = Path(os.path.realpath(path))
    if target.is_symlink():
        raise HarnessError(f"cannot {doing} {path}: a symlink loop")
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise HarnessError(f"cannot {doing} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        via = f" (via symlink to {target})" if str(target) != str(Path(path).absolute()) else ""
        raise HarnessError(f"cannot {doing} {path}: it is {kind}{via}, not a regular file")
    return target


@contextlib.contextmanager
def replacing(path: str | Path, doing: str = "write"):
    """Yield a temporary path beside the resolved target (same suffix, for writers that pick
    the format by it); once the body has written it, sync it and rename it over the target.
    Any failure removes the temporary file; an OSError is one line, ``cannot {doing} {path}``."""
    target = resolved(path, doing)
    tmp = target.with_name(f".{target.stem}.{secrets.token_hex(4)}.tmp{target.suffix}")
    try:
        # created here with the umask's mode (0o666 masked), as a plain open() would
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())     # a full disk shows here, not after the rename
        if target.exists():
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        resolved(path, doing)        # still a regular file or absent
        os.replace(tmp, target)
    except OSError as exc:
        raise HarnessError(f"cannot {doing} {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` by :func:`replacing`; returns the resolved target."""
    with replacing(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
    return resolved(path)


def output_file(text: str, doing: str = "write") -> Path | str:
    """argparse type of an output file flag: refuses, before any work, a target that is not a
    regular file (a FIFO, a device, a directory). '-' (standard output) comes back as is."""
    if text == "-":
        return text
    if not text:
        raise argparse.ArgumentTypeError("expected a file name, got ''")
    try:
        resolved(text, doing)
    except HarnessError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return Path(text)


class StdoutFailed(HarnessError):
    """Standard output could not take what a command printed (disk full, I/O error)."""


class _Checked:
    """Standard output whose failed write or flush is a :class:`StdoutFailed` (a closed pipe
    stays a BrokenPipeError: the reader left, which is no failure of the command)."""

    def __init__(self, stream):
        self._stream = stream

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def _call(self, method, *args):
        try:
            return method(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            self._stream = _discard(self._stream)
            raise StdoutFailed(f"cannot write standard output: {exc.strerror or exc}") from None

    def write(self, text):
        return self._call(self._stream.write, text)

    def writelines(self, lines):
        return self._call(self._stream.writelines, lines)

    def flush(self):
        return self._call(self._stream.flush)


def _discard(stream):
    """After a failed write: drop what the stream still buffers, so the interpreter's flush at
    exit does not fail again with a second message; later output goes nowhere."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    return open(os.devnull, "w")


def checked_stdout(run):
    """Wrap a command's ``run(args)``: what it prints goes through :class:`_Checked`, and is
    flushed before it returns, so a failed write is one error line and exit status 2."""

    @functools.wraps(run)
    def checked(args):
        original = sys.stdout
        sys.stdout = wrapped = _Checked(original)
        try:
            code = run(args)
            wrapped.flush()
            return code
        finally:
            if sys.stdout is wrapped:
                sys.stdout = wrapped._stream

    return checked
