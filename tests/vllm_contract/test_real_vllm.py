"""Contract with the real vLLM: a commit's figures are the same under the stand-ins and under
vLLM 0.28.0 itself (harness/subjects/load/vllm_real.py, ``SPYRE_BENCH_VLLM``).

Opt-in: ``make test-vllm`` builds a venv with the real vLLM (requirements/vllm-constraints.txt)
and runs this; elsewhere every test here is skipped, saying why. Every commit of the fixture
repository, and with ``SPYRE_BENCH_REAL=<git checkout>`` (``REAL_REVS`` to pick commits, as for
tests/real) a real spyre-inference checkout's, goes through ``cost --tier tiny --json`` and
``ladders --tier tiny --json`` once per vLLM; exit status and JSON must be identical, and some
figure must have been computed (identical skips compare nothing).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.spyre_repo import BROKEN, build_repo

REAL = os.environ.get("SPYRE_BENCH_REAL")
BUCKETER = "spyre_inference/v1/attention/spyre_attn_bucketer.py"
COMMANDS = {"cost": ("cost", "--tier", "tiny", "--json"),
            "ladders": ("ladders", "--tier", "tiny", "--json")}

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed here: make test-vllm")


def spyre_bench(mode: str, *args: str) -> subprocess.CompletedProcess:
    # the figure memo off: its key does not name the vLLM, so it would hand one run's figures
    # to the other and the contract would compare a run with itself
    env = {**os.environ, "SPYRE_BENCH_VLLM": mode, "SPYRE_BENCH_MEMO": "0",
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, timeout=1800, env=env)


@pytest.fixture(scope="session")
def real_vllm() -> str:
    """The real vLLM's label, once it imports here with every name of the surface."""
    done = subprocess.run(
        [sys.executable, "-c", "from harness.subjects.load import vllm_real; "
                               "print(vllm_real.choice().label())"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "SPYRE_BENCH_VLLM": "real"})
    if done.returncode:
        pytest.skip(f"the real vLLM does not import here: {done.stderr.strip()[-500:]}")
    return done.stdout.strip().splitlines()[-1]


def _real_revs() -> list[str]:
    if not REAL:
        return []

    def git(*args):
        return subprocess.run(["git", "-C", REAL, *args], capture_output=True, text=True,
                              check=True).stdout

    given = os.environ.get("REAL_REVS", "").split()
    if given:
        return [git("rev-parse", "--verify", f"{r}^{{commit}}").strip() for r in given]
    revs = git("rev-list", "--first-parent", "--reverse", "HEAD").split()
    return [r for r in revs if git("ls-tree", "--name-only", r, BUCKETER).strip()]


@pytest.fixture(scope="session")
def fixture_repo(tmp_path_factory):
    return build_repo(tmp_path_factory.mktemp("vllm-contract") / "spyre-inference")


#: every named commit of the fixture repository (build_repo's names), then the real ones
FIXTURE_NAMES = ["no-bucketer", "pre-810", "810-topup", "810-clamp", "gen3", "gen4",
                 "810-pre-builder", "head-major", BROKEN]
#: fixture commits that compute nothing under either vLLM (no bucketer yet; a bucketer importing a
#: module never committed): their skips and errors must still be the same
COMPUTE_NOTHING = ("no-bucketer", BROKEN)
SUBJECTS = [f"fixture:{n}" for n in FIXTURE_NAMES] + [f"real:{r}" for r in _real_revs()]


def _spec(subject: str, fixture_repo) -> str:
    kind, _, name = subject.partition(":")
    if kind == "fixture":
        return fixture_repo.spec(name)
    return f"git:{Path(REAL).resolve()}@{name}"


def _computed(rows) -> int:
    """Subject entries with figures (neither skipped nor failed)."""
    return sum(1 for row in rows for entry in row.get("subjects", {}).values()
               if isinstance(entry, dict) and not ({"skipped", "failed"} & entry.keys()))


def test_the_fixture_covers_every_named_commit(fixture_repo):
    """A generation added to the fixture is driven here too."""
    assert sorted(fixture_repo.commits) == sorted(FIXTURE_NAMES)


def test_the_stand_in_metadata_has_the_real_fields(real_vllm):
    """The stand-ins' CommonAttentionMetadata is vLLM 0.28.0's, field for field, in order."""
    done = subprocess.run([sys.executable, "-c", (
        "import dataclasses, json; from harness.subjects.load import vllm_real; vllm_real.load(); "
        "from vllm.v1.attention.backend import CommonAttentionMetadata as c; "
        "print(json.dumps([f.name for f in dataclasses.fields(c)]))")],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    from harness.subjects.load.vllm_standins import CommonAttentionMetadata
    real = json.loads(done.stdout.strip().splitlines()[-1])
    assert [f.name for f in dataclasses.fields(CommonAttentionMetadata)] == real


#: In a fresh interpreter under SPYRE_BENCH_VLLM=real: what a commit's builder session is built
#: on, and what is left of it after.
SESSION_PROBE = """
import json, sys, torch
from harness.config import EngineConfig, Overrides
from harness.subjects import resolve_subject
from harness.subjects.spyre.drive.session import BuilderSession
from harness.workloads import Seq
subject = resolve_subject(sys.argv[1])
overrides = Overrides.from_env({"SPYRE_BATCHED_DECODE": "1"})
with BuilderSession(subject.tree, subject.origin, EngineConfig(block_size=64, max_model_len=2048),
                    overrides) as session:
    step = (Seq(64, 1),) * 4
    found = {"bases": [c.__module__ for c in session.builder_cls.__mro__],
             "metadata": type(session.common_metadata(step)).__module__,
             "vllm": sys.modules["vllm"].__file__,
             "batched": session.record_step(step)[0].dispatch.batched,
             "op_inside": hasattr(torch.ops.vllm, "spyre_convert")}
found["op_after"] = hasattr(torch.ops.vllm, "spyre_convert")
found["commit_modules_after"] = sorted(n for n in sys.modules if n.startswith("spyre_inference"))
found["vllm_after"] = "vllm.v1.attention.backend" in sys.modules
print(json.dumps(found))
"""


def test_real_mode_drives_the_commit_on_the_real_vllm(real_vllm, fixture_repo):
    """Under ``real`` the commit's classes derive from vLLM's own, its metadata is vLLM's class,
    and once the session closes its op and modules are gone while vLLM stays imported."""
    done = subprocess.run([sys.executable, "-c", SESSION_PROBE, fixture_repo.spec("gen4")],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "SPYRE_BENCH_VLLM": "real"})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert "vllm.v1.attention.backend" in found["bases"]
    assert found["metadata"] == "vllm.v1.attention.backend"
    assert "site-packages" in found["vllm"]
    assert found["batched"] == 4
    assert found["op_inside"] is True
    assert (found["op_after"], found["commit_modules_after"]) == (False, [])
    assert found["vllm_after"]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("subject", SUBJECTS)
def test_figures_are_the_same_with_the_real_vllm(subject, command, real_vllm, fixture_repo):
    spec = _spec(subject, fixture_repo)
    args = (*COMMANDS[command], "--subject", spec)
    standins = spyre_bench("standins", *args)
    real = spyre_bench("real", *args)
    assert (real.returncode, standins.returncode) == (standins.returncode, standins.returncode), (
        f"{real_vllm}: exit {real.returncode}, stand-ins {standins.returncode}\n"
        f"real: {real.stderr[-1500:]}\nstand-ins: {standins.stderr[-1500:]}")
    if standins.returncode == 2 and not standins.stdout.strip():
        # nothing computed: the same one-line error under either vLLM
        assert standins.stderr.strip().splitlines()[-1] == real.stderr.strip().splitlines()[-1]
        rows = []
    else:
        assert standins.stdout.strip(), standins.stderr[-2000:]
        rows = json.loads(standins.stdout)
        assert json.loads(real.stdout) == rows, f"{real_vllm} and the stand-ins differ on {spec}"
    if subject.partition(":")[2] in COMPUTE_NOTHING:
        assert not _computed(rows)
    else:
        assert _computed(rows), f"nothing computed on {spec} under either vLLM: nothing compared"
