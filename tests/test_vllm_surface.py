"""The vLLM surface spyre-inference's attention path imports (harness/subjects/load/vllm_surface.tsv),
covered name by name by the stand-ins; and the fixtures import only names from that surface, so a
fixture never leans on a stand-in the real files do not need."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest
import torch

from harness.subjects.load import torch_spyre_standins
from harness.subjects.load.vllm_standins import close_modules, modules
from tests.fixtures.spyre_repo import GENERATIONS
from tests.fixtures.spyre_sources import generation_files, head_major_files

SURFACE = Path(__file__).parents[1] / "harness" / "subjects" / "load" / "vllm_surface.tsv"


def surface() -> list[tuple[str, str, str]]:
    rows = []
    for line in SURFACE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            module, name, files = line.split("\t")
            rows.append((module, name, files))
    return rows


def test_the_surface_names_real_files_for_every_entry():
    rows = surface()
    assert len(rows) >= 30
    assert len({(m, n) for m, n, _ in rows}) == len(rows)
    assert all(files.strip() for _, _, files in rows)


@pytest.mark.parametrize("module, name", [(m, n) for m, n, _ in surface()])
def test_every_name_the_real_files_import_resolves_in_the_stand_ins(module, name):
    table = {**modules(logging.NullHandler()), **torch_spyre_standins.modules()}
    try:
        assert module in table, f"no stand-in module {module}"
        namespace: dict = {}
        imported, *attributes = name.split(".")   # Attention.forward: read off the class
        exec(f"from {module} import {imported} as found", _importer(table), namespace)
        found = namespace["found"]
        for attribute in attributes:
            found = getattr(found, attribute)
        assert found is not None
    finally:
        close_modules(table)


def test_the_math_helpers_compute_what_vllm_documents():
    math_utils = modules(logging.NullHandler())["vllm.utils.math_utils"]
    assert [math_utils.cdiv(n, 64) for n in (1, 64, 65, 128)] == [1, 1, 2, 2]
    assert [math_utils.next_power_of_2(n) for n in (0, 1, 2, 3, 64, 65)] == [1, 1, 2, 4, 64, 128]


def _importer(table):
    """Globals whose __import__ serves the stand-in table (nothing enters sys.modules)."""
    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        return table[name]
    return {"__builtins__": {"__import__": __import__}}


def _vllm_imports(source: str) -> set[tuple[str, str]]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vllm":
            found |= {(node.module, a.name) for a in node.names}
    return found


def test_fixtures_import_only_names_of_the_real_surface():
    known = {(m, n) for m, n, _ in surface()}
    files = {}
    for generation in GENERATIONS:
        files.update({f"{generation}:{p}": t for p, t in generation_files(generation).items()})
    files.update({f"head-major:{p}": t for p, t in head_major_files().items()})
    used = {}
    for path, text in files.items():
        if path.endswith(".py"):
            for entry in _vllm_imports(text):
                used.setdefault(entry, path)
    assert {e: p for e, p in used.items() if e not in known} == {}
    # and they do exercise what no stand-in had before the real files were read
    assert {("vllm.utils.torch_utils", "direct_register_custom_op"),
            ("vllm.v1.kv_cache_interface", "EncoderOnlyAttentionSpec"),
            ("vllm.model_executor.layers.attention.attention", "Attention")} <= set(used)


def _plus_one(tensor: torch.Tensor) -> torch.Tensor:
    return tensor + 1


def test_a_custom_op_registered_in_one_load_is_gone_after_it():
    table = modules(logging.NullHandler())
    register = table["vllm.utils.torch_utils"].direct_register_custom_op
    body = _plus_one

    register("spyre_bench_surface_probe", body)
    assert torch.ops.vllm.spyre_bench_surface_probe(torch.zeros(1)).item() == 1
    close_modules(table)
    with pytest.raises(AttributeError):
        torch.ops.vllm.spyre_bench_surface_probe
    again = modules(logging.NullHandler())   # a later load registers the same name afresh
    again["vllm.utils.torch_utils"].direct_register_custom_op("spyre_bench_surface_probe", body)
    close_modules(again)


def test_for_each_tile_threads_the_carry_over_narrowed_tiles():
    """The documented contract: init first, one trip per tile, tiles keep their leading axis,
    operands passed whole where their dim is None."""
    xs = torch.arange(6.0).view(6, 1)
    whole = torch.tensor([10.0])

    def body(carry, tiles):
        tile, w = tiles
        assert tile.shape == (2, 1) and w is whole
        return (carry[0] + tile.sum() + w,), tile.sum()

    (total,), outs = torch_spyre_standins.for_each_tile(body, (xs, whole), dims=(0, None),
                                                        tile_size=2, init=(torch.zeros(1),))
    assert total.item() == 15 + 30 and outs is None
    _, joined = torch_spyre_standins.for_each_tile(
        lambda carry, tiles: (carry, tiles[0] * 2), (xs,), dims=(0,), tile_size=3, init=None,
        out_dim=0)
    assert joined.flatten().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    with pytest.raises(ValueError, match="whole number"):
        torch_spyre_standins.for_each_tile(body, (xs, whole), dims=(0, None), tile_size=4,
                                           init=(torch.zeros(1),))
