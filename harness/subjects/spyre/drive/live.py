"""Live forwards (measurement): one step's real inputs made through the commit's own builder and
K/V cache update, and one layer of its forward with its kernels really called."""

from __future__ import annotations

from dataclasses import dataclass

from harness.subjects.spyre.drive.errors import KernelRaised, NotDrivable
from harness.subjects.spyre.drive.session import IMPL_CLASS, BuilderSession
from harness.subjects.spyre.drive.steps import step_pages, step_seed


@dataclass
class LiveStep:
    """One step's real inputs for the subject's forward: its own builder's metadata, a K/V cache
    filled through its own ``do_kv_cache_update``, and each sequence's dense K/V for the oracle."""

    step: tuple
    metadata: object
    query: object
    kv_cache: tuple
    output: object
    keys: list  # per sequence [seq_len, KV, D]
    values: list


def kv_grid(session: BuilderSession):
    """The dtype live K/V are drawn on: the cache pages' where they are a float8 (the commit
    stores K / k_scale at its k_scale, 1.0 for a model without a KV-cache scheme, so a value on
    the grid is stored exactly), else None (the model dtype's own)."""
    dtype = session.cache.dtype
    return dtype if dtype.is_floating_point and dtype.itemsize == 1 else None


def live_step(session: BuilderSession, step, device, seed: int = 0) -> LiveStep:
    """Build ``step`` through the subject and make its inputs on ``device`` (random, seeded)."""
    import torch

    c = session.config
    dtype = getattr(torch, c.dtype)
    bs = c.block_size
    # bound before build(), as the engine binds it
    cache = session.kv_cache(device, step_pages(step, bs))
    metadata, cm = session.build(step, step_seed(step))
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32).to(dtype)

    grid = kv_grid(session)

    def kv(*shape):
        # on the cache's own grid where it is coarser than the model's (an FP8 cache), so the
        # pages hold exactly what the oracle reads
        drawn = rand(*shape)
        return drawn if grid is None else drawn.to(grid).to(dtype)

    keys = [kv(s.seq_len, c.num_kv_heads, c.head_size) for s in step]
    values = [kv(s.seq_len, c.num_kv_heads, c.head_size) for s in step]
    slots = []
    for i, s in enumerate(step):
        t = torch.arange(s.seq_len)
        slots.append(cm.block_table_tensor[i, t // bs].to(torch.int64) * bs + t % bs)
    update = getattr(session.impl, "do_kv_cache_update", None)
    if update is None:
        raise NotDrivable(f"{session.origin}: {IMPL_CLASS} has no do_kv_cache_update(), through "
                          "which spyre-bench fills the K/V cache in the subject's own layout")
    # Every token of every sequence written, as the steps before this one would have: the
    # impl's own store kernel (run, not recorded) through its own slot index (kv_write_index
    # where the impl turns a slot mapping into its layout's index, as attn_layer does).
    for p in session.proxies:
        p.mode = "run"
    try:
        slot_mapping = torch.cat(slots)
        index = getattr(session.impl, "kv_write_index", None)
        slot_mapping = (index(slot_mapping, device) if index is not None
                        else slot_mapping.to(device))
        update(session.layer, torch.cat(keys).to(device), torch.cat(values).to(device), cache,
               slot_mapping)
    except KernelRaised as exc:
        raise session.raised(f"{IMPL_CLASS}.do_kv_cache_update()", exc.exc) from None
    except Exception as exc:
        raise session.raised(f"{IMPL_CLASS}.do_kv_cache_update()", exc) from None
    tokens = sum(s.query_len for s in step)
    query = rand(tokens, c.num_heads, c.head_size).to(device)
    output = torch.zeros(tokens, c.num_heads, c.head_size, dtype=dtype, device=device)
    return LiveStep(tuple(step), metadata, query, cache, output, keys, values)


def run_forward(session: BuilderSession, live: LiveStep):
    """One layer of the subject's forward on ``live`` with its kernels really called (the device
    mirror is made by the first call and reused after, as for every later layer of a step)."""
    session.transfers.copy = True
    session.transfers.clear()
    for p in session.proxies:
        p.mode = "run"
        p.calls.clear()
    try:
        session.call_impl(live.query, live.kv_cache, live.metadata, live.output)
    except (NotDrivable, KernelRaised):
        raise
    except Exception as exc:
        raise session.raised(f"{IMPL_CLASS}.forward()", exc) from None
    return live.output


def reached_keys(session: BuilderSession, live: LiveStep) -> tuple:
    """The compile keys the last :func:`run_forward` on ``live`` reached, each kernel call read
    by its path (:mod:`harness.subjects.spyre.drive.paths`)."""
    from harness.subjects.spyre.drive.paths import read_step

    calls = [c for p in session.proxies for c in p.calls]
    return tuple(read_step(calls, live.step, live.metadata, session.config.block_size,
                           lambda step, metadata: "").keys)
