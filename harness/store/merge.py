"""Merge machine folders measured apart (the shards of a backfill) into one results folder.

A shard's folder comes from a job that ran spyre-inference's code, so it is data to check, never
to trust: only plain files with the names a machine folder holds are taken (``machine.json``,
``benchmarks.json``, ``<commit8>-<env>.json`` and its ``.identity``; dotfiles such as locks and
``*.tmp`` leftovers of a cut-short write are passed over), each must read as what its name says
(:mod:`harness.store.results_format`, :mod:`harness.store.identity`), and it must be the machine
its ``machine.json`` names. Every folder is read and checked before anything is written.

Per-commit files are a union. A file that two folders both hold (``machine.json``,
``benchmarks.json``, or a commit two shards both measured) must be the same apart from timing
fields: when a benchmark ran and for how long (``started_at``, ``duration``, ASV's
``durations``), a timed benchmark's measured values (its result, statistics and samples), and
when the sidecar was written (``written_at``). Anything else that differs (an exact figure, a
machine's description, the suite's definitions) is a conflict: one error naming the file, and
nothing is written. The first folder's copy is the one kept.

Files already in the destination are replaced, as a commit's file measured on top of the stored
one (a resumed run) replaces it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.registry import is_timed
from harness.store.identity import IDENTITY_SUFFIX, identity_problem, unpacked
from harness.store.jsonfile import StoredFileError, parse_json, read_bytes
from harness.store.names import checked_name
from harness.store.results_format import benchmarks_problem, results_problem

MACHINE_FILE = "machine.json"
BENCHMARKS_FILE = "benchmarks.json"
#: ``<commit8>-<env>.json`` / ``.identity``, as ASV and spyre-bench run name them.
_COMMIT_FILE = re.compile(r"([0-9a-f]{8})-([A-Za-z0-9_][A-Za-z0-9_.-]{0,99})"
                          rf"(\.json|{re.escape(IDENTITY_SUFFIX)})")
#: Columns of an ASV results row that say when and how long, never what.
TIMING_COLUMNS = frozenset({"started_at", "duration"})
#: Columns that hold a timed benchmark's measurement: samples of the same thing, never equal twice.
MEASURED_COLUMNS = frozenset({"result", "samples", "profile", "stats_ci_99_a", "stats_ci_99_b",
                              "stats_q_25", "stats_q_75", "stats_number", "stats_repeat"})
#: Identity sidecar fields that say when, never what.
TIMING_IDENTITY = frozenset({"written_at"})


@dataclass
class Folder:
    """One source folder, read and checked: its machine and its files' bytes by name."""

    path: Path
    machine: str
    files: dict[str, bytes] = field(default_factory=dict)
    parsed: dict[str, object] = field(default_factory=dict)


def _fail(path: Path, why: str) -> HarnessError:
    return HarnessError(f"merge: {path}: {why}")


def _taken(name: str) -> bool:
    """Whether a name in a shard's folder is merged at all (locks and half-writes are not)."""
    return not (name.startswith(".") or name.endswith(".tmp"))


def read_folder(path: Path) -> Folder:
    """Every file of a shard's machine folder, checked (HarnessError naming the first bad one)."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise _fail(path, exc.strerror or str(exc)) from None
    if not stat.S_ISDIR(info.st_mode):
        raise _fail(path, "not a folder")
    with os.scandir(path) as entries:
        names = sorted(e.name for e in entries if _taken(e.name))
    files, parsed = {}, {}
    for name in names:
        file = path / name
        if not stat.S_ISREG(os.lstat(file).st_mode):
            raise _fail(file, "not a plain file (links and folders are not merged)")
        if name not in (MACHINE_FILE, BENCHMARKS_FILE) and not _COMMIT_FILE.fullmatch(name):
            raise _fail(file, "not a file a machine folder holds (machine.json, benchmarks.json, "
                              "<commit8>-<env>.json, <commit8>-<env>.identity)")
        try:
            raw = read_bytes(file)       # the bytes checked are the bytes written
            data = parse_json(raw)
        except (OSError, StoredFileError) as exc:
            raise _fail(file, f"unreadable ({exc})") from None
        files[name], parsed[name] = raw, data
    machine = _machine(path, parsed)
    for name, data in parsed.items():
        problem = _problem(name, data, machine)
        if problem:
            raise _fail(path / name, problem)
    for name in files:
        if name.endswith(IDENTITY_SUFFIX) and name[:-len(IDENTITY_SUFFIX)] + ".json" not in files:
            raise _fail(path / name, "an identity sidecar without its results file")
    return Folder(path, machine, files, parsed)


def _machine(path: Path, parsed: dict) -> str:
    data = parsed.get(MACHINE_FILE)
    if data is None:
        raise _fail(path, "no machine.json: which machine measured it is not known")
    name = data.get("machine") if isinstance(data, dict) else None
    try:
        return checked_name("machine", name)
    except HarnessError as exc:
        raise _fail(path / MACHINE_FILE, str(exc)) from None


def _problem(name: str, data, machine: str) -> str | None:
    if name == MACHINE_FILE:
        return None
    if name == BENCHMARKS_FILE:
        return benchmarks_problem(data)
    commit, env, suffix = _COMMIT_FILE.fullmatch(name).groups()
    if suffix == IDENTITY_SUFFIX:
        problem = identity_problem(data)
        if problem is None and not str(data.get("commit") or "").startswith(commit):
            problem = f"its commit {str(data.get('commit'))[:40]!r} is not {commit}"
        return problem
    problem = results_problem(data)
    if problem:
        return problem
    if not data["commit_hash"].startswith(commit) or data.get("env_name") != env:
        return f"holds {data['commit_hash'][:8]}-{data.get('env_name')}, not {commit}-{env}"
    params = data.get("params")
    if not isinstance(params, dict) or params.get("machine") != machine:
        seen = params.get("machine") if isinstance(params, dict) else None
        return f"measured on machine {seen!r}, not {machine!r} (its machine.json)"
    return None


def apart_from_timing(name: str, data):
    """``data`` (a parsed file named ``name``) without its timing fields: what two copies of
    one file must agree on (a sidecar as read: either layout of its skips and ladders)."""
    if name.endswith(IDENTITY_SUFFIX):
        return {k: v for k, v in unpacked(data).items() if k not in TIMING_IDENTITY}
    if name in (MACHINE_FILE, BENCHMARKS_FILE):
        return data
    columns = data.get("result_columns") or []
    rows = {}
    for bench, row in data["results"].items():
        drop = TIMING_COLUMNS | (MEASURED_COLUMNS if is_timed(bench) else frozenset())
        rows[bench] = [None if c in drop else v for c, v in zip(columns, row)]
    return {**{k: v for k, v in data.items() if k not in ("durations", "results")},
            "results": rows}


def _canonical(data) -> str:
    """One text per value (NaN included, which never equals itself)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _first_difference(a, b, where: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if _canonical(a.get(key)) != _canonical(b.get(key)):
                return _first_difference(a.get(key), b.get(key), f"{where}/{key}")
    return where or "/"


def merged(folders: list[Folder]) -> dict[tuple[str, str], bytes]:
    """(machine, file name) -> the bytes to write; HarnessError on the first conflict."""
    out: dict[tuple[str, str], tuple[Folder, bytes]] = {}
    for folder in folders:
        for name, raw in folder.files.items():
            key = (folder.machine, name)
            if key not in out:
                out[key] = (folder, raw)
                continue
            first = out[key][0]
            a = apart_from_timing(name, first.parsed[name])
            b = apart_from_timing(name, folder.parsed[name])
            if _canonical(a) != _canonical(b):
                raise HarnessError(
                    f"merge: conflict in {folder.machine}/{name}: {first.path} and {folder.path} "
                    f"differ apart from timing fields (at {_first_difference(a, b)[:120]}); "
                    "nothing written")
    return {key: raw for key, (_, raw) in out.items()}


def checked(sources: list[Path]) -> dict[tuple[str, str], bytes]:
    """Read and check every folder and merge them in memory (HarnessError: nothing to write)."""
    return merged([read_folder(Path(s)) for s in sources])


def write(files: dict[tuple[str, str], bytes], results_dir: Path) -> dict[str, list[str]]:
    """Write :func:`checked`'s files into ``results_dir``/<machine>/: machine -> names."""
    written: dict[str, list[str]] = {}
    for (machine, name), raw in sorted(files.items()):
        folder = results_dir / machine
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.merge.tmp"
        tmp.write_bytes(raw)
        tmp.replace(folder / name)       # never half-written
        written.setdefault(machine, []).append(name)
    return written
