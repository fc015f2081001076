"""Keeping the store's vector matrix (and its ANN graph) in step with the SQLite file.

A mixin of :class:`~atomic_agents.memory.SQLiteMemoryStore` (it uses the store's
connection, lock and read helpers). Every write bumps ``rev`` on the rows it touches;
before a semantic search the store checks ``PRAGMA data_version`` and, if another
connection committed, pulls rows and hard-delete tombstones with ``rev`` above what
it has seen (``_sqlite_tombstones``): an erased row is marked removed in the matrix and
the graph, as a soft-deleted one is. Reindexing bumps ``store_meta.epoch``, and a
matrix older than ``store_meta.tombstone_floor`` cannot catch up; both force a full
reload: from the memory-mapped snapshot when it is of this epoch and not older than
the floor (``_matrix_cache``; then the rest is pulled), else from the rows.
Past ``ann_threshold`` live vectors a graph proposes candidates (``_ann``).

**The graph is never built on the query path.** While it is missing or stale
(after an epoch change, or its file is absent or does not match), searches are exact
scans, which give the same answers. A long-lived store (``ann_build="background"``:
the daemon, the MCP server, a library user) builds it in a background thread: it
copies the live rows under the lock, builds on every core without it, publishes the
snapshot and graph atomically beside the database (``_matrix_cache.publish``), then,
under the lock again, re-inserts the rows written meanwhile (a journal of their keys)
and attaches the graph. Rows written past a graph are scanned exactly and folded in
the same way. One build per database at a time (``<db>-ann.lock``, an ``flock``); a
process that finds it taken waits and then maps what the other published. Closing the
store (or the interpreter exiting) cancels a build within one progress step; a build
killed outright leaves only ``.*.tmp`` files, which no reader opens and the next
writer removes. A short-lived process (the CLI: ``ann_build="off"``) never starts a
build it would kill on exit; ``memory ann build`` (:meth:`build_ann`) builds in the
foreground with a progress bar.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    import fcntl
except ImportError:  # not POSIX: no build lock (two processes may build the same graph; both publish atomically)
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import numpy as np

    from ._embed import Embedder
else:  # bound on first use (see _lazy): keyword search and listing never import numpy
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

from . import _matrix_cache, _prefetch
from . import _sqlite_tombstones as _tombstones
from ._ann import AnnIndex, BuildCancelled
from ._matrix_cache import load_snapshot, publish, save_snapshot
from ._base import memory_from_row as _memory
from ._base import metadata_matches
from ._models import Memory, Scope
from ._sqlite_sql import _BY_ROWID_SCOPE, _COLS
from ._vectors import FOLD_AT, VectorIndex

__all__ = ["ANN_BUILD_MODES", "SQLiteVectorSync", "ann_build_mode"]

#: ``background``: build / fold the graph in a thread of this process; ``off``: never
#: build here (exact search until a graph is published, e.g. by ``memory ann build``)
ANN_BUILD_MODES = ("background", "off")
#: After a build could not start (another process holds the lock) or failed, wait this long.
_RETRY_S = 30.0

_building: weakref.WeakSet[SQLiteVectorSync] = weakref.WeakSet()


@atexit.register
def _cancel_all() -> None:
    """At interpreter exit, stop running builds (before daemon threads are frozen mid-write)."""
    for store in list(_building):
        store._stop_build()


#: Descriptors of the build locks held now, by the thread holding each (see ``_after_fork``).
_held: dict[int, int] = {}


def _after_fork() -> None:
    """A forked child holds no build and lets the parent's go.

    The child inherits the build lock's descriptor, and an ``flock`` lives as long as any
    descriptor of that open file: kept, it would block every later build of the database
    (the parent's, other processes', the child's own) for as long as the child lives. The
    job thread is not in the child: its journal is dropped (the child's writes are
    scanned exactly until a job of its own), and a store lock it held is replaced (it
    would never be released) along with the matrix it may have been changing.
    """
    me = threading.get_ident()
    for fd, owner in list(_held.items()):
        if owner != me:
            with contextlib.suppress(OSError):
                os.close(fd)
            del _held[fd]
    for store in list(_building):
        store._builder = None
        if store._lock.acquire(blocking=False):
            store._lock.release()
        else:
            store._lock = threading.RLock()
            store._index = None  # reloaded by the next search
        if store._index is not None:
            store._index.abort_job()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def ann_build_mode(explicit: str | None = None) -> str:
    mode = explicit if explicit is not None else (os.environ.get("ATOMIC_AGENTS_ANN_BUILD", "").strip() or "background")
    if mode not in ANN_BUILD_MODES:
        from ..exceptions import ValidationError

        raise ValidationError(f"ann_build must be one of {', '.join(ANN_BUILD_MODES)}, not {mode!r}", field="ann_build", rule="choice")
    return mode


def _lock_path(db: Path) -> Path:
    return db.with_name(db.name + "-ann.lock")


@contextlib.contextmanager
def _build_lock(db: Path, *, blocking: bool) -> Iterator[bool]:
    """The per-database build lock (``flock``: released when the holder dies); yields whether it was taken."""
    if fcntl is None:
        yield True
        return
    try:
        fd = os.open(_lock_path(db), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        yield blocking  # no lock file possible (read-only folder): build anyway if asked to; publish fails harmlessly
        return
    _held[fd] = threading.get_ident()
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        if _held.pop(fd, None) is not None:  # (a forked child closed its copy already)
            os.close(fd)


#: Searches made before one whose rows all read as ranked (:meth:`SQLiteVectorSync._fetch_as_ranked`);
#: the last one's rows that did not are left out (a commit per search, from other processes, for that long).
SEARCH_TRIES = 3
#: A stored vector gives "the cosine the search ranked it by" within this (float32 sums in another order).
SAME_COSINE = 1e-4


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
    ann_build: str
    _builder: threading.Thread | None = None
    _cancel: threading.Event
    _retry_at: float = 0.0
    _build_error: str | None = None
    #: full loads of the matrix by source: ``snapshot`` (mapped, then pulled) or ``rows``
    _loads: dict[str, int]
    #: the mapped matrix of the snapshot last loaded, to read into the page cache after the next search
    _unread: tuple[Path, ...] = ()
    _conn: Any

    if TYPE_CHECKING:  # provided by the store

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

        def _meta(self) -> dict[str, str]: ...

        embedder: Embedder

    def _fetch_as_ranked(
        self, keys: Sequence[int], cosines: Mapping[int, float], qv: np.ndarray, scope: Scope, filters: Mapping[str, Any]
    ) -> tuple[dict[int, Memory], bool]:
        """The rows of ``keys`` as the search ranked them, and whether every one of them still is.

        The vector index answered from its last sync, and another process may have committed
        since: forgotten a row, edited it, changed its metadata, or (a hard prune of the newest
        rows) given its rowid to a new memory of any scope. So each row is read with its scope,
        liveness and ``filters`` checked and its stored vector beside it, and kept only if that
        vector gives the cosine the search ranked it by (``cosines``; none where the index had
        none). ``False`` means some key was not: search again, from a fresh sync.
        """
        out: dict[int, Memory] = {}
        now, model = time.time(), self._index_model
        for start in range(0, len(keys), 500):
            part = list(keys[start : start + 500])
            marks = ",".join("?" * len(part))
            for row in self._read(
                f"SELECT {_COLS}, m.embedder, m.embedding FROM memories m WHERE m.seq IN ({marks}) AND {_BY_ROWID_SCOPE}",
                [*part, *scope.key(), now],
            ):
                mem = _memory(row[:-2])
                if filters and not metadata_matches(mem.metadata, filters):
                    continue
                seen, blob = cosines.get(row[0]), row[-1] if row[-2] == model else None
                if seen is None or blob is None:
                    if seen is None and blob is None:
                        out[row[0]] = mem
                elif abs(float(np.frombuffer(blob, dtype=np.float32) @ qv) - seen) <= SAME_COSINE:
                    out[row[0]] = mem
        return out, len(out) == len(set(keys))

    def _sync(self, *, force: bool = False) -> VectorIndex:
        with self._lock:
            dv = int(self._read("PRAGMA data_version")[0][0])
            if self._index is not None and not force and dv == self._data_version:
                if self._index.ann is None or self._index.uncovered > FOLD_AT:
                    self._maybe_build_ann()  # (a job that found the lock taken, or failed, is retried)
                return self._index
            self._data_version = dv
            meta = self._meta()
            if (
                self._index is None
                or meta.get("epoch") != self._epoch
                or meta["embedder"] != self._index_model
                or self._synced_rev < _tombstones.floor_of(meta)  # the log no longer holds what it lacks
            ):
                self._full_load(meta)
            elif not self._pull():
                self._full_load(self._meta())
            assert self._index is not None
            self._maybe_build_ann()
            return self._index

    def own_files(self) -> list[Path]:
        """The database and every file beside it that the store owns: SQLite's journals, the vector
        snapshot, the graph and its build lock (whether or not each exists now)."""
        db = self.path
        journals = [db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal")]
        sidecars = [_matrix_cache.snapshot_path(db), _matrix_cache.meta_path(db), _matrix_cache.ann_path(db), _lock_path(db)]
        return [db, *journals, *sidecars, _matrix_cache._legacy_path(db)]

    def _read_mapped_files(self) -> None:
        """After a search on a freshly mapped snapshot: have its matrix read into the page cache (``_prefetch``).

        The graph's read starts when it is mapped, and reads while the first query is embedded; the
        matrix's (2.5x larger at 1M) waits for the first search, whose own reads would queue behind it.
        """
        if self._unread:
            paths, self._unread = self._unread, ()
            self._prefetch_quietly(paths)

    @staticmethod
    def _prefetch_quietly(paths: Sequence[Path]) -> None:
        with contextlib.suppress(Exception):  # (no thread to be had: the search stands, unhelped)
            _prefetch.prefetch(paths)

    def _maybe_build_ann(self) -> None:
        """Past the threshold, have the graph built or rows folded into it, off the query path."""
        ix = self._index
        if ix is None:
            return
        ix.fold_inline = False  # folding is a job too (or `memory ann build`), never a search's
        if self.ann_threshold is None or len(ix) < self.ann_threshold or self.ann_build != "background":
            return
        if ix.ann is None:
            self._start_job("build", ix)
        elif ix.uncovered > FOLD_AT:
            self._start_job("fold", ix)

    # -- graph jobs ------------------------------------------------------------------

    def _start_job(self, kind: str, ix: VectorIndex) -> None:
        t = self._builder
        if (t is not None and t.is_alive()) or time.monotonic() < self._retry_at or self._cancel.is_set():
            return
        self._builder = threading.Thread(target=self._run_job, args=(kind, ix), name="atomic-agents-ann", daemon=True)
        _building.add(self)
        try:
            self._builder.start()
        except RuntimeError as exc:  # no thread to be had (a pids limit, shutdown): searches stay exact
            self._builder = None
            self._build_error = f"{type(exc).__name__}: {exc}"
            self._retry_at = time.monotonic() + _RETRY_S

    def _run_job(self, kind: str, ix: VectorIndex) -> None:
        try:
            if self._job(kind, ix, blocking=False) == "busy":
                self._retry_at = time.monotonic() + _RETRY_S
        except BuildCancelled:
            pass
        except Exception as exc:  # noqa: BLE001 - a failed build is a slower search, never a failed one
            self._build_error = f"{type(exc).__name__}: {exc}"
            self._retry_at = time.monotonic() + _RETRY_S

    def _stop_build(self) -> None:
        """Cancel a running job and wait for it (within one progress step of usearch)."""
        self._cancel.set()
        t = self._builder
        if t is not None and t is not threading.current_thread():
            t.join()
        _building.discard(self)

    def _job(self, kind: str, ix: VectorIndex, *, blocking: bool, progress: Callable[[int, int], None] | None = None) -> str:
        """Build the graph (``kind="build"``) or fold the rows it lacks into a copy (``"fold"``); what happened."""
        with _build_lock(self.path, blocking=blocking) as got:
            if not got:
                return "busy"
            if kind == "build" and self._adopt_published(ix):
                return "adopted"
            with self._lock:
                if self._index is not ix:
                    return "moved"
                model, epoch, rev = self._index_model or "", self._epoch, self._synced_rev
                if kind == "build":
                    arrays = ix.to_arrays()
                    base = None
                else:
                    base, (keys, vecs, codes) = ix.ann, ix.uncovered_rows()
                ix.begin_job()
            try:
                if base is None:
                    ann = AnnIndex.build(arrays["keys"], arrays["vecs"], tags=arrays["scope"], progress=progress, cancel=self._cancel)
                    arrays = {**arrays, **ann.copies.to_arrays()}

                    def current() -> bool:
                        with self._lock:
                            meta = self._meta()
                            return self._index is ix and meta.get("epoch", "0") == epoch and meta["embedder"] == model

                    def graph(tmp: Path) -> bool:
                        ann.save(tmp)
                        return True

                    with contextlib.suppress(OSError):  # unwritable folder: the graph still serves this process
                        if publish(self.path, arrays, graph, dimension=ix.dimension, model=model, epoch=epoch, rev=rev,
                                   before_rename=current):  # fmt: skip
                            self._note_snapshot(rev, epoch)
                else:
                    ann = base.copy()
                    if progress is not None:
                        progress(0, len(keys))
                    ann.add(keys, vecs, codes)
                    if progress is not None:
                        progress(len(keys), len(keys))
            except BaseException:
                with self._lock:
                    ix.abort_job()
                raise
            with self._lock:
                if self._index is not ix:
                    ix.abort_job()
                    return "moved"
                ix.finish_job(ann)
                if base is None:
                    self._pulled = 0
            self._build_error = None
            return "built" if base is None else "folded"

    def _adopt_published(self, ix: VectorIndex) -> bool:
        """Another process published a graph for this state while we waited for the lock: map it."""
        with self._lock:
            model, epoch = self._index_model or "", self._epoch
            meta = self._meta()
            floor, legacy = _tombstones.snapshot_terms(meta)
        snap = load_snapshot(
            self.path, model=model, epoch=epoch, with_ann=True, min_rev=floor, legacy_upto=legacy, dimension=int(meta["dimension"])
        )
        if snap is None or snap[0].ann is None:
            return False
        with self._lock:
            if self._index is ix and self._epoch == epoch:
                self._index, self._synced_rev = snap
                self._pulled = 0
                if not self._pull():  # the floor passed it meanwhile
                    self._full_load(self._meta())
                if self._index is not None:
                    self._index.fold_inline = False
        return True

    @property
    def ann_state(self) -> str:
        """:meth:`ann_state_at` of the rows the database holds now."""
        (rows,) = self._read(
            "SELECT count(*) FROM memories WHERE deleted_at = 0 AND embedder = ? AND embedding IS NOT NULL",
            [self.embedder.model_id],
        )[0]
        return self.ann_state_at(int(rows))

    def ann_state_at(self, rows: int) -> str:
        """``graph`` (searches use it), ``building``, ``exact`` (no graph yet), ``below-threshold`` or ``off``.

        ``rows``: the live rows with this model's vectors, as the database counts them, so that the
        answer does not depend on whether this process has searched yet (a daemon's health is an
        in-process one's): a graph published beside the database is what the first search maps.
        """
        ix = self._index
        if self.ann_threshold is None:
            return "off"
        if ix is not None and ix.ann is not None:
            return "graph"
        if self._builder is not None and self._builder.is_alive():
            return "building"
        if rows < self.ann_threshold:
            return "below-threshold"
        if ix is None and _matrix_cache.ann_path(self.path).exists():  # the snapshot in place must name it, too
            header = _matrix_cache._header(self.path)
            if header is not None and header.get("ann"):
                return "graph"
        return "exact"

    def build_ann(self, *, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Build the graph now, in this thread (or fold the rows it lacks), and publish it beside the database.

        ``progress(advance, total)`` as rows go in. Waits for another process's build
        of the same database, then maps that one. Returns ``{"status": ..., "rows": ...}``;
        status is ``built``, ``folded``, ``adopted`` (another process's), ``current``
        or ``below-threshold``.
        """
        ix = self._sync()
        t = self._builder  # a background job (perhaps just started by that sync) finishes first
        if t is not None and t.is_alive():
            t.join()
            ix = self._sync()
        if self.ann_threshold is None or len(ix) < self.ann_threshold:
            return {"status": "below-threshold", "rows": len(ix), "threshold": self.ann_threshold}
        if ix.ann is not None and ix.uncovered == 0:
            return {"status": "current", "rows": len(ix)}
        seen = [0]

        def step(done: int, total: int) -> None:
            if progress is not None:
                progress(done - seen[0], total)
            seen[0] = done

        status = self._job("build" if ix.ann is None else "fold", ix, blocking=True, progress=step)
        if status == "folded":
            with self._lock:
                now = self._index
                if now is not None:
                    self._save_snapshot(now)
        return {"status": status, "rows": len(self._index) if self._index is not None else 0}

    def _save_snapshot(self, ix: VectorIndex) -> bool:
        """Publish ``ix`` (this process's matrix, as of ``_synced_rev``) as the snapshot; record its rev.

        Not if the file moved to another epoch or model since (a store closing with a matrix
        of before a reindex would replace the current snapshot with a useless one).
        """
        with self._lock:
            rev, model, epoch = self._synced_rev, self._index_model or "", self._epoch
            meta = self._meta()
            if meta.get("epoch", "0") != epoch or meta.get("embedder") != model:
                return False
            done = save_snapshot(self.path, ix, model=model, epoch=epoch, rev=rev)
            if done:
                self._note_snapshot(rev, epoch)
            return done

    def _note_snapshot(self, rev: int, epoch: str) -> None:
        """``store_meta.snapshot_rev``: the hard-delete log may be pruned up to it (``_sqlite_tombstones.trim``)."""
        from ..exceptions import StoreError
        from ._sqlite_schema import write_txn

        with self._lock, contextlib.suppress(StoreError):  # (unrecorded: the log is only kept longer)
            write_txn(self._conn, lambda c: _tombstones.note_snapshot(c, rev, epoch))

    def _full_load(self, meta: dict[str, str]) -> None:
        model, epoch = meta["embedder"], meta.get("epoch", "0")
        floor, legacy = _tombstones.snapshot_terms(meta)
        snap = load_snapshot(
            self.path, model=model, epoch=epoch, with_ann=self.ann_threshold is not None, min_rev=floor, legacy_upto=legacy,
            dimension=int(meta["dimension"]),
        )
        if snap is not None:
            self._index, self._synced_rev = snap
            self._index_model, self._epoch = model, epoch
            self._pulled = 0
            if self._pull():  # everything committed after the snapshot was taken, erasures included
                self._loads["snapshot"] += 1
                if self._index.ann is not None:  # the graph now (it reads while the query is embedded), the matrix after
                    self._prefetch_quietly([_matrix_cache.ann_path(self.path)])
                self._unread = (_matrix_cache.snapshot_path(self.path),)
                return
            meta = self._meta()  # the log was pruned past the snapshot meanwhile
            model, epoch = meta["embedder"], meta.get("epoch", "0")
        self._load_from_rows(meta)
        self._loads["rows"] += 1
        ix = self._index
        graph_job = self.ann_build == "background" and self.ann_threshold and len(ix or ()) >= self.ann_threshold
        if ix is not None and len(ix) >= _matrix_cache.MIN_ROWS and not graph_job:
            self._save_snapshot(ix)
        # past the ANN threshold the graph job publishes the snapshot and the graph together

    def _load_from_rows(self, meta: dict[str, str]) -> None:
        model, dim = meta["embedder"], int(meta["dimension"])
        index = VectorIndex(dim)
        # the counter first: a commit landing between the two reads is pulled (again) next
        # time, which is idempotent, instead of being skipped.
        top = self._read(_tombstones.REV_NOW)[0][0]
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

    def _pull(self) -> bool:
        """Apply the rows and tombstones above ``_synced_rev``; False if the log was pruned past it (reload)."""
        assert self._index is not None
        since = self._synced_rev
        rows = self._read(_tombstones.PULL_SQL, [since, since])
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
        # Read after the pull: a prune of the log that committed before the pull's read shows
        # here, so a pull that may have missed tombstones is never trusted.
        return int(self._read(_tombstones.FLOOR_SQL)[0][0]) <= since
