"""``spyre-bench``: one subcommand per verb of the pipeline."""

from __future__ import annotations

import argparse
import sys

from harness import __version__
from harness.errors import EXIT_INTERRUPTED, EXIT_OK, HarnessError
from harness.interrupts import as_keyboard_interrupt
from harness.lifeline import hold, rooted

COMMANDS = ("ladders", "cost", "frontier", "kernel", "crosscheck", "compare", "history", "run",
            "nightly", "merge", "changes", "bisect", "report", "comment")


class _Parser(argparse.ArgumentParser):
    """Bad flags are one line and exit 2, like every other input error (no usage dump)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="spyre-bench",
        description="Benchmarks and regression tracking for spyre-inference's attention bucketer "
                    "and batched decode kernel. Exact figures (ladders, compile keys, loop "
                    "iterations, padding, host-to-device bytes) come from running the subject's "
                    "own code on the CPU: a spyre-inference commit's bucketer and metadata "
                    "builder (in a worker process), or the embedded reference's pure-Python "
                    "model of them; no card or GPU needed for them.")
    p.add_argument("--version", action="version", version=f"spyre-bench {__version__}")
    sub = p.add_subparsers(title="commands", metavar="COMMAND", required=True)
    import importlib
    for name in COMMANDS:
        importlib.import_module(f"harness.cli.{name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run a command; its exit status follows the one contract in harness.errors (README). What
    it starts ends with it, kill -9 included (harness.lifeline)."""
    hold()
    with as_keyboard_interrupt(), rooted():
        try:
            args = parser().parse_args(argv)
            return args.run(args)
        except HarnessError as exc:
            print(f"spyre-bench: error: {exc}", file=sys.stderr)
            return exc.exit_status
        except KeyboardInterrupt as exc:
            # the last line: what was measured before the interrupt, where a command said so
            said = f": {exc}" if str(exc) else ""
            print(f"spyre-bench: interrupted{said}", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BrokenPipeError:
            return EXIT_OK
        finally:
            _close_workers()


def _close_workers() -> None:
    """A command's subject workers end with it (also when main() is called in-process)."""
    proxy = sys.modules.get("harness.worker.proxy")
    if proxy is not None:
        proxy.close_all()


if __name__ == "__main__":
    sys.exit(main())
