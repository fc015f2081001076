"""Durable file primitives: atomic replace, atomic append, advisory locks.

Every mutation of a vault file goes through :func:`atomic_write`: the bytes go
to a temporary file in the same directory, which is fsynced, renamed over the
target, and then the directory is fsynced so the rename itself is durable. A
reader (or a crash) sees the old file or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from .exceptions import LockBusyError

__all__ = ["FileLock", "append_line", "atomic_write", "atomic_write_many", "fsync_dir", "pid_alive", "sweep_stale_temps"]


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make a rename or a new entry in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes | str, *, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    temp file in the same directory + fsync + rename + fsync of the directory.
    The file keeps its permission bits if it existed. A missing parent folder
    is created (as the reference implementation does), but only below the
    nearest folder that exists: see :func:`_make_parents`.

    >>> atomic_write("/tmp/example.md", "hello\\n")  # doctest: +SKIP
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    mode = _mode_of(target)
    try:
        tmp, fd = _write_unsynced(target, payload, mode)
    except FileNotFoundError:
        if not _make_parents(target.parent):
            raise
        tmp, fd = _write_unsynced(target, payload, mode)
    try:
        _sync_close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync_dir:
        fsync_dir(target.parent)


def _make_parents(parent: Path) -> bool:
    """Create the missing folders of ``parent`` inside its nearest existing ancestor; False if none were missing.

    The ancestor is opened with ``O_NOFOLLOW`` (a symlink there is refused:
    folders are never created through a link), and each new folder is made
    relative to an open descriptor of the one above it and reopened with
    ``O_NOFOLLOW``, so the chain stays inside that ancestor's tree: a symlink
    planted at a missing name, or swapped in meanwhile, is refused, never
    followed. A ``..`` or ``.`` among the missing parts is refused too (it
    would leave the tree).
    """
    missing: list[str] = []
    base = parent
    while not os.path.lexists(base):
        if base.name in ("", ".", "..") or base.parent == base:
            raise FileNotFoundError(errno.ENOENT, "cannot create the parent folder", str(parent))
        missing.append(base.name)
        base = base.parent
    if not missing:
        return False
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise FileNotFoundError(errno.ENOENT, f"not creating folders under {base} (not a real folder)", str(parent)) from exc
    try:
        for name in reversed(missing):
            with contextlib.suppress(FileExistsError):  # a concurrent writer made it: reopened below, no follow
                os.mkdir(name, 0o755, dir_fd=fd)
            os.fsync(fd)  # the new entry is durable before anything is written below it
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    return True


def _mode_of(path: Path) -> int | None:
    """Permission bits of an existing file, kept by the replacement."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return None


def pid_alive(pid: int) -> bool:
    """True if a process with this pid exists (ours included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_temps(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove temp files left by writers that were killed mid-write (their pid is gone).

    A killed writer never got to rename its temp file, so the target still holds
    the old version; the temp file is garbage.
    """
    removed: list[Path] = []
    folder = Path(directory)
    if not folder.is_dir():
        return removed
    for p in folder.glob(".*.tmp"):
        parts = p.name.rsplit(".", 3)  # .{name}.{pid}.{ns}.tmp
        if len(parts) == 4 and parts[1].isdigit() and not pid_alive(int(parts[1])):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                removed.append(p)
    return removed


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="atomic-write")
        return _POOL


def _write_unsynced(path: Path, payload: bytes, mode: int | None) -> tuple[Path, int]:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644 if mode is None else mode)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp, fd


def _sync_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_many(items: Sequence[tuple[Path, bytes | str]]) -> None:
    """Write several files, each atomically and durably, with their fsyncs overlapped.

    Every temp file is written, then all are fsynced at once on a small thread
    pool (the device flushes them together: group commit), then renamed in the
    order given, then each directory is fsynced once. No file is renamed before
    every temp file is durable, so each target is old or new, never partial.
    The batch is not a transaction: a crash between two renames leaves some new.
    """
    if not items:
        return
    staged: list[tuple[Path, Path, int]] = []
    try:
        try:
            for path, data in items:
                payload = data.encode("utf-8") if isinstance(data, str) else data
                tmp, fd = _write_unsynced(path, payload, _mode_of(path))
                staged.append((path, tmp, fd))
        except BaseException:
            for _, _, fd in staged:
                os.close(fd)  # never fsynced: nobody else holds these descriptors yet
            raise
        if len(staged) <= 2:
            # measured here: for one or two files, handing fsyncs to threads costs more than it overlaps
            failed: list[BaseException] = []
            for _, _, fd in staged:
                try:
                    _sync_close(fd)  # closes fd even when fsync fails
                except OSError as exc:
                    failed.append(exc)
            if failed:
                raise failed[0]
        else:
            futures = [_pool().submit(_sync_close, fd) for _, _, fd in staged]
            wait(futures)  # every descriptor is closed before any error is raised
            for f in futures:
                f.result()
        for path, tmp, _ in staged:
            os.replace(tmp, path)
    except BaseException:
        for _, tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    for d in dict.fromkeys(path.parent for path, _ in items):
        fsync_dir(d)


def append_line(path: str | os.PathLike[str], line: str, *, fsync: bool = True) -> None:
    """Append one line with a single O_APPEND ``write`` so concurrent appenders never interleave."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    target = Path(path)
    created = not target.exists()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):  # pragma: no cover - regular files write fully
            raise OSError(errno.EIO, f"short append to {target}")
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    if created and fsync:
        fsync_dir(target.parent)


class FileLock:
    """An exclusive advisory lock (``flock``) on a lock file.

    ``timeout=0`` refuses at once if the lock is held; ``None`` waits forever.

    >>> with FileLock("/tmp/x.lock", timeout=5):  # doctest: +SKIP
    ...     ...
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float | None = 30.0, what: str = "lock") -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.what = what
        self._fd: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        if self._fd is not None:
            self._depth += 1
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # first lock in a new folder
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    os.close(fd)
                    raise LockBusyError(f"{self.what} is held by another process", path=self.path) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        self._fd = fd
        self._depth = 1

    def release(self) -> None:
        if self._fd is None:
            return
        self._depth -= 1
        if self._depth > 0:
            return
        fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def locked(path: str | os.PathLike[str], *, timeout: float | None = 30.0, what: str = "lock") -> Iterator[None]:
    with FileLock(path, timeout=timeout, what=what):
        yield
