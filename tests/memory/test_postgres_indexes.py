"""PostgreSQL index builds on an existing database: concurrent (writers never wait), resumable, race-free.

A migration's long index builds (``_postgres_schema._INDEXES`` and the model's HNSW index)
run as ``CREATE INDEX CONCURRENTLY`` after the migration's transaction commits. The tests
stall a build deterministically: a transaction holding ROW EXCLUSIVE on the table (what any
writer holds) makes a build wait for it (a concurrent build in its first phase, a plain
``CREATE INDEX`` for its SHARE lock). While it waits, a writer with ``lock_timeout`` must
get through, the builder must hold nothing stronger than SHARE UPDATE EXCLUSIVE, and so on.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import pytest

from atomic_agents.memory import HashingEmbedder, Scope
from atomic_agents.memory._postgres_schema import vector_index_name

from ._helpers import pg_downgrade

psycopg = pytest.importorskip("psycopg")

SCOPE = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")
TEXTS = [f"note {i}: the billing deploy {'rolled back' if i % 3 else 'went green'} on staging" for i in range(60)]
QUERIES = ("billing deploy", "rolled back", "staging green note")


def _pg(dsn: str, **kw: Any) -> Any:
    from atomic_agents.memory._postgres import PostgresMemoryStore

    return PostgresMemoryStore(dsn, embedder=kw.pop("embedder", HashingEmbedder()), **kw)


def _with_lock_timeout(dsn: str, ms: int) -> str:
    assert dsn.rsplit("?", 1)[1].split("&")[-1].startswith("options=")  # tests/_postgres.with_search_path: last
    return dsn + quote(f" -c lock_timeout={ms}", safe="")


def _specs(store: Any) -> dict[str, str]:
    """The indexes built outside the migrations' transaction (name: definition), written out here."""
    dim, model = store.embedder.dimension, store.embedder.model_id
    return {
        "ix_memories_timeline": "ON memories (agent_id, user_id, org_id, workspace_id, deleted_at, created_at, seq)",
        "ix_memory_docs_terms": "ON memory_docs USING gin (terms)",
        "ix_memory_docs_untallied": "ON memory_docs (seq) WHERE tfs IS NULL",
        vector_index_name(model): f"ON memories USING hnsw ((embedding::vector({dim})) vector_cosine_ops) WHERE embedder = '{model}'",
    }


def _states(store: Any) -> dict[str, bool | None]:
    """Per index: True valid, False INVALID, None missing."""
    rows = store._read(
        "SELECT n.name, i.indisvalid FROM unnest(%s::text[]) AS n(name) LEFT JOIN pg_index i ON i.indexrelid = to_regclass(n.name)",
        [list(_specs(store))],
    )
    return dict(rows)


def _oid(store: Any, name: str) -> int | None:
    return store._read("SELECT to_regclass(%s)::oid", [name])[0][0]


def _results(store: Any) -> list[Any]:
    """What the read paths answer: keyword lists (ids, scores), semantic and hybrid scores, the timeline.

    Semantic and hybrid by score only: the HNSW index is approximate among equal cosines
    (which of many tied rows make the cut), an exact scan without it breaks ties by age.
    """
    out: list[Any] = []
    for q in QUERIES:
        out.append([(h.memory.id, round(h.score, 9)) for h in store.search(q, SCOPE, 10)])
        out.append([round(h.score, 6) for h in store.recall(q, SCOPE, limit=10)])
        out.append([round(h.score, 6) for h in store.search_hybrid(q, SCOPE, limit=10)])
    out.append([m.id for m in store.list_memories(SCOPE, limit=100)])
    return out


def _hold(dsn: str, table: str) -> Any:
    """A connection whose open transaction holds ROW EXCLUSIVE on ``table``, as a writer in flight does."""
    conn = psycopg.connect(dsn)
    conn.execute(f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE")
    return conn


@contextmanager
def _holding(dsn: str, table: str) -> Iterator[Any]:
    conn = _hold(dsn, table)
    try:
        yield conn
    finally:
        conn.rollback()
        conn.close()


def _wait_for(dsn: str, what: str, sql: str, params: list[Any], alive: Callable[[], bool] = lambda: True) -> Any:
    """Poll ``sql`` until it returns a row (no timing assert: the deadline only turns a hang into a failure)."""
    deadline = time.monotonic() + 120
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(sql, params).fetchone()
            if row is not None:
                return row
            assert alive(), f"the opener ended before {what}"
            assert time.monotonic() < deadline, f"never saw {what}"
            time.sleep(0.02)


def _builder_waiting(dsn: str, index: str, alive: Callable[[], bool] = lambda: True) -> int:
    """The pid of the backend building ``index``, once it waits on a lock (stalled by a holder)."""
    return int(
        _wait_for(
            dsn,
            f"a build of {index} waiting",
            "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
            " AND query ILIKE 'CREATE INDEX%%' AND query LIKE %s",
            [f"%{index} %"],
            alive,
        )[0]
    )


class _Opener(threading.Thread):
    """Opens (so migrates) the store in a thread; keeps the store or the error."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn, self.store, self.error = dsn, None, None

    def run(self) -> None:
        try:
            self.store = _pg(self.dsn)
        except BaseException as exc:  # reported by the test
            self.error = exc


def test_writers_get_through_while_a_migration_builds_its_indexes(pg_dsn: str) -> None:
    """Schema 3 -> 5 on a populated table: during each stalled build, inserts (and their trigger rows) go on."""
    writer = _pg(_with_lock_timeout(pg_dsn, 5000))  # opened at schema 5: never builds; waits on no lock > 5 s
    writer.remember_many([(t, None) for t in TEXTS], SCOPE)
    hnsw = vector_index_name(writer.embedder.model_id)

    def to_schema_3(cur: Any) -> None:
        pg_downgrade(cur, 3)
        cur.execute(f"DROP INDEX {hnsw}")

    writer._run(to_schema_3, write=True)
    written: list[str] = []
    opener = _Opener(pg_dsn)
    stages = [("ix_memories_timeline", "memories"), ("ix_memory_docs_terms", "memory_docs"), (hnsw, "memories")]
    held = [_hold(pg_dsn, stages[0][1])]
    opener.start()
    try:
        for i, (index, table) in enumerate(stages):
            pid = _builder_waiting(pg_dsn, index, opener.is_alive)
            # a writer gets through now: the row, its memory_docs row and its stems' counts
            mid = writer.remember(f"written during the {index} build: deploy billing", None, SCOPE)
            written.append(mid)
            seq = writer._read("SELECT seq FROM memories WHERE id = %s", [mid])[0][0]
            assert writer._read("SELECT count(*) FROM memory_docs WHERE seq = %s", [seq])[0][0] == 1
            # the builder holds only SHARE UPDATE EXCLUSIVE on the table (writers never wait on it)
            locks = writer._read(
                "SELECT mode, granted FROM pg_locks WHERE pid = %s AND locktype = 'relation' AND relation = %s::regclass",
                [pid, table],
            )
            assert locks == [("ShareUpdateExclusiveLock", True)], locks
            if i + 1 < len(stages):  # stall the next build before letting this one finish
                held.append(_hold(pg_dsn, stages[i + 1][1]))
            done = held.pop(0)
            done.rollback()
            done.close()
    finally:
        for conn in held:
            conn.rollback()
            conn.close()
        opener.join(timeout=120)
    assert opener.error is None, opener.error
    store = opener.store
    assert store is not None and store.health().schema_version == 5
    assert set(_states(store).values()) == {True}  # the open returned with every index built and valid
    assert {h.memory.id for h in store.search("deploy billing", SCOPE, 100)} >= set(written)
    store.close()
    writer.close()


def test_a_timeout_in_the_dsn_does_not_cancel_a_build(pg_dsn: str) -> None:
    """With ``lock_timeout`` and ``statement_timeout`` in the DSN's options, a build that waits longer than
    both for a writer in flight still completes, and the opener's session keeps its own timeouts."""
    store = _pg(pg_dsn)
    store.remember_many([(t, None) for t in TEXTS], SCOPE)
    store._run(lambda cur: pg_downgrade(cur, 3), write=True)  # schema 4's timeline index: built on the next open
    store.close()
    dsn = _with_lock_timeout(pg_dsn, 50) + quote(" -c statement_timeout=1000", safe="")
    opener = _Opener(dsn)
    with _holding(pg_dsn, "memories"):
        opener.start()
        pid = _builder_waiting(pg_dsn, "ix_memories_timeline", opener.is_alive)
        with psycopg.connect(pg_dsn, autocommit=True) as watch:  # still waiting past both timeouts
            watch.execute("SELECT pg_sleep(1.5)")
            row = watch.execute("SELECT wait_event_type, query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
        assert row is not None and row[0] == "Lock" and "ix_memories_timeline" in row[1], row
    opener.join(timeout=120)
    assert opener.error is None, opener.error
    got = opener.store
    assert got is not None and set(_states(got).values()) == {True}
    assert got._read("SELECT current_setting('lock_timeout'), current_setting('statement_timeout')")[0] == ("50ms", "1s")
    got.close()


@pytest.mark.parametrize("which", ["ix_memories_timeline", "ix_memory_docs_terms", "ix_memory_docs_untallied", "hnsw"])
def test_an_invalid_leftover_index_is_dropped_and_rebuilt_on_open(pg_dsn: str, which: str) -> None:
    store = _pg(pg_dsn)
    store.remember_many([(t, None) for t in TEXTS], SCOPE)
    store.forget(store.list_memories(SCOPE, limit=1)[0].id)
    before = _results(store)
    specs = _specs(store)
    name = next(n for n in specs if which in n)
    table = "memories" if "ON memories " in specs[name] else "memory_docs"

    # a concurrent build cancelled mid-way (as a crash, a Ctrl-C or a lost connection leaves it)
    failed: list[BaseException] = []

    def build() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            try:
                conn.execute(f"CREATE INDEX CONCURRENTLY {name} {specs[name]}")
            except psycopg.errors.QueryCanceled as exc:
                failed.append(exc)

    store._run(lambda cur: cur.execute(f"DROP INDEX {name}"), write=True)
    with _holding(pg_dsn, table):
        builder = threading.Thread(target=build, daemon=True)
        builder.start()
        pid = _builder_waiting(pg_dsn, name, builder.is_alive)
        store._read("SELECT pg_cancel_backend(%s)", [pid])
        builder.join(timeout=60)
    assert failed, "the build was not cancelled"
    assert _states(store)[name] is False  # left behind: INVALID
    left = _oid(store, name)
    assert _results(store) == before  # an invalid index changes no answer (the planner skips it)
    store.close()

    again = _pg(pg_dsn)
    assert _states(again) == {n: True for n in specs}
    assert _oid(again, name) != left  # dropped and built anew, not just found
    assert _results(again) == before
    again.close()


def _open_and_report(dsn: str, out: Any) -> None:
    try:
        _pg(dsn).close()
        out.put("ok")
    except BaseException as exc:
        out.put(f"{type(exc).__name__}: {exc}")


def test_two_processes_opening_an_old_store_mid_build_both_succeed(pg_dsn: str) -> None:
    """The second opener arrives while the first one's build runs: it waits for it, never drops it."""
    store = _pg(pg_dsn)
    store.remember_many([(t, None) for t in TEXTS], SCOPE)
    before = _results(store)
    store._run(lambda cur: pg_downgrade(cur, 3), write=True)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_open_and_report, args=(pg_dsn, out)) for _ in range(2)]
    with _holding(pg_dsn, "memories"):
        for p in procs:
            p.start()
        _builder_waiting(pg_dsn, "ix_memories_timeline")
        # the other opener polls the build lock (it found the index missing or INVALID)
        _wait_for(
            pg_dsn,
            "the second opener waiting for the build lock",
            "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query LIKE 'SELECT pg_try_advisory_lock%%'",
            [],
        )
    assert sorted(out.get(timeout=300) for _ in procs) == ["ok", "ok"]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert set(_states(store).values()) == {True}
    assert store._read("SELECT count(*) FROM memory_docs WHERE tfs IS NULL")[0][0] == 0
    assert _results(store) == before
    store.close()
