"""Make this harness importable inside a plain-``asv run`` environment (asv.conf.json's
install_command), without building or installing anything.

ASV already checks each commit out into ``{env_dir}/project`` (its ``{build_dir}``), where
``harness.suite`` reads it by ``git:`` revision; spyre-inference itself needs vLLM and torch-spyre,
so it is never pip-installed. What the environment lacks is the harness: this writes a ``.pth``
file into the environment's site-packages pointing at the spyre-bench checkout, like an editable
install but instant and offline. Run by path (``python {conf_dir}/harness/stage.py {conf_dir}``),
since the harness is not importable yet when it runs.

    python harness/stage.py SPYRE_BENCH_DIR      link SPYRE_BENCH_DIR into this interpreter
    python harness/stage.py --remove             remove the link
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
from pathlib import Path

PTH_NAME = "spyre_bench_harness.pth"


def pth_path() -> Path:
    return Path(sysconfig.get_paths()["purelib"]) / PTH_NAME


def link(source: Path) -> Path:
    if not (source / "harness" / "__init__.py").is_file():
        raise SystemExit(f"harness.stage: {source} is not a spyre-bench checkout")
    path = pth_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{source.resolve()}\n")
    return path


def remove() -> None:
    pth_path().unlink(missing_ok=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python harness/stage.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--remove", action="store_true", help="remove the link instead")
    p.add_argument("source", nargs="?", type=Path, help="the spyre-bench checkout")
    args = p.parse_args(argv)
    if args.remove:
        remove()
        return 0
    if args.source is None:
        p.error("expected SPYRE_BENCH_DIR")
    link(args.source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
