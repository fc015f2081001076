"""Copies of one vector, kept out of the graph and scored once per search.

One content stored many times (a greeting, a heartbeat record, boilerplate) gives rows
whose vectors are equal to the last bit. HNSW cannot route through thousands of equal
points: they fill each other's neighbour lists, the graph around them falls apart, and
searches elsewhere miss rows (measured before this: 3,000 copies of one content in
6,100 rows, 17 of 100 small-scope top-10 lists differed from exact search).

So the graph holds each vector once. Rows of one scope whose vector equals another's
form a **group**: its vector (kept here, float32, exact) and its members' keys. A
search scores every group of its scope exactly (one product over the groups, not the
members) and takes the members of the best groups, best first, until enough of them
pass the filters (:meth:`VectorIndex._copy_rows <atomic_agents.memory._vectors.VectorIndex>`);
they join the graph's candidates and are re-scored with them.

Equality is found by a 64-bit hash of each vector's bytes (each 64-bit word mixed
with its position by splitmix64's finaliser, then summed: vectorised, where blake2b
would cost 6 s per million rows), and always confirmed byte for byte: against a
group's vector, an earlier row of the same batch, or (a graph key written since the
graph was built or opened) that key's current row, which the caller looks up. A hash
shared by different vectors therefore only means they are not grouped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:  # bound on first use (see _lazy)
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

__all__ = ["CopyGroups", "row_hashes"]

#: Graph keys remembered by hash (written one by one since the graph was built or
#: opened), so that the second copy of a content pulls the first out of the graph.
#: Past this many a further copy of such a content just goes into the graph.
RECENT_MAX = 200_000

_SALT: Any = None


def row_hashes(vectors: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's float32 bytes (equal rows, equal hashes; others, almost never)."""
    global _SALT
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    if v.shape[1] % 2:  # whole 64-bit words
        v = np.concatenate([v, np.zeros((len(v), 1), np.float32)], axis=1)
    words = v.view(np.uint64)
    if _SALT is None or len(_SALT) < words.shape[1]:
        rng = np.random.default_rng(0x41A6E7)
        _SALT = rng.integers(0, 2**63, size=max(words.shape[1], 512), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    salt = _SALT[: words.shape[1]]
    out = np.empty(len(words), np.uint64)
    with np.errstate(over="ignore"):
        for s in range(0, len(words), 8_192):  # (bounded temporaries)
            x = words[s : s + 8_192] + salt  # (the word's place in the row)
            x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            out[s : s + 8_192] = (x ^ (x >> np.uint64(31))).sum(axis=1, dtype=np.uint64)
    return out


class CopyGroups:
    """The groups of equal vectors a graph leaves out, and the graph keys it may still pull out."""

    def __init__(self, ndim: int) -> None:
        self.ndim = ndim
        self._vecs: list[np.ndarray] = []
        self._mat: np.ndarray | None = None  # the group vectors stacked (built on first search)
        self._members: list[list[int]] = []
        self._tags: list[int] = []  # each group's scope (the caller's code for it)
        self._by_tag: dict[int, list[int]] = {}
        self._by_hash: dict[tuple[int, int], int] = {}  # (hash, tag) -> group
        self._group_of: dict[int, int] = {}
        self._held_by_tag: dict[int, int] = {}  # rows the groups hold, per scope
        self._recent: dict[tuple[int, int], int] = {}  # (hash, tag) -> graph key
        self._recent_of: dict[int, tuple[int, int]] = {}  # graph key -> (hash, tag)

    def __len__(self) -> int:
        """How many rows the groups hold (rows the graph does not)."""
        return len(self._group_of)

    def __contains__(self, key: int) -> bool:
        return key in self._group_of

    def copy(self) -> CopyGroups:
        out = CopyGroups(self.ndim)
        out._vecs, out._mat = list(self._vecs), self._mat
        out._members = [list(m) for m in self._members]
        out._tags, out._by_tag = list(self._tags), {t: list(g) for t, g in self._by_tag.items()}
        out._by_hash, out._group_of = dict(self._by_hash), dict(self._group_of)
        out._held_by_tag = dict(self._held_by_tag)
        out._recent, out._recent_of = dict(self._recent), dict(self._recent_of)
        return out

    # -- writes ---------------------------------------------------------------------------

    def _new_group(self, h: int, tag: int, vector: np.ndarray, keys: list[int]) -> None:
        g = len(self._vecs)
        self._vecs.append(np.array(vector, dtype=np.float32))
        self._mat = None
        self._members.append(list(keys))
        self._tags.append(tag)
        self._by_tag.setdefault(tag, []).append(g)
        self._by_hash[h, tag] = g
        for k in keys:
            self._group_of[k] = g
        self._held_by_tag[tag] = self._held_by_tag.get(tag, 0) + len(keys)

    def held_in(self, tag: int) -> int:
        """How many rows of scope ``tag`` the groups hold (the graph does not)."""
        return self._held_by_tag.get(tag, 0)

    def _drop_recent(self, key: int) -> None:
        h = self._recent_of.pop(key, None)
        if h is not None and self._recent.get(h) == key:
            del self._recent[h]

    def split(self, keys: np.ndarray, vectors: np.ndarray, tags: np.ndarray) -> np.ndarray:
        """For a new graph over these rows (``tags``: each one's scope): group the copies; the mask of rows the graph takes."""
        hashes = row_hashes(vectors)
        tags = np.asarray(tags, np.int64)
        with np.errstate(over="ignore"):
            both = hashes ^ (tags.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        _, first, inverse, counts = np.unique(both, return_index=True, return_inverse=True, return_counts=True)
        shared = np.flatnonzero(counts[inverse] > 1)
        to_graph = np.ones(len(keys), bool)
        if shared.size == 0:
            return to_graph
        lead = first[inverse[shared]]  # each row's first row of the same hash and scope
        # (a hash collision stays in the graph)
        equal = np.all(vectors[shared] == vectors[lead], axis=1) & (tags[shared] == tags[lead]) & (hashes[shared] == hashes[lead])
        rows, lead = shared[equal], lead[equal]
        order = np.argsort(lead, kind="stable")
        rows, lead = rows[order], lead[order]
        starts = np.flatnonzero(np.r_[True, lead[1:] != lead[:-1]])
        for s, e in zip(starts.tolist(), [*starts[1:].tolist(), len(rows)], strict=True):
            group = rows[s:e]
            if len(group) > 1:  # (a row equal to its own lead only: that lead's other rows collided)
                self._new_group(int(hashes[group[0]]), int(tags[group[0]]), vectors[group[0]], [int(k) for k in keys[group]])
                to_graph[group] = False
        return to_graph

    def route(
        self, keys: np.ndarray, vectors: np.ndarray, tags: np.ndarray, vector_of: Callable[[int], np.ndarray | None] | None = None
    ) -> tuple[np.ndarray, list[int]]:
        """Rows about to be written (none of them held anywhere; ``tags``: their scopes): the mask
        of those the graph takes, and the graph keys that now have a copy (take them out of the graph).

        A row equal to a group's vector (in its scope) joins it; equal to an earlier row of this
        batch, or to a graph key written since the graph was built or opened (``vector_of(key)``:
        that key's current vector, or ``None``; without it such keys are not looked at), it forms
        a group with it. Every match is confirmed byte for byte.
        """
        hashes = list(zip(row_hashes(vectors).tolist(), np.asarray(tags, np.int64).tolist(), strict=True))
        to_graph = np.ones(len(keys), bool)
        pending: dict[tuple[int, int], int] = {}  # (hash, tag) -> row of this batch bound for the graph
        out: list[int] = []
        for i, k in enumerate(keys.tolist()):
            h = hashes[i]
            g = self._by_hash.get(h)
            if g is not None:
                if np.array_equal(self._vecs[g], vectors[i]):
                    self._members[g].append(k)
                    self._group_of[k] = g
                    self._held_by_tag[h[1]] = self._held_by_tag.get(h[1], 0) + 1
                    to_graph[i] = False
                continue  # (a hash shared with a group's vector, not its bytes: into the graph)
            j = pending.get(h)
            if j is not None:
                if np.array_equal(vectors[j], vectors[i]):
                    del pending[h]
                    self._new_group(*h, vectors[j], [int(keys[j]), k])
                    to_graph[i] = to_graph[j] = False
                continue
            u = self._recent.get(h)
            if u is not None and vector_of is not None:
                held = vector_of(u)
                if held is not None and np.array_equal(held, vectors[i]):
                    self._drop_recent(u)
                    self._new_group(*h, vectors[i], [u, k])
                    out.append(u)
                    to_graph[i] = False
                    continue
            pending[h] = i
        for h, i in pending.items():
            if len(self._recent) < RECENT_MAX:
                k = int(keys[i])
                self._recent[h], self._recent_of[k] = k, h
        return to_graph, out

    def remove(self, keys: np.ndarray) -> None:
        """These keys leave the groups (and the graph keys remembered by hash)."""
        for k in keys.tolist():
            g = self._group_of.pop(k, None)
            if g is not None:
                self._members[g].remove(k)
                self._held_by_tag[self._tags[g]] -= 1
            self._drop_recent(k)

    # -- search ---------------------------------------------------------------------------

    def ranked(self, query: np.ndarray, tag: int) -> tuple[np.ndarray, np.ndarray]:
        """The groups of scope ``tag`` that have members, best first, and their cosines with ``query``."""
        mine = self._by_tag.get(tag)
        if not mine:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if self._mat is None:
            self._mat = np.stack(self._vecs)
        held = np.array([g for g in mine if self._members[g]], dtype=np.int64)
        if held.size == 0:
            return held, np.zeros(0, np.float32)
        scores = self._mat[held] @ query
        order = np.lexsort((held, -scores))
        return held[order], scores[order]

    def holds(self, key: int, vector: np.ndarray) -> bool:
        """Is ``key`` a member of a group whose vector is ``vector``?"""
        g = self._group_of.get(key)
        return g is not None and np.array_equal(self._vecs[g], vector)

    def keys(self) -> np.ndarray:
        """Every row the groups hold."""
        return np.fromiter(self._group_of, dtype=np.int64, count=len(self._group_of))

    def members(self, groups: np.ndarray) -> np.ndarray:
        return np.fromiter((k for g in groups.tolist() for k in self._members[g]), dtype=np.int64)

    # -- to / from the snapshot ------------------------------------------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        """``copy_vecs`` (one row per group), ``copy_ptr`` (its members' slice), ``copy_keys``; empty: none."""
        kept = [g for g in range(len(self._members)) if self._members[g]]
        if not kept:
            return {}
        sizes = [len(self._members[g]) for g in kept]
        return {
            "copy_vecs": np.stack([self._vecs[g] for g in kept]),
            "copy_tags": np.array([self._tags[g] for g in kept], dtype=np.int64),
            "copy_ptr": np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            "copy_keys": np.array([k for g in kept for k in self._members[g]], dtype=np.int64),
        }

    @classmethod
    def from_arrays(cls, ndim: int, arrays: Mapping[str, Any]) -> CopyGroups:
        """The groups of a snapshot (no ``copy_keys``: none); ``ValueError`` if they do not read as groups."""
        out = cls(ndim)
        if "copy_keys" not in arrays:
            return out
        if not all(k in arrays for k in ("copy_vecs", "copy_tags", "copy_ptr")):
            raise ValueError("copy groups are incomplete")
        vecs = np.asarray(arrays["copy_vecs"])
        tags = np.asarray(arrays["copy_tags"], np.int64)
        ptr = np.asarray(arrays["copy_ptr"], np.int64)
        keys = np.asarray(arrays["copy_keys"], np.int64)
        if vecs.dtype != np.float32 or vecs.ndim != 2 or vecs.shape[1] != ndim or ptr.shape != (len(vecs) + 1,):
            raise ValueError("copy groups have the wrong shape")
        if tags.shape != (len(vecs),):
            raise ValueError("copy groups have the wrong number of scopes")
        if ptr[0] != 0 or ptr[-1] != len(keys) or bool(np.any(np.diff(ptr) < 1)) or len(np.unique(keys)) != len(keys):
            raise ValueError("copy groups do not partition their keys")
        hashes = row_hashes(vecs).tolist()
        for g in range(len(vecs)):
            out._new_group(hashes[g], int(tags[g]), vecs[g], keys[ptr[g] : ptr[g + 1]].tolist())
        return out
