"""The frontier as a picture: compiled graphs against each per-step cost, every evaluated ladder
a point, the frontier a step line, the config's (or a PR's base's and head's) ladders marked."""

from __future__ import annotations

from pathlib import Path

from harness.analyze.frontier import Frontier
from harness.analyze.tradeoff import COSTS
from harness.metrics import METRICS, ladder_text
from harness.report.frontier_table import title

#: Image formats matplotlib writes that ``--plot`` takes, by suffix.
FORMATS = {".png": "png", ".svg": "svg"}
_MARK_STYLE = {"default": ("tab:blue", "o"), "head": ("tab:blue", "o"), "base": ("tab:red", "s")}


def figure(f: Frontier):
    """A matplotlib figure: one panel per per-step cost, graphs on the x axis."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    metrics = list(COSTS)
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6))
    for ax, metric in zip(axes, metrics):
        xs = [p.graphs for p in f.points]
        ys = [p.costs[metric] for p in f.points]
        ax.scatter(xs, ys, s=14, color="0.6", zorder=2, label="evaluated ladders")
        frontier = _staircase(f, metric)
        ax.step([x for x, _ in frontier], [y for _, y in frontier], where="post",
                color="tab:green", zorder=1, label="frontier")
        for mark, (color, marker) in _MARK_STYLE.items():
            point = f.marked(mark)
            if point is None:
                continue
            ax.scatter([point.graphs], [point.costs[metric]], s=60, color=color, marker=marker,
                       zorder=3, label=f"{mark} {ladder_text(point.ladder)}")
            ax.annotate(mark, (point.graphs, point.costs[metric]), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel("compiled graphs", fontsize=8)
        ax.set_ylabel(f"{METRICS[metric].label} ({METRICS[metric].unit})", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=6, loc="upper right")
    fig.suptitle(title(f), fontsize=9)
    fig.tight_layout()
    return fig


def _staircase(f: Frontier, metric: str) -> list[tuple[int, float]]:
    """(graphs, best ``metric`` with at most that many graphs) where the best improves."""
    out: list[tuple[int, float]] = []
    for p in sorted(f.points, key=lambda p: (p.graphs, p.costs[metric])):
        if not out or p.costs[metric] < out[-1][1]:
            out.append((p.graphs, p.costs[metric]))
    if out:
        out.append((max(p.graphs for p in f.points), out[-1][1]))
    return out


def save(f: Frontier, path: Path) -> None:
    """Write the figure to ``path`` (PNG or SVG by its suffix) through harness.outputs' rule."""
    import matplotlib.pyplot as plt

    from harness.outputs import replacing
    fig = figure(f)
    try:
        with replacing(path) as tmp:
            fig.savefig(tmp, format=FORMATS[path.suffix.lower()], bbox_inches="tight")
    finally:
        plt.close(fig)


def plot_paths(path: Path, frontiers: list[Frontier]) -> list[Path]:
    """One file per frontier: ``path`` itself for one, else ``<stem>.<config-workload><suffix>``."""
    if len(frontiers) == 1:
        return [path]
    out = []
    for f in frontiers:
        c = f.case.config
        label = f"bs{c.block_size}-mml{c.max_model_len}-mns{c.max_num_seqs}-" \
                f"{f.case.overrides_name}-{f.workload}"
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)
        out.append(path.with_name(f"{path.stem}.{safe}{path.suffix}"))
    return out
