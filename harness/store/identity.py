"""The identity sidecar (``<results file>.identity``): what ASV's results cannot say.

One typed record, written and read here only: which subject and harness produced a results file,
on which device and tier, why benchmarks were skipped, the subject's ladders per config, and
whether the run finished (a commit is complete only then: see ``complete``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

IDENTITY_SUFFIX = ".identity"


@dataclass
class Identity:
    subject: str
    commit: str
    label: str = ""
    harness_version: str = ""
    harness_commit: str | None = None
    device: str = ""
    tier: str = ""
    python: str = ""
    #: {"benchmark": ..., "reason": ...} per skipped benchmark (ASV stores a skip as NaN only).
    skipped: list = field(default_factory=list)
    interrupted: bool = True
    written_at: float = field(default_factory=time.time)
    #: The --bench selection of the run (None: everything).
    bench: str | None = None
    #: Runner groups that finished: a rerun of the same selection measures only the others.
    groups_done: list = field(default_factory=list)
    #: Ladders per config, keyed by ``json.dumps([block_size, max_model_len, max_num_seqs,
    #: overrides])`` (the order of ``harness.suite.case_key``).
    ladders: dict = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.interrupted is False

    def ladders_by_config(self) -> list[tuple[dict, dict]]:
        """(config by name, ladders) pairs: the stored keys read back with their names."""
        names = ("block_size", "max_model_len", "max_num_seqs", "overrides")
        return [(dict(zip(names, json.loads(k))), v) for k, v in self.ladders.items()
                if k != "skipped"]

    def write(self, results_file: Path) -> Path:
        side = sidecar(results_file)
        side.parent.mkdir(parents=True, exist_ok=True)
        tmp = side.with_suffix(".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=1))
        tmp.replace(side)      # never half-written
        return side

    @classmethod
    def from_dict(cls, data: dict) -> Identity:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def sidecar(results_file: str | Path) -> Path:
    return Path(results_file).with_suffix(IDENTITY_SUFFIX)


def read(results_file: str | Path) -> Identity | None:
    """The identity beside a results file, or None when absent or unreadable."""
    side = sidecar(results_file)
    try:
        data = json.loads(side.read_text())
        if not isinstance(data, dict) or "subject" not in data or "commit" not in data:
            return None
        return Identity.from_dict(data)
    except (OSError, ValueError, TypeError):
        return None
