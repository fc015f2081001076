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
"""

from __future__ import annotations

import datetime as dt
import gzip
import os
import re
import shutil
import stat
import tarfile
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from .._io import fsync_dir, pid_alive
from ..exceptions import MigrationError, MigrationSnapshotNotFound
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
    while (snapshots_dir / name).exists():
        n += 1
        name = f"{stamp}_pre_v{target_version}_migration-{n}.tar.gz"
    return name


def create_snapshot(root: Path, snapshots_dir: Path, target_version: int, *, now: dt.datetime | None = None) -> Path:
    """Write ``snapshots/YYYY-MM-DDTHHMMSS_pre_v{N}_migration.tar.gz`` durably and return its path.

    The archive is written under a temp name and renamed when complete, so a
    crash never leaves a half archive under a snapshot name.
    """
    snapshots_dir.mkdir(parents=True, exist_ok=True)
    name = _snapshot_name(snapshots_dir, target_version, now)
    final = snapshots_dir / name
    tmp = snapshots_dir / f".{name}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=_COMPRESSLEVEL, format=tarfile.PAX_FORMAT) as tar:
                for rel, full in _walk(root):
                    _add(tar, rel, full)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(snapshots_dir)
    return final


def _add(tar: tarfile.TarFile, rel: str, full: str) -> None:
    # Built by hand rather than tar.add(): no per-file passwd/group lookups, and
    # the size comes from the open descriptor, so a file growing meanwhile cannot
    # corrupt the archive.
    info = tarfile.TarInfo(rel)
    st = os.lstat(full)
    info.mtime = int(st.st_mtime)
    info.mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(full)
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
    return sorted(p.name for p in snapshots_dir.iterdir() if SNAPSHOT_NAME.match(p.name) and p.is_file())


def resolve_snapshot(snapshots_dir: Path, snapshot_id: str) -> Path:
    """The archive named ``snapshot_id`` (a bare name or any path ending in it) in ``snapshots_dir``."""
    name = PurePosixPath(str(snapshot_id).replace(os.sep, "/")).name
    path = snapshots_dir / name
    if not name or not path.is_file():
        raise MigrationSnapshotNotFound(f"no snapshot named {name!r} in {snapshots_dir}")
    return path


def restore_snapshot(root: Path, archive: Path, staging_parent: Path) -> int:
    """Put every file captured in ``archive`` back under ``root``; return how many changed.

    Raises :class:`MigrationError` (live vault untouched) if the archive is
    corrupt, truncated, or holds a path outside the vault.
    """
    staging_parent.mkdir(parents=True, exist_ok=True)
    sweep_staging(staging_parent)
    staging = staging_parent / f".restore-{os.getpid()}-{os.urandom(4).hex()}"
    staging.mkdir()
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
    try:
        with gzip.open(archive, "rb") as gz:
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
                    if m.isdir():
                        continue
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
                        syncs.append(pool.submit(_sync_staged, _write_staged(target, data, m.mode), target, m.mtime))
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
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(mode) or 0o644)
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
        st = os.lstat(live)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        with open(live, "rb") as fh:
            return fh.read() == data
    except OSError:
        return False


def _swap(root: Path, staging: Path, staged: list[str], captured: dict[str, set[str]]) -> int:
    touched_dirs: set[str] = set()
    moves: list[tuple[str, str]] = []
    for rel in staged:
        src = os.path.join(staging, rel)
        dst = os.path.join(root, rel)
        live_dir = os.path.dirname(dst)
        os.makedirs(live_dir, exist_ok=True)
        if os.path.isdir(dst) and not os.path.islink(dst):
            raise MigrationError(f"cannot restore {dst}: a folder now stands where the snapshot has a file")
        moves.append((src, dst))
        touched_dirs.add(live_dir)
    # Each rename is atomic on its own; they are independent, so overlap them like the fsyncs.
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="atomic-agents-restore") as pool:
        for future in [pool.submit(os.replace, src, dst) for src, dst in moves]:
            future.result()
    # Debris of writes killed mid-way (atomic_write temp files next to captured files).
    for live_dir, names in captured.items():
        try:
            entries = os.listdir(live_dir)
        except FileNotFoundError:
            continue
        for entry in entries:
            m = _ATOMIC_TMP.match(entry)
            if m and m.group("name") in names and not _writer_alive(int(m.group("pid"))):
                os.unlink(os.path.join(live_dir, entry))
                touched_dirs.add(live_dir)
    for d in sorted(touched_dirs):
        fsync_dir(d)
    return len(staged)
