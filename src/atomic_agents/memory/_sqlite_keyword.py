"""Keyword search of the SQLite store: FTS5 ranks first, the scope and filters are checked on its top.

A mixin of :class:`~atomic_agents.memory.SQLiteMemoryStore` (it uses the store's
connection, lock and read helpers). Evidence is bm25 over the query's IDF mass
(:func:`~atomic_agents.memory._scoring.keyword_evidence`), the IDF read from the
FTS index's own counts through an ``fts5vocab`` table.
"""

from __future__ import annotations

import heapq
import json
import math
import threading
import time
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import StoreError
from ._base import metadata_matches
from ._models import Memory, Scope
from ._scoring import (
    SCOPE_DF_MAX_HITS,
    SCOPE_DF_MAX_ROWS,
    UBIQUITOUS_MIN_ROWS,
    fts_query,
    idf,
    keyword_coverage,
    keyword_evidence,
    key_groups,
    key_idfs,
    key_stems,
    keyword_terms,
    match_terms,
    quoted,
    name_words,
    query_parts,
    semantic_query,
    stems,
    tokens,
    ubiquitous_at,
)
from ._sqlite_sql import _BY_ROWID_SCOPE, _COLS, _LIVE, _SCOPE, _needs_python_check, _tag_clause
from ._base import memory_from_row as _memory

__all__ = ["Matches", "SQLiteKeyword"]

# Keyword search over-fetches the FTS5 top this many times, growing it by this factor each time,
# before it falls back to the exact join over every match.
_RANK_FIRST_ROUNDS, _RANK_FIRST_GROWTH = 3, 8


@dataclass(frozen=True)
class Matches:
    """The rows matching any query word (from :meth:`SQLiteKeyword._matches`)."""

    #: ``rowid -> bm25`` (FTS5's sign: lower is better) of the query's ``OR`` over its words
    bm25: dict[int, float]
    #: ``(idf, rows holding the word)`` per distinct stem of the query
    words: Sequence[tuple[float, Container[int]]]
    #: the query's IDF mass (sum over its distinct content stems)
    mass: float
    #: the rows holding each name the query asks about (:func:`~atomic_agents.memory._scoring.query_names`)
    names: Sequence[Container[int]] = ()
    #: the stem of each entry of ``words``
    stems: Sequence[str] = ()
    #: the stems of each question the query asks, when it asks two or more (:func:`~._scoring.query_parts`)
    parts: Sequence[frozenset[str]] = ()

    def coverage(self, keys: Iterable[int]) -> dict[int, float]:
        """``rowid -> keyword coverage`` of the given rows that match a query word."""
        return {
            k: keyword_coverage(sum(w for w, rows in self.words if k in rows), self.mass) for k in keys if k in self.bm25
        }

    def score_coverage(self, keys: Iterable[int], coverage: Mapping[int, float] | None = None) -> dict[int, float]:
        """``rowid -> coverage`` the hybrid score reads: the larger of the whole query's and the best
        question's (:func:`~atomic_agents.memory._scoring.part_coverage`), for the given matching rows
        (``coverage``: their :meth:`coverage`, if the caller has it)."""
        cov = dict(self.coverage(keys) if coverage is None else coverage)
        if not self.parts:
            return cov
        by_stem = dict(zip(self.stems, self.words, strict=True))
        parts = [([by_stem[t] for t in part if t in by_stem], sum(by_stem[t][0] for t in part if t in by_stem)) for part in self.parts]
        return {  # part_coverage, with each part's words looked up once
            k: max(v, *(keyword_coverage(sum(w for w, rows in ws if k in rows), mass) for ws, mass in parts)) for k, v in cov.items()
        }

    def lacking(self, keys: Iterable[int]) -> set[int]:
        """The given rows that lack a name the query asks about."""
        return {k for k in keys if any(k not in rows for rows in self.names)} if self.names else set()


def _best(matches: Mapping[int, float], n: int) -> list[tuple[int, float]]:
    """The ``n`` best ``(rowid, bm25)`` of ``matches`` (lowest bm25 first, then rowid): FTS5's own order.

    A partial sort: the top of 7,000 matches costs a fifth of sorting them all.
    """
    return [(k, v) for v, k in heapq.nsmallest(n, zip(matches.values(), matches.keys()))]


#: stems whose row counts a store keeps between writes (a few hundred KB at most)
_DF_MEMO_MAX = 10_000


class SQLiteKeyword:
    """``_keyword`` (rank-first FTS5), ``_matches`` (one pass for hybrid) and ``_idf``."""

    _lock: threading.RLock
    _writes: int
    _fts_rows: tuple[tuple[int, int], int] | None
    _idf_memo: tuple[tuple[int, int], str, dict[str, float]] | None
    #: each stem's row count in the FTS index, until the next write (ours or another process's)
    _df_memo: tuple[tuple[int, int], dict[str, int]] | None
    _scope_hits: tuple[tuple[int, int], dict[tuple[tuple[str, ...], str], int]] | None
    _vocab: bool

    if TYPE_CHECKING:  # provided by the store

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def _idf(self, query: str) -> dict[str, float]:
        """``key stem -> idf`` for the query's content words (:func:`~._words.key_groups`: a word's
        smallest over its forms), from the FTS index's own counts."""
        with self._lock:
            key = (int(self._read("PRAGMA data_version")[0][0]), self._writes)
            if self._idf_memo is not None and self._idf_memo[:2] == (key, query):
                return self._idf_memo[2]  # hybrid asks twice per query
            if self._fts_rows is None or self._fts_rows[0] != key:
                self._fts_rows = (key, int(self._read("SELECT count(*) FROM memories")[0][0]))
            n_rows = self._fts_rows[1]
            if not self._vocab:
                self._read("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_fts_vocab USING fts5vocab(main, memories_fts, row)")
                self._vocab = True
            if self._df_memo is None or self._df_memo[0] != key or len(self._df_memo[1]) > _DF_MEMO_MAX:
                self._df_memo = (key, {})
            counts = self._df_memo[1]
        groups = key_groups(query)
        own: dict[str, float] = {}
        for stem in dict.fromkeys(st for ss in groups.values() for st in ss):
            n = counts.get(stem)
            if n is None:  # FTS5 counts a word's rows by reading its doclist: once per word until a write
                row = self._read("SELECT doc FROM temp.memories_fts_vocab WHERE term = ?", [stem])
                n = counts[stem] = int(row[0][0]) if row else 0
            own[stem] = idf(n_rows, n)
        out = key_idfs(groups, own)
        with self._lock:
            self._idf_memo = (key, query, out)
        return out

    def _semantic_text(self, query: str, scope: Scope | None = None, scope_rows: int = 0) -> str:
        """The text the query is embedded as (:func:`~._scoring.semantic_query`, over the FTS index's
        counts and, for a scope of ``scope_rows`` (the vector index's count) up to ``SCOPE_DF_MAX_ROWS``
        memories, the scope's own)."""
        if not keyword_terms(query):
            return query
        idfs = self._idf(query)
        rows = self._fts_rows
        n_rows = rows[1] if rows is not None else 0
        scoped = self._scope_idfs(query, scope, idfs, n_rows, scope_rows) if scope is not None else None
        return semantic_query(query, idfs, n_rows, scoped)

    def _scope_idfs(
        self, query: str, scope: Scope, idfs: Mapping[str, float], n_rows: int, n_scope: int
    ) -> tuple[dict[str, float], int] | None:
        """``(stem -> idf, n_scope)`` over the scope's memories not forgotten (expired ones count, as in
        FTS5's own counts), for the words that could be in nearly half of them: single-token words held
        store-wide by enough rows, and by at most ``SCOPE_DF_MAX_HITS`` (each is one pass over its
        doclist; kept until the next write)."""
        if n_scope < UBIQUITOUS_MIN_ROWS or n_scope > SCOPE_DF_MAX_ROWS or n_scope >= n_rows:
            return None  # too small to say, too big to count, or the whole store (its counts are the scope's)
        need = ubiquitous_at(n_scope)
        key = (int(self._read("PRAGMA data_version")[0][0]), self._writes)
        with self._lock:
            if self._scope_hits is None or self._scope_hits[0] != key:
                self._scope_hits = (key, {})
            memo = self._scope_hits[1]
        out: dict[str, float] = {}
        for word, stem in key_stems(keyword_terms(query)).items():
            if stem in out or len(tokens([word])[0]) != 1:
                continue
            held = n_rows / (1.0 + math.exp(idfs.get(stem, 0.0)))  # store-wide rows, near enough for the bounds
            if held < need or held > SCOPE_DF_MAX_HITS:
                continue
            hits = memo.get((scope.key(), stem))
            if hits is None:
                hits = memo[(scope.key(), stem)] = int(self._read(  # the doclist first, then each row's scope
                    "WITH f AS MATERIALIZED (SELECT rowid AS r FROM memories_fts WHERE memories_fts MATCH ?)"
                    f" SELECT count(*) FROM f JOIN memories m ON m.seq = f.r WHERE {_SCOPE} AND m.deleted_at = 0",
                    [quoted(word), *scope.key()],
                )[0][0])  # fmt: skip
            out[stem] = idf(n_scope, hits)
        return (out, n_scope) if out else None

    def _matches(self, query: str) -> Matches:
        """Every row matching a query word: its bm25, and what :meth:`Matches.coverage` needs.

        One FTS5 pass, one MATCH per word: each word's doclist is read once, as the ``OR``
        query reads it, and FTS5's bm25 is a sum over the query's phrases, so the per-word
        bm25s, added in word order, are the ``OR`` query's (the same floats).
        """
        terms = match_terms(query)
        if not terms:
            return Matches({}, [], 0.0)
        by_stem = key_stems(terms)
        idfs = self._idf(query)
        named = {by_stem[w] for w in name_words(query) if w in by_stem}
        seen: list[str] = []
        words: list[tuple[float, dict[int, float]]] = []
        names: list[dict[int, float]] = []
        bm: dict[int, float] = {}
        for t in terms:
            rows = dict(self._read("SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?", [quoted(t)]))
            if not bm:
                bm = dict(rows)
            else:
                for k, b in rows.items():
                    bm[k] = bm.get(k, 0.0) + b
            st = by_stem.get(t)
            if st is None:
                continue
            if st not in seen:  # a word's IDF counts once, on its first form
                seen.append(st)
                words.append((idfs.get(st, 0.0), rows))
                if st in named:
                    names.append(rows)
            else:  # another form of the word: its rows hold it too
                words[seen.index(st)][1].update(rows)
        return Matches(bm, words, sum(idfs.values()), names, seen, query_parts(query, by_stem))

    def _keyword_rows(
        self, fq: str, scope: Scope, limit: int, filters: Mapping[str, Any], matches: Mapping[int, float] | None = None,
        cols: str = _COLS,
    ) -> list[Any]:
        """Rows ``(cols..., bm25)`` of the ``limit`` best matches in ``scope``, best first.

        Ranks inside FTS5 first (no join, no scope check), then checks scope, liveness
        and filters on an over-fetched top only; while those remove too many, the
        over-fetch grows, and past a few rounds the exact join over all matches runs.
        It never returns fewer rows than exist. With ``matches`` (from :meth:`_matches`)
        the ranking is read from them instead of asking FTS5 again. ``cols`` must start
        with ``m.seq, m.id, m.content, m.metadata`` (placeholders allowed where unused).
        """
        extra, params = _tag_clause(filters)
        post = _needs_python_check(filters)
        fetch = limit * 4 + 32
        for _ in range(_RANK_FIRST_ROUNDS):
            ranked = _best(matches, fetch) if matches is not None else self._read(
                "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?"
                " ORDER BY bm25(memories_fts), rowid LIMIT ?",
                [fq, fetch],
            )
            order = {seq: i for i, (seq, _) in enumerate(ranked)}
            score = dict(ranked)
            kept: list[Any] = []
            for start in range(0, len(ranked), 500):
                part = [seq for seq, _ in ranked[start : start + 500]]
                marks = ",".join("?" * len(part))
                kept += self._read(  # unary + keeps the planner on the rowid lookups, off the scope index
                    f"SELECT {cols} FROM memories m WHERE m.seq IN ({marks}) AND {_BY_ROWID_SCOPE}{extra}",
                    [*part, *scope.key(), time.time(), *params],
                )
            if post:
                kept = [r for r in kept if metadata_matches(json.loads(r[3]), filters)]
            kept.sort(key=lambda r: order[r[0]])
            if len(kept) >= limit or len(ranked) < fetch:  # enough, or every match was looked at
                return [(*r, score[r[0]]) for r in kept[:limit]]
            fetch *= _RANK_FIRST_GROWTH
        rows = self._read(  # the scope holds few of the matches: the exact join over all of them
            f"SELECT {cols}, bm25(memories_fts) FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid"
            f" WHERE memories_fts MATCH ? AND {_SCOPE} AND {_LIVE}{extra}"
            " ORDER BY bm25(memories_fts), m.seq" + ("" if post else " LIMIT ?"),
            [fq, *scope.key(), time.time(), *params, *([] if post else [limit])],
        )
        if post:
            rows = [r for r in rows if metadata_matches(json.loads(r[3]), filters)][:limit]
        return rows

    def _keyword_hits(
        self, query: str, scope: Scope, limit: int, filters: Mapping[str, Any] | None,
        matches: Mapping[int, float] | None, cols: str,
    ) -> tuple[list[Any], float]:
        """The best keyword rows (``cols`` + bm25) and the query's IDF mass."""
        fq = fts_query(query, forms=True)
        if fq is None:
            return [], 0.0
        try:
            rows = self._keyword_rows(fq, scope, limit, filters or {}, matches, cols)
        except StoreError as exc:  # FTS5 syntax errors cannot happen with quoted terms; say so if they do
            raise StoreError(f"keyword search failed for {query!r}") from exc
        return rows, (sum(self._idf(query).values()) if rows else 0.0)

    def _keyword(
        self, query: str, scope: Scope, limit: int, filters: Mapping[str, Any] | None = None,
        matches: Mapping[int, float] | None = None,
    ) -> list[tuple[int, float, Memory]]:
        """``(seq, keyword evidence, memory)`` of the best keyword matches, best first."""
        rows, mass = self._keyword_hits(query, scope, limit, filters, matches, _COLS)
        return [(r[0], keyword_evidence(-r[-1], mass), _memory(r)) for r in rows]

    def _keyword_scores(
        self, query: str, scope: Scope, limit: int, filters: Mapping[str, Any] | None, matches: Mapping[int, float],
    ) -> dict[int, float]:
        """``seq -> keyword evidence`` of the best keyword matches (hybrid's candidates: no row is read in full)."""
        post = _needs_python_check(filters or {})
        rows, mass = self._keyword_hits(query, scope, limit, filters, matches,
                                        "m.seq, NULL, NULL, " + ("m.metadata" if post else "NULL"))
        return {r[0]: keyword_evidence(-r[-1], mass) for r in rows}
