"""An in-memory matrix of unit vectors searched by exact brute force.

Rows are keyed by an integer (the backend's row id). Removal only clears a
``live`` flag so a search never pays for compaction; :meth:`VectorIndex.upsert`
reuses the row of a key it already has. The buffer grows by doubling, so
appending one vector is amortised O(d), not a copy of the whole matrix.

Exact search over 100k x 384 float32 is one matrix-vector product (~150 MB
read); an approximate index is a later step above ~200k rows.

>>> ix = VectorIndex(2)
>>> ix.upsert(7, np.array([1.0, 0.0], np.float32), ("a", "u", "o", "w"), None)
>>> ix.search(np.array([1.0, 0.0], np.float32), ("a", "u", "o", "w"), 3, now=0.0)
[(7, 1.0)]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["VectorIndex"]

ScopeKey = tuple[str, str, str, str]


class VectorIndex:
    def __init__(self, dimension: int, capacity: int = 1024) -> None:
        self.dimension = dimension
        self._vecs = np.zeros((capacity, dimension), dtype=np.float32)
        self._keys = np.zeros(capacity, dtype=np.int64)
        self._scope = np.zeros(capacity, dtype=np.int32)
        self._expires = np.full(capacity, np.inf, dtype=np.float64)
        self._live = np.zeros(capacity, dtype=bool)
        self._n = 0
        self._row: dict[int, int] = {}
        self._scope_codes: dict[ScopeKey, int] = {}

    def __len__(self) -> int:
        return int(self._live[: self._n].sum())

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

    def _code(self, scope: ScopeKey) -> int:
        code = self._scope_codes.get(scope)
        if code is None:
            code = self._scope_codes[scope] = len(self._scope_codes) + 1
        return code

    def upsert(self, key: int, vector: np.ndarray, scope: ScopeKey, expires_at: float | None) -> None:
        row = self._row.get(key)
        if row is None:
            self._grow(self._n + 1)
            row = self._n
            self._n += 1
            self._row[key] = row
            self._keys[row] = key
        self._vecs[row] = vector
        self._scope[row] = self._code(scope)
        self._expires[row] = math.inf if expires_at is None else expires_at
        self._live[row] = True

    def upsert_many(
        self, keys: np.ndarray, vectors: np.ndarray, scopes: list[ScopeKey], expires: list[float | None]
    ) -> None:
        """Bulk load: appends fresh keys with one copy; known keys fall back to :meth:`upsert`."""
        fresh = [i for i, k in enumerate(keys.tolist()) if k not in self._row]
        if len(fresh) != len(keys):
            for i in range(len(keys)):
                self.upsert(int(keys[i]), vectors[i], scopes[i], expires[i])
            return
        n, m = self._n, len(keys)
        self._grow(n + m)
        self._vecs[n : n + m] = vectors
        self._keys[n : n + m] = keys
        self._scope[n : n + m] = [self._code(s) for s in scopes]
        self._expires[n : n + m] = [math.inf if e is None else e for e in expires]
        self._live[n : n + m] = True
        for i, k in enumerate(keys.tolist()):
            self._row[k] = n + i
        self._n = n + m

    def remove(self, key: int) -> None:
        row = self._row.get(key)
        if row is not None:
            self._live[row] = False

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
        """
        code = self._scope_codes.get(scope)
        if code is None or self._n == 0:
            return []
        n = self._n
        if only is not None:
            rows = np.fromiter((self._row[k] for k in only if k in self._row), dtype=np.int64)
            if rows.size == 0:
                return []
            ok = self._live[rows] & (self._scope[rows] == code) & (self._expires[rows] > now)
            rows = rows[ok]
            if rows.size == 0:
                return []
            scores = self._vecs[rows] @ query
            keys = self._keys[rows]
        else:
            scores = self._vecs[:n] @ query
            ok = self._live[:n] & (self._scope[:n] == code) & (self._expires[:n] > now)
            scores = np.where(ok, scores, -np.inf)
            keys = self._keys[:n]
        k = min(limit, scores.size)
        top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(keys[i]), float(scores[i])) for i in top if scores[i] > -np.inf]

    def scores_for(self, query: np.ndarray, keys: Iterable[int]) -> dict[int, float]:
        """Cosine of ``query`` with each known key (for hybrid fusion of keyword hits)."""
        out: dict[int, float] = {}
        for k in keys:
            row = self._row.get(k)
            if row is not None and self._live[row]:
                out[k] = float(self._vecs[row] @ query)
        return out

    # -- snapshot to / from plain arrays (the sidecar cache) ----------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The live rows as plain arrays (see :meth:`from_arrays`)."""
        n = self._n
        live = self._live[:n]
        scopes = sorted(self._scope_codes, key=self._scope_codes.__getitem__)
        return {
            "keys": self._keys[:n][live],
            "vecs": self._vecs[:n][live],
            "scope": self._scope[:n][live],
            "expires": self._expires[:n][live],
            "scopes": np.array(["\x1f".join(s) for s in scopes], dtype=object),
        }

    @classmethod
    def from_arrays(cls, dimension: int, arrays: Mapping[str, np.ndarray]) -> VectorIndex:
        keys, vecs = arrays["keys"], arrays["vecs"]
        if vecs.ndim != 2 or vecs.shape[1] != dimension or len(keys) != len(vecs):
            raise ValueError("vector snapshot has the wrong shape")
        ix = cls(dimension, capacity=max(1024, len(keys) + len(keys) // 4))
        n = len(keys)
        ix._vecs[:n] = vecs
        ix._keys[:n] = keys
        ix._scope[:n] = arrays["scope"]
        ix._expires[:n] = arrays["expires"]
        ix._live[:n] = True
        ix._n = n
        ix._row = {int(k): i for i, k in enumerate(keys.tolist())}
        for code, joined in enumerate(arrays["scopes"].tolist(), start=1):
            parts = tuple(str(joined).split("\x1f"))
            if len(parts) != 4:
                raise ValueError("bad scope in vector snapshot")
            ix._scope_codes[parts] = code
        return ix
