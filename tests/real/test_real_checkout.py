"""Real-code acceptance: every command on a real spyre-inference git checkout's commits.

Opt-in: ``make test-real REAL=<path to a spyre-inference git checkout>`` (``SPYRE_BENCH_REAL``);
skipped when not given. ``REAL_REVS`` (space-separated revisions, default: every commit on HEAD's
first-parent history that has the attention bucketer) picks the commits, e.g. the assembled trees
of README "Real trees": ``REAL_REVS="up-2bb2cfd8 up-19461caa up-64676867 mix-r3-bucketer
r3-450e577d r3-32e22ec4 ani-8a331f98"``.

For each commit it asserts what a kernel engineer relies on, path by path: ``ladders`` is
computed; ``cost`` and ``kernel`` run each K/V layout the commit's platform offers (its own
default, and the other through ``SPYRE_ATTN_KV_LAYOUT`` where its ``envs.py`` has the knob), and
its jagged path where ``envs.py`` has ``SPYRE_JAGGED_ATTENTION``. What each should give comes from
the commit's own tree: a layout whose backend module reaches (through its ``spyre_inference``
imports) a module the tree does not have cannot be driven, so every row of it is skipped naming
that module and the command exits 2 ("nothing computed"); every other path is computed, nothing
skipped, and its kernels pass the oracle. A comparison of successive commits compares figures on
a layout both can drive (exit status 0 or 1, never "nothing compared").
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REAL = os.environ.get("SPYRE_BENCH_REAL")
BUCKETER = "spyre_inference/v1/attention/spyre_attn_bucketer.py"
ENVS = "spyre_inference/envs.py"
#: The decoder backend module of each K/V layout, as the commits' platforms register them.
BACKENDS = {"token_major": "spyre_inference.v1.attention.backends.spyre_attn",
            "head_major": "spyre_inference.v1.attention.backends.spyre_head_major_attn"}
LAYOUT_KNOB, JAGGED_KNOB = "SPYRE_ATTN_KV_LAYOUT", "SPYRE_JAGGED_ATTENTION"

pytestmark = pytest.mark.skipif(not REAL, reason="no real checkout: make test-real REAL=<path>")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", REAL, *args], capture_output=True, text=True,
                          check=True).stdout


def _revisions() -> list[str]:
    if not REAL:
        return []
    given = os.environ.get("REAL_REVS", "").split()
    if given:
        return [_git("rev-parse", "--verify", f"{r}^{{commit}}").strip() for r in given]
    revs = _git("rev-list", "--first-parent", "--reverse", "HEAD").split()
    have = [r for r in revs if _git("ls-tree", "--name-only", r, BUCKETER).strip()]
    return have


REVS = _revisions()


# -- what the commit's own tree says each path should give --------------------------------------

@cache
def _files(rev: str) -> frozenset[str]:
    return frozenset(_git("ls-tree", "-r", "--name-only", rev).split())


def _is_module(rev: str, dotted: str) -> bool:
    rel = dotted.replace(".", "/")
    return f"{rel}.py" in _files(rev) or any(f.startswith(rel + "/") for f in _files(rev))


def _imports(rev: str, dotted: str) -> list[str]:
    """The ``spyre_inference`` modules a module imports (at any depth of its code, not under
    ``if TYPE_CHECKING``), ``from pkg import sub`` counted as ``pkg.sub`` where that is one."""
    tree = ast.parse(_git("show", f"{rev}:{dotted.replace('.', '/')}.py"))
    checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("spyre_inference")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spyre_inference"):
            subs = [f"{node.module}.{a.name}" for a in node.names]
            found += [node.module] + [s for s in subs if _is_module(rev, s)]
    return found


@cache
def missing_modules(rev: str, layout: str) -> tuple[str, ...]:
    """The modules the layout's backend reaches that the commit's tree does not have."""
    seen, todo, missing = set(), [BACKENDS[layout]], []
    while todo:
        dotted = todo.pop()
        if dotted in seen:
            continue
        seen.add(dotted)
        if not _is_module(rev, dotted):
            missing.append(dotted)
        elif f"{dotted.replace('.', '/')}.py" in _files(rev):
            todo += _imports(rev, dotted)
    return tuple(sorted(missing))


@cache
def knob_default(rev: str, knob: str) -> str | None:
    """The default the commit's ``envs.py`` registry gives ``knob`` (the last string constant of
    its entry other than the knob's name); None where the registry has no such knob."""
    if ENVS not in _files(rev):
        return None
    for node in ast.walk(ast.parse(_git("show", f"{rev}:{ENVS}"))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == knob:
                    strings = [n.value for n in ast.walk(value) if isinstance(n, ast.Constant)
                               and isinstance(n.value, str) and n.value != knob]
                    return strings[-1] if strings else ""
    return None


def layouts(rev: str) -> list[tuple[str, list[str]]]:
    """(layout, the --env arguments that select it) for each layout the commit can run: its
    default with no override, the other through the knob where it has one."""
    default = knob_default(rev, LAYOUT_KNOB)
    if default is None:
        return [("token_major", [])]
    return [(default, [])] + [(other, ["--env", f"{LAYOUT_KNOB}={other}"])
                              for other in BACKENDS if other != default]


def _paths() -> list[tuple[str, str, str, list[str]]]:
    """(rev, label, layout, env arguments): each layout, and its jagged path where the commit
    has one."""
    out = []
    for rev in REVS:
        for layout, env in layouts(rev):
            out.append((rev, layout + ("" if env else " (default)"), layout, env))
            if knob_default(rev, JAGGED_KNOB) is not None:
                out.append((rev, f"{layout} jagged", layout,
                            [*env, "--env", f"{JAGGED_KNOB}=1"]))
    return out


PATHS = _paths()
PATH_IDS = [f"{rev[:8]}-{label.replace(' ', '-')}" for rev, label, _, _ in PATHS]


# -- running spyre-bench ------------------------------------------------------------------------

def spyre_bench(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def spec(rev: str) -> str:
    return f"git:{Path(REAL).resolve()}@{rev}"


def _rows(done: subprocess.CompletedProcess) -> list[dict]:
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


def _skips(rows: list[dict]) -> list[str]:
    return [f["skipped"] for r in rows for f in r.get("subjects", {r.get("subject"): r}).values()
            if isinstance(f, dict) and "skipped" in f]


def assert_as_the_tree_says(done: subprocess.CompletedProcess, rows: list[dict], rev: str,
                            layout: str) -> None:
    """Computed with nothing skipped where the layout's backend is whole; else every row skipped
    naming a module the tree lacks (dotted where an import of it failed, as its file where the
    backend module itself is absent), and exit 2."""
    gap = missing_modules(rev, layout)
    names = [n for m in gap for n in (m, m.replace(".", "/") + ".py")]
    skipped = _skips(rows)
    if gap:
        assert done.returncode == 2, done.stderr[-2000:]
        assert rows and len(skipped) == len(rows), skipped[:3]
        assert all(any(n in s for n in names) for s in skipped), (gap, skipped[:3])
    else:
        assert done.returncode == 0, done.stderr[-2000:]
        assert rows and not skipped, skipped[:3]


@pytest.mark.parametrize("rev", REVS, ids=[r[:12] for r in REVS])
def test_ladders_are_computed_by_the_commit(rev):
    """The bucketer's own ladders need only the bucketer; the batched ones come from driving the
    builder and impl of the commit's default path, so they follow its tree."""
    own = spyre_bench("ladders", "--subject", spec(rev), "--tier", "tiny", "--axes",
                      "kv,query,num_blocks,num_seqs", "--json")
    assert own.returncode == 0, own.stderr[-2000:]
    rows = _rows(own)
    assert rows and not _skips(rows), _skips(rows)[:3]
    every = spyre_bench("ladders", "--subject", spec(rev), "--tier", "tiny", "--json")
    assert_as_the_tree_says(every, _rows(every) if every.stdout.strip() else [], rev,
                            layouts(rev)[0][0])


@pytest.mark.parametrize("rev,label,layout,env", PATHS, ids=PATH_IDS)
def test_cost_is_computed_on_each_path_the_commit_can_drive(rev, label, layout, env):
    cost = spyre_bench("cost", "--subject", spec(rev), "--tier", "tiny", *env, "--json")
    assert_as_the_tree_says(cost, _rows(cost) if cost.stdout.strip() else [], rev, layout)


@pytest.mark.parametrize("rev,label,layout,env", PATHS, ids=PATH_IDS)
def test_kernel_runs_the_commits_own_kernels_and_the_oracle_passes(rev, label, layout, env):
    done = spyre_bench("kernel", "--subject", spec(rev), "--block-size", "64",
                       "--max-model-len", "2048", "--batched", *env,
                       "--step", "150,150,150,150",
                       "--step", "150,300,450,600,750,900", "--step", "2048,300|512,1",
                       "--repeat", "3", "--json")
    rows = json.loads(done.stdout)["rows"] if done.stdout.strip() else []
    assert_as_the_tree_says(done, rows, rev, layout)
    for row in rows:
        assert "wrong" not in row, row["wrong"]


def _shared_layout(base: str, head: str) -> list[str] | None:
    """The env arguments of a layout both commits' trees drive whole (none where it is the
    default of both), or None."""
    for layout, env in layouts(head):
        if missing_modules(base, layout) or missing_modules(head, layout):
            continue
        if dict(layouts(base)).get(layout) == env:
            return env
        if knob_default(base, LAYOUT_KNOB) is not None and knob_default(head, LAYOUT_KNOB):
            return ["--env", f"{LAYOUT_KNOB}={layout}"]
    return None


@pytest.mark.parametrize("pair", list(zip(REVS, REVS[1:])),
                         ids=[f"{a[:8]}..{b[:8]}" for a, b in zip(REVS, REVS[1:])])
def test_compare_of_successive_commits_compares_figures(pair, tmp_path):
    base, head = pair
    env = _shared_layout(base, head)
    if env is None:
        pytest.skip("no K/V layout both commits' trees can drive")
    out = tmp_path / "comparison.json"
    done = spyre_bench("compare", "--base", spec(base), "--head", spec(head), "--tier", "quick",
                       *env, "--json", str(out), "--fail-on", "wrong")
    assert done.returncode in (0, 1), done.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["exact_compared"] >= 1000, doc["skipped"][:3]


def test_run_measures_the_commits(tmp_path):
    drivable = [r for r in REVS if not missing_modules(r, layouts(r)[0][0])]
    if not drivable:
        pytest.skip("no commit whose default K/V layout its tree can drive")
    done = spyre_bench("run", "--repo", REAL, "--tier", "tiny", "--results-dir",
                       str(tmp_path / "results"), f"{drivable[-1]}^!", timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
