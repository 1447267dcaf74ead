"""The commit's own values of the knobs that choose its attention path, read from its ``envs.py``
inside the load's window: a knob given is what the commit parses it to, an unset one is the
commit's own default (``SPYRE_ATTN_KV_LAYOUT=head_major`` and batched decode on in the newest
trees), never a default of the harness's. A commit whose ``envs.py`` declares no such knob has
only the path the knob would leave (token-major, no jagged attention)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from harness.subjects.load.loader import ENVS_MODULE

LAYOUT = "SPYRE_ATTN_KV_LAYOUT"
BATCHED_DECODE = "SPYRE_BATCHED_DECODE"
JAGGED = "SPYRE_JAGGED_ATTENTION"
FOR_EACH_TILE = "SPYRE_ATTN_FOR_EACH_TILE"


def value(name: str):
    """``spyre_inference.envs.<name>`` as the loaded commit reads it, or None where its
    ``envs.py`` is absent or does not declare ``name``. Call inside the load's window."""
    try:
        envs = importlib.import_module(ENVS_MODULE)
    except ImportError:
        return None
    try:
        return getattr(envs, name)
    except AttributeError:
        return None


@dataclass(frozen=True)
class CommitEnv:
    """What the loaded commit reads for each path-choosing knob (None: it declares none)."""

    layout: str | None
    batched_decode: bool | None
    jagged: bool | None
    for_each_tile: bool | None

    @classmethod
    def read(cls) -> CommitEnv:
        def flag(name):
            v = value(name)
            return None if v is None else bool(v)
        layout = value(LAYOUT)
        return cls(layout=layout if isinstance(layout, str) else None,
                   batched_decode=flag(BATCHED_DECODE), jagged=flag(JAGGED),
                   for_each_tile=flag(FOR_EACH_TILE))
