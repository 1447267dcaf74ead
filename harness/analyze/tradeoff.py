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


def compiled_graphs(config_figures: dict) -> int:
    """Graphs a deployment at this config compiles: every variant warmup records, and every key
    some admissible batch reaches that warmup does not (compiled while serving)."""
    return sum(int(config_figures[name]) for name in GRAPH_FIGURES)


@dataclass(frozen=True)
class Change:
    """What a ladder change did: compiled graphs (head − base; per config, the smallest and the
    largest change where several configs moved) and each per-step cost (head / base − 1)."""

    graphs: tuple[int, int] = (0, 0)
    costs: dict[str, float] = field(default_factory=dict)

    @property
    def worse(self) -> list[str]:
        return ([GRAPHS] if sum(self.graphs) > 0 else []) + [m for m, v in self.costs.items()
                                                            if v > 0]

    @property
    def better(self) -> list[str]:
        return ([GRAPHS] if sum(self.graphs) < 0 else []) + [m for m, v in self.costs.items()
                                                            if v < 0]

    @property
    def kind(self) -> str:
        """improvement, regression, trade-off, or change (none of these costs moved)."""
        if self.worse and self.better:
            return "trade-off"
        return "regression" if self.worse else "improvement" if self.better else "change"

    def text(self) -> str:
        """``+6 compiled graphs for −11.7 % iterations and −11 % padding`` (a trade-off: what
        grew for what shrank), or what moved (``−1 compiled graphs, −8 % padding``)."""
        worse = [self._part(name) for name in self.worse]
        better = [self._part(name) for name in self.better]
        if worse and better:
            return f"{_and(worse)} for {_and(better)}"
        return ", ".join(worse or better)

    def _part(self, name: str) -> str:
        if name == GRAPHS:
            lo, hi = self.graphs
            if lo == hi:
                return f"{_signed(lo)} compiled graphs"
            return f"{_signed(lo)} to {_signed(hi)} compiled graphs per config"
        return f"{_signed_pct(self.costs[name])} {COSTS[name]}"


GRAPHS = "graphs"


def change_between(base: dict, head: dict) -> Change:
    """The change from one evaluated ladder to another (each: ``graphs`` and the cost figures),
    on the same code and workload."""
    costs = {m: head[m] / base[m] - 1 for m in COSTS
             if base.get(m) and head.get(m) is not None and head[m] != base[m]}
    delta = head["graphs"] - base["graphs"]
    return Change((delta, delta), costs)


def geometric_change(ratios: list[float]) -> float:
    """The geometric mean of ratios, as a relative change (0.0 for none)."""
    usable = [r for r in ratios if r > 0 and math.isfinite(r)]
    if not usable:
        return 0.0
    return math.exp(sum(math.log(r) for r in usable) / len(usable)) - 1


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
    return f"{value:.3g} %" if value >= 0.1 else f"{value:.2g} %"


def _signed_pct(fraction: float) -> str:
    return ("+" if fraction > 0 else MINUS) + _pct(fraction)


def verdict_line(change: Change, distances: list[str]) -> str:
    """``trade-off: +6 compiled graphs for −11.7 % iterations; the base's [..] ... ; the
    head's [..] is on the frontier``: the kind, what moved, and each side's distance."""
    moved = change.text()
    return f"{change.kind}" + (f": {moved}" if moved else "") + \
        ("; " + "; ".join(distances) if distances else "")
