"""Sidecar snapshots of the vector matrix (and the ANN graph), so a fresh process starts fast.

Beside ``<db>`` live:

* ``<db>-vectors.npy``: the live rows' float32 vectors, sorted by key; opened with
  ``np.load(mmap_mode="r")``, so opening costs milliseconds whatever its size and
  only the pages a search touches are read;
* ``<db>-vectors.meta.npz``: keys, scope codes, expiry, and a header saying what the
  snapshot is valid for (model, ``store_meta.epoch``, the highest ``rev``) and which
  ``.npy`` / ``.usearch`` files (inode, size, mtime) belong to it;
* ``<db>-ann.usearch``: the HNSW graph over exactly those rows (when the store is
  past the ANN threshold), memory-mapped too.

Loading a snapshot and then pulling rows and tombstones with a higher ``rev`` gives
exactly what a full load from SQLite gives: every change bumps ``rev`` (a hard delete
leaves a tombstone at its rev, ``_sqlite_tombstones``), and the one change ``rev``
cannot express (reindexing) bumps ``epoch``, which invalidates it. A snapshot older
than ``store_meta.tombstone_floor`` (the log was pruned past it) is not used. Each
file is written to a temporary name and renamed; the header names the files by
inode, so a reader that sees a mix of old and new files sees a mismatch and falls
back. Any problem reading them just means a full load (and a rebuilt graph); the
SQLite file stays the only source of truth. An old ``<db>-vectors.npz`` is removed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:  # bound on first use (see _lazy): keyword search and listing never import numpy
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

from ._ann import AnnIndex
from ._ann_copies import CopyGroups
from ._vectors import VectorIndex

__all__ = ["MIN_ROWS", "ann_path", "load_snapshot", "meta_path", "publish", "save_snapshot", "snapshot_path", "sweep_debris"]

#: Below this many rows a full load from SQLite is already fast; no sidecar is written.
MIN_ROWS = 5_000


def snapshot_path(db: Path) -> Path:
    return db.with_name(db.name + "-vectors.npy")


def meta_path(db: Path) -> Path:
    return db.with_name(db.name + "-vectors.meta.npz")


def ann_path(db: Path) -> Path:
    return db.with_name(db.name + "-ann.usearch")


def _legacy_path(db: Path) -> Path:
    return db.with_name(db.name + "-vectors.npz")


def _stamp(path: Path) -> list[int]:
    st = os.stat(path)
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def save_snapshot(db: Path, index: VectorIndex, *, model: str, epoch: str, rev: int) -> bool:
    """Write the snapshot (and the graph, if the index has one) atomically, file by file; True if written.

    A process without the graph (tier off, or below the threshold) leaves alone a
    snapshot of the same model and epoch that has one: replacing it would make every
    process with the tier on rebuild the graph. Nor does it replace one of the same
    model and epoch that is as new or newer, unless only this one has a graph.
    """
    there = _header(db)
    if there is not None and there.get("log") and there.get("model") == model and there.get("epoch") == epoch:
        if index.ann is None and there.get("ann"):
            return False
        if int(there.get("rev", -1)) >= rev and (there.get("ann") or index.ann is None):
            return False
    index.settle_ann()  # (the copy groups written beside the graph are the ones it is saved with)
    arrays = index.to_arrays()
    try:
        return publish(db, arrays, index.save_ann, dimension=index.dimension, model=model, epoch=epoch, rev=rev)
    except OSError:  # a cache that cannot be written is only a slower next start
        return False


_serial = itertools.count()
#: The graph's copy groups (``_ann_copies``), in the header file beside the rows' keys.
_COPY_ARRAYS = ("copy_vecs", "copy_tags", "copy_ptr", "copy_keys")


def _tmp(path: Path) -> Path:
    """``.<name>.<pid>-<n>.tmp`` beside ``path``: never a name a reader opens, and the writer's pid is in it."""
    return path.with_name(f".{path.name}.{os.getpid()}-{next(_serial)}.tmp")


_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _create(path: Path, mode: int) -> tuple[Path, int]:
    """A new file beside ``path`` under a fresh temporary name: its name and descriptor.

    ``O_EXCL | O_NOFOLLOW``: a name already taken (a symlink planted there, say) is never
    opened, let alone written through; the next serial is tried. ``mode``: the database's,
    so the vectors and scopes beside it are no more readable than the database itself.
    """
    for _ in range(64):
        tmp = _tmp(path)
        try:
            return tmp, os.open(tmp, _NEW, mode)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def _db_mode(db: Path) -> int:
    try:
        return os.stat(db).st_mode & 0o666
    except OSError:
        return 0o600


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(
    db: Path,
    arrays: Mapping[str, Any],
    graph: Callable[[Path], bool] | None,
    *,
    dimension: int,
    model: str,
    epoch: str,
    rev: int,
    before_rename: Callable[[], bool] | None = None,
) -> bool:
    """Write the snapshot of ``arrays`` (and the graph ``graph(tmp_path)`` writes) and rename it into place.

    Every file is written under a temporary name, fsynced, then renamed; the header
    last, and it names the others by inode, size and mtime: a reader that sees a mix,
    or the debris of a writer killed half-way (``.*.tmp`` files, swept by the next
    writer), sees a mismatch and falls back to the rows. ``before_rename()`` returning
    False abandons the write (the store moved on). True if the files were replaced.
    """
    sweep_debris(db)
    npy, meta, ann = snapshot_path(db), meta_path(db), ann_path(db)
    mode = _db_mode(db)
    tmps: list[Path] = []

    def create(path: Path) -> Any:
        tmp, fd = _create(path, mode)
        tmps.append(tmp)
        return tmp, os.fdopen(fd, "wb")

    try:
        tmp_npy, fh = create(npy)
        with fh:
            np.save(fh, np.ascontiguousarray(arrays["vecs"], dtype=np.float32), allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
        header: dict[str, Any] = {
            "model": model, "epoch": epoch, "rev": rev, "dimension": dimension,
            "vectors": _stamp(tmp_npy), "ann": None,
            "log": 1,  # written by a reader of the hard-delete log (see load_snapshot)
        }  # fmt: skip
        tmp_ann = None
        if graph is not None:
            tmp_ann, fh = create(ann)
            with fh:
                made = os.fstat(fh.fileno())
            # The graph is written by name (usearch), into the file just created; published
            # only if that name still is that regular file.
            if graph(tmp_ann):
                fd = os.open(tmp_ann, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                try:
                    st = os.fstat(fd)
                    if (st.st_dev, st.st_ino) != (made.st_dev, made.st_ino):
                        raise OSError(f"{tmp_ann} was replaced while the graph was written")
                    os.fsync(fd)
                finally:
                    os.close(fd)
                # the rows' count, as a package that keeps copies in the graph checks it (such a
                # package then finds a graph with copies left out the wrong size, and builds its own)
                header["ann"] = _stamp(tmp_ann) + [len(arrays["keys"])]
                header["ann_graph"] = len(arrays["keys"]) - len(arrays.get("copy_keys", ()))
        tmp_meta, fh = create(meta)
        with fh:
            np.savez(
                fh,
                header=np.array(json.dumps(header)),
                keys=arrays["keys"],
                scope=arrays["scope"],
                expires=arrays["expires"],
                scopes=np.array(arrays["scopes"].tolist(), dtype=str),
                **{k: arrays[k] for k in _COPY_ARRAYS if k in arrays and header["ann"] is not None},
            )
            fh.flush()
            os.fsync(fh.fileno())
        if before_rename is not None and not before_rename():
            return False
        os.replace(tmp_npy, npy)
        if header["ann"] is not None:
            assert tmp_ann is not None
            os.replace(tmp_ann, ann)
        os.replace(tmp_meta, meta)  # the header last: until then readers see a mismatch, never a mix
        with contextlib.suppress(OSError):
            _fsync(db.parent)
        with contextlib.suppress(OSError):
            _legacy_path(db).unlink()
        return True
    finally:
        for tmp in tmps:  # (only names this call created)
            with contextlib.suppress(OSError):
                tmp.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, another user's
        return True
    return True


def sweep_debris(db: Path) -> int:
    """Remove the temporary files of snapshot writers that died (killed mid-build); how many."""
    gone = 0
    try:
        names = os.listdir(db.parent)
    except OSError:
        return 0
    for path in (snapshot_path(db), meta_path(db), ann_path(db)):
        head = f".{path.name}."
        for name in names:
            if not (name.startswith(head) and name.endswith(".tmp")):
                continue
            pid = name[len(head) : -len(".tmp")].split("-", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    (db.parent / name).unlink()
                    gone += 1
    return gone


def _header(db: Path) -> dict[str, Any] | None:
    """The header of the snapshot in place if its ``.npy`` is the one it names (its ``ann`` cleared if the graph file is not), or None."""
    try:
        with np.load(meta_path(db), allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
        if not isinstance(header, dict) or _stamp(snapshot_path(db)) != header["vectors"]:
            return None
        if header.get("ann"):
            try:
                if _stamp(ann_path(db)) != header["ann"][:3]:
                    header["ann"] = None
            except OSError:
                header["ann"] = None
        return header
    except Exception:  # noqa: BLE001 - a damaged sidecar of any kind (a cut zip, a bad CRC, junk) is no snapshot
        return None


def load_snapshot(
    db: Path, *, model: str, epoch: str, with_ann: bool = True, min_rev: int = 0, legacy_upto: int = 0,
    dimension: int | None = None,
) -> tuple[VectorIndex, int] | None:
    """``(index, rev)`` if a snapshot for this model and epoch (and ``dimension``, if given), as of ``min_rev``
    or later, exists and reads cleanly.

    Anything else is ``None`` (the caller loads the rows), whatever is wrong with the files:
    missing, cut short, a bad CRC, arrays of the wrong length or kind.

    A header without ``log`` was written by a package that knows no hard-delete log
    (schema 1): its matrix may still hold rows erased since the file was migrated, so it
    is used only if it is as of ``legacy_upto`` (the rev at migration) or earlier.

    The index's base block is a read-only memory map of the ``.npy``. The graph is
    attached when its file is the one the header names and it passes a self-check;
    otherwise the index comes back without one (the caller rebuilds it).
    """
    npy, meta = snapshot_path(db), meta_path(db)
    if not meta.exists() or not npy.exists():
        return None
    try:
        with np.load(meta, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            if header["model"] != model or header["epoch"] != epoch or int(header["rev"]) < min_rev:
                return None  # (older than the tombstone floor: the log no longer holds what it lacks)
            if dimension is not None and int(header["dimension"]) != dimension:
                return None  # (not the store's vectors)
            if not header.get("log") and int(header["rev"]) > legacy_upto:
                return None
            arrays: dict[str, Any] = {k: data[k] for k in ("keys", "scope", "expires", "scopes")}
            if with_ann and header.get("ann"):
                arrays.update((k, data[k]) for k in _COPY_ARRAYS if k in data.files)
        if _stamp(npy) != header["vectors"]:
            return None  # another process is between renames, or the file was replaced
        arrays["vecs"] = np.load(npy, mmap_mode="r", allow_pickle=False)
        if _stamp(npy) != header["vectors"]:
            return None
        index = VectorIndex.from_arrays(int(header["dimension"]), arrays)
        if with_ann and header.get("ann"):
            _attach(db, index, header["ann"], int(header.get("ann_graph", header["ann"][3])), arrays)
        return index, int(header["rev"])
    except Exception:  # noqa: BLE001 - as in _header: a snapshot that does not read cleanly is no snapshot
        return None


def _attach(db: Path, index: VectorIndex, stamp: list[int], count: int, arrays: dict[str, Any]) -> None:
    """Map the graph (of ``count`` vectors, the rows' copies left out) onto ``index`` if it is the file named and checks out."""
    path = ann_path(db)
    try:
        if _stamp(path) != stamp[:3]:
            return
    except OSError:
        return
    ann = AnnIndex.open(path, index.dimension, count)
    if ann is None or _stamp(path) != stamp[:3]:
        return
    try:
        ann.copies = CopyGroups.from_arrays(index.dimension, arrays)
    except ValueError:
        return
    if len(ann) + len(ann.copies) != len(arrays["keys"]) or not ann.copies_check(arrays["keys"], arrays["vecs"]):
        return
    if not ann.self_check(arrays["keys"], arrays["vecs"]):
        return
    index.attach_ann(ann)
