"""``spyre-bench``: one subcommand per verb of the pipeline."""

from __future__ import annotations

import argparse
import sys

from harness import __version__
from harness.errors import HarnessError

COMMANDS = ("ladders", "cost", "kernel", "crosscheck", "compare", "history", "run", "nightly",
            "changes", "bisect", "report", "comment")


class _Parser(argparse.ArgumentParser):
    """Bad flags are one line and exit 2, like every other input error (no usage dump)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="spyre-bench",
        description="Benchmarks and regression tracking for spyre-inference's attention bucketer "
                    "and batched decode kernel. Exact figures (ladders, compile keys, loop "
                    "iterations, padding, host-to-device bytes) come from a pure-Python model of "
                    "the subject's bucketer; no card, GPU or checkout needed for them.")
    p.add_argument("--version", action="version", version=f"spyre-bench {__version__}")
    sub = p.add_subparsers(title="commands", metavar="COMMAND", required=True)
    import importlib
    for name in COMMANDS:
        importlib.import_module(f"harness.cli.{name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except HarnessError as exc:
        print(f"spyre-bench: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_status", 2)
    except KeyboardInterrupt:
        print("spyre-bench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
