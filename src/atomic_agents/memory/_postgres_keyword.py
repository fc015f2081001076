"""Keyword statistics and keyword candidates of the PostgreSQL store (a mixin of :class:`PostgresMemoryStore`).

The shared BM25 of :mod:`._scoring` (SQLite's tokens and constants) over the corpus statistics
:mod:`._postgres_stats` keeps exactly as FTS5 keeps them: N, each stem's row count and the
average length, read in one indexed statement. ``ts_rank`` over the stored ``tsvector``
pre-selects the candidates; BM25 ranks them in FTS5's order.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._base import memory_from_row as _memory
from ._base import metadata_matches
from ._models import Memory, Scope
from ._postgres_schema import TS_CONFIG
from ._postgres_sql import _COLS, _LIVE, _SCOPE, _filter_sql, _needs_python_check, _tsquery
from ._postgres_stats import KeywordStats, backfill, read_stats, stem_key
from ._scoring import bm25, idf, keyword_coverage, keyword_evidence, query_stems, semantic_query, tokens

__all__ = ["PostgresKeyword"]

T = TypeVar("T")
#: Per thread, while a search runs (:meth:`PostgresKeyword._one_read`): the statistics it has read.
_held = threading.local()


class PostgresKeyword:
    """``_idf``, ``_semantic_text``, ``_keyword_signals`` and ``_keyword`` (rank-first candidates)."""

    if TYPE_CHECKING:  # provided by the store

        def _run(self, fn: Callable[[Any], T], *, write: bool) -> T: ...

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    @contextlib.contextmanager
    def _one_read(self) -> Iterator[None]:
        """Within one search the corpus statistics of a set of stems are read once, not at every step.

        (The semantic query text, the keyword candidates and the pool's signals all ask; one read
        also gives every step the same counts while other hosts write.)
        """
        outer = getattr(_held, "stats", None)
        if outer is None:
            _held.stats = {}
        try:
            yield
        finally:
            if outer is None:
                _held.stats = None

    def _stats(self, keys: Sequence[str]) -> KeywordStats:
        """The corpus statistics of these stem keys, every row counted first (see :mod:`._postgres_stats`)."""
        memo: dict[Any, KeywordStats] | None = getattr(_held, "stats", None)
        key = (id(self), tuple(keys))
        if memo is not None and key in memo:
            return memo[key]
        stats = self._run(lambda cur: read_stats(cur, keys), write=False)
        if stats.pending:  # rows an older package wrote, or a backfill still running elsewhere
            backfill(self._run)
            stats = self._run(lambda cur: read_stats(cur, keys), write=False)
        if memo is not None:
            memo[key] = stats
        return stats

    def _query_idf(self, query: str) -> tuple[dict[str, float], KeywordStats | None]:
        """``stem -> idf`` for the query's content words, and the statistics they came from."""
        distinct = list(dict.fromkeys(query_stems(query)))
        if not distinct:
            return {}, None
        st = self._stats([stem_key(t) for t in distinct])
        return {t: idf(st.rows, st.hits.get(stem_key(t), 0)) for t in distinct}, st

    def _idf(self, query: str) -> dict[str, float]:
        """``stem -> idf`` for the query's content words: N and each stem's rows from the kept counters."""
        return self._query_idf(query)[0]

    def _idf_and_avg(self, query: str) -> tuple[dict[str, float], float]:
        idfs, st = self._query_idf(query)
        return idfs, st.avg_length if st is not None else 0.0

    def _semantic_text(self, query: str) -> str:
        """The text the query is embedded as (:func:`~._scoring.semantic_query`: BM25's own counts, one read)."""
        idfs, st = self._query_idf(query)
        return semantic_query(query, idfs, st.rows) if st is not None else query

    def _bm25(self, query: str, mems: Mapping[int, Memory]) -> tuple[dict[int, float], dict[int, float], float]:
        """``(bm25, matched IDF, IDF mass)`` of each given memory holding a query stem.

        BM25 as FTS5 computes it for the query's ``OR`` of words: a sum over the words, so
        two words with one stem count it twice; the IDF mass counts each stem once.
        """
        if not mems:
            return {}, {}, 0.0
        idfs, avg = self._idf_and_avg(query)
        if not idfs:
            return {}, {}, 0.0
        weights = Counter(query_stems(query))
        per_word = {t: w * weights[t] for t, w in idfs.items()}
        keys = list(mems)
        counts = [Counter(t) for t in tokens([mems[k].content for k in keys])]
        scores, matched = {}, {}
        for k, c in zip(keys, counts, strict=True):
            if any(c[t] for t in idfs):
                scores[k] = bm25(c, sum(c.values()), avg, per_word)
                matched[k] = sum(w for t, w in idfs.items() if c[t])
        return scores, matched, sum(idfs.values())

    def _keyword_signals(self, query: str, mems: Mapping[int, Memory]) -> tuple[dict[int, float], dict[int, float]]:
        """Keyword evidence and keyword coverage of each given memory that matches a query word."""
        scores, matched, mass = self._bm25(query, mems)
        return (
            {k: keyword_evidence(b, mass) for k, b in scores.items()},
            {k: keyword_coverage(v, mass) for k, v in matched.items()},
        )

    def _keyword(
        self, query: str, scope: Scope, limit: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[int, float, Memory]]:
        """``(seq, keyword evidence, memory)`` of the best matches: ts_rank pre-selects, BM25 ranks."""
        tq = _tsquery(query)
        if tq is None:
            return []
        flt = filters or {}
        extra, fparams = _filter_sql(flt)
        post = _needs_python_check(flt)
        depth = max(limit * 4, 200)
        rows = self._read(
            f"SELECT {_COLS}, ts_rank(m.tsv, q, 1) AS r FROM memories m, to_tsquery('{TS_CONFIG}', %s) q"
            f" WHERE m.tsv @@ q AND {_SCOPE} AND {_LIVE}{extra} ORDER BY r DESC, m.seq"
            + ("" if post else " LIMIT %s"),
            [tq, *scope.key(), time.time(), *fparams, *([] if post else [depth])],
        )
        if post:
            rows = [r for r in rows if metadata_matches(json.loads(r[3]), flt)][:depth]
        mems = {r[0]: _memory(r) for r in rows}
        scores, _, mass = self._bm25(query, mems)
        ranked = sorted(scores, key=lambda k: (-scores[k], k))[:limit]  # FTS5's order: bm25 (uncapped), then row
        return [(k, keyword_evidence(scores[k], mass), mems[k]) for k in ranked]
