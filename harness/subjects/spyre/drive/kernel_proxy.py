"""Every kernel the commit compiles, intercepted: its calls recorded, answered with a placeholder
(exact figures: nothing is computed) or run (measurement).

``torch.compile`` is replaced while the commit's modules load (:func:`intercepted_compile`), so each
kernel becomes a :class:`KernelProxy`. A kernel run on CPU or CUDA gets its int32 indices widened
where eager torch refuses them (:func:`_int32_indices`).
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass

from harness.subjects.load.torch_spyre_standins import plain_tensor_to
from harness.subjects.spyre.drive.errors import KernelRaised, NotDrivable

#: What a spent replay gives back.
_SPENT = object()


@dataclass
class KernelCall:
    kernel: str
    args: dict

    @property
    def batched(self) -> bool:
        """A kernel over a batch of sequences (it takes their padded count), not one sequence's
        (a per-sequence decode kernel such as the head-major one is not batched)."""
        seqs = self.args.get("num_seqs")
        return "batched" in self.kernel or (isinstance(seqs, int) and not isinstance(seqs, bool))


class KernelProxy:
    """Stands where the subject's ``torch.compile(kernel, ...)`` result would be.

    ``mode``: "record" returns ``out`` when the call passes one, else read-only zeros shaped as
    the kernel's own result for those arguments (found once per argument shape on fake tensors:
    [B_s, H, D] for a batched decode of any batch size); "run" calls ``target`` (the kernel
    itself, or a harness-compiled version of it); "replay" binds and records nothing and returns
    the next of ``replies`` (what recorded calls got, :meth:`recorded`): a forward's host time with
    no kernel and next to no harness work in it (harness.measure.host).
    """

    def __init__(self, fn, compile_kwargs: dict):
        self.fn = fn
        self.compile_kwargs = compile_kwargs
        self.signature = inspect.signature(fn)
        self.mode = "record"
        self.target = fn
        self.calls: list[KernelCall] = []
        #: In "replay" mode, what the next calls return, in order.
        self.replies = iter(())
        #: what the kernel returns per _shape_key of its arguments (recorded calls' placeholders)
        self._results: dict[tuple, object] = {}
        #: the kernel needs its int32 indices widened to run eagerly here (found on first refusal)
        self._widen = False
        params = self.signature.parameters.values()
        plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
        #: (positional names, defaults, every name) when the kernel takes only named parameters,
        #: so a call binds with dicts (a recorded step makes hundreds); else None: inspect binds
        self._simple = (tuple(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD),
                        {p.name: p.default for p in params if p.default is not p.empty},
                        frozenset(self.signature.parameters)) if plain else None

    def widen_indices(self) -> None:
        """Run every later call with int32 indices widened (see :func:`_int32_indices`) from
        the start, not from eager torch's first refusal: compiled calls then never switch
        modes mid-run, which recompiled the kernel (a graph no key explains, a compile the
        commit's guard reported)."""
        self._widen = True

    def bind(self, args: tuple, kwargs: dict) -> dict:
        """The call's arguments by name, defaults filled in (what ``Signature.bind`` gives)."""
        if self._simple is not None:
            positional, defaults, names = self._simple
            given = dict(zip(positional, args))
            if (len(args) <= len(positional) and kwargs.keys() <= names
                    and not kwargs.keys() & given.keys()):
                arguments = {**defaults, **given, **kwargs}
                if len(arguments) == len(names):   # else a required one is missing
                    return {n: arguments[n] for n in self.signature.parameters}
        bound = self.signature.bind(*args, **kwargs)   # raises the TypeError a call would
        bound.apply_defaults()
        return dict(bound.arguments)

    def __call__(self, *args, **kwargs):
        if self.mode == "replay":
            reply = next(self.replies, _SPENT)
            if reply is _SPENT:
                raise NotDrivable(f"{self.fn.__name__}: a later layer's forward called it more "
                                  "often than the step's recorded first layer did")
            return reply
        arguments = self.bind(args, kwargs)
        self.calls.append(KernelCall(self.fn.__name__, arguments))
        if self.mode == "run":
            with plain_tensor_to():
                return self._run(args, kwargs)
        return self.recorded(arguments)

    def _run(self, args: tuple, kwargs: dict):
        """The call, really made (``mode`` "run")."""
        try:
            if self._widen:
                with _int32_indices():
                    return self.target(*args, **kwargs)
            try:
                return self.target(*args, **kwargs)
            except RuntimeError as exc:
                if "long tensor for index" not in str(exc):
                    raise
            # eager torch refused an int32 index the device takes: from now on run this
            # kernel with such indices widened (only then: the mode costs time per op)
            self._widen = True
            with _int32_indices():
                return self.target(*args, **kwargs)
        except Exception as exc:
            raise KernelRaised(self.fn.__name__, exc) from exc

    def recorded(self, arguments: dict):
        """What a recorded call returns: ``out`` when the call passes one, else read-only zeros
        shaped as the kernel's result (nothing computed)."""
        out = arguments.get("out")
        if out is not None:
            return out
        code = self.fn.__code__
        if _RULE_HOLDS.get(code):
            return _placeholder(_documented_result(arguments))
        key = _shape_key(arguments)
        result = self._results.get(key)
        if result is None:
            result = self._results[key] = self._infer_result(arguments)
            if code not in _RULE_HOLDS:
                # First call of this kernel's code (a session's small set-up step; the code
                # object is the tree's, shared by every load of it): does the documented output
                # hold? Then it answers every later call without running anything.
                _RULE_HOLDS[code] = result == _documented_result(arguments)
        return _placeholder(result)

    def _infer_result(self, arguments: dict):
        """The structure of what the kernel returns for these arguments ((shape, dtype) leaves),
        found by running it on fake tensors (shapes only, nothing computed); a kernel that needs
        values is taken at its documented output."""
        from torch._subclasses.fake_tensor import FakeTensorMode

        try:
            with FakeTensorMode() as mode:
                fake = {k: _map_tensors(v, mode.from_tensor) for k, v in arguments.items()}
                return _map_tensors(self.fn(**fake), lambda t: (tuple(t.shape), t.dtype))
        except Exception:
            return _documented_result(arguments)


def _int32_indices():
    """While a commit's kernel runs on CPU or CUDA: int32 index tensors, which Spyre (and the
    commit's own compiled kernels) take as they are, widened to int64 where eager torch refuses
    them (``index_copy``), so the kernel computes what it computes on the device.

    The three ``index_copy`` entry points are replaced for the block by wrappers that widen the
    index, Python functions Dynamo traces into the kernel's graph. Not a torch-function mode: a
    kernel's own ``.to(...)`` broke the graph under one (Dynamo cannot call the builtin the mode
    hands it). One object, and one set of wrappers, for the process: Dynamo guards on the
    functions a graph called, so fresh ones per call would recompile the kernel every call."""
    global _WIDEN
    if _WIDEN is None:
        _WIDEN = _WidenedIndexCopy()
    return _WIDEN


_WIDEN = None


class _WidenedIndexCopy:
    """The context manager :func:`_int32_indices` returns (re-entrant)."""

    def __init__(self):
        import torch

        def wide(index):
            return index.long() if isinstance(index, torch.Tensor) and \
                index.dtype == torch.int32 else index

        real = (torch.Tensor.index_copy_, torch.Tensor.index_copy, torch.index_copy)

        def index_copy_(self, dim, index, source, **kwargs):
            return real[0](self, dim, wide(index), source, **kwargs)

        def index_copy(self, dim, index, source, **kwargs):
            return real[1](self, dim, wide(index), source, **kwargs)

        def torch_index_copy(input, dim, index, source, **kwargs):
            return real[2](input, dim, wide(index), source, **kwargs)

        self._real = real
        self._wide = (index_copy_, index_copy, torch_index_copy)
        self._depth = 0

    def _install(self, functions) -> None:
        import torch

        torch.Tensor.index_copy_, torch.Tensor.index_copy, torch.index_copy = functions

    def __enter__(self):
        if not self._depth:
            self._install(self._wide)
        self._depth += 1
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if not self._depth:
            self._install(self._real)


def _map_tensors(value, fn):
    """``value`` with every tensor (also inside lists and tuples) replaced by ``fn(tensor)``."""
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def _shape_key(arguments: dict) -> tuple:
    """What a kernel's output shape can depend on: every tensor's shape and dtype, every other
    argument's value."""
    import torch

    def leaf(v):
        if isinstance(v, torch.Tensor):
            return ("T", tuple(v.shape), v.dtype)
        if isinstance(v, (list, tuple)):
            return ("L", tuple(leaf(x) for x in v))
        return v if isinstance(v, (int, float, bool, str, type(None))) else repr(type(v))

    return tuple((k, leaf(v)) for k, v in arguments.items())


#: Per kernel code object (compiled once per source tree): whether _documented_result gives its
#: output, checked on fake tensors at its first recorded call.
_RULE_HOLDS: dict = {}


def _documented_result(arguments: dict):
    """A kernel's output as spyre-inference's kernels document it: [num_seqs, H, D] for a batched
    decode (any batch size), else the shape of its first tensor argument (the query rows)."""
    import torch

    first = next(v for v in arguments.values() if isinstance(v, torch.Tensor))
    seqs = arguments.get("num_seqs")
    if isinstance(seqs, int) and not isinstance(seqs, bool) and first.dim() == 3:
        return (seqs, *first.shape[1:]), first.dtype
    return tuple(first.shape), first.dtype


def _placeholder(result):
    """Read-only zero tensors (no memory) shaped as the kernel's result."""
    import torch

    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], torch.dtype):
        shape, dtype = result
        return torch.zeros((), dtype=dtype).expand(shape)
    if isinstance(result, (list, tuple)):
        return type(result)(_placeholder(r) for r in result)
    return result


@contextlib.contextmanager
def intercepted_compile(proxies: list[KernelProxy]):
    """``torch.compile(fn, ...)`` returns a proxy while the subject's modules load."""
    import torch

    real = torch.compile

    def compile_(fn=None, **kwargs):
        if fn is None:
            return lambda f: compile_(f, **kwargs)
        proxy = KernelProxy(fn, kwargs)
        proxies.append(proxy)
        return proxy

    torch.compile = compile_
    try:
        yield
    finally:
        torch.compile = real

