"""Compare two commits' stored results (the ASV history), one machine and environment a side.

Which machine, device and environment produced each side is checked: numbers from different
machines are not comparable. Stored timings were never interleaved, so their verdicts are
advisory and say why.
"""

from __future__ import annotations

import json
import math

from harness.analyze.comparison import (
    LADDER_AXES,
    Comparison,
    LadderChange,
    Side,
    add_timings,
)
from harness.errors import HarnessError
from harness.matrix import case_label
from harness.registry import is_exact, is_timed, lookup
from harness.store.identity import config_key
from harness.store.identity import read as read_identity

#: Stored ladders entry by entry: shown as ladder changes, not as figures.
LADDER_BENCHMARKS = "exact.Ladder."


def _commit_rows(frame, prefix: str):
    commits = sorted({c for c in frame["commit"].unique() if c.startswith(prefix)})
    if not commits:
        raise HarnessError(f"no stored results for commit {prefix!r}")
    if len(commits) > 1:
        raise HarnessError(f"commit prefix {prefix!r} is ambiguous: {', '.join(c[:12] for c in commits)}")
    return frame[frame["commit"] == commits[0]]


def _pick_series(rows, machine: str | None, env_name: str | None):
    if machine:
        rows = rows[rows["machine"] == machine]
    if env_name:
        rows = rows[rows["env_name"] == env_name]
    return rows


def _side(rows, label: str) -> Side:
    first = rows.iloc[0]
    # read quietly: the history reader already warned about a sidecar it could not trust
    identity = read_identity(first["file"])
    return Side((identity.label if identity else "") or label, first["commit"], first["machine"],
                identity.device if identity else None, first["env_name"],
                identity.harness_commit if identity else None,
                identity.sources if identity else None)


def compare_stored(frame, base: str, head: str, machine: str | None = None,
                   env_name: str | None = None, allow_cross_machine: bool = False,
                   timings: bool = True, **kwargs) -> Comparison:
    """Compare two commits' stored results (one machine and environment per side); without
    ``timings`` the stored timings are left out (the caller measures them interleaved)."""
    b_rows = _pick_series(_commit_rows(frame, base), machine, env_name)
    h_rows = _pick_series(_commit_rows(frame, head), machine, env_name)
    b_series = set(zip(b_rows["machine"], b_rows["env_name"]))
    h_series = set(zip(h_rows["machine"], h_rows["env_name"]))
    if not b_series or not h_series:
        raise HarnessError(f"no stored results for {base if not b_series else head} on "
                           f"machine={machine or 'any'} env={env_name or 'any'}")
    shared = b_series & h_series
    if len(shared) > 1:
        raise HarnessError("both commits were measured on several machines/environments "
                           f"({', '.join(sorted(f'{m}/{e}' for m, e in shared))}): pick one with "
                           "--machine/--env-name")
    pick_b, pick_h = (next(iter(shared)),) * 2 if shared else (min(b_series), min(h_series))
    b_rows = b_rows[(b_rows["machine"] == pick_b[0]) & (b_rows["env_name"] == pick_b[1])]
    h_rows = h_rows[(h_rows["machine"] == pick_h[0]) & (h_rows["env_name"] == pick_h[1])]
    comparison = Comparison(_side(b_rows, base), _side(h_rows, head), **kwargs)
    _check_fingerprints(comparison)

    _compare_exact_rows(comparison, b_rows, h_rows)
    seen = {json.dumps({k: v for k, v in e.params.items() if k != "workload"}, sort_keys=True)
            for e in comparison.exact_all}
    comparison.configs = [json.loads(k) for k in sorted(seen)]
    _compare_stored_ladders(comparison, b_rows, h_rows)
    timing_rows = _paired_timings(b_rows, h_rows) if timings else []
    comparison.timings_measured = bool(timing_rows)
    if timing_rows:
        comparison.timing_advisory = True
        comparison.timing_notes += stored_timing_notes(_timed_span(b_rows), _timed_span(h_rows))
    if comparison.problems and not allow_cross_machine:
        comparison.skipped += [(f"{bench} {case_label(params)}", "timings from different "
                                "machines/devices are not comparable")
                               for bench, params, *_ in timing_rows]
    else:
        add_timings(comparison, timing_rows)
    return comparison


def _timed_span(rows) -> tuple[float, float] | None:
    """(first start, last end) in seconds of a side's timed rows, from the history frame.

    The one place stored compare reads when a side was measured (``started_at``/``duration``,
    ASV's milliseconds and seconds), so a change of the store's layout touches only this.
    """
    timed = rows[rows["benchmark"].map(is_timed)]
    spans = [(float(r["started_at"]) / 1000, float(r["started_at"]) / 1000
              + float(r["duration"] or 0)) for _, r in timed.iterrows()
             if isinstance(r["started_at"], (int, float)) and not math.isnan(r["started_at"])]
    return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None


def stored_timing_notes(base_span, head_span) -> list[str]:
    """Why stored timings are advisory: never interleaved, when they were taken, no load record."""
    notes = ["base and head were not measured interleaved (stored results are timed one side "
             "after the other): timing verdicts are advisory; `spyre-bench compare --base "
             "SPEC --head SPEC --timings` interleaves them"]
    if base_span and head_span:
        apart = abs(head_span[0] - base_span[0])
        notes.append(f"measured {_duration(apart)} apart")
    else:
        notes.append("when each side was measured is not recorded")
    notes.append("host load while measuring was not recorded: a busy host cannot be ruled out")
    return notes


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _check_fingerprints(c: Comparison) -> None:
    for what in ("machine", "device", "env_name"):
        b, h = getattr(c.base, what), getattr(c.head, what)
        if b != h:
            c.problems.append(f"{what} differs: {b} (base) vs {h} (head)")


def _key(row) -> tuple:
    return row["benchmark"], json.dumps(row["params"], sort_keys=True)


def _compare_exact_rows(comparison: Comparison, b_rows, h_rows) -> None:
    # ladders (exact.Ladder: one sum each) are compared whole, from the identity's ladders
    exact = lambda rows: {_key(r): r for _, r in rows[rows["benchmark"].map(  # noqa: E731
        lambda b: is_exact(b) and not b.startswith(LADDER_BENCHMARKS))].iterrows()}
    b, h = exact(b_rows), exact(h_rows)
    for key in sorted(set(b) | set(h)):
        rb, rh = b.get(key), h.get(key)
        row = rb if rb is not None else rh
        params, metric = row["params"], lookup(row["benchmark"]).figure
        statuses = (rb["status"] if rb is not None else "absent",
                    rh["status"] if rh is not None else "absent")
        if statuses != ("ok", "ok"):
            if statuses[0] == "ok":
                comparison.lost.append((f"{metric} {case_label(params)}",
                                        f"head {statuses[1]}"))
            elif statuses[0] != statuses[1]:
                comparison.skipped.append((f"{metric} {case_label(params)}",
                                           f"base {statuses[0]}, head {statuses[1]}"))
            continue
        if rb["version"] != rh["version"]:
            # a figure whose definition changed (harness.registry) is a new series: never a step
            comparison.skipped.append((f"{metric} {case_label(params)}",
                                       "its definition changed between the two runs' harnesses "
                                       f"(version {rb['version']} -> {rh['version']})"))
            continue
        comparison.add_exact(metric, params, rb["value"], rh["value"])


def _stored_ladders(results_file) -> dict[str, tuple[dict, dict]]:
    identity = read_identity(results_file)
    pairs = identity.ladders_by_config() if identity else []
    return {config_key(config): (config, ladders) for config, ladders in pairs}


def _compare_stored_ladders(comparison: Comparison, b_rows, h_rows) -> None:
    lb = _stored_ladders(b_rows.iloc[0]["file"])
    lh = _stored_ladders(h_rows.iloc[0]["file"])
    for key in sorted(set(lb) & set(lh)):
        params, base = lb[key]
        head = lh[key][1]
        for axis in LADDER_AXES:
            a, b = base.get(axis), head.get(axis)
            if a != b and "skipped" not in base and "skipped" not in head:
                comparison.ladders.append(LadderChange(params, axis, a, b))


def _paired_timings(b_rows, h_rows) -> list:
    timed = lambda rows: {_key(r): r for _, r in rows[rows["benchmark"].map(is_timed)  # noqa: E731
                                                      & (rows["status"] == "ok")].iterrows()}
    b, h = timed(b_rows), timed(h_rows)
    out = []
    for key in sorted(set(b) & set(h)):
        rb, rh = b[key], h[key]
        samples_b = rb["samples"] or [rb["value"]]
        samples_h = rh["samples"] or [rh["value"]]
        out.append((rb["benchmark"], rb["params"], rb["unit"], samples_b, samples_h))
    return out
