"""Host time of two subjects' own build() and forward(), timed now, interleaved, per workload and
path: the host half of ``compare --timings``.

Each host probe (harness.measure.host) is prepared in both subjects' workers, both workers are
pinned to the same cores (harness.measure.placement) and harness.measure.sampler takes ABBA
rounds until its sequential test decides or its bound: the same statistics, verdicts and
"inconclusive" as the kernel timings. After sampling, each side's build() is profiled once
(harness.measure.host_profile), apart from the samples. A path one side cannot take (a knob its
env lacks) is said once per path: skipped where the base lacks it, lost where only the head does.

What is measured comes back as plain data (:class:`HostRun`); harness.analyze.subjects_now adds
it to a Comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.errors import CapabilityMissing, HarnessError
from harness.matrix import Case
from harness.measure import placement
from harness.measure.device import HostLoad, select
from harness.measure.host import BENCHMARKS, KINDS, PATHS, HostProbe, host_config, prepare
from harness.measure.sampler import Plan, sample_pair
from harness.subjects.base import Subject
from harness.suite import torch_threads
from harness.workloads import WorkloadSpec

#: Functions kept of each side's profile.
PROFILE_TOP = 8
#: The sampler's bound per host probe by default (seconds; --timing-seconds sets it): a quick
#: tier has tens of host probes, most decided at the first look (30 rounds, a second or two).
HOST_SECONDS = 10.0


@dataclass
class HostRun:
    """What timing base and head's host work found, before any judging."""

    #: (benchmark, params, unit, base samples, head samples, verdict, profile): profile is
    #: {"base": ..., "head": ...} for build(), None for forward().
    timings: list[tuple] = field(default_factory=list)
    lost: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    factor: float | None = None
    busiest_cores: float = 0.0


def time_host(base: Subject, head: Subject, cases: list[Case], specs: list[WorkloadSpec],
              plan: Plan | None = None) -> HostRun:
    """Every workload of ``specs`` on every path of :data:`PATHS`, build() then forward(), at
    the one config :func:`harness.measure.host.host_config` picks of ``cases``, each probe
    sampled under ``plan`` (default: the kernel timings' plan bounded by :data:`HOST_SECONDS`)."""
    plan = plan or Plan(max_seconds=HOST_SECONDS)
    config = host_config([c.config for c in cases])
    run = HostRun(factor=plan.factor)
    if not any("forward" in s.capabilities for s in (base, head)):
        run.skipped.append(("host timing", base.lacks("forward") or
                            f"{base.spec}: no metadata builder of its own"))
        return run
    dev = select("cpu")
    cpus = placement.timing_cpus(torch_threads())
    pinned = False
    workloads = []
    for spec in specs:
        try:
            workload = spec.build(config)
            workload.check_fits(config)
        except HarnessError as exc:
            run.skipped.append((f"host timing, workload {spec.name}", str(exc)))
            continue
        workloads.append(workload)
    for path in PATHS:
        probes = [HostProbe(kind, path, w, config) for kind in KINDS for w in workloads]
        for probe in probes:
            sides = _prepare(run, probe, (base, head), dev)
            if sides == PATH_MISSING:
                break   # said once for the whole path
            if sides is None:
                continue
            what = f"{BENCHMARKS[probe.kind]} {_what(probe)}"
            try:
                pinned = _pin(sides, cpus) or pinned
                with HostLoad(own_pids=[p.pid for p in sides if getattr(p, "pid", None)]) \
                        as load:
                    sampled = sample_pair(sides[0], sides[1], plan)
                run.busiest_cores = max(run.busiest_cores, load.others_cores or 0.0)
                profile = ({"base": sides[0].profile(PROFILE_TOP),
                            "head": sides[1].profile(PROFILE_TOP)} if probe.kind == "build"
                           else None)
            except HarnessError as exc:
                run.skipped.append((what, f"while timing: {exc}"))
                continue
            finally:
                _close(sides)
            run.timings.append((BENCHMARKS[probe.kind], probe.params, "seconds", sampled.base,
                                sampled.head, sampled.verdict, profile))
    run.notes.append(f"host time: each side's own build() per step and forward() per layer "
                     f"outside the kernels, in CPU seconds of its worker, at "
                     f"{config.label()} under each path's env ({', '.join(PATHS)})")
    if pinned:
        run.notes.append(f"host probes: both sides' workers pinned to CPU "
                         f"{placement.describe(cpus)} while timed")
    return run


#: What :func:`_prepare` answers when a side cannot take the probe's path at all.
PATH_MISSING = "path missing"


def _prepare(run: HostRun, probe: HostProbe, subjects, dev):
    """Both sides of ``probe`` prepared; else None (this probe said as skipped or lost), or
    :data:`PATH_MISSING` when a side cannot take the probe's path at all (its knob, its
    backend, no builder: said once for the whole path, skipped where the base cannot, lost
    where only the head cannot)."""
    sides, failed = [], {}
    for side, subject in zip(("base", "head"), subjects):
        try:
            sides.append(prepare(probe, subject, dev))
        except HarnessError as exc:
            failed[side] = exc
    if not failed:
        return sides
    _close(sides)
    wide = any(isinstance(exc, CapabilityMissing) for exc in failed.values())
    what = (f"host timing, path {probe.path}" if wide
            else f"{BENCHMARKS[probe.kind]} {_what(probe)}")
    if "head" not in failed:
        run.skipped.append((f"{what} (base)", str(failed["base"])))
    elif "base" not in failed:
        run.lost.append((what, str(failed["head"])))
    else:   # neither side: said once, in the base's words
        run.skipped.append((what, str(failed["base"])))
    return PATH_MISSING if wide else None


def _pin(sides, cpus) -> bool:
    if cpus is None or not all(hasattr(p, "pin") for p in sides):
        return False
    return all([p.pin(cpus) for p in sides])


def _close(sides) -> None:
    for prepared in sides or ():
        try:
            prepared.close()
        except HarnessError:
            pass


def _what(probe: HostProbe) -> str:
    return f"workload {probe.workload.name}, path {probe.path}"
