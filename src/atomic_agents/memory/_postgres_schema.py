"""The PostgreSQL schema: versioned, forward-only migrations applied on open under an advisory lock.

``store_meta.schema_version`` records the last migration applied. Opening a store takes
``pg_advisory_xact_lock`` on one fixed key, reads the version, applies the missing
migrations and records the new version, all in one transaction (PostgreSQL DDL is
transactional): several processes opening a fresh database at once serialise on the lock,
the first creates everything, the others find it done. A database from a newer package
is refused (:class:`SchemaVersionError`); nothing is ever migrated backwards.

Indexes that take long to build on a populated table (``_INDEXES``: the timeline, the
stems' GIN, the untallied rows', and the per-model HNSW index) are not built in that
transaction when it migrates an existing database: a plain ``CREATE INDEX`` holds a SHARE
lock, so every insert (and the triggers writing ``memory_docs`` / ``memory_terms``) would
wait for the whole build. They are built by :func:`ensure_indexes` after the transaction
commits, with ``CREATE INDEX CONCURRENTLY`` on the autocommit connection (it cannot run in
a transaction block; it holds SHARE UPDATE EXCLUSIVE, which writers never wait on).
``schema_version`` is therefore recorded when the transactional part (columns, tables,
triggers) commits; the open does not return before every index of that version exists
and is valid: each open checks them (one catalog query, in the transaction) and builds
what is missing or INVALID (``pg_index.indisvalid``: a build interrupted by a crash, a
cancel or a lost connection leaves one; it is dropped with ``DROP INDEX CONCURRENTLY`` and
rebuilt), so an interrupted build is resumed by whichever process opens the store next.
Builds are serialised on a session-level advisory lock distinct from the schema lock,
and each is re-checked after taking it. A build runs with no ``lock_timeout`` or
``statement_timeout`` (the session gets its own back after): a timeout in the user's DSN
would cancel a long build at every open, and the store would never open; so an open
waits for transactions already running on the table (an idle one too) to end. Until an index is valid every query answers as
before, only slower (nothing reads an index by name; the planner skips invalid ones);
semantic search then scans exactly, so among equal cosines it may keep other rows than
the approximate HNSW index would (its ties go to the older row).
A fresh database (created by this very transaction, so empty and invisible to others)
gets its indexes inside the transaction, as before: no second round of statements.

The vector index is per embedding model: an HNSW index (cosine) on
``embedding::vector(<dimension>)``, partial on ``embedder = '<model>'``, so vectors of
one dimension share one index and a store can be re-embedded with another model.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ..exceptions import SchemaVersionError

__all__ = [
    "PG_SCHEMA_VERSION",
    "TS_CONFIG",
    "drop_indexes",
    "ensure_indexes",
    "ensure_schema",
    "vector_index",
    "vector_index_name",
]

#: Bumped by each entry appended to ``_MIGRATIONS``; never edit a shipped migration.
PG_SCHEMA_VERSION = 5
#: Shards of the row counter (``memory_rows``, migration 2): concurrent writers land on
#: different rows (by backend pid), so they rarely wait on one another's row lock.
ROW_COUNT_SHARDS = 16
#: English stemming without stopwords (SQLite's porter tokenizer keeps stopwords too).
TS_CONFIG = "atomic_agents_english"
# Two-int advisory lock key: (a constant for this package, 1 = schema).
_SCHEMA_LOCK = (0x41A6E7, 1)
# ... 2 = index builds (session-level: held across the autocommit statements of a build).
_BUILD_LOCK = (0x41A6E7, 2)

_MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE EXTENSION IF NOT EXISTS vector",
        "CREATE TABLE IF NOT EXISTS store_meta (key text PRIMARY KEY, value text NOT NULL)",
        "CREATE TEXT SEARCH DICTIONARY atomic_agents_stem (TEMPLATE = snowball, LANGUAGE = english)",
        f"CREATE TEXT SEARCH CONFIGURATION {TS_CONFIG} (COPY = pg_catalog.english)",
        f"ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG} ALTER MAPPING FOR asciiword, asciihword, hword_asciipart,"
        " word, hword, hword_part, numword, numhword, hword_numpart WITH atomic_agents_stem",
        # metadata: the exact JSON text written (returned as is: 1.0 stays 1.0) and a JSONB
        # copy that equality filters use (``@>`` served by the GIN index).
        f"""CREATE TABLE memories (
            seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id           text NOT NULL UNIQUE,
            content      text NOT NULL,
            metadata     text NOT NULL DEFAULT '{{}}',
            meta         jsonb NOT NULL DEFAULT '{{}}',
            agent_id     text NOT NULL,
            user_id      text NOT NULL,
            org_id       text NOT NULL,
            workspace_id text NOT NULL,
            created_at   double precision NOT NULL,
            updated_at   double precision NOT NULL,
            expires_at   double precision,
            deleted_at   double precision NOT NULL DEFAULT 0,
            content_hash text NOT NULL,
            embedder     text,
            embedding    vector,
            search_text  text NOT NULL,
            tsv          tsvector GENERATED ALWAYS AS (to_tsvector('{TS_CONFIG}'::regconfig, search_text)) STORED
        )""",
        "CREATE INDEX ix_memories_scope ON memories (agent_id, user_id, org_id, workspace_id, deleted_at, created_at)",
        "CREATE INDEX ix_memories_workspace ON memories (org_id, workspace_id, created_at)",
        "CREATE INDEX ix_memories_hash ON memories (content_hash)",
        "CREATE INDEX ix_memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL",
        "CREATE INDEX ix_memories_meta ON memories USING gin (meta jsonb_path_ops)",
        "CREATE INDEX ix_memories_tsv ON memories USING gin (tsv)",
        # One row per lease key: its latest grant. ``token`` only grows (fencing tokens).
        """CREATE TABLE leases (
            key         text PRIMARY KEY,
            holder      text NOT NULL,
            token       bigint NOT NULL,
            acquired_at double precision NOT NULL,
            expires_at  double precision NOT NULL,
            released_at double precision
        )""",
    ],
    # BM25's N (every row of ``memories``, as SQLite's FTS5 counts it) in O(1): a sharded
    # counter kept by statement triggers in the same transaction as the write, so any
    # snapshot's sum(n) is exactly that snapshot's count(*), whatever writers run at once.
    2: [
        "CREATE TABLE memory_rows (shard int PRIMARY KEY, n bigint NOT NULL)",
        """CREATE FUNCTION atomic_agents_count_rows() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE delta bigint;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                SELECT count(*) INTO delta FROM new_rows;
            ELSE
                SELECT -count(*) INTO delta FROM old_rows;
            END IF;
            IF delta <> 0 THEN
                INSERT INTO memory_rows AS r (shard, n) VALUES (pg_backend_pid() % 16, delta)
                ON CONFLICT (shard) DO UPDATE SET n = r.n + excluded.n;
            END IF;
            RETURN NULL;
        END $$""",
        # the triggers first: CREATE TRIGGER waits for writers in flight and holds new ones
        # off until this transaction commits, so the count below misses no row
        "CREATE TRIGGER memory_rows_ins AFTER INSERT ON memories REFERENCING NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION atomic_agents_count_rows()",
        "CREATE TRIGGER memory_rows_del AFTER DELETE ON memories REFERENCING OLD TABLE AS old_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION atomic_agents_count_rows()",
        "INSERT INTO memory_rows (shard, n) SELECT -1, count(*) FROM memories",
    ],
    # The rest of BM25's corpus statistics, kept exactly as N is (FTS5 indexes every row of
    # ``memories``, forgotten and expired ones included, so every row counts): each row's
    # length (FTS5's token count) and distinct porter stems, computed by the Python write
    # path with SQLite's own tokenizer, in ``memory_docs`` beside the row (a side table: a
    # backfill inserts there instead of rewriting every row of ``memories`` and every entry
    # of its HNSW index); its statement triggers sum them into ``memory_rows`` (``tokens``:
    # avgdl = tokens / N as FTS5 divides; ``docs``: rows counted, so ``docs <> n`` says some
    # row is not yet) and per stem into ``memory_terms`` (n_t). Erasing a row erases its
    # counts; a content change by a writer that brings no new counts (an older package, a
    # hand-written UPDATE) drops them, leaving the row uncounted, never counted wrongly.
    # Uncounted rows (all of them right after this migration) are counted by the store
    # (``_postgres_stats.backfill``) on open and before a search that finds any.
    3: [
        "ALTER TABLE memory_rows ADD COLUMN tokens bigint NOT NULL DEFAULT 0, ADD COLUMN docs bigint NOT NULL DEFAULT 0",
        "CREATE TABLE memory_docs (seq bigint PRIMARY KEY, doc_len integer NOT NULL, terms text[] NOT NULL)",
        "CREATE TABLE memory_terms (stem text NOT NULL, shard int NOT NULL, n bigint NOT NULL, PRIMARY KEY (stem, shard))",
        """CREATE FUNCTION atomic_agents_keyword_stats() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            shard_id int := pg_backend_pid() % 16;
            d_docs bigint := 0;
            d_tokens bigint := 0;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                SELECT count(*), coalesce(sum(doc_len), 0) INTO d_docs, d_tokens FROM new_rows;
            ELSIF TG_OP = 'DELETE' THEN
                SELECT -count(*), -coalesce(sum(doc_len), 0) INTO d_docs, d_tokens FROM old_rows;
            ELSE
                SELECT (SELECT coalesce(sum(doc_len), 0) FROM new_rows) - (SELECT coalesce(sum(doc_len), 0) FROM old_rows)
                INTO d_tokens;
                d_docs := 0;
            END IF;
            IF TG_OP <> 'UPDATE' AND d_docs = 0 THEN
                RETURN NULL;
            END IF;
            -- this shard's counter row first, always (the row counter of migration 2 takes it
            -- first too): its row lock, held to commit, orders every transaction writing this
            -- shard's stem rows, so two never wait on each other in opposite orders (no deadlock)
            INSERT INTO memory_rows AS r (shard, n, tokens, docs) VALUES (shard_id, 0, d_tokens, d_docs)
            ON CONFLICT (shard) DO UPDATE SET tokens = r.tokens + excluded.tokens, docs = r.docs + excluded.docs;
            IF TG_OP = 'INSERT' THEN
                INSERT INTO memory_terms AS t (stem, shard, n)
                SELECT u.stem, shard_id, count(*) FROM new_rows, unnest(new_rows.terms) AS u(stem)
                GROUP BY u.stem ORDER BY u.stem
                ON CONFLICT (stem, shard) DO UPDATE SET n = t.n + excluded.n;
            ELSIF TG_OP = 'DELETE' THEN
                INSERT INTO memory_terms AS t (stem, shard, n)
                SELECT u.stem, shard_id, -count(*) FROM old_rows, unnest(old_rows.terms) AS u(stem)
                GROUP BY u.stem ORDER BY u.stem
                ON CONFLICT (stem, shard) DO UPDATE SET n = t.n + excluded.n;
            ELSE
                INSERT INTO memory_terms AS t (stem, shard, n)
                SELECT x.stem, shard_id, sum(x.d) FROM (
                    SELECT u.stem, 1 AS d FROM new_rows, unnest(new_rows.terms) AS u(stem)
                    UNION ALL
                    SELECT u.stem, -1 FROM old_rows, unnest(old_rows.terms) AS u(stem)
                ) x GROUP BY x.stem HAVING sum(x.d) <> 0 ORDER BY x.stem
                ON CONFLICT (stem, shard) DO UPDATE SET n = t.n + excluded.n;
            END IF;
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION atomic_agents_erase_docs() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM memory_docs d USING old_rows o WHERE d.seq = o.seq;
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION atomic_agents_stale_docs() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.content IS DISTINCT FROM OLD.content THEN
                DELETE FROM memory_docs WHERE seq = OLD.seq;
            END IF;
            RETURN NEW;
        END $$""",
        "CREATE TRIGGER memory_docs_ins AFTER INSERT ON memory_docs REFERENCING NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION atomic_agents_keyword_stats()",
        "CREATE TRIGGER memory_docs_del AFTER DELETE ON memory_docs REFERENCING OLD TABLE AS old_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION atomic_agents_keyword_stats()",
        "CREATE TRIGGER memory_docs_upd AFTER UPDATE ON memory_docs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION atomic_agents_keyword_stats()",
        # named after memory_rows_del: AFTER triggers of one event fire in name order
        "CREATE TRIGGER memory_stats_del AFTER DELETE ON memories REFERENCING OLD TABLE AS old_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION atomic_agents_erase_docs()",
        "CREATE TRIGGER memory_stats_stale BEFORE UPDATE OF content ON memories"
        " FOR EACH ROW EXECUTE FUNCTION atomic_agents_stale_docs()",
    ],
    # a scope's timeline in list_memories' order, (created_at, seq): the hybrid pool's successor of
    # each candidate is one seek (SQLite's ix_memories_scope ends in the rowid, which is seq)
    4: [],  # its index, ix_memories_timeline: ``_INDEXES``
    # Keyword candidates from SQLite's own tokens, ranked by FTS5's BM25 in SQL
    # (``_postgres_keyword``): each counted row's term counts beside its stems (``tfs[i]``: how
    # often ``terms[i]`` occurs), and a GIN index on the stems, so the rows holding a query stem
    # are found without the English ``tsvector``. Rows counted before (``tfs IS NULL``, found
    # through the partial index) get their counts from the store's backfill, as migration 3's
    # rows do; so do rows an older package's process, still open, writes meanwhile.
    5: [
        "ALTER TABLE memory_docs ADD COLUMN tfs integer[]",  # no default: no table rewrite
    ],  # its indexes, ix_memory_docs_terms and ix_memory_docs_untallied: ``_INDEXES``
}

#: The indexes each migration adds that can take long on a populated table: (name, definition
#: after ``CREATE INDEX name``), built concurrently outside the migration's transaction
#: (``ensure_indexes``) unless the migration created the table itself.
_INDEXES: dict[int, list[tuple[str, str]]] = {
    4: [("ix_memories_timeline", "ON memories (agent_id, user_id, org_id, workspace_id, deleted_at, created_at, seq)")],
    5: [
        ("ix_memory_docs_terms", "ON memory_docs USING gin (terms)"),
        ("ix_memory_docs_untallied", "ON memory_docs (seq) WHERE tfs IS NULL"),
    ],
}


def vector_index_name(model: str) -> str:
    return "ix_memories_hnsw_" + hashlib.sha256(model.encode("utf-8")).hexdigest()[:16]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def vector_index(model: str, dimension: int) -> tuple[str, str]:
    """The HNSW (cosine) index serving semantic search for ``model``'s vectors: (name, definition)."""
    if not isinstance(dimension, int) or not 0 < dimension <= 2000:
        raise ValueError(f"embedding dimension {dimension!r} is outside what an HNSW index takes (1..2000)")
    return (
        vector_index_name(model),
        f"ON memories USING hnsw ((embedding::vector({dimension})) vector_cosine_ops) WHERE embedder = {_literal(model)}",
    )


def expected_indexes(meta: dict[str, str]) -> list[tuple[str, str]]:
    """Every deferred index a store at ``meta``'s schema version must have, its model's HNSW index last."""
    version = int(meta["schema_version"])
    out = [spec for v in sorted(_INDEXES) if v <= version for spec in _INDEXES[v]]
    return [*out, vector_index(meta["embedder"], int(meta["dimension"]))]


def index_states(execute: Any, names: Sequence[str]) -> dict[str, bool | None]:
    """Per index name: True valid, False present but INVALID (a failed or running concurrent build), None missing."""
    rows = execute(
        "SELECT n.name, i.indisvalid FROM unnest(%s::text[]) AS n(name) LEFT JOIN pg_index i ON i.indexrelid = to_regclass(n.name)",
        [list(names)],
    ).fetchall()
    return {name: valid for name, valid in rows}


def _take_build_lock(conn: Any) -> None:
    # Polled, never waited on inside a statement: a session blocked in pg_advisory_lock holds a
    # snapshot, and the holder's CREATE INDEX CONCURRENTLY waits for every older snapshot to
    # end, a deadlock; pg_try_advisory_lock returns at once and holds none between tries.
    pause = 0.02
    while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", _BUILD_LOCK).fetchone()[0]:
        time.sleep(pause)
        pause = min(pause * 1.5, 0.5)


def _release_build_lock(conn: Any) -> None:
    if not conn.broken and not conn.closed:  # a lost session released it already
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", _BUILD_LOCK)


@contextlib.contextmanager
def _building(conn: Any) -> Iterator[None]:
    """The build lock, and no ``lock_timeout`` or ``statement_timeout`` cutting a build short meanwhile.

    A timeout in the user's DSN (``options=-c statement_timeout=30s``, common on managed
    servers) would cancel a concurrent build on a big table, or one waiting for a long
    transaction, every time: the INVALID leftover is rebuilt at the next open and cancelled
    again, so the store would never open. For the build only; ``RESET`` gives the session its
    own values back.
    """
    _take_build_lock(conn)
    try:
        conn.execute("SET lock_timeout = 0")
        conn.execute("SET statement_timeout = 0")
        yield
    finally:
        if not conn.broken and not conn.closed:
            conn.execute("RESET lock_timeout")
            conn.execute("RESET statement_timeout")
        _release_build_lock(conn)


def ensure_indexes(conn: Any, specs: Sequence[tuple[str, str]], states: dict[str, bool | None] | None = None) -> list[str]:
    """Build each index of ``specs`` that is missing or INVALID, concurrently; returns the names built.

    ``conn`` is in autocommit mode, outside any transaction (``CREATE INDEX CONCURRENTLY``
    refuses a transaction block). Writers go on meanwhile; a build waits for transactions
    already running on the table to end. ``states`` (from :func:`index_states`) saves the
    first check; every index is checked again under the build lock before it is touched.
    """
    if states is None:
        states = index_states(conn.execute, [name for name, _ in specs])
    todo = [(name, d) for name, d in specs if states.get(name) is not True]
    if not todo:
        return []
    built = []
    with _building(conn):
        now = index_states(conn.execute, [name for name, _ in todo])  # another process may have built them
        for name, definition in todo:
            if now[name] is True:
                continue
            if now[name] is False:  # no build of ours is running (we hold the lock): a leftover
                conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            conn.execute(f"CREATE INDEX CONCURRENTLY {name} {definition}")
            built.append(name)
    return built


def drop_indexes(conn: Any, names: Sequence[str]) -> None:
    """``DROP INDEX CONCURRENTLY`` each of ``names`` (autocommit ``conn``), under the build lock."""
    if not names:
        return
    with _building(conn):
        for name in names:
            conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')


def ensure_schema(conn: Any, embedder_id: str, dimension: int) -> dict[str, str]:
    """Apply missing migrations under the schema lock, then build missing indexes; returns ``store_meta``.

    ``conn`` is in autocommit mode: the migrations run in one transaction, the index builds
    of an existing database after it commits (see the module's docstring).
    """
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", _SCHEMA_LOCK)
        cur.execute("SELECT to_regclass('store_meta') IS NOT NULL")
        exists = bool(cur.fetchone()[0])
        meta: dict[str, str] = {}
        if exists:
            cur.execute("SELECT key, value FROM store_meta")
            meta = dict(cur.fetchall())
        version = int(meta.get("schema_version", "0"))
        if version > PG_SCHEMA_VERSION:
            raise SchemaVersionError(
                f"memory store schema {version} is newer than this package understands ({PG_SCHEMA_VERSION})",
                version=version,
            )
        for v in range(version + 1, PG_SCHEMA_VERSION + 1):
            for stmt in _MIGRATIONS[v]:
                cur.execute(stmt)
            cur.execute(
                "INSERT INTO store_meta (key, value) VALUES ('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [str(v)],
            )
        if "embedder" not in meta:
            meta = {"schema_version": str(PG_SCHEMA_VERSION), "embedder": embedder_id, "dimension": str(dimension), "epoch": "0"}
            for k, val in meta.items():
                cur.execute("INSERT INTO store_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING", [k, val])
        meta["schema_version"] = str(max(version, PG_SCHEMA_VERSION))
        specs = expected_indexes(meta)
        if version == 0:  # this transaction created the tables: empty, and no other session sees them yet
            for name, definition in specs:
                cur.execute(f"CREATE INDEX {name} {definition}")
            return meta
        states = index_states(cur.execute, [name for name, _ in specs])
    ensure_indexes(conn, specs, states)
    return meta
