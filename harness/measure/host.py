"""The host time of a commit's own metadata builder and forward, per step: what the engine pays
on the CPU around every step's kernels.

On a real generation-3 tree ``build()`` takes 10-15 ms a step (its mask comprehension, the
per-block mask tiles), as long as a short decode's kernels; the exact tier runs it on every step
it drives and kept none of that time. A host probe is one workload's steps on one attention path
(the override set that selects it, :data:`PATHS`) at one config, through one subject's own code:

* ``build``: the builder's ``build()``, step after step, each step's CommonAttentionMetadata
  made beforehand;
* ``forward``: one layer of the impl's ``forward()`` outside the kernels (each kernel answered by
  the session's recorded placeholder), on each step's metadata after one untimed forward paid the
  device mirror: the dispatch and launch work every later layer of a step repeats.

The transfer log's counting is taken off the commit's ``convert`` while a probe lives (its own
copy still runs): what is timed is the commit's code, not the harness's bookkeeping. A sample is
``number`` calls cycling through the workload's steps, so two sides given the same number time
the same steps in every round (harness.measure.sampler pairs them). Nothing here records a step
or writes the figure memo: the exact figures never see it.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass

from harness.config import EngineConfig, Overrides
from harness.errors import CapabilityMissing, HarnessError
from harness.matrix import override_set
from harness.measure.timing import TimedLayer
from harness.subjects.base import Subject
from harness.worker import is_worker
from harness.workloads import Workload

#: The attention paths host time is measured on, each by the override set that selects it (a
#: commit whose env knows no such knob skips that path, naming the knob).
PATHS = {"batched": "batched", "per-sequence": "none", "head-major": "head-major",
         "jagged": "jagged"}
#: The ASV benchmark (and comparison row) of each kind of host probe.
BENCHMARKS = {"build": "host.Build.time_build", "forward": "host.Forward.time_forward"}
KINDS = tuple(BENCHMARKS)
#: Host time is the worker's CPU time: on a shared machine a neighbour delays a step's wall
#: time (the worker waits for a core), not the work the step does; the code timed runs on the
#: worker's one thread (torch's intra-op threads: SPYRE_BENCH_THREADS, 1 by default).
CLOCK = time.process_time


@dataclass(frozen=True)
class HostProbe:
    """What to time: ``kind`` (build or forward) of ``workload`` on ``path`` at ``config``."""

    kind: str
    path: str
    workload: Workload
    config: EngineConfig

    @property
    def name(self) -> str:
        return f"host-{self.kind}:{self.path}:{self.workload.name}"

    @property
    def overrides(self) -> Overrides:
        return override_set(PATHS[self.path])

    @property
    def params(self) -> dict:
        return {"workload": self.workload.name, "path": self.path}


def host_config(configs: list[EngineConfig]) -> EngineConfig:
    """The one config host time is measured at, of those compared: the one nearest the engine's
    default max_model_len (2048), then the smallest block size and batch (the quick tier: bs 64,
    mml 2048, mns 32: the review's config, one of the exact tier's own cells)."""
    default = EngineConfig()
    return min(configs, key=lambda c: (abs(math.log2(c.max_model_len / default.max_model_len)),
                                       c.block_size, c.max_num_seqs, c.max_model_len))


def prepare(probe: HostProbe, subject: Subject, device):
    """The probe ready to sample for ``subject``: in its worker when it has one."""
    if is_worker(subject):
        from harness.worker.proxy import RemoteHostProbe
        return RemoteHostProbe(subject, probe, device)
    return HostSide(subject, probe, device)


class HostSide(TimedLayer):
    """A host probe prepared for one subject (in this process): ``run_layer`` is one step's call,
    the next step each time; ``close()`` ends the subject's load."""

    def __init__(self, subject: Subject, probe: HostProbe, device):
        if "forward" not in subject.capabilities:
            raise CapabilityMissing(subject.lacks("forward") or
                                    f"{subject.spec} has no metadata builder of its own")
        subject.bucketing(probe.config, probe.overrides)   # a knob it lacks: the skip, named
        probe.workload.check_fits(probe.config)
        self.probe, self.device = probe, device
        self._open = subject.builder_session(probe.config, probe.overrides)
        self.session = self._open.__enter__()
        self._restore = None
        self._next = 0
        try:
            self._calls = (self._build_calls() if probe.kind == "build"
                           else self._forward_calls())
            self._restore = _uncounted(self.session.transfers)
            for call in self._calls:   # every step once before anything is timed
                call()
        except BaseException:
            self.close()
            raise

    # -- what is timed ---------------------------------------------------------------------------

    def _build_calls(self) -> list:
        from harness.subjects.spyre.drive.steps import step_pages, step_seed

        s = self.session
        pages = max(step_pages(step, s.config.block_size) for step in self.probe.workload.steps)
        s.kv_cache(None, pages, placeholder=True)   # bound before build(), as the engine binds it
        build = s.builder.build
        calls = []
        for step in self.probe.workload.steps:
            cm = s.common_metadata(step, step_seed(step))
            calls.append(self._guarded(lambda cm=cm: build(common_prefix_len=0,
                                                           common_attn_metadata=cm), step))
        return calls

    def _forward_calls(self) -> list:
        from harness.subjects.spyre.drive.session import IMPL_CLASS
        from harness.subjects.spyre.drive.steps import step_pages, step_seed

        s = self.session
        forward = s.impl.forward
        calls = []
        for step in self.probe.workload.steps:
            cache = s.kv_cache(None, step_pages(step, s.config.block_size), placeholder=True)
            metadata, _ = s.build(step, step_seed(step))
            query, cache, output = s.placeholders(step, cache)
            # the step's first layer, recorded (it pays the device mirror): its kernel calls'
            # replies are what every later layer's calls get back, in the same order
            s.forward(metadata, query, cache, output)
            replies = [(p, [p.reply(c.args) for c in p.calls]) for p in s.proxies if p.calls]
            s.release()

            def layer(m=metadata, q=query, c=cache, o=output, replies=replies):
                for proxy, got in replies:
                    proxy.replies = iter(got)
                return forward(s.layer, q, q, q, c, m, o)
            calls.append(self._guarded(layer, step, f"{IMPL_CLASS}.forward()"))
        for p in s.proxies:
            p.mode = "replay"
        return calls

    def _guarded(self, call, step, what: str | None = None):
        """``call``, whose exception is the subject's own (SubjectRaised naming the step)."""
        from harness.subjects.spyre.drive.session import BUILDER_CLASS
        from harness.subjects.spyre.drive.steps import step_text

        what = what or f"{BUILDER_CLASS}.build() on {step_text(step)}"
        session = self.session

        def guarded():
            try:
                return call()
            except HarnessError:
                raise   # the harness's own (a replayed kernel past its replies)
            except Exception as exc:
                raise session.raised(what, exc) from None
        return guarded

    def run_layer(self):
        call = self._calls[self._next]
        self._next = (self._next + 1) % len(self._calls)
        return call()

    # -- the sampler's side ----------------------------------------------------------------------

    def calls_per_sample(self, min_sample_s: float) -> int:
        """Calls a sample needs to last ``min_sample_s``, from one pass over every step."""
        gc.collect()   # each side starts sampling from a collected heap
        per_call = self.sample(len(self._calls))
        return max(1, math.ceil(min_sample_s / per_call)) if per_call > 0 else 1000

    def sample(self, number: int) -> float:
        """CPU seconds per call over ``number`` calls (the garbage collector off, as
        Device.elapsed has it)."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            t0 = CLOCK()
            for _ in range(number):
                self.run_layer()
            seconds = CLOCK() - t0
        finally:
            if enabled:
                gc.enable()
        self.session.release()   # recorded kernel calls of the forwards: not kept
        return seconds / number

    def profile(self, top: int) -> dict:
        """Where one pass over the steps spends its time, by the commit's own functions
        (harness.measure.host_profile), apart from any timed sample."""
        from harness.measure.host_profile import profile_calls

        tree = self.session.tree
        ours = {tree.filename(rel): rel for rel in tree.files}
        return profile_calls(self._calls, ours, top)

    def close(self) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None


def _uncounted(transfers):
    """Hand the commit's modules their own ``convert`` back (the transfer log counted every
    call, a frame walk each); returns what puts the log back."""
    import sys

    held = [mod for name, mod in list(sys.modules.items())
            if name.startswith("spyre_inference") and getattr(mod, "convert", None) is transfers]
    for mod in held:
        mod.convert = transfers.convert

    def restore() -> None:
        for mod in held:
            mod.convert = transfers
    return restore
