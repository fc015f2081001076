"""Reading a large store's mapped files into the page cache, in the background, once per process.

The vector snapshot (``<db>-vectors.npy``) and the ANN graph (``<db>-ann.usearch``) are
memory-mapped (``_matrix_cache``): opening them costs milliseconds, and a search reads only
the pages it touches. When the files are not in the page cache (after a reboot, or after
other work evicted them), each of those pages is a random read: at 1M memories (1.5 GB of
vectors, 0.6 GB of graph) a search then takes 2-4x longer than warm for hundreds of
queries, until the pages it keeps touching have been read one by one. Reading the files
in order takes about a second on this kind of disk and makes every later search warm.

:func:`prefetch` does that in a daemon thread, at most once per file per process. Only
pages not yet cached are read (``mincore`` on Linux and macOS tells which; elsewhere the
whole file is read, which costs little when it is cached). Nothing here changes a
result: it only decides how soon the kernel has the pages. Any error (a file replaced,
removed, unreadable; no ``ctypes``; no memory) ends the read quietly.

The SQLite store (``_sqlite_vectors``) starts the graph's read when it maps the graph (it
reads while the first query is embedded) and the matrix's after the first search, whose own
page reads would otherwise queue behind 1.5 GB.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["PREFETCH_MIN_BYTES", "prefetch"]

#: Files smaller than this are left alone: a search soon touches most of their pages anyway.
PREFETCH_MIN_BYTES = 32 << 20
#: The read size (and the unit of the resident-page runs).
_CHUNK = 1 << 20

#: ``(device, inode, size, mtime)`` of the files read: a file published later under the same name
#: is another file, even where the filesystem hands its inode number on
_started: set[tuple[int, int, int, int]] = set()
_lock = threading.Lock()


def prefetch(paths: Sequence[Path]) -> threading.Thread | None:
    """Start reading the uncached pages of ``paths`` (in this order) in a daemon thread.

    Each file (by device, inode, size and mtime) is read at most once per process; files under
    :data:`PREFETCH_MIN_BYTES` or missing are skipped. Returns the thread, or ``None``
    when there is nothing to read.
    """
    todo: list[Path] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with _lock:
            if st.st_size < PREFETCH_MIN_BYTES or key in _started:
                continue
            _started.add(key)
        todo.append(path)
    if not todo:
        return None
    thread = threading.Thread(target=_read_all, args=(todo,), name="atomic-agents-prefetch", daemon=True)
    thread.start()
    return thread


def _read_all(paths: Sequence[Path]) -> None:
    with contextlib.suppress(Exception):  # (a best-effort read in the background: never a traceback on stderr)
        view = memoryview(bytearray(_CHUNK))
        for path in paths:
            _read_one(path, view)


def _read_one(path: Path, view: memoryview) -> None:
    with contextlib.suppress(Exception), open(path, "rb", buffering=0) as f:
        for start, end in _uncached(f.fileno(), os.fstat(f.fileno()).st_size):
            f.seek(start)
            off = start
            while off < end:
                n = f.readinto(view[: min(_CHUNK, end - off)])
                if not n:
                    break
                off += n


def _uncached(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """Byte ranges of the file not in the page cache, in order, in whole chunks (all of it if unknown)."""
    try:
        resident = _resident_pages(fd, size)
    except Exception:  # noqa: BLE001 - no map, no ctypes: read it all
        resident = None
    if resident is None:
        yield 0, size
        return
    import mmap

    import numpy as np

    per = max(1, _CHUNK // mmap.PAGESIZE)
    unit = per * mmap.PAGESIZE
    held = np.frombuffer(resident, dtype=np.uint8) & 1
    held = np.concatenate([held, np.ones(-len(held) % per, dtype=np.uint8)])
    cold: list[bool] = np.asarray(held.reshape(-1, per).min(axis=1) == 0).tolist()
    run: int | None = None
    for chunk, is_cold in enumerate(cold):
        if is_cold and run is None:
            run = chunk
        elif not is_cold and run is not None:
            yield run * unit, chunk * unit
            run = None
    if run is not None:
        yield run * unit, size


def _resident_pages(fd: int, size: int) -> bytes | None:
    """``mincore``'s vector for the file (a byte per page, bit 0 set when cached), or ``None``."""
    if size == 0 or not (sys.platform.startswith("linux") or sys.platform == "darwin"):
        return None
    import ctypes  # (here: the package costs 2-8 ms at import, which a CLI process that maps nothing never pays)

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mincore = libc.mincore
    except (OSError, AttributeError):
        return None
    import mmap

    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    mincore.restype = ctypes.c_int
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * pages)()
    with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mm:
        # the map's address, without a writable buffer: a zero-copy view's pointer
        import numpy as np

        view = np.frombuffer(mm, dtype=np.uint8)
        try:
            if mincore(ctypes.c_void_p(view.ctypes.data), ctypes.c_size_t(size), vec) != 0:
                return None
        finally:
            del view
    return bytes(vec)
