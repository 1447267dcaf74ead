"""The knobs a commit declares: its ``spyre_inference/envs.py`` registry, read by parsing.

Every ``SPYRE_*`` variable of spyre-inference is one entry of ``environment_variables``, a dict
of name -> lambda reading ``os.getenv`` (the real file's docstring: "Every SPYRE_* knob lives
in environment_variables"). What a knob is and what it defaults to is read from each lambda's
syntax, never by running it (this runs in the harness's own process, and a commit's code runs
only in its worker): the variable's name, the default ``os.getenv(NAME, "64")`` or
``os.getenv(NAME) or "head_major"`` gives, and how the value is read (``int(...)``: a number;
``bool(int(...))`` or ``== "1"``: a 0/1 flag; anything else: text). A commit's default is what
the harness measures when no override names the knob.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ENVS_FILE = "spyre_inference/envs.py"
REGISTRY = "environment_variables"
#: How a knob's value is read: as an integer, as an integer 0/1 flag, or as text.
READS = ("int", "flag", "text")


@dataclass(frozen=True)
class Knob:
    name: str
    #: The value unset means, as the env would spell it ("0", "head_major"), or None (no value).
    default: str | None
    reads: str = "text"

    def as_data(self) -> list:
        return [self.default, self.reads]

    @classmethod
    def from_data(cls, name: str, data) -> Knob:
        """From :meth:`as_data` as a worker sends it (JSON): anything else is a ValueError."""
        default, reads = data
        if not (default is None or isinstance(default, str)) or reads not in READS \
                or len(default or "") > 200:
            raise ValueError(f"{name}: not a knob: {data!r}")
        return cls(name, default, reads)

    def check(self, value: str) -> str | None:
        """Why ``value`` cannot be read the way the commit reads it, or None."""
        if self.reads in ("int", "flag"):
            try:
                int(value)
            except ValueError:
                return f"{self.name}={value!r}: the commit reads it as an integer"
        return None


def declared(files: dict[str, bytes]) -> dict[str, Knob] | None:
    """Name -> Knob for every entry of the commit's registry; None where it has no
    ``envs.py`` or no readable ``environment_variables`` dict."""
    source = files.get(ENVS_FILE)
    if source is None:
        return None
    try:
        tree = ast.parse(source, ENVS_FILE)
    except SyntaxError:
        return None
    registry = next((node.value for node in tree.body
                     if isinstance(node, (ast.Assign, ast.AnnAssign))
                     and REGISTRY in _targets(node) and isinstance(node.value, ast.Dict)), None)
    if registry is None:
        return None
    found = {}
    for key, value in zip(registry.keys, registry.values):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            body = value.body if isinstance(value, ast.Lambda) else value
            found[key.value] = Knob(key.value, _default(body, key.value), _reads(body))
    return found


def _targets(node) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _is_getenv(node, name: str) -> bool:
    """``os.getenv(name, ...)`` or ``os.environ.get(name, ...)``."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    f = node.func
    named = isinstance(f, ast.Attribute) and (
        (f.attr == "getenv" and isinstance(f.value, ast.Name) and f.value.id == "os")
        or (f.attr == "get" and isinstance(f.value, ast.Attribute) and f.value.attr == "environ"))
    first = node.args[0]
    return named and isinstance(first, ast.Constant) and first.value == name


def _text(node) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)) \
            and not isinstance(node.value, bool):
        return str(node.value)
    return None


def _default(body, name: str) -> str | None:
    """The default the lambda gives: the getenv call's second argument, or the constant an
    ``or`` falls back to."""
    for node in ast.walk(body):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and \
                any(_is_getenv(v, name) for v in node.values):
            fallback = _text(node.values[-1])
            if fallback is not None:
                return fallback
        if _is_getenv(node, name) and len(node.args) > 1:
            return _text(node.args[1])
    return None


def _reads(body) -> str:
    """"int" where the value goes through ``int()`` (a flag when ``bool()`` wraps that, or
    it is compared with "1"), else "text"."""
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name):
        if body.func.id == "bool" and body.args and _reads(body.args[0]) == "int":
            return "flag"
        if body.func.id == "int":
            return "int"
    if isinstance(body, ast.Compare) and any(_text(c) in ("0", "1") for c in body.comparators):
        return "flag"
    return "text"
