"""Shared fixtures: the generated spyre-inference-like repository (built once per session)."""

from __future__ import annotations

import pytest

from tests.fixtures.spyre_repo import FixtureRepo, build_repo


@pytest.fixture(scope="session")
def spyre_repo(tmp_path_factory) -> FixtureRepo:
    """One commit per bucketer generation plus a broken one (tests.fixtures.spyre_repo).

    Shared by the whole session: tests may add commits (``add_commit``/``edit`` leave branches
    alone) but must not move branches; build a private one with ``build_repo`` for that.
    """
    return build_repo(tmp_path_factory.mktemp("fixture") / "spyre-inference")
