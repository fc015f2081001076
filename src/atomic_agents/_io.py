"""Durable file primitives, confined to the agents root: atomic replace, append, in-place, locks.

Every mutation of a vault file goes through this module, and every function
takes the agents ``root``. The one gate is :func:`open_dir`: it resolves the
target's folder, refuses it if it leads outside the root (a symlinked agent,
``memory/``, ``log/`` or ``journal/`` folder pointing elsewhere), then opens
it component by component from the root with ``O_NOFOLLOW``, so a symlink
swapped in meanwhile is refused too. Files are then created, opened and
renamed relative to that folder descriptor (``openat``-style), each open with
``O_NOFOLLOW``: a write never follows a final symlink, and never replaces one
either. A refusal is an :class:`~atomic_agents.exceptions.UnsafePathError`
naming the path. A symlink *inside* the root that resolves inside it (an alias
of another agent's folder, say) is followed: where the write lands is inside.

:func:`atomic_write`: the bytes go to a temporary file in the same folder,
which is fsynced, renamed over the target, and then the folder is fsynced so
the rename itself is durable. A reader (or a crash) sees the old file or the
new one, never a mix.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from .exceptions import LockBusyError, UnsafePathError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = [
    "FileLock",
    "append_line",
    "atomic_write",
    "atomic_write_many",
    "fsync_dir",
    "inside_root",
    "make_dirs",
    "open_dir",
    "pid_alive",
    "read_nofollow",
    "resolve_inside",
    "sweep_stale_temps",
    "write_in_place",
]

StrPath = str | os.PathLike[str]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC


# ------------------------------------------------------------------ the gate
def inside_root(root: StrPath, path: StrPath) -> bool:
    """True if ``path``, all symlinks resolved, is the root or lies under it."""
    real_root = os.path.realpath(root)
    return _within(real_root, os.path.realpath(path))


def _within(real_root: str, real: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def resolve_inside(root: StrPath, path: StrPath, *, what: str = "path", naming: StrPath | None = None) -> str:
    """``path`` with every symlink resolved; :class:`UnsafePathError` (naming ``naming``, else
    ``path``) if that leaves ``root``.

    >>> resolve_inside("/tmp", "/etc/passwd")  # doctest: +SKIP
    Traceback (most recent call last):
    UnsafePathError: /etc/passwd: resolves to /etc/passwd, outside the agents root /tmp [outside-root]
    """
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if not _within(real_root, real):
        raise UnsafePathError(
            f"{what} resolves to {real}, outside the agents root {real_root}; nothing outside the root is read or written",
            path=path if naming is None else naming,
            resolved=real,
            rule="outside-root",
        )
    return real


def open_dir(root: StrPath, directory: StrPath, *, create: bool = False, naming: StrPath | None = None,
             follow: bool = True) -> int:
    """A descriptor of ``directory``, which must resolve inside ``root``; the caller closes it.

    Fast path: the folder's path below the root is opened one component at a
    time from the root with ``O_NOFOLLOW | O_DIRECTORY``; when no component is
    a symlink, it is inside by construction (and no symlink swapped in
    meanwhile can be followed). When one is, the folder is resolved and
    checked against the resolved root, then the resolved path is opened the
    same way. ``create`` makes missing folders (mode 0o755), each inside the
    one before. ``follow=False`` (restore) refuses any symlink below the root,
    even one that stays inside. Raises :class:`UnsafePathError` naming
    ``naming`` (the file about to be written) or else ``directory``;
    ``FileNotFoundError`` if it is missing and ``create`` is false.
    """
    named = directory if naming is None else naming
    rel = _lexical_rel(root, directory)
    if rel is not None:
        try:
            return _walk(os.fspath(root), rel, create, named)
        except _SymlinkOnTheWay as hit:
            if not follow:
                raise UnsafePathError(f"folder {hit.part!r} is a symlink; it is not followed here", path=named) from None
    elif not follow:
        raise UnsafePathError(f"is not under the agents root {root}", path=named, rule="outside-root")
    real_root = os.path.realpath(root)
    real = resolve_inside(root, directory, what="its folder", naming=named)
    parts = tuple(p for p in real[len(real_root):].split(os.sep) if p)
    try:
        return _walk(real_root, parts, create, named)
    except _SymlinkOnTheWay as hit:  # resolved without it a moment ago: swapped in meanwhile
        raise UnsafePathError(f"folder {hit.part!r} turned into a symlink while being opened; refused",
                              path=named) from None


class _SymlinkOnTheWay(Exception):
    def __init__(self, part: str) -> None:
        self.part = part


def _lexical_rel(root: StrPath, directory: StrPath) -> tuple[str, ...] | None:
    """The components of ``directory`` below ``root``, as written; None if it is not written under it."""
    raw = os.fspath(directory)
    if os.pardir in raw.split(os.sep):
        return None  # '..' after a symlink is not lexical: resolve instead
    rel = os.path.relpath(os.path.abspath(raw), os.path.abspath(root))
    if rel == os.curdir:
        return ()
    parts = tuple(rel.split(os.sep))
    return None if parts[0] == os.pardir else parts


def _walk(start: str, parts: tuple[str, ...], create: bool, named: StrPath) -> int:
    fd = os.open(start, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)  # the root itself may be a symlink: trusted
    try:
        for part in parts:
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                try:
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if _is_symlink_error(exc, part, fd):
                        raise _SymlinkOnTheWay(part) from None
                    raise
            except OSError as exc:
                if _is_symlink_error(exc, part, fd):
                    raise _SymlinkOnTheWay(part) from None
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_symlink_error(exc: OSError, part: str, fd: int) -> bool:
    """``O_NOFOLLOW | O_DIRECTORY`` on a symlink fails with ELOOP, or on Linux with ENOTDIR."""
    if exc.errno == errno.ELOOP:
        return True
    if exc.errno != errno.ENOTDIR:
        return False
    try:
        return stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _parent(root: StrPath, path: StrPath, *, create: bool = False) -> tuple[int, str]:
    p = os.fspath(path)
    return open_dir(root, os.path.dirname(p) or ".", create=create, naming=p), os.path.basename(p)


def _not_a_symlink(dfd: int, name: str, path: StrPath) -> int | None:
    """Permission bits of the existing file (kept by its replacement); refuses a symlink."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError("is a symlink; a write never follows or replaces one", path=path)
    return st.st_mode & 0o777


def _open_nofollow(dfd: int, name: str, flags: int, path: StrPath, mode: int = 0o644) -> int:
    try:
        return os.open(name, flags | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError("is a symlink; a write never follows one", path=path) from None
        raise


def fsync_dir(directory: StrPath) -> None:
    """Make a rename or a new entry in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ writers
def atomic_write(path: StrPath, data: bytes | str, *, root: StrPath, sync_dir: bool = True,
                 durable: bool = True) -> None:
    """Replace ``path`` (inside ``root``) with ``data`` atomically and durably.

    temp file in the same folder + fsync + rename + fsync of the folder
    (``durable=False`` skips both fsyncs: caches). The file keeps its
    permission bits if it existed. A symlink at ``path`` is refused. A missing
    parent folder is created (as the reference implementation does), inside
    ``root`` only, through the same gate as every write (:func:`open_dir`).

    >>> atomic_write("/tmp/vault/example.md", "hello\\n", root="/tmp/vault")  # doctest: +SKIP
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    dfd, name = _parent(root, path, create=True)
    try:
        tmp, fd = _write_unsynced(dfd, name, payload, _not_a_symlink(dfd, name, path))
        try:
            if durable:
                _sync_close(fd)
            else:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        if sync_dir and durable:
            os.fsync(dfd)
    finally:
        os.close(dfd)


def write_in_place(path: StrPath, payload: bytes, *, root: StrPath) -> None:
    """Overwrite ``path`` in place (one ``pwrite`` + truncate, no fsync); a symlink is refused."""
    dfd, name = _parent(root, path)
    try:
        fd = _open_nofollow(dfd, name, os.O_WRONLY | os.O_CREAT, path)
    finally:
        os.close(dfd)
    try:
        os.pwrite(fd, payload, 0)
        os.ftruncate(fd, len(payload))
    finally:
        os.close(fd)


def read_nofollow(path: StrPath, *, root: StrPath) -> bytes:
    """The bytes of ``path`` (inside ``root``), refusing a final symlink; ``FileNotFoundError`` if absent."""
    dfd, name = _parent(root, path)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePathError("is a symlink; refused", path=path) from None
            raise
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def pid_alive(pid: int) -> bool:
    """True if a process with this pid exists (ours included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_temps(directory: StrPath, *, root: StrPath) -> list[Path]:
    """Remove temp files left by writers that were killed mid-write (their pid is gone).

    A killed writer never got to rename its temp file, so the target still holds
    the old version; the temp file is garbage.
    """
    removed: list[Path] = []
    try:
        dfd = open_dir(root, directory)
    except (FileNotFoundError, NotADirectoryError):
        return removed
    try:
        for name in os.listdir(dfd):
            if not (name.startswith(".") and name.endswith(".tmp")):
                continue
            parts = name.rsplit(".", 3)  # .{name}.{pid}.{ns}.tmp
            if len(parts) == 4 and parts[1].isdigit() and not pid_alive(int(parts[1])):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dfd)
                    removed.append(Path(directory) / name)
    finally:
        os.close(dfd)
    return removed


_POOL: ThreadPoolExecutor | None = None  # concurrent.futures (and logging) load with the first batch write
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="atomic-write")
        return _POOL


def _write_unsynced(dfd: int, name: str, payload: bytes, mode: int | None) -> tuple[str, int]:
    tmp = f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    # O_EXCL never follows a symlink; O_NOFOLLOW says so twice.
    fd = _open_nofollow(dfd, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, tmp, 0o644 if mode is None else mode)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    return tmp, fd


def _sync_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_many(items: Sequence[tuple[Path, bytes | str]], *, root: StrPath) -> None:
    """Write several files (inside ``root``), each atomically and durably, with their fsyncs overlapped.

    Every temp file is written, then all are fsynced at once on a small thread
    pool (the device flushes them together: group commit), then renamed in the
    order given, then each folder is fsynced once. No file is renamed before
    every temp file is durable, so each target is old or new, never partial.
    The batch is not a transaction: a crash between two renames leaves some new.
    Every folder and target is checked before the first byte is written.
    """
    if not items:
        return
    dirs: dict[str, int] = {}
    staged: list[tuple[str, int, str, int]] = []  # name, folder fd, temp name, temp fd
    try:
        plan: list[tuple[StrPath, str, int, bytes, int | None]] = []
        for path, data in items:
            parent = os.path.dirname(os.fspath(path)) or "."
            if parent not in dirs:
                dirs[parent] = open_dir(root, parent, naming=path)
            dfd, name = dirs[parent], os.path.basename(os.fspath(path))
            payload = data.encode("utf-8") if isinstance(data, str) else data
            plan.append((path, name, dfd, payload, _not_a_symlink(dfd, name, path)))
        try:
            try:
                for _, name, dfd, payload, mode in plan:
                    tmp, fd = _write_unsynced(dfd, name, payload, mode)
                    staged.append((name, dfd, tmp, fd))
            except BaseException:
                for _, _, _, fd in staged:
                    os.close(fd)  # never fsynced: nobody else holds these descriptors yet
                raise
            if len(staged) <= 2:
                # measured here: for one or two files, handing fsyncs to threads costs more than it overlaps
                failed: list[BaseException] = []
                for *_, fd in staged:
                    try:
                        _sync_close(fd)  # closes fd even when fsync fails
                    except OSError as exc:
                        failed.append(exc)
                if failed:
                    raise failed[0]
            else:
                from concurrent.futures import wait

                futures = [_pool().submit(_sync_close, fd) for *_, fd in staged]
                wait(futures)  # every descriptor is closed before any error is raised
                for f in futures:
                    f.result()
            for name, dfd, tmp, _ in staged:
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            for _, dfd, tmp, _ in staged:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
            raise
        for dfd in dirs.values():
            os.fsync(dfd)
    finally:
        for dfd in dirs.values():
            os.close(dfd)


def append_line(path: StrPath, line: str, *, root: StrPath, fsync: bool = True, create_dirs: bool = False) -> None:
    """Append one line with a single O_APPEND ``write`` so concurrent appenders never interleave.

    ``path`` must lie inside ``root`` and is opened with ``O_NOFOLLOW``;
    ``create_dirs`` makes its missing folders (inside the root).
    """
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    dfd, name = _parent(root, path, create=create_dirs)
    try:
        try:
            os.stat(name, dir_fd=dfd, follow_symlinks=False)
            created = False
        except FileNotFoundError:
            created = True
        fd = _open_nofollow(dfd, name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, path)
        try:
            written = os.write(fd, data)
            if written != len(data):  # pragma: no cover - regular files write fully
                raise OSError(errno.EIO, f"short append to {path}")
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if created and fsync:
            os.fsync(dfd)
    finally:
        os.close(dfd)


def make_dirs(directory: StrPath, *, root: StrPath) -> None:
    """``mkdir -p`` inside ``root``: refuses a folder that resolves outside it."""
    os.close(open_dir(root, directory, create=True))


class FileLock:
    """An exclusive advisory lock (``flock``) on a lock file inside ``root``.

    ``timeout=0`` refuses at once if the lock is held; ``None`` waits forever.
    The lock file is opened with ``O_NOFOLLOW`` (a symlinked lock file is refused,
    never created or truncated elsewhere); its missing folder is created inside the root.

    >>> with FileLock("/tmp/vault/x.lock", root="/tmp/vault", timeout=5):  # doctest: +SKIP
    ...     ...
    """

    def __init__(self, path: StrPath, *, root: StrPath, timeout: float | None = 30.0, what: str = "lock") -> None:
        self.path = Path(path)
        self.root = root
        self.timeout = timeout
        self.what = what
        self._fd: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        if self._fd is not None:
            self._depth += 1
            return
        dfd, name = _parent(self.root, self.path, create=True)
        try:
            fd = _open_nofollow(dfd, name, os.O_RDWR | os.O_CREAT, self.path)
        finally:
            os.close(dfd)
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
def locked(path: StrPath, *, root: StrPath, timeout: float | None = 30.0, what: str = "lock") -> Iterator[None]:
    with FileLock(path, root=root, timeout=timeout, what=what):
        yield
