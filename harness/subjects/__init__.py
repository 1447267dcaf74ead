"""Subjects: the versions of the code under test, behind one small protocol (see base.py)."""

from __future__ import annotations

from harness.errors import SubjectError
from harness.subjects.base import CAPABILITIES, Bucketing, Subject
from harness.subjects.reference import POLICIES, reference_subject

__all__ = ["CAPABILITIES", "Bucketing", "Subject", "POLICIES", "resolve_subject"]

SPEC_HELP = ("reference:<policy>[+chunked] with policy one of " + ", ".join(POLICIES)
             + "; spyre-inference (the installed package); path:<checkout>; git:<repo>@<rev> "
               "(any revision: hash, tag, branch, HEAD~2 ...)")


def resolve_subject(spec: str) -> Subject:
    """Turn a subject spec from the command line into a Subject."""
    kind, sep, rest = spec.partition(":")
    if sep and kind == "reference":
        return reference_subject(rest)
    if spec == "spyre-inference" or (sep and kind in ("path", "git")):
        # Imported here: the loader's modules are not needed for the reference subject.
        from harness.subjects import spyre_inference as si
        if spec == "spyre-inference":
            return si.installed_subject(spec)
        if not rest:
            form = "path:<checkout>" if kind == "path" else "git:<repo>@<rev>"
            raise SubjectError(f"subject {spec!r}: expected {form}")
        return (si.checkout_subject if kind == "path" else si.git_subject)(spec, rest)
    raise SubjectError(f"subject {spec!r}: unsupported spec; expected {SPEC_HELP}")
