"""The pipeline's layers, read from the source: no module imports back up a layer, no modules
import each other in a circle, and no module of subjects/ grows past a size one can read.

Bottom to top: subjects -> (model, evaluate) -> measure -> store -> analyze -> report -> publish,
with cli on top. A lower layer that imports a higher one ties data to how it is shown (or posted),
so the check reads every ``import`` with ``ast``: at module level or inside a function, absolute
(``harness.report.x``, ``from harness import report``) or relative (``from ..report import x``).
A circle counts the same imports (inside a function or under ``TYPE_CHECKING`` too): two modules
that need each other are one module, or a third module is missing.
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


def _imports(path: Path, root: Path):
    """``(source, names)`` per import statement of ``path`` (a file under ``root``), the source
    an absolute dotted name; ``names`` empty for ``import source``."""
    module = _module(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            yield source, tuple(alias.name for alias in node.names)


def imported(path: Path, root: Path = HARNESS.parent) -> set[str]:
    """Every module ``path`` (a file under ``root``) imports, as absolute dotted names
    (``from a import b`` gives both ``a`` and ``a.b``: ``b`` may be a module)."""
    out: set[str] = set()
    for source, names in _imports(path, root):
        out.add(source)
        out |= {f"{source}.{name}" for name in names}
    return out


def import_graph(root: Path = HARNESS.parent, package: str = "harness") -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports: ``from a import b`` is an arrow to the
    module ``a.b`` where there is one, else to ``a`` (a package's ``__init__`` run on the way to
    its submodule is no arrow)."""
    paths = {_module(p, root): p for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        arrows = set()
        for source, names in _imports(path, root):
            modules = {f"{source}.{n}" for n in names} & paths.keys()
            if len(modules) < len(names) or not names:
                modules.add(source)
            arrows |= modules & paths.keys()
        graph[name] = arrows - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


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


def test_the_circle_reader_sees_a_circle_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "harness" / "measure"
    pkg.mkdir(parents=True)
    (tmp_path / "harness" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from harness.measure.b import x\n")
    (pkg / "b.py").write_text("def f():\n    from harness.measure import a\n")
    (pkg / "c.py").write_text("from harness.measure import a, b\n")
    assert circles(import_graph(tmp_path)) == [["harness.measure.a", "harness.measure.b"]]


def test_no_import_circle_in_the_harness():
    found = circles(import_graph())
    assert not found, "modules that import each other:\n" + "\n".join(
        " <-> ".join(c) for c in found)


#: The most lines a module of subjects/ may hold: a class that grows past it has a second job.
SUBJECT_MODULE_LINES = 600


def test_no_module_of_subjects_is_over_600_lines():
    sizes = {p.relative_to(HARNESS.parent): len(p.read_text().splitlines())
             for p in sorted((HARNESS / "subjects").rglob("*.py"))}
    big = [f"{p}: {n} lines" for p, n in sizes.items() if n > SUBJECT_MODULE_LINES]
    assert not big, f"over {SUBJECT_MODULE_LINES} lines:\n" + "\n".join(big)
