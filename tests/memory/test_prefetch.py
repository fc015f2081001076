"""Reading a mapped snapshot's files into the page cache after the first search (``_prefetch``).

The page-cache tests evict a file with ``posix_fadvise(DONTNEED)`` (clean pages only, so
the file is fsynced first) and read residency back with ``mincore``; where the kernel
keeps the pages anyway (a tmpfs), they say so and skip.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore
from atomic_agents.memory import _prefetch

LINUX = sys.platform.startswith("linux")


@pytest.fixture(autouse=True)
def _fresh_process_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: no file read yet."""
    monkeypatch.setattr(_prefetch, "_started", set())


def _file(path: Path, mib: int) -> Path:
    with open(path, "wb") as f:
        for i in range(mib):
            f.write(bytes([i % 251]) * (1 << 20))
        f.flush()
        os.fsync(f.fileno())
    return path


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _resident_share(path: Path) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        vec = _prefetch._resident_pages(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    assert vec is not None
    return sum(b & 1 for b in vec) / len(vec)


def _cold(path: Path) -> None:
    _evict(path)
    if _resident_share(path) > 0.5:
        pytest.skip(f"the kernel keeps {path.parent}'s pages cached after DONTNEED (a tmpfs?): nothing to measure")


@pytest.mark.skipif(not LINUX, reason="posix_fadvise and mincore as Linux has them")
def test_a_cold_file_is_read_into_the_page_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_prefetch, "PREFETCH_MIN_BYTES", 1)
    path = _file(tmp_path / "big.npy", 8)
    _cold(path)
    thread = _prefetch.prefetch([path])
    assert thread is not None and thread.daemon
    thread.join(30)
    assert not thread.is_alive()
    assert _resident_share(path) == 1.0


@pytest.mark.skipif(not LINUX, reason="posix_fadvise and mincore as Linux has them")
def test_only_the_uncached_ranges_are_read(tmp_path: Path) -> None:
    path = _file(tmp_path / "part.npy", 6)
    _cold(path)
    path.read_bytes()
    mib = 1 << 20
    fd = os.open(path, os.O_RDONLY)
    try:
        for start in (1, 4):  # chunks 0 and 3 stay cached, 1-2 and 4-5 are evicted
            os.posix_fadvise(fd, start * mib, 2 * mib, os.POSIX_FADV_DONTNEED)
        ranges = list(_prefetch._uncached(fd, os.fstat(fd).st_size))
    finally:
        os.close(fd)
    assert ranges == [(1 * mib, 3 * mib), (4 * mib, 6 * mib)]


@pytest.mark.skipif(not LINUX, reason="mincore as Linux has it")
def test_a_cached_file_is_not_read_again(tmp_path: Path) -> None:
    path = _file(tmp_path / "warm.npy", 2)
    path.read_bytes()
    fd = os.open(path, os.O_RDONLY)
    try:
        assert list(_prefetch._uncached(fd, os.fstat(fd).st_size)) == []
    finally:
        os.close(fd)


def test_a_file_is_prefetched_once_and_small_or_missing_files_never(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_prefetch, "PREFETCH_MIN_BYTES", 1 << 20)
    big, small = _file(tmp_path / "big", 2), tmp_path / "small"
    small.write_bytes(b"x" * 1000)
    thread = _prefetch.prefetch([tmp_path / "missing", small, big])
    assert thread is not None
    thread.join(30)
    assert _prefetch.prefetch([big]) is None  # this process read it already
    assert _prefetch.prefetch([small, tmp_path / "missing"]) is None
    replaced = _file(tmp_path / "big.tmp", 2)
    os.replace(replaced, big)  # a new file (a new inode) under the same name: read again
    again = _prefetch.prefetch([big])
    assert again is not None
    again.join(30)


def test_a_file_that_goes_away_ends_the_read_quietly(tmp_path: Path) -> None:
    _prefetch._read_all([tmp_path / "gone"])  # no exception, nothing to read
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    _prefetch._read_all([empty])


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[list[Path]]:
    asked: list[list[Path]] = []
    real = _prefetch.prefetch

    def record(paths: list[Path]) -> object:
        asked.append(list(paths))
        return real(paths)

    monkeypatch.setattr(_prefetch, "prefetch", record)
    return asked


def _snapshot_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int = 1, **kw: object) -> Path:
    """A store file with a vector snapshot beside it (and a graph past ``ann_threshold``)."""
    import atomic_agents.memory._matrix_cache as cache

    monkeypatch.setattr(cache, "MIN_ROWS", 1)
    db = tmp_path / "m.db"
    first = SQLiteMemoryStore(db, embedder=HashingEmbedder(), **kw)  # type: ignore[arg-type]
    first.remember_many([(f"billing deploy failed {i}" if i else "billing deploy failed", None) for i in range(rows)], SCOPE)
    if kw.get("ann_threshold"):
        first.build_ann()
    else:
        first.recall("billing", SCOPE)  # loaded from rows: it writes the snapshot, and maps nothing
    first.close()
    assert cache.snapshot_path(db).exists()
    return db


SCOPE = Scope("a", "u")


def test_the_store_reads_its_mapped_snapshot_after_the_first_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import atomic_agents.memory._matrix_cache as cache

    db = _snapshot_store(tmp_path, monkeypatch, rows=300, ann_threshold=100)
    asked = _recording(monkeypatch)
    second = SQLiteMemoryStore(db, embedder=HashingEmbedder(), ann_threshold=100, ann_build="off")
    assert asked == []  # opening reads nothing
    assert second.recall("billing deploy failed", SCOPE)[0].memory.content == "billing deploy failed"
    assert second._loads == {"snapshot": 1, "rows": 0} and second._index is not None and second._index.ann is not None
    assert asked == [[cache.ann_path(db)], [cache.snapshot_path(db)]]  # the graph when mapped, the matrix after the search
    second.search_hybrid("billing", SCOPE)
    second.recall("deploy", SCOPE)
    assert len(asked) == 2  # once per load of the snapshot
    second.close()


def test_a_graph_that_is_not_mapped_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import atomic_agents.memory._matrix_cache as cache

    db = _snapshot_store(tmp_path, monkeypatch, rows=300, ann_threshold=100)
    assert cache.ann_path(db).exists()
    asked = _recording(monkeypatch)
    off = SQLiteMemoryStore(db, embedder=HashingEmbedder(), ann_threshold=0)  # the ANN tier off: the graph stays unmapped
    off.recall("billing deploy", SCOPE)
    assert off._index is not None and off._index.ann is None
    assert asked == [[cache.snapshot_path(db)]]
    off.close()


def test_no_thread_to_be_had_leaves_the_search_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    db = _snapshot_store(tmp_path, monkeypatch)

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_prefetch, "PREFETCH_MIN_BYTES", 1)
    monkeypatch.setattr(threading.Thread, "start", refused)
    store = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    assert [h.memory.content for h in store.recall("billing deploy", SCOPE)] == ["billing deploy failed"]
    store.close()


def test_a_search_that_fails_starts_no_read_of_the_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from atomic_agents.exceptions import AtomicAgentsError

    db = _snapshot_store(tmp_path, monkeypatch)
    asked = _recording(monkeypatch)
    other = SQLiteMemoryStore(db, embedder=HashingEmbedder(dimension=64))  # not the store's model
    with pytest.raises(AtomicAgentsError):
        other.recall("billing deploy", SCOPE)
    assert asked == []  # (this store has no graph: nothing read when mapped either)
    other.close()


def test_a_file_written_again_under_the_same_inode_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ext4 hands a replaced file's inode number on to the next new file: the inode alone is no identity."""
    monkeypatch.setattr(_prefetch, "PREFETCH_MIN_BYTES", 1)
    path = _file(tmp_path / "snap.npy", 1)
    ino = path.stat().st_ino
    first = _prefetch.prefetch([path])
    assert first is not None
    first.join(30)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # same inode, another mtime
    assert path.stat().st_ino == ino
    again = _prefetch.prefetch([path])
    assert again is not None
    again.join(30)
