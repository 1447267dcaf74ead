"""Taking a self-contained function out of a module that cannot be imported."""

from __future__ import annotations

import pytest

from harness.subjects.source.extract import KERNEL_IMPORTS, ModuleSource, NotSelfContained

SOURCE = '''\
from __future__ import annotations
import math
import functools
from vllm.config import VllmConfig
from spyre_inference import envs

LIMIT = 4
SCALE = LIMIT * 2
_unused = undefined_name


def _square(x: VllmConfig) -> int:
    return x * x


@functools.cache
@some_vllm_decorator(dynamic=False)
def helper(n: int, k: VllmConfig = None) -> list[int]:
    """Uses a helper, constants, math and a comprehension."""
    return [_square(i) + SCALE for i in range(n) if math.isfinite(i)]


def needs_envs() -> bool:
    return envs.FLAG


def nested(n):
    def inner(m: VllmConfig):
        return helper(m)
    return inner(n)


def kernel(query, query_row_ids, k_pages, v_pages, block_ids, mask, scale, num_seqs, num_blocks):
    return num_blocks


def chunked(query, query_row_ids, k_pages, v_pages, block_ids, mask, scale, num_seqs,
            blocks_per_chunk, num_chunks):
    return num_chunks


class Builder:
    pass


def uses_class():
    return Builder()
'''


@pytest.fixture(scope="module")
def module():
    return ModuleSource(SOURCE, "/x/backends/spyre_attn.py")


def run(module, name, allowed=None):
    namespace = {"__builtins__": __builtins__}
    exec(module.compile([name], *([allowed] if allowed else [])), namespace)
    return namespace


def test_a_function_comes_with_what_it_uses_and_nothing_else(module):
    ns = run(module, "helper")
    assert ns["helper"](3) == [8, 9, 12]
    assert {"_square", "SCALE", "LIMIT", "math"} <= set(ns)
    assert not {"envs", "VllmConfig", "functools", "_unused", "needs_envs"} & set(ns)
    assert not hasattr(ns["helper"], "cache_info")  # decorators dropped
    assert run(module, "nested")["nested"](2) == [8, 9]


@pytest.mark.parametrize("name, why", [
    ("needs_envs", "uses 'envs', imported from spyre_inference"),
    ("uses_class", "uses 'Builder', a ClassDef"),
    ("missing", "uses 'missing', which is not defined"),
])
def test_what_cannot_be_taken_out_is_named(module, name, why):
    with pytest.raises(NotSelfContained, match=why):
        module.compile([name])
    with pytest.raises(NotSelfContained, match=why):  # remembered, raised again
        module.compile([name])


def test_allowed_imports_are_a_parameter():
    module = ModuleSource("import torch\ndef f():\n    return torch\n", "m.py")
    with pytest.raises(NotSelfContained, match="imported from torch"):
        module.compile(["f"])
    assert module.compile(["f"], KERNEL_IMPORTS) is module.compile(["f"], KERNEL_IMPORTS)


def test_kernels_are_found_by_signature(module):
    found = [(k.name, k.generation) for k in module.kernels()]
    assert found == [("kernel", "A"), ("chunked", "B")]
    assert module.literal("LIMIT") == 4 and module.literal("SCALE") is None


def test_line_numbers_survive_extraction(module):
    code = module.compile(["helper"])
    ns = {"__builtins__": __builtins__}
    exec(code, ns)
    first = ns["helper"].__code__.co_firstlineno
    assert SOURCE.splitlines()[first - 1].startswith("def helper")
