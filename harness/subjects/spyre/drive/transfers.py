"""Host-to-device transfers: every call of the commit's ``convert`` (wrapped by
:func:`wrap_convert`), named and counted."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from harness.subjects.load import torch_spyre_standins
from harness.subjects.load.loader import SourceTree, where
from harness.subjects.spyre.drive.errors import NotDrivable

CONVERT_MODULE = "spyre_inference.custom_ops.utils"
#: Where torch-spyre's device layouts live (the stand-in reports each placement made with one).
PLACEMENT_MODULE = "torch_spyre._C"


@dataclass(frozen=True)
class Transfer:
    name: str
    shape: tuple
    dtype: str
    bytes: int


def _caller_name(known: dict, depth: int = 2) -> str:
    """The subject's function that called convert (past comprehensions and lambdas; ``depth``
    frames up from here); ``known``: code object -> name, for the functions met before."""
    frame = sys._getframe(depth)
    while frame is not None:
        code = frame.f_code
        name = known.get(code)
        if name is not None:
            return name
        if not code.co_name.startswith("<"):
            known[code] = code.co_name
            return code.co_name
        frame = frame.f_back
    return "other"


#: torch dtype -> its name without the module ("float16"), filled on first sight.
_DTYPE_NAMES: dict = {}


def _dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


class TransferLog:
    """Wraps the subject's ``convert``: every call is one host-to-device transfer.

    ``copy`` False (recording exact figures on the host): the call is counted and the host tensor
    handed back (cast when a ``dtype`` is asked for) without the subject's copy, whose only
    effect there is time; a long prefill's mask is hundreds of MB. Measurement runs copy.

    Transfers are counted by (name, shape, dtype, bytes), not kept one object each: a builder
    that mirrors every per-block mask tile makes millions of calls a run, and the figures need
    only how many of each and their bytes by name. :meth:`counts` hands them out, in the order
    each kind was first made.
    """

    def __init__(self, convert):
        self.convert = convert
        self.copy = True
        #: (name, torch.Size, torch dtype, bytes) -> calls
        self._counts: dict[tuple, int] = {}
        self.names: dict[int, str] = {}
        #: storage address -> name, of the metadata's own tensor fields: a view of one (the
        #: head-major mirror reshapes its chunk index and mask) is named after the field
        self.storages: dict[int, str] = {}
        #: code object -> function name, of the subject's functions that called convert
        self._callers: dict = {}

    def __call__(self, tensor, *args, **kwargs):
        if tensor is None:   # the real convert passes None through: no transfer
            return self.convert(tensor, *args, **kwargs)
        self._count(tensor, 3)
        if self.copy:
            return self.convert(tensor, *args, **kwargs)
        dtype = kwargs.get("dtype")
        return tensor if dtype is None or dtype == tensor.dtype else tensor.to(dtype)

    def _count(self, tensor, depth: int) -> None:
        # named after the metadata field holding it, else after the subject's function that
        # made the copy (kv_write_index, _staging_buffers, ...), ``depth`` frames up
        name = (self.names.get(id(tensor)) or self._storage_name(tensor)
                or _caller_name(self._callers, depth))
        key = (name, tensor.shape, tensor.dtype, tensor.nbytes)
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1

    def _storage_name(self, tensor) -> str | None:
        if not self.storages:
            return None
        try:
            address = tensor.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):
            return None
        return self.storages.get(address) if address else None

    def placed(self, tensor) -> None:
        """A tensor the subject placed with ``Tensor.to(device, device_layout=...)`` (the
        torch-spyre stand-in reports it): one transfer, though not through ``convert``."""
        self._count(tensor, 4)

    def clear(self) -> None:
        self._counts.clear()

    def forget(self) -> None:
        """Drop the names of the last step's tensors (an address may be reused by the next)."""
        self.names.clear()
        self.storages.clear()

    def counts(self) -> dict[Transfer, int]:
        """The transfers since the last :meth:`clear`: each kind and how many times."""
        return {Transfer(name, tuple(shape), _dtype_name(dtype), nbytes): n
                for (name, shape, dtype, nbytes), n in self._counts.items()}

    def name_fields(self, metadata, clear: bool = True) -> None:
        """Name tensors after the metadata attribute (or dict key) that holds them."""
        if clear:
            self.forget()
        import torch

        tensor, name_of = torch.Tensor, self.names.setdefault

        def visit(value, name):
            if isinstance(value, tensor):
                name_of(id(value), name)
            elif isinstance(value, dict):
                for k, v in value.items():
                    visit(v, str(k))
            elif isinstance(value, (list, tuple)):
                for v in value:   # mostly one tensor per sequence: named here, not recursed into
                    if type(v) is tensor:
                        name_of(id(v), name)
                    elif isinstance(v, (list, tuple)) and v and type(v[0]) is tensor:
                        for t in v:   # a row of per-block tiles: no call per tile
                            if type(t) is tensor:
                                name_of(id(t), name)
                            else:
                                visit(t, name)
                    else:
                        visit(v, name)

        for attr, value in vars(metadata).items():
            visit(value, attr.removesuffix("_cpu"))
            if isinstance(value, tensor) and value.numel():
                self.storages.setdefault(value.untyped_storage().data_ptr(),
                                         attr.removesuffix("_cpu"))


def wrap_convert(origin: str, tree: SourceTree) -> TransferLog:
    """The loaded commit's ``convert`` wrapped in a TransferLog, everywhere its modules hold it
    (after the platform's ``register()`` where it has one): NotDrivable if it has none."""
    utils = sys.modules.get(CONVERT_MODULE)
    convert = getattr(utils, "convert", None)
    if convert is None:
        raise NotDrivable(f"{origin}: no {CONVERT_MODULE}.convert, the transfer function "
                          "spyre-bench counts host-to-device copies with")
    register = getattr(utils, "register", None)
    if callable(register):
        # what the platform does at start-up: the op convert routes through
        # (torch.ops.vllm.spyre_convert), registered into this load's stand-in library
        try:
            register()
        except Exception as exc:
            raise NotDrivable(f"{origin}: {CONVERT_MODULE}.register() raised "
                              f"{type(exc).__name__}: {exc}{where(exc, tree)}") from None
    transfers = TransferLog(convert)
    for name, mod in list(sys.modules.items()):
        if name.startswith("spyre_inference") and getattr(mod, "convert", None) is convert:
            mod.convert = transfers
    placements = sys.modules.get(PLACEMENT_MODULE)
    if placements is not None and hasattr(placements, torch_spyre_standins.MARK):
        setattr(placements, torch_spyre_standins.ON_PLACEMENT, transfers.placed)
    return transfers
