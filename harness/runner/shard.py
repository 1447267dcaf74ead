"""One share of a nightly plan (``--shard i/n``), so a backfill spreads over a pool of runners.

A commit's shard is its hash modulo ``n``: it depends on the commit alone, never on its position
in the history, so new commits, a longer backfill or another branch never move a commit to another
shard; every commit is in exactly one of the ``n`` shards, and runners that plan from the same
results folder measure disjoint commits whose union is the unsharded plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A GitHub Actions matrix has at most 256 jobs: more shards than that cannot run at once.
MAX_SHARDS = 256
_FORM = re.compile(r"([1-9][0-9]{0,3})/([1-9][0-9]{0,3})")


@dataclass(frozen=True)
class Shard:
    index: int   #: 1-based
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` -> Shard(2, 4); ValueError with the reason for anything else."""
        m = _FORM.fullmatch(text)
        if not m:
            raise ValueError(f"expected i/n with 1 <= i <= n <= {MAX_SHARDS}, got {text[:40]!r}")
        index, count = int(m.group(1)), int(m.group(2))
        if count > MAX_SHARDS:
            raise ValueError(f"at most {MAX_SHARDS} shards, got {count}")
        if index > count:
            raise ValueError(f"shard {index} of {count} does not exist (1 <= i <= n)")
        return cls(index, count)

    def holds(self, commit: str) -> bool:
        """Whether the commit (a full hexadecimal hash) is in this shard."""
        return int(commit, 16) % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


WHOLE = Shard(1, 1)
