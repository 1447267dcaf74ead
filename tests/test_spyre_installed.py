"""``spyre-inference``: the installed package, imported whole when vLLM imports, else by path.

The package is "installed" by putting an exported checkout on PYTHONPATH; "vLLM" is a three-module
fake written here, just enough for the package root and the bucketer to import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

FAKE_VLLM = {
    "vllm/__init__.py": "",
    "vllm/config.py": "class VllmConfig:\n    pass\n",
    "vllm/logger.py": "import logging\n\ndef init_logger(name):\n"
                      "    return logging.getLogger(name)\n",
}

PROBE = """
import json, os, sys
from harness.config import EngineConfig, Overrides
from harness.subjects import resolve_subject
env = dict(os.environ)
s = resolve_subject("spyre-inference")
kv = Overrides.from_env({"SPYRE_ATTN_KV_BUCKETS": "128,8192"})
got = [s.bucketing(EngineConfig(block_size=64, max_model_len=2048, max_num_seqs=m), o).kv
       for m, o in ((32, kv), (16, Overrides()), (8, kv))]
print(json.dumps({"mode": s.mode, "identity": s.identity, "kv": got,
                  "env_kept": dict(os.environ) == env, "caps": sorted(s.capabilities)}))
"""


@pytest.fixture(scope="module")
def installed(spyre_repo, tmp_path_factory):
    root = tmp_path_factory.mktemp("installed")
    checkout = spyre_repo.export("gen3", root / "site")
    fake = root / "fake"
    for rel, text in FAKE_VLLM.items():
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(text)
    return checkout, fake


def probe(*paths) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in paths)}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_with_vllm_the_installed_package_is_imported_whole(installed):
    checkout, fake = installed
    got = probe(fake, checkout)
    assert got["mode"] == "stack"
    # The same imported module answers every override set: clear_env_cache() makes that right.
    assert got["kv"] == [[128, 2048], [64, 128, 256, 512, 1024, 2048], [128, 2048]]
    assert got["env_kept"] and "chunking" in got["caps"]
    assert got["identity"].startswith("sha256:")


def test_without_vllm_it_is_loaded_by_path(installed):
    checkout, _ = installed
    got = probe(checkout)
    assert got["mode"] == "path"
    assert got["kv"] == [[128, 2048], [64, 128, 256, 512, 1024, 2048], [128, 2048]]
    assert got["env_kept"]


def test_stack_and_path_modes_give_the_same_bucketing(installed):
    checkout, fake = installed
    stack, path = probe(fake, checkout), probe(checkout)
    assert {**stack, "mode": None} == {**path, "mode": None}
