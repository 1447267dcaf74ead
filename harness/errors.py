"""Errors a user can fix. The CLI prints them on one line and exits with status 2."""

import contextlib


class HarnessError(Exception):
    """Base for every error caused by input (flags, files, subjects), not by a harness bug."""


class ConfigError(HarnessError, ValueError):
    """An engine config or env override that the code under test would reject or misbehave on."""


class TraceError(HarnessError, ValueError):
    """A workload trace line that cannot be parsed or does not fit the config."""


class SubjectError(HarnessError):
    """A subject spec that cannot be resolved or loaded."""


class CapabilityMissing(HarnessError):
    """The subject lacks what a figure needs: that figure is a skip with this reason."""



class NothingComputed(HarnessError):
    """Every row was a skip: after the table, one error line and exit status 2, so a command
    never exits 0 on what it could not compute."""

    def __init__(self, reasons: list[str]):
        first = reasons[0] if reasons else "no rows"
        super().__init__(f"nothing computed: all {len(reasons)} row(s) skipped; first: {first}")


@contextlib.contextmanager
def writing(path):
    """An output path the user gave that cannot be written (missing folder, a file in the way,
    no permission) is their input: one line, not a traceback."""
    try:
        yield
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
        raise HarnessError(f"cannot write {path}: {exc.strerror or exc}{where}") from None
