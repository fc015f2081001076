"""The PostgreSQL schema: versioned, forward-only migrations applied on open under an advisory lock.

``store_meta.schema_version`` records the last migration applied. Opening a store takes
``pg_advisory_xact_lock`` on one fixed key, reads the version, applies the missing
migrations and records the new version, all in one transaction (PostgreSQL DDL is
transactional): several processes opening a fresh database at once serialise on the lock,
the first creates everything, the others find it done. A database from a newer package
is refused (:class:`SchemaVersionError`); nothing is ever migrated backwards.

The vector index is per embedding model: an HNSW index (cosine) on
``embedding::vector(<dimension>)``, partial on ``embedder = '<model>'``, so vectors of
one dimension share one index and a store can be re-embedded with another model.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..exceptions import SchemaVersionError

__all__ = ["PG_SCHEMA_VERSION", "TS_CONFIG", "ensure_schema", "ensure_vector_index", "vector_index_name"]

#: Bumped by each entry appended to ``_MIGRATIONS``; never edit a shipped migration.
PG_SCHEMA_VERSION = 5
#: Shards of the row counter (``memory_rows``, migration 2): concurrent writers land on
#: different rows (by backend pid), so they rarely wait on one another's row lock.
ROW_COUNT_SHARDS = 16
#: English stemming without stopwords (SQLite's porter tokenizer keeps stopwords too).
TS_CONFIG = "atomic_agents_english"
# Two-int advisory lock key: (a constant for this package, 1 = schema).
_SCHEMA_LOCK = (0x41A6E7, 1)

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
    4: [
        "CREATE INDEX ix_memories_timeline ON memories (agent_id, user_id, org_id, workspace_id, deleted_at, created_at, seq)",
    ],
    # Keyword candidates from SQLite's own tokens, ranked by FTS5's BM25 in SQL
    # (``_postgres_keyword``): each counted row's term counts beside its stems (``tfs[i]``: how
    # often ``terms[i]`` occurs), and a GIN index on the stems, so the rows holding a query stem
    # are found without the English ``tsvector``. Rows counted before (``tfs IS NULL``, found
    # through the partial index) get their counts from the store's backfill, as migration 3's
    # rows do; so do rows an older package's process, still open, writes meanwhile.
    5: [
        "ALTER TABLE memory_docs ADD COLUMN tfs integer[]",
        "CREATE INDEX ix_memory_docs_terms ON memory_docs USING gin (terms)",
        "CREATE INDEX ix_memory_docs_untallied ON memory_docs (seq) WHERE tfs IS NULL",
    ],
}


def vector_index_name(model: str) -> str:
    return "ix_memories_hnsw_" + hashlib.sha256(model.encode("utf-8")).hexdigest()[:16]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def ensure_vector_index(cur: Any, model: str, dimension: int) -> None:
    """The HNSW (cosine) index serving semantic search for ``model``'s vectors (created once)."""
    if not isinstance(dimension, int) or not 0 < dimension <= 2000:
        raise ValueError(f"embedding dimension {dimension!r} is outside what an HNSW index takes (1..2000)")
    name = vector_index_name(model)
    cur.execute(
        f"CREATE INDEX IF NOT EXISTS {name} ON memories USING hnsw ((embedding::vector({dimension})) vector_cosine_ops)"
        f" WHERE embedder = {_literal(model)}"
    )


def ensure_schema(conn: Any, embedder_id: str, dimension: int) -> dict[str, str]:
    """Apply missing migrations under the schema lock; returns ``store_meta`` (one transaction)."""
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
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [vector_index_name(meta["embedder"])])
        if not cur.fetchone()[0]:
            ensure_vector_index(cur, meta["embedder"], int(meta["dimension"]))
    return meta
