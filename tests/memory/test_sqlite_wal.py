"""Closing the SQLite store leaves its WAL, with no checkpoint, and the WAL stays bounded (``memory/_sqlite_wal.py``).

The real SQLite file is written by real, short-lived processes. Each check compares with
the checkpoint at close put back, so it fails if the switch does nothing. Python 3.11
sets the switch through ctypes on the connection's own handle; those checks run only
there, because 3.12+ uses ``Connection.setconfig``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore, _sqlite_wal

ON_311 = sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11)
SCOPE = Scope("a", "u")


def wal(db: Path) -> Path:
    return db.with_name(db.name + "-wal")


def wal_size(db: Path) -> int:
    return wal(db).stat().st_size if wal(db).exists() else 0


def run_py(code: str, *args: str, prefix: list[str] | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([*(prefix or []), sys.executable, "-c", textwrap.dedent(code), *args],
                         capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


COUNT = """
    import sqlite3, sys
    c = sqlite3.connect(sys.argv[1])
    print(c.execute("SELECT count(*) FROM memories").fetchone()[0], *[r[0] for r in c.execute("SELECT id FROM memories ORDER BY seq")])
"""


@pytest.fixture
def checkpointing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The behaviour before the switch, for contrast: nothing is set, closing checkpoints."""
    monkeypatch.setattr(_sqlite_wal, "keep_wal_on_close", lambda conn, path, keep=True: False)


def _store_and_close(db: Path, n: int = 5) -> list[str]:
    store = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    ids = [store.remember(f"kept across processes {i}", {"i": i}, SCOPE) for i in range(n)]
    store.close()
    return ids


def test_closing_leaves_the_wal_and_the_next_process_sees_every_row(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    ids = _store_and_close(db)
    assert wal_size(db) > 0  # not checkpointed into the file, not removed
    count, *seen = run_py(COUNT, str(db)).split()
    assert int(count) == 5 and seen == ids
    again = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    assert [again.get(i).content for i in ids] == [f"kept across processes {i}" for i in range(5)]
    again.close()


def test_without_the_switch_closing_checkpoints_and_removes_the_wal(tmp_path: Path, checkpointing: None) -> None:
    db = tmp_path / "m.db"
    ids = _store_and_close(db)
    assert not wal(db).exists()
    count, *seen = run_py(COUNT, str(db)).split()
    assert int(count) == 5 and seen == ids


def test_the_switch_reads_back_set_and_can_be_turned_off_again(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    assert _sqlite_wal.keep_wal_on_close(conn, db) is True
    if ON_311:  # the variadic call through ctypes, read back (-1 only reads)
        handle = _sqlite_wal.verified_handle(conn, db)
        assert handle is not None and _sqlite_wal._db_config(_sqlite_wal._library(), handle, -1) == 1
    assert _sqlite_wal.keep_wal_on_close(conn, db, False) is True
    if ON_311:
        handle = _sqlite_wal.verified_handle(conn, db)
        assert handle is not None and _sqlite_wal._db_config(_sqlite_wal._library(), handle, -1) == 0
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert not wal(db).exists()  # switched back off: this close checkpointed


def test_the_wal_stays_bounded_over_many_short_lived_writers(tmp_path: Path) -> None:
    """8 processes, each opening the store 4 times to store 15 memories (~0.14 MB of WAL each time): about
    4.5 MB through the WAL in all. After every close the WAL left behind is at most WAL_KEEP_BYTES and, mostly,
    there (a small one is not checkpointed at close); the data went into the file (a close that found the
    WAL past the limit checkpointed it); a new process sees every row."""
    db = tmp_path / "m.db"
    writer = """
        import sys
        from pathlib import Path
        from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore
        db, n = Path(sys.argv[1]), int(sys.argv[2])
        for cycle in range(4):
            store = SQLiteMemoryStore(db, embedder=HashingEmbedder())
            store.remember_many([(f"process {n} cycle {cycle} record {i} "
                                  + " ".join(f"w{(n * 7919 + cycle * 997 + i * 31 + k) % 5003}" for k in range(300)), None)
                                 for i in range(15)], Scope("a", "u"))
            store.close()
            wal = Path(f"{db}-wal")
            print(wal.stat().st_size if wal.exists() else 0, db.stat().st_size)
    """
    sizes, db_sizes = [], []
    for n in range(8):
        for line in run_py(writer, str(db), str(n)).splitlines():
            w, d = map(int, line.split())
            sizes.append(w)
            db_sizes.append(d)
    assert max(sizes) <= _sqlite_wal.WAL_KEEP_BYTES
    assert sum(s > 0 for s in sizes) >= 20  # of 32: kept at close, not checkpointed there
    assert db_sizes[0] < 256 * 1024 and db_sizes[-1] > 2 * _sqlite_wal.WAL_KEEP_BYTES  # more than the WAL ever held
    assert int(run_py(COUNT, str(db)).split()[0]) == 8 * 4 * 15


def test_a_long_lived_store_still_autocheckpoints_while_writing(tmp_path: Path) -> None:
    """One connection, 40 commits of ~0.38 MB (the daemon's way): SQLite's autocheckpoint (1000 pages) folds
    the WAL into the file and restarts it, so the WAL never holds it all."""
    db = tmp_path / "m.db"
    store = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    peak = 0
    for n in range(40):
        store.remember_many([(f"batch {n} record {i} " + " ".join(f"w{(n * 997 + i * 31 + k) % 5003}" for k in range(300)), None)
                             for i in range(40)], SCOPE)
        peak = max(peak, wal_size(db))
    # (1000 pages, about 4 MB, plus the commit that crossed them, FTS merges included)
    assert peak < 8 * 1024 * 1024 < db.stat().st_size  # ~15 MB written: in the file, not all in the WAL
    store.close()
    assert int(run_py(COUNT, str(db)).split()[0]) == 40 * 40


def test_a_wal_grown_past_the_limit_is_checkpointed_at_close(tmp_path: Path) -> None:
    """One transaction larger than WAL_KEEP_BYTES (a big remember --jsonl): closing checkpoints it,
    so no later process recovers megabytes of WAL at every open."""
    db = tmp_path / "m.db"
    store = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    text = " ".join(f"word{k}" for k in range(700))
    store.remember_many([(f"big {i} {text}", None) for i in range(300)], SCOPE)
    assert wal_size(db) > _sqlite_wal.WAL_KEEP_BYTES
    store.close()
    assert wal_size(db) == 0
    assert int(run_py(COUNT, str(db)).split()[0]) == 300


def test_compact_still_truncates_the_wal(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = SQLiteMemoryStore(db, embedder=HashingEmbedder())
    ids = [store.remember(f"row {i}", None, SCOPE) for i in range(20)]
    store.forget(ids[0])
    assert wal_size(db) > 0
    store.vacuum()
    assert wal(db).exists() and wal_size(db) == 0
    store.close()
    assert wal_size(db) == 0 and int(run_py(COUNT, str(db)).split()[0]) == 20


def test_a_read_only_file_system_still_reads_and_refuses_writes_cleanly(tmp_path: Path) -> None:
    """EROFS for real (a read-only bind mount in a user namespace of the test's own): the kept WAL and
    -shm are read, a search finds every row, a remember is one typed error, no file changes."""
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "m.db"
    _store_and_close(db)
    assert wal_size(db) > 0
    script = f'mount --bind "{folder}" "{folder}" && mount -o remount,ro,bind "{folder}" && exec "$@"'
    mount = ["unshare", "-rm", "sh", "-c", script, "sh"]
    probe = subprocess.run([*mount, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here for a read-only mount: {probe.stderr.strip()}")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    cli = """
        import sys
        from atomic_agents.cli import main
        try:
            main(["memory", *sys.argv[1:]])
        except SystemExit as e:
            print("exit", e.code)
    """
    scope = ["--agent-id", "a", "--user-id", "u", "--db", str(db)]
    out = run_py(cli, "search", *scope, "kept processes", "--limit", "10", prefix=mount)
    assert out.count('"content": "kept across processes') == 5 and out.strip().endswith("exit 0")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run([*mount, sys.executable, "-c", textwrap.dedent(cli), "remember", *scope, "new", "--embedder", "hashing-fake-256"],
                         capture_output=True, text=True, env=env, check=False)
    assert "exit 1" in res.stdout and "StoreError" in res.stdout and "readonly" in res.stdout
    assert "Traceback" not in res.stdout + res.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


# --------------------------------------------------------------------- the 3.11 handle
needs_311 = pytest.mark.skipif(not ON_311, reason="the ctypes route is for CPython 3.11 only (3.12+ has setconfig)")


@needs_311
def test_the_verifier_refuses_a_connection_to_another_file(tmp_path: Path) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    ca, cb = sqlite3.connect(a), sqlite3.connect(b)
    lib = _sqlite_wal._library()
    assert lib is not None
    ha, hb = _sqlite_wal.verified_handle(ca, a), _sqlite_wal.verified_handle(cb, b)
    assert ha is not None and hb is not None and ha != hb
    assert _sqlite_wal.verified_handle(ca, b) is None  # ca's handle names a.db
    assert _sqlite_wal.trusted(lib, hb, a, ca.total_changes) is False  # a real handle, of the wrong file
    assert _sqlite_wal.trusted(lib, ha, a, ca.total_changes) is True
    ca.execute("CREATE TABLE t (x)")
    ca.execute("INSERT INTO t VALUES (1)")
    assert _sqlite_wal.trusted(lib, ha, a, ca.total_changes + 1) is False  # the counters disagree
    assert _sqlite_wal.trusted(lib, ha + 4, a, ca.total_changes) is False  # not malloc-aligned: never dereferenced
    assert _sqlite_wal.keep_wal_on_close(ca, b) is False
    cb.close()
    assert _sqlite_wal.verified_handle(cb, b) is None  # closed: no handle
    ca.close()


@needs_311
def test_a_connection_subclass_is_not_trusted(tmp_path: Path) -> None:
    class Mine(sqlite3.Connection):
        pass

    db = tmp_path / "m.db"
    conn = sqlite3.connect(db, factory=Mine)
    assert _sqlite_wal.verified_handle(conn, db) is None and _sqlite_wal.keep_wal_on_close(conn, db) is False
    conn.close()


@needs_311
def test_a_second_sqlite_copy_in_the_process_means_no_switch(tmp_path: Path) -> None:
    """Another libsqlite3 loaded RTLD_GLOBAL (a different copy than the one _sqlite3 calls): the binding is
    refused, nothing is set, closing checkpoints as before."""
    import _sqlite3

    maps = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").exists() else ""
    libs = {line.split()[-1] for line in maps.splitlines() if "libsqlite3" in line}
    if not libs:
        pytest.skip(f"{_sqlite3.__file__} has SQLite linked in, not a shared libsqlite3 to copy")
    copy = tmp_path / "libsqlite3-copy.so"
    shutil.copy(min(libs), copy)
    db = tmp_path / "m.db"
    code = """
        import ctypes, sqlite3, sys
        from pathlib import Path
        if sys.argv[2] == "copy":  # after _sqlite3 loaded its own (before, the loader would take the copy for it)
            ctypes.CDLL(sys.argv[3], mode=ctypes.RTLD_GLOBAL)
        from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore, _sqlite_wal
        store = SQLiteMemoryStore(Path(sys.argv[1]), embedder=HashingEmbedder())
        store.remember("one", None, Scope("a", "u"))
        store.close()
        print(_sqlite_wal._library() is not None, Path(sys.argv[1] + "-wal").exists())
    """
    assert run_py(code, str(db), "copy", str(copy)).split() == ["False", "False"]
    assert run_py(code, str(tmp_path / "n.db"), "none", "").split() == ["True", "True"]


def test_no_binding_means_closing_checkpoints_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the switch cannot be set (another Python on 3.11's route, no ctypes): nothing is set, no error."""
    monkeypatch.setattr(_sqlite_wal, "_lib", False)
    monkeypatch.delattr(sqlite3, "SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE", raising=False)  # 3.12+: no setconfig route
    db = tmp_path / "m.db"
    ids = _store_and_close(db)
    assert not wal(db).exists() and int(run_py(COUNT, str(db)).split()[0]) == len(ids)


def test_opening_a_store_without_writing_leaves_the_wal_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _store_and_close(db)
    size = wal_size(db)
    SQLiteMemoryStore(db, embedder=HashingEmbedder()).close()
    assert wal_size(db) == size


def test_opening_a_store_loads_ctypes_core_only(tmp_path: Path) -> None:
    """Cold start: the switch costs `_ctypes` (0.8 ms), never the `ctypes` package (2-8 ms: a callback thunk
    at import); a process that opens no store loads neither."""
    code = """
        import sys
        from pathlib import Path
        from atomic_agents.memory import HashingEmbedder, SQLiteMemoryStore
        import atomic_agents.memory._sqlite
        before = "_ctypes" in sys.modules or "ctypes" in sys.modules
        SQLiteMemoryStore(Path(sys.argv[1]), embedder=HashingEmbedder()).close()
        print(before, "ctypes" in sys.modules, "_ctypes" in sys.modules, Path(sys.argv[1] + "-wal").exists())
    """
    assert run_py(code, str(tmp_path / "m.db")).split() == ["False", "False", str(ON_311), "True"]


@needs_311
def test_an_error_inside_the_binding_opens_the_store_and_checkpoints_as_before(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    def broken(lib: object, handle: int, value: int) -> int:
        raise ctypes.ArgumentError("argument 1: wrong type")

    monkeypatch.setattr(_sqlite_wal, "_db_config", broken)
    db = tmp_path / "m.db"
    ids = _store_and_close(db)
    assert not wal(db).exists() and int(run_py(COUNT, str(db)).split()[0]) == len(ids)
