"""Which vLLM a subject's loads import (harness/subjects/load/vllm_real.py, ``SPYRE_BENCH_VLLM``): where
``import vllm`` fails, ``auto`` takes the stand-ins and says why, ``real`` is an error. Run in
fresh interpreters with vLLM made unimportable, so this holds in a venv that has vLLM too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.subjects.load.vllm_standins import VLLM_VERSION

#: A fresh interpreter where ``import vllm`` fails, reporting the choice and the loader's table.
PROBE = """
import json, logging, sys
sys.modules["vllm"] = None   # import vllm: ModuleNotFoundError, as where it is not installed
from harness.errors import SubjectError
from harness.subjects.load import loader, vllm_real
try:
    choice = vllm_real.choice()
except SubjectError as exc:
    print(json.dumps({"error": str(exc)}))
    raise SystemExit(0)
table = loader.vllm_standins(logging.NullHandler())
print(json.dumps({"real": choice.real, "label": choice.label(), "window": table.real is not None,
                  "vllm": getattr(table.get("vllm"), "__spyre_bench_standin__", None)}))
"""


def probe(mode: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "SPYRE_BENCH_VLLM"}
    if mode is not None:
        env["SPYRE_BENCH_VLLM"] = mode
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("mode", [None, "auto", "AUTO"])
def test_auto_takes_the_stand_ins_where_vllm_does_not_import_and_says_so(mode):
    found = probe(mode)
    assert found["real"] is False and found["window"] is False
    assert found["vllm"] == VLLM_VERSION   # the loader hands out the stand-in modules
    assert found["label"].startswith(f"vLLM stand-ins (following {VLLM_VERSION}; ")
    assert "vllm not importable: ModuleNotFoundError" in found["label"]


def test_standins_asked_for_are_the_stand_ins_and_say_so():
    found = probe("standins")
    assert (found["real"], found["vllm"]) == (False, VLLM_VERSION)
    assert found["label"] == f"vLLM stand-ins (following {VLLM_VERSION}; SPYRE_BENCH_VLLM=standins)"


def test_real_asked_for_where_vllm_does_not_import_is_an_error_naming_why():
    error = probe("real")["error"]
    assert error.startswith("SPYRE_BENCH_VLLM=real, but vLLM cannot be imported here: ")
    assert "ModuleNotFoundError" in error


def test_an_unknown_value_is_an_error_naming_the_choices():
    assert probe("cuda")["error"] == ("SPYRE_BENCH_VLLM='cuda': expected one of auto, real, "
                                      "standins")


def test_describe_names_the_vllm_a_commit_was_loaded_with(spyre_repo, monkeypatch):
    from harness.subjects import resolve_subject
    from harness.subjects.load import vllm_real

    monkeypatch.setenv("SPYRE_BENCH_VLLM", "standins")
    described = resolve_subject(spyre_repo.spec("gen4")).describe()
    assert described["vllm"] == vllm_real.choice().label()
    assert described["vllm"].startswith("vLLM stand-ins")
