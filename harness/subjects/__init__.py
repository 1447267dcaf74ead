"""Subjects: the versions of the code under test, behind one small protocol (see base.py)."""

from __future__ import annotations

from harness.errors import SubjectError
from harness.subjects.base import CAPABILITIES, Bucketing, Subject
from harness.subjects.reference.subject import POLICIES, reference_subject

__all__ = ["CAPABILITIES", "Bucketing", "Subject", "POLICIES", "resolve_subject"]

SPEC_HELP = ("reference:<policy>[+chunked] with policy one of " + ", ".join(POLICIES)
             + "; spyre-inference (the installed package); path:<checkout>; git:<repo>@<rev> "
               "(any revision: hash, tag, branch, HEAD~2 ...)")


def resolve_subject(spec: str) -> Subject:
    """Turn a subject spec into a Subject loaded in this process (the library's and the ASV
    benchmark processes' way; commands load spyre-inference in a worker: harness.worker)."""
    found = locate(spec)
    return found if isinstance(found, Subject) else found.load()


def is_embedded(spec: str) -> bool:
    """Whether ``spec`` names the embedded reference (the harness's own code, in this process)."""
    kind, sep, _ = spec.partition(":")
    return bool(sep) and kind == "reference"


def locate(spec: str):
    """The reference Subject itself, or a spyre-inference version found (``Located``), its
    sources read and none of its code run yet."""
    kind, sep, rest = spec.partition(":")
    if is_embedded(spec):
        return reference_subject(rest)
    if spec == "spyre-inference" or (sep and kind in ("path", "git")):
        # Imported here: the loader's modules are not needed for the reference subject.
        from harness.subjects.spyre import locate as si
        if spec == "spyre-inference":
            return si.locate_installed(spec)
        if not rest:
            form = "path:<checkout>" if kind == "path" else "git:<repo>@<rev>"
            raise SubjectError(f"subject {spec!r}: expected {form}")
        return (si.locate_checkout if kind == "path" else si.locate_git)(spec, rest)
    raise SubjectError(f"subject {spec!r}: unsupported spec; expected {SPEC_HELP}")
