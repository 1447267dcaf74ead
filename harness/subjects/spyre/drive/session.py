"""Drive a spyre-inference commit's own metadata builder and attention impl, on CPU torch.

The backend module (``v1/attention/backends/spyre_attn.py``) is loaded from the snapshot with what
it imports from ``spyre_inference`` and stand-ins for vLLM only (:mod:`vllm_standins`). Per config
its ``SpyreAttentionMetadataBuilder`` and ``SpyreAttentionImpl`` are constructed; per step the
builder's ``build()`` gets metadata made from the step (scattered page ids) and the impl's
``forward()`` runs one layer. Two things are observed, never modelled:

* every host-to-device copy, by wrapping the subject's ``custom_ops.utils.convert`` (tensor,
  shape, dtype, bytes), named after the metadata field that holds the tensor;
* every kernel call, because ``torch.compile`` is intercepted while the module loads: each kernel
  the subject compiles becomes a :class:`KernelProxy` that records its bound arguments and either
  returns a placeholder (exact figures: nothing is computed) or runs the kernel (measurement).

From those come the path, B_s / B_b / blocks_per_chunk / num_chunks, loop iterations, padded
slots and compile keys of a step. What cannot be driven (a vLLM name no stand-in covers, a
constructor argument the harness does not know, a kernel whose loop count it cannot read) raises
:class:`NotDrivable` with exactly that; callers turn it into a skip, never into the model's answer.

The session holds the load and the engine's objects; its collaborators each do one part: which
backend runs and how each path's kernel calls read (:mod:`.paths`), the kernels
(:mod:`.kernel_proxy`), the copies (:mod:`.transfers`), the config and constructors
(:mod:`.engine_config`), a step's inputs (:mod:`.steps`), the K/V cache (:mod:`.kv_cache`);
live forwards for measurement are :mod:`.live`.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections import Counter

from harness.config import EngineConfig, Overrides
from harness.errors import SubjectRaised
from harness.subjects.load.loader import (
    CaptureHandler,
    SourceTree,
    isolated,
    load_failure,
    module_path,
    vllm_standins,
    where,
)
from harness.subjects.load.vllm_standins import Attention
from harness.subjects.spyre.drive.batching import Batching, probe
from harness.subjects.spyre.drive.commit_env import CommitEnv
from harness.subjects.spyre.drive.engine_config import (
    construct,
    engine_vllm_config,
    kv_cache_torch_dtype,
)
from harness.subjects.spyre.drive.errors import NotDrivable
from harness.subjects.spyre.drive.kernel_proxy import KernelProxy, intercepted_compile
from harness.subjects.spyre.drive.kv_cache import KvCache, pages_dtype
from harness.subjects.spyre.drive.paths import LAYOUT_KNOB, backend_for, batched, read_step
from harness.subjects.spyre.drive.steps import (
    common_metadata,
    setup_step,
    step_pages,
    step_seed,
    step_text,
)
from harness.subjects.spyre.drive.transfers import Transfer, TransferLog, wrap_convert

BUILDER_CLASS = "SpyreAttentionMetadataBuilder"
IMPL_CLASS = "SpyreAttentionImpl"
#: The one attention layer a session drives (its name in the engine's forward context).
LAYER_NAME = "model.layers.0.self_attn.attn"
#: The commit's own compile guard (newer commits), with the names spyre-bench arms it by.
GUARD_MODULE = "spyre_inference.v1.worker.compile_guard"
GUARD_NAMES = ("arm", "disarm", "CompileGuardLevel", "UnexpectedCompileError")


def _accessor(backend, name: str):
    """What a backend's static accessor (get_builder_cls, get_impl_cls) returns, or None."""
    get = getattr(backend, name, None)
    try:
        found = get() if callable(get) else None
    except Exception:
        return None
    return found if isinstance(found, type) else None


class BuilderSession:
    """One open load of a subject's backend for one (config, overrides); use as a context manager.

    Everything of the load (modules, env) is undone on exit, like every other window.
    """

    def __init__(self, tree: SourceTree, origin: str, config: EngineConfig, overrides: Overrides):
        self.tree, self.origin, self.config, self.overrides = tree, origin, config, overrides
        self.handler = CaptureHandler()
        self.proxies: list[KernelProxy] = []
        self.transfers: TransferLog | None = None
        self.cache: KvCache | None = None
        self.layer = None
        #: The commit's own values of its path-choosing knobs (read when the load opens).
        self.env: CommitEnv | None = None
        self._batching: Batching | None = None
        #: The engine's one-time transfers (staging, set-up), found by :meth:`warm_up`.
        self.setup: list[Transfer] | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> BuilderSession:
        try:
            self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc):
        self.release()
        self._stack.close()

    def _open(self) -> None:
        import torch

        standins = vllm_standins(self.handler)
        caught = self._stack.enter_context(isolated(self.overrides.as_env(), self.tree,
                                                    standins))
        # the path is the commit's own choice: its env's value for each knob, its default where
        # none is given (a default run never mixes the harness's defaults with the commit's)
        self.env = CommitEnv.read()
        dotted, backend_name = backend_for(self.env.layout)
        rel = module_path(dotted)
        if not self.tree.has(rel):
            given = self.overrides.knobs.get(LAYOUT_KNOB)
            raise NotDrivable(f"{self.origin}: no {rel}" + (
                f" (the backend {LAYOUT_KNOB}={self.env.layout} selects"
                + ("" if given else ", the commit's default") + ")" if self.env.layout else ""))
        with intercepted_compile(self.proxies):
            try:
                module = importlib.import_module(dotted)
            except Exception as exc:
                raise NotDrivable(f"{self.origin}: {rel} {load_failure(exc, self.tree)}"
                                  ) from None
        self.module = module
        self.backend = getattr(module, backend_name, None)
        self.builder_cls = _accessor(self.backend, "get_builder_cls") or getattr(
            module, BUILDER_CLASS, None)
        self.impl_cls = _accessor(self.backend, "get_impl_cls") or getattr(module, IMPL_CLASS,
                                                                           None)
        missing = [n for n, c in ((BUILDER_CLASS, self.builder_cls), (IMPL_CLASS, self.impl_cls))
                   if not isinstance(c, type)]
        if missing:
            raise NotDrivable(f"{self.origin}: {rel} has no {' or '.join(missing)}")
        self.transfers = wrap_convert(self.origin, self.tree)
        vllm_config_mod = sys.modules["vllm.config"]
        c = self.config
        # the engine's config and layer are the harness's own (it plays the engine): vLLM's
        # VllmConfig needs a model to be built; the compilation mode is the loaded vLLM's
        self.vllm_config = engine_vllm_config(c)
        self._stack.enter_context(vllm_config_mod.set_current_vllm_config(self.vllm_config))
        # what the engine hands a decoder layer's builder: a full-attention spec, windowed
        # when the model is, of the K/V cache's dtype
        spec = sys.modules["vllm.v1.kv_cache_interface"].FullAttentionSpec(
            block_size=c.block_size, num_kv_heads=c.num_kv_heads, head_size=c.head_size,
            dtype=kv_cache_torch_dtype(c), sliding_window=c.sliding_window)
        self.device = torch.device("cpu")
        try:
            # As the engine orders it: the model's layers (each with its impl) exist, and sit
            # in the compilation config's forward context, before the builder is made; their
            # K/V caches are bound later (kv_cache()), before the first step.
            self.impl = construct(self.impl_cls, {
                "num_heads": c.num_heads, "head_size": c.head_size,
                "scale": c.head_size ** -0.5, "num_kv_heads": c.num_kv_heads,
                "alibi_slopes": None, "sliding_window": c.sliding_window,
                "kv_cache_dtype": c.kv_cache_dtype,
                "logits_soft_cap": None}, IMPL_CLASS)
            self.layer = Attention(c.num_heads, c.head_size, c.head_size ** -0.5,
                                   c.num_kv_heads, prefix=LAYER_NAME, impl=self.impl)
            self.vllm_config.compilation_config.static_forward_context[LAYER_NAME] = self.layer
            self.builder = construct(self.builder_cls, {
                "kv_cache_spec": spec, "layer_names": [LAYER_NAME],
                "vllm_config": self.vllm_config, "device": self.device}, BUILDER_CLASS)
        except NotDrivable as exc:
            raise NotDrivable(f"{self.origin}: {exc}") from None
        except Exception as exc:
            raise NotDrivable(f"{self.origin}: constructing {BUILDER_CLASS}/{IMPL_CLASS} for "
                              f"{c.label()} failed: {type(exc).__name__}: {exc}"
                              f"{where(exc, self.tree)}") from None
        self.cache = KvCache(c, self.backend, self.layer, self.origin,
                             pages_dtype(self.impl_cls, spec, self.origin, self.tree))
        #: What the commit's code warned while its backend loaded and its builder (with the
        #: bucketer it makes) was built, once each: its log, and Python warnings its own files
        #: raised (not torch's, met along the way).
        own = {self.tree.filename(rel) for rel in self.tree.files}
        self.notes = tuple(dict.fromkeys([*self.handler.messages,
                                          *(str(w.message) for w in caught
                                            if w.filename in own)]))

    # -- what the builder owns -----------------------------------------------------------------

    def batched_ladders(self) -> tuple[tuple[int, ...], tuple[int, ...], str]:
        """(num_seqs, num_blocks, owner): the builder's own ladders when it keeps them,
        else those of the bucketer it holds."""
        b = self.builder
        own = (getattr(b, "_num_seqs_buckets", None), getattr(b, "_num_blocks_buckets", None))
        if all(isinstance(x, (list, tuple)) for x in own):
            return tuple(map(int, own[0])), tuple(map(int, own[1])), "builder"
        bucketer = getattr(b, "_attn_bucketer", None) or getattr(b, "attn_bucketer", None)
        ladders = (getattr(bucketer, "num_seqs_buckets", None),
                   getattr(bucketer, "num_blocks_buckets", None))
        if bucketer is None or not all(isinstance(x, (list, tuple)) for x in ladders):
            raise NotDrivable(f"{self.origin}: {BUILDER_CLASS} keeps neither its own batched "
                              "ladders (_num_seqs_buckets, _num_blocks_buckets) nor a bucketer "
                              "with num_seqs_buckets / num_blocks_buckets")
        return tuple(map(int, ladders[0])), tuple(map(int, ladders[1])), "bucketer"

    @property
    def compile_guard(self):
        """The commit's compile guard module where its backend loaded one (and so registered its
        kernels with it), else None."""
        guard = sys.modules.get(GUARD_MODULE)
        if guard is None or not all(hasattr(guard, n) for n in GUARD_NAMES):
            return None
        return guard

    @property
    def batched_on(self) -> bool:
        """The commit's own batched-decode switch (the override, where its envs.py has none)."""
        on = self.env.batched_decode if self.env is not None else None
        return self.overrides.batched_decode if on is None else on

    @property
    def batching(self) -> Batching:
        """When the commit batches decodes at this config (:mod:`.batching`), found once."""
        if self._batching is None:
            constant = getattr(self.module, "_MIN_BATCHED_SEQS", None)
            self._batching = probe(self, self.batched_on, constant if isinstance(constant, int)
                                   and not isinstance(constant, bool) else None)
        return self._batching

    def recorded_warmup(self) -> tuple | None:
        """The compile keys the commit's own warmup compiles (its impl's ``record_graphs``, its
        kernels recorded, nothing compiled) where its bucketer's variants do not describe the
        path (jagged attention records its plan variants); None elsewhere."""
        record = getattr(self.impl, "record_graphs", None)
        if not self.env.jagged or not callable(record):
            return None
        if self.setup is None:
            self.setup = self.warm_up()
        self.transfers.copy = False
        for p in self.proxies:
            p.mode = "record"
            p.calls.clear()
        cache = self.kv_cache(None, 1, placeholder=True)
        try:
            record(self.layer, cache, self.builder)
        except NotDrivable:
            raise
        except Exception as exc:
            raise self.raised(f"{IMPL_CLASS}.record_graphs()", exc) from None
        calls = [c for p in self.proxies for c in p.calls]
        keys = read_step(calls, (), None, self.config.block_size, lambda s, m: "").keys
        self.release()
        return tuple(sorted(set(keys)))

    # -- one step ------------------------------------------------------------------------------

    def common_metadata(self, step, seed: int = 0):
        """vLLM's CommonAttentionMetadata for ``step`` (:func:`steps.common_metadata`)."""
        return common_metadata(self.config, step, seed)

    def build(self, step, seed: int = 0):
        """The step's metadata through the subject's ``build()``; the transfer log starts here,
        so copies ``build()`` makes (a slot mapping published to the device) are the step's."""
        cm = self.common_metadata(step, seed)
        self.transfers.clear()
        self.transfers.name_fields(cm)
        try:
            return self.builder.build(common_prefix_len=0, common_attn_metadata=cm), cm
        except Exception as exc:
            raise self.raised(f"{BUILDER_CLASS}.build() on {step_text(step)}", exc) from None

    def raised(self, what: str, exc: BaseException) -> SubjectRaised:
        """The subject's own code raised: "subject raised X at file:line" for this commit."""
        return SubjectRaised(f"{self.origin}: subject raised {type(exc).__name__} in {what}: "
                             f"{exc}{where(exc, self.tree)}")

    def forward(self, metadata, query, kv_cache, output, stage: bool = True):
        """One layer through the subject's impl; returns (kernel calls, transfers) of it, the
        transfers since the step's build() counted by kind (:meth:`TransferLog.counts`);
        ``stage`` as :meth:`call_impl`."""
        for p in self.proxies:
            p.calls.clear()
        self.transfers.name_fields(metadata, clear=False)
        try:
            self.call_impl(query, kv_cache, metadata, output, stage)
        except NotDrivable:
            raise
        except Exception as exc:
            raise self.raised(f"{IMPL_CLASS}.forward()", exc) from None
        calls = [c for p in self.proxies for c in p.calls]
        return calls, self.transfers.counts()

    def call_impl(self, query, kv_cache, metadata, output, stage: bool = True) -> None:
        """One layer of the impl's forward, called as the engine calls it: where the commit's
        ``attn_layer`` has taken the layer over (its ``install`` bound the layer's forward) and
        the impl has staging buffers, the query is staged into them and the output copied back,
        as that forward does, so the kernels see the buffers (and shapes) warmup traced them
        with; otherwise the step's own tensors. ``stage=False`` (a recorded forward, whose
        placeholders nothing reads) passes the buffers without copying the data: a long
        prefill's two copies were 17 % of a real commit's exact tier."""
        staging = getattr(self.impl, "staging_buffers", None)
        if not callable(staging) or "forward" not in vars(self.layer):
            self.impl.forward(self.layer, query, query, query, kv_cache, metadata, output)
            return
        q_in, out_buf = staging(query.device)
        rows = query.shape[0]
        if stage:
            q_in[:rows] = query
        self.impl.forward(self.layer, q_in, query, query, kv_cache, metadata, out_buf)
        if stage:
            output.copy_(out_buf[:rows])

    def release(self) -> None:
        """Drop what the last forward recorded (its kernel arguments are the step's tensors,
        hundreds of MiB for a long prefill): nothing keeps them until the next step."""
        for p in self.proxies:
            p.calls.clear()
        if self.transfers is not None:
            self.transfers.clear()
            self.transfers.forget()

    def kv_cache(self, device, pages: int, placeholder: bool = False):
        """The session's one K/V cache (:class:`KvCache`), bound to its layer on first use."""
        return self.cache.get(device, pages, placeholder)

    def reserve(self, device, steps) -> None:
        """Allocate the session's K/V cache for the largest of ``steps`` (live measurement)."""
        self.cache.reserve(device, steps)

    def placeholders(self, step, cache):
        """Zero-cost tensors for a recorded forward: nothing is computed from them."""
        import torch

        c = self.config
        dtype = getattr(torch, c.dtype)
        tokens = sum(s.query_len for s in step)
        query = torch.zeros((), dtype=dtype).expand(tokens, c.num_heads, c.head_size)
        return query, cache, torch.empty(tokens, c.num_heads, c.head_size, dtype=dtype)

    def record_step(self, step, seed: int | None = None):
        """Build and forward one step with recorded kernels: the exact figures of that step,
        each kernel call read by its path (:mod:`harness.subjects.spyre.drive.paths`).

        The page layout is seeded from the step itself (``seed`` None), so the same step always
        gets the same inputs and its figures can be reused (:mod:`harness.subjects.memo.figures`)."""
        if seed is None:
            seed = step_seed(step)
        from harness.model.cost import StepCost
        from harness.model.dispatch import Dispatch

        calls, transfers, metadata = self.drive(step, seed)
        read = read_step(calls, step, metadata, self.config.block_size,
                         lambda s, m: batched.declined(s, m, self.batched_on, self.batching))
        h2d = Counter()
        for t, n in transfers.items():
            h2d[t.name] += t.bytes * n
        return StepCost(
            dispatch=Dispatch(read.n_batched, read.reason, per_sequence=tuple(read.per_sequence),
                              jagged=read.jagged, **read.fields),
            iterations_per_layer=read.iterations, launches_per_layer=len(calls),
            real_kv_tokens=sum(s.seq_len for s in step), padded_kv_slots=read.padded,
            decode_tokens=sum(1 for s in step if s.is_decode), h2d=dict(h2d),
            transfers=sum(transfers.values()), keys=tuple(read.keys)), transfers

    def drive(self, step, seed: int = 0):
        """Build and forward ``step`` with recorded kernels, the engine's one-time set-up done
        first (:meth:`warm_up`): (kernel calls, transfers, metadata)."""
        if self.setup is None:
            self.setup = self.warm_up()
        return self._drive(step, seed)

    def _drive(self, step, seed: int):
        """Build and forward ``step`` with recorded kernels: (kernel calls, transfers, metadata)."""
        self.transfers.copy = False
        for p in self.proxies:
            p.mode = "record"
        cache = self.kv_cache(None, step_pages(step, self.config.block_size), placeholder=True)
        metadata, _ = self.build(step, seed)
        query, cache, output = self.placeholders(step, cache)
        calls, transfers = self.forward(metadata, query, cache, output, stage=False)
        self.release()
        return calls, transfers, metadata

    def warm_up(self) -> list[Transfer]:
        """The engine's one-time transfers: a set-up step (decodes and a short prefill, so both
        paths run) driven twice; what the first copies and the second does not repeat is
        staged once per engine (staging buffers and the like), and is no step's cost."""
        step = setup_step(self.config)
        first = self._drive(step, 0)[1]
        again = self._drive(step, 0)[1]
        return [t for t, n in first.items() for _ in range(n - again.get(t, 0))]
