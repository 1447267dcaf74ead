"""What ``spyre-bench kernel --fail-on`` can gate on, and the exit status its rows give.

Kept apart from the command so the rule is one fact: a row that trips a requested gate is exit 1;
rows that were all skipped measured nothing, which is an error (exit 2), never a green 0.
"""

from __future__ import annotations

from harness.errors import ConfigError, NothingComputed

#: What ``--fail-on`` can gate on: a row is flagged when the test holds.
GATES = {
    "wrong": lambda r: "wrong" in r,
    "fallbacks": lambda r: bool(r.get("graphs", {}).get("fallbacks")),
    "model": lambda r: "graphs" in r and not r["graphs"]["matches_model"],
}


def parse_gates(text: str) -> list[str]:
    """``wrong,fallbacks`` → the gate names; ``none`` gates on nothing; unknown names are bad input."""
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in GATES and n != "none"]
    if unknown:
        raise ConfigError(f"--fail-on {text!r}: unknown {', '.join(unknown)}; known: "
                          f"{', '.join(GATES)}, none")
    return [n for n in names if n != "none"]


def exit_status(rows: list[dict], gates: list[str]) -> int:
    """1 when a row trips a requested gate or the subject's own code failed; every row skipped
    is an error (exit 2), never 0."""
    if any(GATES[g](r) for g in gates for r in rows) or any(r.get("failed") for r in rows):
        return 1
    if rows and all("skipped" in r for r in rows):
        raise NothingComputed([r["skipped"] for r in rows])
    return 0
