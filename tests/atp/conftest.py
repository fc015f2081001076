"""Fixtures: a ledger per role over one fake store, and the CLI on a temporary SQLite store."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from atomic_agents.atp import Identity, Ledger
from atomic_agents.cli import main
from atomic_agents.memory import HashingEmbedder, InMemoryMemoryStore, MemoryStore

PLAN = {
    "plan": "add a retry around the deploy step",
    "success_criteria": "two deploys in a row go green",
    "deadline": "2026-12-05T17:00:00Z",
    "escalation_trigger": "the deploy fails twice",
}
DISPATCH = {**{k: v for k, v in PLAN.items() if k != "plan"}, "target_role": "builder"}
ACTION = {"summary": "wrapped the deploy step in a retry", "rollback_steps": "git revert the retry commit", "files_changed": ["deploy.py"]}
GREEN = {"status": "green", "evidence": "ran the deploy twice, both green", "scope_verified": "deploy retry"}
RED = {"status": "red", "evidence": "second deploy failed", "scope_verified": "deploy retry"}


@pytest.fixture(params=["memory", "postgres"])
def store(request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
    """The ledger's store: the in-memory fake, and the PostgreSQL backend on a real server."""
    if request.param == "memory":
        yield InMemoryMemoryStore(embedder=HashingEmbedder())
        return
    from atomic_agents.memory._postgres import PostgresMemoryStore

    pg = PostgresMemoryStore(request.getfixturevalue("pg_dsn"), embedder=HashingEmbedder(), pool_size=2)
    yield pg
    pg.close()


@pytest.fixture
def as_role(store: MemoryStore) -> Callable[[str], Ledger]:
    """``as_role("builder")``: a ledger writing as agent ``builder`` in acme/acme-web."""
    return lambda agent: Ledger(store, Identity("acme", "acme/web", agent, "alice"))


class Cli:
    """``atomic-agents`` in-process on a temporary SQLite store with the fake embedder."""

    def __init__(self, capsys: pytest.CaptureFixture[str], root: Path, backend: str = "sqlite") -> None:
        self.capsys, self.root, self.backend = capsys, root, backend

    def __call__(self, *args: str, agent: str = "dispatcher", ok: bool = True) -> tuple[int, Any, str]:
        argv = [*args, "--agent-id", agent, "--project", str(self.root), "--json"]
        with pytest.raises(SystemExit) as exc:
            main(argv)
        out, err = self.capsys.readouterr()
        code = int(exc.value.code or 0)
        assert "Traceback" not in out + err
        if ok:
            assert code == 0, (argv, out, err)
        return code, (json.loads(out) if out.strip() else None), err


@pytest.fixture(params=["sqlite", "postgres"])
def cli(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The CLI on a SQLite file, and on a PostgreSQL DSN in ``ATOMIC_AGENTS_DB``."""
    monkeypatch.setenv("EDEN_ORG_ID", "acme")
    monkeypatch.setenv("EDEN_WORKSPACE_ID", "acme/web")
    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")
    (tmp_path / "store").mkdir()
    db = request.getfixturevalue("pg_dsn") if request.param == "postgres" else str(tmp_path / "store" / "memory.db")
    monkeypatch.setenv("ATOMIC_AGENTS_DB", db)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("EDEN_AGENT_ID", "ATP_NON_INTERACTIVE", "CI"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "project").mkdir()
    return Cli(capsys, tmp_path / "project", request.param)
