"""Group commit for a migration's writes: each file atomic, the fsyncs overlapped.

Every write is still temp file + fsync + rename (spec MUST 3): the unit is
renamed over only after its temp file's fsync returned. What changes is who
waits: the file I/O runs on a small thread pool while the runner goes on with
the next unit, so the filesystem journal commits many of them at once
instead of one flush per file (on the shared ext4 disk this was measured at
3-7x fewer milliseconds per unit than one-by-one). A file is never visible
half-written; a crash leaves each unit old or new, and at most a temp file
``.<name>.<pid>.<ns>.tmp``, which a restore sweeps away.

The runner calls :meth:`GroupCommit.drain` at the end of every script pass
(and before validation): all renames are done and their folders fsynced
before anything reads the vault again. Before a restore, :meth:`quiesce`
waits for in-flight writes so none can land after the restore.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future, ThreadPoolExecutor

from .._io import atomic_write, fsync_dir

__all__ = ["GroupCommit"]

_WORKERS = 8


class GroupCommit:
    """Submit atomic writes; :meth:`drain` makes them all durable or raises the first failure."""

    def __init__(self, root: str | os.PathLike[str], workers: int = _WORKERS) -> None:
        self._root = root
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="atomic-agents-commit")
        self._pending: list[Future[None]] = []
        self._dirs: set[str] = set()

    def submit(self, path: str, data: bytes) -> Future[None]:
        """Write ``data`` to a temp file next to ``path``, fsync it, rename it over ``path``: on the pool."""
        # _io.atomic_write without the folder fsync (drain does that once per folder); its temp
        # name shape (.<name>.<pid>.<ns>.tmp) is what a restore recognises as a killed run's debris.
        future = self._pool.submit(atomic_write, path, data, root=self._root, sync_dir=False)
        self._pending.append(future)
        self._dirs.add(os.path.dirname(path))
        return future

    def drain(self) -> None:
        """Wait for every submitted write; fsync the touched folders; raise the first failure."""
        pending, self._pending = self._pending, []
        first: BaseException | None = None
        for future in pending:
            exc = future.exception()
            if exc is not None and first is None:
                first = exc
        if first is not None:
            raise first
        dirs, self._dirs = sorted(self._dirs), set()
        for d in dirs:
            fsync_dir(d)

    def quiesce(self) -> None:
        """Wait for in-flight writes, ignoring their failures (a restore follows)."""
        with contextlib.suppress(BaseException):
            self.drain()

    def close(self) -> None:
        self.quiesce()
        self._pool.shutdown(wait=True)
