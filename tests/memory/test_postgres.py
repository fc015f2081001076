"""What only the PostgreSQL backend has: DSN selection, the locked schema, many writers, its indexes."""

from __future__ import annotations

import json
import multiprocessing as mp
import threading
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from atomic_agents.cli import main
from atomic_agents.exceptions import SchemaVersionError, StoreError
from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore, export_jsonl, import_jsonl, open_store
from atomic_agents.memory._postgres_schema import PG_SCHEMA_VERSION

from ._helpers import pg_downgrade

SCOPE = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")


def _pg(dsn: str, **kw: Any) -> Any:
    from atomic_agents.memory._postgres import PostgresMemoryStore

    return PostgresMemoryStore(dsn, embedder=kw.pop("embedder", HashingEmbedder()), **kw)


def test_open_store_picks_postgres_for_a_dsn_argument_or_env(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(pg_dsn, embedder=HashingEmbedder())
    assert store.health().backend == "postgres"
    mid = store.remember("shared deploy note", None, SCOPE)
    store.close()
    monkeypatch.setenv("ATOMIC_AGENTS_DB", pg_dsn)
    again = open_store(embedder=HashingEmbedder())
    assert again.get(mid).content == "shared deploy note"
    again.close()


def test_a_bad_dsn_is_a_store_error_that_never_shows_the_password() -> None:
    with pytest.raises(StoreError) as info:
        _pg("postgresql://agent:s3cretpw@127.0.0.1:1/memory", connect_timeout=2)
    assert "s3cretpw" not in str(info.value) and "***" in str(info.value)


def _open_and_write(dsn: str, n: int, out: Any) -> None:
    store = _pg(dsn)
    ids = [store.remember(f"note {n}-{i} from process {n}", {"writer": n, "i": i}, SCOPE) for i in range(40)]
    store.close()
    out.put((n, ids))


def test_processes_opening_a_fresh_store_at_once_and_writing_lose_nothing(pg_dsn: str) -> None:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_open_and_write, args=(pg_dsn, n, out)) for n in range(4)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    store = _pg(pg_dsn)
    # threads on one pool, at the same time as nothing else: every acknowledged write is there
    got: list[str] = []
    lock = threading.Lock()

    def write(t: int) -> None:
        mine = [store.remember(f"thread {t} note {i}", {"thread": t}, SCOPE) for i in range(25)]
        with lock:
            got.extend(mine)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    acked = [i for ids in results.values() for i in ids] + got
    assert len(acked) == 4 * 40 + 4 * 25 == len(set(acked))
    assert {m.id for m in store.scan(SCOPE.as_filter())} == set(acked)
    assert store.health().schema_version == PG_SCHEMA_VERSION and store.health().total == len(acked)
    assert _row_counter(store) == _count(store) == len(acked)  # eight writers at once: the counter missed none
    store.close()


def _row_counter(store: Any) -> int:
    return int(store._read("SELECT coalesce(sum(n), 0) FROM memory_rows")[0][0])


def _count(store: Any) -> int:
    return int(store._read("SELECT count(*) FROM memories")[0][0])


def test_bm25_row_count_is_kept_by_triggers_and_scores_equal_sqlite(pg_dsn: str, tmp_path: Path) -> None:
    """N (every row, forgotten ones included, as FTS5 counts) comes from the counter, and keyword scores match SQLite's."""
    pg = _pg(pg_dsn)
    lite = SQLiteMemoryStore(tmp_path / "m.db", embedder=HashingEmbedder())
    rng = np.random.default_rng(4)
    words = ["deploy", "billing", "cache", "rollback", "latency", "queue", "invoice", "schema", "token", "alert"]
    texts = [" ".join(rng.choice(words, int(rng.integers(3, 9))).tolist()) + f" item{i}" for i in range(120)]
    ids = {}
    for store in (pg, lite):
        ids[store.backend] = store.remember_many([(t, None) for t in texts], SCOPE)

    def same_scores() -> None:
        # The IDFs (N and each term's row count) are SQLite's exactly; the average length is the
        # candidate pool's on PostgreSQL and the whole table's in FTS5, hence the tolerance (as before).
        for q in ("deploy billing", "cache rollback latency", "invoice", "token alert schema queue"):
            a, b = pg.search(q, SCOPE, 10), lite.search(q, SCOPE, 10)
            assert pg._idf(q) == pytest.approx(lite._idf(q), rel=1e-12)
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-9)

    same_scores()
    assert _row_counter(pg) == _count(pg) == 120
    for store in (pg, lite):  # forgotten rows still count in N; erased ones do not
        for i in (3, 9, 27):
            store.forget(ids[store.backend][i])
        assert store.prune(keywords="item40 item41 item42", dry_run=False, hard=True).removed >= 1
        store.remember("deploy alert again", None, Scope("other", "u"))
    assert _row_counter(pg) == _count(pg) == int(lite._read("SELECT count(*) FROM memories")[0][0])
    same_scores()
    pg.close()
    lite.close()


def test_a_version_1_store_gets_the_row_counter_on_open(pg_dsn: str) -> None:
    store = _pg(pg_dsn)
    store.remember_many([(f"note {i} about deploys", None) for i in range(30)], SCOPE)

    store._run(lambda cur: pg_downgrade(cur, 1), write=True)  # the store as package schema 1 left it
    store.close()
    store = _pg(pg_dsn)
    assert store.health().schema_version == PG_SCHEMA_VERSION
    assert _row_counter(store) == _count(store) == 30
    store.remember("one more deploy note", None, SCOPE)
    assert _row_counter(store) == 31
    store.close()


def test_a_store_from_a_newer_package_is_refused(pg_dsn: str) -> None:
    store = _pg(pg_dsn)
    store._run(lambda cur: cur.execute("UPDATE store_meta SET value = '99' WHERE key = 'schema_version'"), write=True)
    store.close()
    with pytest.raises(SchemaVersionError):
        _pg(pg_dsn)


def _plan(store: Any, sql: str, params: list[Any]) -> str:
    def q(cur: Any) -> str:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("EXPLAIN " + sql, params)
        return "\n".join(r[0] for r in cur.fetchall())

    return str(store._run(q, write=False))


def test_semantic_search_can_use_the_hnsw_index_and_filters_the_gin_index(pg_dsn: str) -> None:
    store = _pg(pg_dsn)
    store.remember_many([(f"note {i} about billing", {"goal_id": f"g{i % 3}"}) for i in range(30)], SCOPE)
    dim = store.embedder.dimension
    qv = np.asarray(store.embedder.embed_batch(["billing"])[0], dtype=np.float32)
    plan = _plan(store, f"SELECT seq FROM memories m WHERE m.embedder = {store._model_literal()} AND m.embedding IS NOT NULL"
                 f" ORDER BY (m.embedding::vector({dim})) <=> %s::vector({dim}) LIMIT 5", [qv])  # fmt: skip
    assert "ix_memories_hnsw_" in plan
    plan = _plan(store, "SELECT seq FROM memories m WHERE m.meta @> %s::jsonb", [json.dumps({"goal_id": "g1"})])
    assert "ix_memories_meta" in plan
    store.close()


def test_a_small_scope_in_a_big_table_gets_full_results_through_the_index(pg_dsn: str) -> None:
    store = _pg(pg_dsn)
    store.remember_many([(f"crowd note {i} about deploys", None) for i in range(1500)], Scope("crowd", "u", org_id="o", workspace_id="w"))
    few = [store.remember(f"small scope deploy note {i}", None, SCOPE) for i in range(12)]
    store._run(lambda cur: cur.execute("ANALYZE memories"), write=True)
    hits = store.recall("deploy note", SCOPE, limit=10)
    assert len(hits) == 10 and {h.id for h in hits} <= set(few)
    store.close()


def test_export_from_sqlite_import_into_postgres_and_back_keeps_every_field_and_vector(pg_dsn: str, tmp_path: Path) -> None:
    emb = HashingEmbedder()
    src = SQLiteMemoryStore(tmp_path / "src.db", embedder=emb)
    ids = [src.remember(f"memory {i}: the billing deploy went {'green' if i % 2 else 'red'}", {"i": i, "x": 1.0, "n": None}, SCOPE,
                        ttl_ms=(3_600_000 if i == 3 else None)) for i in range(20)]  # fmt: skip
    src.forget(ids[5])
    export_jsonl(src, tmp_path / "a.jsonl")
    pg = _pg(pg_dsn, embedder=emb)
    assert import_jsonl(pg, tmp_path / "a.jsonl") == (20, 0)
    export_jsonl(pg, tmp_path / "b.jsonl")
    back = SQLiteMemoryStore(tmp_path / "back.db", embedder=emb)
    assert import_jsonl(back, tmp_path / "b.jsonl") == (20, 0)
    export_jsonl(back, tmp_path / "c.jsonl")
    a = sorted((tmp_path / "a.jsonl").read_text().splitlines())
    assert a == sorted((tmp_path / "b.jsonl").read_text().splitlines()) == sorted((tmp_path / "c.jsonl").read_text().splitlines())
    assert '"x": 1.0' in (tmp_path / "b.jsonl").read_text()  # JSON kept as written: 1.0 stays a float
    # the vectors: identical float32 in all three stores
    for mid in (ids[0], ids[7]):
        v_src = np.frombuffer(src._read("SELECT embedding FROM memories WHERE id = ?", [mid])[0][0], dtype=np.float32)
        v_pg = np.asarray(pg._read("SELECT embedding FROM memories WHERE id = %s", [mid])[0][0].to_numpy(), dtype=np.float32)
        v_back = np.frombuffer(back._read("SELECT embedding FROM memories WHERE id = ?", [mid])[0][0], dtype=np.float32)
        assert np.array_equal(v_src, v_pg) and np.array_equal(v_src, v_back)
    # Same vectors, same scores; the order among equal scores is the backend's own (HNSW vs exact scan).
    pg_hits, src_hits = pg.recall("billing deploy went green", SCOPE, 3), src.recall("billing deploy went green", SCOPE, 3)
    assert [round(h.score, 5) for h in pg_hits] == [round(h.score, 5) for h in src_hits]
    assert {h.id for h in pg_hits if h.score > src_hits[-1].score} == {h.id for h in src_hits if h.score > src_hits[-1].score}
    for s in (src, pg, back):
        s.close()


def test_cli_exports_from_sqlite_and_imports_into_postgres(pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")
    db = tmp_path / "m.db"
    src = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    mid = src.remember("the deploy runbook lives in ops/", {"goal_id": "g1"}, SCOPE)
    src.close()

    def run(*argv: str) -> Any:
        with pytest.raises(SystemExit) as exc:
            main(list(argv))
        out, err = capsys.readouterr()
        assert exc.value.code in (0, None), (argv, out, err)
        assert "Traceback" not in out + err
        return json.loads(out)

    run("memory", "--db", str(db), "export", "-o", str(tmp_path / "x.jsonl"))
    assert run("memory", "--db", pg_dsn, "import", str(tmp_path / "x.jsonl"))["imported"] == 1
    pg = _pg(pg_dsn)
    assert pg.get(mid).metadata["goal_id"] == "g1"
    pg.close()


def test_a_nul_in_metadata_text_is_kept_and_filters_stay_exact(pg_dsn: str) -> None:
    store = _pg(pg_dsn)
    a = store.remember("note a", {"k": "x\x00y"}, SCOPE)
    store.remember("note b", {"k": "x\ufffdy"}, SCOPE)
    assert store.get(a).metadata["k"] == "x\x00y"
    assert [m.id for m in store.list_memories(SCOPE, {"k": "x\x00y"})] == [a]
    store.close()


def test_the_store_works_in_whatever_schema_the_dsn_selects(pg_dsn: str) -> None:
    store = _pg(pg_dsn)
    mid = store.remember("schema-local note", None, SCOPE)
    schema = store._read("SELECT current_schema()")[0][0]
    assert schema.startswith("aa_test_") and store._read("SELECT id FROM memories")[0][0] == mid
    assert uuid.UUID(mid)
    store.close()
