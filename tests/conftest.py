"""Shared fixtures: the generated spyre-inference-like repository (built once per session)."""

from __future__ import annotations

import os

import pytest

from tests.fixtures.spyre_repo import FixtureRepo, build_repo

#: Test workers at most: each runs real subprocesses (ASV, subject workers) of its own.
MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: the cores this process may use (not the host's count a container hides), at
    most MAX_WORKERS."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


@pytest.fixture(scope="session", autouse=True)
def figure_store(tmp_path_factory):
    """The persistent figure memo (harness.subjects.memo.store) of this session: a folder of its
    own, never the user's cache, so no test reads figures an earlier run of the suite wrote."""
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("figure-memo")
        mp.setenv("SPYRE_BENCH_MEMO_DIR", str(folder))
        yield folder


#: Dynamo's limits a commit's platform module raises when a test imports it in this process
#: (today's does at import): undone after each test, as the harness undoes them for a subject.
DYNAMO_LIMITS = ("recompile_limit", "accumulated_recompile_limit")


@pytest.fixture(autouse=True)
def dynamo_limits_undone():
    import torch._dynamo.config as config

    saved = {k: getattr(config, k) for k in DYNAMO_LIMITS}
    yield
    for k, v in saved.items():
        setattr(config, k, v)


@pytest.fixture(scope="session")
def spyre_repo(tmp_path_factory) -> FixtureRepo:
    """One commit per bucketer generation plus a broken one (tests.fixtures.spyre_repo).

    Shared by the whole session: tests may add commits (``add_commit``/``edit`` leave branches
    alone) but must not move branches; build a private one with ``build_repo`` for that.
    """
    return build_repo(tmp_path_factory.mktemp("fixture") / "spyre-inference")
