"""Keeping the store's vector matrix (and its ANN graph) in step with the SQLite file.

A mixin of :class:`~atomic_agents.memory.SQLiteMemoryStore` (it uses the store's
connection, lock and read helpers). Every write bumps ``rev`` on the rows it touches;
before a semantic search the store checks ``PRAGMA data_version`` and, if another
connection committed, pulls rows with ``rev`` above what it has seen. Hard deletes
and reindexing bump ``store_meta.epoch``, which forces a full reload: from the
memory-mapped snapshot when it is current (``_matrix_cache``), else from the rows.
Past ``ann_threshold`` live vectors the graph is built once and saved with the snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:  # bound on first use (see _lazy): keyword search and listing never import numpy
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

from . import _matrix_cache
from ._matrix_cache import load_snapshot, save_snapshot
from ._vectors import VectorIndex

__all__ = ["SQLiteVectorSync"]


class SQLiteVectorSync:
    """``_sync`` / ``_pull`` / full loads of the vector matrix; the graph past the threshold."""

    path: Path
    ann_threshold: int | None
    _lock: threading.RLock
    _index: VectorIndex | None
    _index_model: str | None
    _synced_rev: int
    _data_version: int
    _epoch: str
    _pulled: int

    if TYPE_CHECKING:  # provided by the store

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

        def _meta(self) -> dict[str, str]: ...

    def _sync(self, *, force: bool = False) -> VectorIndex:
        with self._lock:
            dv = int(self._read("PRAGMA data_version")[0][0])
            if self._index is not None and not force and dv == self._data_version:
                return self._index
            self._data_version = dv
            meta = self._meta()
            if self._index is None or meta.get("epoch") != self._epoch or meta["embedder"] != self._index_model:
                self._full_load(meta)
            else:
                self._pull()
            assert self._index is not None
            self._maybe_build_ann()
            return self._index

    def _maybe_build_ann(self) -> None:
        """Past the threshold, build the graph once and save it (with the snapshot) beside the file."""
        ix = self._index
        if ix is None or ix.ann is not None or self.ann_threshold is None or len(ix) < self.ann_threshold:
            return
        ix.build_ann()
        save_snapshot(self.path, ix, model=self._index_model or "", epoch=self._epoch, rev=self._synced_rev)
        self._pulled = 0

    def _full_load(self, meta: dict[str, str]) -> None:
        model, epoch = meta["embedder"], meta.get("epoch", "0")
        snap = load_snapshot(self.path, model=model, epoch=epoch, with_ann=self.ann_threshold is not None)
        if snap is not None:
            self._index, self._synced_rev = snap
            self._index_model, self._epoch = model, epoch
            self._pulled = 0
            self._pull()  # everything committed after the snapshot was taken
            return
        self._load_from_rows(meta)
        ix = self._index
        if ix is not None and len(ix) >= _matrix_cache.MIN_ROWS and not (self.ann_threshold and len(ix) >= self.ann_threshold):
            save_snapshot(self.path, ix, model=model, epoch=epoch, rev=self._synced_rev)
        # past the ANN threshold _sync builds the graph and saves both together

    def _load_from_rows(self, meta: dict[str, str]) -> None:
        model, dim = meta["embedder"], int(meta["dimension"])
        index = VectorIndex(dim)
        # max(rev) first: a commit landing between the two reads is pulled (again) next
        # time, which is idempotent, instead of being skipped.
        top = self._read("SELECT coalesce(max(rev), 0) FROM memories")[0][0]
        rows = self._read(
            "SELECT seq, agent_id, user_id, org_id, workspace_id, expires_at, embedding FROM memories"
            " WHERE deleted_at = 0 AND embedder = ? AND embedding IS NOT NULL ORDER BY seq",
            [model],
        )
        if rows:
            keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            vecs = np.frombuffer(b"".join(r[6] for r in rows), dtype=np.float32).reshape(len(rows), dim)
            index.upsert_many(keys, vecs, [(r[1], r[2], r[3], r[4]) for r in rows], [r[5] for r in rows])
        self._synced_rev = int(top)
        self._index, self._index_model, self._epoch = index, model, meta.get("epoch", "0")
        self._pulled = 0

    def _pull(self) -> None:
        assert self._index is not None
        rows = self._read(
            "SELECT seq, agent_id, user_id, org_id, workspace_id, expires_at, deleted_at, embedder, embedding, rev"
            " FROM memories WHERE rev > ? ORDER BY rev",
            [self._synced_rev],
        )
        keep = []  # one row per seq (its current state), so removals and upserts commute
        for row in rows:
            seq, deleted, model, blob = row[0], row[6], row[7], row[8]
            if deleted or model != self._index_model or blob is None:
                self._index.remove(seq)
            else:
                keep.append(row)
            self._synced_rev = max(self._synced_rev, row[9])
        if keep:  # one batch, so the graph takes them in one insert
            self._index.upsert_many(
                np.fromiter((r[0] for r in keep), dtype=np.int64, count=len(keep)),
                np.frombuffer(b"".join(r[8] for r in keep), dtype=np.float32).reshape(len(keep), -1),
                [(r[1], r[2], r[3], r[4]) for r in keep],
                [r[5] for r in keep],
            )
        self._pulled += len(rows)
