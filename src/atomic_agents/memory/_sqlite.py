"""The default backend: one SQLite file (WAL), FTS5 keyword search, exact vector search.

Vectors live in the ``embedding`` column (float32 blobs) and, for search, in a
:class:`VectorIndex` held in memory. Every write bumps ``rev`` on the rows it
touches; before a semantic search the store checks ``PRAGMA data_version`` and,
if another connection committed, pulls rows with ``rev`` above what it has seen, and
the tombstones hard deletes leave (``_sqlite_tombstones.py``); only reindexing bumps
``store_meta.epoch``, which forces a full reload (``_sqlite_vectors.py``; past 20,000
vectors an ANN graph proposes candidates, ``_ann.py``).

>>> store = SQLiteMemoryStore("/tmp/x.db", embedder=HashingEmbedder())  # doctest: +SKIP
>>> mid = store.remember("Deploy went green", {"goal_id": "g1"}, Scope("builder", "alice"))  # doctest: +SKIP
>>> store.search("deploy", Scope("builder", "alice"))[0].id == mid  # doctest: +SKIP
True
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    #: what a semantic search gives: the query vector, the index searched, the scope's rows, (key, cosine) hits
    _Found = tuple[np.ndarray, "VectorIndex", list[int] | None, list[tuple[int, float]]]
else:  # bound on first use (see _lazy): keyword search and listing never import numpy
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

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
from ._sqlite_leases import SQLiteLeases, lease_row
from ._sqlite_vectors import SQLiteVectorSync, ann_build_mode
from ._ann import ann_threshold as _ann_threshold
from . import _matrix_cache
from ._models import (
    Health,
    Hit,
    Memory,
    PruneReport,
    Scope,
    ScopeFilter,
    check_filters,
    check_flag,
    check_id,
    check_limit,
    check_query,
)
from ._scoring import (
    ASKS_TAIL,
    HYBRID_POOL,
    QUESTION_MARKS,
    asks,
    calibration_for,
    fts_query,
    fuse_pool,
    keyword_evidence,
)
from ._base import check_no_secrets  # the scanner loads with the first write
from ._sqlite_keyword import SQLiteKeyword
from . import _sqlite_tombstones as _tombstones
from ._sqlite_schema import SCHEMA_VERSION, _with_retry, connect, ensure_schema, write_txn
from ._sqlite_wal import close as close_connection
from ._sqlite_sql import _COLS, _LIVE, _SCOPE, _filtered_source, _needs_python_check
from ._base import memory_from_row as _memory
from ._store import UNSET, Progress
from ._sqlite_vectors import SEARCH_TRIES as _SEARCH_TRIES
from ._vectors import FOLD_AT as _FOLD_AT
from ._vectors import VectorIndex

__all__ = ["SQLiteMemoryStore"]

def _blob(vec: np.ndarray) -> bytes:
    return np.ascontiguousarray(vec, dtype=np.float32).tobytes()


def _next_rev(c: sqlite3.Connection) -> int:
    return _tombstones.next_rev(c)  # (one counter for rows and tombstones: never handed out twice)


class SQLiteMemoryStore(SQLiteKeyword, SQLiteVectorSync, SQLiteLeases):
    """A :class:`~atomic_agents.memory.MemoryStore` in one SQLite file; safe for many processes.

    ``durable=True`` (default) fsyncs every commit: a returned ``remember`` survives a
    power cut. ``durable=False`` survives a crashed process only (faster bulk loads).
    """

    persistent = True
    backend = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embedder: Embedder,
        durable: bool = True,
        ann_threshold: int | None = None,
        ann_build: str | None = None,
    ) -> None:
        self.path = Path(path)
        #: live vectors from which the ANN tier is used (``None``: never); default
        #: :data:`~atomic_agents.memory._ann.ANN_THRESHOLD` or ``ATOMIC_AGENTS_ANN_THRESHOLD``
        self.ann_threshold = _ann_threshold(ann_threshold)
        #: ``background`` (default; ``ATOMIC_AGENTS_ANN_BUILD``): a missing or stale graph is
        #: built in a thread while searches scan exactly; ``off``: never built in this process
        self.ann_build = ann_build_mode(ann_build)
        self._cancel = threading.Event()
        self.embedder = embedder
        self._lock = threading.RLock()
        self._conn = connect(self.path, durable=durable)
        self.durable = durable
        ensure_schema(self._conn, embedder.model_id, embedder.dimension)
        self._index: VectorIndex | None = None
        self._index_model: str | None = None
        self._synced_rev = 0
        self._data_version = -1
        self._epoch = ""
        self._pulled = 0  # rows pulled since the matrix was loaded
        self._loads = {"snapshot": 0, "rows": 0}  # how this process's full loads of the matrix went
        self._writes = 0  # own commits (PRAGMA data_version only counts other connections')
        self._fts_rows: tuple[tuple[int, int], int] | None = None
        self._idf_memo: tuple[tuple[int, int], str, dict[str, float]] | None = None
        self._df_memo: tuple[tuple[int, int], dict[str, int]] | None = None
        self._scope_hits: tuple[tuple[int, int], dict[tuple[tuple[str, ...], str], int]] | None = None
        self._vocab = False

    # -- plumbing --------------------------------------------------------------------

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            with self._lock:  # one connection: never read inside another thread's open write
                return _with_retry(lambda: self._conn.execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            raise StoreError(f"memory store read failed: {exc}") from exc

    def _meta(self) -> dict[str, str]:
        return dict(self._read("SELECT key, value FROM store_meta"))

    def _stored_model(self) -> tuple[str, int]:
        meta = self._meta()
        return meta["embedder"], int(meta["dimension"])

    def _require_model(self) -> None:
        stored, _ = self._stored_model()
        if stored != self.embedder.model_id:
            raise EmbedderMismatchError(
                f"this store's vectors come from {stored!r}, the current embedder is "
                f"{self.embedder.model_id!r}; run `atomic-agents memory reindex` first",
                stored=stored,
                current=self.embedder.model_id,
            )

    def _vectors_for(self, contents: Sequence[str], progress: Any = None) -> list[tuple[str, np.ndarray]]:
        """(hash, vector) per content; reuses stored vectors of equal content, embeds the rest once."""
        hashes = [content_hash(t) for t in contents]
        known: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            for h, blob in self._read(
                f"SELECT content_hash, embedding FROM memories WHERE content_hash IN ({marks}) "
                "AND embedder = ? AND embedding IS NOT NULL",
                [*part, self.embedder.model_id],
            ):
                known.setdefault(h, np.frombuffer(blob, dtype=np.float32))
        todo = {h: t for h, t in zip(hashes, contents, strict=True) if h not in known}
        if todo:
            vecs = embed_texts(self.embedder, list(todo.values()), progress=progress)
            known.update(zip(todo.keys(), vecs, strict=True))
        return [(h, known[h]) for h in hashes]

    def _insert(self, c: sqlite3.Connection, mem: Memory, h: str, vec: np.ndarray | None, rev: int) -> None:
        c.execute(
            "INSERT INTO memories (id, content, metadata, agent_id, user_id, org_id, workspace_id, created_at,"
            " updated_at, expires_at, deleted_at, content_hash, embedder, embedding, rev)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                mem.id, mem.content, json.dumps(mem.metadata, ensure_ascii=False), mem.agent_id, mem.user_id,
                mem.org_id, mem.workspace_id, mem.created_at, mem.updated_at, mem.expires_at,
                mem.deleted_at or 0, h, self.embedder.model_id if vec is not None else None,
                _blob(vec) if vec is not None else None, rev,
            ),
        )  # fmt: skip

    def _after_write(self) -> None:
        self._writes += 1
        if self._index is not None:
            self._sync(force=True)

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
        """Store one memory; returns its id once it is committed to disk.

        ``memory_id`` (a UUID not yet used) is the caller's choice of id; ``fence``
        makes the write conditional on a live lease, checked inside the transaction.
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

        def tx(c: sqlite3.Connection) -> None:
            if fence is not None:
                check_fence(fence, lease_row(c, fence.key), time.time())
            if memory_id is not None and c.execute("SELECT 1 FROM memories WHERE id = ?", [mems[0].id]).fetchone():
                raise ConflictError(f"a memory with id {mems[0].id} already exists")
            rev = _next_rev(c)
            for mem, (h, vec) in zip(mems, vectors, strict=True):
                self._insert(c, mem, h, vec, rev)

        with self._lock:
            write_txn(self._conn, tx)
            self._after_write()
        return [m.id for m in mems]

    def _current(self, memory_id: str, *, include_expired: bool = False) -> Memory:
        rows = self._read(f"SELECT {_COLS} FROM memories m WHERE m.id = ? AND m.deleted_at = 0", [memory_id])
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
        cur = self._current(mid)
        new = prepare_edit(cur, content, metadata, ttl_ms, unset=UNSET, now=now)
        changed = new.content != cur.content
        h, vec = self._vectors_for([new.content])[0] if changed else (content_hash(cur.content), None)

        def tx(c: sqlite3.Connection) -> None:
            rev = _next_rev(c)
            sets = "metadata = ?, updated_at = ?, expires_at = ?, rev = ?"
            params: list[Any] = [json.dumps(new.metadata, ensure_ascii=False), now, new.expires_at, rev]
            if changed:
                sets += ", content = ?, content_hash = ?, embedder = ?, embedding = ?"
                params += [new.content, h, self.embedder.model_id, _blob(vec)]  # type: ignore[arg-type]
            n = c.execute(f"UPDATE memories SET {sets} WHERE id = ? AND deleted_at = 0", [*params, mid]).rowcount
            if n != 1:
                raise NotFoundError(f"no memory {mid}", record=mid)

        with self._lock:
            write_txn(self._conn, tx)
            self._after_write()
        return new

    def forget(self, memory_id: str) -> Memory:
        """Soft-delete: hidden from every read, kept in the file until a hard prune."""
        mid = check_id(memory_id)
        cur = self._current(mid, include_expired=True)
        now = time.time()

        def tx(c: sqlite3.Connection) -> None:
            rev = _next_rev(c)
            n = c.execute(
                "UPDATE memories SET deleted_at = ?, rev = ? WHERE id = ? AND deleted_at = 0", [now, rev, mid]
            ).rowcount
            if n != 1:
                raise NotFoundError(f"no memory {mid}", record=mid)

        with self._lock:
            write_txn(self._conn, tx)
            self._after_write()
        return Memory(**{**cur.__dict__, "deleted_at": now})

    def _scope_filter_sql(self, scope: ScopeFilter) -> tuple[str, list[Any]]:
        items = scope.items()
        return "".join(f" AND m.{k} = ?" for k, _ in items), [v for _, v in items]

    def forget_expired(self, scope: ScopeFilter | None = None) -> int:
        """Soft-delete every expired memory in ``scope`` (all scopes if ``None``); returns the count."""
        where, params = self._scope_filter_sql(check_scope_filter(scope))
        now = time.time()

        def tx(c: sqlite3.Connection) -> int:
            rev = _next_rev(c)
            return c.execute(
                "UPDATE memories AS m SET deleted_at = ?, rev = ? WHERE m.deleted_at = 0"
                f" AND m.expires_at IS NOT NULL AND m.expires_at <= ?{where}",
                [now, rev, now, *params],
            ).rowcount

        with self._lock:
            n = write_txn(self._conn, tx)
            self._after_write()
        return n

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
        where, params = self._scope_filter_sql(sf)
        if keywords:
            fq = fts_query(keywords)
            if fq is None:
                return PruneReport(0, 0, dry_run, hard)
            sql = (
                "SELECT m.seq, m.id FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid"
                " WHERE memories_fts MATCH ?"
            )
            params = [fq, *params]
        else:
            sql = "SELECT m.seq, m.id FROM memories m WHERE 1"
        sql += where
        if not hard:
            sql += " AND m.deleted_at = 0"
        if expired_only:
            sql += " AND m.expires_at IS NOT NULL AND m.expires_at <= ?"
            params.append(now)
        rows = self._read(sql + " ORDER BY m.seq", params)
        seqs = [r[0] for r in rows]
        sample = tuple(r[1] for r in rows[:10])
        if dry_run or not seqs:
            return PruneReport(len(seqs), 0, dry_run, hard, sample)

        ids = [r[1] for r in rows]

        def tx(c: sqlite3.Connection) -> int:
            rev = _next_rev(c)
            n = 0
            for start in range(0, len(seqs), 500):
                part = seqs[start : start + 500]
                marks = ",".join("?" * len(part))
                if hard:  # erased rows leave a tombstone at this rev: readers drop them by rev, no reload
                    n += _tombstones.record(c, part, ids[start : start + 500], rev)
                else:
                    n += c.execute(
                        f"UPDATE memories SET deleted_at = ?, rev = ? WHERE deleted_at = 0 AND seq IN ({marks})",
                        [now, rev, *part],
                    ).rowcount
            if hard:
                _tombstones.trim(c)
            return n

        with self._lock:
            n = write_txn(self._conn, tx)
            self._after_write()  # (this process's matrix and graph drop the erased rows like any other reader's)
        return PruneReport(len(seqs), n, False, hard, sample)

    # -- reads -------------------------------------------------------------------------

    def _candidates(self, scope: Scope, filters: Mapping[str, Any]) -> list[int]:
        """Row ids in ``scope`` whose metadata equals ``filters`` (index lookups, then a strict check)."""
        frm, where, fparams = _filtered_source(filters)
        cols = "m.seq, m.metadata" if _needs_python_check(filters) else "m.seq"
        rows = self._read(
            f"SELECT {cols} FROM {frm} WHERE {_SCOPE} AND {_LIVE}{where}",
            [*scope.key(), time.time(), *fparams],
        )
        if _needs_python_check(filters):
            return [r[0] for r in rows if metadata_matches(json.loads(r[1]), filters)]
        return [r[0] for r in rows]

    def search(
        self, query: str, scope: Scope, limit: int = 10, filters: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Keyword search: a memory matches if any query word does (FTS5, porter stemming), bm25-ranked.

        Scores are :func:`~atomic_agents.memory._scoring.keyword_score` of the match's evidence and of how much of
        the query it holds (:func:`~._base.keyword_hits`); a hit's score does not depend on the other hits.
        """
        q, sc, lim, flt = check_query(query), check_scope(scope), check_limit(limit), check_filters(filters)
        cal = calibration_for(self.embedder)
        found = [(e, mem) for _, e, mem in self._keyword(q, sc, lim, flt)]
        return keyword_hits(q, self._idf(q) if found else {}, found, cal)

    def _semantic(self, q: str, sc: Scope, filters: Mapping[str, Any], limit: int) -> _Found:
        found = self._semantic_under_lock(q, sc, filters, limit)
        self._read_mapped_files()  # (after a search that worked: one that failed may be all this process does)
        return found

    def _semantic_under_lock(self, q: str, sc: Scope, filters: Mapping[str, Any], limit: int) -> _Found:
        with self._lock:
            index = self._sync()
            # the stored model can only change with a commit, which _sync has just looked at
            if self._index_model != self.embedder.model_id:
                self._require_model()
            # embedded without the words nearly every memory holds (_scoring.semantic_query)
            qv = np.asarray(self.embedder.embed_batch([self._semantic_text(q, sc, index.scope_rows(sc.key()))])[0], dtype=np.float32)
            if not filters:
                return qv, index, None, index.search(qv, sc.key(), limit, now=time.time())
            found = self._filtered_top(qv, index, sc, filters, limit)
            if found is not None:
                return qv, index, None, found
            only = self._candidates(sc, filters)
            return qv, index, only, index.search(qv, sc.key(), limit, now=time.time(), only=only)

    def _filtered_top(
        self, qv: np.ndarray, index: VectorIndex, sc: Scope, filters: Mapping[str, Any], limit: int
    ) -> list[tuple[int, float]] | None:
        """The filtered top ``limit`` from an over-fetched unfiltered top, or ``None`` if it cannot tell.

        When at least ``limit`` of the nearest ``2 * limit + 32`` rows pass ``filters`` (or
        those are every row in scope), no row outside them can rank higher, so the answer
        is exact without listing every row the filter admits (a broad filter such as a
        vault's ``source: vault`` admits the whole scope).
        """
        fetch = 2 * limit + 32
        found = index.search(qv, sc.key(), fetch, now=time.time())
        meta: dict[int, Any] = {}
        for start in range(0, len(found), 500):
            part = [k for k, _ in found[start : start + 500]]
            marks = ",".join("?" * len(part))
            meta.update(self._read(f"SELECT m.seq, m.metadata FROM memories m WHERE m.seq IN ({marks}) AND {_LIVE}", [*part, time.time()]))
        kept = [(k, s) for k, s in found if k in meta and metadata_matches(json.loads(meta[k]), filters)]
        if len(kept) >= limit or len(found) < fetch:
            return kept[:limit]
        return None

    def search_semantic(
        self, query: str, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 5
    ) -> list[Hit]:
        """Nearest memories by cosine, restricted by metadata equality ``filters``.

        Scores are :func:`~atomic_agents.memory._scoring.semantic_score` of the cosine and of how much of the
        query the hit holds (:func:`~._base.semantic_hits`).
        """
        q, sc, lim, flt = check_query(query), check_scope(scope), check_limit(limit), check_filters(filters)
        for _ in range(_SEARCH_TRIES):  # again if another process's commit moved a row meanwhile (_fetch_as_ranked)
            qv, _, _, found = self._semantic(q, sc, flt, lim)
            mems, as_ranked = self._fetch_as_ranked([k for k, _ in found], dict(found), qv, sc, flt)
            if as_ranked:
                break
        cal = calibration_for(self.embedder)
        return semantic_hits(q, lambda: self._idf(q), [(s, mems[k]) for k, s in found if k in mems], cal)

    def recall(
        self, query: str, scope: Scope, limit: int = 5, filters: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Semantic recall (eden's ``recall``): ``search_semantic``."""
        return self.search_semantic(query, scope, filters, limit)

    def search_hybrid(
        self, query: str, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 5,
        *, rerank: bool = False,
    ) -> list[Hit]:
        """Both rankers' top candidates, each scored on both signals, fused by the shared calibration.

        See :func:`~atomic_agents.memory._scoring.fuse_pool`: a pool of the nearest
        memories and of the best keyword matches (``max(4 * limit, POOL)`` each), every
        candidate given its cosine and its keyword evidence, ranked by ``hybrid_rank``, scored by ``hybrid_score``.
        """
        q, sc, lim, flt = check_query(query), check_scope(scope), check_limit(limit), check_filters(filters)
        rerank = check_flag(rerank, name="rerank")
        for _ in range(_SEARCH_TRIES):  # again if another process's commit moved a row meanwhile (_fetch_as_ranked)
            hits, as_ranked = self._hybrid(q, sc, flt, lim, rerank)
            if as_ranked:
                break
        return hits

    def _hybrid(self, q: str, sc: Scope, flt: Mapping[str, Any], lim: int, rerank: bool) -> tuple[list[Hit], bool]:
        pool = max(lim * 4, HYBRID_POOL)
        qv, index, only, found = self._semantic(q, sc, flt, pool)
        cos = dict(found)
        found_kw = self._matches(q)  # one FTS5 pass ranks and gives every candidate's evidence and coverage
        matches = found_kw.bm25
        kw = self._keyword_scores(q, sc, pool, flt, matches)
        cos.update(index.scores_for(qv, [k for k in kw if k not in cos]))
        if matches:
            kw.update((k, keyword_evidence(-matches[k], found_kw.mass)) for k in cos if k not in kw and k in matches)
        # each candidate's successor in its scope's timeline joins the pool (the reply to a matching turn)
        follows = self._successors(cos.keys() | kw.keys(), sc, flt)
        new = [k for k in follows if k not in cos and k not in kw]
        cos.update(index.scores_for(qv, new))
        kw.update((k, keyword_evidence(-matches[k], found_kw.mass)) for k in new if k in matches)
        cal = calibration_for(self.embedder)
        lacking = found_kw.lacking(cos.keys() | kw.keys())  # lacks a name the question asks about
        cov_kw = found_kw.coverage(kw)
        scov = found_kw.score_coverage(kw, cov_kw)  # a query asking two things: the best-held question's share too
        fused = [(s, k) for s, k in fuse_pool(cos, kw, cal, cov_kw, lacking, follows, scov) if s > 0.0]
        if not rerank:
            top = fused[:lim]
            mems, as_ranked = self._fetch_as_ranked([k for _, k in top], cos, qv, sc, flt)
        else:  # the opt-in stage re-reads the top candidates (memory/_rerank.py)
            from ._rerank import RERANK_DEPTH, rerank as _rerank

            head = fused[: max(lim, RERANK_DEPTH)]
            mems, as_ranked = self._fetch_as_ranked([k for _, k in head], cos, qv, sc, flt)
            texts = {k: m.content for k, m in mems.items()}
            top = [(s, k) for s, k in _rerank(q, [h for h in head if h[1] in mems], cos, kw, texts, self.embedder) if s > 0.0][:lim]
        return [Hit(mems[k], s) for s, k in top if k in mems], as_ranked

    def _successors(self, keys: Iterable[int], sc: Scope, filters: Mapping[str, Any]) -> dict[int, int]:
        """``reply -> key``: for each key that asks something (:func:`~._scoring.asks`), the live memory
        written right after it in its scope, if it passes ``filters``.

        The scope's timeline is ``list_memories``' order, ``(created_at, seq)``; two index seeks per
        key (the same instant, then later ones), so a bulk write of one instant costs no scan.
        """
        ks = sorted(keys)
        if not ks:
            return {}
        now = time.time()
        nxt = (
            "SELECT m.seq FROM memories m WHERE {scope} AND {live} AND m.created_at {op} k.created_at{more}"
            " ORDER BY m.created_at, m.seq LIMIT 1"
        )
        same = nxt.format(scope=_SCOPE, live=_LIVE, op="=", more=" AND m.seq > k.seq")
        later = nxt.format(scope=_SCOPE, live=_LIVE, op=">", more="")
        tail_has = " OR ".join(f"instr(substr(k.content, -{ASKS_TAIL}), ?) > 0" for _ in QUESTION_MARKS)
        out: dict[int, int] = {}
        for start in range(0, len(ks), 500):
            part = ks[start : start + 500]
            rows = self._read(
                f"SELECT k.seq, substr(k.content, -{ASKS_TAIL}), coalesce(({same}), ({later})) FROM memories k"
                f" WHERE k.seq IN ({','.join('?' * len(part))}) AND ({tail_has})",  # asks() then decides
                [*sc.key(), now, *sc.key(), now, *part, *QUESTION_MARKS],
            )
            out.update((n, k) for k, tail, n in rows if n is not None and asks(tail))
        if filters and out:
            marks = ",".join("?" * len(out))
            meta = dict(self._read(f"SELECT m.seq, m.metadata FROM memories m WHERE m.seq IN ({marks})", list(out)))
            out = {n: k for n, k in out.items() if n in meta and metadata_matches(json.loads(meta[n]), filters)}
        return out

    def list_memories(
        self, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 1000
    ) -> list[Memory]:
        """Live memories in ``scope`` matching ``filters``, oldest first (e.g. all records of one goal)."""
        sc, flt, lim = check_scope(scope), check_filters(filters), check_limit(limit)
        frm, where, fparams = _filtered_source(flt)
        rows = self._read(
            f"SELECT {_COLS} FROM {frm} WHERE {_SCOPE} AND {_LIVE}{where} ORDER BY m.created_at, m.seq LIMIT ?",
            [*sc.key(), time.time(), *fparams, lim if not _needs_python_check(flt) else -1],
        )
        mems = [_memory(r) for r in rows]
        if _needs_python_check(flt):
            mems = [m for m in mems if metadata_matches(m.metadata, flt)][:lim]
        return mems

    def scan(self, scope: ScopeFilter, filters: Mapping[str, Any] | None = None) -> list[Memory]:
        """Live memories in a *partial* scope matching ``filters``, oldest first, no limit.

        For readers that span agents on purpose (ATP reads a goal's records across
        the whole org/workspace, whichever agent wrote them). Pass the scope fields
        you mean; an empty ``ScopeFilter()`` reads the whole store.
        """
        sf, flt = check_scope_filter(scope), check_filters(filters)
        frm, where, fparams = _filtered_source(flt)
        swhere, sparams = self._scope_filter_sql(sf)
        rows = self._read(
            f"SELECT {_COLS} FROM {frm} WHERE {_LIVE}{where}{swhere} ORDER BY m.created_at, m.seq",
            [time.time(), *fparams, *sparams],
        )
        mems = [_memory(r) for r in rows]
        if _needs_python_check(flt):
            mems = [m for m in mems if metadata_matches(m.metadata, flt)]
        return mems

    # -- housekeeping ----------------------------------------------------------------

    def health(self) -> Health:
        """Counts, file size, schema version and whether vectors match the current embedder."""
        now = time.time()
        total, live, deleted, expired, stale = self._read(
            "SELECT count(*), coalesce(sum(deleted_at = 0 AND (expires_at IS NULL OR expires_at > ?)), 0),"
            " coalesce(sum(deleted_at != 0), 0),"
            " coalesce(sum(deleted_at = 0 AND expires_at IS NOT NULL AND expires_at <= ?), 0),"
            " coalesce(sum(deleted_at = 0 AND (embedder IS NOT ? OR embedding IS NULL)), 0) FROM memories",
            [now, now, self.embedder.model_id],
        )[0]
        meta = self._meta()
        size = sum(
            p.stat().st_size for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")) if p.exists()
        )
        return Health(
            status="ok",
            total=total,
            live=live,
            deleted=deleted,
            expired=expired,
            backend=self.backend,
            path=str(self.path),
            size_bytes=size,
            schema_version=int(meta.get("schema_version", SCHEMA_VERSION)),
            embedder=self.embedder.model_id,
            dimension=self.embedder.dimension,
            stored_embedder=meta.get("embedder"),
            needs_reindex=meta.get("embedder") != self.embedder.model_id or stale > 0,
            extra={"relevance_floor": getattr(self.embedder, "relevance_floor", None), "stale_vectors": stale,
                   "ann": self.ann_state_at(total - deleted - stale), "ann_build_error": self._build_error},
        )

    def vacuum(self) -> dict[str, Any]:
        """Merge FTS segments, rebuild the file, truncate the WAL; returns sizes before/after."""
        before = self.health().size_bytes
        with self._lock:
            write_txn(self._conn, lambda c: c.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')"))
            try:
                _with_retry(lambda: self._conn.execute("VACUUM"))
                _with_retry(lambda: self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
            except sqlite3.Error as exc:
                raise StoreError(f"vacuum failed: {exc}") from exc
        return {"status": "ok", "size_before": before, "size_after": self.health().size_bytes}

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Re-embed every live memory not embedded by the current model; resumable batch by batch."""
        model = self.embedder.model_id
        pending_sql = "FROM memories WHERE deleted_at = 0 AND (embedder IS NOT ? OR embedding IS NULL)"
        total = int(self._read(f"SELECT count(*) {pending_sql}", [model])[0][0])
        done = 0
        while True:
            rows = self._read(f"SELECT seq, content {pending_sql} ORDER BY seq LIMIT 256", [model])
            if not rows:
                break
            vecs = self._vectors_for([r[1] for r in rows])

            def tx(c: sqlite3.Connection, rows: list[Any] = rows, vecs: list[Any] = vecs) -> None:
                rev = _next_rev(c)
                c.executemany(
                    "UPDATE memories SET embedder = ?, embedding = ?, content_hash = ?, rev = ? WHERE seq = ?",
                    [(model, _blob(v), h, rev, r[0]) for r, (h, v) in zip(rows, vecs, strict=True)],
                )

            with self._lock:
                write_txn(self._conn, tx)
            done += len(rows)
            if progress is not None:
                progress(len(rows), total)

        def switch(c: sqlite3.Connection) -> None:
            c.execute("UPDATE store_meta SET value = ? WHERE key = 'embedder'", [model])
            c.execute("UPDATE store_meta SET value = ? WHERE key = 'dimension'", [str(self.embedder.dimension)])
            c.execute("UPDATE store_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'epoch'")
            _tombstones.clear(c)  # every matrix and snapshot of the old epoch is reloaded anyway

        with self._lock:
            write_txn(self._conn, switch)
            self._index = None
        return done

    def dump(self, scope: ScopeFilter | None = None) -> Iterator[Memory]:
        """Every row in ``scope``, forgotten and expired ones included (a backup is complete)."""
        where, params = self._scope_filter_sql(check_scope_filter(scope))
        last = 0
        while True:
            rows = self._read(f"SELECT {_COLS} FROM memories m WHERE m.seq > ?{where} ORDER BY m.seq LIMIT 1000", [last, *params])
            if not rows:
                return
            for row in rows:
                yield _memory(row)
            last = rows[-1][0]

    def stored_vectors(self, ids: Sequence[str], *, hashes: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
        """The current embedder's vectors of these memories, where one matches the content (for an export)."""
        out: dict[str, np.ndarray] = {}
        ids = list(ids)
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            for mid, h, content, blob in self._read(
                f"SELECT id, content_hash, content, embedding FROM memories WHERE id IN ({','.join('?' * len(part))})"
                " AND embedder = ? AND embedding IS NOT NULL",
                [*part, self.embedder.model_id],
            ):
                if h == content_hash(content) and (hashes is None or hashes.get(mid) == h):
                    out[mid] = np.frombuffer(blob, dtype=np.float32)
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
        every live one embedded (or given an equal-content vector, or the caller's
        ``vectors[id]`` from this store's model) first, then all rows go in one transaction.
        """
        mems = list(memories)
        for m in mems:
            check_no_secrets(m.content, m.metadata, record=m.id, scope=m)
        have: set[str] = set()
        ids = list(dict.fromkeys(m.id for m in mems))
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            have.update(r[0] for r in self._read(f"SELECT id FROM memories WHERE id IN ({','.join('?' * len(part))})", part))
        fresh = list({m.id: m for m in mems if m.id not in have}.values())
        live = [m for m in fresh if m.deleted_at is None]
        given = given_vectors(vectors, live, self.embedder.dimension)
        todo = [m for m in live if m.id not in given]
        total = len(mems)
        embedded = self._vectors_for(
            [m.content for m in todo], progress=(lambda n: progress(n, total)) if progress else None
        )
        vecs = dict(zip((m.id for m in todo), embedded, strict=True))
        vecs.update((m.id, (content_hash(m.content), given[m.id])) for m in live if m.id in given)

        def tx(c: sqlite3.Connection) -> int:
            rev = _next_rev(c)
            n = 0
            for m in fresh:  # another process may have loaded some of them meanwhile
                if c.execute("SELECT 1 FROM memories WHERE id = ?", [m.id]).fetchone() is None:
                    h, v = vecs.get(m.id, (content_hash(m.content), None))
                    self._insert(c, m, h, v, rev)
                    n += 1
            return n

        with self._lock:
            imported = write_txn(self._conn, tx) if fresh else 0
            self._after_write()
        if progress is not None:
            progress(total - len(todo), total)
        return imported, total - imported

    def close(self) -> None:
        self._stop_build()  # before the lock: a finishing job takes it
        with self._lock:
            ix = self._index
            # Refresh the sidecar when this process pulled many rows past it, so the next
            # process starts close to current instead of pulling them all again (not when
            # that means folding many rows into the graph at exit: a graph job's work).
            big_fold = ix is not None and ix.ann is not None and ix.uncovered > _FOLD_AT
            behind = self._pulled > max(1_000, len(ix or ()) // 10)
            if ix is not None and not big_fold and behind and len(ix) >= _matrix_cache.MIN_ROWS:
                # (rows since the snapshot are folded into the graph first, so the pair stays exact)
                self._save_snapshot(ix)
            close_connection(self._conn, self.path)  # the WAL stays unless it grew large: _sqlite_wal

    def __enter__(self) -> SQLiteMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
