"""The default ladder's distance from the frontier per commit, from what the history stores
(``exact.Frontier.track_excess_padding``: how much more its kv ladder pads on the tier's mixes
than the best ladder with at most as many compiled graphs, both by that commit's own code)."""

from __future__ import annotations

from collections import defaultdict

EXCESS = "exact.Frontier.track_excess_padding"


def excess_series(frame) -> dict[str, dict[str, dict[str, float]]]:
    """Override set -> config label (``bs 192, mml 2048``, with mns when several) -> commit ->
    excess padding in percent; configs a commit skipped (a kv override) have no point."""
    rows = frame[(frame["benchmark"] == EXCESS) & (frame["status"] == "ok")]
    if rows.empty:
        return {}
    several = "param:max_num_seqs" in rows and rows["param:max_num_seqs"].nunique() > 1
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for _, r in rows.iterrows():
        label = f"bs {r['param:block_size']}, mml {r['param:max_model_len']}" + (
            f", mns {r['param:max_num_seqs']}" if several else "")
        out[str(r["param:overrides"])][label][r["commit"]] = float(r["value"])
    return {env: dict(series) for env, series in out.items()}
