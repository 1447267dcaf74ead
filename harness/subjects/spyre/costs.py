"""A commit's workload costs: every step through its own ``build()`` and one layer of its
``forward()`` (kernels recorded, not run; :mod:`harness.subjects.spyre.drive`).

A step already driven through identical attention sources, config and env (in this process or,
through the store, any earlier one) is not driven again (:mod:`harness.subjects.memo.figures`);
the builder is loaded only when some step is new.
"""

from __future__ import annotations

import contextlib

from harness.config import EngineConfig, Overrides
from harness.errors import HarnessError
from harness.subjects.memo.figures import FIGURES, setup_key, step_key, warmup_key
from harness.subjects.timeout import bounded


def workload_costs(subject, config: EngineConfig, overrides: Overrides, workloads) -> list:
    """Each workload's WorkloadCost (or the HarnessError that stopped it), in order, for
    ``subject`` (a SpyreInferenceSubject) at ``config`` under ``overrides``."""
    from harness.model.cost import WorkloadCost, warmup_keys

    bucketing = subject.bucketing(config, overrides)
    out = []
    with bounded(f"{subject.origin}: driving its builder at {config.label()} "
                 f"env={overrides.label()}"), _LazySession(subject, config, overrides) as drive:
        recorded = drive.warmup()
        warmup = frozenset(recorded) if recorded is not None else warmup_keys(bucketing)
        for workload in workloads:
            try:
                workload.check_fits(config)
                steps = [drive(step) for step in workload.steps]
                setup = drive.setup()
            except HarnessError as exc:
                out.append(exc)
                continue
            out.append(WorkloadCost(workload.name, config.num_layers, steps, warmup,
                                    setup=setup))
    return out


class _LazySession:
    """``drive(step)`` -> that step's StepCost, from the memo or through a BuilderSession opened
    on first need (and closed with this context)."""

    def __init__(self, subject, config: EngineConfig,
                 overrides: Overrides):
        self.subject, self.config, self.overrides = subject, config, overrides
        self.digest = subject.source()
        self._stack = contextlib.ExitStack()
        self._session = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self._stack.close()
        finally:
            FIGURES.flush()

    def __call__(self, step):
        key = step_key(self.config, self.overrides, step)
        found = FIGURES.get(self.digest, key)
        if found is None:
            found = self._open().record_step(step)[0]
            FIGURES.put(self.digest, key, found)
        return found

    def warmup(self) -> tuple | None:
        """The keys the commit's own warmup records where its bucketer's variants do not say
        them (BuilderSession.recorded_warmup), else None; kept as ``(keys,)`` or ``()``."""
        key = warmup_key(self.config, self.overrides)
        found = FIGURES.get(self.digest, key)
        if found is None:
            keys = self._open().recorded_warmup()
            found = (keys,) if keys is not None else ()
            FIGURES.put(self.digest, key, found)
        return found[0] if found else None

    def setup(self) -> dict[str, int]:
        """The engine's one-time transfers for this config, by tensor (bytes), with their count
        under ``"transfers"``: the same for every workload, whatever step came first."""
        key = setup_key(self.config, self.overrides)
        found = FIGURES.get(self.digest, key)
        if found is None:
            session = self._open()
            if session.setup is None:
                session.setup = session.warm_up()
            found = {"transfers": len(session.setup), "by_tensor": {},
                     "notes": list(session.notes)}
            for t in session.setup:
                found["by_tensor"][t.name] = found["by_tensor"].get(t.name, 0) + t.bytes
            FIGURES.put(self.digest, key, found)
        return found

    def _open(self):
        if self._session is None:
            from harness.subjects.spyre.drive.session import BuilderSession

            self._session = self._stack.enter_context(BuilderSession(
                self.subject.tree, self.subject.origin, self.config, self.overrides))
        return self._session
