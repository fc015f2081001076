"""The shared backend: one PostgreSQL database (pgvector HNSW, JSONB), for agents on many hosts.

Selected by a DSN (``open_store("postgresql://...")``, ``--db postgresql://...``,
``$ATOMIC_AGENTS_DB``). Needs the ``postgres`` extra (psycopg 3, psycopg_pool,
pgvector) and a server with the ``vector`` extension.

- Semantic search: ``ORDER BY embedding::vector(d) <=> q`` in the store's scope, served
  by the model's HNSW index (cosine, iterative scan in strict order so filtered scans
  still return ``limit`` rows); score = the shared calibrated map of the cosine.
- Keyword search: SQLite's own tokens (:func:`~._scoring.tokens`), kept per row with
  their counts (``memory_docs``, GIN-indexed stems): the rows holding a query stem are
  found by the index and ranked in SQL by FTS5's bm25 (:mod:`._postgres_keyword`) over
  corpus statistics kept exactly as FTS5 keeps them (:mod:`._postgres_stats`: N, each
  stem's row count and the average length, trigger-kept counters read in one indexed
  statement), so the same rows come back in SQLite's order with SQLite's scores; ties go
  to the older row, as everywhere. (The ``tsvector`` column is still written, for an
  older package's process during an upgrade; nothing here reads it.)
- Metadata filters: ``meta @> filter`` on a JSONB copy (GIN index), then the shared
  type-strict check where JSONB is looser (numbers: ``1`` equals ``1.0`` in JSONB).
- Every write is one transaction on a pooled connection; leases serialise on a
  per-key advisory lock (grant) or the lease row's lock (release, fenced write), and
  use the server's clock, so hosts with skewed clocks agree on expiry.
- Lock order, so concurrent writers never deadlock: a write touching many rows of
  ``memories`` locks them first in ``seq`` order (:func:`_lock_in_order`; a DELETE or
  UPDATE alone locks them in its plan's order: a sequential or bitmap scan goes by
  the rows' places on disk, which an edit moves); only then the ``memory_docs`` rows of
  those same rows and the writer's counter shard, whose row lock orders every write to
  that shard's stem rows (the triggers of ``_postgres_schema``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from ..exceptions import ConflictError, EmbedderMismatchError, NotFoundError, StoreError
from ._base import (
    check_prune_target,
    check_scope,
    check_scope_filter,
    embed_texts,
    given_vectors,
    keyword_hits,
    metadata_matches,
    semantic_hits,
    prepare_edit,
    prepare_new,
)
from ._embed import Embedder, content_hash
from ._leases import Fence, check_fence
from ._models import Health, Hit, Memory, PruneReport, Scope, ScopeFilter, check_filters, check_flag, check_id, check_limit, check_query
from ._postgres_sql import (
    _COLS,
    _LIVE,
    _SCOPE,
    _INSTALL,
    is_dsn,
    redact_dsn,
    _fold,
    _meta_params,
    _needs_python_check,
    _filter_sql,
    _scope_filter_sql,
    _lock_in_order,
    _np,
    _cosine,
)
from ._base import memory_from_row as _memory
from ._postgres_keyword import PostgresKeyword
from ._postgres_leases import PostgresLeases, _lease, _server_now
from ._postgres_schema import PG_SCHEMA_VERSION, drop_indexes, ensure_indexes, ensure_schema, vector_index, vector_index_name
from ._postgres_stats import backfill, compact, insert_docs, pending, row_stats

from ._scoring import (
    HYBRID_POOL,
    asks,
    calibration_for,
    fuse_pool,
    keyword_coverage,
    keyword_evidence,
)
from ._base import check_no_secrets  # the scanner loads with the first write
from ._store import UNSET, Progress

__all__ = ["PostgresMemoryStore", "is_dsn", "redact_dsn"]

T = TypeVar("T")

class PostgresMemoryStore(PostgresKeyword, PostgresLeases):
    """A :class:`~atomic_agents.memory.MemoryStore` in a PostgreSQL database, shared by many hosts.

    ``pool_size`` bounds the connections this process opens (threads beyond it wait).
    The DSN's password is never printed: :attr:`path` and errors show it redacted.
    """

    persistent = True
    backend = "postgres"

    def __init__(
        self, dsn: str, *, embedder: Embedder, pool_size: int = 4, connect_timeout: float = 30.0, durable: bool = True
    ) -> None:
        try:
            import psycopg
            from pgvector.psycopg import register_vector
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise StoreError(f"PostgreSQL support is not installed ({exc.name}): {_INSTALL}") from None
        self._psycopg = psycopg
        self.dsn = dsn
        self.path = redact_dsn(dsn)
        self.embedder = embedder
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=int(max(1, connect_timeout))) as conn:
                ensure_schema(conn, embedder.model_id, embedder.dimension)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open the memory store at {self.path}: {self._reason(exc)}") from None

        self.durable = durable

        def configure(conn: Any) -> None:
            register_vector(conn)
            if not durable:  # commits return before the WAL is flushed; a crash loses no consistency
                conn.execute("SET synchronous_commit = off")

        self._pool = ConnectionPool(
            dsn,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True},
            configure=configure,
            timeout=connect_timeout,
            open=False,
            name="atomic-agents-memory",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except Exception as exc:  # PoolTimeout: the server went away between the two connects
            self._pool.close()
            raise StoreError(f"cannot open a connection pool to {self.path}: {exc}") from None
        try:
            self._count_uncounted()
        except BaseException:
            self._pool.close()
            raise

    def _count_uncounted(self) -> None:
        """Rows from before schema 3 (or from an older package) get their keyword statistics."""
        if self._run(pending, write=False):
            backfill(self._run)

    # -- plumbing --------------------------------------------------------------------

    def _reason(self, exc: BaseException) -> str:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return text.replace(self.dsn, self.path)

    def _run(self, fn: Callable[[Any], T], *, write: bool) -> T:
        """``fn(cursor)`` in one transaction on a pooled connection; retried on serialization/deadlock."""
        psycopg = self._psycopg
        for attempt in range(5):
            try:
                with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                    return fn(cur)
            except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
                if attempt == 4:
                    raise StoreError("memory store write kept conflicting with other writers; try again") from None
                time.sleep(0.01 * (2**attempt))
            except psycopg.errors.UniqueViolation as exc:
                raise ConflictError(f"a memory with that id already exists ({self._reason(exc)})") from None
            except psycopg.Error as exc:
                raise StoreError(f"memory store {'write' if write else 'read'} failed: {self._reason(exc)}") from None
            except Exception as exc:
                if type(exc).__name__ == "PoolTimeout":
                    raise StoreError(f"no connection to {self.path} became free in time") from None
                raise
        raise AssertionError("unreachable")

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        def q(cur: Any) -> list[Any]:
            cur.execute(sql, params)
            return list(cur.fetchall())

        return self._run(q, write=False)

    def _meta(self) -> dict[str, str]:
        return dict(self._read("SELECT key, value FROM store_meta"))

    def _require_model(self) -> int:
        meta = self._meta()
        stored = meta["embedder"]
        if stored != self.embedder.model_id:
            raise EmbedderMismatchError(
                f"this store's vectors come from {stored!r}, the current embedder is "
                f"{self.embedder.model_id!r}; run `atomic-agents memory reindex` first",
                stored=stored,
                current=self.embedder.model_id,
            )
        return int(meta["dimension"])

    def _model_literal(self) -> str:
        return "'" + self.embedder.model_id.replace("'", "''") + "'"

    def _vectors_for(self, contents: Sequence[str], progress: Any = None) -> list[tuple[str, np.ndarray]]:
        """(hash, vector) per content; reuses stored vectors of equal content, embeds the rest once."""
        hashes = [content_hash(t) for t in contents]
        known: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 1000):
            part = unique[start : start + 1000]
            for h, vec in self._read(
                "SELECT DISTINCT ON (content_hash) content_hash, embedding FROM memories"
                " WHERE content_hash = ANY(%s) AND embedder = %s AND embedding IS NOT NULL",
                [part, self.embedder.model_id],
            ):
                known.setdefault(h, _np(vec))
        todo = {h: t for h, t in zip(hashes, contents, strict=True) if h not in known}
        if todo:
            vecs = embed_texts(self.embedder, list(todo.values()), progress=progress)
            known.update(zip(todo.keys(), vecs, strict=True))
        return [(h, known[h]) for h in hashes]

    #: the column types of one row of :meth:`_row`, in order (the arrays :meth:`_insert` unnests)
    _ROW_TYPES = (
        "text", "text", "text", "text", "text", "text", "text", "text", "float8", "float8", "float8", "float8",
        "text", "text", "vector", "text",
    )  # fmt: skip

    def _insert(
        self, cur: Any, rows: Sequence[Sequence[Any]], stats: Sequence[tuple[int, str, str]], *, skip_existing: bool = False
    ) -> int:
        """Insert ``rows`` (from :meth:`_row`) and their keyword counts (``stats``); returns how many went in.

        One statement per table, so each trigger runs once per write with every row
        (one upsert per counter, in stem order) rather than once per row.
        """
        head = (
            "INSERT INTO memories (id, content, metadata, meta, agent_id, user_id, org_id, workspace_id, created_at,"
            " updated_at, expires_at, deleted_at, content_hash, embedder, embedding, search_text)"
        )
        tail = (" ON CONFLICT (id) DO NOTHING" if skip_existing else "") + " RETURNING id, seq"
        if len(rows) == 1:  # one row (``remember``): plain VALUES plan in less time than the unnest
            marks = ", ".join("%s::jsonb" if i == 3 else "%s" for i in range(len(self._ROW_TYPES)))
            cur.execute(f"{head} VALUES ({marks}){tail}", list(rows[0]))
        else:
            self._insert_many(cur, head, tail, rows)
        seq = dict(cur.fetchall())
        kept = [(seq[r[0]], st) for r, st in zip(rows, stats, strict=True) if r[0] in seq]
        if kept:
            insert_docs(cur, [k for k, _ in kept], [st for _, st in kept])
        return len(seq)

    def _insert_many(self, cur: Any, head: str, tail: str, rows: Sequence[Sequence[Any]]) -> None:
        cols: list[list[Any]] = [list(c) for c in zip(*rows, strict=True)]
        for i, t in enumerate(self._ROW_TYPES):  # one array holds one type: 0 and 1.5 are both float8
            if t == "float8":
                cols[i] = [None if v is None else float(v) for v in cols[i]]
        arrays = ", ".join(f"%s::{t}[]" for t in self._ROW_TYPES)
        names = ", ".join(f"c{i}" for i in range(len(self._ROW_TYPES)))
        cur.execute(
            f"{head} SELECT c0, c1, c2, c3::jsonb, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15"
            f" FROM unnest({arrays}) WITH ORDINALITY AS u({names}, ord) ORDER BY ord{tail}",
            cols,
        )

    def _row(self, mem: Memory, h: str, vec: np.ndarray | None) -> list[Any]:
        text, jsonb = _meta_params(mem.metadata)
        return [
            mem.id, mem.content, text, jsonb, mem.agent_id, mem.user_id, mem.org_id, mem.workspace_id,
            mem.created_at, mem.updated_at, mem.expires_at, mem.deleted_at or 0, h,
            self.embedder.model_id if vec is not None else None,
            np.asarray(vec, dtype=np.float32) if vec is not None else None, _fold(mem.content),
        ]  # fmt: skip

    # -- writes ------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        metadata: Mapping[str, Any] | None,
        scope: Scope,
        *,
        ttl_ms: int | None = None,
        memory_id: str | None = None,
        fence: Fence | None = None,
    ) -> str:
        """Store one memory; returns its id once the transaction committed.

        ``memory_id`` (a UUID not yet used) is the caller's choice of id; ``fence``
        makes the write conditional on a live lease, checked (under the lease row's
        lock) inside the write's transaction.
        """
        return self._remember_many([(content, metadata)], scope, ttl_ms, None, memory_id, fence)[0]

    def remember_many(
        self,
        items: Sequence[tuple[str, Mapping[str, Any] | None]],
        scope: Scope,
        *,
        ttl_ms: int | None = None,
        progress: Progress | None = None,
    ) -> list[str]:
        """Store many memories in one transaction: all of them or (on any bad item) none."""
        return self._remember_many(items, scope, ttl_ms, progress, None, None)

    def _remember_many(
        self,
        items: Sequence[tuple[str, Mapping[str, Any] | None]],
        scope: Scope,
        ttl_ms: int | None,
        progress: Progress | None,
        memory_id: str | None,
        fence: Fence | None,
    ) -> list[str]:
        now = time.time()
        mems = [prepare_new(c, m, scope, ttl_ms, now=now, memory_id=memory_id) for c, m in items]
        total = len(mems)
        vectors = self._vectors_for([m.content for m in mems], progress=(lambda n: progress(n, total)) if progress else None)
        stats = row_stats([m.content for m in mems])
        rows = [self._row(mem, h, vec) for mem, (h, vec) in zip(mems, vectors, strict=True)]

        def tx(cur: Any) -> None:
            if fence is not None:
                check_fence(fence, _lease(cur, fence.key, " FOR SHARE"), _server_now(cur))
            if memory_id is not None:
                cur.execute("SELECT 1 FROM memories WHERE id = %s", [mems[0].id])
                if cur.fetchone():
                    raise ConflictError(f"a memory with id {mems[0].id} already exists")
            if rows:
                self._insert(cur, rows, stats)

        self._run(tx, write=True)
        return [m.id for m in mems]

    def _current(self, memory_id: str, *, include_expired: bool = False) -> Memory:
        rows = self._read(f"SELECT {_COLS} FROM memories m WHERE m.id = %s AND m.deleted_at = 0", [memory_id])
        if not rows or (not include_expired and not _memory(rows[0]).is_live()):
            raise NotFoundError(f"no memory {memory_id}", record=memory_id)
        return _memory(rows[0])

    def get(self, memory_id: str) -> Memory:
        """The memory, unless it is forgotten or expired (then :class:`NotFoundError`)."""
        return self._current(check_id(memory_id))

    def edit(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_ms: int | None = UNSET,
    ) -> Memory:
        """Change content, metadata (replaced whole) and/or TTL; re-embeds only if content changed."""
        mid = check_id(memory_id)
        now = time.time()
        cur_mem = self._current(mid)
        new = prepare_edit(cur_mem, content, metadata, ttl_ms, unset=UNSET, now=now)
        changed = new.content != cur_mem.content
        h, vec = self._vectors_for([new.content])[0] if changed else (content_hash(cur_mem.content), None)
        stats = row_stats([new.content])[0] if changed else (0, "", "")
        text, jsonb = _meta_params(new.metadata)

        def tx(cur: Any) -> None:
            sets = "metadata = %s, meta = %s::jsonb, updated_at = %s, expires_at = %s"
            params: list[Any] = [text, jsonb, now, new.expires_at]
            if changed:
                sets += ", content = %s, search_text = %s, content_hash = %s, embedder = %s, embedding = %s"
                params += [new.content, _fold(new.content), h, self.embedder.model_id, vec]
            cur.execute(f"UPDATE memories SET {sets} WHERE id = %s AND deleted_at = 0 RETURNING seq", [*params, mid])
            got = cur.fetchall()
            if len(got) != 1:
                raise NotFoundError(f"no memory {mid}", record=mid)
            if changed:  # a trigger dropped the old content's counts
                insert_docs(cur, [got[0][0]], [stats])

        self._run(tx, write=True)
        return new

    def forget(self, memory_id: str) -> Memory:
        """Soft-delete: hidden from every read, kept in the table until a hard prune."""
        mid = check_id(memory_id)
        cur_mem = self._current(mid, include_expired=True)
        now = time.time()

        def tx(cur: Any) -> None:
            cur.execute("UPDATE memories SET deleted_at = %s WHERE id = %s AND deleted_at = 0", [now, mid])
            if cur.rowcount != 1:
                raise NotFoundError(f"no memory {mid}", record=mid)

        self._run(tx, write=True)
        return Memory(**{**cur_mem.__dict__, "deleted_at": now})

    def forget_expired(self, scope: ScopeFilter | None = None) -> int:
        """Soft-delete every expired memory in ``scope`` (all scopes if ``None``); returns the count."""
        where, params = _scope_filter_sql(check_scope_filter(scope))
        now = time.time()

        def tx(cur: Any) -> int:
            seqs = _lock_in_order(
                cur,
                f"m.deleted_at = 0 AND m.expires_at IS NOT NULL AND m.expires_at <= %s{where}",
                [now, *params],
                "NO KEY UPDATE",
            )
            cur.execute("UPDATE memories SET deleted_at = %s WHERE seq = ANY(%s)", [now, seqs])
            return int(cur.rowcount)

        return self._run(tx, write=True)

    def prune(
        self,
        scope: ScopeFilter | None = None,
        *,
        keywords: str | None = None,
        expired_only: bool = False,
        dry_run: bool = True,
        hard: bool = False,
    ) -> PruneReport:
        """Bulk removal, a dry run unless ``dry_run=False``; ``hard`` also erases soft-deleted rows."""
        sf = check_prune_target(scope, keywords, expired_only)
        now = time.time()
        where, params = _scope_filter_sql(sf)
        sql = "SELECT m.seq, m.id FROM memories m WHERE true"
        if keywords:  # the rows FTS5's OR of the words matches on SQLite (SQLite's tokens, schema 5)
            matching = self._matching_seqs(keywords)
            if matching is None:
                return PruneReport(0, 0, dry_run, hard)
            sql += " AND m.seq = ANY(%s)"
            params = [matching, *params]
        sql += where
        if not hard:
            sql += " AND m.deleted_at = 0"
        if expired_only:
            sql += " AND m.expires_at IS NOT NULL AND m.expires_at <= %s"
            params.append(now)
        rows = self._read(sql + " ORDER BY m.seq", params)
        seqs = [r[0] for r in rows]
        sample = tuple(r[1] for r in rows[:10])
        if dry_run or not seqs:
            return PruneReport(len(seqs), 0, dry_run, hard, sample)

        def tx(cur: Any) -> int:
            if hard:
                cur.execute("DELETE FROM memories WHERE seq = ANY(%s)", [_lock_in_order(cur, "m.seq = ANY(%s)", [seqs], "UPDATE")])
            else:
                locked = _lock_in_order(cur, "m.deleted_at = 0 AND m.seq = ANY(%s)", [seqs], "NO KEY UPDATE")
                cur.execute("UPDATE memories SET deleted_at = %s WHERE seq = ANY(%s)", [now, locked])
            return int(cur.rowcount)

        n = self._run(tx, write=True)
        return PruneReport(len(seqs), n, False, hard, sample)

    # -- reads -------------------------------------------------------------------------

    def search(
        self, query: str, scope: Scope, limit: int = 10, filters: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Keyword search: a memory matches if any query word does (SQLite's tokens), best first."""
        q, sc, lim, flt = check_query(query), check_scope(scope), check_limit(limit), check_filters(filters)
        cal = calibration_for(self.embedder)
        with self._one_read():  # the hits and the IDF their coverage weighs: one statistics read
            found = [(e, mem) for _, e, mem in self._keyword(q, sc, lim, flt)]
            idfs = self._idf(q) if found else {}
        return keyword_hits(q, idfs, found, cal)

    def _semantic(self, q: str, sc: Scope, filters: Mapping[str, Any], limit: int) -> tuple[np.ndarray, list[tuple[int, float, Memory]]]:
        dim = self._require_model()
        qv = np.asarray(self.embedder.embed_batch([self._semantic_text(q, sc)])[0], dtype=np.float32)
        extra, fparams = _filter_sql(filters)
        post = _needs_python_check(filters)
        model = self._model_literal()

        def tx(cur: Any) -> list[Any]:
            # strict_order: a filtered HNSW scan keeps going until ``limit`` rows pass the
            # scope/filter (exact order); without it a small scope in a big table comes back short.
            cur.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true),"
                        " set_config('hnsw.ef_search', %s, true), set_config('hnsw.max_scan_tuples', '1000000', true)",
                        [str(min(1000, max(40, limit)))])  # fmt: skip
            cur.execute(
                f"SELECT {_COLS}, (m.embedding::vector({dim})) <=> %s::vector({dim}) AS d FROM memories m"
                f" WHERE m.embedder = {model} AND m.embedding IS NOT NULL AND {_SCOPE} AND {_LIVE}{extra}"
                " ORDER BY d, m.seq" + ("" if post else " LIMIT %s"),
                [qv, *sc.key(), time.time(), *fparams, *([] if post else [limit])],
            )
            return list(cur.fetchall())

        rows = self._run(tx, write=False)
        if post:
            rows = [r for r in rows if metadata_matches(json.loads(r[3]), filters)][:limit]
        return qv, [(r[0], _cosine(r[-1]), _memory(r)) for r in rows]

    def search_semantic(
        self, query: str, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 5
    ) -> list[Hit]:
        """Nearest memories by cosine (calibrated score), restricted by metadata equality ``filters``."""
        q, sc, lim, flt = check_query(query), check_scope(scope), check_limit(limit), check_filters(filters)
        cal = calibration_for(self.embedder)
        with self._one_read():  # the query text and the IDF the hits' words weigh: one statistics read
            _, found = self._semantic(q, sc, flt, lim)
            return semantic_hits(q, lambda: self._idf(q), [(c, mem) for _, c, mem in found], cal)

    def recall(
        self, query: str, scope: Scope, limit: int = 5, filters: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Semantic recall (eden's ``recall``): ``search_semantic``."""
        return self.search_semantic(query, scope, filters, limit)

    def search_hybrid(
        self, query: str, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 5,
        *, rerank: bool = False,
    ) -> list[Hit]:
        """Both rankers' top candidates, each scored on both signals, fused as on SQLite (:func:`fuse_pool`)."""
        q, sc, lim, flt = check_query(query), check_scope(scope), check_limit(limit), check_filters(filters)
        rerank = check_flag(rerank, name="rerank")
        pool = max(lim * 4, HYBRID_POOL)
        with self._one_read():  # the query text, the keyword candidates and the signals: one statistics read
            qv, found = self._semantic(q, sc, flt, pool)
            kw_hits = self._keyword(q, sc, pool, flt)
            cos = {k: c for k, c, _ in found}
            mems = {k: m for k, _, m in found}
            kw = {k: e for k, e, _ in kw_hits}
            mems.update({k: m for k, _, m in kw_hits})
            # each candidate's successor in its scope's timeline joins the pool (the reply to a matching turn)
            follows = self._successors(mems, sc, flt)
            missing = [k for k in mems if k not in cos]
            if missing:
                dim = self.embedder.dimension
                for k, d in self._read(
                    f"SELECT m.seq, (m.embedding::vector({dim})) <=> %s::vector({dim}) FROM memories m"
                    f" WHERE m.seq = ANY(%s) AND m.embedder = {self._model_literal()} AND m.embedding IS NOT NULL",
                    [qv, missing],
                ):
                    cos[k] = _cosine(d)
            # every candidate on one footing (one average length), from the stored term counts; a
            # candidate lacking a name the question asks about scores lower (memory/_scoring.py)
            bm, matched, lacking, mass, parts = self._signals_of(q, list(mems))
        kw = {k: keyword_evidence(b, mass) for k, b in bm.items()}
        coverage = {k: keyword_coverage(v, mass) for k, v in matched.items()}
        scov = {k: max(v, parts.get(k, 0.0)) for k, v in coverage.items()}  # a query asking two things (as on SQLite)
        fused = [(s, k) for s, k in fuse_pool(cos, kw, calibration_for(self.embedder), coverage, lacking, follows, scov) if s > 0.0]
        if rerank:  # the opt-in stage (memory/_rerank.py), as on SQLite
            from ._rerank import RERANK_DEPTH, rerank as _rerank

            head = fused[: max(lim, RERANK_DEPTH)]
            fused = _rerank(q, head, cos, kw, {k: mems[k].content for _, k in head}, self.embedder)
        return [Hit(mems[k], s) for s, k in fused if s > 0.0][:lim]  # no signal at all is not a hit

    def _successors(self, mems: dict[int, Memory], sc: Scope, filters: Mapping[str, Any]) -> dict[int, int]:
        """``reply -> key``: for each of ``mems`` that asks something (:func:`~._scoring.asks`), the live
        memory written right after it in its scope, if it passes ``filters`` (``list_memories``' order,
        ``(created_at, seq)``: one seek of ``ix_memories_timeline`` each); replies not in ``mems`` join it."""
        asking = [k for k, m in mems.items() if asks(m.content)]
        if not asking:
            return {}
        rows = self._read(
            f"SELECT k.seq, n.* FROM memories k CROSS JOIN LATERAL (SELECT {_COLS} FROM memories m WHERE {_SCOPE}"
            f" AND {_LIVE} AND (m.created_at, m.seq) > (k.created_at, k.seq) ORDER BY m.created_at, m.seq LIMIT 1) n"
            " WHERE k.seq = ANY(%s)",
            [*sc.key(), time.time(), asking],
        )
        out: dict[int, int] = {}
        for row in rows:
            nxt = _memory(row[1:])
            if not filters or metadata_matches(nxt.metadata, filters):
                mems.setdefault(row[1], nxt)
                out[row[1]] = row[0]
        return out

    def list_memories(
        self, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 1000
    ) -> list[Memory]:
        """Live memories in ``scope`` matching ``filters``, oldest first (e.g. all records of one goal)."""
        sc, flt, lim = check_scope(scope), check_filters(filters), check_limit(limit)
        extra, fparams = _filter_sql(flt)
        post = _needs_python_check(flt)
        rows = self._read(
            f"SELECT {_COLS} FROM memories m WHERE {_SCOPE} AND {_LIVE}{extra} ORDER BY m.created_at, m.seq"
            + ("" if post else " LIMIT %s"),
            [*sc.key(), time.time(), *fparams, *([] if post else [lim])],
        )
        mems = [_memory(r) for r in rows]
        if post:
            mems = [m for m in mems if metadata_matches(m.metadata, flt)][:lim]
        return mems

    def scan(self, scope: ScopeFilter, filters: Mapping[str, Any] | None = None) -> list[Memory]:
        """Live memories in a *partial* scope matching ``filters``, oldest first, no limit."""
        sf, flt = check_scope_filter(scope), check_filters(filters)
        extra, fparams = _filter_sql(flt)
        swhere, sparams = _scope_filter_sql(sf)
        rows = self._read(
            f"SELECT {_COLS} FROM memories m WHERE {_LIVE}{extra}{swhere} ORDER BY m.created_at, m.seq",
            [time.time(), *fparams, *sparams],
        )
        mems = [_memory(r) for r in rows]
        if _needs_python_check(flt):
            mems = [m for m in mems if metadata_matches(m.metadata, flt)]
        return mems

    # -- housekeeping ----------------------------------------------------------------

    def health(self) -> Health:
        """Counts, table size, schema version and whether vectors match the current embedder."""
        now = time.time()
        total, live, deleted, expired, stale, size = self._read(
            "SELECT count(*), count(*) FILTER (WHERE deleted_at = 0 AND (expires_at IS NULL OR expires_at > %s)),"
            " count(*) FILTER (WHERE deleted_at <> 0),"
            " count(*) FILTER (WHERE deleted_at = 0 AND expires_at IS NOT NULL AND expires_at <= %s),"
            " count(*) FILTER (WHERE deleted_at = 0 AND (embedder IS DISTINCT FROM %s OR embedding IS NULL)),"
            " pg_total_relation_size('memories') + pg_total_relation_size('leases') FROM memories",
            [now, now, self.embedder.model_id],
        )[0]
        meta = self._meta()
        return Health(
            status="ok",
            total=int(total),
            live=int(live),
            deleted=int(deleted),
            expired=int(expired),
            backend=self.backend,
            path=self.path,
            size_bytes=int(size),
            schema_version=int(meta.get("schema_version", PG_SCHEMA_VERSION)),
            embedder=self.embedder.model_id,
            dimension=self.embedder.dimension,
            stored_embedder=meta.get("embedder"),
            needs_reindex=meta.get("embedder") != self.embedder.model_id or int(stale) > 0,
            extra={"relevance_floor": getattr(self.embedder, "relevance_floor", None), "stale_vectors": int(stale)},
        )

    def vacuum(self) -> dict[str, Any]:
        """``VACUUM (ANALYZE)`` the tables; returns sizes before/after."""
        before = self.health().size_bytes
        try:
            with self._pool.connection() as conn:
                with conn.transaction(), conn.cursor() as cur:
                    compact(cur)
                conn.execute("VACUUM (ANALYZE) memories")
                conn.execute("VACUUM (ANALYZE) memory_docs")
                conn.execute("VACUUM (ANALYZE) memory_terms")
                conn.execute("VACUUM (ANALYZE) leases")
        except self._psycopg.Error as exc:
            raise StoreError(f"vacuum failed: {self._reason(exc)}") from None
        return {"status": "ok", "size_before": before, "size_after": self.health().size_bytes}

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Re-embed every live memory not embedded by the current model; resumable batch by batch."""
        model = self.embedder.model_id
        pending = "FROM memories WHERE deleted_at = 0 AND (embedder IS DISTINCT FROM %s OR embedding IS NULL)"
        total = int(self._read(f"SELECT count(*) {pending}", [model])[0][0])
        done = 0
        while True:
            rows = self._read(f"SELECT seq, content {pending} ORDER BY seq LIMIT 256", [model])
            if not rows:
                break
            vecs = self._vectors_for([r[1] for r in rows])

            def tx(cur: Any, rows: list[Any] = rows, vecs: list[Any] = vecs) -> None:
                cur.executemany(
                    "UPDATE memories SET embedder = %s, embedding = %s, content_hash = %s WHERE seq = %s",
                    [(model, v, h, r[0]) for r, (h, v) in zip(rows, vecs, strict=True)],
                )

            self._run(tx, write=True)
            done += len(rows)
            if progress is not None:
                progress(len(rows), total)

        # the new model's index first (built concurrently: writers go on), then the switch,
        # then the other models' indexes dropped concurrently (searches never wait on a lock)
        self._indexes(lambda conn: ensure_indexes(conn, [vector_index(model, self.embedder.dimension)]))

        def switch(cur: Any) -> list[str]:
            cur.execute("UPDATE store_meta SET value = %s WHERE key = 'embedder'", [model])
            cur.execute("UPDATE store_meta SET value = %s WHERE key = 'dimension'", [str(self.embedder.dimension)])
            cur.execute("UPDATE store_meta SET value = (value::bigint + 1)::text WHERE key = 'epoch'")
            cur.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' AND indexname LIKE 'ix\\_memories\\_hnsw\\_%%'"
                " AND schemaname = current_schema()"
            )
            return [name for (name,) in cur.fetchall() if name != vector_index_name(model)]

        old = self._run(switch, write=True)
        self._indexes(lambda conn: drop_indexes(conn, old))
        return done

    def _indexes(self, fn: Callable[[Any], object]) -> None:
        """``fn(connection)`` on a pooled connection outside any transaction (concurrent index DDL)."""
        try:
            with self._pool.connection() as conn:
                fn(conn)
        except self._psycopg.Error as exc:
            raise StoreError(f"memory store index build failed: {self._reason(exc)}") from None

    def dump(self, scope: ScopeFilter | None = None) -> Iterator[Memory]:
        """Every row in ``scope``, forgotten and expired ones included (a backup is complete)."""
        where, params = _scope_filter_sql(check_scope_filter(scope))
        last = 0
        while True:
            rows = self._read(
                f"SELECT {_COLS} FROM memories m WHERE m.seq > %s{where} ORDER BY m.seq LIMIT 1000", [last, *params]
            )
            if not rows:
                return
            for row in rows:
                yield _memory(row)
            last = rows[-1][0]

    def stored_vectors(self, ids: Sequence[str], *, hashes: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
        """The current embedder's vectors of these memories, where one matches the content (for an export)."""
        out: dict[str, np.ndarray] = {}
        ids = list(ids)
        for start in range(0, len(ids), 5000):
            for mid, h, content, vec in self._read(
                "SELECT id, content_hash, content, embedding FROM memories WHERE id = ANY(%s)"
                " AND embedder = %s AND embedding IS NOT NULL",
                [ids[start : start + 5000], self.embedder.model_id],
            ):
                if h == content_hash(content) and (hashes is None or hashes.get(mid) == h):
                    out[mid] = _np(vec)
        return out

    def load(
        self,
        memories: Iterable[Memory],
        *,
        progress: Progress | None = None,
        vectors: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[int, int]:
        """Insert exported memories keeping ids and times; ids already present are skipped.

        Returns ``(imported, skipped)``. All or nothing: every memory is checked and
        every live one embedded (or given an equal-content vector) first, then all rows
        go in one transaction (``ON CONFLICT DO NOTHING`` for ids another process added).
        """
        mems = list(memories)
        for m in mems:
            check_no_secrets(m.content, m.metadata, record=m.id, scope=m)
        ids = list(dict.fromkeys(m.id for m in mems))
        have: set[str] = set()
        for start in range(0, len(ids), 5000):
            have.update(r[0] for r in self._read("SELECT id FROM memories WHERE id = ANY(%s)", [ids[start : start + 5000]]))
        fresh = list({m.id: m for m in mems if m.id not in have}.values())
        live = [m for m in fresh if m.deleted_at is None]
        given = given_vectors(vectors, live, self.embedder.dimension)
        todo = [m for m in live if m.id not in given]
        total = len(mems)
        embedded = self._vectors_for([m.content for m in todo], progress=(lambda n: progress(n, total)) if progress else None)
        vecs = dict(zip((m.id for m in todo), embedded, strict=True))
        vecs.update((m.id, (content_hash(m.content), given[m.id])) for m in live if m.id in given)
        rows = []
        for m in fresh:
            h, v = vecs.get(m.id, (content_hash(m.content), None))
            rows.append(self._row(m, h, v))
        stats = row_stats([m.content for m in fresh])

        def tx(cur: Any) -> int:
            return sum(
                self._insert(cur, rows[s : s + 1000], stats[s : s + 1000], skip_existing=True) for s in range(0, len(rows), 1000)
            )

        imported = self._run(tx, write=True) if rows else 0
        if progress is not None:
            progress(total - len(todo), total)
        return imported, total - imported

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> PostgresMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
