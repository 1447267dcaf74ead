"""Which of a commit's modules its attention figures can depend on, found by reading them.

A figure is decided by the modules the harness runs from a commit (everything under
``v1/attention``: bucketer, backends, ops, ``attn_layer``, the jagged plan; ``custom_ops``; and
``envs.py``) and whatever those can import. A commit touching none of them (docs, models, the
worker, CI) has the same figures, so the persistent memo (:mod:`harness.subjects.memo.figures`) keys on
this closure, not on the whole tree. Nothing is run: every module is parsed and followed through
``import`` and ``from ... import`` (relative ones too, also inside functions and ``try``) and
through string literals naming ``spyre_inference`` modules (dynamic imports, registered class
paths), so the closure over-approximates what a load can reach rather than missing a module.
A module that does not parse makes the closure the whole tree.

``platform.py`` is imported (for its Dynamo settings) but none of its functions is called: what
it reaches at import counts (its module-level statements, class bodies and the functions its
module level calls), not the worker and model classes its methods name for vLLM, which would
make every commit a change.

Names asked for and absent count too (adding the module a guarded import looks for changes
what the load does); packages count as packages, not by their ``__init__`` (a load runs none).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Mapping

PACKAGE = "spyre_inference"
#: Folders whose every module is an entry (what the builder, bucketer and kernels run).
ENTRY_FOLDERS = ("spyre_inference/v1/attention/", "spyre_inference/custom_ops/")
#: Single modules the harness runs besides (the env parser).
ENTRY_FILES = ("spyre_inference/envs.py",)
#: Modules the harness only imports (the platform, for its compile settings): what their import
#: runs counts, not what their methods would.
IMPORTED_ONLY = ("spyre_inference.platform",)
_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\.?")


class _Tree:
    """The snapshot's modules by dotted name (``a.b`` for ``a/b.py``) and its packages."""

    def __init__(self, files: Mapping[str, bytes]):
        self.files = files
        self.modules = {rel[:-3].replace("/", "."): rel for rel in files
                        if rel.endswith(".py") and not rel.endswith("/__init__.py")}
        self.packages = {".".join(rel.split("/")[:i]) for rel in files
                         for i in range(1, rel.count("/") + 1)}

    def matching(self, literal: str) -> set[str]:
        """Modules a string literal may name: itself, what it is a prefix of (an f-string's
        constant head), and the module an attribute path starts with (``pkg.mod.Class``). The
        root package's bare name is only that package (a logger's name, not a dynamic import)."""
        if literal == PACKAGE:
            return set()
        head = literal.rstrip(".")
        return {m for m in self.modules
                if m == head or m.startswith(head + ".") or head.startswith(m + ".")
                or (literal.endswith(".") and m.startswith(literal))}


def closure(files: Mapping[str, bytes]) -> dict[str, bytes | str]:
    """Dotted name -> the module's source, ``"package"`` or ``"absent"``, for every name the
    entry modules can reach; ``{"*": "whole tree"}`` plus every module when one fails to parse."""
    return reach(files)[0]


def reach(files: Mapping[str, bytes]) -> tuple[dict[str, bytes | str], frozenset[str]]:
    """:func:`closure`, and every string literal of the modules in it (the env names a load
    may read are among them)."""
    tree = _Tree(files)
    literals: set[str] = set()
    todo = [m for m, rel in tree.modules.items()
            if rel.startswith(ENTRY_FOLDERS) or rel in ENTRY_FILES]
    todo += [rel[:-3].replace("/", ".") for rel in ENTRY_FILES if rel not in files]
    seen: dict[str, bytes | str] = {}
    try:
        for name in IMPORTED_ONLY:
            if name in tree.modules:
                source = seen[name] = tree.files[tree.modules[name]]
                todo += _references(name, _import_time(ast.parse(source)), tree, literals)
            else:
                seen[name] = "absent"
    except (SyntaxError, ValueError):
        return _whole(tree)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name in tree.modules:
            source = tree.files[tree.modules[name]]
            seen[name] = source
            try:
                todo += _references(name, ast.walk(ast.parse(source)), tree, literals)
            except (SyntaxError, ValueError):
                return _whole(tree)
        else:
            seen[name] = "package" if name in tree.packages else "absent"
    return seen, frozenset(literals)


def _whole(tree: _Tree) -> tuple[dict[str, bytes | str], frozenset[str]]:
    """Every module, and every upper-case word of them as a literal (env names included)."""
    words = {w.decode() for r in tree.modules.values()
             for w in re.findall(rb"[A-Z_][A-Z0-9_]{2,}", tree.files[r])}
    return {"*": "whole tree", **{m: tree.files[r] for m, r in tree.modules.items()}}, \
        frozenset(words)


def digest(modules: Mapping[str, bytes | str]) -> str:
    """A hash of a :func:`closure`: equal for two commits whose attention modules are equal."""
    h = hashlib.sha256()
    for name, value in sorted(modules.items()):
        body = value if isinstance(value, bytes) else value.encode()
        h.update(b"%d:%s\0%d:" % (len(name), name.encode(), len(body)) + body)
    return h.hexdigest()


def _import_time(module: ast.Module) -> list[ast.AST]:
    """The nodes of a module its import runs: module-level statements and class bodies (not
    function bodies), and the bodies of module-level functions the module level calls."""
    functions = {n.name: n for n in module.body
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    kept, called = [], set()
    todo = [n for n in module.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                kept += [n for d in node.decorator_list for n in ast.walk(d)]
            continue
        kept.append(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in functions and node.func.id not in called:
            called.add(node.func.id)
            todo += functions[node.func.id].body
        todo += ast.iter_child_nodes(node)
    for f in functions.values():
        kept += [n for d in f.decorator_list for n in ast.walk(d)]
    return kept


def _references(name: str, nodes, tree: _Tree, literals: set[str]) -> list[str]:
    """Every ``spyre_inference`` name the module imports or spells out, and the packages on the
    way (a name's parents are imported before it); its string literals go to ``literals``."""
    package = name.rpartition(".")[0]
    found: list[str] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            if base is None:
                continue
            found.append(base)
            found += [f"{base}.{a.name}" for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            literal = node.value
            literals.add(literal)
            if literal.startswith(PACKAGE) and _NAME.fullmatch(literal):
                found += tree.matching(literal)
                if not literal.endswith("."):
                    found.append(literal)
    ours = [n for n in found if n == PACKAGE or n.startswith(PACKAGE + ".")]
    parents = {".".join(n.split(".")[:i]) for n in ours for i in range(1, n.count(".") + 1)}
    return ours + sorted(parents)


def _absolute(module: str | None, level: int, package: str) -> str | None:
    """``from <level dots><module> import ...`` as an absolute name, None when it climbs out."""
    if level == 0:
        return module
    parts = package.split(".") if package else []
    if level - 1 > len(parts) or (level - 1 == len(parts) and not module):
        return None
    base = parts[:len(parts) - (level - 1)]
    return ".".join(base + ([module] if module else [])) or None
