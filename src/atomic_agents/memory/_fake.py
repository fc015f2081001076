"""An in-memory :class:`MemoryStore` for unit tests and examples: dicts and numpy, no file.

Same rules as the SQLite backend (it shares input checks, secret policy and
scoring); keyword search is a plain-Python bm25 over the tokens SQLite's FTS5
index would hold (:func:`~atomic_agents.memory._scoring.tokens`), with the same
constants, so its scores match the SQLite backend's. Not persistent, not shared
between processes.

>>> store = InMemoryMemoryStore(embedder=HashingEmbedder())
>>> mid = store.remember("Deploy of billing went green", {"goal_id": "g1"}, Scope("builder", "alice"))
>>> store.search("billing", Scope("builder", "alice"))[0].id == mid
True
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:  # bound on first use (see _lazy): keyword search and listing never import numpy
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

from ..exceptions import ConflictError, EmbedderMismatchError, NotFoundError, ValidationError
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
from ._embed import Embedder, HashingEmbedder, content_hash
from ._leases import Fence, Lease, check_fence, check_lease_args, held_error
from ._models import Health, Hit, Memory, PruneReport, Scope, ScopeFilter, check_filters, check_flag, check_id, check_limit, check_query
from ._scoring import (
    HYBRID_POOL,
    SCOPE_DF_MAX_HITS,
    SCOPE_DF_MAX_ROWS,
    UBIQUITOUS_MIN_ROWS,
    asks,
    bm25,
    calibration_for,
    fuse_pool,
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
from ._base import check_no_secrets  # the scanner loads with the first write
from ._sqlite_schema import SCHEMA_VERSION
from ._store import UNSET, Progress

__all__ = ["InMemoryMemoryStore"]

#: ``word -> its stems joined by spaces`` (``parse_config`` -> ``"pars config"``), as :func:`_phrases` reads them
_PHRASES: dict[str, str] = {}
_PHRASES_MAX = 50_000


def _phrases(words: Iterable[str]) -> dict[str, str]:
    """``word -> key``: its stem, or for a word the tokenizer splits (``parse_config``) its stems joined
    by spaces, which FTS5 matches as a phrase (words that tokenize to nothing are left out)."""
    ws = list(words)
    todo = [w for w in dict.fromkeys(ws) if w not in _PHRASES]
    if todo:
        if len(_PHRASES) + len(todo) > _PHRASES_MAX:
            _PHRASES.clear()
        _PHRASES.update((w, " ".join(ts)) for w, ts in zip(todo, tokens(todo), strict=True))
    return {w: k for w in ws if (k := _PHRASES.get(w))}


def _phrase_groups(query: str) -> dict[str, list[str]]:
    """:func:`~._words.key_groups` with each matched word held by its :func:`_phrases` key: a
    ``snake_case`` word is held where its stems stand in a row, as FTS5 matches it."""
    return key_groups(query, _phrases)


class _Counts(Counter[str]):
    """A memory's stem counts. A key of several stems joined by spaces (:func:`_phrases`) counts
    that phrase's instances, its stems at consecutive positions (FTS5's phrase match); ``length``
    is the memory's token count."""

    def __init__(self, toks: Sequence[str]) -> None:
        super().__init__(toks)
        self.length = len(toks)
        self._toks = tuple(toks)
        self._phrase: dict[str, int] = {}

    def __missing__(self, key: str) -> int:
        if " " not in key:
            return 0
        n = self._phrase.get(key)
        if n is None:
            ph = tuple(key.split(" "))
            k = len(ph)
            n = self._phrase[key] = sum(1 for i in range(len(self._toks) - k + 1) if self._toks[i : i + k] == ph)
        return n

    def get(self, key: str, default: Any = None) -> Any:
        if key in self:
            return super().get(key)
        n = self.__missing__(key)
        return n if n else default




class InMemoryMemoryStore:
    """The fake backend: a dict of memories and a dict of vectors."""

    persistent = False
    backend = "memory"

    def __init__(self, *, embedder: Embedder) -> None:
        self.embedder = embedder
        self._stored_model = embedder.model_id
        self._mems: dict[str, Memory] = {}
        self._vecs: dict[str, tuple[str, str, np.ndarray]] = {}  # id -> (model, content hash, vector)
        self._lock = threading.RLock()
        self._leases: dict[str, Lease] = {}
        self._tokens: dict[str, _Counts] = {}  # content -> its index tokens

    def _vector(self, text: str) -> tuple[str, np.ndarray]:
        h = content_hash(text)
        for model, hh, v in self._vecs.values():
            if hh == h and model == self.embedder.model_id:
                return h, v  # unchanged content is never re-embedded
        return h, embed_texts(self.embedder, [text])[0]

    # -- writes ----------------------------------------------------------------------

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
        mem = prepare_new(content, metadata, scope, ttl_ms, now=time.time(), memory_id=memory_id)
        h, v = self._vector(mem.content)
        with self._lock:
            if fence is not None:
                check_fence(fence, self._leases.get(fence.key), time.time())
            if mem.id in self._mems:
                raise ConflictError(f"a memory with id {mem.id} already exists")
            self._mems[mem.id] = mem
            self._vecs[mem.id] = (self.embedder.model_id, h, v)
        return mem.id

    def remember_many(
        self,
        items: Sequence[tuple[str, Mapping[str, Any] | None]],
        scope: Scope,
        *,
        ttl_ms: int | None = None,
        progress: Progress | None = None,
    ) -> list[str]:
        now = time.time()
        mems = [prepare_new(c, m, scope, ttl_ms, now=now) for c, m in items]
        vecs = [self._vector(m.content) for m in mems]
        with self._lock:
            for m, (h, v) in zip(mems, vecs, strict=True):
                self._mems[m.id] = m
                self._vecs[m.id] = (self.embedder.model_id, h, v)
        if progress is not None:
            progress(len(mems), len(mems))
        return [m.id for m in mems]

    def _current(self, memory_id: str, *, include_expired: bool = False) -> Memory:
        m = self._mems.get(memory_id)
        if m is None or m.deleted_at is not None or (not include_expired and not m.is_live()):
            raise NotFoundError(f"no memory {memory_id}", record=memory_id)
        return m

    def get(self, memory_id: str) -> Memory:
        return self._current(check_id(memory_id))

    def edit(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_ms: int | None = UNSET,
    ) -> Memory:
        mid = check_id(memory_id)
        cur = self._current(mid)
        new = prepare_edit(cur, content, metadata, ttl_ms, unset=UNSET, now=time.time())
        with self._lock:
            if new.content != cur.content:
                h, v = self._vector(new.content)
                self._vecs[mid] = (self.embedder.model_id, h, v)
            self._mems[mid] = new
        return new

    def forget(self, memory_id: str) -> Memory:
        mid = check_id(memory_id)
        cur = self._current(mid, include_expired=True)
        with self._lock:
            gone = self._mems[mid] = replace(cur, deleted_at=time.time())
        return gone

    def forget_expired(self, scope: ScopeFilter | None = None) -> int:
        sf = check_scope_filter(scope)
        now = time.time()
        n = 0
        with self._lock:
            for mid, m in list(self._mems.items()):
                if m.deleted_at is None and m.expires_at is not None and m.expires_at <= now and sf.matches(m.scope_key()):
                    self._mems[mid] = replace(m, deleted_at=now)
                    n += 1
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
        sf = check_prune_target(scope, keywords, expired_only)
        now = time.time()
        terms = set(stems(keyword_terms(keywords)).values()) if keywords else None  # FTS5's match: stems
        hits = [
            m
            for m in self._mems.values()
            if sf.matches(m.scope_key())
            and (hard or m.deleted_at is None)
            and (not expired_only or (m.expires_at is not None and m.expires_at <= now))
            and (terms is None or not terms.isdisjoint(self._counts(m.content)))
        ]
        sample = tuple(m.id for m in hits[:10])
        if dry_run or not hits:
            return PruneReport(len(hits), 0, dry_run, hard, sample)
        with self._lock:
            for m in hits:
                if hard:
                    del self._mems[m.id]
                    self._vecs.pop(m.id, None)
                else:
                    self._mems[m.id] = replace(m, deleted_at=now)
        return PruneReport(len(hits), len(hits), False, hard, sample)

    # -- reads -----------------------------------------------------------------------

    def _live(self, scope: Scope, filters: Mapping[str, Any] | None = None) -> list[Memory]:
        now = time.time()
        key = scope.key()
        return [
            m
            for m in self._mems.values()
            if m.scope_key() == key and m.is_live(now) and (not filters or metadata_matches(m.metadata, filters))
        ]

    def _next_in_timeline(self, scope: Scope) -> dict[str, str]:
        """``id -> id`` of the live memory written right after it in ``scope`` (``(created_at, write order)``)."""
        order = {mid: i for i, mid in enumerate(self._mems)}
        line = sorted(self._live(scope), key=lambda m: (m.created_at, order[m.id]))
        return {a.id: b.id for a, b in itertools.pairwise(line)}

    def _counts(self, content: str) -> _Counts:
        got = self._tokens.get(content)
        if got is None:
            got = self._tokens[content] = _Counts(tokens([content])[0])
        return got

    def _semantic_text(self, query: str, scope: Scope | None = None) -> str:
        """The text the query is embedded as (``_scoring.semantic_query``), over every stored memory's stems
        and, for a scope of at most ``SCOPE_DF_MAX_ROWS`` live memories, the scope's (as on SQLite)."""
        terms = keyword_terms(query)
        by_word, own = key_stems(terms), stems(terms)
        if not by_word:
            return query
        every = [self._counts(m.content) for m in self._mems.values()]
        groups = key_groups(query)
        held = {st: sum(1 for c in every if c[st]) for ss in groups.values() for st in ss}
        idfs = key_idfs(groups, {st: idf(len(every), n) for st, n in held.items()})
        scoped = None
        key = scope.key() if scope else None  # the scope's memories not forgotten (expired ones count)
        live = [self._counts(m.content) for m in self._mems.values() if m.scope_key() == key and m.deleted_at is None] if scope else []
        if UBIQUITOUS_MIN_ROWS <= len(live) <= SCOPE_DF_MAX_ROWS and len(live) < len(every):
            need = ubiquitous_at(len(live))
            one = {
                k: own[w] for w, k in by_word.items()
                if len(tokens([w])[0]) == 1 and need <= max(held[st] for st in groups[k]) <= SCOPE_DF_MAX_HITS
            }  # fmt: skip
            if one:
                scoped = ({k: idf(len(live), sum(1 for c in live if c[st])) for k, st in one.items()}, len(live))
        return semantic_query(query, idfs, len(every), scoped)

    def _evidence(self, query: str, pool: list[Memory]) -> dict[str, float]:
        """Keyword evidence of each memory in ``pool`` that matches a query word."""
        return self._keyword_signals(query, pool)[0]

    def _keyword_signals(self, query: str, pool: list[Memory]) -> tuple[dict[str, float], dict[str, float]]:
        """Keyword evidence and keyword coverage of each memory in ``pool`` that matches a query word.

        Row counts span every stored memory (all scopes, forgotten ones too), as SQLite's FTS index does.
        """
        ev, cov, _ = self._signals_and_idfs(query, pool)
        return ev, cov

    def _signals_and_idfs(self, query: str, pool: list[Memory]) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        """:meth:`_keyword_signals` and the query stems' IDFs, from one :meth:`_bm25` pass."""
        scores, matched, mass, idfs = self._bm25(query, pool)
        return (
            {k: keyword_evidence(b, mass) for k, b in scores.items()},
            {k: keyword_coverage(v, mass) for k, v in matched.items()},
            idfs,
        )

    def _score_coverage(
        self, query: str, pool: list[Memory], coverage: Mapping[str, float], idfs: Mapping[str, float]
    ) -> dict[str, float]:
        """The coverage the hybrid score reads: for a query asking two things, the larger of the whole
        query's and the best-held question's (:func:`~._scoring.part_coverage`), as on SQLite."""
        parts = query_parts(query)
        if not parts:
            return dict(coverage)
        groups = _phrase_groups(query)
        return {
            m.id: max(coverage[m.id], part_coverage(self._held(m, groups), idfs, parts))
            for m in pool if m.id in coverage
        }  # fmt: skip

    def _held(self, m: Memory, groups: Mapping[str, Sequence[str]]) -> set[str]:
        """The query's words (key stems, :func:`~._words.key_groups`) a memory holds in one of their forms."""
        c = self._counts(m.content)
        return {k for k, ss in groups.items() if any(c[st] for st in ss)}

    def _key_idfs(self, query: str, every: list[_Counts] | None = None) -> dict[str, float]:
        """``key stem -> idf`` of the query's words (the smallest over each one's forms, as SQLite's ``_idf``)."""
        groups = key_groups(query)
        return key_idfs(groups, self._idfs(dict.fromkeys(st for ss in groups.values() for st in ss), every))

    def _idfs(self, stems_: Iterable[str], every: list[_Counts] | None = None) -> dict[str, float]:
        """``stem -> idf`` over every memory (forgotten and expired too, as FTS5 counts); ``every``: their counts."""
        every = [self._counts(m.content) for m in self._mems.values()] if every is None else every
        return {t: idf(len(every), sum(1 for c in every if c[t])) for t in stems_}

    def _bm25(
        self, query: str, pool: list[Memory]
    ) -> tuple[dict[str, float], dict[str, float], float, dict[str, float]]:
        """``(bm25, matched IDF, IDF mass, key stem -> idf)`` of each memory in ``pool`` holding a query stem
        (FTS5's bm25: a sum over the query's words and their forms, :func:`~._words.match_terms`, so a
        stem two words share counts twice; coverage counts each word once, in any of its forms)."""
        terms = match_terms(query)
        by = _phrases(terms)
        words = Counter(by[t] for t in terms if t in by)  # every form a phrase of the OR, repeats kept
        if not words or not pool:
            return {}, {}, 0.0, {}
        every = [self._counts(m.content) for m in self._mems.values()]
        avg = sum(c.length for c in every) / max(len(every), 1)
        # FTS5 weighs each word of the OR by its own IDF, a phrase's counting the rows holding the
        # phrase; the IDF mass and the coverage weights are the words' first stems' (SQLite's _idf)
        firsts = key_groups(query)
        idf_of = self._idfs(dict.fromkeys([*words, *(st for ss in firsts.values() for st in ss)]), every)
        own = {t: idf_of[t] for t in words}
        idfs = key_idfs(firsts, idf_of)
        groups = _phrase_groups(query)
        per_word = {t: w * words[t] for t, w in own.items()}
        scores, matched = {}, {}
        for m in pool:
            c = self._counts(m.content)
            if any(c[t] for t in words):
                scores[m.id] = bm25(c, c.length, avg, per_word)
                held = self._held(m, groups)
                matched[m.id] = sum(w for k, w in idfs.items() if k in held)
        return scores, matched, sum(idfs.values()), idfs

    def _keyword(self, query: str, pool: list[Memory], limit: int) -> tuple[list[tuple[float, Memory]], dict[str, float]]:
        """``((evidence, memory) of the best matches, stem -> idf)``."""
        scores, _, mass, idfs = self._bm25(query, pool)
        # FTS5's order: uncapped bm25, older first on ties (a stable sort)
        ranked = sorted((m for m in pool if m.id in scores), key=lambda m: -scores[m.id])
        return [(keyword_evidence(scores[m.id], mass), m) for m in ranked[:limit]], idfs

    def search(
        self, query: str, scope: Scope, limit: int = 10, filters: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        q, sc, lim, flt = check_query(query), check_scope(scope), check_limit(limit), check_filters(filters)
        cal = calibration_for(self.embedder)
        found, idfs = self._keyword(q, self._live(sc, flt), lim)
        return keyword_hits(q, idfs, found, cal)

    def _cosines(self, query: str, pool: list[Memory], scope: Scope | None = None) -> dict[str, float]:
        if self._stored_model != self.embedder.model_id:
            raise EmbedderMismatchError(
                f"this store's vectors come from {self._stored_model!r}, the current embedder is "
                f"{self.embedder.model_id!r}; run reindex first",
                stored=self._stored_model,
                current=self.embedder.model_id,
            )
        qv = embed_texts(self.embedder, [self._semantic_text(query, scope)])[0]
        return {
            m.id: float(self._vecs[m.id][2] @ qv)
            for m in pool
            if m.id in self._vecs and self._vecs[m.id][0] == self._stored_model
        }

    def search_semantic(
        self, query: str, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 5
    ) -> list[Hit]:
        q, sc, lim, flt = check_query(query), check_scope(scope), check_limit(limit), check_filters(filters)
        pool = self._live(sc, flt)
        cos = self._cosines(q, pool, sc)
        ranked = sorted(pool, key=lambda m: -cos.get(m.id, -2.0))[:lim]
        cal = calibration_for(self.embedder)
        return semantic_hits(q, lambda: self._key_idfs(q), [(cos[m.id], m) for m in ranked if m.id in cos], cal)

    def recall(
        self, query: str, scope: Scope, limit: int = 5, filters: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        return self.search_semantic(query, scope, filters, limit)

    def search_hybrid(
        self, query: str, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 5,
        *, rerank: bool = False,
    ) -> list[Hit]:
        q, sc, lim, flt = check_query(query), check_scope(scope), check_limit(limit), check_filters(filters)
        rerank = check_flag(rerank, name="rerank")
        pool = self._live(sc, flt)
        cos = self._cosines(q, pool, sc)
        ev, coverage, idfs = self._signals_and_idfs(q, pool)
        # the same candidate pool as the SQLite backend: each ranker's top max(4 * limit, HYBRID_POOL)
        depth = max(lim * 4, HYBRID_POOL)
        by_cos = sorted(pool, key=lambda m: -cos.get(m.id, -2.0))[:depth]
        by_kw = sorted((m for m in pool if m.id in ev), key=lambda m: -ev[m.id])[:depth]
        seq = {m.id: i for i, m in enumerate(pool)}
        cands = {seq[m.id]: m for m in [*by_cos, *by_kw]}
        # each candidate's successor in its scope's timeline joins the pool (the reply to a matching turn)
        nxt = self._next_in_timeline(sc)
        follows = {seq[nxt[m.id]]: k for k, m in cands.items() if nxt.get(m.id) in seq and asks(m.content)}
        cands.update((n, pool[n]) for n in follows)
        pool_cos = {k: cos[m.id] for k, m in cands.items() if m.id in cos}
        pool_ev = {k: ev[m.id] for k, m in cands.items() if m.id in ev}
        pool_cov = {k: coverage[m.id] for k, m in cands.items() if m.id in coverage}
        names = query_names(q)  # a candidate lacking one scores lower (memory/_scoring.py)
        groups = _phrase_groups(q)
        lacking = {k for k, m in cands.items() if any(t not in self._held(m, groups) for t in names if t in groups)}
        cal = calibration_for(self.embedder)
        scov = self._score_coverage(q, [cands[k] for k in pool_cov], {m.id: coverage[m.id] for k, m in cands.items() if m.id in coverage}, idfs)
        pool_scov = {k: scov[m.id] for k, m in cands.items() if m.id in scov}
        fused = [(s, k) for s, k in fuse_pool(pool_cos, pool_ev, cal, pool_cov, lacking, follows, pool_scov) if s > 0.0]
        if rerank:  # the opt-in stage (memory/_rerank.py), as on SQLite
            from ._rerank import RERANK_DEPTH, rerank as _rerank

            head = fused[: max(lim, RERANK_DEPTH)]
            fused = _rerank(q, head, pool_cos, pool_ev, {k: cands[k].content for _, k in head}, self.embedder)
        return [Hit(cands[k], s) for s, k in fused if s > 0.0][:lim]  # no signal is not a hit

    def list_memories(
        self, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 1000
    ) -> list[Memory]:
        sc, flt, lim = check_scope(scope), check_filters(filters), check_limit(limit)
        return sorted(self._live(sc, flt), key=lambda m: m.created_at)[:lim]

    def scan(self, scope: ScopeFilter, filters: Mapping[str, Any] | None = None) -> list[Memory]:
        sf, flt = check_scope_filter(scope), check_filters(filters)
        now = time.time()
        with self._lock:
            mems = list(self._mems.values())
        hits = [m for m in mems if m.is_live(now) and sf.matches(m.scope_key()) and metadata_matches(m.metadata, flt)]
        return sorted(hits, key=lambda m: m.created_at)

    # -- leases ------------------------------------------------------------------------

    def acquire_lease(self, key: str, holder: str, ttl_ms: int) -> Lease:
        k, h, ttl = check_lease_args(key, holder, ttl_ms)
        with self._lock:
            now = time.time()
            cur = self._leases.get(k)
            if cur is not None and cur.live(now):
                raise held_error(cur, now)
            new = self._leases[k] = Lease(k, h, (cur.token if cur else 0) + 1, now, now + ttl / 1000.0)
        return new

    def release_lease(self, key: str, token: int) -> Lease:
        fence = Fence(check_lease_args(key, "-", 1)[0], token)
        with self._lock:
            now = time.time()
            cur = self._leases.get(fence.key)
            check_fence(fence, cur, now)
            assert cur is not None
            gone = self._leases[fence.key] = replace(cur, released_at=now)
        return gone

    def get_lease(self, key: str) -> Lease | None:
        return self._leases.get(key)

    def leases(self, prefix: str = "") -> list[Lease]:
        with self._lock:
            return [v for k, v in self._leases.items() if k.startswith(prefix)]

    # -- housekeeping ----------------------------------------------------------------

    def health(self) -> Health:
        now = time.time()
        mems = list(self._mems.values())
        stale = sum(1 for m in mems if m.deleted_at is None and self._vecs.get(m.id, ("",))[0] != self.embedder.model_id)
        return Health(
            status="ok",
            total=len(mems),
            live=sum(1 for m in mems if m.is_live(now)),
            deleted=sum(1 for m in mems if m.deleted_at is not None),
            expired=sum(1 for m in mems if m.deleted_at is None and not m.is_live(now)),
            backend=self.backend,
            path=None,
            size_bytes=0,
            schema_version=SCHEMA_VERSION,
            embedder=self.embedder.model_id,
            dimension=self.embedder.dimension,
            stored_embedder=self._stored_model,
            needs_reindex=self._stored_model != self.embedder.model_id or stale > 0,
            extra={"relevance_floor": getattr(self.embedder, "relevance_floor", None), "stale_vectors": stale},
        )

    def vacuum(self) -> dict[str, Any]:
        return {"status": "ok", "size_before": 0, "size_after": 0}

    def reindex(self, *, progress: Progress | None = None) -> int:
        todo = [m for m in self._mems.values() if m.deleted_at is None and self._vecs.get(m.id, ("",))[0] != self.embedder.model_id]
        vecs = embed_texts(self.embedder, [m.content for m in todo])
        with self._lock:
            for m, v in zip(todo, vecs, strict=True):
                self._vecs[m.id] = (self.embedder.model_id, content_hash(m.content), v)
            self._stored_model = self.embedder.model_id
        if progress is not None:
            progress(len(todo), len(todo))
        return len(todo)

    def dump(self, scope: ScopeFilter | None = None) -> Iterator[Memory]:
        sf = check_scope_filter(scope)
        yield from [m for m in self._mems.values() if sf.matches(m.scope_key())]

    def stored_vectors(self, ids: Sequence[str], *, hashes: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
        out = {}
        for mid in ids:
            m, entry = self._mems.get(mid), self._vecs.get(mid)
            if m is None or entry is None or (hashes is not None and hashes.get(mid) != entry[1]):
                continue
            if entry[0] == self.embedder.model_id and entry[1] == content_hash(m.content):
                out[mid] = entry[2]
        return out

    def load(
        self,
        memories: Iterable[Memory],
        *,
        progress: Progress | None = None,
        vectors: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[int, int]:
        mems = list(memories)
        for m in mems:  # all checked before any is kept: all or nothing, like SQLite
            check_no_secrets(m.content, m.metadata, record=m.id, scope=m)
        fresh = list({m.id: m for m in mems if m.id not in self._mems}.values())
        live = [m for m in fresh if m.deleted_at is None]
        given = given_vectors(vectors, live, self.embedder.dimension)
        vecs = {m.id: (content_hash(m.content), given[m.id]) if m.id in given else self._vector(m.content) for m in live}
        with self._lock:
            for m in fresh:
                self._mems[m.id] = m
                if m.id in vecs:
                    self._vecs[m.id] = (self.embedder.model_id, *vecs[m.id])
        if progress is not None:
            progress(len(mems), len(mems))
        return len(fresh), len(mems) - len(fresh)

    def close(self) -> None:
        pass
