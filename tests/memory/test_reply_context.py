"""The reply context of search_hybrid: each candidate that asks something finds the memory written
right after it in its scope's timeline, on SQLite and PostgreSQL alike, through an index."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore
from atomic_agents.memory._scoring import asks

A = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")
B = Scope("builder", "bob", org_id="acme", workspace_id="acme/web")


def _writes(store: Any, seed: int) -> None:
    """Batches (one created_at each) and single writes, interleaved across two scopes, some
    questions, some forgotten, some expiring: the timeline has ties, gaps and holes."""
    rng = random.Random(seed)
    for n in range(14):
        scope = A if rng.random() < 0.7 else B
        texts = [f"turn {n}.{i} about {rng.choice(['cats', 'rain', 'bikes'])}" + rng.choice(["?", ".", "? 🙂", "!"])
                 for i in range(rng.randint(1, 6))]  # fmt: skip
        if len(texts) > 1:
            ids = store.remember_many([(t, {"n": n % 2}) for t in texts], scope)
        else:
            ids = [store.remember(texts[0], {"n": n % 2}, scope, ttl_ms=1 if rng.random() < 0.2 else None)]
        for mid in ids:
            if rng.random() < 0.15:
                store.forget(mid)
    time.sleep(0.01)  # the 1 ms ttls are past


def _expected(store: Any, scope: Scope, seq_of: dict[str, int], filters: dict[str, Any] | None = None) -> dict[int, int]:
    line = store.list_memories(scope)  # live, in (created_at, seq) order
    want = {}
    for a, b in zip(line, line[1:], strict=False):
        if asks(a.content) and (not filters or all(b.metadata.get(k) == v for k, v in filters.items())):
            want[seq_of[b.id]] = seq_of[a.id]
    return want


def _seqs(store: Any) -> dict[str, int]:
    return {mid: seq for seq, mid in store._read("SELECT seq, id FROM memories")}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("one_instant", [False, True])
def test_sqlite_finds_each_questions_successor_in_its_scope_timeline(
    tmp_path: Path, seed: int, one_instant: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteMemoryStore(tmp_path / "m.db", embedder=HashingEmbedder())
    if one_instant:  # every write at the same created_at, both scopes: ties broken by write order only
        with monkeypatch.context() as m:
            m.setattr(time, "time", lambda: 1_800_000_000.0)
            _writes(store, seed)
    else:
        _writes(store, seed)
    seq_of = _seqs(store)
    for scope in (A, B):
        keys = [seq_of[m.id] for m in store.list_memories(scope)]
        assert store._successors(keys, scope, {}) == _expected(store, scope, seq_of)
        assert store._successors(keys, scope, {"n": 1}) == _expected(store, scope, seq_of, {"n": 1})
    store.close()


@pytest.mark.parametrize("seed", range(3))
def test_postgres_finds_the_same_successors(pg_dsn: str, seed: int) -> None:
    from atomic_agents.memory._postgres import PostgresMemoryStore

    store = PostgresMemoryStore(pg_dsn, embedder=HashingEmbedder())
    _writes(store, seed)
    seq_of = _seqs(store)
    for scope in (A, B):
        mems = {seq_of[m.id]: m for m in store.list_memories(scope)}
        assert store._successors(dict(mems), scope, {}) == _expected(store, scope, seq_of)
        assert store._successors(dict(mems), scope, {"n": 1}) == _expected(store, scope, seq_of, {"n": 1})
    store.close()


def test_postgres_seeks_the_timeline_index(pg_dsn: str) -> None:
    from atomic_agents.memory._postgres import PostgresMemoryStore

    store = PostgresMemoryStore(pg_dsn, embedder=HashingEmbedder())
    store.remember_many([(f"question {i}?", None) for i in range(2000)], A)  # one created_at for all

    def plan(cur: Any) -> str:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute(
            "EXPLAIN SELECT k.seq, n.seq FROM memories k CROSS JOIN LATERAL (SELECT m.seq FROM memories m"
            " WHERE m.agent_id = %s AND m.user_id = %s AND m.org_id = %s AND m.workspace_id = %s AND m.deleted_at = 0"
            " AND (m.created_at, m.seq) > (k.created_at, k.seq) ORDER BY m.created_at, m.seq LIMIT 1) n"
            " WHERE k.seq = ANY(%s)",
            [*A.key(), [1, 2, 3]],
        )
        return "\n".join(r[0] for r in cur.fetchall())

    text = str(store._run(plan, write=False))
    assert "ix_memories_timeline" in text and "Sort" not in text
    store.close()
