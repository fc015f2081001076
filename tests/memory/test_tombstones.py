"""Hard deletes as tombstones: every process's recall stays exact, and no snapshot or graph is thrown away.

The exact answer is computed here from the rows of the SQLite file (plain ``sqlite3``:
live, unexpired, in scope, this model's vectors, cosine with the query's vector); every
recall of every store object must agree with it. ``HashingEmbedder`` is the fake embedder.
"""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import atomic_agents.memory._matrix_cache as cache
from atomic_agents.exceptions import NotFoundError, SchemaVersionError, StoreError
from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore
from atomic_agents.memory import _sqlite_schema as schema
from atomic_agents.memory import _sqlite_tombstones as tomb
from atomic_agents.memory._matrix_cache import meta_path, snapshot_path

SRC = Path(__file__).parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
EMB = HashingEmbedder()
SCOPES = [Scope("a", "u"), Scope("b", "u", org_id="o")]
WORDS = ["alpha", "beta", "gamma", "delta", "deploy", "billing", "north", "south"]
QUERIES = ["alpha beta", "deploy billing", "gamma south", "north"]


def _exact(db: Path, q: str, scope: Scope) -> dict[str, float]:
    """Every memory recall may return for ``q`` in ``scope``, with its exact cosine (from the rows)."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT id, embedding, expires_at FROM memories WHERE deleted_at = 0 AND embedder = ? AND embedding IS NOT NULL"
            " AND agent_id = ? AND user_id = ? AND org_id = ? AND workspace_id = ?",
            [EMB.model_id, *scope.key()],
        ).fetchall()
    finally:
        conn.close()
    qv = EMB.embed_batch([q])[0]
    now = time.time()
    return {mid: float(np.frombuffer(blob, np.float32) @ qv) for mid, blob, exp in rows if exp is None or exp > now}


def _check(store: SQLiteMemoryStore, db: Path, k: int = 3) -> None:
    """``store``'s recall equals the exact answer from the rows; its matrix holds exactly the live rows."""
    for q in QUERIES:
        for scope in SCOPES:
            got = [h.id for h in store.recall(q, scope, k)]
            ref = _exact(db, q, scope)
            assert set(got) <= set(ref), f"recall returned a memory that is not live: {set(got) - set(ref)}"
            assert len(got) == min(k, len(ref)) == len(set(got))
            scores = [ref[g] for g in got]
            assert all(a >= b - 1e-5 for a, b in itertools.pairwise(scores))  # best first
            best = sorted(ref.values(), reverse=True)[:k]
            assert all(abs(a - b) <= 1e-5 for a, b in zip(sorted(scores, reverse=True), best, strict=True))  # none missed
    ix = store._index
    assert ix is not None
    conn = sqlite3.connect(db)
    try:
        live = {r[0] for r in conn.execute(
            "SELECT seq FROM memories WHERE deleted_at = 0 AND embedder = ? AND embedding IS NOT NULL", [EMB.model_id]
        )}  # fmt: skip
    finally:
        conn.close()
    assert set(ix.to_arrays()["keys"].tolist()) == live  # (expired rows stay until forget_expired, as in the file)


def _ids(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT id FROM memories ORDER BY seq")]
    finally:
        conn.close()


def _meta(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT key, value FROM store_meta"))
    finally:
        conn.close()


@pytest.fixture
def small_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots from one row; the log keeps 2 tombstones past the snapshot and holds at most 6."""
    monkeypatch.setattr(cache, "MIN_ROWS", 1)
    monkeypatch.setattr(tomb, "KEEP", 2)
    monkeypatch.setattr(tomb, "CAP", 6)


# -- the property: two store objects on one file, every kind of change, recall always exact -------

WHO = st.sampled_from("AB")
PICK = st.integers(0, 60)
OPS = st.one_of(
    st.tuples(st.just("remember"), WHO, st.integers(0, 7), st.integers(0, 7), st.integers(0, 1), st.sampled_from([None, 1])),
    st.tuples(st.just("forget"), WHO, PICK),
    st.tuples(st.just("hard"), WHO, PICK),
    st.tuples(st.just("hard_scope"), WHO, st.integers(0, 1)),
    st.tuples(st.just("soft_kw"), WHO, st.integers(0, 7)),
    st.tuples(st.just("hard_kw"), WHO, st.integers(0, 7)),
    st.tuples(st.just("expire"), WHO),
    st.tuples(st.just("edit"), WHO, PICK, st.integers(0, 7)),
    st.tuples(st.just("reindex"), WHO),
    st.tuples(st.just("build")),
    st.tuples(st.just("reopen"), WHO),
    st.tuples(st.just("fresh")),
    st.tuples(st.just("check")),
)


class _World:
    def __init__(self, db: Path) -> None:
        self.db = db
        self.n = 0
        self.stores = {"A": self._open("A"), "B": self._open("B")}

    def _open(self, who: str) -> SQLiteMemoryStore:
        if who == "A":  # exact tier
            return SQLiteMemoryStore(self.db, embedder=EMB, ann_threshold=0)
        return SQLiteMemoryStore(self.db, embedder=EMB, ann_threshold=3, ann_build="off")  # graph once built

    def remember(self, who: str, w1: int, w2: int, s: int, ttl: int | None) -> None:
        self.n += 1
        self.stores[who].remember(f"{WORDS[w1]} {WORDS[w2]} u{self.n}", None, SCOPES[s], ttl_ms=ttl)
        if ttl:
            time.sleep(0.003)  # expired before anyone looks, on every clock

    def pick(self, i: int) -> str | None:
        ids = _ids(self.db)
        return ids[i % len(ids)] if ids else None

    def run(self, op: tuple[Any, ...]) -> None:
        kind, args = op[0], op[1:]
        store = self.stores[args[0]] if args and args[0] in self.stores else None
        if kind == "remember":
            self.remember(*args)
        elif kind in ("forget", "hard", "edit"):
            assert store is not None
            mid = self.pick(args[1])
            if mid is None:
                return
            try:
                if kind == "forget":
                    store.forget(mid)
                elif kind == "edit":
                    store.edit(mid, content=f"{WORDS[args[2]]} edited")
                else:
                    conn = sqlite3.connect(self.db)
                    (content,) = conn.execute("SELECT content FROM memories WHERE id = ?", [mid]).fetchone()
                    conn.close()
                    token = content.split()[-1] if content.split()[-1].startswith("u") else content.split()[0]
                    store.prune(keywords=token, dry_run=False, hard=True)
            except NotFoundError:
                pass  # (already forgotten or erased: the API says so)
        elif kind == "hard_scope":
            assert store is not None
            store.prune(SCOPES[args[1]].as_filter(), dry_run=False, hard=True)
        elif kind in ("soft_kw", "hard_kw"):
            assert store is not None
            store.prune(keywords=WORDS[args[1]], dry_run=False, hard=kind == "hard_kw")
        elif kind == "expire":
            assert store is not None
            store.forget_expired()
        elif kind == "reindex":
            assert store is not None
            store.reindex()
        elif kind == "build":
            self.stores["B"].build_ann()
        elif kind == "reopen":
            self.stores[args[0]].close()
            self.stores[args[0]] = self._open(args[0])
        elif kind == "fresh":
            self.fresh()
        elif kind == "check":
            self.check()

    def fresh(self) -> None:
        for who in "AB":
            with self._open(who) as new:
                _check(new, self.db)

    def check(self) -> None:
        for store in self.stores.values():
            _check(store, self.db)

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=30))
def test_every_store_recalls_exactly_whatever_the_interleaving(small_log: None, ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = _World(Path(tmp) / "m.db")
        try:
            for i in range(16):  # something to start from, in both scopes
                world.remember("A", i % 8, (3 * i) % 8, i % 2, None)
            world.check()
            for op in ops:
                world.run(op)
            world.check()
            world.fresh()
            conn = sqlite3.connect(world.db)
            try:  # the log is bounded, and the counter never fell below what it handed out
                (count,) = conn.execute("SELECT count(*) FROM memory_tombstones").fetchone()
                (low,) = conn.execute("SELECT coalesce(min(rev), 1 << 62) FROM memory_tombstones").fetchone()
                (now,) = conn.execute(tomb.REV_NOW).fetchone()
                (top,) = conn.execute("SELECT coalesce(max(rev), 0) FROM memories").fetchone()
            finally:
                conn.close()
            floor = int(_meta(world.db)["tombstone_floor"])
            # (one hard delete may add any number at one rev; then the cap trims at the next one)
            assert low > floor and now >= max(floor, top)
            assert count <= tomb.CAP or len({r for r in _tomb_revs(world.db)}) == 1
        finally:
            world.close()


def _tomb_revs(db: Path) -> list[int]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT rev FROM memory_tombstones")]
    finally:
        conn.close()


# -- a fresh process after another's hard delete starts from the snapshot ---------------------------


def _filled(db: Path, n: int = 40) -> tuple[SQLiteMemoryStore, list[str]]:
    store = SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0)
    ids = store.remember_many([(f"{WORDS[i % 8]} {WORDS[(i * 3) % 8]} u{i}", None) for i in range(n)], SCOPES[0])
    return store, ids


def test_a_fresh_store_after_another_stores_hard_delete_maps_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache, "MIN_ROWS", 1)
    db = tmp_path / "m.db"
    writer, ids = _filled(db)
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as first:  # a full load from rows publishes the snapshot
        first.recall("alpha", SCOPES[0])
        assert first._loads == {"snapshot": 0, "rows": 1}
    stamp = meta_path(db).stat().st_ino
    top = [h.id for h in writer.recall("alpha beta", SCOPES[0], 3)]
    assert writer.prune(keywords=" ".join(f"u{ids.index(t)}" for t in top), dry_run=False, hard=True).removed == 3
    assert _meta(db)["epoch"] == "0"  # no new epoch: the snapshot stays valid

    def no_rows(self: SQLiteMemoryStore, meta: dict[str, str]) -> None:
        raise AssertionError("loaded the vectors from the rows")

    monkeypatch.setattr(SQLiteMemoryStore, "_load_from_rows", no_rows)
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as fresh:
        got = [h.id for h in fresh.recall("alpha beta", SCOPES[0], 40)]
        assert fresh._loads == {"snapshot": 1, "rows": 0}
        assert not set(got) & set(top) and len(got) == 37
        _check(fresh, db)
    assert meta_path(db).stat().st_ino == stamp  # the snapshot file is the one from before the delete
    writer.close()


KILLED_AFTER_COMMIT = textwrap.dedent(
    """
    import os, signal, sys
    import atomic_agents.memory._sqlite as backend
    from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore

    store = SQLiteMemoryStore(sys.argv[1], embedder=HashingEmbedder(), ann_threshold=0)
    store.recall("alpha", Scope("a", "u"))  # this process holds the matrix too
    real = backend.write_txn

    def then_die(conn, fn):
        out = real(conn, fn)  # committed
        print("committed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # before anything else: no sync, no close, no sidecar
        return out

    backend.write_txn = then_die
    store.prune(keywords=sys.argv[2], dry_run=False, hard=True)
    """
)


def test_a_process_killed_right_after_its_hard_delete_commits_leaves_nothing_recallable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache, "MIN_ROWS", 1)
    db = tmp_path / "m.db"
    writer, ids = _filled(db)
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as first:
        first.recall("alpha", SCOPES[0])  # publishes the snapshot
    assert snapshot_path(db).exists()
    holder = SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0)  # another live process's view
    holder.recall("alpha", SCOPES[0])
    assert holder._loads == {"snapshot": 1, "rows": 0}
    gone = {ids[i] for i in (0, 8, 16)}  # all "alpha beta ..."
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_COMMIT, str(db), "u0 u8 u16"], capture_output=True, text=True, env=ENV, timeout=120, check=False
    )
    assert proc.returncode == -signal.SIGKILL and proc.stdout.strip() == "committed", proc.stderr
    assert not set(_ids(db)) & gone  # the delete is in the file
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as fresh:
        assert not {h.id for h in fresh.recall("alpha beta", SCOPES[0], 40)} & gone
        assert fresh._loads == {"snapshot": 1, "rows": 0}
        _check(fresh, db)
    assert not {h.id for h in holder.recall("alpha beta", SCOPES[0], 40)} & gone
    assert holder._loads == {"snapshot": 1, "rows": 0}  # caught up by pulling, no second load
    _check(holder, db)
    holder.close()
    writer.close()


OTHER_PROCESS = textwrap.dedent(
    """
    import sys
    from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore

    with SQLiteMemoryStore(sys.argv[1], embedder=HashingEmbedder(), ann_threshold=0) as s:
        s.recall("alpha", Scope("a", "u"))
        s.prune(keywords="u1 u2 u3", dry_run=False, hard=True)
        s.remember("alpha beta replacement", None, Scope("a", "u"))
        s.forget(s.recall("deploy", Scope("a", "u"), 1)[0].id)
        s.prune(keywords="u39", dry_run=False, hard=True)  # the highest row id: SQLite hands it out again
        s.remember("alpha beta on a reused row id", None, Scope("a", "u"))
        print("ok")
    """
)


def test_writes_of_another_process_reach_a_live_store_and_a_fresh_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "MIN_ROWS", 1)
    db = tmp_path / "m.db"
    writer, _ = _filled(db)
    writer.close()
    holder = SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0)
    holder.recall("alpha", SCOPES[0])  # full load from rows, publishes the snapshot
    graph = SQLiteMemoryStore(db, embedder=EMB, ann_threshold=3, ann_build="off")
    assert graph.build_ann()["status"] == "built"  # and a graph of that state
    proc = subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(db)], capture_output=True, text=True, env=ENV, timeout=120, check=False)
    assert proc.stdout.strip() == "ok", proc.stderr
    for store in (holder, graph):
        _check(store, db, k=40)
    assert holder._loads == {"snapshot": 0, "rows": 1} and graph._loads["rows"] == 0
    assert graph._index is not None and graph._index.ann is not None  # kept; the erased rows marked removed
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=3, ann_build="off") as fresh:
        _check(fresh, db, k=40)
        assert fresh._loads == {"snapshot": 1, "rows": 0}
        assert fresh._index is not None and fresh._index.ann is not None  # the published graph, mapped
        assert "alpha beta on a reused row id" in [h.content for h in fresh.recall("reused row", SCOPES[0], 3)]
    holder.close()
    graph.close()


# -- the log's bound ------------------------------------------------------------------------------


def test_the_log_is_pruned_only_up_to_the_published_snapshot_then_up_to_the_cap(tmp_path: Path, small_log: None) -> None:
    db = tmp_path / "m.db"
    writer, _ = _filled(db)
    lagging = SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0)
    lagging.recall("alpha", SCOPES[0])  # full load from rows: publishes the snapshot as of now
    snap_rev = int(_meta(db)["snapshot_rev"])
    assert snap_rev == writer._read(tomb.REV_NOW)[0][0]
    for i in range(5):  # 5 hard deletes past the snapshot: more than KEEP, nothing at or below the snapshot
        writer.prune(keywords=f"u{i}", dry_run=False, hard=True)
    assert len(_tomb_revs(db)) == 5 and _meta(db)["tombstone_floor"] == "0"
    # a newer snapshot is published (a full load by a fresh store): the log may now go up to it
    writer.close()
    for p in (snapshot_path(db), meta_path(db)):
        p.unlink()
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as fresh:
        fresh.recall("alpha", SCOPES[0])
    assert int(_meta(db)["snapshot_rev"]) > snap_rev
    writer = SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0)
    writer.prune(keywords="u5", dry_run=False, hard=True)
    revs = sorted(_tomb_revs(db))
    floor = int(_meta(db)["tombstone_floor"])
    assert len(revs) == 2 and 0 < floor <= int(_meta(db)["snapshot_rev"]) < max(revs) and min(revs) > floor  # KEEP newest kept
    # the store that lags behind the floor cannot pull what was pruned: it reloads, from the snapshot
    _check(lagging, db, k=40)
    assert lagging._loads == {"snapshot": 1, "rows": 1}
    # past the cap the oldest go even though no snapshot covers them; a fresh store loads from rows
    for i in range(6, 14):
        writer.prune(keywords=f"u{i}", dry_run=False, hard=True)
    assert len(_tomb_revs(db)) <= tomb.CAP and int(_meta(db)["tombstone_floor"]) > int(_meta(db)["snapshot_rev"])
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as fresh:
        _check(fresh, db, k=40)
        assert fresh._loads == {"snapshot": 0, "rows": 1}
    _check(lagging, db, k=40)
    writer.close()
    lagging.close()


def test_a_prune_of_the_log_between_a_stores_look_and_its_pull_is_noticed(tmp_path: Path, small_log: None) -> None:
    db = tmp_path / "m.db"
    writer, _ = _filled(db)
    lagging = SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0)
    lagging.recall("alpha", SCOPES[0])  # as of rev 1
    writer.prune(keywords="u0", dry_run=False, hard=True)  # rev 2: lagging has not seen it
    for p in (snapshot_path(db), meta_path(db)):
        p.unlink()
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as fresh:
        fresh.recall("alpha", SCOPES[0])  # publishes a snapshot as of rev 2
    real = lagging._meta
    calls = [0]

    def look_then_others_write() -> dict[str, str]:
        meta = real()  # the floor is still 0 here: lagging decides to pull
        calls[0] += 1
        if calls[0] == 1:  # ... and before it does, the log is pruned past rev 1 (u0's tombstone goes)
            for token in ("u1", "u2", "u3"):
                writer.prune(keywords=token, dry_run=False, hard=True)
            assert int(_meta(db)["tombstone_floor"]) >= 2
        return meta

    lagging._meta = look_then_others_write  # type: ignore[method-assign]
    _check(lagging, db, k=40)  # the pull that missed u0's tombstone was not trusted: reloaded
    assert lagging._loads == {"snapshot": 1, "rows": 1}
    writer.close()
    lagging.close()


def test_vacuum_keeps_the_log_and_the_snapshot_usable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "MIN_ROWS", 1)
    db = tmp_path / "m.db"
    writer, _ = _filled(db)
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as first:
        first.recall("alpha", SCOPES[0])  # publishes the snapshot
    writer.prune(keywords="u0 u39", dry_run=False, hard=True)  # u39: the highest row id
    writer.vacuum()  # (memory vacuum: rebuilds the file; row ids are an INTEGER PRIMARY KEY, kept)
    writer.remember("alpha after the vacuum", None, SCOPES[0])
    assert len(_tomb_revs(db)) == 2
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as fresh:
        _check(fresh, db, k=40)
        assert fresh._loads == {"snapshot": 1, "rows": 0}
    writer.close()


def test_a_reindex_empties_the_log_and_moves_the_epoch(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    writer, _ = _filled(db)
    writer.prune(keywords="u1 u2", dry_run=False, hard=True)
    assert len(_tomb_revs(db)) == 2
    now = writer._read(tomb.REV_NOW)[0][0]
    writer.reindex()
    meta = _meta(db)
    assert _tomb_revs(db) == [] and meta["epoch"] == "1" and int(meta["tombstone_floor"]) == now
    assert writer._read(tomb.REV_NOW)[0][0] == now  # the counter did not go back
    _check(writer, db, k=40)
    writer.close()


def test_a_hard_prune_never_erases_a_row_that_took_a_chosen_rows_id_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import atomic_agents.memory._sqlite as backend

    db = tmp_path / "m.db"
    writer, ids = _filled(db, 5)
    other = SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0)
    real = backend.write_txn
    newcomer: list[str] = []

    def meanwhile(conn: sqlite3.Connection, fn: Any) -> Any:
        # between the prune's selection and its transaction, another store erases the highest
        # row and writes a new one, which SQLite gives the same row id
        monkeypatch.setattr(backend, "write_txn", real)
        other.prune(keywords="u4", dry_run=False, hard=True)
        newcomer.append(other.remember("a newcomer on a reused row id", None, SCOPES[0]))
        return real(conn, fn)

    monkeypatch.setattr(backend, "write_txn", meanwhile)
    report = writer.prune(keywords="u3 u4", dry_run=False, hard=True)
    assert report.removed == 1 and set(_ids(db)) == {*ids[:3], newcomer[0]}
    assert other.get(newcomer[0]).content == "a newcomer on a reused row id"
    _check(writer, db)
    writer.close()
    other.close()


# -- the schema: migrated in place, atomically; refused by an older package ----------------------


def _schema_1_file(db: Path) -> None:
    """A file as schema 1 made it: no log table, no floor."""
    ddl = [s for s in schema._split(schema._DDL) if "memory_tombstones" not in s]
    conn = sqlite3.connect(db)
    for stmt in ddl:
        conn.execute(stmt)
    conn.executemany(
        "INSERT INTO store_meta VALUES (?, ?)",
        [("schema_version", "1"), ("embedder", EMB.model_id), ("dimension", "256"), ("epoch", "3")],
    )
    for i in range(30):
        vec = EMB.embed_batch([f"{WORDS[i % 8]} u{i}"])[0]
        conn.execute(
            "INSERT INTO memories (id, content, agent_id, user_id, org_id, workspace_id, created_at, updated_at,"
            " content_hash, embedder, embedding, rev) VALUES (?, ?, 'a', 'u', '', '', 1.7e9, 1.7e9, 'h', ?, ?, ?)",
            [f"00000000-0000-4000-8000-{i:012d}", f"{WORDS[i % 8]} u{i}", EMB.model_id, vec.tobytes(), i + 1],
        )
    conn.commit()
    conn.close()


def test_a_schema_1_file_is_migrated_in_place_and_its_snapshot_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "MIN_ROWS", 1)
    db = tmp_path / "m.db"
    _schema_1_file(db)
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as first:
        first.recall("alpha", Scope("a", "u"))  # rows -> snapshot of epoch 3
    meta = _meta(db)
    assert meta["schema_version"] == "2" and meta["tombstone_floor"] == "0" and meta["epoch"] == "3"
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as s:
        s.prune(keywords="u0 u8", dry_run=False, hard=True)
        assert _tomb_revs(db) == [31, 31]  # above every rev schema 1 handed out
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as fresh:
        assert "00000000-0000-4000-8000-000000000000" not in {h.id for h in fresh.recall("alpha", Scope("a", "u"), 30)}
        assert fresh._loads == {"snapshot": 1, "rows": 0}


def _legacy_snapshot(db: Path, rev: int, *, drop: str | None = None) -> None:
    """A snapshot as schema-1 code writes it (no ``log`` in its header) of the rows (but ``drop``'s row kept)."""
    import json

    from atomic_agents.memory._matrix_cache import save_snapshot
    from atomic_agents.memory._vectors import VectorIndex

    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT seq, agent_id, user_id, org_id, workspace_id, embedding FROM memories ORDER BY seq").fetchall()
    conn.close()
    if drop is not None:  # the erased row, as an old process that never saw the erasure holds it
        rows = sorted([*rows, (10_000, "a", "u", "", "", EMB.embed_batch([drop])[0].tobytes())])
    ix = VectorIndex(256)
    ix.upsert_many(
        np.array([r[0] for r in rows], np.int64),
        np.stack([np.frombuffer(r[5], np.float32) for r in rows]),
        [(r[1], r[2], r[3], r[4]) for r in rows],
        [None] * len(rows),
    )
    for p in (snapshot_path(db), meta_path(db)):
        p.unlink(missing_ok=True)
    assert save_snapshot(db, ix, model=EMB.model_id, epoch="3", rev=rev)
    with np.load(meta_path(db), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(str(arrays["header"]))
    del header["log"]
    arrays["header"] = np.array(json.dumps(header))
    with open(meta_path(db), "wb") as fh:
        np.savez(fh, **arrays)


def test_a_snapshot_of_schema_1_code_is_used_only_up_to_the_migration(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _schema_1_file(db)
    _legacy_snapshot(db, 30)  # written before the upgrade: valid
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as first:  # migrates
        _check(first, db)
        assert first._loads == {"snapshot": 1, "rows": 0}
    assert _meta(db)["legacy_snapshot_rev"] == "30"
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as s:
        s.prune(keywords="u0", dry_run=False, hard=True)
        s.remember("alpha after the upgrade", None, Scope("a", "u"))
    # a process of the previous release, still running, publishes what it holds: the erased row too
    _legacy_snapshot(db, 32, drop="alpha u0")
    with SQLiteMemoryStore(db, embedder=EMB, ann_threshold=0) as fresh:
        _check(fresh, db, k=40)  # (its matrix holds exactly the live rows: that snapshot was refused)
        assert fresh._loads == {"snapshot": 0, "rows": 1}


def test_a_failed_migration_leaves_the_file_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.db"
    _schema_1_file(db)

    def broken(c: sqlite3.Connection) -> dict[str, str]:
        c.execute("INSERT OR IGNORE INTO store_meta (key, value) VALUES ('tombstone_floor', '0')")
        raise sqlite3.OperationalError("disk I/O error")  # half-way

    monkeypatch.setattr(schema, "_migrate_v1", broken)
    with pytest.raises(StoreError):
        SQLiteMemoryStore(db, embedder=EMB)
    conn = sqlite3.connect(db)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert "memory_tombstones" not in tables and _meta(db) == {
        "schema_version": "1", "embedder": EMB.model_id, "dimension": "256", "epoch": "3"
    }  # fmt: skip


def test_a_package_of_schema_1_refuses_a_migrated_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.db"
    _schema_1_file(db)
    SQLiteMemoryStore(db, embedder=EMB).close()
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 1)  # what the previous release's check sees
    with pytest.raises(SchemaVersionError):
        SQLiteMemoryStore(db, embedder=EMB)


def test_a_scope_wide_hard_prune_on_the_cli_leaves_tombstones(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    writer, ids = _filled(db, 10)
    writer.close()
    env = {**ENV, "ATOMIC_AGENTS_EMBEDDER": "hashing"}
    out = subprocess.run(
        [sys.executable, "-m", "atomic_agents.cli", "memory", "prune", "--db", str(db), "--agent-id", "a",
         "--user-id", "u", "--keywords", "u3", "--confirm", "--hard", "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(_tomb_revs(db)) == 1 and ids[3] not in _ids(db) and _meta(db)["epoch"] == "0"
