"""The pipeline's layers, read from the source: no module imports back up a layer.

Bottom to top: subjects -> (model, evaluate) -> measure -> store -> analyze -> report -> publish,
with cli on top. A lower layer that imports a higher one ties data to how it is shown (or posted),
so the check reads every ``import`` with ``ast``: at module level or inside a function, absolute
(``harness.report.x``, ``from harness import report``) or relative (``from ..report import x``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"
LOWER = ("analyze", "measure", "subjects")
HIGHER = ("harness.report", "harness.publish")
#: Modules in cli/ that every command may share; anything else there is one command's own.
CLI_SHARED = {"__init__", "options", "common", "console"}


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, root: Path = HARNESS.parent) -> set[str]:
    """Every module ``path`` (a file under ``root``) imports, as absolute dotted names
    (``from a import b`` gives both ``a`` and ``a.b``: ``b`` may be a module)."""
    module = _module(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            out.add(source)
            out |= {f"{source}.{alias.name}" for alias in node.names}
    return out


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_import_reader_sees_every_spelling(tmp_path):
    pkg = tmp_path / "harness" / "analyze"
    pkg.mkdir(parents=True)
    probe = pkg / "probe.py"
    probe.write_text("import harness.report.tables\nfrom harness import publish\n"
                     "def f():\n    from ..report import markdown\n    from . import stats\n")
    assert {"harness.report.tables", "harness.publish", "harness.report.markdown",
            "harness.analyze.stats"} <= imported(probe, tmp_path)


@pytest.mark.parametrize("layer", LOWER)
def test_lower_layers_never_import_report_or_publish(layer):
    bad = [f"{path.relative_to(HARNESS.parent)}: {name}"
           for path in sorted((HARNESS / layer).rglob("*.py"))
           for name in sorted(imported(path)) if any(_under(name, up) for up in HIGHER)]
    assert not bad, "imports back up a layer:\n" + "\n".join(bad)


def test_no_command_imports_another_commands_module():
    commands = {p.stem for p in (HARNESS / "cli").glob("*.py")} - CLI_SHARED
    bad = []
    for path in sorted((HARNESS / "cli").glob("*.py")):
        others = {name.removeprefix("harness.cli.").split(".")[0] for name in imported(path)
                  if _under(name, "harness.cli")}
        bad += [f"cli/{path.name}: harness.cli.{other}"
                for other in sorted(others & commands - {path.stem})]
    assert not bad, "a command imports another command's module:\n" + "\n".join(bad)
