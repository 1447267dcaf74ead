"""spyre-inference as a subject: its own bucketer's ladders and builder's figures, from any version.

Specs: ``spyre-inference`` (the installed package), ``path:<checkout>``, ``git:<repo>@<rev>``.
The subject snapshots ``spyre_inference/**.py`` once (from the checkout, or from the revision's
objects in the git store, never a worktree), probes what that version has, and then answers
each ``bucketing(config, overrides)`` with a fresh load inside an isolated window
(:mod:`harness.subjects.load.loader`): env overrides set only there, ``clear_env_cache()`` before the
construction, every module of the load gone afterwards.

Capabilities, probed on the code (not on version numbers):

* ``bucketer``: ``spyre_inference/v1/attention/spyre_attn_bucketer.py`` exists (a revision
  without it is "no bucketer yet": every figure is a skip with that reason);
* ``num_seqs_axis``: ``find_sequence_bucket`` or ``num_seqs_buckets`` on the bucketer class
  (#810 on). Which batched ladders dispatch is not inferred from it: it is read from the
  constructed metadata builder (:meth:`SpyreInferenceSubject.builder_ladders`: its own before
  #810, its bucketer's after);
* ``batched_decode_variants``: the method of that name; ``chunking``: ``batched_decode_chunking``
  on the class or, as in generations 3-4, at module level;
* ``sliding_window``: the bucketer's constructor takes it (generation 4);
* ``decode_prefix``: the backend module uses vLLM's ``split_decodes_and_prefills`` (generation 3
  on): the builder, not the bucketer, decides whether a mixed batch batches its decodes;
* ``decode_kernel_a`` / ``decode_kernel_b``: a top-level function with the kernel's signature in
  ``backends/spyre_attn.py`` or ``ops/batched_decode.py`` (found by parsing, not importing);
* ``forward``: the backend defines ``SpyreAttentionMetadataBuilder`` and ``SpyreAttentionImpl``,
  which :mod:`harness.subjects.spyre.drive.session` drives per step.

The installed package is imported normally when its full stack (vLLM) imports ("stack" mode; its
modules then stay imported, as any import does, and only the env and the env cache are managed per
load); otherwise it is loaded by path from where it is installed, like a checkout.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.config import MIN_BATCHED_SEQS, EngineConfig, Overrides
from harness.errors import CapabilityMissing, HarnessError, SubjectError
from harness.generations import Generation
from harness.ladders import Ladder, blocks_ladder
from harness.subjects.base import CAPABILITIES, Bucketing, ChunkTable, Subject
from harness.subjects.load.loader import (
    BACKEND_FILE,
    BACKEND_MODULE,
    BUCKETER_FILE,
    BUCKETER_MODULE,
    ENVS_MODULE,
    OPS_KERNEL_FILE,
    OPS_KERNEL_MODULE,
    PACKAGE,
    CaptureHandler,
    SourceTree,
    isolated,
    restore_modules,
    vllm_standins,
    where,
)
from harness.subjects.memo.figures import (
    FIGURES,
    bucketing_key,
    ladders_key,
    probe_key,
    setup_key,
    step_key,
)
from harness.subjects.memo.key import source_key
from harness.subjects.source import gitrev
from harness.subjects.source.extract import KERNEL_IMPORTS, KernelDef
from harness.subjects.source.sources import module_hashes
from harness.subjects.timeout import SubjectTimeout, bounded

BUCKETER_CLASS = "SpyreAttnBucketer"
PLATFORM_MODULE = "spyre_inference.platform"
PLATFORM_FILE = "spyre_inference/platform.py"
#: Field names a variant record may use, tried in order (then position 0 and 1).
BLOCKS_FIELDS = ("num_blocks", "b_blocks", "blocks")
QUERY_FIELDS = ("query_len", "query_bucket", "padded_query_len", "query")
SEQS_FIELDS = ("num_seqs", "b_seqs", "seqs")


class SubjectRejected(HarnessError):
    """The subject's code raised for one config: that config's rows become skips."""


# -- the config the bucketer is constructed with ----------------------------------------------

class _Section:
    """Exactly the attributes the bucketer is known to read; any other is a clear AttributeError."""

    def __init__(self, path: str, **values):
        self.__dict__.update(values)
        self.__dict__["_path"] = path

    def __getattr__(self, name: str):
        given = ", ".join(k for k in self.__dict__ if not k.startswith("_"))
        raise AttributeError(f"{self._path}.{name} is not provided by spyre-bench (it provides "
                             f"{given})")


def bucketer_config(config: EngineConfig) -> _Section:
    """A stand-in VllmConfig for the bucketer's constructor (docs/spyre-inference.md, section 1)."""
    return _Section(
        "vllm_config",
        cache_config=_Section("vllm_config.cache_config", block_size=config.block_size),
        model_config=_Section("vllm_config.model_config", max_model_len=config.max_model_len,
                              runner_type="generate"),
        scheduler_config=_Section(
            "vllm_config.scheduler_config",
            max_num_batched_tokens=config.max_num_batched_tokens,
            max_num_seqs=config.max_num_seqs))


# -- the subject ------------------------------------------------------------------------------

class SpyreInferenceSubject(Subject):
    def __init__(self, spec: str, tree: SourceTree, identity: str, where_: str,
                 stack: bool = False):
        self.spec = spec
        self.identity = identity
        #: Which version, in words: "commit 1a2b3c4d5e6f", "checkout /src/si", ...
        self.where = where_
        self.tree = tree
        self.sources = module_hashes(tree.files)
        self.mode = "stack" if stack else "path"
        self._missing: dict[str, str] = {}
        self._memo: dict[tuple, Bucketing | HarnessError] = {}
        self._kernel: tuple | None = None
        self._compile_settings: dict | None = None
        self._min_batched = MIN_BATCHED_SEQS  # until the bucketer says otherwise
        self._source: str | None = None
        probed = self._stored_probe()
        if probed is None and tree.has(BUCKETER_FILE):
            import torch  # noqa: F401  (the harness's start-up: not charged to the subject's time)
        with bounded(f"{self.origin}: loading"):
            self.capabilities = frozenset(self._probe(probed))

    def source(self) -> str:
        """This commit's source key (harness.subjects.memo.key): what its figures are kept by."""
        if self._source is None:
            self._source = source_key(self.tree)
        return self._source

    def _stored_probe(self) -> dict | None:
        """What probing this commit's bucketer found, kept in the figure memo by source key: a
        commit whose attention sources were probed before (a docs-only commit, a later process)
        is not loaded, nor torch imported, to learn its capabilities."""
        if not self.tree.has(BUCKETER_FILE):
            return None
        return FIGURES.get(self.source(), probe_key())

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

    # -- probing ----------------------------------------------------------------------------

    def _probe(self, probed: dict | None) -> set[str]:
        caps: set[str] = set()
        if self.tree.has(BUCKETER_FILE):
            if probed is None:
                probed = self._probe_bucketer()
                FIGURES.put(self.source(), probe_key(), probed)
                FIGURES.flush()
            caps |= set(probed["capabilities"])
            self._missing.update(probed["missing"])
            self._min_batched = probed["min_batched"]
        else:
            self._missing["bucketer"] = f"{BUCKETER_FILE} is not in it (no bucketer yet)"
            for cap in ("num_seqs_axis", "batched_decode_variants", "chunking", "decode_prefix",
                        "sliding_window"):
                self._missing[cap] = "no bucketer"
        caps |= self._probe_kernels(caps)
        return caps

    def _probe_bucketer(self) -> dict:
        """Capabilities read from the commit's bucketer module and its backend's source, what is
        missing and why, and the batched minimum: plain data (kept in the figure memo)."""
        missing: dict[str, str] = {}
        min_batched = MIN_BATCHED_SEQS
        with self._session({}, CaptureHandler()) as load:
            try:
                module = load()
            except Exception as exc:
                raise SubjectError(f"{self.origin}: {BUCKETER_FILE} failed to import: "
                                   f"{type(exc).__name__}: {exc}{where(exc, self.tree)}") from None
            cls = getattr(module, BUCKETER_CLASS, None)
            minimum = getattr(module, "_MIN_BATCHED_SEQS", None)
            on_module = {n for n in ("batched_decode_chunking",) if callable(getattr(module, n,
                                                                                      None))}
        if not isinstance(cls, type):
            raise SubjectError(f"{self.origin}: {BUCKETER_FILE} has no {BUCKETER_CLASS} class")
        backend = self._parsed(BACKEND_FILE)
        if not isinstance(minimum, int) and backend is not None:
            minimum = backend.literal("_MIN_BATCHED_SEQS")
        if isinstance(minimum, int) and not isinstance(minimum, bool):
            min_batched = minimum

        caps = {"bucketer"}
        checks = {
            "num_seqs_axis": (("find_sequence_bucket", "num_seqs_buckets"),
                              f"{BUCKETER_CLASS} has no find_sequence_bucket or num_seqs_buckets "
                              "(pre-#810: the metadata builder owns the batched ladders)"),
            "batched_decode_variants": (("batched_decode_variants",),
                                        f"{BUCKETER_CLASS} has no batched_decode_variants()"),
            "chunking": (("batched_decode_chunking",),
                         f"neither {BUCKETER_CLASS} nor its module has batched_decode_chunking()"),
        }
        # What the builder uses counts too: a backend that imports or defines the chunking
        # rule chunks, whichever module the rule lives in.
        builder_names = set(backend.bindings) if backend is not None else set()
        for cap, (names, reason) in checks.items():
            if any(hasattr(cls, n) or n in on_module or (cap == "chunking" and n in builder_names)
                   for n in names):
                caps.add(cap)
            else:
                missing[cap] = reason
        try:
            params = inspect.signature(cls.__init__).parameters
        except (TypeError, ValueError):
            params = {}
        if "sliding_window" in params:
            caps.add("sliding_window")
        else:
            missing["sliding_window"] = f"{BUCKETER_CLASS}() takes no sliding_window"
        # The builder, not the bucketer, decides whether mixed batches batch their decodes.
        if backend is not None and "split_decodes_and_prefills" in backend.bindings:
            caps.add("decode_prefix")
        else:
            missing["decode_prefix"] = (f"{BACKEND_FILE} does not use vLLM's "
                                        "split_decodes_and_prefills")
        return {"capabilities": tuple(sorted(caps)), "missing": missing,
                "min_batched": min_batched}

    def _parsed(self, rel: str):
        try:
            return self.tree.parsed(rel)
        except SyntaxError:
            return None

    def _probe_kernels(self, caps: set[str]) -> set[str]:
        found: list[tuple[str, KernelDef]] = []
        for rel in (OPS_KERNEL_FILE, BACKEND_FILE):
            parsed = self._parsed(rel)
            if parsed is not None:
                defs = parsed.kernels()
                defs.sort(key=lambda k: "batched_decode" not in k.name)
                found += [(rel, k) for k in defs]
        have = {k.generation for _, k in found}
        for gen in Generation:
            if gen not in have:
                self._missing[f"decode_kernel_{gen.lower()}"] = (
                    f"no function with the generation-{gen} kernel signature in "
                    f"{OPS_KERNEL_FILE} or {BACKEND_FILE}")
        # The chunked bucketer dispatches the chunked kernel: prefer the generation it implies.
        prefer = Generation.B if "chunking" in caps else Generation.A
        found.sort(key=lambda f: f[1].generation != prefer)
        self._kernel_def = found[0] if found else None
        caps = {f"decode_kernel_{g.lower()}" for g in have}
        backend = self._parsed(BACKEND_FILE)
        classes = ("SpyreAttentionMetadataBuilder", "SpyreAttentionImpl")
        if backend is not None and all(c in backend.bindings for c in classes):
            caps.add("forward")
            if not have:
                for gen in "ab":
                    self._missing[f"decode_kernel_{gen}"] += (
                        "; its kernels follow their own convention and run through its "
                        "SpyreAttentionImpl.forward() (harness.measure.forward)")
        else:
            self._missing["forward"] = f"{BACKEND_FILE} defines no {' and '.join(classes)}"
        return caps

    # -- loads ------------------------------------------------------------------------------

    @contextmanager
    def _session(self, env: dict[str, str], handler: CaptureHandler) -> Iterator:
        """An isolated window; yields ``load()`` returning the bucketer module."""
        if self.mode == "stack":
            with isolated(env) as caught:
                attached = []

                def load():
                    module = importlib.import_module(BUCKETER_MODULE)
                    log = getattr(module, "logger", None)
                    if isinstance(log, logging.Logger) and not attached:
                        log.addHandler(handler)
                        attached.append(log)
                    return module
                try:
                    load.caught = caught
                    yield load
                finally:
                    for log in attached:
                        log.removeHandler(handler)
                    _clear_env_cache()
            return
        # The backend module is the commit's own (generation-1 bucketers import names from it);
        # the kernels it compiles at import are never called here, so nothing is compiled.
        import torch  # noqa: F401  (imported outside the window: it must stay imported)

        from harness.subjects.spyre.drive.session import intercepted_compile

        with isolated(env, self.tree, vllm_standins(handler)) as caught, \
                intercepted_compile([]):
            def load():
                return importlib.import_module(BUCKETER_MODULE)
            load.caught = caught
            yield load

    def unknown_knobs(self, overrides: Overrides) -> list[str]:
        """Knobs given that this commit's code never reads (named nowhere in its
        ``spyre_inference/**.py``): setting them would measure the default path under a label
        that says otherwise."""
        sources = self.tree.files.values()
        return [k for k in overrides.knobs
                if not any(f'"{k}"'.encode() in src or f"'{k}'".encode() in src
                           for src in sources)]

    def bucketing(self, config: EngineConfig, overrides: Overrides) -> Bucketing:
        reason = self.lacks("bucketer")
        if reason:
            raise CapabilityMissing(reason)
        unknown = self.unknown_knobs(overrides)
        if unknown:
            raise CapabilityMissing(f"{self.origin} does not know {', '.join(unknown)} (no "
                                    f"file of its spyre_inference package reads it)")
        key = _bucketing_key(config, overrides)
        if key not in self._memo:
            self._memo[key] = self._stored_bucketing(config, overrides)
        if self._memo[key] is None:
            try:
                with bounded(f"{self.origin}: bucketing {config.label()} "
                             f"env={overrides.label()}"):
                    self._memo[key] = self._compute(config, overrides)
            except SubjectTimeout:
                raise
            except HarnessError as exc:
                self._memo[key] = exc
            else:
                FIGURES.put(self.source(), bucketing_key(config, overrides), self._memo[key])
                FIGURES.flush()
        found = self._memo[key]
        if isinstance(found, HarnessError):
            raise found
        return found

    def _stored_bucketing(self, config: EngineConfig, overrides: Overrides) -> Bucketing | None:
        """The bucketing computed before through identical attention sources (the figure memo),
        its chunk table named as this commit's."""
        found = FIGURES.get(self.source(), bucketing_key(config, overrides))
        if found is not None and found.chunking is not None:
            found = dataclasses.replace(found, chunking=ChunkTable(found.chunking.table,
                                                                   self.spec))
        return found

    def known_bucketing(self, config: EngineConfig, overrides: Overrides) -> Bucketing | None:
        """The bucketing of ``config`` if this process has computed it (errors stay here: a
        worker hands back only what it could compute)."""
        found = self._memo.get(_bucketing_key(config, overrides))
        return found if isinstance(found, Bucketing) else None

    def keep_bucketing(self, config: EngineConfig, overrides: Overrides,
                       bucketing: Bucketing) -> None:
        """Take a bucketing computed by a worker process (:mod:`harness.subjects.spyre.prefetch`)."""
        key = _bucketing_key(config, overrides)
        if not isinstance(self._memo.get(key), Bucketing):
            self._memo[key] = bucketing
            FIGURES.put(self.source(), bucketing_key(config, overrides), bucketing)

    def _compute(self, config: EngineConfig, overrides: Overrides) -> Bucketing:
        handler = CaptureHandler()
        with self._session(overrides.as_env(), handler) as load:
            try:
                module = load()
                _clear_env_cache()
                window = ({"sliding_window": config.sliding_window}
                          if config.sliding_window and "sliding_window" in self.capabilities
                          else {})
                bucketer = getattr(module, BUCKETER_CLASS)(bucketer_config(config), **window)
                # The builder's own load (a nested window) says which batched ladders it uses.
                batched = self.builder_ladders(config, overrides)
                return self._read(module, bucketer, config, overrides, handler, load.caught,
                                  batched)
            except HarnessError:
                raise
            except Exception as exc:
                raise SubjectRejected(
                    f"{self.origin}: {BUCKETER_CLASS} rejected {config.label()} "
                    f"mns={config.max_num_seqs} mnbt={config.max_num_batched_tokens} "
                    f"env={overrides.label()}: {type(exc).__name__}: {exc}"
                    f"{where(exc, self.tree)}") from None

    def prefetch_workloads(self, requests: list) -> int:
        """Drive the builder for every request at once, over worker processes
        (:mod:`harness.subjects.spyre.prefetch`); a subject without a bucketer has nothing to drive."""
        if self.lacks("bucketer"):
            return 0
        from harness.subjects.spyre.prefetch import prefetch
        return prefetch(self, self.source(), requests)

    def workload_costs(self, config: EngineConfig, overrides: Overrides, workloads) -> list:
        """Every step of every workload through this commit's own ``build()`` and one layer of
        its ``forward()`` (kernels recorded, not run): see :mod:`harness.subjects.spyre.drive.session`.

        A step already driven through identical attention sources, config and env (in this
        process or, through the store, any earlier one) is not driven again
        (:mod:`harness.subjects.memo.figures`); the builder is loaded only when some step is new."""
        from harness.model.cost import WorkloadCost, warmup_keys

        bucketing = self.bucketing(config, overrides)
        warmup = warmup_keys(bucketing)
        out = []
        with bounded(f"{self.origin}: driving its builder at {config.label()} "
                     f"env={overrides.label()}"), _LazySession(self, config, overrides) as drive:
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

    def builder_ladders(self, config: EngineConfig, overrides: Overrides):
        """The batched ladders the subject's metadata builder dispatches on, read from the
        constructed builder (its own before #810, its bucketer's after): (seqs, blocks, owner)."""
        from harness.subjects.spyre.drive.session import BuilderSession

        key, source = ladders_key(config, overrides), self.source()
        found = FIGURES.get(source, key)
        if found is None:
            with BuilderSession(self.tree, self.origin, config, overrides) as session:
                found = session.batched_ladders()
            FIGURES.put(source, key, found)
            FIGURES.flush()
        return found

    def _read(self, module, b, config: EngineConfig, overrides: Overrides,
              handler: CaptureHandler, caught: list, batched) -> Bucketing:
        """Everything the model needs, read while the window is open (properties and methods
        may read env vars lazily)."""
        bs, caps = config.block_size, self.capabilities
        kv = _ladder(self._attr(b, "kv_buckets", "_kv_buckets"))
        query = _ladder(self._attr(b, "query_buckets", "_query_buckets"))
        blocks = self._attr(b, "num_blocks_buckets", "_num_blocks_buckets", required=False)
        num_blocks = _ladder(blocks) if blocks is not None else blocks_ladder(kv, bs)
        variants = _distinct(_pair(r, BLOCKS_FIELDS, QUERY_FIELDS, self.spec) for r in b.variants())
        num_seqs = (_ladder(self._attr(b, "num_seqs_buckets", "_num_seqs_buckets"))
                     if "num_seqs_axis" in caps else None)
        batched_seqs, batched_blocks, _owner = batched
        recorded: tuple = ()
        if "batched_decode_variants" in caps:
            recorded = _distinct(_pair(r, SEQS_FIELDS, BLOCKS_FIELDS, self.spec)
                                 for r in b.batched_decode_variants())
        chunking = None
        rule = (getattr(module, "batched_decode_chunking", None)
                or getattr(b, "batched_decode_chunking", None))
        if "chunking" in caps and rule is not None:   # else the builder's own: read per step
            chunking = ChunkTable({(ns, nb): tuple(int(x) for x in rule(ns, nb))
                                   for ns in batched_seqs for nb in batched_blocks}, self.spec)
        notes = tuple(handler.messages) + tuple(str(w.message) for w in caught)
        return Bucketing(
            kv=kv, query=query, num_blocks=num_blocks, num_seqs=num_seqs,
            batched_num_seqs=batched_seqs, batched_num_blocks=batched_blocks,
            variants=variants, batched_variants=recorded,
            batched_enabled=overrides.batched_decode, chunking=chunking,
            decode_prefix_batched="decode_prefix" in caps,
            min_batched_seqs=self._min_batched, notes=notes)

    def _attr(self, b, *names: str, required: bool = True):
        for name in names:
            try:
                return getattr(b, name)
            except AttributeError:
                continue
        if required:
            raise HarnessError(f"{self.origin}: {BUCKETER_CLASS} has none of {', '.join(names)}")
        return None

    # -- the kernel -------------------------------------------------------------------------

    def decode_kernel(self):
        """``(function, Generation)``, undecorated (the caller compiles it), or None.

        Generation A is compiled from its own source in ``backends/spyre_attn.py`` with only the
        top-level helpers, constants and torch/stdlib imports it uses, so none of that module's
        vLLM imports run; ``ops/batched_decode.py`` (torch only) is loaded by path.
        """
        if self._kernel_def is None:
            return None
        if self._kernel is None:
            import torch  # noqa: F401  (imported outside the window: it must stay imported)

            rel, kdef = self._kernel_def
            try:
                fn = self._load_kernel(rel, kdef)
            except Exception as exc:
                raise SubjectError(f"{self.origin}: cannot load the generation-{kdef.generation}"
                                   f" kernel {kdef.name} from {rel}: {type(exc).__name__}: {exc}"
                                   f"{where(exc, self.tree)}") from None
            while hasattr(fn, "__wrapped__") or hasattr(fn, "_torchdynamo_orig_callable"):
                fn = getattr(fn, "_torchdynamo_orig_callable", None) or fn.__wrapped__
            self._kernel = (fn, kdef.generation)
        return self._kernel

    def _load_kernel(self, rel: str, kdef: KernelDef):
        if rel == OPS_KERNEL_FILE:
            with isolated({}, self.tree, vllm_standins(CaptureHandler())):
                return getattr(importlib.import_module(OPS_KERNEL_MODULE), kdef.name)
        code = self.tree.parsed(rel).compile([kdef.name], KERNEL_IMPORTS)
        namespace = {"__name__": BACKEND_MODULE, "__builtins__": builtins}
        exec(code, namespace)
        return namespace[kdef.name]

    def compile_settings(self) -> dict:
        """What the commit's ``spyre_inference/platform.py`` sets in ``torch._dynamo.config`` at
        import (it raises the recompile limits), read by importing it once and restoring the
        config; {} when the commit has no platform module."""
        if self._compile_settings is None:
            self._compile_settings = self._load_compile_settings()
        return dict(self._compile_settings)

    def _load_compile_settings(self) -> dict:
        import torch._dynamo

        if not self.tree.has(PLATFORM_FILE):
            return {}
        config = torch._dynamo.config
        before = config.get_config_copy()
        # a platform module may patch torch process-wide at import (spyre-inference's turns
        # torch.accelerator's empty_cache/synchronize into no-ops): put back what it replaced
        accelerator = dict(vars(torch.accelerator))
        try:
            with bounded(f"{self.origin}: loading {PLATFORM_FILE}"), \
                    isolated({}, self.tree, vllm_standins(CaptureHandler())):
                importlib.import_module(PLATFORM_MODULE)
            after = config.get_config_copy()
        except HarnessError:
            raise
        except Exception as exc:
            raise SubjectError(f"{self.origin}: {PLATFORM_FILE} (whose Dynamo settings the "
                               f"graph counts follow) cannot be loaded: {type(exc).__name__}: "
                               f"{exc}{where(exc, self.tree)}") from None
        finally:
            for key, value in before.items():
                if config.get_config_copy().get(key) != value:
                    setattr(config, key, value)
            for name, value in accelerator.items():
                if getattr(torch.accelerator, name, None) is not value:
                    setattr(torch.accelerator, name, value)
        return {k: v for k, v in after.items() if before.get(k) != v}

    def override_rule(self) -> str | None:
        """"top-up" or "clamp": whether an override entry above the limit is kept, found by
        asking the bucketer (kv override of twice max_model_len at the default config)."""
        if "bucketer" not in self.capabilities:
            return None
        config = EngineConfig()
        env = {"SPYRE_ATTN_KV_BUCKETS": str(2 * config.max_model_len)}
        with bounded(f"{self.origin}: probing the override rule"), \
                self._session(env, CaptureHandler()) as load:
            try:
                module = load()
                _clear_env_cache()
                kv = _ladder(self._attr(getattr(module, BUCKETER_CLASS)(bucketer_config(config)),
                                        "kv_buckets", "_kv_buckets"))
            except HarnessError:
                raise
            except Exception as exc:
                raise SubjectRejected(f"{self.origin}: probing the override rule: "
                                      f"{type(exc).__name__}: {exc}") from None
        return "top-up" if kv[-1] > config.max_model_len else "clamp"

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


# -- helpers ----------------------------------------------------------------------------------

def _clear_env_cache() -> None:
    envs = sys.modules.get(ENVS_MODULE)
    clear = getattr(envs, "clear_env_cache", None) if envs is not None else None
    if callable(clear):
        clear()


def _ladder(values) -> Ladder:
    return tuple(int(v) for v in values)


def _distinct(pairs) -> tuple[tuple[int, int], ...]:
    """Distinct pairs in first-seen order (generation-1 records repeat a pair per flag value)."""
    return tuple(dict.fromkeys(pairs))


def _pair(record, first: tuple[str, ...], second: tuple[str, ...], spec: str) -> tuple[int, int]:
    a = next((getattr(record, n) for n in first if hasattr(record, n)), None)
    b = next((getattr(record, n) for n in second if hasattr(record, n)), None)
    if a is None or b is None:
        try:
            a, b = record[0], record[1]
        except (TypeError, IndexError, KeyError):
            raise HarnessError(f"{spec}: cannot read ({first[0]}, {second[0]}) from the record "
                               f"{record!r}") from None
    return int(a), int(b)


# -- resolving specs ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Located:
    """A spyre-inference version found and read (sources snapshotted), none of its code run:
    :meth:`load` runs it, here or in a worker process (:mod:`harness.worker`)."""

    spec: str
    tree: SourceTree
    identity: str
    where: str
    installed: bool = False

    def load(self) -> SpyreInferenceSubject:
        if not self.installed:
            return SpyreInferenceSubject(self.spec, self.tree, self.identity, self.where)
        stack_error = _import_stack(self.tree)
        subject = SpyreInferenceSubject(self.spec, self.tree, self.identity, self.where,
                                        stack=stack_error is None)
        subject.stack_error = stack_error
        return subject


def locate_git(spec: str, rest: str) -> Located:
    """``git:<repo>@<rev>``: any revision expression; identity is the full commit hash."""
    repo, rev = gitrev.split_spec(spec, rest)
    commit = gitrev.resolve(spec, repo, rev)
    files = gitrev.read_subtree(spec, repo, commit, PACKAGE)
    where_ = f"commit {commit[:12]}"
    if files is None:
        raise SubjectError(f"{spec} ({where_}): not a spyre-inference revision: it has no "
                           f"{PACKAGE}/ package")
    return Located(spec, SourceTree(files, f"{repo.resolve()}@{commit[:12]}"), commit, where_)


def locate_checkout(spec: str, rest: str) -> Located:
    """``path:<checkout>``: identity is HEAD, marked dirty (with a digest) if the package is."""
    root = Path(rest).expanduser()
    if not root.is_dir():
        raise SubjectError(f"{spec}: no such directory {rest!r}")
    if not (root / PACKAGE).is_dir():
        raise SubjectError(f"{spec}: not a spyre-inference checkout: {root / PACKAGE} does not "
                           "exist")
    root = root.resolve()
    tree = SourceTree.from_dir(root)
    commit, dirty = gitrev.worktree_commit(root, PACKAGE)
    return Located(spec, tree, _identity(tree, commit, dirty),
                   f"checkout {root}" + (f" at {commit[:12]}" if commit else ""))


def locate_installed(spec: str = "spyre-inference") -> Located:
    """The installed package: imported whole when vLLM imports, else loaded by path from it."""
    try:
        found = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise SubjectError(f"{spec}: the {PACKAGE} package is not installed for {sys.executable};"
                           " name a checkout (path:<dir>) or a revision (git:<repo>@<rev>)")
    root = Path(next(iter(found.submodule_search_locations))).parent
    tree = SourceTree.from_dir(root)
    commit, dirty = _installed_commit(root)
    return Located(spec, tree, _identity(tree, commit, dirty), f"installed at {root}",
                   installed=True)


def git_subject(spec: str, rest: str) -> SpyreInferenceSubject:
    return locate_git(spec, rest).load()


def checkout_subject(spec: str, rest: str) -> SpyreInferenceSubject:
    return locate_checkout(spec, rest).load()


def installed_subject(spec: str = "spyre-inference") -> SpyreInferenceSubject:
    return locate_installed(spec).load()


def _import_stack(tree: SourceTree) -> str | None:
    """Import the installed package with its full stack; None on success, else why not (and
    every module of the failed attempt is gone again)."""
    saved = dict(sys.modules)
    try:
        importlib.import_module(PACKAGE)
        if tree.has(BUCKETER_FILE):
            importlib.import_module(BUCKETER_MODULE)
        return None
    except Exception as exc:
        restore_modules(saved)
        return f"{type(exc).__name__}: {exc}"


def _installed_commit(root: Path) -> tuple[str | None, bool]:
    try:
        text = importlib.metadata.distribution("spyre-inference").read_text("direct_url.json")
        commit = json.loads(text or "{}").get("vcs_info", {}).get("commit_id")
        if commit:
            return commit, False
    except (importlib.metadata.PackageNotFoundError, ValueError, AttributeError):
        pass
    return gitrev.worktree_commit(root, PACKAGE)


def _identity(tree: SourceTree, commit: str | None, dirty: bool) -> str:
    if commit and not dirty:
        return commit
    digest = tree.digest()
    return f"{commit}+dirty.{digest[:12]}" if commit else f"sha256:{digest[:16]}"


def _bucketing_key(config: EngineConfig, overrides: Overrides) -> tuple:
    """What decides a bucketing: the fields the bucketer reads, and the env."""
    return (config.block_size, config.max_model_len, config.max_num_seqs,
            config.max_num_batched_tokens, config.sliding_window, overrides.raw)


class _LazySession:
    """``drive(step)`` -> that step's StepCost, from the memo or through a BuilderSession opened
    on first need (and closed with this context)."""

    def __init__(self, subject: SpyreInferenceSubject, config: EngineConfig,
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

    def setup(self) -> dict[str, int]:
        """The engine's one-time transfers for this config, by tensor (bytes), with their count
        under ``"transfers"``: the same for every workload, whatever step came first."""
        key = setup_key(self.config, self.overrides)
        found = FIGURES.get(self.digest, key)
        if found is None:
            session = self._open()
            if session.setup is None:
                session.setup = session.warm_up()
            found = {"transfers": len(session.setup), "by_tensor": {}}
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
