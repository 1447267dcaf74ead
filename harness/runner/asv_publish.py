"""``asv publish`` over a results folder laid out one machine per folder, into a given directory.

asv publish wants ``results/benchmarks.json`` at the top, which spyre-bench keeps per machine: the
folder is staged in a temporary copy with the machines' copies merged, so nothing stored changes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.runner.asv_config import write_config


def publish_asv_site(results_dir: Path, repo: Path, dest: Path) -> None:
    """asv publish needs results/benchmarks.json at the top: rebuilt from the machines' copies."""
    with tempfile.TemporaryDirectory(prefix="spyre-bench-publish-") as tmp:
        staged = Path(tmp) / "results"
        shutil.copytree(results_dir, staged)
        if not (staged / "benchmarks.json").exists():
            merged = {}
            for path in sorted(staged.glob("*/benchmarks.json")):
                merged.update(json.loads(path.read_text()))
            (staged / "benchmarks.json").write_text(json.dumps(merged))
        config = write_config(Path(tmp) / "asv.conf.json", repo, staged)
        conf = json.loads(config.read_text())
        conf["html_dir"] = str(dest.resolve())
        config.write_text(json.dumps(conf))
        subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(config)],
                       check=True, capture_output=True)
