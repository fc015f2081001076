"""The approximate tier: a usearch HNSW graph that proposes candidates, never scores.

Why usearch and not hnswlib: usearch ships manylinux/macOS/Windows wheels (hnswlib
0.8.0 is an sdist that needs a C++ compiler on the user's machine), and a saved
usearch index can be *viewed* (memory-mapped) instead of read, which is what makes
a cold start at 1M rows cheap. The graph stores int8-quantised vectors: it only
proposes keys; :class:`~atomic_agents.memory._vectors.VectorIndex` re-scores every
candidate exactly against the float32 rows, so a returned score is the exact cosine.

Keys are the backend's row ids (``memories.seq``). The file ``<db>-ann.usearch``
sits beside the database; the snapshot header (see ``_matrix_cache``) records
which file it goes with, and any doubt about it means: rebuild from the rows.

The graph holds each vector once: rows whose vectors are equal (one content stored
many times) are kept out of it, in :class:`~._ann_copies.CopyGroups`, which a search
scores group by group. Every write goes through :meth:`AnnIndex.add` and
:meth:`AnnIndex.remove`, which keep the two apart.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:  # bound on first use (see _lazy): keyword search and listing never import numpy
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

from ._ann_copies import CopyGroups

__all__ = ["ANN_THRESHOLD", "AnnIndex", "BuildCancelled", "ann_threshold"]

#: Below this many live vectors exact search is already under a millisecond or two;
#: above it the graph is built (once) and kept in step. Overridable per store or by
#: the ``ATOMIC_AGENTS_ANN_THRESHOLD`` environment variable (``0`` turns the tier off).
ANN_THRESHOLD = 20_000

#: Links per node (usearch doubles it on the base level). Measured at 1M on the bench corpus
#: (2 shared cores, expansion_add 48): 16 -> 225 s build, 533 MB, recall@10 0.960 / 0.977 /
#: 0.989 at width 400 / 600 / 800 (the graph alone, 40 candidates re-scored exactly); 32 ->
#: 216 s, 660 MB, 0.983 / 0.992 / 0.995, and 0.988 at 500. Through the store (the vector
#: index's search, 2 x 500 real-model queries interleaved): 32 at 500 -> 3.01 / 4.29 and 3.02 /
#: 4.63 ms p50 / p95, recall@10 0.987 / 0.986; 16 at 800 -> 3.82 / 5.38 and 4.09 / 5.74 ms,
#: 0.987 / 0.983. More links cost the build nothing (its time is memory latency, not
#: distances) and let a narrower beam find the same neighbours.
_CONNECTIVITY = 32
#: Beam width while inserting: the build's cost is about proportional to it. Measured at
#: 1M on the bench corpus with connectivity 16: 128 -> 1,187 s build, 0.992 at search
#: width 400; 64 -> 435 s, 0.976 / 0.987 / 0.994 at 400 / 600 / 800; 48 -> 214 s, 0.961 /
#: 0.983 / 0.990; 40 -> 272 s (busier machine), 0.948 at 400. A cheaper build, wider search.
_EXPANSION_ADD = 48
#: Graph beam width at query time; what sets recall for a given graph (above).
_EXPANSION_SEARCH = 500
#: The width for a graph saved with the connectivity of earlier releases (16): it needs the
#: wider beam for the same recall, and keeps it until ``memory ann build`` rebuilds it.
_EXPANSION_SEARCH_SPARSE = 800
#: Rows inserted on one thread before the parallel batch (see ``build``).
_SERIAL_HEAD = 5_000


class BuildCancelled(Exception):
    """A graph build stopped because its store is closing (nothing was published)."""


def _progress_callback(
    report: Callable[[int, int], None] | None, cancel: threading.Event | None, caught: list[BaseException]
) -> Any:
    """A usearch progress callback: reports ``(done, total)`` and returns False (stop) once ``cancel`` is set.

    It never raises: an exception crossing into usearch's C++ is ``std::terminate`` (the
    process aborts). What ``report`` raised (a Ctrl-C in the progress bar, a closed
    stderr) is kept in ``caught``, the build is stopped, and the caller raises it.
    """

    def progress(done: int, total: int) -> bool:
        try:
            if caught:
                return False
            if report is not None:
                report(done, total)
            return cancel is None or not cancel.is_set()
        except BaseException as exc:  # noqa: BLE001 - re-raised by the caller once usearch has returned
            caught.append(exc)
            return False

    # usearch checks the callback's annotations by identity; this module's are strings (PEP 563)
    progress.__annotations__ = {"done": int, "total": int, "return": bool}
    return progress


def ann_threshold(explicit: int | None = None) -> int | None:
    """The row count from which the ANN tier is used; ``None`` = never."""
    if explicit is None:
        raw = os.environ.get("ATOMIC_AGENTS_ANN_THRESHOLD", "").strip()
        explicit = int(raw) if raw.isdigit() else ANN_THRESHOLD
    return explicit if explicit > 0 else None


def _usearch() -> Any:
    """``usearch.index.Index``, imported only when the tier is used.

    onnxruntime is imported first, on purpose: the usearch wheel links libstdc++
    statically and exports its symbols, and onnxruntime loaded *after* it binds to
    them and crashes the process (SIGSEGV at import, usearch 2.26 / onnxruntime 1.32
    on Linux). Loaded before, each keeps its own; the embedder needs it anyway.
    """
    import onnxruntime  # noqa: F401

    from usearch.index import Index

    return Index


def _index(ndim: int) -> Any:
    return _usearch()(
        ndim=ndim,
        metric="cos",
        dtype="i8",
        connectivity=_CONNECTIVITY,
        expansion_add=_EXPANSION_ADD,
        expansion_search=_EXPANSION_SEARCH,
    )


def _search_width(raw: Any) -> int:
    """The beam width to search this usearch graph with: this release's for a graph of its
    connectivity or more, the wider one for a sparser graph (an earlier release's file)."""
    return _EXPANSION_SEARCH if int(raw.connectivity) >= _CONNECTIVITY else _EXPANSION_SEARCH_SPARSE


def _tags(tags: np.ndarray | None, n: int) -> np.ndarray:
    return np.zeros(n, np.int64) if tags is None else np.asarray(tags, np.int64)


class AnnIndex:
    """A usearch graph keyed by row id; either mutable (built here) or a read-only view of a file."""

    def __init__(self, ndim: int, raw: Any, *, view: Path | None = None, copies: CopyGroups | None = None) -> None:
        self.ndim = ndim
        self._raw: Any = raw
        raw.expansion_search = _search_width(raw)  # not taken from a saved file
        self._view = view  # the file this is a read-only map of, or None when mutable
        #: the rows left out of the graph because their vector equals another row's
        self.copies = copies if copies is not None else CopyGroups(ndim)

    @classmethod
    def build(
        cls,
        keys: np.ndarray,
        vectors: np.ndarray,
        tags: np.ndarray | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> AnnIndex:
        """A graph over ``vectors`` (batch insert on every core), equal vectors of one tag (the
        caller's scope code; ``None``: all one) grouped out of it.

        ``progress(done, total)`` is called as rows go in; once ``cancel`` is set the
        build stops within one progress step and raises :class:`BuildCancelled`.
        """
        raw = _index(vectors.shape[1])
        copies = CopyGroups(vectors.shape[1])
        to_graph = copies.split(np.asarray(keys, np.int64), vectors, _tags(tags, len(keys)))
        if not to_graph.all():
            keys, vectors = keys[to_graph], vectors[to_graph]
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        total = len(keys)
        # Concurrent inserts into a small graph leave parts of it unreachable (measured:
        # whole clusters missed at 1.5k rows); the first rows go in on one thread.
        head = min(total, _SERIAL_HEAD)
        steps = ((0, head, 1), (head, total, 0))  # (from, to, threads; 0 = every core)
        caught: list[BaseException] = []
        try:
            for lo, hi, threads in steps:
                if hi > lo:

                    def report(done: int, _total: int, lo: int = lo) -> None:
                        if progress is not None:
                            progress(lo + done, total)

                    cb = _progress_callback(report, cancel, caught)
                    raw.add(keys[lo:hi], np.ascontiguousarray(vectors[lo:hi], dtype=np.float32), threads=threads, progress=cb)
                    if caught:
                        raise caught[0]
        except RuntimeError:
            if caught:  # usearch: "Operation has been terminated", after the callback's own error
                raise caught[0] from None
            if cancel is not None and cancel.is_set():
                raise BuildCancelled from None
            raise
        if cancel is not None and cancel.is_set():
            raise BuildCancelled
        return cls(vectors.shape[1], raw, copies=copies)

    def copy(self) -> AnnIndex:
        """An in-memory copy that can take inserts while this one keeps answering searches."""
        return AnnIndex(self.ndim, self._raw.copy(), copies=self.copies.copy())

    @classmethod
    def open(cls, path: Path, ndim: int, count: int) -> AnnIndex | None:
        """Map ``path`` read-only; ``None`` if it is not a usearch file of ``count`` ``ndim``-vectors."""
        Index = _usearch()
        try:
            meta = Index.metadata(str(path))
            if not meta or int(meta.get("dimensions", -1)) != ndim or int(meta.get("count_present", -1)) != count:
                return None
            raw = Index.restore(str(path), view=True)
        except Exception:  # noqa: BLE001 - a damaged sidecar of any kind just means: rebuild
            return None
        if raw is None or raw.ndim != ndim or len(raw) != count:
            return None
        return cls(ndim, raw, view=path)

    @property
    def mutable(self) -> bool:
        return self._view is None

    def __len__(self) -> int:
        """How many vectors the graph itself holds (copies left out of it not counted)."""
        return len(self._raw)

    def make_mutable(self) -> None:
        """Turn a view into an in-memory copy that can take inserts and removals."""
        if self._view is not None:
            self._raw = self._raw.copy()
            self._view = None

    def add(
        self,
        keys: np.ndarray,
        vectors: np.ndarray,
        tags: np.ndarray | None = None,
        vector_of: Callable[[int], np.ndarray | None] | None = None,
    ) -> None:
        """Hold these rows (replacing what a key held; a key given twice: its last row): in the
        graph, or in a copy group of their tag (``vector_of``: see :meth:`CopyGroups.route`)."""
        keys, tags = np.asarray(keys, np.int64), _tags(tags, len(keys))
        last = len(keys) - 1 - np.unique(keys[::-1], return_index=True)[1]
        if len(last) < len(keys):
            last.sort()
            keys, vectors, tags = keys[last], np.asarray(vectors)[last], tags[last]
        self.remove(keys)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        to_graph, pulled = self.copies.route(keys, vectors, tags, vector_of)
        if pulled:
            self._raw.remove(np.array(pulled, dtype=np.uint64))
        if not to_graph.all():
            keys, vectors = np.asarray(keys)[to_graph], vectors[to_graph]
        if len(keys):
            parallel = len(keys) > 1024 and len(self) > _SERIAL_HEAD
            self._raw.add(np.ascontiguousarray(keys, dtype=np.uint64), np.ascontiguousarray(vectors), threads=0 if parallel else 1)

    def remove(self, keys: np.ndarray) -> None:
        """Hold these keys no more (in the graph or in a copy group)."""
        self.make_mutable()
        self.copies.remove(np.asarray(keys, np.int64))
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        present = np.asarray(self._raw.contains(keys), dtype=np.bool_).reshape(-1)
        if present.any():
            self._raw.remove(keys[present])

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        """Up to ``k`` candidate keys (int64), roughly nearest first."""
        return self.search_distances(query, k)[0]

    def search_distances(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``k`` candidate keys (int64) and the graph's (quantised) distances to them, roughly nearest first."""
        if len(self) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        found = self._raw.search(query, min(k, len(self)), exact=False, threads=1)
        return np.asarray(found.keys, dtype=np.int64), np.asarray(found.distances, dtype=np.float32)

    def save(self, path: Path) -> None:
        """Write the graph to ``path``; a failed write (disk full, quota, no folder) is an ``OSError``."""
        try:
            self._raw.save(str(path))
        except RuntimeError as exc:  # usearch reports I/O errors as RuntimeError
            raise OSError(f"cannot write the graph to {path}: {exc}") from exc

    def copies_check(self, keys: np.ndarray, vectors: np.ndarray) -> bool:
        """Do the copy groups read as groups of these rows (``keys`` sorted)? Their keys are rows
        the graph does not hold, and a few sampled members' rows hold their group's vector."""
        held = self.copies.keys()
        if held.size == 0:
            return True
        at = np.minimum(np.searchsorted(keys, held), len(keys) - 1)
        if not bool(np.all(keys[at] == held)):
            return False
        if bool(np.any(np.asarray(self._raw.contains(held.astype(np.uint64)), dtype=np.bool_))):
            return False
        pick = np.linspace(0, len(held) - 1, num=min(16, len(held))).astype(np.int64)
        return all(self.copies.holds(int(held[i]), vectors[int(at[i])]) for i in pick.tolist())

    def self_check(self, keys: np.ndarray, vectors: np.ndarray) -> bool:
        """Does the graph find a few of its own vectors? A cheap guard against a garbage file.

        ``keys`` (sorted) and ``vectors`` are the snapshot's rows. A sampled row counts as found
        when the graph returns its key, or another key whose row holds the same vector: among
        more than ten copies of one content any ten of them are a right answer.
        """
        if len(keys) == 0:
            return True
        # rows spread over the snapshot, but not copies (the graph does not hold those)
        spread = np.unique(np.linspace(0, len(keys) - 1, num=min(256, len(keys))).astype(np.int64)).tolist()
        inside = [i for i in spread if int(keys[i]) not in self.copies]
        if not inside and len(self):  # (nearly every row a copy: look for the few the graph holds)
            inside = np.flatnonzero(~np.isin(keys, self.copies.keys())).tolist()
        if not inside:
            return len(self) == 0
        pick = inside[:: max(1, len(inside) // 8)][:8]

        def found(i: int) -> bool:
            got = self.search(vectors[i], 10)
            if int(keys[i]) in set(got.tolist()):
                return True
            at = np.searchsorted(keys, got)
            ok = (at < len(keys)) & (keys[np.minimum(at, len(keys) - 1)] == got)
            return any(np.array_equal(vectors[j], vectors[i]) for j in at[ok].tolist())

        hits = sum(found(int(i)) for i in pick)
        return hits >= max(1, (len(pick) * 3) // 4)
