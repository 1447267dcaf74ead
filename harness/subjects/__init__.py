"""Subjects: the versions of the code under test, behind one small protocol (see base.py)."""

from __future__ import annotations

from harness.errors import SubjectError
from harness.subjects.base import CAPABILITIES, Bucketing, Subject
from harness.subjects.reference import POLICIES, reference_subject

__all__ = ["CAPABILITIES", "Bucketing", "Subject", "POLICIES", "resolve_subject"]

SPEC_HELP = ("reference:<policy>[+chunked] with policy one of " + ", ".join(POLICIES))


def resolve_subject(spec: str) -> Subject:
    """Turn a subject spec from the command line into a Subject."""
    kind, sep, rest = spec.partition(":")
    if sep and kind == "reference":
        return reference_subject(rest)
    raise SubjectError(f"subject {spec!r}: unsupported spec; expected {SPEC_HELP}")
