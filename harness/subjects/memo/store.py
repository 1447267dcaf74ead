"""The memo's files: figures kept across processes, so an unchanged commit costs only its load.

One JSON file per (source key, table): a table is one config and env, its entries the steps,
ladders and set-up figures driven for it (:mod:`harness.subjects.memo.figures`). Where:
``SPYRE_BENCH_MEMO_DIR``, else ``$XDG_CACHE_HOME/spyre-bench/figures``, else
``~/.cache/spyre-bench/figures``; ``SPYRE_BENCH_MEMO=0`` turns it off; the folder is kept under
``SPYRE_BENCH_MEMO_MB`` (default 256), the least recently used files dropped first.

Several processes may share the folder (ASV's benchmark processes, parallel jobs): a file is
written whole to a temporary name and renamed over the old one, merged with what is there at
that moment, so a reader sees a whole file or none, and two writers lose at most each other's
new entries (met again later as misses). Reading never raises: an unreadable, truncated,
foreign or tampered file is a miss, and the figures are computed as if it were not there. The
format is data only (:mod:`harness.subjects.memo.codec`): a file never runs code.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

from harness import user_cache

MEMO_ENV = "SPYRE_BENCH_MEMO"
DIR_ENV = "SPYRE_BENCH_MEMO_DIR"
SIZE_ENV = "SPYRE_BENCH_MEMO_MB"
DEFAULT_MB = 256
#: Bumped when the file layout changes: older files are then foreign (misses).
FORMAT = 1
#: A temporary file older than this was left by a writer that died: removed when pruning.
STALE_TEMP_S = 3600


def enabled() -> bool:
    return os.environ.get(MEMO_ENV, "1").strip() not in ("0", "off", "no", "false", "")


def folder() -> Path:
    given = os.environ.get(DIR_ENV)
    if given:
        return Path(given).expanduser()
    return user_cache.folder() / "figures"


def limit_bytes() -> int:
    try:
        return max(0, int(float(os.environ.get(SIZE_ENV, DEFAULT_MB)) * (1 << 20)))
    except ValueError:
        return DEFAULT_MB << 20


class Store:
    """``load(source, table)`` -> {entry: value}; ``save(source, table, entries)`` of JSON data.

    ``hook`` (``json.loads``' ``object_hook``) turns each object read into its value, raising
    ValueError for data it refuses: the whole file is then a miss."""

    def __init__(self, root: Path, limit: int, hook=None):
        self.root, self.limit, self.hook = root, limit, hook
        #: Tables found on disk and missing or unreadable there, in this process.
        self.loaded = self.missed = self.written = 0

    @classmethod
    def from_env(cls, hook=None) -> Store | None:
        return cls(folder(), limit_bytes(), hook) if enabled() else None

    def path(self, source: str, table: str) -> Path:
        name = hashlib.sha256(f"{FORMAT}\0{source}\0{table}".encode()).hexdigest()[:40]
        return self.root / f"{name}.json"

    def load(self, source: str, table: str) -> dict:
        """The entries stored for this table; {} when there is no usable file."""
        path = self.path(source, table)
        entries = self._read(path, source, table, self.hook)
        if entries is None:
            self.missed += 1
            return {}
        self.loaded += 1
        try:
            os.utime(path)   # recently used: kept longest
        except OSError:
            pass
        return entries

    def save(self, source: str, table: str, entries: dict) -> None:
        """Add ``entries`` to the table's file (atomically); a failure to write is only a
        miss for a later process, never this command's error."""
        path = self.path(source, table)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            merged = {**(self._read(path, source, table) or {}), **entries}
            body = json.dumps({"format": FORMAT, "source": source, "table": table,
                               "entries": merged}, separators=(",", ":"), sort_keys=True)
            fd, temp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=self.root)
            try:
                with os.fdopen(fd, "w") as out:
                    out.write(body)
                os.replace(temp, path)
            except BaseException:
                _remove(Path(temp))
                raise
            self.written += 1
        except OSError:
            return
        self.prune(keep=path)

    def prune(self, keep: Path | None = None) -> None:
        """Drop the least recently used files until the folder is within its limit."""
        try:
            found = []
            now = time.time()
            # closed however the loop ends: a file another process renamed away mid-listing
            # (stat's OSError) left an open iterator, whose ResourceWarning at a later garbage
            # collection landed in whatever subject window was open then
            with os.scandir(self.root) as entries:
                for entry in entries:
                    st = entry.stat()
                    if entry.name.startswith(".tmp-"):
                        if now - st.st_mtime > STALE_TEMP_S:
                            _remove(Path(entry.path))
                        continue
                    if entry.name.endswith(".json"):
                        found.append((st.st_mtime, st.st_size, Path(entry.path)))
        except OSError:
            return
        total = sum(size for _, size, _ in found)
        for _, size, path in sorted(found):
            if total <= self.limit:
                break
            if path != keep:
                _remove(path)
                total -= size

    def remove_all(self) -> None:
        """Every figure file of the folder (what :meth:`TreeMemo.clear` asks for)."""
        try:
            with os.scandir(self.root) as entries:
                names = [e.path for e in entries if e.name.endswith(".json")]
        except OSError:
            return
        for name in names:
            _remove(Path(name))

    @staticmethod
    def _read(path: Path, source: str, table: str, hook=None) -> dict | None:
        try:
            data = json.loads(path.read_bytes(), object_hook=hook)
        except (OSError, ValueError, TypeError, RecursionError):
            return None
        if (not isinstance(data, dict) or data.get("format") != FORMAT
                or data.get("source") != source or data.get("table") != table
                or not isinstance(data.get("entries"), dict)):
            return None
        return data["entries"]


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
