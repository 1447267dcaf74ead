"""The static report page: ladders, padding and iterations, compile counts, throughput and
efficiency (padding, kernel, fraction of the roofline) over the history, and the latest change
points. One self-contained HTML file (plots inline as SVG, no script, no network), next to
``asv publish``'s per-benchmark graphs.
"""

from __future__ import annotations

import html
import io
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from harness import __version__
from harness.analyze.changepoints import Regression
from harness.matrix import case_label
from harness.report import efficiency_history as eff
from harness.report import frontier_history
from harness.store.identity import config_key
from harness.store.identity import read as read_identity

#: Which series the page plots by default: the review's config, batched decode on.
FOCUS = {"block_size": 64, "max_model_len": 2048, "overrides": "batched"}
WORKLOAD_FIGURES = (("exact.Workload.track_iterations_per_layer_mean", "kernel loop iterations "
                     "per layer"),
                    ("exact.Workload.track_padded_slots_per_real_token", "padded KV slots per "
                     "real token"))
COMPILE_FIGURES = (("exact.Config.track_batched_keys_reachable", "batched compile keys reachable"),
                   ("exact.Workload.track_late_compiles", "late compiles (keys warmup misses)"),
                   ("kernel.Compile.track_graphs", "graphs torch.compile built"))
LADDER_AXES = ("batched_num_blocks", "kv", "batched_num_seqs")
#: Override sets whose padding efficiency is plotted at the focus config: the review's config with
#: batched decode on, and with its KV override above the limit (the #810 case).
PADDING_OVERRIDES = ("batched", "kv-above-limit")

#: The page's last element: once it is in the DOM, every plot before it is (tests wait on it).
END_MARK = '<footer id="report-end" hidden></footer>'



@dataclass(frozen=True)
class Commit:
    hash: str
    label: str


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _line_plot(title: str, commits: list[Commit], series: dict[str, dict[str, float]],
               ylabel: str) -> str:
    if not any(series.values()):
        return f"<p class='nodata'>{html.escape(title)}: not measured in this history.</p>"
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 3.2))
    x = list(range(len(commits)))
    names = sorted(series)
    for i, name in enumerate(names):
        ys = [series[name].get(c.hash, math.nan) for c in commits]
        # gid: the series' group in the SVG (a marker per measured commit), named in data-series
        ax.plot(x, ys, marker="o", markersize=3, label=name, gid=f"series-{i}")
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_xticks(x, [c.hash[:8] for c in commits], rotation=60, fontsize=7)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return (f'<figure class="plot" data-title="{html.escape(title)}" '
            f'data-series="{html.escape(json.dumps(names))}">{_svg(fig)}</figure>')


def _focus_rows(frame, benchmark: str, focus: dict):
    rows = frame[(frame["benchmark"] == benchmark) & (frame["status"] == "ok")]
    for k, v in focus.items():
        col = f"param:{k}"
        if col in rows:
            rows = rows[rows[col] == v]
    return rows


def _by(rows, key_col: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for _, r in rows.iterrows():
        out[str(r[key_col])][r["commit"]] = float(r["value"])
    return out


def _sum_by_commit(rows) -> dict[str, float]:
    return {c: float(g["value"].sum()) for c, g in rows.groupby("commit")}


def _ladder_table(frame, commits: list[Commit]) -> str:
    files = frame.drop_duplicates("commit").set_index("commit")["file"]
    ladders, configs = {}, {}
    for c in commits:
        identity = read_identity(files[c.hash]) if c.hash in files else None
        for config, lad in identity.ladders_by_config() if identity else []:
            ladders.setdefault(c.hash, {})[config_key(config)] = lad
            configs[config_key(config)] = config
    order = sorted(configs, key=lambda k: (configs[k]["block_size"], configs[k]["max_model_len"],
                                           configs[k]["max_num_seqs"],
                                           str(configs[k]["overrides"])))
    if not order:
        return "<p>No ladders recorded (they come from spyre-bench run's identity files).</p>"
    head = "".join(f"<th title='{html.escape(c.label)}'>{c.hash[:8]}</th>" for c in commits)
    body = []
    for key in order:
        config = configs[key]
        bs, mml, mns, env = (config["block_size"], config["max_model_len"],
                             config["max_num_seqs"], config["overrides"])
        if env not in ("none", "batched") and len(order) > 24:
            continue
        for axis in LADDER_AXES[:1]:
            cells, prev = [], None
            for c in commits:
                lad = ladders.get(c.hash, {}).get(key, {})
                text = "-" if not lad or "skipped" in lad else \
                    "[" + ",".join(map(str, lad.get(axis) or [])) + "]"
                cls = ' class="changed"' if prev is not None and text != prev else ""
                cells.append(f"<td{cls}>{html.escape(text)}</td>")
                prev = text
            body.append(f"<tr><th>bs {bs}, mml {mml}, mns {mns}, env {html.escape(str(env))}"
                        f"</th><td>{axis}</td>{''.join(cells)}</tr>")
    return (f"<table class='ladders'><thead><tr><th>config</th><th>axis</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _changes_table(regressions: list[Regression]) -> str:
    if not regressions:
        return "<p class='ok'>No change points in the history.</p>"
    rows = []
    for r in regressions:
        worse = len(r.worse)
        example = max(r.points, key=lambda p: abs(math.log(p.ratio)) if p.before and p.after > 0
                      else 0)
        rows.append(f"<tr><td><code>{r.first_bad[:12]}</code></td><td><code>{r.last_good[:12]}"
                    f"</code></td><td>{len(r.candidates)}</td><td>{r.kind}</td>"
                    f"<td>{worse} worse, {len(r.points) - worse} better</td>"
                    f"<td>{html.escape(example.benchmark)} "
                    f"[{html.escape(case_label(example.params))}]: "
                    f"{html.escape(example.change_text())}</td></tr>")
    return ("<table class='changes'><thead><tr><th>first bad</th><th>last good</th>"
            "<th>commits in range</th><th>kind</th><th>series</th><th>largest change</th></tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table>")


def _first_to_latest(title: str, commits: list[Commit],
                     series: dict[str, dict[str, float]]) -> str:
    """Each series' first and latest measured value (the plot's exact numbers, as text)."""
    rows = []
    for name in sorted(series):
        measured = [(c, series[name][c.hash]) for c in commits if c.hash in series[name]]
        if not measured:
            continue
        (first, a), (last, b) = measured[0], measured[-1]
        rows.append(f"<tr><th>{html.escape(name)}</th><td><code>{first.hash[:8]}</code> "
                    f"{a:.1f}%</td><td><code>{last.hash[:8]}</code> {b:.1f}%</td></tr>")
    if not rows:
        return ""
    return (f"<table class='efficiency' data-title='{html.escape(title)}'><thead><tr>"
            "<th>series</th><th>first measured</th>"
            f"<th>latest</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _efficiency_section(frame, commits: list[Commit], focus: dict) -> list[str]:
    """Padding efficiency (exact) per workload, then kernel efficiency and the fraction of the
    roofline per probe and device against the bandwidth each row's machine info recorded."""
    base = {k: v for k, v in focus.items() if k != "overrides"}
    overrides = list(dict.fromkeys(([focus["overrides"]] if "overrides" in focus else [])
                                   + list(PADDING_OVERRIDES)))
    parts = ["<h2 id='efficiency'>Efficiency per commit</h2>",
             "<p class='meta'>padding efficiency = real KV tokens / padded KV slots walked "
             "(exact); kernel efficiency = bytes walked per second / the machine's memory "
             "bandwidth; of roofline = bytes the kernel must move per second / that bandwidth. "
             "Each timed point is judged against the bandwidth stored with its own run's "
             "machine info.</p>"]
    for env in overrides:
        title = (f"padding efficiency at {case_label(dict(base, overrides=env))} "
                 "(% of walked KV slots that are real tokens)")
        series = eff.padding_series(frame, dict(base, overrides=env))
        parts += [_line_plot(title, commits, series, "%"),
                  _first_to_latest(title, commits, series)]
    found = eff.roofline_series(frame)
    if not found:
        parts.append("<p class='nodata'>kernel efficiency: not measured in this history (it "
                     "needs kernel.Decode.time_layer and kernel.DecodeBytes of the same run).</p>")
    for device, r in sorted(found.items()):
        judged = "; ".join(f"{html.escape(m)}: {html.escape(', '.join(sorted(t)))}"
                           for m, t in sorted(r.judged.items()))
        parts.append(f"<p class='meta bandwidth' data-device='{html.escape(device)}'>"
                     f"{html.escape(device)}: judged against {judged or 'no stored bandwidth'}"
                     + (f"; {r.unjudged} timed row(s) without a stored bandwidth for "
                        f"{html.escape(device)} left out" if r.unjudged else "") + "</p>")
        for title, series in ((f"kernel efficiency on {device} (% of memory bandwidth)",
                               r.kernel),
                              (f"fraction of the roofline on {device} (%)", r.roofline)):
            parts += [_line_plot(title, commits, series, "%"),
                      _first_to_latest(title, commits, series)]
    return parts


def _frontier_section(frame, commits: list[Commit]) -> list[str]:
    """Per config of the tier, the default kv ladder's excess padding over the frontier at its
    compiled-graph count, one point per commit (lower is better; 0 is on the frontier)."""
    parts = ["<h2 id='frontier'>Default ladder against the frontier per commit</h2>",
             "<p class='meta'>how much more (%) each config's own kv ladder pads on the tier's "
             "mixes than the best ladder the optimiser finds with at most as many compiled "
             "graphs, both evaluated by that commit's code (exact.Frontier.track_excess_padding"
             "; <code>spyre-bench frontier</code> shows the whole frontier)</p>"]
    found = frontier_history.excess_series(frame)
    if not found:
        return parts + ["<p class='nodata'>not measured in this history.</p>"]
    for env, series in sorted(found.items()):
        parts.append(_line_plot(f"excess padding of the default kv ladder, env {env} (%)",
                                commits, series, "%"))
    return parts


CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; }
table.ladders th, table.ladders td { white-space: nowrap; } p.nodata { color: #888; }
td.changed { background: #fff3b0; font-weight: bold; }
figure.plot { margin: 0.5em 0; } figure.plot svg { max-width: 100%; height: auto; }
p.ok { color: #2e7d32; } .meta { color: #666; font-size: 0.8em; }
"""


def build(frame, regressions: list[Regression], commits: list[Commit], out_dir: Path,
          focus: dict = FOCUS, asv_link: str | None = None) -> Path:
    """Write ``out_dir/index.html``; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = [f"<h1>spyre-bench: history of {len(commits)} commits</h1>",
             f"<p class='meta'>{len(frame)} results from machines "
             f"{html.escape(', '.join(sorted(frame['machine'].unique())))}; spyre-bench "
             f"{__version__}" + (f"; <a href='{asv_link}'>ASV graphs per benchmark</a>"
                                 if asv_link else "") + "</p>",
             "<h2 id='changes'>Latest change points</h2>", _changes_table(regressions),
             "<h2 id='ladders'>Batched num_blocks ladder per config</h2>",
             _ladder_table(frame, commits),
             f"<h2 id='workloads'>Per workload at {html.escape(case_label(focus))}</h2>"]
    for bench, title in WORKLOAD_FIGURES:
        rows = _focus_rows(frame, bench, focus)
        parts.append(_line_plot(title, commits, _by(rows, "param:workload"), title))
    parts.append("<h2 id='compiles'>Compile counts per commit (summed over configs)</h2>")
    for bench, title in COMPILE_FIGURES:
        rows = frame[(frame["benchmark"] == bench) & (frame["status"] == "ok")]
        series = {f"{m}/{e}": _sum_by_commit(g) for (m, e), g in
                  rows.groupby(["machine", "env_name"])}
        parts.append(_line_plot(title, commits, series, "count"))
    parts.append("<h2 id='throughput'>Kernel time per probe and device</h2>")
    rows = frame[(frame["benchmark"] == "kernel.Decode.time_layer") & (frame["status"] == "ok")]
    for device, g in rows.groupby(rows["env_name"].str.rsplit("-", n=1).str[-1]):
        series = {f"{p} ({m})": {c: v * 1e3 for c, v in s.items()}
                  for (p, m), gg in g.groupby(["param:probe", "machine"])
                  for s in [_sum_by_commit(gg)]}
        parts.append(_line_plot(f"time per layer on {device} (ms)", commits, series, "ms"))
    parts += _efficiency_section(frame, commits, focus)
    parts += _frontier_section(frame, commits)
    page = ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<title>spyre-bench report</title>"
            f"<style>{CSS}</style></head><body>{''.join(parts)}{END_MARK}</body></html>")
    index = out_dir / "index.html"
    index.write_text(page)
    return index
