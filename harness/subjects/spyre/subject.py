"""spyre-inference as a subject: its own bucketer's ladders and builder's figures, from any version.

Specs: ``spyre-inference`` (the installed package), ``path:<checkout>``, ``git:<repo>@<rev>``.
The subject snapshots ``spyre_inference/**.py`` once (from the checkout, or from the revision's
objects in the git store, never a worktree: :mod:`.locate`), probes what that version has
(:mod:`.capabilities`), and then answers each ``bucketing(config, overrides)`` with a fresh load
inside an isolated window (:mod:`.bucketing`, :mod:`harness.subjects.load.loader`): env
overrides set only there, ``clear_env_cache()`` before the construction, every module of the load
gone afterwards. Its builder and forward are driven by :mod:`.costs` and
:mod:`harness.subjects.spyre.drive`; its decode kernel and Dynamo settings are loaded by
:mod:`.decode_kernel` and :mod:`.compile_settings`. This class holds what the version is and
hands each question to the module that answers it.

The installed package is imported normally when its full stack (vLLM) imports ("stack" mode; its
modules then stay imported, as any import does, and only the env and the env cache are managed per
load); otherwise it is loaded by path from where it is installed, like a checkout.
"""

from __future__ import annotations

from harness.config import EngineConfig, Overrides
from harness.errors import CapabilityMissing
from harness.subjects.base import CAPABILITIES, Bucketing, Subject
from harness.subjects.load.loader import BUCKETER_FILE, SourceTree
from harness.subjects.memo.key import source_key
from harness.subjects.source.knobs import ENVS_FILE, declared
from harness.subjects.source.sources import module_hashes
from harness.subjects.spyre import costs
from harness.subjects.spyre.bucketing import Bucketings, builder_ladders
from harness.subjects.spyre.capabilities import probe, stored_probe
from harness.subjects.spyre.compile_settings import load_compile_settings
from harness.subjects.spyre.decode_kernel import load_decode_kernel
from harness.subjects.timeout import bounded


class SpyreInferenceSubject(Subject):
    def __init__(self, spec: str, tree: SourceTree, identity: str, where_: str,
                 stack: bool = False):
        self.spec = spec
        self.identity = identity
        #: Which version, in words: "commit 1a2b3c4d5e6f", "checkout /src/si", ...
        self.where = where_
        self.tree = tree
        self.sources = module_hashes(tree.files)
        self.knobs = declared(tree.files)
        self.mode = "stack" if stack else "path"
        self._kernel: tuple | None = None
        self._compile_settings: dict | None = None
        self._source: str | None = None
        probed = stored_probe(tree, self.source)
        if probed is None and tree.has(BUCKETER_FILE):
            import torch  # noqa: F401  (the harness's start-up: not charged to the subject's time)
        with bounded(f"{self.origin}: loading"):
            found = probe(tree, self.mode, self.origin, self.source, probed)
        self.capabilities = frozenset(found.names)
        self._missing = found.missing
        #: The batched minimum its bucketer (or backend) sets
        self.min_batched = found.min_batched
        self._kernel_def = found.kernel_def
        self._bucketings = Bucketings(self)

    def source(self) -> str:
        """This commit's source key (harness.subjects.memo.key): what its figures are kept by."""
        if self._source is None:
            self._source = source_key(self.tree)
        return self._source

    @property
    def origin(self) -> str:
        return f"{self.spec} ({self.where})"

    @property
    def generation(self) -> int:
        """0 (no bucketer) to 4, from the capabilities (top-up vs clamp is not told apart)."""
        caps = self.capabilities
        for gen, cap in ((4, "sliding_window"), (3, "chunking"), (2, "num_seqs_axis"),
                         (1, "bucketer")):
            if cap in caps:
                return gen
        return 0

    def lacks(self, capability: str) -> str | None:
        if capability in self.capabilities:
            return None
        detail = self._missing.get(capability) or CAPABILITIES.get(capability, capability)
        return f"{self.origin} has no {capability}: {detail}"

    def unknown_knobs(self, overrides: Overrides) -> list[str]:
        """Knobs given that this commit does not offer (its ``envs.py`` registry lacks them; a
        commit with no registry: named nowhere in its ``spyre_inference/**.py``): setting them
        would measure the default path under a label that says otherwise."""
        if self.knobs is not None:
            return [k for k in overrides.knobs if k not in self.knobs]
        sources = self.tree.files.values()
        return [k for k in overrides.knobs
                if not any(f'"{k}"'.encode() in src or f"'{k}'".encode() in src
                           for src in sources)]

    def bucketing(self, config: EngineConfig, overrides: Overrides) -> Bucketing:
        self._check_bucketable(overrides)
        return self._bucketings.get(config, overrides)

    def bucketer_bucketing(self, config: EngineConfig, overrides: Overrides) -> Bucketing:
        self._check_bucketable(overrides)
        return self._bucketings.bucketer_only(config, overrides)

    def _check_bucketable(self, overrides: Overrides) -> None:
        reason = self.lacks("bucketer")
        if reason:
            raise CapabilityMissing(reason)
        unknown = self.unknown_knobs(overrides)
        if unknown:
            where = (f"its {ENVS_FILE} does not declare" if self.knobs is not None
                     else "no file of its spyre_inference package reads")
            raise CapabilityMissing(f"{self.origin} has no knob {', '.join(unknown)} ({where} "
                                    f"{'them' if len(unknown) > 1 else 'it'})")

    def known_bucketing(self, config: EngineConfig, overrides: Overrides) -> Bucketing | None:
        """The bucketing of ``config`` if this process has computed it (errors stay here: a
        worker hands back only what it could compute)."""
        return self._bucketings.known(config, overrides)

    def keep_bucketing(self, config: EngineConfig, overrides: Overrides,
                       bucketing: Bucketing) -> None:
        """Take a bucketing computed by a worker process (:mod:`harness.subjects.spyre.prefetch`)."""
        self._bucketings.keep(config, overrides, bucketing)

    def builder_ladders(self, config: EngineConfig, overrides: Overrides):
        """The batched ladders the subject's metadata builder dispatches on (seqs, blocks,
        owner): :func:`harness.subjects.spyre.bucketing.builder_ladders`."""
        return builder_ladders(self.tree, self.origin, self.source(), config, overrides)

    def prefetch_workloads(self, requests: list) -> int:
        """Drive the builder for every request at once, over worker processes
        (:mod:`harness.subjects.spyre.prefetch`); a subject without a bucketer has nothing to drive."""
        if self.lacks("bucketer"):
            return 0
        from harness.subjects.spyre.prefetch import prefetch
        return prefetch(self, self.source(), requests)

    def workload_costs(self, config: EngineConfig, overrides: Overrides, workloads) -> list:
        """Every step of every workload through this commit's own builder and forward, each
        driven once per attention sources, config and env: see :mod:`.costs`."""
        return costs.workload_costs(self, config, overrides, workloads)

    def builder_session(self, config: EngineConfig, overrides: Overrides):
        """An open load of this commit's backend for one config (a context manager), whose
        forward the measurement drives with kernels really called (:mod:`harness.measure.forward`);
        its loading is bounded in time like every other run of subject code."""
        from harness.subjects.spyre.drive.session import BuilderSession

        if "forward" not in self.capabilities:
            raise CapabilityMissing(self.lacks("forward"))
        return _BoundedOpen(BuilderSession(self.tree, self.origin, config, overrides),
                            f"{self.origin}: loading its backend at {config.label()} "
                            f"env={overrides.label()}")

    def decode_kernel(self):
        """``(function, Generation)``, undecorated (the caller compiles it), or None: see
        :mod:`.decode_kernel`."""
        if self._kernel_def is None:
            return None
        if self._kernel is None:
            self._kernel = load_decode_kernel(self.tree, self.origin, self._kernel_def)
        return self._kernel

    def compile_settings(self) -> dict:
        """What the commit's ``spyre_inference/platform.py`` sets in ``torch._dynamo.config`` at
        import (it raises the recompile limits), read by importing it once and restoring the
        config; {} when the commit has no platform module."""
        if self._compile_settings is None:
            self._compile_settings = load_compile_settings(self.tree, self.origin)
        return dict(self._compile_settings)

    def override_rule(self) -> str | None:
        """"top-up" or "clamp": whether an override entry above the limit is kept, found by
        asking the bucketer (kv override of twice max_model_len at the default config)."""
        if "bucketer" not in self.capabilities:
            return None
        return self._bucketings.override_rule()

    def describe(self) -> dict:
        """What was loaded and what it can do, for people and logs; ``vllm``: which vLLM its
        loads import (the stand-ins, or the real one where it imports: SPYRE_BENCH_VLLM)."""
        from harness.subjects.load import vllm_real

        kernel = self._kernel_def
        return {"spec": self.spec, "identity": self.identity, "where": self.where,
                "mode": self.mode, "generation": self.generation,
                "vllm": vllm_real.choice().label() if self.mode != "stack" else "installed",
                "override_rule": self.override_rule(),
                "capabilities": sorted(self.capabilities),
                "kernel": f"{kernel[0]}:{kernel[1].name} ({kernel[1].generation})" if kernel
                else None}


class _BoundedOpen:
    """A BuilderSession whose opening (loading and constructing subject code) is time-bounded;
    what runs inside it afterwards (compiles, timing) is measured, not bounded."""

    def __init__(self, session, what: str):
        self.session, self.what = session, what

    def __enter__(self):
        with bounded(self.what):
            return self.session.__enter__()

    def __exit__(self, *exc):
        return self.session.__exit__(*exc)
