"""The persistent figure memo: a commit whose attention sources did not change is not driven
again, in a fresh process too, and what comes back from the store is byte for byte what a
computation gives.

Real fixture commits through ``spyre-bench cost`` in fresh processes, each with its own store
folder. Whether a commit's builder ran is seen by the commit itself: the commits here carry a
``build()`` that appends a line to a file each time it runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.subjects.memo import codec
from harness.subjects.memo.store import Store
from harness.subjects.source import closure
from tests.fixtures.spyre_repo import BACKEND, BUCKETER, ENVS, OPS_KERNEL

CUSTOM_OPS = "spyre_inference/custom_ops/utils.py"
BUILD_LINE = "        m = common_attn_metadata\n"
COST = ("cost", "--tier", "tiny", "--json")


@pytest.fixture(scope="module")
def marked(spyre_repo, tmp_path_factory):
    """gen3 with a build() that counts its runs: (repo, commit, the count file)."""
    mark = tmp_path_factory.mktemp("marks") / "builds"
    text = spyre_repo.read("gen3", BACKEND)
    assert text.count(BUILD_LINE) == 1
    counted = text.replace(BUILD_LINE, BUILD_LINE + f"        open({str(mark)!r}, 'a').write('b\\n')\n")
    commit = spyre_repo.add_commit({BACKEND: counted}, "build() counts its runs", parent="gen3")
    return spyre_repo, commit, mark


def builds(mark: Path) -> int:
    return len(mark.read_text().splitlines()) if mark.exists() else 0


def cost(spec: str, store: Path, **env: str) -> str:
    """``spyre-bench cost --json`` in a fresh process with ``store`` as its memo folder."""
    full = {**os.environ, "SPYRE_BENCH_MEMO_DIR": str(store), **env}
    done = subprocess.run([sys.executable, "-m", "harness", *COST, "--subject", spec],
                          capture_output=True, text=True, env=full)
    assert done.returncode == 0, done.stderr
    return done.stdout


def figures(out: str, spec: str) -> list:
    """Each row's figures, without the spec that names the commit."""
    return [(r["case"], r["workload"], r["subjects"][spec]) for r in json.loads(out)]


def test_docs_model_and_worker_commits_are_not_driven_again_in_a_fresh_process(marked,
                                                                                tmp_path):
    repo, base, mark = marked
    store = tmp_path / "store"
    first = cost(repo.spec(base), store)
    driven = builds(mark)
    assert driven > 0 and any(store.iterdir())
    for change in ({"README.md": "docs only\n"},
                   {"spyre_inference/models/bert.py": "class Bert:\n    layers = 12\n"},
                   {"spyre_inference/v1/worker/spyre_worker.py": "WORKER = 'changed'\n"}):
        commit = repo.add_commit(change, f"touch {next(iter(change))}", parent=base)
        out = cost(repo.spec(commit), store)
        assert builds(mark) == driven, f"{next(iter(change))}: the builder ran again"
        assert figures(out, repo.spec(commit)) == figures(first, repo.spec(base))


#: In a fresh process: one config's bucketing and the subject's capabilities, and whether torch
#: was imported on the way.
BUCKETING = """
import json, sys
from harness.config import EngineConfig, Overrides
from harness.subjects import resolve_subject
subject = resolve_subject(sys.argv[1])
b = subject.bucketing(EngineConfig(block_size=192), Overrides.from_env({"SPYRE_BATCHED_DECODE": "1"}))
print(json.dumps({"torch": "torch" in sys.modules, "caps": sorted(subject.capabilities),
                  "bucketing": repr(b), "chunk": b.chunking(b.batched_num_seqs[0],
                                                             b.batched_num_blocks[0])}))
"""


def test_a_docs_only_commit_in_a_fresh_process_loads_none_of_its_code(spyre_repo, tmp_path):
    loads = tmp_path / "loads"
    text = spyre_repo.read("gen3", BUCKETER) + f"\nopen({str(loads)!r}, 'a').write('l\\n')\n"
    base = spyre_repo.add_commit({BUCKETER: text}, "the bucketer counts its loads", parent="gen3")
    docs = spyre_repo.add_commit({"README.md": "docs only\n"}, "docs", parent=base)
    env = {**os.environ, "SPYRE_BENCH_MEMO_DIR": str(tmp_path / "store")}

    def bucketing(commit):
        done = subprocess.run([sys.executable, "-c", BUCKETING, spyre_repo.spec(commit)],
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    first = bucketing(base)
    count = len(loads.read_text().splitlines())
    assert first["torch"] and count > 0
    again = bucketing(docs)
    # capabilities and the bucketing (chunk table included) from the memo: no load, no torch
    assert len(loads.read_text().splitlines()) == count
    assert not again["torch"]
    assert again["caps"] == first["caps"] and "chunking" in again["caps"]
    assert again["bucketing"].replace(spyre_repo.spec(docs), "S") == \
        first["bucketing"].replace(spyre_repo.spec(base), "S")
    assert again["chunk"] == first["chunk"]


def test_a_commit_changing_an_attention_module_is_driven(marked, tmp_path):
    repo, base, mark = marked
    store = tmp_path / "store"
    first = cost(repo.spec(base), store)
    for path in (BUCKETER, BACKEND, OPS_KERNEL, ENVS, CUSTOM_OPS):
        before = builds(mark)
        commit = repo.add_commit({path: repo.read(base, path) + "\n# touched\n"},
                                 f"touch {path}", parent=base)
        out = cost(repo.spec(commit), store)
        assert builds(mark) > before, f"{path}: not driven"
        # a comment changes no figure: driven again, the same figures
        assert figures(out, repo.spec(commit)) == figures(first, repo.spec(base))


@pytest.mark.parametrize("damage", [b'{"format": 1, "entr', "foreign", "tampered",
                                    "wrong kind"])
def test_a_damaged_store_file_is_a_miss_and_the_output_is_unchanged(marked, tmp_path, damage):
    repo, base, mark = marked
    store = tmp_path / "store"
    first = cost(repo.spec(base), store)
    files = sorted(store.glob("*.json"))
    assert files
    for f in files:
        if damage == "foreign":      # a whole file of another table: never read as this one
            data = json.loads(f.read_text())
            data["table"] = "another"
            f.write_text(json.dumps(data))
        elif damage == "tampered":   # entries naming classes the harness does not write
            data = json.loads(f.read_text())
            data["entries"] = {k: {"class": "Popen", "items": ["rm -rf /"]}
                               for k in data["entries"]}
            f.write_text(json.dumps(data))
        elif damage == "wrong kind":   # well-formed data, not what an entry of its kind holds
            data = json.loads(f.read_text())
            data["entries"] = {k: 5 for k in data["entries"]}
            f.write_text(json.dumps(data))
        else:
            f.write_bytes(damage)
    before = builds(mark)
    assert cost(repo.spec(base), store) == first
    assert builds(mark) > before
    # rewritten whole: the next process reads it
    before = builds(mark)
    assert cost(repo.spec(base), store) == first
    assert builds(mark) == before


def test_memo_off_neither_reads_nor_writes_the_store(marked, tmp_path):
    repo, base, mark = marked
    store = tmp_path / "store"
    first = cost(repo.spec(base), store)
    kept = {f.name: f.read_bytes() for f in store.iterdir()}
    before = builds(mark)
    assert cost(repo.spec(base), store, SPYRE_BENCH_MEMO="0") == first
    assert builds(mark) > before
    assert {f.name: f.read_bytes() for f in store.iterdir()} == kept
    empty = tmp_path / "never"
    assert cost(repo.spec(base), empty, SPYRE_BENCH_MEMO="0") == first
    assert not empty.exists()


@pytest.mark.parametrize("generation", ["810-clamp", "gen4"])
def test_cold_warm_and_memo_off_give_the_same_bytes(spyre_repo, tmp_path, generation):
    spec = spyre_repo.spec(generation)
    cold = cost(spec, tmp_path / "store")
    assert any((tmp_path / "store").iterdir())
    assert cost(spec, tmp_path / "store") == cold
    assert cost(spec, tmp_path / "off", SPYRE_BENCH_MEMO="0") == cold


def test_a_harness_change_is_a_new_key(tmp_path):
    """A copy of the harness with one byte more computes another fingerprint."""
    import shutil

    import harness

    src = Path(harness.__file__).parent
    shutil.copytree(src, tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    code = "from harness.subjects.memo.key import harness_fingerprint; print(harness_fingerprint())"

    def fingerprint() -> str:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(tmp_path)}).stdout.strip()

    before = fingerprint()
    assert before == fingerprint()
    with open(tmp_path / "harness" / "config.py", "a") as f:   # outside subjects/ too
        f.write("\n")
    assert fingerprint() != before


# -- the closure --------------------------------------------------------------------------------

PKG = "spyre_inference/v1/attention"
BASE_TREE = {
    f"{PKG}/spyre_attn_bucketer.py": b"from spyre_inference import envs\n",
    f"{PKG}/backends/spyre_attn.py": (
        b"from ..ops import helpers\n"
        b"try:\n    from spyre_inference.extras import fast\nexcept ImportError:\n    fast = None\n"
        b"def f():\n    import spyre_inference.lazy.thing\n"
        b"PLUGIN = 'spyre_inference.plugins.'\n"),
    f"{PKG}/ops/helpers.py": b"X = 1\n",
    "spyre_inference/envs.py": b"import os\nV = os.environ.get('ODD_NAME')\n",
    "spyre_inference/extras/fast.py": b"F = 1\n",
    "spyre_inference/lazy/thing.py": b"T = 1\n",
    "spyre_inference/plugins/one.py": b"P = 1\n",
    "spyre_inference/platform.py": (
        b"from spyre_inference.boot import setup\nsetup()\n"
        b"class P:\n    def worker(self):\n        return 'spyre_inference.worker.W'\n"
        b"    def runner(self):\n        from spyre_inference.runner import R\n"),
    "spyre_inference/boot.py": b"def setup():\n    pass\n",
    "spyre_inference/worker.py": b"class W: pass\n",
    "spyre_inference/runner.py": b"class R: pass\n",
    "spyre_inference/models/bert.py": b"B = 1\n",
    "docs.py": b"",
}


def changed(path: str, body: bytes | None) -> bool:
    tree = dict(BASE_TREE)
    if body is None:
        tree.pop(path)
    else:
        tree[path] = body
    return closure.digest(closure.closure(tree)) != closure.digest(closure.closure(BASE_TREE))


@pytest.mark.parametrize("path", [
    "spyre_inference/envs.py",               # from spyre_inference import envs
    f"{PKG}/ops/helpers.py",                 # relative import
    "spyre_inference/extras/fast.py",        # inside try
    "spyre_inference/lazy/thing.py",         # inside a function
    "spyre_inference/plugins/one.py",        # a string literal's prefix (a dynamic import)
    "spyre_inference/boot.py",               # what the platform's import runs
])
def test_every_way_of_reaching_a_module_counts(path):
    assert changed(path, BASE_TREE[path] + b"# edited\n")


@pytest.mark.parametrize("path", [
    "spyre_inference/models/bert.py",        # reached by nothing
    "spyre_inference/worker.py",             # named only in a platform method
    "spyre_inference/runner.py",             # imported only in a platform method
    "docs.py",
])
def test_modules_no_load_reaches_do_not_count(path):
    assert not changed(path, b"# edited\n")


def test_a_module_an_import_looks_for_counts_once_it_appears():
    assert changed("spyre_inference/plugins/two.py", b"Q = 2\n")
    assert not changed("spyre_inference/unrelated/two.py", b"Q = 2\n")
    assert changed("spyre_inference/extras/fast.py", None)


def test_a_module_that_does_not_parse_makes_the_whole_tree_count():
    tree = {**BASE_TREE, f"{PKG}/ops/helpers.py": b"def broken(:\n"}
    modules, literals = closure.reach(tree)
    assert "spyre_inference.models.bert" in modules
    assert "ODD_NAME" in literals


def test_env_named_by_a_closure_module_is_in_the_key(monkeypatch):
    from harness.subjects.load.loader import SourceTree
    from harness.subjects.memo.key import source_key

    tree = SourceTree(BASE_TREE, "test")
    monkeypatch.delenv("ODD_NAME", raising=False)
    key = source_key(tree)
    monkeypatch.setenv("SPYRE_BENCH_JOBS", "7")          # how fast: no new key
    monkeypatch.setenv("UNNAMED_ELSEWHERE", "1")         # read by no module: no new key
    assert source_key(tree) == key
    monkeypatch.setenv("ODD_NAME", "1")                  # envs.py reads it
    assert source_key(tree) != key
    monkeypatch.delenv("ODD_NAME")
    monkeypatch.setenv("SPYRE_SOMETHING_NEW", "1")       # spyre-inference's prefix
    assert source_key(tree) != key


# -- the files ----------------------------------------------------------------------------------

def test_a_class_not_on_the_list_is_never_built():
    with pytest.raises(codec.Undecodable):
        codec.loads('{"class": "Popen", "items": ["true"]}')
    with pytest.raises(codec.Undecodable):
        codec.loads('{"class": "StepCost", "items": [1], "also": 2}')
    assert codec.exact({1, 2}) is None                       # no encoding: not stored
    value = ((1, 2), [3, {"a": (True, None, 1.5)}, {(1, 2): "k"}], "x")
    back = codec.loads(json.dumps(codec.exact(value)))
    assert back == value and repr(back) == repr(value)


def test_step_figures_read_back_exactly(spyre_repo):
    """A real step's figures (dataclasses, named tuples, tuples, dicts) through the codec."""
    from harness.config import EngineConfig, Overrides
    from harness.subjects import resolve_subject
    from harness.workloads import specs

    config = EngineConfig()
    subject = resolve_subject(spyre_repo.spec("gen4"))
    (cost,) = subject.workload_costs(config, Overrides.from_env({"SPYRE_BATCHED_DECODE": "1"}),
                                     [specs(steps=3)[0].build(config)])
    for step in cost.steps:
        data = codec.exact(step)
        assert data is not None
        back = codec.loads(json.dumps(data))
        assert back == step and repr(back) == repr(step)


def test_the_folder_stays_within_its_limit_least_recently_used_dropped_first(tmp_path):
    store = Store(tmp_path, limit=6000)
    payload = {"e": "x" * 1000}
    for i in range(12):
        store.save("src", f"table {i}", payload)
        if i >= 1:
            assert store.load("src", "table 0") == payload   # read: kept
    names = {p.name for p in tmp_path.glob("*.json")}
    assert store.path("src", "table 0").name in names
    assert store.path("src", "table 11").name in names
    assert store.path("src", "table 1").name not in names
    assert sum(p.stat().st_size for p in tmp_path.glob("*.json")) <= 6000


WRITER = """
import sys
from pathlib import Path
from harness.subjects.memo.store import Store
store = Store(Path(sys.argv[1]), 1 << 30)
for i in range(40):
    store.save("src", "shared", {f"{sys.argv[2]}-{i}": list(range(200))})
"""


def test_concurrent_writers_leave_a_whole_file(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(w)])
             for w in range(4)]
    assert [p.wait() for p in procs] == [0] * 4
    entries = Store(tmp_path, 1 << 30).load("src", "shared")
    assert all(v == list(range(200)) for v in entries.values())
    # the file is the last rename: some writer's last save, with what it merged
    assert any(f"{w}-39" in entries for w in range(4))
    assert not list(tmp_path.glob(".tmp-*"))
