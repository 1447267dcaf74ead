"""Subject workers: a spyre-inference version's code runs in a child process, never in the harness.

``open_subject(spec)`` is how commands get a subject: the embedded reference (the harness's own
code) in this process; spyre-inference, found and read here (:func:`harness.subjects.locate`),
then loaded and driven in a worker (:mod:`harness.worker.proxy` here, :mod:`.child` there) that
speaks :mod:`.protocol`. What the subject's code does can then only ever become that subject's
failure ("subject failed: ..."), never the harness's output or exit status.
"""

from __future__ import annotations

from harness.subjects import Subject, locate

#: Set to 1 to load spyre-inference in the harness's own process (debugging the harness).
IN_PROCESS_ENV = "SPYRE_BENCH_IN_PROCESS"


def open_subject(spec: str) -> Subject:
    import os

    found = locate(spec)
    if isinstance(found, Subject):
        return found
    if os.environ.get(IN_PROCESS_ENV) == "1":
        return found.load()
    from harness.subjects.source.sources import module_hashes
    from harness.worker.proxy import SubjectWorker
    return SubjectWorker(found.spec, found.load, found.identity, module_hashes(found.tree.files),
                         found.tree)


def same_code(base: Subject, head: Subject) -> bool:
    """Whether two spyre-inference subjects are different commits whose every load runs the same
    code: one source key (the attention closure by content, the harness, the deciding env), read
    from their files by the harness. A timing between them can only be an A/A."""
    keys = [getattr(s, "source", lambda: None)() for s in (base, head)]
    return keys[0] is not None and keys[0] == keys[1] and base.identity != head.identity


def is_worker(subject: Subject) -> bool:
    from harness.worker.proxy import SubjectWorker
    return isinstance(subject, SubjectWorker)
