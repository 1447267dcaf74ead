"""Stage a spyre-inference checkout for plain ``asv run`` (asv.conf.json's install_command).

spyre-inference needs vLLM and torch-spyre to pip-install, so the suite loads it by path instead:
this copies the checkout's source tree to ``$ASV_ENV_DIR/project``, where harness.suite finds it.

    python -m harness.stage BUILD_DIR DEST      copy BUILD_DIR to DEST (replacing it)
    python -m harness.stage --remove DEST       remove DEST (uninstall_command)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".venv", "build", "dist")


def stage(build_dir: Path, dest: Path) -> None:
    if not build_dir.is_dir():
        raise SystemExit(f"harness.stage: {build_dir} is not a directory")
    # copy beside the destination, then swap, so an interrupted copy never looks complete
    tmp = Path(tempfile.mkdtemp(prefix=".staging-", dir=dest.parent))
    try:
        shutil.copytree(build_dir, tmp / "tree", ignore=IGNORE)
        remove(dest)
        (tmp / "tree").rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def remove(dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.stage", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--remove", action="store_true", help="remove DEST instead of staging")
    p.add_argument("paths", nargs="+", metavar="PATH")
    args = p.parse_args(argv)
    if args.remove:
        for path in args.paths:
            remove(Path(path))
        return 0
    if len(args.paths) != 2:
        p.error("expected BUILD_DIR DEST")
    stage(Path(args.paths[0]), Path(args.paths[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
