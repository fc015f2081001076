"""The SQLite file: schema, connection settings, and the busy-retry write transaction.

Plain-SQL readers (ATP's metrics script) rely on table ``memories`` with columns
``id, content, metadata`` (JSON text), ``created_at`` (unix seconds), ``org_id``,
``workspace_id`` and ``deleted_at`` (0 = live); keep those names and meanings.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..exceptions import SchemaVersionError, StoreError
from . import _sqlite_wal

__all__ = ["SCHEMA_VERSION", "connect", "ensure_schema", "write_txn"]

#: 2: hard deletes are logged in ``memory_tombstones`` instead of bumping ``store_meta.epoch``
#: (an older package must not open such a file: it would miss the log and reuse revs).
SCHEMA_VERSION = 2
T = TypeVar("T")

# SQLITE_BUSY and SQLITE_LOCKED (primary codes; extended codes keep them in the low byte).
_RETRYABLE = {5, 6}
_RETRY_FOR_S = 120.0

_DDL = """
CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    content      TEXT NOT NULL,
    metadata     TEXT NOT NULL DEFAULT '{}',
    agent_id     TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL,
    expires_at   REAL,
    deleted_at   REAL NOT NULL DEFAULT 0,
    content_hash TEXT NOT NULL,
    embedder     TEXT,
    embedding    BLOB,
    rev          INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_memories_scope
    ON memories (agent_id, user_id, org_id, workspace_id, deleted_at, created_at);
CREATE INDEX IF NOT EXISTS ix_memories_rev ON memories (rev);
CREATE INDEX IF NOT EXISTS ix_memories_hash ON memories (content_hash);
CREATE INDEX IF NOT EXISTS ix_memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL;

-- One row per hard-deleted memory row (schema 2): the row's ``seq`` and a ``rev`` from the
-- same counter as ``memories.rev``, written in the deleting transaction, so a process that
-- holds the vectors as of rev R drops the rows tombstoned above R (``_sqlite_tombstones``).
CREATE TABLE IF NOT EXISTS memory_tombstones (
    rev INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (rev, seq)
) WITHOUT ROWID;

-- One row per top-level scalar metadata key: equality filters (goal_id, record_type,
-- stage, ...) are an index lookup at any size, for every key, with no schema change.
-- ``kind`` is json_each's type (text, integer, real, true, false, null): 1, 1.0, true
-- and "1" are different values, as they are in the JSON. A JSON null is stored as
-- value '' with kind 'null' (primary-key columns of a WITHOUT ROWID table are NOT NULL).
CREATE TABLE IF NOT EXISTS memory_tags (
    key   TEXT NOT NULL,
    value,
    kind  TEXT NOT NULL,
    seq   INTEGER NOT NULL,
    PRIMARY KEY (key, value, kind, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_memory_tags_seq ON memory_tags (seq);

-- One row per lease key: its latest grant. ``token`` only grows (fencing tokens).
CREATE TABLE IF NOT EXISTS leases (
    key         TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at REAL NOT NULL,
    expires_at  REAL NOT NULL,
    released_at REAL
);

-- content="memories" (double quotes) is the form sqlite-utils and Datasette look for
-- to detect a table's full-text index.
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    content, content="memories", content_rowid='seq',
    tokenize='porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
    INSERT INTO memory_tags (key, value, kind, seq)
        SELECT key, coalesce(value, ''), type, new.seq FROM json_each(new.metadata) WHERE type NOT IN ('object', 'array');
END;
CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    DELETE FROM memory_tags WHERE seq = old.seq;
END;
CREATE TRIGGER IF NOT EXISTS memories_au_content AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER IF NOT EXISTS memories_au_metadata AFTER UPDATE OF metadata ON memories BEGIN
    DELETE FROM memory_tags WHERE seq = old.seq;
    INSERT INTO memory_tags (key, value, kind, seq)
        SELECT key, coalesce(value, ''), type, new.seq FROM json_each(new.metadata) WHERE type NOT IN ('object', 'array');
END;
"""


def _retryable(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _RETRYABLE


def connect(path: Path, *, durable: bool = True) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        _with_retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
        # FULL: a remember that returned is on disk even after a power cut (fsync per commit,
        # ~4 ms here). NORMAL in WAL mode survives a crashed process but may lose the last
        # commits on power loss; only for bulk jobs that can be re-run.
        conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
        # No checkpoint when the last connection closes (12-16 ms at every CLI exit); the WAL
        # left behind stays under WAL_KEEP_BYTES (the journal size limit, and close()): _sqlite_wal.
        conn.execute(f"PRAGMA journal_size_limit = {_sqlite_wal.WAL_KEEP_BYTES}").fetchone()
        _sqlite_wal.keep_wal_on_close(conn, path)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA cache_size = -65536")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open memory store {path}: {exc}") from exc
    return conn


def _with_retry(fn: Callable[[], T]) -> T:
    deadline = time.monotonic() + _RETRY_FOR_S
    delay = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not _retryable(exc) or time.monotonic() > deadline:
                raise
            import random  # a busy database only: most commands never wait

            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.25)


def write_txn(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn`` in ``BEGIN IMMEDIATE`` ... ``COMMIT``, retrying the whole thing while busy.

    busy_timeout already waits 30 s inside SQLite; the loop covers the cases it
    does not (a busy snapshot upgrade, WAL recovery at open), so callers never
    see "database is locked". Any other error rolls back and becomes
    :class:`StoreError`: nothing is half-written.
    """

    def attempt() -> T:
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    try:
        return _with_retry(attempt)
    except sqlite3.Error as exc:
        raise StoreError(f"memory store write failed: {exc}") from exc


def ensure_schema(conn: sqlite3.Connection, embedder_id: str, dimension: int) -> dict[str, str]:
    """Create tables on first open; refuse a file from a newer package. Returns ``store_meta``."""

    def create(c: sqlite3.Connection) -> dict[str, str]:
        for stmt in _split(_DDL):
            c.execute(stmt)
        _upgrade_in_place(c)
        meta = dict(c.execute("SELECT key, value FROM store_meta").fetchall())
        if not meta:
            meta = {
                "schema_version": str(SCHEMA_VERSION),
                "embedder": embedder_id,
                "dimension": str(dimension),
                "epoch": "0",
                "tombstone_floor": "0",
            }
            c.executemany("INSERT INTO store_meta (key, value) VALUES (?, ?)", list(meta.items()))
        elif meta.get("schema_version") == "1":
            meta = _migrate_v1(c)
        return meta

    meta = write_txn(conn, create)
    version = int(meta.get("schema_version", "0"))
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"memory store schema {version} is newer than this package understands ({SCHEMA_VERSION})",
            version=version,
        )
    return meta


def _migrate_v1(c: sqlite3.Connection) -> dict[str, str]:
    """Schema 1 -> 2, inside ``ensure_schema``'s transaction (all or nothing; the DDL made the log table).

    A floor of 0 is exact for schema-1 files: there, every hard delete bumped ``epoch``, so
    since the current epoch began every change is a higher ``rev`` and the (empty) log
    misses nothing a snapshot of this epoch needs (if it was taken before this
    migration: ``legacy_snapshot_rev``, see ``_matrix_cache.load_snapshot``). The version goes to 2 in the same
    commit, so a schema-1 package refuses the file from then on instead of hard-deleting
    without a tombstone or reusing the revs the log took.
    """
    c.execute("INSERT OR IGNORE INTO store_meta (key, value) VALUES ('tombstone_floor', '0')")
    # Snapshots that schema-1 code writes from now on (a process of the previous release
    # still running) do not drop erased rows; only those as of this rev or earlier are used.
    c.execute(
        "INSERT OR IGNORE INTO store_meta (key, value)"
        " SELECT 'legacy_snapshot_rev', CAST(coalesce(max(rev), 0) AS TEXT) FROM memories"
    )
    c.execute("UPDATE store_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
    return dict(c.execute("SELECT key, value FROM store_meta").fetchall())


_CREATES = re.compile(r"CREATE (?:VIRTUAL TABLE|TRIGGER|TABLE|INDEX) IF NOT EXISTS (\w+)")


def _upgrade_in_place(c: sqlite3.Connection) -> None:
    """Bring a file made by an earlier build of this schema version up to the current DDL.

    Both changes are invisible to older builds (same tables, columns and meanings), so
    the schema version stays. Runs inside ``ensure_schema``'s transaction: all or nothing.

    * metadata triggers that stored a JSON null as SQL NULL (refused by the tag table's
      primary key, so such a file holds no null tags): recreated to store ``''``;
    * the FTS table declared with ``content='memories'``: re-declared with
      ``content="memories"`` (sqlite-utils/Datasette detection) and rebuilt from
      ``memories``, which is its content table either way.
    """
    sql = dict(c.execute("SELECT name, sql FROM sqlite_master WHERE name IN ('memories_ai', 'memories_au_metadata', 'memories_fts')").fetchall())
    stale_triggers = [n for n in ("memories_ai", "memories_au_metadata") if "coalesce(value, '')" not in (sql.get(n) or "")]
    stale_fts = 'content="memories"' not in (sql.get("memories_fts") or "")
    if not stale_triggers and not stale_fts:
        return
    wanted = {m.group(1): stmt for stmt in _split(_DDL) if (m := _CREATES.match(stmt))}
    for name in stale_triggers:
        c.execute(f"DROP TRIGGER IF EXISTS {name}")
        c.execute(wanted[name])
    if stale_fts:
        c.execute("DROP TABLE IF EXISTS memories_fts")
        c.execute(wanted["memories_fts"])
        c.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")


def _split(ddl: str) -> list[str]:
    """Split the DDL into statements, keeping trigger bodies (which contain ``;``) whole."""
    out, buf = [], []
    for line in ddl.strip().splitlines():
        if line.strip().startswith("--") or not line.strip():
            continue
        buf.append(line)
        text = "\n".join(buf)
        if sqlite3.complete_statement(text):
            out.append(text)
            buf = []
    return out
