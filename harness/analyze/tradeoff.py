"""A ladder change said as what it is: an improvement, a regression, or a trade-off.

A longer ladder compiles more graphs and pads less; a shorter one the reverse (the #810 review's
point 5: "the claimed benefit and the regression are the same phenomenon"). So a change is an
*improvement* when no cost grew (compiled graphs included), a *regression* when none shrank, and
otherwise a *trade-off*, said as what was bought for what: "+6 compiled graphs for −11.7 %
iterations and −11 % padding". Plain text: renderers escape it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: The per-step costs a ladder moves (workload figures), in the order a sentence names them.
COSTS = {"iterations_per_layer_mean": "iterations", "padded_slots_per_real_token": "padding",
         "h2d_bytes_per_step": "H2D bytes"}
#: The config figures whose sum is the compiled graphs of a deployment config.
GRAPH_FIGURES = ("variants", "batched_variants_recorded", "unrecorded_keys")
MINUS = "\u2212"
#: The ladders a kv override sets: their changes are placed on the head's kv frontier.
KV_LADDERS = ("batched_num_blocks", "num_blocks", "kv")
#: The name compiled graphs go by among the costs a change moved.
GRAPHS = "graphs"


def compiled_graphs(config_figures: dict) -> int:
    """Graphs a deployment at this config compiles: every variant warmup records, and every key
    some admissible batch reaches that warmup does not (compiled while serving)."""
    return sum(int(config_figures[name]) for name in GRAPH_FIGURES)


@dataclass(frozen=True)
class Change:
    """What a ladder change did: compiled graphs (head − base, per config: the smallest and the
    largest change where several configs moved) and each per-step cost (head / base − 1: the
    smallest and the largest over the rows that moved)."""

    graphs: tuple[int, int] = (0, 0)
    costs: dict[str, tuple[float, float]] = field(default_factory=dict)

    def _moves(self) -> list[tuple[str, float, float]]:
        return [(GRAPHS, *self.graphs)] + [(m, lo, hi) for m, (lo, hi) in self.costs.items()]

    @property
    def worse(self) -> list[str]:
        return [name for name, _, hi in self._moves() if hi > 0]

    @property
    def better(self) -> list[str]:
        return [name for name, lo, _ in self._moves() if lo < 0]

    @property
    def kind(self) -> str:
        """improvement, regression, trade-off, or change (none of these costs moved)."""
        if self.worse and self.better:
            return "trade-off"
        return "regression" if self.worse else "improvement" if self.better else "change"

    def text(self) -> str:
        """``+6 compiled graphs for −11.7 % iterations and −11 % padding``: what grew for what
        shrank; a cost that grew on some rows and shrank on others is said as its range."""
        grew = [self._part(n, lo, hi) for n, lo, hi in self._moves() if lo >= 0 < hi]
        shrank = [self._part(n, lo, hi) for n, lo, hi in self._moves() if lo < 0 >= hi]
        mixed = [self._part(n, lo, hi) for n, lo, hi in self._moves() if lo < 0 < hi]
        if grew and shrank:
            return f"{_and(grew)} for {_and(shrank)}" + (f"; {_and(mixed)}" if mixed else "")
        if (grew or shrank) and mixed:
            return f"{_and(grew or shrank)} for {_and(mixed)}"
        return ", ".join(grew or shrank or mixed)

    @staticmethod
    def _part(name: str, lo: float, hi: float) -> str:
        if name == GRAPHS:
            if lo == hi:
                return f"{_signed(int(lo))} compiled graphs"
            return f"{_signed(int(lo))} to {_signed(int(hi))} compiled graphs per config"
        low, high = _signed_pct(lo), _signed_pct(hi)
        return f"{low} {COSTS[name]}" if low == high else f"{low} to {high} {COSTS[name]}"



def change_between(base: dict, head: dict) -> Change:
    """The change from one evaluated ladder to another (each: ``graphs`` and the cost figures),
    on the same code and workload."""
    moved = {m: head[m] / base[m] - 1 for m in COSTS
             if base.get(m) and head.get(m) is not None and head[m] != base[m]}
    delta = head["graphs"] - base["graphs"]
    return Change((delta, delta), {m: (v, v) for m, v in moved.items()})


def change_over(graph_deltas: list[int], ratios: dict[str, list[float]]) -> Change:
    """The change over many rows: per config the compiled graphs' change, per cost the ratios
    (head / base) of the rows that moved."""
    moved = [d for d in graph_deltas if d]
    costs = {}
    for metric, values in ratios.items():
        usable = [x for x in values if x > 0 and math.isfinite(x) and x != 1]
        if usable:
            costs[metric] = (min(usable) - 1, max(usable) - 1)
    return Change((min(moved), max(moved)) if moved else (0, 0), costs)


def distance_text(who: str, ladder, graphs: int, excess: float, best_ladder,
                  best_graphs: int) -> str:
    """How far a ladder pads above the best ladder found with at most as many compiled graphs
    (``best_*``: the least padding there, fewest graphs first): ``the head's [2,3,6,11] (30
    graphs) pads 8.1 % more than [2,4,8,11] (30 graphs), the best with at most as many``."""
    shown = f"{who}'s {_ladder(ladder)} ({graphs} graphs)"
    if excess > 1e-12:
        return (f"{shown} pads {_pct(excess)} more than {_ladder(best_ladder)} ({best_graphs} "
                "graphs), the best with at most as many")
    if best_graphs < graphs:
        return f"{shown} pads as little as any, but {_ladder(best_ladder)} does with " \
               f"{best_graphs} graphs"
    return f"{shown} is on the frontier"


def _ladder(ladder) -> str:
    return "[" + ",".join(map(str, ladder)) + "]"


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _signed(n: int) -> str:
    return f"+{n}" if n > 0 else f"{MINUS}{-n}" if n < 0 else "0"


def _pct(fraction: float) -> str:
    value = abs(fraction) * 100
    if value >= 1000:
        return f"{value:,.0f} %"
    return f"{value:.3g} %" if value >= 0.1 else f"{value:.2g} %"


def _signed_pct(fraction: float) -> str:
    return ("+" if fraction > 0 else MINUS if fraction < 0 else "") + _pct(fraction)


def verdict_line(change: Change, distances: list[str]) -> str:
    """``trade-off: +6 compiled graphs for −11.7 % iterations; the base's [..] ... ; the
    head's [..] is on the frontier``: the kind, what moved, and each side's distance."""
    moved = change.text()
    return f"{change.kind}" + (f": {moved}" if moved else "") + \
        ("; " + "; ".join(distances) if distances else "")
