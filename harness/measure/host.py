"""The host time of a commit's own metadata builder and forward, per step: what the engine pays
on the CPU around every step's kernels.

The engine runs the commit's ``build()`` before every step (a real generation-3 tree's took
10-15 ms a step over the quick tier, issue 34: as long as a short decode's kernels), and its
``forward()`` for every layer; the exact tier runs both on every step it drives and kept none of
that time. A host probe is one workload's steps on one attention path (the override set that
selects it, :data:`PATHS`) at one config, through one subject's own code:

* ``build``: the builder's ``build()``, step after step, each step's CommonAttentionMetadata
  made beforehand;
* ``forward``: later layers of the impl's ``forward()`` outside the kernels (each kernel
  answered with what the step's recorded first layer got back), on metadata the step's
  ``build()`` has just made and after its first layer paid the device mirror, both untimed:
  the dispatch and launch work every later layer of a step repeats.

The transfer log's counting is taken off the commit's ``convert`` while a probe lives (its own
copy still runs): what is timed is the commit's code, not the harness's bookkeeping. A sample is
``number`` calls cycling through the workload's steps, each call's CPU time read on its own, so
two sides given the same number time the same steps in every round (harness.measure.sampler
pairs them). Nothing here records a step or writes the figure memo: the exact figures never
see it.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass

from harness.config import EngineConfig, Overrides
from harness.errors import CapabilityMissing, HarnessError
from harness.matrix import override_set
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
#: Later layers a forward call runs on one step's metadata: a layer outside the kernels is tens
#: of microseconds on the batched path, where one layer a call took 60-150 rounds to decide
#: (the clock's read and a fresh step's untimed build() around each), eight 30-40 (fixture gen4).
LATER_LAYERS = 8


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


class HostSide:
    """A host probe prepared for one subject (in this process). Each step in turn: ``ready()``
    makes what its timed call needs (untimed), ``call()`` is the timed work; ``close()`` ends the
    subject's load."""

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
        self._layer = None
        try:
            self._steps = self._prepare_steps()
            self._restore = _uncounted(self.session.transfers)
            for _ in self._steps:   # every step once before anything is timed
                self.run_layer()
        except BaseException:
            self.close()
            raise

    # -- what is timed ---------------------------------------------------------------------------

    def _prepare_steps(self) -> list:
        """Per step: its CommonAttentionMetadata and, for forward(), its inputs and the replies
        its kernel calls get (from one recorded first layer)."""
        from harness.subjects.spyre.drive.steps import step_pages, step_seed

        s = self.session
        pages = max(step_pages(step, s.config.block_size) for step in self.probe.workload.steps)
        cache = s.kv_cache(None, pages, placeholder=True)   # bound before build(), as the
        out = []                                            # engine binds it
        for step in self.probe.workload.steps:
            cm = s.common_metadata(step, step_seed(step))
            if self.probe.kind == "build":
                out.append((step, cm, None))
                continue
            metadata, _ = s.build(step, step_seed(step))
            query, cache, output = s.placeholders(step, cache)
            s.forward(metadata, query, cache, output)
            replies = [(p, [p.recorded(c.args) for c in p.calls]) for p in s.proxies if p.calls]
            s.release()
            out.append((step, cm, (query, cache, output, replies)))
        if self.probe.kind == "forward":
            for p in s.proxies:
                p.mode = "replay"
        return out

    def ready(self) -> None:
        """Untimed, before the next step's call: for forward(), that step's metadata through
        the commit's build() and its first layer (the device mirror); every call then times a
        later layer on metadata of its own (one step's metadata kept for every call timed up to
        9-22 % apart between two preparations of the same step: where its tensors landed)."""
        if self.probe.kind != "forward":
            return
        step, cm, (query, cache, output, replies) = self._steps[self._next]
        metadata = self._guarded(step, self._build, cm)
        self._guarded(step, self._forward, metadata, query, cache, output, replies)
        self._layer = (metadata, query, cache, output, replies)

    def call(self, layers: int = 1):
        """The timed work of the next step: its build(), or ``layers`` later layers of its
        forward(), back to back as the engine runs them."""
        step, cm, _ = self._steps[self._next]
        self._next = (self._next + 1) % len(self._steps)
        if self.probe.kind == "build":
            return self._guarded(step, self._build, cm)
        if self._layer is None:
            raise HarnessError("host forward probe: call() before ready()")
        for _ in range(layers):
            out = self._guarded(step, self._forward, *self._layer)
        return out

    def run_layer(self):
        """The next step's call with what it needs made first (untimed work and all)."""
        self.ready()
        return self.call()

    def _build(self, cm):
        return self.session.builder.build(common_prefix_len=0, common_attn_metadata=cm)

    def _forward(self, metadata, query, cache, output, replies):
        """One later layer, called as the recorded first layer was (the session's
        ``call_impl``: through the commit's staging buffers where its attn_layer has them), so
        its kernel calls are the recorded ones and each gets its recorded reply."""
        for proxy, got in replies:
            proxy.replies = iter(got)
        return self.session.call_impl(query, cache, metadata, output)

    def _guarded(self, step, fn, *args):
        """``fn(*args)``, whose exception is the subject's own (SubjectRaised naming the step)."""
        from harness.subjects.spyre.drive.session import BUILDER_CLASS, IMPL_CLASS
        from harness.subjects.spyre.drive.steps import step_text

        try:
            return fn(*args)
        except HarnessError:
            raise   # the harness's own (a replayed kernel past its replies)
        except Exception as exc:
            what = (f"{BUILDER_CLASS}.build()" if fn == self._build else f"{IMPL_CLASS}.forward()")
            raise self.session.raised(f"{what} on {step_text(step)}", exc) from None

    # -- the sampler's side ----------------------------------------------------------------------

    def calls_per_sample(self, min_sample_s: float) -> int:
        """Calls a sample needs to last ``min_sample_s`` (from one pass over every step), at
        most one pass: each call's time is read on its own, so a short call needs no long
        sample, and a forward's untimed work before each call would make it a long wait."""
        gc.collect()   # each side starts sampling from a collected heap
        per_call = self.sample(len(self._steps))
        wanted = math.ceil(min_sample_s / per_call) if per_call > 0 else len(self._steps)
        return max(1, min(len(self._steps), wanted))

    def sample(self, number: int) -> float:
        """CPU seconds per step's build() or per layer of forward() over ``number`` calls,
        each read on its own (what ``ready()`` does is not in it; a forward call is
        :data:`LATER_LAYERS` layers); the garbage collector off, as Device.elapsed has it."""
        layers = LATER_LAYERS if self.probe.kind == "forward" else 1
        enabled = gc.isenabled()
        gc.disable()
        seconds = 0.0
        try:
            for _ in range(number):
                self.ready()
                t0 = CLOCK()
                self.call(layers)
                seconds += CLOCK() - t0
        finally:
            if enabled:
                gc.enable()
        self.session.release()
        return seconds / (number * layers)

    def profile(self, top: int) -> dict:
        """Where one pass over the steps spends its time, by the commit's own functions
        (harness.measure.host_profile), apart from any timed sample (build() probes: what a
        forward probe's ``ready()`` runs would be in a forward's profile)."""
        from harness.measure.host_profile import profile_calls

        tree = self.session.tree
        ours = {tree.filename(rel): rel for rel in tree.files}
        return profile_calls([self.run_layer] * len(self._steps), ours, top)

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
