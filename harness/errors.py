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


class SubjectRaised(HarnessError):
    """The subject's own code raised while driven (its ``build()``, ``forward()`` or a kernel):
    a failure of that commit. Its rows say so (``failed``), never a skip beside a figure."""


class SubjectFailed(HarnessError):
    """Some rows are a subject's failure: after the table, one line and exit status 1."""

    exit_status = 1

    def __init__(self, reasons: list[str]):
        super().__init__(f"subject failed in {len(reasons)} row(s); first: {reasons[0]}")


def row_outcome(rows_figures) -> HarnessError | None:
    """What a command's figures amount to when they are not all measured, for it to say first
    and raise last: a subject's failure (exit 1) before nothing computed (exit 2)."""
    figures = list(rows_figures)
    failed = [f["skipped"] for f in figures if f.get("failed")]
    if failed:
        return SubjectFailed(failed)
    reasons = [f.get("skipped") for f in figures]
    return NothingComputed(reasons) if all(reasons) else None



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
