"""The vector matrix: exact brute-force search, with an optional ANN tier that only proposes.

Rows are keyed by an integer (the backend's row id) and live in two blocks:

* the **base**: rows loaded in bulk (from SQLite or from the memory-mapped ``.npy``
  snapshot), keys sorted, found by binary search; its vectors are never written, so
  a mapped snapshot is never copied;
* the **tail**: rows written or pulled since, in growable arrays (doubling, so one
  append is amortised O(d)). Re-writing a base key kills its base row and appends.

Removal only clears a ``live`` flag. Past a size threshold an :class:`AnnIndex`
(usearch HNSW) proposes candidates: an over-fetched top-k, post-filtered by scope,
expiry, liveness and metadata candidates, then **re-scored exactly** against these
float32 rows, merged with an exact scan of the rows the graph does not hold yet.
When too few candidates survive the filters the search widens, then falls back to
exact search, so a filter never returns a wrong or missing-in-scope answer because
of the graph. Single-query search runs BLAS on one thread (see :func:`one_blas_thread`),
except an exact scan of ``PARALLEL_FROM`` rows or more.

>>> ix = VectorIndex(2)
>>> ix.upsert(7, np.array([1.0, 0.0], np.float32), ("a", "u", "o", "w"), None)
>>> ix.search(np.array([1.0, 0.0], np.float32), ("a", "u", "o", "w"), 3, now=0.0)
[(7, 1.0)]
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:  # bound on first use (see _lazy): keyword search and listing never import numpy
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

from ._ann import AnnIndex

__all__ = ["VectorIndex", "one_blas_thread"]

ScopeKey = tuple[str, str, str, str]

#: The widest over-fetch asked of the graph before exact search takes over.
ANN_MAX_K = 4096
#: More graph candidates than this at one distance are copies of one vector (equal content):
#: HNSW cannot route through thousands of equal points (they fill each other's neighbour lists,
#: and a search that walks into them comes back with them, short or wrong), so exact search answers.
CROWD = 16
#: Metadata-filter candidate sets up to this size are scored exactly (one gather).
EXACT_ONLY_MAX = 20_000
#: Rows written past a read-only (mapped) graph that are scanned exactly before the
#: graph is copied into memory and they are inserted into it.
FOLD_AT = 5_000
#: An exact scan over this many rows or more keeps every BLAS thread: the product is
#: long enough that a second thread pays (bench scale at 1M: 184 ms default vs 224 ms
#: on one thread); below it one thread (10k: p95 9 ms vs 39 ms with two).
PARALLEL_FROM = 200_000

_controller: Any = None


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with BLAS on one thread (threadpoolctl); a no-op if it is unavailable.

    A single matrix-vector product is memory-bound: waking a second BLAS thread on a
    busy 2-core machine costs more (up to ~20 ms) than it saves. Batch work keeps
    every thread.
    """
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController().select(user_api="blas")
        except Exception:  # noqa: BLE001 - no threadpoolctl or an unknown BLAS: leave threads alone
            _controller = False
    if not _controller:
        yield
        return
    with _controller.limit(limits=1):
        yield


class VectorIndex:
    def __init__(self, dimension: int, capacity: int = 1024) -> None:
        self.dimension = dimension
        # base block (bulk-loaded, sorted keys, vectors read-only)
        self._bv: np.ndarray = np.zeros((0, dimension), np.float32)
        self._bk = np.zeros(0, np.int64)
        self._bs = np.zeros(0, np.int32)
        self._be = np.zeros(0, np.float64)
        self._bl = np.zeros(0, bool)
        self._bc = np.zeros(0, bool)  # the graph holds this row's current vector
        # tail block
        self._vecs = np.zeros((capacity, dimension), dtype=np.float32)
        self._keys = np.zeros(capacity, dtype=np.int64)
        self._scope = np.zeros(capacity, dtype=np.int32)
        self._expires = np.full(capacity, np.inf, dtype=np.float64)
        self._live = np.zeros(capacity, dtype=bool)
        self._cov = np.zeros(capacity, dtype=bool)
        self._n = 0
        self._row: dict[int, int] = {}
        self._scope_codes: dict[ScopeKey, int] = {}
        self._count: dict[int, int] = {}  # live rows per scope code (expired ones included)
        self._live_n = 0
        self._uncovered = 0  # live tail rows the graph does not hold
        self.ann: AnnIndex | None = None
        #: ``False``: never insert into the graph on a search (the owner folds rows in off
        #: the query path, see ``_sqlite_vectors``); rows past it are scanned exactly meanwhile
        self.fold_inline = True
        #: keys written or removed since a graph job took its copy of the rows (None: no job)
        self._journal: set[int] | None = None
        #: tail keys whose row was re-written while the graph held its vector: it may still hold
        #: the key (a row re-written in place no longer says so); dropped once held again
        self._outdated: set[int] = set()

    def __len__(self) -> int:
        return self._live_n

    @property
    def uncovered(self) -> int:
        """Live rows the graph does not hold yet (scanned exactly by every search)."""
        return self._uncovered

    # -- bookkeeping -------------------------------------------------------------------

    def _grow(self, need: int) -> None:
        cap = len(self._keys)
        if need <= cap:
            return
        new = max(need, cap * 2)
        self._vecs = np.concatenate([self._vecs, np.zeros((new - cap, self.dimension), np.float32)])
        self._keys = np.concatenate([self._keys, np.zeros(new - cap, np.int64)])
        self._scope = np.concatenate([self._scope, np.zeros(new - cap, np.int32)])
        self._expires = np.concatenate([self._expires, np.full(new - cap, np.inf)])
        self._live = np.concatenate([self._live, np.zeros(new - cap, bool)])
        self._cov = np.concatenate([self._cov, np.zeros(new - cap, bool)])

    def _code(self, scope: ScopeKey) -> int:
        code = self._scope_codes.get(scope)
        if code is None:
            code = self._scope_codes[scope] = len(self._scope_codes) + 1
        return code

    def scope_rows(self, scope: ScopeKey) -> int:
        """How many rows of ``scope`` the index holds (forgotten ones out, expired ones in)."""
        code = self._scope_codes.get(scope)
        return self._count.get(code, 0) if code is not None else 0

    def _base_row(self, key: int) -> int | None:
        i = int(np.searchsorted(self._bk, key))
        return i if i < len(self._bk) and int(self._bk[i]) == key else None

    def _kill_base(self, i: int) -> None:
        if self._bl[i]:
            self._bl[i] = False
            self._count[int(self._bs[i])] -= 1
            self._live_n -= 1

    def _kill_tail(self, r: int) -> None:
        if self._live[r]:
            self._live[r] = False
            self._count[int(self._scope[r])] -= 1
            self._live_n -= 1
            if not self._cov[r]:
                self._uncovered -= 1

    # -- writes ------------------------------------------------------------------------

    def _graph_writable(self, rows: int = 1) -> bool:
        """May this write go into the graph now? Not while a job copies it, nor a batch past ``FOLD_AT`` when folding is off the query path."""
        if self.ann is None or not self.ann.mutable or self._journal is not None:
            return False
        return self.fold_inline or rows <= FOLD_AT

    def upsert(self, key: int, vector: np.ndarray, scope: ScopeKey, expires_at: float | None) -> None:
        self._upsert(key, vector, scope, expires_at)
        if self._graph_writable():
            assert self.ann is not None
            self.ann.add(np.array([key]), np.asarray(vector, np.float32)[None, :], np.array([self._scope_codes[scope]]), self._vector_of)
            self._cover(self._row[key])

    def _upsert(self, key: int, vector: np.ndarray, scope: ScopeKey, expires_at: float | None) -> None:
        if self._journal is not None:
            self._journal.add(key)
        row = self._row.get(key)
        if row is None:
            b = self._base_row(key) if len(self._bk) else None
            if b is not None:
                self._kill_base(b)
            self._grow(self._n + 1)
            row = self._n
            self._n += 1
            self._row[key] = row
            self._keys[row] = key
        else:
            if self._cov[row]:
                self._outdated.add(key)
            self._kill_tail(row)
        code = self._code(scope)
        self._vecs[row] = vector
        self._scope[row] = code
        self._expires[row] = math.inf if expires_at is None else expires_at
        self._live[row] = True
        self._cov[row] = False
        self._count[code] = self._count.get(code, 0) + 1
        self._live_n += 1
        self._uncovered += 1

    def _vector_of(self, key: int) -> np.ndarray | None:
        """The live row's vector of ``key``, or ``None`` (copy groups confirm a match by it)."""
        row = self._row.get(key)
        if row is not None:
            return self._vecs[row] if self._live[row] else None
        b = self._base_row(key) if len(self._bk) else None
        return self._bv[b] if b is not None and self._bl[b] else None

    def _cover(self, row: int) -> None:
        if self._live[row] and not self._cov[row]:
            self._uncovered -= 1
        self._cov[row] = True
        if self._outdated:
            self._outdated.discard(int(self._keys[row]))

    def upsert_many(
        self, keys: np.ndarray, vectors: np.ndarray, scopes: list[ScopeKey], expires: list[float | None]
    ) -> None:
        """Bulk load: an empty index takes the rows as its base in one copy; otherwise row by row."""
        if self._n == 0 and len(self._bk) == 0 and len(keys) and bool(np.all(np.diff(keys) > 0)):
            codes = np.array([self._code(s) for s in scopes], dtype=np.int32)
            exp = np.array([math.inf if e is None else e for e in expires], dtype=np.float64)
            if self._journal is not None:
                self._journal.update(np.asarray(keys).tolist())
            self._set_base(np.asarray(keys, np.int64), np.ascontiguousarray(vectors, np.float32), codes, exp)
            return
        for i in range(len(keys)):
            self._upsert(int(keys[i]), vectors[i], scopes[i], expires[i])
        if len(keys) and self._graph_writable(len(keys)):
            assert self.ann is not None
            self.ann.add(np.asarray(keys), np.asarray(vectors, np.float32), np.array([self._scope_codes[s] for s in scopes]), self._vector_of)
            for k in keys.tolist():
                self._cover(self._row[k])

    def _set_base(self, keys: np.ndarray, vecs: np.ndarray, codes: np.ndarray, exp: np.ndarray) -> None:
        self._bv, self._bk, self._bs, self._be = vecs, keys, codes, exp
        self._bl = np.ones(len(keys), bool)
        self._bc = np.zeros(len(keys), bool)
        counts = np.bincount(codes) if len(codes) else np.zeros(0, np.int64)
        for code in np.flatnonzero(counts).tolist():
            self._count[code] = self._count.get(code, 0) + int(counts[code])
        self._live_n += len(keys)

    def remove(self, key: int) -> None:
        if self._journal is not None:
            self._journal.add(key)
        row = self._row.get(key)
        if row is not None:
            self._kill_tail(row)
        elif len(self._bk):
            b = self._base_row(key)
            if b is None:
                return
            self._kill_base(b)
        else:
            return
        if self._graph_writable():  # (else the graph keeps a dead key, which liveness filters out)
            assert self.ann is not None
            self.ann.remove(np.array([key]))
            self._outdated.discard(key)

    # -- the ANN tier --------------------------------------------------------------------

    def build_ann(self) -> None:
        """Build the graph over every live row (batch insert on all cores)."""
        arrays = self._row_arrays()
        self.attach_ann(AnnIndex.build(arrays["keys"], arrays["vecs"], arrays["scope"]))

    # A graph job (build or fold) runs off the query path: ``begin_job`` under the
    # owner's lock takes what it needs and starts a journal of the keys written since;
    # ``finish_job`` (under the lock again) brings the job's graph up to date with those
    # keys and attaches it. Meanwhile the current graph (if any) is only read.

    def begin_job(self) -> None:
        self._journal = set()

    def uncovered_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Keys, vectors and scope codes (copies) of the live rows the graph does not hold."""
        rows = np.flatnonzero(self._live[: self._n] & ~self._cov[: self._n])
        return self._keys[rows].copy(), self._vecs[rows].copy(), self._scope[rows].copy()

    def abort_job(self) -> None:
        self._journal = None

    def finish_job(self, ann: AnnIndex) -> None:
        """Attach ``ann`` (which holds every row live when the job began, as it was then).

        Keys written or removed since are re-inserted with their current vector or
        taken out, so the graph holds exactly the current live rows' vectors.
        """
        journal, self._journal = self._journal or set(), None
        if self.ann is not None:
            # A fold's copy of the current graph holds its dead keys too (rows killed while it
            # was a read-only map or a job ran); attached as it is, that would be forgotten.
            stale = self._stale_keys()
            if stale.size:
                ann.remove(stale)
        if not journal:
            self.attach_ann(ann)
            return
        keys = np.fromiter(journal, dtype=np.int64, count=len(journal))
        ann.remove(keys)
        kb, rb, kt, rt = self._lookup(keys)  # (a journaled key's base row is dead: written or removed)
        rt = rt[self._live[rt]]
        few = rt.size <= FOLD_AT
        if kb.size or (few and rt.size):
            add = rt if few else rt[:0]
            ann.add(
                np.concatenate([kb, self._keys[add]]),
                np.concatenate([self._bv[rb], self._vecs[add]]),
                np.concatenate([self._bs[rb], self._scope[add]]),
                self._vector_of,
            )
        self.attach_ann(ann)
        if not few:
            # Many writes meanwhile: inserting them here would hold the owner's lock for long.
            # The graph goes in without them; they stay scanned exactly until a fold job.
            self._cov[rt] = False
            self._uncovered = int(rt.size)

    def attach_ann(self, ann: AnnIndex) -> None:
        """Use ``ann`` as the graph; it must hold exactly the current live rows' vectors."""
        self.ann = ann
        self._bc = self._bl.copy()
        self._cov[: self._n] = self._live[: self._n]
        self._uncovered = 0
        self._outdated.clear()

    def _fold(self) -> None:
        """Insert the rows written past a mapped graph into an in-memory copy of it."""
        assert self.ann is not None
        rows = np.flatnonzero(self._live[: self._n] & ~self._cov[: self._n])
        if rows.size:
            self.ann.add(self._keys[rows], self._vecs[rows], self._scope[rows], self._vector_of)
            self._cov[rows] = True
        self._uncovered = 0

    def _stale_keys(self) -> np.ndarray:
        """Keys of dead rows the graph still holds."""
        dead = self._bk[~self._bl & self._bc]
        # rows killed while the graph was a read-only map (or a job ran) still sit in it, unless
        # re-written into a row that is still live (re-written, then forgotten: the key is dead);
        # so may tail rows killed then
        live_row = lambda k: (r := self._row.get(k)) is not None and bool(self._live[r])  # noqa: E731
        dead = np.array([k for k in dead.tolist() if not live_row(k)], dtype=np.int64)
        n = self._n
        dead_t = self._keys[:n][~self._live[:n] & self._cov[:n]]
        gone = np.array([k for k in self._outdated if not live_row(k)], dtype=np.int64)
        return np.unique(np.concatenate([dead, dead_t, gone]))

    def settle_ann(self) -> None:
        """Have the graph (and its copy groups) hold exactly the live rows: fold in the rows it
        lacks, take out the dead keys it still holds (before a snapshot of both is written)."""
        if self.ann is None:
            return
        if self._uncovered:
            self._fold()
        dead = self._stale_keys()
        if dead.size:
            self.ann.remove(dead)
        self._bc &= self._bl
        self._cov[: self._n] &= self._live[: self._n]  # (so a second settle finds nothing to take out)
        self._outdated.clear()  # (the live ones were folded in, the dead ones just taken out)

    def save_ann(self, path: Any) -> bool:
        """Write the graph to ``path`` if it holds exactly the live rows; False if there is none."""
        if self.ann is None:
            return False
        self.settle_ann()
        self.ann.save(path)
        return True

    # -- search ------------------------------------------------------------------------

    def search(
        self,
        query: np.ndarray,
        scope: ScopeKey,
        limit: int,
        *,
        now: float,
        only: Iterable[int] | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (key, cosine) in ``scope``, live and unexpired, best first.

        ``only`` restricts the search to those keys (metadata filter candidates).
        Scores are always exact cosines of the stored vectors.
        """
        code = self._scope_codes.get(scope)
        if code is None or self._live_n == 0:
            return []
        only_arr = None if only is None else np.fromiter(only, dtype=np.int64)
        if self.ann is not None:
            with one_blas_thread():
                found = self._ann_search(query, code, limit, now, only_arr)
            if found is not None:
                return found
        scan = self._live_n if only_arr is None else len(only_arr)
        with one_blas_thread() if scan < PARALLEL_FROM else contextlib.nullcontext():
            return self._exact(query, code, limit, now, only_arr)

    def _top(self, keys: np.ndarray, scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
        if scores.size == 0:
            return []
        k = min(limit, scores.size)
        top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
        top = top[np.lexsort((keys[top], -scores[top]))]  # best first; equal scores by key
        return [(int(keys[i]), float(scores[i])) for i in top]

    def _lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(key_b, base_rows, key_t, tail_rows)``: where each key's current row is."""
        if len(self._bk):
            i = np.minimum(np.searchsorted(self._bk, keys), len(self._bk) - 1)
            in_b = (self._bk[i] == keys) & self._bl[i]
        else:
            i, in_b = np.zeros(len(keys), np.int64), np.zeros(len(keys), bool)
        rest = keys[~in_b]
        tr = [self._row.get(k, -1) for k in rest.tolist()]
        t = np.array(tr, dtype=np.int64)
        ok = t >= 0
        return keys[in_b], i[in_b], rest[ok], t[ok]

    def _ok_b(self, rows: np.ndarray, code: int, now: float) -> np.ndarray:
        return self._bl[rows] & (self._bs[rows] == code) & (self._be[rows] > now)

    def _ok_t(self, rows: np.ndarray, code: int, now: float) -> np.ndarray:
        return self._live[rows] & (self._scope[rows] == code) & (self._expires[rows] > now)

    def _exact(
        self, q: np.ndarray, code: int, limit: int, now: float, only: np.ndarray | None
    ) -> list[tuple[int, float]]:
        parts_k: list[np.ndarray] = []
        parts_s: list[np.ndarray] = []
        if only is not None:
            kb, rb, kt, rt = self._lookup(only)
            okb, okt = self._ok_b(rb, code, now), self._ok_t(rt, code, now)
            rb, kb, rt, kt = rb[okb], kb[okb], rt[okt], kt[okt]
            parts_k += [kb, kt]
            parts_s += [self._bv[rb] @ q, self._vecs[rt] @ q]
        else:
            for vecs, keys, sc, ex, lv, n in (
                (self._bv, self._bk, self._bs, self._be, self._bl, len(self._bk)),
                (self._vecs, self._keys, self._scope, self._expires, self._live, self._n),
            ):
                if n == 0:
                    continue
                ok = lv[:n] & (sc[:n] == code) & (ex[:n] > now)
                rows = np.flatnonzero(ok)
                if rows.size == 0:
                    continue
                if rows.size * 2 < n:  # a small scope: gather its rows
                    scores = vecs[rows] @ q
                else:
                    scores = (vecs[:n] @ q)[rows]
                parts_k.append(keys[rows])
                parts_s.append(scores)
        if not parts_k:
            return []
        return self._top(np.concatenate(parts_k), np.concatenate(parts_s).astype(np.float32), limit)

    def _ann_search(
        self, q: np.ndarray, code: int, limit: int, now: float, only: np.ndarray | None
    ) -> list[tuple[int, float]] | None:
        """Graph candidates, filtered and re-scored; ``None`` means: do an exact search."""
        assert self.ann is not None
        if only is not None and len(only) <= EXACT_ONLY_MAX:
            return None
        if self._uncovered > FOLD_AT and self.fold_inline:
            self._fold()
        eligible = self._count.get(code, 0)
        in_graph = eligible - self.ann.copies.held_in(code)  # (the scope's rows the graph itself holds, about)
        if only is not None:
            eligible, in_graph = min(eligible, len(only)), min(in_graph, len(only))
        if eligible == 0:
            return []
        # over-fetch by the share of the graph's own rows in scope
        k = math.ceil(max(limit * 4, 40) / (in_graph / max(1, len(self.ann)))) if in_graph > 0 else 0
        if in_graph > 0 and k > min(ANN_MAX_K, len(self.ann) - 1):  # asking the graph for all it holds: exact costs no more
            return None
        only_sorted = None if only is None else np.unique(only)
        # held outside the graph, and complete: its copy groups' rows, and (written past a mapped
        # graph) the rows it lacks, scanned exactly
        copies = self._copy_rows(q, code, limit, now, only_sorted)
        kb_out, rb_out, kt_out, rt_out = copies
        if self._uncovered:
            tail = np.flatnonzero(self._live[: self._n] & ~self._cov[: self._n])
            ut = tail[self._ok_t(tail, code, now)]
            ut = ut[np.isin(self._keys[ut], only_sorted)] if only_sorted is not None else ut
            kt_out, rt_out = np.concatenate([kt_out, self._keys[ut]]), np.concatenate([rt_out, ut])
        if in_graph <= 0:
            return self._rescored(q, kb_out, rb_out, kt_out, rt_out, limit)
        while k <= ANN_MAX_K:
            if k >= len(self.ann):  # asking the graph for all it holds: the rows, exactly, cost no more
                return None
            cand, dist = self.ann.search_distances(q, k)
            if len(cand) > CROWD and int(np.unique(dist, return_counts=True)[1].max()) > CROWD:
                return None
            kb, rb, kt, rt = self._held(cand, code, now, only_sorted)
            # Enough only when the graph's own candidates fill the limit: rows held outside it say
            # nothing of the graph rows not reached yet, and a short list is not "no more" (HNSW
            # returns fewer than asked while more exist, among near-equal vectors, or with parts of
            # a graph left hard to reach by removals): ask again, wider, then exactly.
            if len(kb) + len(kt) >= limit:
                return self._rescored(
                    q, np.concatenate([kb, kb_out]), np.concatenate([rb, rb_out]),
                    np.concatenate([kt, kt_out]), np.concatenate([rt, rt_out]), limit,
                )  # fmt: skip
            k *= 4
        return None

    def _rescored(
        self, q: np.ndarray, kb: np.ndarray, rb: np.ndarray, kt: np.ndarray, rt: np.ndarray, limit: int
    ) -> list[tuple[int, float]]:
        keys = np.concatenate([kb, kt])
        scores = np.concatenate([self._bv[rb] @ q, self._vecs[rt] @ q]).astype(np.float32)
        return self._top(keys, scores, limit)

    def _held(
        self, keys: np.ndarray, code: int, now: float, only_sorted: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``_lookup`` of keys the graph (or a copy group) proposed, kept if their current row is
        the one it holds, in ``scope``, live, unexpired and among ``only_sorted``."""
        kb, rb, kt, rt = self._lookup(keys)
        okb = self._ok_b(rb, code, now) & self._bc[rb]
        okt = self._ok_t(rt, code, now) & self._cov[rt]
        kb, rb, kt, rt = kb[okb], rb[okb], kt[okt], rt[okt]
        if only_sorted is not None:
            mb, mt = np.isin(kb, only_sorted), np.isin(kt, only_sorted)
            kb, rb, kt, rt = kb[mb], rb[mb], kt[mt], rt[mt]
        return kb, rb, kt, rt

    def _copy_rows(
        self, q: np.ndarray, code: int, limit: int, now: float, only_sorted: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rows of the copy groups a search must consider, as ``_held`` gives them.

        Every group is scored once (its vector is each member's); members are taken group by
        group, best first, until ``limit`` of them pass the filters and the next group scores
        lower than the last one taken: no member of a group left out can rank above them.
        """
        assert self.ann is not None
        groups, gscores = self.ann.copies.ranked(q, code)
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        got, at, step = 0, 0, 8
        while at < len(groups):
            chunk = groups[at : at + step]
            at += step
            found.append(self._held(self.ann.copies.members(chunk), code, now, only_sorted))
            got += len(found[-1][0]) + len(found[-1][2])
            if got >= limit and (at >= len(groups) or gscores[at] < gscores[at - 1]):
                break
            step *= 2
        if not found:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty, empty
        kb, rb, kt, rt = (np.concatenate(parts) for parts in zip(*found, strict=True))
        return kb, rb, kt, rt

    def scores_for(self, query: np.ndarray, keys: Iterable[int]) -> dict[int, float]:
        """Cosine of ``query`` with each known key (for hybrid fusion of keyword hits)."""
        arr = np.fromiter(keys, dtype=np.int64)
        if arr.size == 0:
            return {}
        kb, rb, kt, rt = self._lookup(arr)
        with one_blas_thread():
            sb, st = self._bv[rb] @ query, self._vecs[rt] @ query
        out = {int(k): float(s) for k, s in zip(kb.tolist(), sb.tolist(), strict=True)}
        out.update({int(k): float(s) for k, s, r in zip(kt.tolist(), st.tolist(), rt.tolist(), strict=True) if self._live[r]})
        return out

    # -- snapshot to / from plain arrays (the sidecar cache) ----------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The live rows as plain arrays, sorted by key (see :meth:`from_arrays`), and the graph's
        copy groups (``_ann_copies``) if it has any: call :meth:`settle_ann` first."""
        arrays = self._row_arrays()
        if self.ann is not None:
            arrays.update(self.ann.copies.to_arrays())
        return arrays

    def _row_arrays(self) -> dict[str, np.ndarray]:
        bl, n = self._bl, self._n
        tl = np.flatnonzero(self._live[:n])
        scopes = sorted(self._scope_codes, key=self._scope_codes.__getitem__)
        if tl.size == 0 and bl.all():  # the base as it is (never written): no copy of the vectors
            return {"keys": self._bk, "vecs": self._bv, "scope": self._bs, "expires": self._be,
                    "scopes": np.array(["\x1f".join(s) for s in scopes], dtype=object)}  # fmt: skip
        keys = np.concatenate([self._bk[bl], self._keys[tl]])
        order = np.argsort(keys, kind="stable") if tl.size else None  # live base rows are sorted already

        def cat(b: np.ndarray, t: np.ndarray) -> np.ndarray:
            out = np.concatenate([b[bl], t[tl]])
            return out if order is None else out[order]

        return {
            "keys": keys if order is None else keys[order],
            "vecs": cat(self._bv, self._vecs),
            "scope": cat(self._bs, self._scope),
            "expires": cat(self._be, self._expires),
            "scopes": np.array(["\x1f".join(s) for s in scopes], dtype=object),
        }

    @classmethod
    def from_arrays(cls, dimension: int, arrays: Mapping[str, np.ndarray]) -> VectorIndex:
        """An index whose base *is* these arrays (``vecs`` may be a read-only memory map)."""
        keys, vecs = np.asarray(arrays["keys"], np.int64), arrays["vecs"]
        if vecs.ndim != 2 or vecs.shape[1] != dimension or len(keys) != len(vecs) or vecs.dtype != np.float32:
            raise ValueError("vector snapshot has the wrong shape")
        if len(keys) > 1 and not bool(np.all(np.diff(keys) > 0)):
            raise ValueError("vector snapshot keys are not sorted")
        ix = cls(dimension)
        for code, joined in enumerate(arrays["scopes"].tolist(), start=1):
            parts = tuple(str(joined).split("\x1f"))
            if len(parts) != 4:
                raise ValueError("bad scope in vector snapshot")
            ix._scope_codes[parts] = code
        codes = np.asarray(arrays["scope"], np.int32)
        if len(codes) != len(keys) or (len(codes) and (codes.min() < 1 or codes.max() > len(ix._scope_codes))):
            raise ValueError("bad scope codes in vector snapshot")
        expires = np.asarray(arrays["expires"], np.float64)
        if expires.shape != keys.shape:
            raise ValueError("bad expiry times in vector snapshot")
        ix._set_base(keys, vecs, codes, expires)
        return ix
