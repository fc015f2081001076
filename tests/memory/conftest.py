"""Fixtures: the fake embedder, and a store per backend factory (the conformance axis).

``postgres`` runs on a real server (``tests/_postgres.py``): a fresh database per test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from atomic_agents.memory import HashingEmbedder, InMemoryMemoryStore, MemoryStore, Scope, SQLiteMemoryStore

from ._helpers import CountingEmbedder


StoreFactory = Callable[..., MemoryStore]


def _sqlite(tmp: Path) -> StoreFactory:
    def make(embedder: HashingEmbedder | None = None) -> MemoryStore:
        return SQLiteMemoryStore(tmp / "memory.db", embedder=embedder or CountingEmbedder())

    return make


def _memory(tmp: Path) -> StoreFactory:
    def make(embedder: HashingEmbedder | None = None) -> MemoryStore:
        return InMemoryMemoryStore(embedder=embedder or CountingEmbedder())

    return make


def _postgres(dsn: str) -> StoreFactory:
    def make(embedder: HashingEmbedder | None = None) -> MemoryStore:
        from atomic_agents.memory._postgres import PostgresMemoryStore

        return PostgresMemoryStore(dsn, embedder=embedder or CountingEmbedder(), pool_size=2)

    return make


BACKENDS = {"sqlite": _sqlite, "memory": _memory, "postgres": _postgres}


@pytest.fixture(params=sorted(BACKENDS))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    opened: list[MemoryStore] = []
    where = request.getfixturevalue("pg_dsn") if request.param == "postgres" else tmp_path
    factory = BACKENDS[request.param](where)

    def make(embedder: HashingEmbedder | None = None) -> MemoryStore:
        store = factory(embedder)
        opened.append(store)
        return store

    yield make
    for s in opened:
        s.close()


@pytest.fixture
def store(make_store: StoreFactory) -> MemoryStore:
    return make_store()


@pytest.fixture
def scope() -> Scope:
    return Scope("builder", "alice", org_id="acme", workspace_id="acme/web")
