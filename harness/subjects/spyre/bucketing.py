"""The commit's bucketer run for one config: the stand-in config it is constructed with, the
isolated window its module loads in (:func:`bucketer_window`), and everything the model needs read
from it (:class:`Bucketings`), kept per config in this process and in the figure memo."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from harness.config import EngineConfig, Overrides
from harness.errors import HarnessError
from harness.ladders import Ladder, blocks_ladder
from harness.subjects.base import Bucketing, ChunkTable
from harness.subjects.load.loader import (
    BUCKETER_MODULE,
    ENVS_MODULE,
    CaptureHandler,
    SourceTree,
    isolated,
    vllm_standins,
    where,
)
from harness.subjects.memo.figures import FIGURES, bucketing_key, ladders_key
from harness.subjects.spyre.drive.engine_config import engine_vllm_config
from harness.subjects.timeout import SubjectTimeout, bounded

BUCKETER_CLASS = "SpyreAttnBucketer"
#: Field names a variant record may use, tried in order (then position 0 and 1).
BLOCKS_FIELDS = ("num_blocks", "b_blocks", "blocks")
QUERY_FIELDS = ("query_len", "query_bucket", "padded_query_len", "query")
SEQS_FIELDS = ("num_seqs", "b_seqs", "seqs")


class SubjectRejected(HarnessError):
    """The subject's code raised for one config: that config's rows become skips."""


# -- the bucketer's module, loaded ------------------------------------------------------------

@contextmanager
def bucketer_window(tree: SourceTree, mode: str, env: dict[str, str],
                    handler: CaptureHandler) -> Iterator:
    """An isolated window (:func:`isolated`); yields ``load()`` returning the bucketer module.
    ``mode`` "stack": the installed package, imported normally; "path": the snapshot ``tree``."""
    if mode == "stack":
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
                clear_env_cache()
        return
    # The backend module is the commit's own (generation-1 bucketers import names from it);
    # the kernels it compiles at import are never called here, so nothing is compiled.
    import torch  # noqa: F401  (imported outside the window: it must stay imported)

    from harness.subjects.spyre.drive.kernel_proxy import intercepted_compile

    with isolated(env, tree, vllm_standins(handler)) as caught, \
            intercepted_compile([]):
        def load():
            return importlib.import_module(BUCKETER_MODULE)
        load.caught = caught
        yield load


def clear_env_cache() -> None:
    """Empty the commit's env cache (``envs.clear_env_cache``) where it has one."""
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


def _bucketing_key(config: EngineConfig, overrides: Overrides) -> tuple:
    """What decides a bucketing: the whole engine config (today's bucketers read the model's
    heads per layer and the speculative config too), and the env."""
    return (config, overrides.raw)


def builder_ladders(tree: SourceTree, origin: str, source: str, config: EngineConfig,
                    overrides: Overrides):
    """The batched ladders the subject's metadata builder dispatches on, read from the
    constructed builder (its own before #810, its bucketer's after), and when the commit batches
    (:mod:`harness.subjects.spyre.drive.batching`, found by driving it): (seqs, blocks, owner,
    Batching.as_tuple())."""
    from harness.subjects.spyre.drive.session import BuilderSession

    key = ladders_key(config, overrides)
    found = FIGURES.get(source, key)
    if found is None:
        with BuilderSession(tree, origin, config, overrides) as session:
            found = (*session.batched_ladders(), session.batching.as_tuple())
        FIGURES.put(source, key, found)
        FIGURES.flush()
    return found


# -- one commit's bucketings ------------------------------------------------------------------

class Bucketings:
    """A subject's bucketings by (config, overrides), each computed once in a window of its own
    (its builder's batched ladders read in a nested one) and kept in the figure memo."""

    def __init__(self, subject):
        #: the SpyreInferenceSubject whose bucketer this runs (its tree, mode, capabilities)
        self.subject = subject
        self._memo: dict[tuple, Bucketing | HarnessError] = {}
        #: the bucketer's own ladders of configs whose builder could not be driven
        self._bucketer_only: dict[tuple, Bucketing] = {}

    def get(self, config: EngineConfig, overrides: Overrides) -> Bucketing:
        """The bucketing of ``config`` under ``overrides``: kept, stored or computed now (an
        error the subject's code raised is kept too, and raised again)."""
        key = _bucketing_key(config, overrides)
        if key not in self._memo:
            self._memo[key] = self._stored(config, overrides)
        if self._memo[key] is None:
            try:
                with bounded(f"{self.subject.origin}: bucketing {config.label()} "
                             f"env={overrides.label()}"):
                    self._memo[key] = self._compute(config, overrides)
            except SubjectTimeout:
                raise
            except HarnessError as exc:
                self._memo[key] = exc
            else:
                FIGURES.put(self.subject.source(), bucketing_key(config, overrides),
                            self._memo[key])
                FIGURES.flush()
        found = self._memo[key]
        if isinstance(found, HarnessError):
            raise found
        return found

    def bucketer_only(self, config: EngineConfig, overrides: Overrides) -> Bucketing:
        """:meth:`get`'s bucketing, or where only the builder failed (the commit's default path
        cannot be driven), the bucketer's own ladders with no batched ones: they need only the
        bucketer. A bucketer that failed raises as in :meth:`get`."""
        try:
            return self.get(config, overrides)
        except HarnessError:
            found = self._bucketer_only.get(_bucketing_key(config, overrides))
            if found is None:
                raise
            return found

    def _stored(self, config: EngineConfig, overrides: Overrides) -> Bucketing | None:
        """The bucketing computed before through identical attention sources (the figure memo),
        its chunk table named as this commit's."""
        found = FIGURES.get(self.subject.source(), bucketing_key(config, overrides))
        if found is not None and found.chunking is not None:
            found = dataclasses.replace(found, chunking=ChunkTable(found.chunking.table,
                                                                   self.subject.spec))
        return found

    def known(self, config: EngineConfig, overrides: Overrides) -> Bucketing | None:
        """The bucketing of ``config`` if this process has computed it (errors stay here: a
        worker hands back only what it could compute)."""
        found = self._memo.get(_bucketing_key(config, overrides))
        return found if isinstance(found, Bucketing) else None

    def keep(self, config: EngineConfig, overrides: Overrides, bucketing: Bucketing) -> None:
        """Take a bucketing computed by a worker process (:mod:`harness.subjects.spyre.prefetch`)."""
        key = _bucketing_key(config, overrides)
        if not isinstance(self._memo.get(key), Bucketing):
            self._memo[key] = bucketing
            FIGURES.put(self.subject.source(), bucketing_key(config, overrides), bucketing)

    def _compute(self, config: EngineConfig, overrides: Overrides) -> Bucketing:
        subject, handler = self.subject, CaptureHandler()
        with bucketer_window(subject.tree, subject.mode, overrides.as_env(), handler) as load:
            try:
                module = load()
                clear_env_cache()
                window = ({"sliding_window": config.sliding_window}
                          if config.sliding_window and "sliding_window" in subject.capabilities
                          else {})
                bucketer = getattr(module, BUCKETER_CLASS)(engine_vllm_config(config), **window)
                # The builder's own load (a nested window) says which batched ladders it uses.
                try:
                    batched = subject.builder_ladders(config, overrides)
                except HarnessError as exc:
                    self._keep_bucketer_only(module, bucketer, config, overrides, handler,
                                             load.caught, str(exc))
                    raise
                return self._read(module, bucketer, config, overrides, handler, load.caught,
                                  batched)
            except HarnessError:
                raise
            except Exception as exc:
                raise SubjectRejected(
                    f"{subject.origin}: {BUCKETER_CLASS} rejected {config.label()} "
                    f"mns={config.max_num_seqs} mnbt={config.max_num_batched_tokens} "
                    f"env={overrides.label()}: {type(exc).__name__}: {exc}"
                    f"{where(exc, subject.tree)}") from None

    def _keep_bucketer_only(self, module, b, config: EngineConfig, overrides: Overrides,
                            handler: CaptureHandler, caught: list, failure: str) -> None:
        """Keep the bucketer's own ladders of a config whose builder failed (``failure``: how);
        where even they cannot be read, the builder's failure is the config's only answer."""
        try:
            found = self._read(module, b, config, overrides, handler, caught, None)
        except Exception:   # the subject's code, read again: the builder's failure stands
            return
        self._bucketer_only[_bucketing_key(config, overrides)] = dataclasses.replace(
            found, builder_failed=failure)

    def _read(self, module, b, config: EngineConfig, overrides: Overrides,
              handler: CaptureHandler, caught: list, batched) -> Bucketing:
        """Everything the model needs, read while the window is open (properties and methods
        may read env vars lazily); ``batched`` None: the builder's could not be read, so the
        bucketer's own ladders alone (:meth:`bucketer_only`)."""
        bs, caps, spec = config.block_size, self.subject.capabilities, self.subject.spec
        kv = _ladder(self._attr(b, "kv_buckets", "_kv_buckets"))
        query = _ladder(self._attr(b, "query_buckets", "_query_buckets"))
        blocks = self._attr(b, "num_blocks_buckets", "_num_blocks_buckets", required=False)
        num_blocks = _ladder(blocks) if blocks is not None else blocks_ladder(kv, bs)
        variants = _distinct(_pair(r, BLOCKS_FIELDS, QUERY_FIELDS, spec) for r in b.variants())
        num_seqs = (_ladder(self._attr(b, "num_seqs_buckets", "_num_seqs_buckets"))
                     if "num_seqs_axis" in caps else None)
        batched_seqs, batched_blocks, _owner, (minimum, impl_declines, records, batches) = (
            batched if batched is not None else (None, None, None, (None, None, False, False)))
        recorded: tuple = ()
        # the impl's warmup records the bucketer's batched variants only where it runs batched
        # decode at all (the commit's record_graphs asks its _batched_decode_supported())
        if "batched_decode_variants" in caps and records is not False:
            recorded = _distinct(_pair(r, SEQS_FIELDS, BLOCKS_FIELDS, spec)
                                 for r in b.batched_decode_variants())
        chunking = None
        rule = (getattr(module, "batched_decode_chunking", None)
                or getattr(b, "batched_decode_chunking", None))
        # else the builder's own, read per step (none where the builder could not be read)
        if "chunking" in caps and rule is not None and batched is not None:
            chunking = ChunkTable({(ns, nb): tuple(int(x) for x in rule(ns, nb))
                                   for ns in batched_seqs for nb in batched_blocks}, spec)
        notes = tuple(handler.messages) + tuple(str(w.message) for w in caught)
        return Bucketing(
            kv=kv, query=query, num_blocks=num_blocks, num_seqs=num_seqs,
            batched_num_seqs=batched_seqs, batched_num_blocks=batched_blocks,
            variants=variants, batched_variants=recorded,
            # what driving the commit showed, where it could tell (else the env's switch)
            batched_enabled=overrides.batched_decode if batches is None else batches,
            chunking=chunking, decode_prefix_batched="decode_prefix" in caps,
            min_batched_seqs=minimum if minimum is not None else self.subject.min_batched,
            notes=notes, batched_declined=impl_declines)

    def _attr(self, b, *names: str, required: bool = True):
        for name in names:
            try:
                return getattr(b, name)
            except AttributeError:
                continue
        if required:
            raise HarnessError(f"{self.subject.origin}: {BUCKETER_CLASS} has none of "
                               f"{', '.join(names)}")
        return None

    def override_rule(self) -> str | None:
        """"top-up" or "clamp": whether an override entry above the limit is kept, found by
        asking the bucketer (kv override of twice max_model_len at the default config)."""
        subject, config = self.subject, EngineConfig()
        env = {"SPYRE_ATTN_KV_BUCKETS": str(2 * config.max_model_len)}
        with bounded(f"{subject.origin}: probing the override rule"), \
                bucketer_window(subject.tree, subject.mode, env, CaptureHandler()) as load:
            try:
                module = load()
                clear_env_cache()
                kv = _ladder(self._attr(getattr(module, BUCKETER_CLASS)(engine_vllm_config(config)),
                                        "kv_buckets", "_kv_buckets"))
            except HarnessError:
                raise
            except Exception as exc:
                raise SubjectRejected(f"{subject.origin}: probing the override rule: "
                                      f"{type(exc).__name__}: {exc}") from None
        return "top-up" if kv[-1] > config.max_model_len else "clamp"
