"""A temporary ASV config derived from the project's asv.conf.json.

ASV expands no environment variables in its config, so pointing the suite at another repository
or results folder means writing a config: the project's file is the single source, this only
overrides paths (made absolute, since ASV resolves them from the config's folder).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import HarnessError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROJECT_CONFIG = PROJECT_ROOT / "asv.conf.json"


def load_project_config(path: Path = PROJECT_CONFIG) -> dict:
    from asv import util  # ASV's own reader: accepts // comments and trailing commas
    if not path.exists():
        raise HarnessError(f"{path} not found: spyre-bench run needs the project's asv.conf.json "
                           "(run from a clone of spyre-bench)")
    return util.load_json(str(path), js_comments=True)


def write_config(dest: Path, repo: Path, results_dir: Path, branches: list[str] | None = None,
                 base: Path = PROJECT_CONFIG) -> Path:
    conf = load_project_config(base)
    conf.update({
        "repo": str(repo.resolve()),
        "results_dir": str(results_dir.resolve()),
        "html_dir": str((dest.parent / "html").resolve()),
        "env_dir": str((dest.parent / "env").resolve()),
        "benchmark_dir": str((base.parent / conf.get("benchmark_dir", "benchmarks")).resolve()),
    })
    for key in ("build_command", "install_command", "uninstall_command"):
        # {conf_dir} means the spyre-bench checkout, not this temporary config's folder
        conf[key] = [c.replace("{conf_dir}", str(base.parent.resolve()))
                     for c in conf.get(key) or []]
    if branches:
        conf["branches"] = branches
    dest.write_text(json.dumps(conf, indent=2))
    return dest
