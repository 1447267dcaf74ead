"""The identity sidecar (``<results file>.identity``): what ASV's results cannot say.

One typed record, written and read here only: which subject and harness produced a results file,
on which device and tier, why benchmarks were skipped, the subject's ladders per config, and
whether the run finished (a commit is complete only then: see ``complete``). On disk each skip
reason and each ladder is stored once (harness.store.skip_table, harness.store.ladder_table):
:func:`unpacked` reads either layout.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.store import ladder_table, skip_table
from harness.store.jsonfile import read_json

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
    #: {"benchmark": ..., "reason": ...} per skipped benchmark (ASV stores a skip as NaN only);
    #: on disk each distinct reason once (harness.store.skip_table).
    skipped: list = field(default_factory=list)
    interrupted: bool = True
    written_at: float = field(default_factory=time.time)
    #: The --bench selection of the run (None: everything).
    bench: str | None = None
    #: Runner groups that finished: a rerun of the same selection measures only the others.
    groups_done: list = field(default_factory=list)
    #: Ladders per config: ``{"config": {"block_size": .., "max_model_len": .., "max_num_seqs":
    #: .., "overrides": ..}, "ladders": {axis: [..]} or {"skipped": reason}}`` per config, or one
    #: ``{"skipped": reason}`` when the subject could not be loaded at all.
    ladders: list = field(default_factory=list)
    #: Content hash of each attention-path module the subject runs (harness.subjects.source.sources):
    #: which part's code changed between two stored commits. None: not known (the reference).
    sources: dict | None = None

    @property
    def complete(self) -> bool:
        return self.interrupted is False

    def ladders_by_config(self) -> list[tuple[dict, dict]]:
        """(config by name, ladders) pairs, in the order they were written."""
        return [(e["config"], e["ladders"]) for e in self.ladders if "config" in e]

    def write(self, results_file: Path) -> Path:
        side = sidecar(results_file)
        side.parent.mkdir(parents=True, exist_ok=True)
        tmp = side.with_suffix(".tmp")
        # no blanks: indented, the ladders of a quick-tier commit took 35.6 kB, 18.5 kB without
        packed = skip_table.pack(dataclasses.asdict(self))
        packed["ladders"] = ladder_table.pack(packed["ladders"])
        tmp.write_text(json.dumps(packed, separators=(",", ":")))
        tmp.replace(side)      # never half-written
        return side

    @classmethod
    def from_dict(cls, data: dict) -> Identity:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in unpacked(data).items() if k in known}
        if isinstance(values.get("ladders"), dict):
            values["ladders"] = _positional_ladders(values["ladders"])
        return cls(**values)


def unpacked(data: dict) -> dict:
    """A sidecar's dict as written (either layout) with every skip its sentence and the ladders
    one entry per config; call on a dict :func:`identity_problem` accepts."""
    if ladder_table.is_table(data.get("ladders")):
        data = {**data, "ladders": ladder_table.unpack(data["ladders"])}
    return skip_table.unpack(data)


#: The order configs were keyed in by sidecars written before ladders were stored by name.
_POSITIONAL_CONFIG = ("block_size", "max_model_len", "max_num_seqs", "overrides")


def _positional_ladders(old: dict) -> list:
    """Sidecars of earlier versions keyed ladders by ``json.dumps([bs, mml, mns, overrides])``."""
    out = [{"skipped": old["skipped"]}] if "skipped" in old else []
    for key, ladders in old.items():
        if key != "skipped":
            out.append({"config": dict(zip(_POSITIONAL_CONFIG, json.loads(key))),
                        "ladders": ladders})
    return out


def config_key(config: dict) -> str:
    """A config of a ladders entry as a stable string, to pair entries across files."""
    return json.dumps(config, sort_keys=True)


def sidecar(results_file: str | Path) -> Path:
    return Path(results_file).with_suffix(IDENTITY_SUFFIX)


#: Fields a reader uses, and the types a sidecar must hold them as (None allowed for each).
_TYPES = {"subject": str, "commit": str, "label": str, "harness_version": str,
          "harness_commit": str, "device": str, "tier": str, "python": str, "skipped": list,
          "interrupted": bool, "bench": str, "groups_done": list, "ladders": (list, dict),
          "sources": dict}


def identity_problem(data) -> str | None:
    """Why ``data`` (a parsed sidecar) cannot be trusted, or None: a value of the wrong type
    would otherwise break a reader far from the file."""
    if not isinstance(data, dict):
        return f"{type(data).__name__}, not an object"
    for key, kind in _TYPES.items():
        if data.get(key) is not None and not isinstance(data[key], kind):
            return f"{key} is {type(data[key]).__name__}"
    for key in ("skipped", "ladders"):
        entries = data.get(key)
        if isinstance(entries, list) and not all(isinstance(e, dict) for e in entries):
            return f"{key} holds something other than objects"
    ladders = data.get("ladders")
    if ladder_table.table_problem(ladders):
        return ladder_table.table_problem(ladders)
    if isinstance(ladders, list) and not all(
            isinstance(e.get("config", {}), dict) and isinstance(e.get("ladders", {}), dict)
            for e in ladders):
        return "ladders entries are not config/ladders objects"
    sources = data.get("sources")
    if isinstance(sources, dict) and not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in sources.items()):
        return "sources is not a path -> hash object"
    return None


def read(results_file: str | Path) -> Identity | None:
    """The identity beside a results file, or None when absent or unreadable (a malformed one
    is reported by the history reader, :func:`harness.store.history.load_identity`)."""
    side = sidecar(results_file)
    try:
        data = read_json(side)
        if identity_problem(data) or "subject" not in data or "commit" not in data:
            return None
        return Identity.from_dict(data)
    except (OSError, ValueError, TypeError):
        return None
