"""Figures keyed by what decides them: the attention sources, the harness, the config, the env.

The exact figures of a subject are a function of the modules its loads can reach (the closure of
:mod:`harness.subjects.source.closure`), the harness that drives them, the process's env, the engine
config, the env overrides and the step fed to its builder (the harness derives every page
layout from the step itself): :func:`harness.subjects.memo.key.source_key` hashes the first
three, an entry's key holds the rest. Commits whose attention sources are identical (docs-only
commits, merges, reverts, changes to models or the worker) therefore share them: a backfill or
a nightly run computes each distinct closure once, and a later process reads them back from
:mod:`harness.subjects.memo.store` (off with ``SPYRE_BENCH_MEMO=0``). Only successes are kept
(a skip's reason names the commit). A few sources are kept in memory, least recently used
dropped first, so a long backfill stays small.

Entries are grouped in tables, one per (config, overrides): a table is read from disk once per
process, on first need, and written back (merged, atomically) by :meth:`TreeMemo.flush` when a
builder session closes.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from typing import NamedTuple

from harness.subjects.memo.codec import exact, object_hook
from harness.subjects.memo.store import Store, enabled, folder, limit_bytes

#: Distinct sources kept in memory at once (a backfill walks commits in order: recent ones
#: repeat).
TREES_KEPT = 4


class MemoKey(NamedTuple):
    """One memoized figure: its kind, the table it belongs to (config, overrides) and, for a
    step, the step."""

    kind: str
    config: object
    env: tuple
    item: object = None

    def table(self) -> tuple:
        return (self.config, self.env)

    def entry(self) -> str:
        if self.item is None:
            return self.kind
        return f"{self.kind}:{hashlib.sha256(_canonical(self.item).encode()).hexdigest()[:32]}"


def _canonical(item) -> str:
    """A step as text: each sequence's fields in order (what its ``repr`` says, faster)."""
    try:
        return repr(tuple((type(s).__name__, *vars(s).values()) for s in item))
    except TypeError:   # not a tuple of plain objects
        return repr(item)


def step_key(config, overrides, step) -> MemoKey:
    """The key of one driven step (with the source key, everything that decides it)."""
    return MemoKey("step", config, overrides.raw, step)


def ladders_key(config, overrides) -> MemoKey:
    """The key of the batched ladders a constructed builder dispatches on."""
    return MemoKey("builder_ladders", config, overrides.raw)


def probe_key() -> MemoKey:
    """The key of what probing a commit's bucketer found (its capabilities; no config)."""
    return MemoKey("probe", None, ())


def bucketing_key(config, overrides) -> MemoKey:
    """The key of a commit's bucketing (ladders, warmup records, chunk table) for a config."""
    return MemoKey("bucketing", config, overrides.raw)


def warmup_key(config, overrides) -> MemoKey:
    """The key of the compile keys a commit's own warmup records, where its bucketer's variants
    do not say them (a jagged plan's variants)."""
    return MemoKey("warmup", config, overrides.raw)


def setup_key(config, overrides) -> MemoKey:
    """The key of an engine's one-time transfers (staging, set-up) for a config."""
    return MemoKey("setup", config, overrides.raw)


def _kinds() -> dict[str, type]:
    """What an entry of each kind holds: anything else read from a file is a miss."""
    from harness.model.cost import StepCost
    from harness.subjects.base import Bucketing

    return {"step": StepCost, "builder_ladders": tuple, "setup": dict, "probe": dict,
            "bucketing": Bucketing, "warmup": tuple}


class TreeMemo:
    """``memo.get(source, key)`` / ``memo.put(source, key, value)`` / ``memo.flush()``, bounded
    by source in memory and backed by the persistent store the env names."""

    def __init__(self, trees: int = TREES_KEPT):
        self.trees = trees
        #: source -> table -> {entry: value}
        self._by_tree: OrderedDict[str, dict[tuple, dict]] = OrderedDict()
        #: (source, table) -> {entry: JSON data} not yet written
        self._unsaved: dict[tuple[str, tuple], dict] = {}
        #: False in processes that hand their figures to a parent (it writes them)
        self.persist = True
        #: "hit" (memory or disk), "miss", "disk" (entries read back from the store)
        self.stats: Counter[str] = Counter()
        self._store_for: tuple | None = None
        self._store: Store | None = None

    def store(self) -> Store | None:
        """The store the env names now (None when ``SPYRE_BENCH_MEMO=0``)."""
        where = (enabled(), folder(), limit_bytes())
        if where != self._store_for:
            self._store_for = where
            self._store = Store.from_env(object_hook)
        return self._store

    def _tables(self, source: str) -> dict:
        tables = self._by_tree.get(source)
        if tables is None:
            tables = self._by_tree[source] = {}
            while len(self._by_tree) > self.trees:
                self._by_tree.popitem(last=False)
        else:
            self._by_tree.move_to_end(source)
        return tables

    def _table(self, source: str, key: MemoKey) -> dict:
        tables = self._tables(source)
        table = tables.get(key.table())
        if table is None:
            table = tables[key.table()] = {}
            store = self.store()
            if store is not None:   # decoded as read; a file with anything foreign is a miss
                kinds = _kinds()
                table.update((entry, value) for entry, value
                             in store.load(source, repr(key.table())).items()
                             if isinstance(value, kinds.get(entry.partition(":")[0], ())))
                self.stats["disk"] += len(table)
        return table

    def get(self, source: str, key: MemoKey):
        found = self._table(source, key).get(key.entry())
        self.stats["hit" if found is not None else "miss"] += 1
        return found

    def put(self, source: str, key: MemoKey, value) -> None:
        self._table(source, key)[key.entry()] = value
        if self.persist and self.store() is not None:
            data = exact(value)
            if data is not None:   # only what reads back exactly is kept
                self._unsaved.setdefault((source, key.table()), {})[key.entry()] = data

    def flush(self) -> None:
        """Write what was put since the last flush to the store (merged with its files)."""
        unsaved, self._unsaved = self._unsaved, {}
        store = self.store()
        if store is None or not self.persist:
            return
        for (source, table), entries in unsaved.items():
            store.save(source, repr(table), entries)

    def clear(self) -> None:
        """An empty memo, as a test's "from nothing" needs: what this process holds and every
        file of the store the env names now."""
        self._by_tree.clear()
        self._unsaved.clear()
        store = self.store()
        if store is not None:
            store.remove_all()


#: Bucketings (ladders, warmup records, chunk tables) and driven step costs of every subject.
FIGURES = TreeMemo()
