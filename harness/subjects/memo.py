"""Figures keyed by what decides them: the source tree's content, the config, the env, the input.

The exact figures of a subject are a function of its ``spyre_inference/**.py`` sources (the
snapshot's :meth:`SourceTree.digest`), the engine config, the env overrides and the step fed to
its builder (the harness derives every page layout from the step itself). Commits whose sources
are identical (docs-only commits, merges, reverts) therefore share them: a backfill or a nightly
run computes each distinct tree once. Only successes are kept (a skip's reason names the commit).
A few trees are kept, least recently used dropped first, so a long backfill stays small.
"""

from __future__ import annotations

from collections import OrderedDict

#: Distinct source trees kept at once (a backfill walks commits in order: recent ones repeat).
TREES_KEPT = 4


class TreeMemo:
    """``memo.get(digest, key)`` / ``memo.put(digest, key, value)``, bounded by tree."""

    def __init__(self, trees: int = TREES_KEPT):
        self.trees = trees
        self._by_tree: OrderedDict[str, dict] = OrderedDict()

    def _tree(self, digest: str) -> dict:
        table = self._by_tree.get(digest)
        if table is None:
            table = self._by_tree[digest] = {}
            while len(self._by_tree) > self.trees:
                self._by_tree.popitem(last=False)
        else:
            self._by_tree.move_to_end(digest)
        return table

    def get(self, digest: str, key):
        return self._tree(digest).get(key)

    def put(self, digest: str, key, value) -> None:
        self._tree(digest)[key] = value

    def clear(self) -> None:
        self._by_tree.clear()


def step_key(config, overrides, step) -> tuple:
    """The key of one driven step (with the tree's digest, everything that decides it)."""
    return ("step", config, overrides.raw, step)


def ladders_key(config, overrides) -> tuple:
    """The key of the batched ladders a constructed builder dispatches on."""
    return ("builder_ladders", config, overrides.raw)


def setup_key(config, overrides) -> tuple:
    """The key of an engine's one-time transfers (staging, set-up) for a config."""
    return ("setup", config, overrides.raw)


#: Bucketings (ladders, warmup records, chunk tables) and driven step costs of every subject.
FIGURES = TreeMemo()
