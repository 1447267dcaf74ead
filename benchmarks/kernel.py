"""Kernel benchmarks: wall time of the subject's own decode kernel (``time_``), and the graphs
``torch.compile`` builds for a workload (``track_``), next to the exact model's prediction.

torch is imported at module level on purpose: ASV's forkserver imports the suite once, so every
benchmark process starts with torch loaded instead of paying its seconds-long import each time.
Every timed probe is checked against the oracle in ``setup``: a wrong kernel fails the benchmark,
it is never recorded as fast.
"""

import torch  # noqa: F401  (preloaded for the forkserver; see the module docstring)

from harness import suite
from harness.errors import HarnessError
from harness.measure import probes, settings
from harness.measure.device import select
from harness.measure.oracle import KernelMismatch
from harness.registry import describe

_PROBES = {p.name: p for p in probes.TIERS[suite.tier_name()]}
_DEVICE = None


def _device():
    global _DEVICE
    if _DEVICE is None:
        import os
        _DEVICE = select(os.environ.get("SPYRE_BENCH_DEVICE", "auto"))
        # torch's threads set here, in the benchmark process (a forkserver child): its default,
        # one per core, made `asv run --interleave-rounds` 17x slower on a shared 2-core box
        _DEVICE.prepare(suite.torch_threads())
    return _DEVICE


class Decode:
    """One layer of decode attention for a fixed batch, on the bucket the subject picks."""

    params = [list(_PROBES)]
    param_names = ["probe"]
    timeout = 300
    sample_time = 0.02
    repeat = (5, 20, 20.0)
    warmup_time = 0.2

    def setup(self, probe):
        try:
            self.prepared = probes.prepare(_PROBES[probe], suite.subject(), _device())
        except probes.ProbeSkipped as exc:
            suite.skip(f"kernel.Decode[{probe}]", str(exc))
        except KernelMismatch:
            raise  # a wrong kernel is a failure, not a skip
        except HarnessError as exc:
            suite.skip(f"kernel.Decode[{probe}]", str(exc))

    def teardown(self, probe):
        close = getattr(getattr(self, "prepared", None), "close", None)
        if close is not None:
            close()  # a probe run through the subject's forward holds its load open

    def time_layer(self, probe):
        self.prepared.run_layer()
    describe(time_layer, "kernel.Decode.time_layer")


class DecodeBytes:
    """Per probe, the bytes one layer must move and the bytes it walks on the subject's bucket
    (exact, no kernel run: the padded slots the commit's own builder decides; the model's on
    the subject's bucketing for a subject with no builder). With ``Decode.time_layer`` and the
    bandwidth in the machine's info they give kernel efficiency and the fraction of the roofline
    over the history (the report's efficiency plots)."""

    params = [list(_PROBES)]
    param_names = ["probe"]
    timeout = 120

    @suite.skipped_when_not_drivable
    def setup_cache(self):
        import dataclasses

        from harness.config import BATCHED_DECODE, Overrides
        from harness.errors import HarnessError
        from harness.measure.efficiency import step_bytes
        from harness.model.cost import step_cost
        from harness.workloads import Workload, parse_step
        subject = suite.subject()
        if subject.lacks("bucketer"):
            return {"skipped": subject.lacks("bucketer")}
        table = {}
        for name, probe in _PROBES.items():
            config = probe.engine_config()
            step = parse_step(probe.step, probe.name)
            if "forward" in subject.capabilities:
                # as probes._prepare_forward runs it: the commit's own builder decides the
                # padded slots (the per-sequence baseline: batched decode off)
                env = dict(probe.env)
                if probe.per_sequence:
                    env[BATCHED_DECODE] = "0"
                try:
                    (cost,) = subject.workload_costs(config, Overrides.from_env(env),
                                                     [Workload(name, "probe", (step,))])
                except HarnessError as exc:
                    table[name] = {"skipped": str(exc)}
                    continue
                if isinstance(cost, HarnessError):
                    table[name] = {"skipped": str(cost)}
                    continue
                slots = cost.steps[0].padded_kv_slots
            else:   # the kernel alone, on the subject's bucketing, as probes.prepare feeds it
                bucketing = subject.bucketing(config, Overrides.from_env(probe.env))
                if probe.per_sequence:
                    bucketing = dataclasses.replace(bucketing, batched_enabled=False)
                slots = step_cost(bucketing, config, step).padded_kv_slots
            table[name] = step_bytes(config, step, slots)
        return table

    def setup(self, table, probe):
        skipped = table.get("skipped") or table[probe].get("skipped")
        if skipped:
            suite.skip(f"kernel.DecodeBytes[{probe}]", skipped)
        self.figures = table[probe]

    def track_walked_bytes(self, table, probe):
        return self.figures["walked_bytes"]
    describe(track_walked_bytes, "kernel.DecodeBytes.track_walked_bytes")

    def track_logical_bytes(self, table, probe):
        return self.figures["logical_bytes"]
    describe(track_logical_bytes, "kernel.DecodeBytes.track_logical_bytes")


class Compile:
    """Graphs compiled for a workload (eager backend: counting, not compiling, is the point)."""

    timeout = 600
    params = ([["four-3-block-decodes"], ["batched"]] if suite.tier_name() == "quick" else
              [["four-3-block-decodes", "uniform-short"], ["batched", "kv-above-limit"]])
    param_names = ["workload", "overrides"]
    CONFIG = (dict(probes.SMALL) if suite.tier_name() == "quick"
              else dict(probes.REVIEW, num_kv_heads=2, queries_per_kv=2, head_size=32))

    @suite.skipped_when_not_drivable
    def setup_cache(self):
        from harness.config import EngineConfig
        from harness.matrix import Case, override_set
        from harness.measure.compiles import count_graphs
        from harness.workloads import generate
        subject = suite.subject()
        found = subject.decode_kernel()
        if found is None and "forward" in subject.capabilities:
            return self._through_forward(subject)
        if found is None:
            return {"skipped": subject.lacks("decode_kernel_a") or "no batched decode kernel"}
        kernel, generation = found
        config = EngineConfig(**self.CONFIG)
        table = {}
        for workload in self.params[0]:
            for overrides in self.params[1]:
                case = Case(config, override_set(overrides), overrides)
                bucketing = subject.bucketing(case.config, case.overrides)
                w = generate(workload, config, steps=4)
                # a raised limit counts every graph exactly; the default limit shows fall-backs
                exact = count_graphs(kernel, generation, bucketing, config, w,
                                     device=_device(), recompile_limit=1024)
                default = count_graphs(kernel, generation, bucketing, config, w,
                                       device=_device(), check=False)
                table[(workload, overrides)] = {
                    "graphs": exact.graphs, "late_compiles": exact.graphs_workload,
                    "graphs_over_model": exact.graphs - exact.expected_graphs,
                    "eager_fallbacks_at_default_limit": len(default.fallbacks)}
        return table

    def _through_forward(self, subject):
        """Kernels of a convention the harness builds no inputs for: every step through the
        subject's own forward (harness.measure.forward), the same four figures."""
        from harness.config import EngineConfig
        from harness.matrix import Case, override_set
        from harness.measure.forward import graph_counts
        from harness.workloads import generate
        config = EngineConfig(**self.CONFIG)
        table = {}
        for workload in self.params[0]:
            for overrides in self.params[1]:
                case = Case(config, override_set(overrides), overrides)
                w = generate(workload, config, steps=4)
                try:
                    exact = graph_counts(subject, case, w, _device(), recompile_limit=1024)
                    default = graph_counts(subject, case, w, _device(), recompile_limit=8)
                except KernelMismatch:
                    raise  # a wrong kernel fails the benchmark
                except HarnessError as exc:
                    return {"skipped": str(exc)}
                table[(workload, overrides)] = {
                    "graphs": exact["graphs"], "late_compiles": exact["graphs_workload"],
                    "graphs_over_model": exact["graphs"] - exact["expected_graphs"],
                    "eager_fallbacks_at_default_limit": default["fallbacks"]}
        return table

    def setup(self, table, workload, overrides):
        if "skipped" in table:
            suite.skip(f"kernel.Compile[{workload}, {overrides}]", table["skipped"])
        self.figures = table[(workload, overrides)]

    def track_graphs(self, table, workload, overrides):
        return self.figures["graphs"]
    describe(track_graphs, "kernel.Compile.track_graphs")

    def track_late_compiles(self, table, workload, overrides):
        return self.figures["late_compiles"]
    describe(track_late_compiles, "kernel.Compile.track_late_compiles")

    def track_graphs_over_model(self, table, workload, overrides):
        """Measured graphs minus the model's distinct keys: 0 unless the model is wrong."""
        return self.figures["graphs_over_model"]
    describe(track_graphs_over_model, "kernel.Compile.track_graphs_over_model")

    def track_eager_fallbacks(self, table, workload, overrides):
        """Keys past Dynamo's default recompile limit (8) that silently ran eagerly."""
        return self.figures["eager_fallbacks_at_default_limit"]
    describe(track_eager_fallbacks, "kernel.Compile.track_eager_fallbacks")


class Guard:
    """The commit's own compile guard as a second opinion on the late compiles: armed at its
    strictest level after the commit's own warmup, the compiles it raises for over a workload
    (harness.measure.guard; ``kernel`` shows them beside spyre-bench's own count). Commits
    without a guard skip, naming that."""

    timeout = 600
    params = [[settings.GUARD_WORKLOAD], [settings.GUARD_OVERRIDES]]
    param_names = ["workload", "overrides"]

    @suite.skipped_when_not_drivable
    def setup_cache(self):
        from harness.config import EngineConfig
        from harness.matrix import Case, override_set
        from harness.measure.forward import guard_counts
        from harness.workloads import generate
        subject = suite.subject()
        if "forward" not in subject.capabilities:
            return {"skipped": subject.lacks("forward")}
        config = EngineConfig(**settings.GUARD_CONFIG)
        table = {}
        for workload in self.params[0]:
            for overrides in self.params[1]:
                case = Case(config, override_set(overrides), overrides)
                try:
                    steps = settings.GUARD_STEPS
                    found = guard_counts(subject, case, generate(workload, config, steps=steps),
                                         _device())
                except KernelMismatch:
                    raise  # a wrong kernel fails the benchmark
                except HarnessError as exc:
                    return {"skipped": str(exc)}
                table[(workload, overrides)] = found["violations"]
        return table

    def setup(self, table, workload, overrides):
        if "skipped" in table:
            suite.skip(f"kernel.Guard[{workload}, {overrides}]", table["skipped"])
        self.violations = table[(workload, overrides)]

    def track_guard_violations(self, table, workload, overrides):
        """Compiles the commit's own guard raises for after its own warmup."""
        return self.violations
    describe(track_guard_violations, "kernel.Guard.track_guard_violations")


if suite.tier_name() == "full":
    class CompileTime:
        """Seconds to compile a probe's kernels with the real compiler, from a cold cache."""

        timeout = 900
        params = [["notes-4x16", "review-4x3-kv-above"]]
        param_names = ["probe"]

        def setup(self, probe):
            from harness.config import Overrides
            from harness.measure.compiles import count_graphs
            from harness.workloads import inline
            p = _PROBES[probe]
            with suite.skipping(f"kernel.CompileTime[{probe}]"):
                subject = suite.subject()
                found = subject.decode_kernel()
                if found is None:
                    suite.skip(f"kernel.CompileTime[{probe}]", "no batched decode kernel")
                config = p.engine_config()
                bucketing = subject.bucketing(config, Overrides.from_env(p.env))
                count = count_graphs(*found, bucketing, config, inline([p.step]),
                                     device=_device(), backend="inductor", record_warmup=False)
            self.seconds = sum(count.compile_seconds.values())

        def track_compile_seconds(self, probe):
            return self.seconds
        describe(track_compile_seconds, "kernel.CompileTime.track_compile_seconds")
