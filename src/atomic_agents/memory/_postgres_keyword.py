"""Keyword statistics and keyword candidates of the PostgreSQL store (a mixin of :class:`PostgresMemoryStore`).

The shared BM25 of :mod:`._scoring` (SQLite's tokens and constants) over the corpus statistics
:mod:`._postgres_stats` keeps exactly as FTS5 keeps them: N, each stem's row count and the
average length, read in one indexed statement. Candidates are the rows whose stored stems
(``memory_docs.terms``, schema 5: SQLite's tokens, GIN-indexed) hold a query stem, scored in
SQL by FTS5's bm25 from the stored counts (``tfs``), in FTS5's order (bm25, then row) and cut
at the limit: the same rows, order and scores as SQLite's however many rows match. A query
word SQLite's tokenizer splits (``parse_config``) is an FTS5 phrase: its instances are
counted in the rows holding all its stems (:meth:`PostgresKeyword._phrase_rows`).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._base import memory_from_row as _memory
from ._base import metadata_matches
from ._models import Memory, Scope
from ._postgres_sql import _COLS, _LIVE, _SCOPE, _filter_sql, _needs_python_check
from ._postgres_stats import KeywordStats, backfill, read_stats, stem_key
from ._scoring import (
    B,
    K1,
    SCOPE_DF_MAX_HITS,
    SCOPE_DF_MAX_ROWS,
    UBIQUITOUS_MIN_ROWS,
    idf,
    keyword_coverage,
    part_coverage,
    query_parts,
    keyword_evidence,
    key_groups,
    key_idfs,
    key_stems,
    keyword_terms,
    match_terms,
    query_names,
    semantic_query,
    stems,
    tokens,
    ubiquitous_at,
)

__all__ = ["PostgresKeyword"]

T = TypeVar("T")
# Keyword search scores the best ``4 * limit + 32`` matches first, growing that by this factor
# each round while scope and filters remove too many, before the exact join over every match.
_RANK_FIRST_ROUNDS, _RANK_FIRST_GROWTH = 3, 8
#: Per thread, while a search runs (:meth:`PostgresKeyword._one_read`): the statistics it has read.
_held = threading.local()


class PostgresKeyword:
    """``_idf``, ``_semantic_text``, ``_keyword_signals``, ``_signals_of``, ``_matching_seqs`` and ``_keyword``."""

    if TYPE_CHECKING:  # provided by the store

        def _run(self, fn: Callable[[Any], T], *, write: bool) -> T: ...

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def _read_indexed(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """``sql`` with sequential scans priced out for its transaction: the stems' GIN index is taken.

        The planner prices ``terms && ARRAY[...]`` as cheap, but checked row by row it costs ten
        times the index (an element-by-element compare of every row's stems): where many rows
        match, it would scan the table instead (20,000 rows: 20 ms against 2 ms).
        """

        def q(cur: Any) -> list[Any]:
            cur.execute("SELECT set_config('enable_seqscan', 'off', true)")
            cur.execute(sql, params)
            return list(cur.fetchall())

        return self._run(q, write=False)

    @contextlib.contextmanager
    def _one_read(self) -> Iterator[None]:
        """Within one search the corpus statistics of a set of stems are read once, not at every step.

        (The semantic query text, the keyword candidates and the pool's signals all ask; one read
        also gives every step the same counts while other hosts write.)
        """
        outer = getattr(_held, "stats", None)
        if outer is None:
            _held.stats, _held.plans = {}, {}
        try:
            yield
        finally:
            if outer is None:
                _held.stats = _held.plans = None

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
        """``key stem -> idf`` for the query's content words (:func:`~._words.key_groups`), and the
        statistics they came from (every form's stem is read: BM25 weighs each form by its own)."""
        groups = key_groups(query)
        distinct = list(dict.fromkeys(t for ts in groups.values() for t in ts))
        if not distinct:
            return {}, None
        st = self._stats([stem_key(t) for t in distinct])
        return key_idfs(groups, {t: idf(st.rows, st.hits.get(stem_key(t), 0)) for t in distinct}), st

    def _idf(self, query: str) -> dict[str, float]:
        """``stem -> idf`` for the query's content words: N and each stem's rows from the kept counters."""
        return self._query_idf(query)[0]

    def _idf_and_avg(self, query: str) -> tuple[dict[str, float], float]:
        idfs, st = self._query_idf(query)
        return idfs, st.avg_length if st is not None else 0.0

    def _semantic_text(self, query: str, scope: Scope | None = None) -> str:
        """The text the query is embedded as (:func:`~._scoring.semantic_query`: BM25's own counts, one
        read, and for a scope of at most ``SCOPE_DF_MAX_ROWS`` live memories the scope's own, as on SQLite)."""
        idfs, st = self._query_idf(query)
        if st is None:
            return query
        return semantic_query(query, idfs, st.rows, self._scope_idfs(query, scope, st) if scope else None)

    def _scope_idfs(self, query: str, scope: Scope, st: KeywordStats) -> tuple[dict[str, float], int] | None:
        """``(stem -> idf, rows)`` over the scope's memories not forgotten (see ``SQLiteKeyword._scope_idfs``)."""
        n_scope = int(self._read(  # the scope index alone: rows not forgotten (expired ones count, as on SQLite)
            f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {_SCOPE} AND m.deleted_at = 0 LIMIT %s) x",
            [*scope.key(), SCOPE_DF_MAX_ROWS + 1],
        )[0][0])  # fmt: skip
        if n_scope < UBIQUITOUS_MIN_ROWS or n_scope > SCOPE_DF_MAX_ROWS or n_scope >= st.rows:
            return None
        need = ubiquitous_at(n_scope)
        out: dict[str, float] = {}
        words = keyword_terms(query)
        own, groups = stems(words), key_groups(query)
        for word, stem in key_stems(words).items():
            if stem in out or len(tokens([word])[0]) != 1:
                continue
            held = max(st.hits.get(stem_key(t), 0) for t in groups.get(stem, [own[word]]))  # its commonest form
            if held < need or held > SCOPE_DF_MAX_HITS:
                continue
            hits = self._read(  # the word's own form, as SQLite's MATCH of the word counts it
                f"SELECT count(*) FROM memory_docs d JOIN memories m ON m.seq = d.seq"
                f" WHERE d.terms @> ARRAY[%s]::text[] AND {_SCOPE} AND m.deleted_at = 0",
                [stem_key(own[word]), *scope.key()],
            )[0][0]
            out[stem] = idf(n_scope, int(hits))
        return (out, n_scope) if out else None

    def _plan(self, query: str) -> _Plan | None:
        """The query as FTS5 reads it (``None``: no word has a token), with every number its BM25 needs."""
        memo: dict[Any, _Plan | None] | None = getattr(_held, "plans", None)
        if memo is not None and (id(self), query) in memo:
            return memo[(id(self), query)]
        words = match_terms(query)
        worded = [(w, ts) for w, ts in zip(words, tokens(words), strict=True) if ts]
        toks = [ts for _, ts in worded]
        if not toks:
            return None
        idfs, st = self._query_idf(query)  # each word's IDF (the smallest of its forms'): the mass, the coverage weights
        assert st is not None
        phrases = [tuple(stem_key(t) for t in ts) for ts in toks]
        rows: dict[tuple[str, ...], dict[int, int]] = {}
        for ph in phrases:
            if len(ph) > 1 and ph not in rows:
                rows[ph] = self._phrase_rows(ph)
        weights = [
            idf(st.rows, len(rows[ph]) if len(ph) > 1 else st.hits.get(ph[0], 0)) for ph in phrases
        ]  # FTS5: a phrase's IDF counts the rows holding the phrase
        named = query_names(query)
        keys = key_stems(words)
        at: dict[str, list[int]] = {}  # key stem -> the phrases of its forms
        for i, (w, _) in enumerate(worded):
            at.setdefault(keys[w], []).append(i)  # a word's IDF counts once, held in any form (as SQLite's coverage)
        cover = [(tuple(ix), idfs[k]) for k, ix in at.items()]
        cover_stems = list(at)
        names = [tuple(ix) for k, ix in at.items() if k in named]
        plan = _Plan(phrases, weights, rows, st.avg_length, sum(idfs.values()), cover, names, cover_stems, query_parts(query))
        if memo is not None:
            memo[(id(self), query)] = plan
        return plan

    def _phrase_rows(self, phrase: tuple[str, ...]) -> dict[int, int]:
        """``seq -> instances`` of a phrase of several stems (a ``snake_case`` word) in every row holding it.

        FTS5 matches such a word as a phrase: its stems at consecutive positions. Rows holding
        all of them (the GIN index) are tokenized again and their instances counted.
        """
        found = self._read_indexed(
            "SELECT d.seq, m.content FROM memory_docs d JOIN memories m ON m.seq = d.seq WHERE d.terms @> %s::text[]",
            [list(phrase)],
        )
        out: dict[int, int] = {}
        k = len(phrase)
        for (seq, _), ts in zip(found, tokens([r[1] for r in found]), strict=True):
            keys = [stem_key(t) for t in ts]
            n = sum(1 for i in range(len(keys) - k + 1) if tuple(keys[i : i + k]) == phrase)
            if n:
                out[seq] = n
        return out

    def _scored(self, plan: _Plan, where: str, params: Sequence[Any]) -> tuple[str, list[Any]]:
        """``SELECT seq, score, f0, f1, ... FROM memory_docs d ... WHERE <where>``: FTS5's bm25 of each row.

        Term by term as ``fts5_aux.c`` computes it (the same double operations in the same order):
        ``score += idf * ((f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl)))`` over the query's
        phrases in order; ``f`` a stem's count (``tfs``) or a phrase's instances.
        """
        joins, fs, jp, fp = [], [], [], []
        for i, ph in enumerate(plan.phrases):
            if len(ph) == 1:
                fs.append(f"coalesce(d.tfs[array_position(d.terms, %s::text)], 0)::float8 AS f{i}")
                fp.append(ph[0])
            else:
                got = plan.rows[ph]
                joins.append(f" LEFT JOIN unnest(%s::bigint[], %s::int[]) AS p{i}(seq, f) ON p{i}.seq = d.seq")
                jp += [list(got), list(got.values())]
                fs.append(f"coalesce(p{i}.f, 0)::float8 AS f{i}")
        terms = " + ".join(f"%s::float8 * ((x.f{i} * %s::float8) / (x.f{i} + x.nrm))" for i in range(len(plan.phrases)))
        tp: list[Any] = []
        for w in plan.weights:
            tp += [w, K1 + 1.0]
        sql = (
            f"SELECT d.seq, 0::float8 + {terms} AS score, {', '.join(f'x.f{i}' for i in range(len(plan.phrases)))}"
            f" FROM memory_docs d{''.join(joins)} CROSS JOIN LATERAL"
            f" (SELECT %s::float8 * (%s::float8 + %s::float8 * d.doc_len::float8 / %s::float8) AS nrm, {', '.join(fs)} OFFSET 0) x"
            f" WHERE {where}"
        )
        avg = plan.avg if plan.avg > 0 else 1.0
        return sql, [*tp, *jp, K1, 1.0 - B, B, avg, *fp, *params]

    def _matching(self, plan: _Plan) -> tuple[str, list[Any]]:
        """The condition (on ``memory_docs d``) of a row FTS5's ``OR`` of the query's words matches."""
        singles = sorted({ph[0] for ph in plan.phrases if len(ph) == 1})
        multi = sorted({s for got in plan.rows.values() for s in got})
        if not multi:
            return "d.terms && %s::text[]", [singles]
        return "(d.terms && %s::text[] OR d.seq = ANY(%s::bigint[]))", [singles, multi]

    def _bm25(self, query: str, mems: Mapping[int, Any]) -> tuple[dict[int, float], dict[int, float], float]:
        """``(bm25, matched IDF, IDF mass)`` of each given row (by seq) that matches a query word.

        BM25 as FTS5 computes it for the query's ``OR`` of words (every word a phrase of its
        stems, a sum over them in order, from the stored term counts); the matched IDF and the
        mass count each first stem once, as SQLite's coverage does.
        """
        scores, matched, _, mass, _ = self._signals_of(query, list(mems))
        return scores, matched, mass

    def _signals_of(
        self, query: str, seqs: Sequence[int]
    ) -> tuple[dict[int, float], dict[int, float], set[int], float, dict[int, float]]:
        """``(bm25, matched IDF, rows lacking a name the query asks about, IDF mass, part coverage)`` of these
        rows (:func:`~._scoring.part_coverage`: for a query asking two things, the best-held question's share)."""
        plan = self._plan(query) if seqs else None
        if plan is None:
            return {}, {}, set(), 0.0, {}
        sql, params = self._scored(plan, "d.seq = ANY(%s::bigint[])", [list(seqs)])
        scores, matched, lacking, parts = {}, {}, set(), {}
        idfs = {st: w for st, (_, w) in zip(plan.cover_stems, plan.cover, strict=True)}
        got = {r[0]: r for r in self._read(sql, params)}
        for k in seqs:
            r = got.get(k)
            fs = r[2:] if r is not None else [0.0] * len(plan.phrases)
            if any(not any(fs[i] for i in ix) for ix in plan.names):
                lacking.add(k)
            if r is not None and any(fs):
                scores[k] = float(r[1])
                matched[k] = sum(w for ix, w in plan.cover if any(fs[i] for i in ix))
                if plan.parts:
                    held = {st for st, (ix, _) in zip(plan.cover_stems, plan.cover, strict=True) if any(fs[i] for i in ix)}
                    parts[k] = part_coverage(held, idfs, plan.parts)
        return scores, matched, lacking, plan.mass, parts

    def _keyword_signals(self, query: str, mems: Mapping[int, Any]) -> tuple[dict[int, float], dict[int, float]]:
        """Keyword evidence and keyword coverage of each given memory that matches a query word."""
        scores, matched, mass = self._bm25(query, mems)
        return (
            {k: keyword_evidence(b, mass) for k, b in scores.items()},
            {k: keyword_coverage(v, mass) for k, v in matched.items()},
        )

    def _matching_seqs(self, query: str) -> list[int] | None:
        """Every row (all scopes, forgotten ones too) FTS5's ``OR`` of the query's words matches; ``None``: no word."""
        plan = self._plan(query)
        if plan is None:
            return None
        where, params = self._matching(plan)
        return [r[0] for r in self._read_indexed(f"SELECT d.seq FROM memory_docs d WHERE {where}", params)]

    def _keyword(
        self, query: str, scope: Scope, limit: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[int, float, Memory]]:
        """``(seq, keyword evidence, memory)`` of the ``limit`` best matches in FTS5's order (bm25, then row)."""
        with self._one_read():
            plan = self._plan(query)
            if plan is None:
                return []
            flt = filters or {}
            where, wparams = self._matching(plan)
            inner, params = self._scored(plan, where, wparams)
            rows = self._ranked(inner, params, scope, limit, flt)
        return [(r[0], keyword_evidence(float(r[-1]), plan.mass), _memory(r)) for r in rows]

    def _ranked(self, inner: str, params: Sequence[Any], scope: Scope, limit: int, flt: Mapping[str, Any]) -> list[Any]:
        """Rows ``(_COLS..., score)`` of the ``limit`` best matches in scope, best first (FTS5's order).

        Rank first, as SQLite's keyword search does: the best ``fetch`` matches by score alone
        (no join), then scope, liveness and filters checked on those only; while they remove
        too many the fetch grows, and past a few rounds the exact join over every match runs,
        so it never returns fewer rows than exist.
        """
        extra, fparams = _filter_sql(flt)
        post = _needs_python_check(flt)
        fetch = limit * 4 + 32
        for _ in range(_RANK_FIRST_ROUNDS):
            got = self._read_indexed(
                f"WITH top AS MATERIALIZED ({inner} ORDER BY score DESC, d.seq LIMIT %s)"
                f" SELECT {_COLS}, top.score FROM top LEFT JOIN memories m ON m.seq = top.seq AND {_SCOPE} AND {_LIVE}{extra}"
                " ORDER BY top.score DESC, top.seq",
                [*params, fetch, *scope.key(), time.time(), *fparams],
            )
            kept = [r for r in got if r[0] is not None]
            if post:
                kept = [r for r in kept if metadata_matches(json.loads(r[3]), flt)]
            if len(kept) >= limit or len(got) < fetch:  # enough, or every match was looked at
                return kept[:limit]
            fetch *= _RANK_FIRST_GROWTH
        rows = self._read_indexed(  # the scope holds few of the matches: the exact join over all of them
            f"SELECT {_COLS}, s.score FROM ({inner}) s JOIN memories m ON m.seq = s.seq"
            f" WHERE {_SCOPE} AND {_LIVE}{extra} ORDER BY s.score DESC, m.seq" + ("" if post else " LIMIT %s"),
            [*params, *scope.key(), time.time(), *fparams, *([] if post else [limit])],
        )
        if post:
            rows = [r for r in rows if metadata_matches(json.loads(r[3]), flt)][:limit]
        return rows


class _Plan:
    """A query as FTS5 reads it: its words' phrases (stem keys), each phrase's IDF, and the coverage weights."""

    __slots__ = ("avg", "cover", "cover_stems", "mass", "names", "parts", "phrases", "rows", "weights")

    def __init__(
        self, phrases: list[tuple[str, ...]], weights: list[float], rows: dict[tuple[str, ...], dict[int, int]],
        avg: float, mass: float, cover: list[tuple[tuple[int, ...], float]], names: list[tuple[int, ...]], cover_stems: list[str],
        parts: list[frozenset[str]],
    ) -> None:
        self.phrases, self.weights, self.rows, self.avg = phrases, weights, rows, avg
        self.mass, self.cover, self.names = mass, cover, names
        #: the stem of each ``cover`` entry; the stems of each question (:func:`~._scoring.query_parts`)
        self.cover_stems, self.parts = cover_stems, parts
