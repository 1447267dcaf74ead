"""Take self-contained functions out of a module's source without running the module.

``backends/spyre_attn.py`` imports much of vLLM at its top, yet two things in it use only torch or
plain Python: the batched decode kernel of generation A, and the ladder helper generation-1
bucketers import from it. Parsing the file and compiling just a function plus the top-level names
it needs (helpers, constants, allowed imports) gives the subject's own code with none of its
module's dependencies. Decorators and annotations are dropped: annotations name vLLM types, and a
``torch.compile`` decorator is the caller's business (the harness compiles kernels itself).
"""

from __future__ import annotations

import ast
import builtins
import copy as copy_module
import symtable
from dataclasses import dataclass

from harness.generations import Generation

#: Standard-library modules an extracted helper may import (nothing heavy, nothing with state).
STDLIB_IMPORTS = frozenset({"math", "bisect", "functools", "itertools", "operator", "typing",
                            "numbers", "collections"})
#: Kernels may import torch as well.
KERNEL_IMPORTS = STDLIB_IMPORTS | {"torch"}

#: The leading parameters of both batched decode kernel generations (docs/spyre-inference.md, section 3).
KERNEL_PREFIX = ("query", "query_row_ids", "k_pages", "v_pages", "block_ids")


class NotSelfContained(Exception):
    """The function needs a name that comes from a disallowed import or is not defined."""


@dataclass(frozen=True)
class KernelDef:
    name: str
    #: A (one block per loop step: ``num_blocks``) or B (chunked: ``blocks_per_chunk``).
    generation: Generation
    lineno: int


class ModuleSource:
    """One module's source, parsed once; extraction compiles only what a function needs."""

    def __init__(self, source: bytes | str, filename: str):
        self.filename = filename
        self.tree = ast.parse(source, filename)
        self.bindings: dict[str, ast.stmt] = {}
        self._compiled: dict[tuple, object] = {}
        for node in self.tree.body:
            for name, stmt in _bound_names(node):
                self.bindings.setdefault(name, stmt)

    def kernels(self) -> list[KernelDef]:
        """Top-level functions with the batched decode kernel's signature, in source order."""
        found = []
        for node in self.tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            params = [a.arg for a in node.args.posonlyargs + node.args.args]
            if tuple(params[:len(KERNEL_PREFIX)]) != KERNEL_PREFIX:
                continue
            if "blocks_per_chunk" in params and "num_chunks" in params:
                found.append(KernelDef(node.name, Generation.B, node.lineno))
            elif "num_blocks" in params:
                found.append(KernelDef(node.name, Generation.A, node.lineno))
        return found

    def literal(self, name: str):
        """The value of a top-level ``NAME = <literal>``, or None."""
        node = self.bindings.get(name)
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
        return None

    def compile(self, names: list[str], allowed_imports: frozenset[str] = STDLIB_IMPORTS):
        """A code object defining ``names`` and everything they need, in source order.

        Raises NotSelfContained naming the first dependency that is not allowed. Memoised: the
        code object is immutable, and each caller executes it in a fresh namespace.
        """
        key = (tuple(names), allowed_imports)
        if key not in self._compiled:
            try:
                self._compiled[key] = self._compile(names, allowed_imports)
            except NotSelfContained as exc:
                self._compiled[key] = exc
        found = self._compiled[key]
        if isinstance(found, NotSelfContained):
            raise NotSelfContained(*found.args)
        return found

    def _compile(self, names, allowed_imports):
        needed: dict[int, ast.stmt] = {}
        seen: set[str] = set()

        def visit(name: str, user: str) -> None:
            if name in seen:
                return
            seen.add(name)
            node = self.bindings.get(name)
            if node is None:
                if hasattr(builtins, name):
                    return
                raise NotSelfContained(f"{user} uses {name!r}, which is not defined at the top "
                                       f"of {self.filename}")
            if isinstance(node, ast.Import | ast.ImportFrom):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                root = (module or "").split(".")[0]
                if getattr(node, "level", 0) or root not in allowed_imports:
                    raise NotSelfContained(f"{user} uses {name!r}, imported from "
                                           f"{'.' * getattr(node, 'level', 0)}{module}")
            elif isinstance(node, ast.ClassDef | ast.AsyncFunctionDef):
                raise NotSelfContained(f"{user} uses {name!r}, a {type(node).__name__}")
            else:
                node = _stripped(node)
                for dep in sorted(_free_names(node)):
                    visit(dep, name)
            needed[id(node)] = node

        for name in names:
            visit(name, name)
        order = {id(n): i for i, n in enumerate(self.tree.body)}
        body = sorted(needed.values(), key=lambda n: order.get(id(getattr(n, "_origin", n)), 0))
        module = ast.Module(body=body, type_ignores=[])
        ast.fix_missing_locations(module)
        return compile(module, self.filename, "exec", dont_inherit=True)


def _bound_names(node: ast.stmt):
    """(name, statement binding just that name) for a top-level statement."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name, node
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Name):
                yield target.id, node
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
        yield node.target.id, node
    elif isinstance(node, ast.Import | ast.ImportFrom):
        for alias in node.names:
            if alias.name == "*":
                continue
            bound = alias.asname or alias.name.split(".")[0]
            if isinstance(node, ast.Import):
                single = ast.Import(names=[alias])
            else:
                single = ast.ImportFrom(module=node.module, names=[alias], level=node.level)
            single = ast.copy_location(single, node)
            single._origin = node  # sorts with the statement it came from
            yield bound, single


def _stripped(node: ast.stmt) -> ast.stmt:
    """A copy without decorators or annotations (they name vLLM types and compile wrappers)."""
    if isinstance(node, ast.AnnAssign):
        copy = ast.Assign(targets=[node.target], value=node.value)
        copy._origin = node  # keeps the source order of the original statement
        return ast.copy_location(copy, node)
    if not isinstance(node, ast.FunctionDef):
        return node
    copy = copy_module.deepcopy(node)  # keeps line numbers for tracebacks
    for n in ast.walk(copy):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            if not isinstance(n, ast.Lambda):
                n.decorator_list, n.returns = ([] if n is copy else n.decorator_list), None
            args = n.args
            for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if a is not None:
                    a.annotation = None
        elif isinstance(n, ast.AnnAssign):
            n.annotation = ast.Constant(None)
    copy._origin = node
    return copy


def _free_names(node: ast.stmt) -> set[str]:
    """Global names a top-level statement reads (symtable: exact scoping rules, nested too)."""
    table = symtable.symtable(ast.unparse(node), "<extract>", "exec")
    names = {s.get_name() for s in table.get_symbols() if s.is_referenced() and not s.is_assigned()}

    def walk(t: symtable.SymbolTable) -> None:
        for child in t.get_children():
            names.update(s.get_name() for s in child.get_symbols()
                         if s.is_global() and s.is_referenced())
            walk(child)

    walk(table)
    return names
