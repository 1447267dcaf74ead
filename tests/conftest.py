"""Shared fixtures: the generated spyre-inference-like repository (built once per session)."""

from __future__ import annotations

import os

import pytest

# Subjects load in the test process by default: a worker is a fork, and a fork of a pytest process
# that has run torch and left threads about can deadlock in the child. tests/test_subject_worker.py
# runs the worker itself, in fresh processes.
os.environ.setdefault("SPYRE_BENCH_IN_PROCESS", "1")

from tests.fixtures.spyre_repo import FixtureRepo, build_repo


@pytest.fixture(scope="session")
def spyre_repo(tmp_path_factory) -> FixtureRepo:
    """One commit per bucketer generation plus a broken one (tests.fixtures.spyre_repo).

    Shared by the whole session: tests may add commits (``add_commit``/``edit`` leave branches
    alone) but must not move branches; build a private one with ``build_repo`` for that.
    """
    return build_repo(tmp_path_factory.mktemp("fixture") / "spyre-inference")
