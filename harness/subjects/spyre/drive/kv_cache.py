"""The K/V cache a session's layer reads: one per session, allocated on first use and bound to
the layer before the first step, as vLLM allocates it once per engine."""

from __future__ import annotations

from harness.config import EngineConfig
from harness.ladders import ceil_div
from harness.subjects.spyre.drive.errors import NotDrivable
from harness.subjects.spyre.drive.steps import step_pages

#: Bytes a live cache may take to hold every page of the config, as the placeholder does.
LIVE_CACHE_BYTES = 2 << 30


class KvCache:
    """The impl may keep views of the first cache it is handed, so every step of a session gets
    the same one. A placeholder cache (recorded steps) is read-only zeros that take no memory, so
    it holds every page of the config; a live cache holds as many where they fit
    ``LIVE_CACHE_BYTES`` (else the pages asked for), since the commit's code reads the cache's
    size (the newest impls decline a batched call whose gather would span the whole cache, and
    size jagged plans by it): a live step then takes the path its exact figures say. A step
    needing more pages than the cache has is NotDrivable."""

    def __init__(self, config: EngineConfig, backend, layer, origin: str, dtype):
        self.config, self.backend, self.layer, self.origin = config, backend, layer, origin
        #: what the pages hold (an FP8 cache: float8_e4m3fn, where vLLM's spec says bytes)
        self.dtype = dtype
        self._tensors: tuple | None = None

    def shape(self, num_pages: int) -> tuple[int, ...]:
        """The backend's cache shape (its ``get_kv_cache_shape``), token-major if it has none."""
        c = self.config
        get = getattr(self.backend, "get_kv_cache_shape", None)
        if get is None:
            return (num_pages, c.block_size, c.num_kv_heads, c.head_size)
        return tuple(get(num_pages, c.block_size, c.num_kv_heads, c.head_size))

    def max_pages(self) -> int:
        """Pages a step of this config can use: the null page and every sequence at
        max_model_len."""
        c = self.config
        return 1 + max(1, c.max_num_seqs) * ceil_div(c.max_model_len, c.block_size)

    def live_pages(self, pages: int, limit: int = LIVE_CACHE_BYTES) -> int:
        """Pages a live cache holds: every page of the config where they fit ``limit``."""
        import torch

        c = self.config
        per_page = (2 * c.block_size * c.num_kv_heads * c.head_size
                    * torch.empty((), dtype=self.dtype).element_size())
        every = self.max_pages()
        return max(pages, every) if every * per_page <= limit else pages

    def get(self, device, pages: int, placeholder: bool = False):
        """The (K, V) cache, allocated on first use for ``pages`` (a live one: see
        :meth:`live_pages`; a placeholder: every page of the config) and bound to the layer."""
        import torch

        if self._tensors is None:
            dtype = self.dtype
            shape = self.shape(max(pages, self.max_pages()) if placeholder
                               else self.live_pages(pages))
            if placeholder:
                cache = torch.zeros((), dtype=dtype).expand(*shape)
                self._tensors = (cache, cache)
            else:
                self._tensors = (torch.zeros(shape, dtype=dtype, device=device),
                                 torch.zeros(shape, dtype=dtype, device=device))
            self.layer.kv_cache = self._tensors   # vLLM's bind_kv_cache
        have = int(self._tensors[0].shape[0])
        if pages > have:
            raise NotDrivable(f"{self.origin}: a step needs {pages} K/V pages; the session's "
                              f"cache (allocated once, as vLLM does) has {have}")
        return self._tensors

    def reserve(self, device, steps) -> None:
        """Allocate the cache for the largest of ``steps`` at least (live measurement: real
        memory, so never past :meth:`live_pages`' bound)."""
        bs = self.config.block_size
        self.get(device, max(step_pages(step, bs) for step in steps))


def pages_dtype(impl_cls, spec, origin: str, tree):
    """What the commit's pages hold for ``spec``: the dtype its impl's ``allocate_pages`` (the
    engine's allocation) gives one page, else the spec's own. vLLM sizes an FP8 cache in bytes
    and the newest head-major impls allocate float8_e4m3fn pages for it: there, an allocation
    that fails is NotDrivable naming why (a model-dtype spec is what its pages hold anyway)."""
    import torch

    from harness.subjects.load.loader import where

    allocate = getattr(impl_cls, "allocate_pages", None)
    if callable(allocate):
        try:
            return allocate(1, spec, torch.device("cpu"))[0].dtype
        except Exception as exc:
            if not spec.dtype.is_floating_point:
                raise NotDrivable(f"{origin}: {impl_cls.__name__}.allocate_pages() for a "
                                  f"{spec.dtype} K/V spec raised {type(exc).__name__}: {exc}"
                                  f"{where(exc, tree)}") from None
    return spec.dtype
