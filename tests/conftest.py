"""Shared fixtures: a temporary vault root and an isolated environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests run derandomized (a fixed seed per test) so the same commit gives the same
# verdict on every machine, CI included; `HYPOTHESIS_PROFILE=explore make test` searches anew.
settings.register_profile("default", derandomize=True, deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

from ._postgres import pg_dsn, pg_server  # noqa: F401  (fixtures: a real PostgreSQL server per session)


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("ATOMIC_AGENTS_ROOT", "ATOMIC_AGENTS_DB", "EDEN_ORG_ID", "EDEN_WORKSPACE_ID"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def agents_root(tmp_path: Path) -> Path:
    root = tmp_path / "agents"
    root.mkdir()
    return root
