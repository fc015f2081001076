"""What only the SQLite backend promises: plain-SQL readability, durability, many processes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore, default_db_path, open_store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


def test_plain_sql_readers_see_the_documented_columns(db: Path) -> None:
    scope = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")
    with SQLiteMemoryStore(db, embedder=HashingEmbedder()) as store:
        live = store.remember("Goal: g1 | Record ID: r1 | Stage: action", {"goal_id": "g1", "record_type": "action_record"}, scope)
        store.forget(store.remember("gone", {"goal_id": "g1"}, scope))
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT id, content, created_at, json_extract(metadata, '$.record_type'), org_id, workspace_id"
        " FROM memories WHERE json_extract(metadata, '$.goal_id') = 'g1' AND deleted_at = 0"
    ).fetchall()
    assert len(rows) == 1 and rows[0][0] == live and rows[0][3] == "action_record"
    assert isinstance(rows[0][2], float) and rows[0][2] > 1.6e9  # unix seconds
    assert rows[0][4:] == ("acme", "acme/web")
    assert json.loads(conn.execute("SELECT metadata FROM memories WHERE id = ?", [live]).fetchone()[0])["stored_at"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_listing_one_goal_is_driven_by_the_tag_index(db: Path) -> None:
    store = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    scope = Scope("a", "u")
    store.remember("x", {"goal_id": "g1", "stage": "action"}, scope)
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)
    assert len(store.list_memories(scope, {"goal_id": "g1", "stage": "action"})) == 1
    store._conn.set_trace_callback(None)
    sql = next(q for q in seen if "memory_tags" in q)
    plan = [r[3] for r in sqlite3.connect(db).execute("EXPLAIN QUERY PLAN " + sql)]
    # starts from the rows carrying goal_id=g1, never walks the whole scope
    assert plan[0].startswith("SEARCH t0 USING PRIMARY KEY (key=? AND value=?")
    assert not any(p.startswith("SCAN") for p in plan)
    store.close()


def test_memories_survive_reopening(db: Path) -> None:
    scope = Scope("a", "u")
    with SQLiteMemoryStore(db, embedder=HashingEmbedder()) as store:
        mid = store.remember("billing deploy failed", None, scope)
    with SQLiteMemoryStore(db, embedder=HashingEmbedder()) as again:
        assert again.get(mid).content == "billing deploy failed"
        assert again.recall("billing deploy", scope)[0].id == mid


def test_semantic_search_sees_writes_from_another_connection(db: Path) -> None:
    scope = Scope("a", "u")
    reader = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    writer = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    first = writer.remember("billing deploy failed", None, scope)
    assert [h.id for h in reader.recall("billing deploy", scope)] == [first]  # loads the matrix
    second = writer.remember("billing deploy failed again today", None, scope)
    assert {h.id for h in reader.recall("billing deploy", scope)} == {first, second}
    writer.forget(first)
    assert [h.id for h in reader.recall("billing deploy", scope)] == [second]
    writer.prune(scope.as_filter(), keywords="billing", dry_run=False, hard=True)  # rows vanish: full reload
    assert reader.recall("billing deploy", scope) == []
    reader.close()
    writer.close()


def test_default_path_follows_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert default_db_path(tmp_path) == tmp_path / "_memory" / "memory.db"
    monkeypatch.setenv("ATOMIC_AGENTS_ROOT", str(tmp_path / "root"))
    assert default_db_path() == tmp_path / "root" / "_memory" / "memory.db"
    monkeypatch.setenv("ATOMIC_AGENTS_DB", str(tmp_path / "x.db"))
    store = open_store(embedder=HashingEmbedder())
    assert store.health().path == str(tmp_path / "x.db")
    store.close()


_WRITER = textwrap.dedent(
    """
    import sys
    from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore
    store = SQLiteMemoryStore(sys.argv[1], embedder=HashingEmbedder())
    scope = Scope("agent-" + sys.argv[2], "user")
    for i in range(int(sys.argv[3])):
        store.remember(f"process {sys.argv[2]} memory {i} about deploys", {"i": i}, scope)
    print("done")
    """
)


def test_four_processes_writing_at_once_lose_nothing(db: Path) -> None:
    n = 1000
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(db), str(p), str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in range(4)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    for (out, err), p in zip(results, procs, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err and out.strip() == "done"
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 4 * n
    assert conn.execute("SELECT count(DISTINCT id) FROM memories").fetchone()[0] == 4 * n
    assert conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'deploys'").fetchone()[0] == 4 * n


def test_a_fresh_store_starts_from_the_vector_snapshot_and_catches_up(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import atomic_agents.memory._matrix_cache as cache
    from atomic_agents.memory._matrix_cache import snapshot_path

    monkeypatch.setattr(cache, "MIN_ROWS", 1)
    scope = Scope("a", "u")
    first = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    old = first.remember("billing deploy failed", None, scope)
    first.recall("billing", scope)  # full load from rows writes the snapshot
    assert snapshot_path(db).exists()
    newer = first.remember("billing deploy failed again", None, scope)  # after the snapshot
    first.forget(old)

    def no_full_load(self: SQLiteMemoryStore, meta: dict[str, str]) -> None:
        raise AssertionError("should have started from the snapshot")

    monkeypatch.setattr(SQLiteMemoryStore, "_load_from_rows", no_full_load)
    second = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    assert [h.id for h in second.recall("billing deploy", scope)] == [newer]
    second.close()

    monkeypatch.undo()
    first.prune(scope.as_filter(), keywords="billing", dry_run=False, hard=True)  # tombstones: the snapshot stays valid
    third = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    assert third.recall("billing deploy", scope) == []
    assert third._loads == {"snapshot": 1, "rows": 0} and third._index is not None and len(third._index) == 0
    third.close()
    first.close()


def test_one_store_shared_by_threads(db: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    store = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    scope = Scope("a", "u")

    def work(t: int) -> int:
        for i in range(50):
            store.remember(f"thread {t} note {i} about billing", {"t": t}, scope)
            store.recall("billing note", scope, 3)
        return len(store.list_memories(scope, {"t": t}))

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(work, range(4))) == [50, 50, 50, 50]
    assert store.health().live == 200 and len(store.recall("billing", scope, 1000)) == 200
    store.close()


# sqlite-utils' Table.detect_fts() and Datasette's detect_fts_sql(): how both find a table's FTS index.
_DETECT_FTS = """
    SELECT name FROM sqlite_master WHERE rootpage = 0 AND (
        sql LIKE '%VIRTUAL TABLE%USING FTS%content="memories"%'
        OR sql LIKE '%VIRTUAL TABLE%USING FTS%content=[memories]%'
        OR (tbl_name = 'memories' AND sql LIKE '%VIRTUAL TABLE%USING FTS%'))
"""


def _old_layout(db: Path) -> None:
    """A file as the previous build made it: content='memories', triggers that stored a null as NULL."""
    from atomic_agents.memory import _sqlite_schema as schema

    old = schema._DDL.replace('content="memories"', "content='memories'").replace("coalesce(value, ''), type", "value, type")
    assert old != schema._DDL
    conn = sqlite3.connect(db)
    for stmt in schema._split(old):
        conn.execute(stmt)
    conn.executemany(
        "INSERT INTO store_meta VALUES (?, ?)",
        [("schema_version", "1"), ("embedder", "hashing-fake-256"), ("dimension", "256"), ("epoch", "0")],
    )
    conn.execute(
        "INSERT INTO memories (id, content, metadata, agent_id, user_id, org_id, workspace_id, created_at, updated_at,"
        " content_hash, rev) VALUES ('6b1f3a52-7c0e-4d8a-9b2f-0a1c3e5d7f90', 'zanzibar runbook for the old store',"
        " '{\"goal_id\": \"g1\"}', 'builder', 'alice', 'acme', 'acme/web', 1.7e9, 1.7e9, 'h', 1)"
    )
    conn.commit()
    conn.close()


def test_fts_table_is_declared_so_sqlite_utils_and_datasette_detect_it(db: Path) -> None:
    SQLiteMemoryStore(db, embedder=HashingEmbedder()).close()
    assert sqlite3.connect(db).execute(_DETECT_FTS).fetchall() == [("memories_fts",)]


def test_a_store_from_the_previous_build_is_upgraded_in_place(db: Path) -> None:
    _old_layout(db)
    assert sqlite3.connect(db).execute(_DETECT_FTS).fetchall() == []
    scope = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")
    with SQLiteMemoryStore(db, embedder=HashingEmbedder()) as store:
        assert [h.content for h in store.search("zanzibar", scope)] == ["zanzibar runbook for the old store"]
        mid = store.remember("zanzibar follow-up", {"reviewer": None}, scope)
        assert [m.id for m in store.list_memories(scope, {"reviewer": None})] == [mid]
        assert len(store.search("zanzibar", scope)) == 2
    conn = sqlite3.connect(db)
    assert conn.execute(_DETECT_FTS).fetchall() == [("memories_fts",)]
    # rank=1: also compare the index with its content table (raises if they disagree)
    conn.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)")
    conn.commit()
    # schema 1 -> 2 in the same commit (the hard-delete log; tests/memory/test_tombstones.py)
    assert conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone() == ("2",)
    conn.close()
    with SQLiteMemoryStore(db, embedder=HashingEmbedder()) as again:  # idempotent: nothing left to upgrade
        assert len(again.search("zanzibar", scope)) == 2


def test_import_commits_in_one_transaction(db: Path, tmp_path: Path) -> None:
    from atomic_agents.memory import InMemoryMemoryStore, export_jsonl, import_jsonl

    src = InMemoryMemoryStore(embedder=HashingEmbedder())
    scope = Scope("builder", "alice")
    src.remember_many([(f"note {i}", {"i": i}) for i in range(700)], scope)
    export_jsonl(src, tmp_path / "b.jsonl")
    with SQLiteMemoryStore(db, embedder=HashingEmbedder()) as store:
        seen: list[int] = []
        store._conn.set_trace_callback(lambda sql: seen.append(1) if sql.startswith("COMMIT") else None)
        assert import_jsonl(store, tmp_path / "b.jsonl") == (700, 0)
        assert len(seen) == 1


def test_every_read_of_rows_named_by_seq_is_driven_by_the_rowid(db: Path) -> None:
    """A search reads the rows it ranked by their seqs. Checking them against the scope must not let
    the planner walk the scope's index instead (every row of a big scope, for ten rows)."""
    store = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    scope = Scope("a", "u")
    store.remember_many([(f"deploy billing cache item {i}", {"goal_id": f"g{i % 5}"}) for i in range(3000)], scope)
    store.remember_many([(f"other words {i}", None) for i in range(50)], Scope("b", "u"))
    store.recall("deploy billing", scope, 10)  # (the matrix loads)
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)
    for filters in (None, {"goal_id": "g1"}):
        store.recall("deploy billing", scope, 10, filters=filters)
        store.search_hybrid("deploy billing", scope, filters, 10)
        store.search("deploy billing", scope, limit=10, filters=filters)
    store._conn.set_trace_callback(None)
    by_seq = [q for q in dict.fromkeys(seen) if q.lstrip().startswith("SELECT") and "m.seq IN (" in q]
    assert len(by_seq) >= 4
    conn = sqlite3.connect(db)
    for sql in by_seq:
        plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql)]
        assert plan[0] == "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)", (sql[:120], plan)
    store.close()
