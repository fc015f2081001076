"""Snapshots of a vault as ``tar.gz``, and the restore that only puts back what they hold.

What a snapshot leaves out (spec: "excluding caches, logs, and other
regeneratable artifacts") is decided by :mod:`._layout`, the same rule that
says what a unit is, so every unit a run can touch is in its snapshot:
``_migrations/``, ``_dashboard/``, ``_cache/``, the memory store's ``_memory/``
(a live SQLite file is never tarred; the store has its own export), dot-entries
(``.git/``, ``.migration.lock``, atomic-write temp files), an agent's own
``log/`` folder and ``*.jsonl`` run logs.

Restore (spec MUST 4) never swaps the vault wholesale: the archive is first
extracted in full to a staging folder on the same filesystem, and its gzip CRC
checked, so a corrupt archive or a failure mid-extract leaves the live vault
untouched. Only then is each captured file renamed over its live path (each
rename atomic). Anything the snapshot did not capture (logs, ``.git/``,
caches, files created since) is left exactly as it is. If the process dies
during the swap, running the same rollback again finishes it: the staging
copy is complete before the first live file changes.

Nothing outside the root is ever created, replaced or truncated (issue 7):
an archive symlink whose target leaves the root (absolute, ``..`` past the
top, a ``..`` after a name, or through a live symlink that leads out) is
refused, and one the snapshot would store is left out of it; every member
also passes ``tarfile.data_filter`` against the staging folder (a second
line of defence that also catches chains of the archive's own links). The
live tree is checked before the first rename: a captured file whose live
folder chain holds a symlink (even one inside the root) refuses the restore,
and the swap opens folders from the root with ``O_NOFOLLOW`` and renames
relative to them. Archives are opened with ``O_NOFOLLOW`` too: a symlink in
``_migrations/snapshots/`` is never read as a snapshot.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import gzip
import logging
import os
import re
import shutil
import stat
import tarfile
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from .._io import make_dirs, open_dir, pid_alive
from ..exceptions import MigrationError, MigrationSnapshotNotFound, UnsafePathError
from ._layout import is_excluded

__all__ = [
    "SNAPSHOT_NAME",
    "create_snapshot",
    "is_excluded",
    "list_snapshot_names",
    "resolve_snapshot",
    "restore_snapshot",
    "sweep_staging",
]

SNAPSHOT_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{6}_pre_v\d+_migration(?:-\d+)?\.tar\.gz$", re.ASCII)

# Temp files of _io.atomic_write: ".<name>.<pid>.<ns>.tmp".
_ATOMIC_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.\d+\.tmp$", re.ASCII)
# Staging folders of restore_snapshot: ".restore-<pid>-<hex>".
_STAGING = re.compile(r"^\.restore-(?P<pid>\d+)-[0-9a-f]+$", re.ASCII)
_COMPRESSLEVEL = 6  # gzip's own default: the same trade-off as `tar czf`
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

log = logging.getLogger("atomic_agents.migration")


def safe_linkname(root: Path | str, rel: str, linkname: str) -> str | None:
    """The target to store for a symlink at vault-relative ``rel``, or None if it leads out of the root.

    A relative target may climb (``../``) only at its start and never above the
    root; a ``..`` after a name is refused (through another symlink it could
    climb anywhere). An absolute target inside the root is kept as the
    equivalent relative one. The target must also resolve inside the root in
    the live tree (a chain through a live symlink that leads out is refused).
    """
    root_abs = os.path.abspath(root)
    root_real = os.path.realpath(root)
    base = [p for p in rel.split("/")[:-1] if p]
    target = linkname
    if os.path.isabs(linkname):
        norm = os.path.normpath(linkname)
        for r in dict.fromkeys((root_abs, root_real)):
            if norm == r or norm.startswith(r.rstrip(os.sep) + os.sep):
                target = os.path.relpath(norm, os.path.join(r, *base)).replace(os.sep, "/")
                break
        else:
            return None
    parts = [p for p in target.split("/") if p not in ("", ".")]
    ups = 0
    while ups < len(parts) and parts[ups] == "..":
        ups += 1
    if not parts or ".." in parts[ups:] or ups > len(base):
        return None
    real = os.path.realpath(os.path.join(root_real, *base, *parts))
    if not (real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)):
        return None
    return target


def _walk(root: Path) -> list[tuple[str, str]]:
    """(relative posix path, absolute path) of every captured file or symlink, sorted."""
    out: list[tuple[str, str]] = []
    root_s = str(root)
    for dirpath, dirnames, filenames in os.walk(root_s):
        rel_dir = os.path.relpath(dirpath, root_s)
        base = () if rel_dir == "." else tuple(PurePosixPath(rel_dir.replace(os.sep, "/")).parts)
        keep: list[str] = []
        for d in sorted(dirnames):
            if is_excluded(base + (d,), is_dir=True):
                continue
            full = os.path.join(dirpath, d)
            if os.path.islink(full):  # a symlinked folder is stored as the link, not walked twice
                out.append(("/".join(base + (d,)), full))
                continue
            keep.append(d)
        dirnames[:] = keep
        for f in sorted(filenames):
            if not is_excluded(base + (f,), is_dir=False):
                out.append(("/".join(base + (f,)), os.path.join(dirpath, f)))
    out.sort()
    return out


def _snapshot_name(snapshots_dir: Path, target_version: int, now: dt.datetime | None) -> str:
    stamp = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y-%m-%dT%H%M%S")
    name = f"{stamp}_pre_v{target_version}_migration.tar.gz"
    n = 1
    while os.path.lexists(snapshots_dir / name):
        n += 1
        name = f"{stamp}_pre_v{target_version}_migration-{n}.tar.gz"
    return name


def create_snapshot(root: Path, snapshots_dir: Path, target_version: int, *, now: dt.datetime | None = None) -> Path:
    """Write ``snapshots/YYYY-MM-DDTHHMMSS_pre_v{N}_migration.tar.gz`` durably and return its path.

    The archive is written under a temp name and renamed when complete, so a
    crash never leaves a half archive under a snapshot name.
    """
    try:
        dfd = open_dir(root, snapshots_dir, create=True)  # a snapshots folder leading out of the root is refused
    except UnsafePathError as exc:
        raise MigrationError(f"cannot write a snapshot: {exc}") from exc
    try:
        name = _snapshot_name(snapshots_dir, target_version, now)
        tmp = f".{name}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=dfd)
            with os.fdopen(fd, "wb") as raw:
                with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=_COMPRESSLEVEL, format=tarfile.PAX_FORMAT) as tar:
                    for rel, full in _walk(root):
                        _add(tar, rel, full, root)
                raw.flush()
                os.fsync(raw.fileno())
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return snapshots_dir / name


def _add(tar: tarfile.TarFile, rel: str, full: str, root: Path) -> None:
    # Built by hand rather than tar.add(): no per-file passwd/group lookups, and
    # the size comes from the open descriptor, so a file growing meanwhile cannot
    # corrupt the archive.
    info = tarfile.TarInfo(rel)
    st = os.lstat(full)
    info.mtime = int(st.st_mtime)
    info.mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        linkname = safe_linkname(root, rel, os.readlink(full))
        if linkname is None:
            # Not vault content, and a restore would refuse it: left out, so left as it is.
            log.warning("snapshot leaves out %s: a symlink leading out of the vault (%s)", rel, os.readlink(full))
            return
        info.type = tarfile.SYMTYPE
        info.linkname = linkname
        tar.addfile(info)
        return
    if not stat.S_ISREG(st.st_mode):
        return  # sockets, fifos: not vault content
    with open(full, "rb") as fh:
        info.size = os.fstat(fh.fileno()).st_size
        tar.addfile(info, fh)


def list_snapshot_names(snapshots_dir: Path) -> list[str]:
    """Snapshot file names, oldest first."""
    if not snapshots_dir.is_dir():
        return []
    # A symlink is never a snapshot (it could lead anywhere).
    return sorted(p.name for p in snapshots_dir.iterdir()
                  if SNAPSHOT_NAME.match(p.name) and p.is_file() and not p.is_symlink())


def resolve_snapshot(snapshots_dir: Path, snapshot_id: str) -> Path:
    """The archive named ``snapshot_id`` (a bare name or any path ending in it) in ``snapshots_dir``."""
    name = PurePosixPath(str(snapshot_id).replace(os.sep, "/")).name
    path = snapshots_dir / name
    if name and path.is_symlink():
        raise MigrationError(f"{path} is a symlink; a snapshot is never read through a symlink (refused)")
    if not name or not path.is_file():
        raise MigrationSnapshotNotFound(f"no snapshot named {name!r} in {snapshots_dir}")
    return path


def restore_snapshot(root: Path, archive: Path, staging_parent: Path) -> int:
    """Put every file captured in ``archive`` back under ``root``; return how many changed.

    Raises :class:`MigrationError` (live vault untouched) if the archive is
    corrupt, truncated, a symlink, holds a path outside the vault or a symlink
    leading out of it, or if a live folder it restores into is a symlink.
    """
    try:
        make_dirs(staging_parent, root=root)
        pfd = open_dir(root, staging_parent)
    except UnsafePathError as exc:
        raise MigrationError(f"cannot restore: {exc}") from exc
    sweep_staging(staging_parent)
    try:
        name = f".restore-{os.getpid()}-{os.urandom(4).hex()}"
        os.mkdir(name, 0o700, dir_fd=pfd)
    finally:
        os.close(pfd)
    staging = Path(os.path.realpath(staging_parent)) / name  # inside the root, reached without a symlink
    try:
        staged, captured = _stage(root, archive, staging)
        return _swap(root, staging, staged, captured)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def sweep_staging(staging_parent: Path) -> list[str]:
    """Remove staging folders left by a restore that was killed (its pid is gone); return their names.

    A staging folder never holds the only copy of anything (the archive does),
    so a dead run's folder is debris. A symlink with a staging name is
    unlinked, never followed.
    """
    removed: list[str] = []
    try:
        entries = list(os.scandir(staging_parent))
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        m = _STAGING.match(entry.name)
        if m is None or pid_alive(int(m.group("pid"))):  # ours too: another thread may be restoring
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except FileNotFoundError:
            continue
        removed.append(entry.name)
    return removed


def _open_archive(root: Path, archive: Path) -> int:
    """The archive's descriptor: its folder inside the root, the file itself not a symlink."""
    try:
        dfd = open_dir(root, archive.parent)
    except UnsafePathError as exc:
        raise MigrationError(f"snapshot {archive.name}: {exc}") from exc
    try:
        return os.open(archive.name, os.O_RDONLY | _NOFOLLOW, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise MigrationError(f"{archive} is a symlink; a snapshot is never read through a symlink (refused)") from None
        raise
    finally:
        os.close(dfd)


class _LiveTree:
    """What the live vault holds along a restored file's folders; refuses a symlink anywhere on the way."""

    def __init__(self, root: Path, archive: Path) -> None:
        self.root = str(root)
        self.archive = archive
        self._ok: set[tuple[str, ...]] = {()}

    def check(self, rel: str, dirs: tuple[str, ...]) -> None:
        for i in range(1, len(dirs) + 1):
            prefix = dirs[:i]
            if prefix in self._ok:
                continue
            try:
                st = os.lstat(os.path.join(self.root, *prefix))
            except FileNotFoundError:
                return  # missing from here down: the swap creates it
            where = "/".join(prefix)
            if stat.S_ISLNK(st.st_mode):
                raise MigrationError(
                    f"cannot restore {rel} from {self.archive.name}: {where} is a symlink in the live vault, and a "
                    "restore never follows one (move it away and run the rollback again); the vault was not touched"
                )
            if not stat.S_ISDIR(st.st_mode):
                raise MigrationError(
                    f"cannot restore {rel} from {self.archive.name}: {where} is a file where the snapshot has a folder; "
                    "the vault was not touched"
                )
            self._ok.add(prefix)


def _filtered(m: tarfile.TarInfo, root: Path, archive: Path, staging: Path) -> tarfile.TarInfo:
    """Our own link rule, then ``tarfile``'s ``data`` filter as a second line of defence."""
    if m.issym():
        linkname = safe_linkname(root, m.name, m.linkname)
        if linkname is None:
            raise MigrationError(
                f"snapshot {archive.name} holds a symlink {m.name!r} -> {m.linkname!r} that leads out of the vault; "
                "refused, the vault was not touched"
            )
        m = m.replace(linkname=linkname, deep=False)
    try:
        # Checked against the staging folder, which mirrors the vault: names, link targets (through
        # the links staged so far), special files. Its mode changes are not taken (see _stage).
        tarfile.data_filter(m, str(staging))
    except tarfile.FilterError as exc:
        raise MigrationError(f"snapshot {archive.name} holds an unsafe entry {m.name!r} ({exc})") from exc
    return m


def _stage(root: Path, archive: Path, staging: Path) -> tuple[list[str], dict[str, set[str]]]:
    """Stream the archive; stage (fsynced) every entry that differs from the live vault.

    Returns the staged relative paths and, per live folder, the names the
    snapshot captured. Nothing under ``root`` changes here.
    """
    staged: list[str] = []
    captured: dict[str, set[str]] = {}
    # Staged files are fsynced on a pool (group commit, as in _commit): durable before any rename.
    pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="atomic-agents-restore")
    syncs: list[Future[None]] = []
    links: set[str] = set()
    live_tree = _LiveTree(root, archive)
    try:
        with os.fdopen(_open_archive(root, archive), "rb") as raw, gzip.open(raw, "rb") as gz:
            with tarfile.open(fileobj=gz, mode="r|") as tar:
                for m in tar:
                    parts = PurePosixPath(m.name).parts
                    if m.name.startswith("/") or ".." in parts or not (m.isfile() or m.issym() or m.isdir()):
                        raise MigrationError(f"snapshot {archive.name} holds an unsafe entry {m.name!r}")
                    if is_excluded(parts, is_dir=m.isdir()):
                        raise MigrationError(f"snapshot {archive.name} holds {m.name!r}, which restore never touches")
                    if any("/".join(parts[:i]) in links for i in range(1, len(parts))):
                        # Never write through a symlink the archive itself created.
                        raise MigrationError(f"snapshot {archive.name} holds {m.name!r} under a symlink")
                    m = _filtered(m, root, archive, staging)
                    if m.isdir():
                        continue
                    live_tree.check(m.name, parts[:-1])
                    live = os.path.join(root, *parts)
                    captured.setdefault(os.path.dirname(live), set()).add(parts[-1])
                    target = os.path.join(staging, *parts)
                    if m.issym():
                        links.add("/".join(parts))
                        if _is_link_to(live, m.linkname):
                            continue
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        os.symlink(m.linkname, target)
                    else:
                        fh = tar.extractfile(m)
                        data = fh.read() if fh is not None else b""
                        if _has_bytes(live, data):
                            continue
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        # Permission bits as captured, without setuid/setgid/sticky.
                        syncs.append(pool.submit(_sync_staged, _write_staged(target, data, m.mode & 0o777), target,
                                                 m.mtime))
                    staged.append("/".join(parts))
            # Read to the end so gzip checks its CRC and length trailer.
            while gz.read(1 << 20):
                pass
        for f in syncs:
            f.result()
    except MigrationError:
        raise
    except (OSError, EOFError, tarfile.TarError, gzip.BadGzipFile, zlib.error) as exc:
        raise MigrationError(
            f"snapshot {archive.name} is unreadable ({type(exc).__name__}: {exc}); the vault was not touched"
        ) from exc
    finally:
        pool.shutdown(wait=True)
    return staged, captured


def _write_staged(target: str, data: bytes, mode: int) -> int:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, stat.S_IMODE(mode) or 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        raise
    return fd


def _sync_staged(fd: int, target: str, mtime: float) -> None:
    try:
        os.fsync(fd)  # durable before it is renamed over a live file
    finally:
        os.close(fd)
    os.utime(target, (mtime, mtime))


def _writer_alive(pid: int) -> bool:
    """A temp file of a live writer (other than us) is not debris: its rename is still coming."""
    return pid != os.getpid() and pid_alive(pid)


def _is_link_to(live: str, linkname: str) -> bool:
    try:
        return os.path.islink(live) and os.readlink(live) == linkname
    except OSError:
        return False


def _has_bytes(live: str, data: bytes) -> bool:
    try:
        fd = os.open(live, os.O_RDONLY | _NOFOLLOW)  # a live symlink is never read through
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read() == data
    except OSError:
        return False
    finally:
        os.close(fd)


def _swap(root: Path, staging: Path, staged: list[str], captured: dict[str, set[str]]) -> int:
    dirs: dict[str, int] = {}  # live folder -> descriptor, opened from the root without following a symlink

    def live_dir(path: str, create: bool) -> int:
        fd = dirs.get(path)
        if fd is None:
            try:
                fd = open_dir(root, path, create=create, follow=False)
            except UnsafePathError as exc:
                raise MigrationError(f"cannot restore into {path}: {exc}") from exc
            dirs[path] = fd
        return fd

    try:
        moves: list[tuple[str, str, int]] = []
        for rel in staged:
            src = os.path.join(staging, rel)
            dst = os.path.join(root, rel)
            dfd = live_dir(os.path.dirname(dst), True)
            name = os.path.basename(dst)
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                pass
            else:
                if stat.S_ISDIR(st.st_mode):
                    raise MigrationError(f"cannot restore {dst}: a folder now stands where the snapshot has a file")
            moves.append((src, name, dfd))
        # Each rename is atomic on its own (and replaces a live symlink, never follows it);
        # they are independent, so overlap them like the fsyncs.
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="atomic-agents-restore") as pool:
            for future in [pool.submit(os.replace, src, name, dst_dir_fd=dfd) for src, name, dfd in moves]:
                future.result()
        touched = {os.path.dirname(os.path.join(root, rel)) for rel in staged}
        # Debris of writes killed mid-way (atomic_write temp files next to captured files).
        for path, names in captured.items():
            try:
                dfd = live_dir(path, False)
            except (FileNotFoundError, MigrationError):
                continue
            for entry in os.listdir(dfd):
                m = _ATOMIC_TMP.match(entry)
                if m and m.group("name") in names and not _writer_alive(int(m.group("pid"))):
                    os.unlink(entry, dir_fd=dfd)
                    touched.add(path)
        for path in sorted(touched):
            os.fsync(dirs[path])
    finally:
        for fd in dirs.values():
            os.close(fd)
    return len(staged)
