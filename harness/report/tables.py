"""Terminal tables (rich) for figure rows; a changed value shows as ``base → head``."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.metrics import format_value, ladder_text


def console(stream=None) -> Console:
    # Wide enough for ladders; rich soft-wraps on narrower terminals.
    return Console(file=stream or sys.stdout, width=None if (stream or sys.stdout).isatty() else 200)


def cell(values: list, unit: str = "") -> Text:
    """One value, or ``base → head`` highlighted when two differ."""
    shown = [ladder_text(v) if isinstance(v, (list, tuple)) or v is None and unit == "ladder"
             else format_value(v, unit) for v in values]
    if len(values) == 2 and values[0] != values[1]:
        return Text(f"{shown[0]} → {shown[1]}", style="bold yellow")
    return Text(shown[0])


def table(title: str, columns: list[str], rows: list[list], caption: str | None = None) -> Table:
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left",
              header_style="bold", show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[c if isinstance(c, Text) else Text(str(c)) for c in r])
    return t


def print_json(rows) -> None:
    json.dump(rows, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


#: The column (or axis row) of what a commit's code warned for a config.
SAID = "the code said"


def said_text(notes) -> str:
    """A config's warnings, once each, in one cell ("-" where the code said nothing)."""
    return " · ".join(dict.fromkeys(notes)) or "-"
