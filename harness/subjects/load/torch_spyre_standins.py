"""Stand-ins for the few ``torch_spyre`` names spyre-inference's kernels use, on CPU and CUDA.

The newest kernels walk their pages with torch-spyre's ``for_each_tile`` (``ops/page_attn.py``
always; ``ops/tile_loop.walk_tiles`` while ``SPYRE_ATTN_FOR_EACH_TILE`` is on) and the head-major
backend caps the attention compile's cores through ``torch_spyre._inductor.config``. Where
torch-spyre is installed (a Spyre machine) the real package is used and none of this loads.

Layout helpers: a Spyre tensor has a device layout (``torch_spyre._C.SpyreTensorLayout``: padded
device sizes in 128-byte sticks; the ``ElementArrangement`` of a stick's elements, which a float8
cache's store and read agree on) *in addition to* its PyTorch layout, which alone says what it
holds (torch-spyre ``docs/TensorLayouts.md``), and ``Tensor.to(device, device_layout=...)`` places
a tensor so. The head-major backend's tiled batched decode places its page index that way whatever
the target device, and an FP8 head-major cache its pages. Off Spyre there is no placement:
``SpyreTensorLayout`` only records what it is given, ``get_elem_in_stick`` is the stick's 128 bytes
over the element size, and while a load's window is open ``Tensor.to`` takes ``device_layout`` and
moves the logical tensor (the values the kernels read), reporting it as a transfer
(:data:`ON_PLACEMENT` on ``torch_spyre._C``).
``torch_spyre._inductor.spyre_hint`` is a compiler hint (how Inductor tiles or names the ops of a
block, never what they compute): a context manager that changes nothing here.

``for_each_tile`` follows its documented contract (the commits' own ``walk_tiles`` docstring):
``body(carry, tiles) -> (carry, per_tile_output)`` once per ``tile_size``-wide tile of the tiled
operands (``dims[i]`` the axis of operand i, None for an operand passed whole), the carry starting
at ``init``; it returns ``(carry, per_tile_outputs)``: with ``out_dim`` the per-tile outputs joined
along that axis (the jagged kernels scatter rows from them), else None. The tiles keep their leading
axis (narrow, not select). It is a Python loop here: on Spyre the loop is one traced body; the
arithmetic is the same, which is what the oracle checks.

Any other ``torch_spyre`` name is missing on purpose: a kernel that needs it fails with Python's
own ImportError, which the harness reports naming it. The names are listed in
``vllm_surface.tsv`` beside this file.
"""

from __future__ import annotations

import contextlib
import enum
import importlib.util
import types
from collections.abc import Callable, Sequence
from typing import Any

from harness.subjects.load.vllm_standins import CLOSE, OPEN

#: Where the stand-ins come from, on each module.
MARK = "__spyre_bench_standin__"
#: On the ``torch_spyre._C`` stand-in: called with each tensor a ``device_layout`` places.
ON_PLACEMENT = "on_placement"
#: Bytes in a Spyre stick.
STICK_BYTES = 128


def for_each_tile(body: Callable, operands: Sequence, dims: Sequence[int | None],
                  tile_size: int = 1, init: tuple | None = None,
                  out_dim: int | None = None) -> tuple[Any, Any]:
    """torch-spyre's tiled loop, as a Python loop (see the module docstring)."""
    if len(dims) != len(operands):
        raise ValueError(f"dims has {len(dims)} entries for {len(operands)} operands")
    extents = {op.shape[d] for op, d in zip(operands, dims) if d is not None}
    if len(extents) != 1:
        raise ValueError(f"tiled operands disagree on their extent: {sorted(extents)}")
    extent = extents.pop()
    if tile_size < 1 or extent % tile_size:
        raise ValueError(f"extent {extent} is not a whole number of {tile_size}-wide tiles")
    carry, outputs = init, []
    for t in range(extent // tile_size):
        tiles = tuple(op if d is None else op.narrow(d, t * tile_size, tile_size)
                      for op, d in zip(operands, dims))
        carry, out = body(carry, tiles)
        outputs.append(out)
    if out_dim is None or not outputs:
        return carry, None
    import torch
    return carry, torch.cat(outputs, dim=out_dim)


class SpyreTensorLayout:
    """A device layout, recorded (there is no device placement off Spyre)."""

    def __init__(self, device_size=None, stride_map=None, device_dtype=None, **kwargs):
        self.device_size, self.stride_map, self.device_dtype = device_size, stride_map, device_dtype
        self.extra = kwargs

    def __repr__(self) -> str:
        return (f"SpyreTensorLayout(device_size={self.device_size}, "
                f"stride_map={self.stride_map}, device_dtype={self.device_dtype})")


class ElementArrangement(enum.Enum):
    """The order of a stick's elements on the device (a float8 cache's QFP8CH is not
    sequential): a placement, so nothing here."""

    STANDARD = "standard"
    QFP8CH = "qfp8ch"


def get_device_dtype(dtype):
    """The device's name for ``dtype``: the dtype itself here."""
    return dtype


def get_elem_in_stick(dtype) -> int:
    """Elements of ``dtype`` in one 128-byte stick."""
    import torch

    return STICK_BYTES // torch.empty((), dtype=dtype).element_size()


@contextlib.contextmanager
def spyre_hint(*args, **kwargs):
    """torch-spyre's compiler hint: no effect on what the block computes."""
    yield


#: ``Tensor.to`` as torch defines it, under each window's stand-in (innermost last).
_PLAIN_TO: list = []


def _placements(c_module: types.ModuleType):
    """(open, close) of ``Tensor.to`` taking ``device_layout`` while the window is open."""
    import torch

    def open_():
        real = torch.Tensor.to

        def to(self, *args, device_layout=None, **kwargs):
            if device_layout is not None:
                hook = c_module.__dict__.get(ON_PLACEMENT)
                if hook is not None:
                    hook(self)
            return real(self, *args, **kwargs)

        _PLAIN_TO.append(real)
        torch.Tensor.to = to

    def close():
        if _PLAIN_TO:
            torch.Tensor.to = _PLAIN_TO.pop()

    return open_, close


@contextlib.contextmanager
def plain_tensor_to():
    """torch's own ``Tensor.to`` while a kernel runs: no kernel passes a device layout, and
    Dynamo traces a kernel's ``.to`` as torch's (through the stand-in, under a torch function
    mode, it breaks the graph on the builtin the stand-in calls)."""
    import torch

    if not _PLAIN_TO:
        yield
        return
    standin, torch.Tensor.to = torch.Tensor.to, _PLAIN_TO[0]
    try:
        yield
    finally:
        torch.Tensor.to = standin


class _InductorConfig(types.ModuleType):
    """``torch_spyre._inductor.config``: the core count the attention compile may use."""

    sencores: int = 32


def needed() -> bool:
    """True where torch-spyre itself is not installed."""
    try:
        return importlib.util.find_spec("torch_spyre") is None
    except (ImportError, ValueError):
        return True


def modules() -> dict[str, types.ModuleType]:
    """The stand-in modules by dotted name (fresh per load: the config is mutable)."""
    root = types.ModuleType("torch_spyre")
    inductor = types.ModuleType("torch_spyre._inductor")
    inductor.spyre_hint = spyre_hint
    wsr = types.ModuleType("torch_spyre._inductor.wsr")
    wsr.for_each_tile = for_each_tile
    config = _InductorConfig("torch_spyre._inductor.config")
    c_module = types.ModuleType("torch_spyre._C")
    c_module.SpyreTensorLayout = SpyreTensorLayout
    c_module.ElementArrangement = ElementArrangement
    c_module.get_device_dtype = get_device_dtype
    c_module.get_elem_in_stick = get_elem_in_stick
    opened, closed = _placements(c_module)
    setattr(c_module, OPEN, opened)
    setattr(c_module, CLOSE, closed)
    table = {"torch_spyre": root, "torch_spyre._inductor": inductor,
             "torch_spyre._inductor.wsr": wsr, "torch_spyre._inductor.config": config,
             "torch_spyre._C": c_module}
    for name, mod in table.items():
        setattr(mod, MARK, "spyre-bench")
        if any(other.startswith(name + ".") for other in table):
            mod.__path__ = []
        parent, _, leaf = name.rpartition(".")
        if parent:
            setattr(table[parent], leaf, mod)
    return table
