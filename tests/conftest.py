"""Shared fixtures: a temporary vault root and an isolated environment."""

from __future__ import annotations

from pathlib import Path

import pytest

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
