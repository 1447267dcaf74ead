"""What driving a commit's builder and impl can raise besides the commit's own errors."""

from __future__ import annotations

from harness.errors import CapabilityMissing


class NotDrivable(CapabilityMissing):
    """The subject's builder or impl cannot be driven: the figures it decides are skips."""


class KernelRaised(Exception):
    """A subject's kernel, really called, raised: a wrong kernel, not a skip."""

    def __init__(self, kernel: str, exc: BaseException):
        super().__init__(f"{kernel} raised {type(exc).__name__}: {exc}")
        self.kernel, self.exc = kernel, exc

