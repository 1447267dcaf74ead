"""``spyre-bench history``: the stored results as one table, or exported for pandas users."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import HISTORY_DIR, warn
from harness.report.tables import console, table


def register(sub) -> None:
    p = sub.add_parser(
        "history", help="load stored ASV results; summarise or export them (Parquet/CSV)",
        description="Load every results file under a results folder (all machines, commits, "
                    "environments) into one tidy table: one row per benchmark and parameter "
                    "combination, with status ok/skipped/failed, value, unit and raw samples. "
                    "Unreadable files are reported and skipped; the rest still loads. In Python: "
                    "harness.store.history.load_history(path) returns the pandas DataFrame.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results-dir", type=Path, default=HISTORY_DIR,
                   help="ASV results folder (default %(default)s, where `run` writes)")
    p.add_argument("--export", type=_export_file, metavar="FILE",
                   help="write the table to FILE (.parquet or .csv)")
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def _export_file(text: str) -> Path:
    """--export's argparse type: a regular file (or a new name) with a suffix export knows."""
    from harness.outputs import output_file
    if Path(text).suffix not in (".parquet", ".csv"):
        raise argparse.ArgumentTypeError(f"cannot export to {text}: use a .parquet or .csv file "
                                         "name")
    return output_file(text, doing="export to")


def run(args) -> int:
    from harness.store.history import export, load_history_quietly  # pandas: not at import
    out = console()
    frame = load_history_quietly(args.results_dir, warn)
    if args.export:
        from harness.outputs import replacing
        with replacing(args.export, doing="export to") as tmp:   # one line if it fails
            export(frame, tmp)
        out.print(f"wrote {len(frame)} rows to {args.export}")
    if frame.empty:
        out.print(f"no results under {args.results_dir}")
        return 0
    groups = frame.groupby(["machine", "env_name", "commit"], sort=False)
    rows = []
    for (machine, env, commit), g in groups:
        counts = g["status"].value_counts()
        rows.append([machine, env, commit[:12], str(g["date"].iloc[0])[:19],
                     g["subject"].iloc[0] or "-", counts.get("ok", 0), counts.get("skipped", 0),
                     counts.get("failed", 0), _completeness(g, counts)])
    out.print(table(f"history in {args.results_dir}: {len(frame)} rows",
                    ["machine", "env", "commit", "commit date", "subject", "ok", "skipped",
                     "failed", "complete"], rows))
    return 0


def _completeness(rows, counts) -> str:
    """A commit is complete when its run finished *and* measured something: a finished run
    whose every figure was skipped measured nothing."""
    if not rows["complete"].all():
        return "no (interrupted or killed)"
    ok = int(counts.get("ok", 0))
    if not ok:
        return "no (nothing measured)"
    return "yes" if ok == len(rows) else f"yes ({ok / len(rows):.0%} measured)"
