"""``run``'s exact tier runs in a process of its own: a commit whose code ends its process ends
that tier, said as its failure, and ``run`` goes on (it once ran in ``run``'s own process, where
such a commit ended ``run`` and the tier's fork beside ``run``'s progress thread could hang it)."""

from __future__ import annotations

from harness.store.history import load_history
from tests.fixtures.spyre_repo import BUCKETER
from tests.fixtures.spyre_sources import generation_files
from tests.test_asv_run import run_cli

EXACT = r"^exact\.Config\.track_batched_num_blocks_distinct\("


def test_a_commit_that_exits_ends_its_exact_tier_not_run(spyre_repo, tmp_path):
    source = generation_files("810-clamp")[BUCKETER] + "\nimport os\nos._exit(7)\n"
    commit = spyre_repo.add_commit({BUCKETER: source}, "a bucketer that exits on import",
                                   parent="810-clamp")
    good = spyre_repo.commits["810-clamp"]
    proc = run_cli("run", "--repo", str(spyre_repo.path), good, commit,
                   "--results-dir", str(tmp_path / "results"), "--machine", "box",
                   "--device", "cpu", "--tier", "tiny", "--bench", EXACT, home=tmp_path,
                   check=False, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out
    assert "the exact tier's process ended with exit status 7" in out, out
    frame = load_history(tmp_path / "results")
    measured = frame[frame.commit == good]
    assert len(measured) and measured["value"].notna().all()   # the good commit's figures kept
