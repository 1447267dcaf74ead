"""Errors a user can fix, and the exit statuses every command shares (the README's table).

The CLI prints an error on one line and exits with its ``exit_status`` (2 unless it says
otherwise).
"""

import contextlib

#: What was asked was measured (and the gate, if any, passed).
EXIT_OK = 0
#: A regression, a wrong result, or a subject's own failure.
EXIT_FLAGGED = 1
#: Bad input, or nothing could be measured.
EXIT_INPUT = 2
#: Interrupted (SIGINT, SIGTERM, SIGHUP); what was measured before is kept.
EXIT_INTERRUPTED = 3


class HarnessError(Exception):
    """Base for every error caused by input (flags, files, subjects), not by a harness bug."""

    exit_status = EXIT_INPUT


class Interrupted(KeyboardInterrupt):
    """An interrupt with what was measured before it (``run``: targets complete, where kept),
    for the CLI's last line. A KeyboardInterrupt, so every ``except KeyboardInterrupt`` still
    cleans up on the way out."""

    exit_status = EXIT_INTERRUPTED


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


class SubjectCrashed(SubjectRaised):
    """The subject's code ended, hung or garbled its worker process (:mod:`harness.worker`):
    that subject's failure, never the harness's outcome. A row says so; at the top, exit 1."""

    exit_status = 1


class SubjectFailed(HarnessError):
    """Some rows are a subject's failure: one line before the table, exit status 1."""

    exit_status = EXIT_FLAGGED

    def __init__(self, reasons: list[str]):
        super().__init__(f"subject failed in {len(reasons)} row(s); first: {reasons[0]}")


def row_outcome(rows_figures) -> HarnessError | None:
    """What a command's figures amount to when they are not all measured: a subject's failure
    (said once, before the table; exit 1) before nothing computed (raised after it; exit 2)."""
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
