"""What the suite reads from its environment: torch's thread count for benchmark processes, and
the code at hand when ASV checked nothing out (an existing environment)."""

import pytest

from harness import suite
from harness.errors import HarnessError


def test_torch_threads_default_to_one_and_follow_the_environment(monkeypatch):
    monkeypatch.delenv(suite.THREADS_ENV, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert suite.torch_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert suite.torch_threads() == 3
    monkeypatch.setenv(suite.THREADS_ENV, "2")
    assert suite.torch_threads() == 2
    for bad in ("0", "two"):
        monkeypatch.setenv(suite.THREADS_ENV, bad)
        with pytest.raises(HarnessError, match=suite.THREADS_ENV):
            suite.torch_threads()


def test_benchmark_processes_set_torchs_threads(monkeypatch):
    import torch

    import benchmarks.kernel as kernel
    before = torch.get_num_threads()
    monkeypatch.setattr(kernel, "_DEVICE", None)
    monkeypatch.setenv("SPYRE_BENCH_DEVICE", "cpu")
    monkeypatch.setenv(suite.THREADS_ENV, "1")
    try:
        torch.set_num_threads(2)
        kernel._device()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_an_existing_environment_measures_the_configured_repos_working_tree(monkeypatch,
                                                                            tmp_path):
    for name in (suite.SUBJECT_ENV, "ASV_ENV_DIR", "ASV_COMMIT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(suite.ASV_REPO_ENV, str(tmp_path))
    assert suite.subject_spec() == f"path:{tmp_path.resolve()}"
    monkeypatch.setenv(suite.ASV_REPO_ENV, str(tmp_path / "absent"))
    with pytest.raises(HarnessError, match="no subject"):
        suite.subject_spec()
