"""Building the ANN graph off the query path: exact answers meanwhile, nothing stale, nothing half-written.

Vectors come from the *fake* :class:`TableEmbedder` of ``test_ann`` (``"v<i>"`` -> a fixed
row); the exact answer comes from a second store on the same file with the tier off.
A build is held open by :class:`HeldBuild`, a *fake* stand-in for ``AnnIndex.build`` that
waits for the test before calling the real one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from atomic_agents.memory import Scope, SQLiteMemoryStore
from atomic_agents.memory import _ann
from atomic_agents.memory._matrix_cache import ann_path, meta_path, snapshot_path, sweep_debris

from .test_ann import PER, TableEmbedder, _clusters, _fill, _same, _scope_of

SRC = Path(__file__).parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
BIG = Scope("a", "u")


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    return _clusters(80, PER, seed=2)


def _store(db: Path, data: tuple[np.ndarray, np.ndarray], **kw: Any) -> SQLiteMemoryStore:
    centres, pts = data
    return SQLiteMemoryStore(db, embedder=TableEmbedder(pts, centres), **{"ann_threshold": 50, **kw})


class HeldBuild:
    """A *fake* ``AnnIndex.build``: signals ``started``, waits for ``release``, then builds for real."""

    def __init__(self) -> None:
        self.real = _ann.AnnIndex.build
        self.started, self.release = threading.Event(), threading.Event()

    def __call__(self, keys: np.ndarray, vectors: np.ndarray, **kw: Any) -> _ann.AnnIndex:
        self.started.set()
        assert self.release.wait(60)
        return self.real(keys, vectors, **kw)


def _all_equal(store: SQLiteMemoryStore, exact: SQLiteMemoryStore) -> None:
    for c in range(0, 80, 3):
        q, sc = f"q{c}", _scope_of(c)
        _same(store.recall(q, sc, 10), exact.recall(q, sc, 10))
        _same(store.search_semantic(q, sc, {"parity": 1}, 4), exact.search_semantic(q, sc, {"parity": 1}, 4))


@pytest.mark.parametrize("writes", ["few", "many"])
def test_recall_during_a_background_build_is_exact_and_writes_meanwhile_reach_the_graph(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch, writes: str
) -> None:
    import atomic_agents.memory._vectors as vectors

    if writes == "many":  # past FOLD_AT: attached without them, they stay scanned exactly
        monkeypatch.setattr(vectors, "FOLD_AT", 1)
    db = tmp_path / "m.db"
    exact = _store(db, data, ann_threshold=0)
    ids = _fill(exact, 80)
    held = HeldBuild()
    monkeypatch.setattr(_ann.AnnIndex, "build", held)
    store = _store(db, data)  # background is the default
    assert store.ann_build == "background"
    _all_equal(store, exact)  # the first search starts the build and does not wait for it
    assert held.started.wait(30) and store.ann_state == "building"
    assert store._index is not None and store._index.ann is None
    # writes while the graph is being built: a new row, an edit that moves a row, a forget
    fresh = store.remember("q1", None, BIG)
    store.edit(ids[2 * PER], content="q5")  # a cluster-2 point now sits on query 5's centre
    store.forget(ids[4 * PER + 1])
    _all_equal(store, exact)
    assert store.recall("q1", BIG, 1)[0].id == fresh
    assert not ann_path(db).exists()  # nothing published before the build is done
    held.release.set()
    assert store._builder is not None
    store._builder.join(60)
    assert store.ann_state == "graph" and store._index is not None
    ann = store._index.ann
    assert ann is not None
    keys = set(ann.search(data[0][5], 40).tolist())
    row = store._read("SELECT seq FROM memories WHERE id = ?", [ids[2 * PER]])[0][0]
    if writes == "few":
        # the journal brought the graph up to date: the moved row is found by its new vector,
        # through the graph alone (every live row is covered, nothing is scanned exactly)
        assert store._index.uncovered == 0 and row in keys
    else:  # the new row and the moved one (the forgotten one is dead)
        assert store._index.uncovered == 2 and row not in keys
    _all_equal(store, exact)
    assert store.recall("q1", BIG, 1)[0].id == fresh
    assert ids[4 * PER + 1] not in {h.id for h in store.recall("q4", BIG, 10)}
    assert ann_path(db).exists() and meta_path(db).exists()
    store.close()
    # the published pair is the state when the build began; a new process pulls the rest
    again = _store(db, data)
    _all_equal(again, exact)
    assert again._index is not None and again._index.ann is not None and not again._index.ann.mutable
    again.close()
    exact.close()


def test_a_graph_of_another_epoch_is_never_used(tmp_path: Path, data: tuple[np.ndarray, np.ndarray]) -> None:
    db = tmp_path / "m.db"
    exact = _store(db, data, ann_threshold=0)
    ids = _fill(exact, 80)
    first = _store(db, data)
    first.build_ann()
    first.close()
    stamp = ann_path(db).stat().st_mtime_ns
    # another process hard-deletes rows and reindexes: the epoch moves (the log is emptied)
    gone = [ids[i] for i in range(3 * PER, 3 * PER + 4)]
    for i in range(3 * PER, 3 * PER + 4):
        assert exact.prune(keywords=f"v{i}", dry_run=False, hard=True).removed == 1
    exact.reindex()
    reader = _store(db, data, ann_build="off")  # never builds: what it uses must be valid as it is
    _all_equal(reader, exact)
    assert reader._index is not None and reader._index.ann is None  # the old epoch's graph was refused
    assert reader._loads == {"snapshot": 0, "rows": 1}
    assert not {h.id for h in reader.recall("q3", BIG, 10)} & set(gone)
    assert ann_path(db).stat().st_mtime_ns == stamp
    reader.close()
    exact.close()


def test_a_graph_published_before_another_process_hard_deletes_stays_in_use(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray]
) -> None:
    db = tmp_path / "m.db"
    exact = _store(db, data, ann_threshold=0)
    ids = _fill(exact, 80)
    first = _store(db, data)
    first.build_ann()
    first.close()
    stamp = ann_path(db).stat().st_mtime_ns
    # another process erases rows (one of them soft-deleted first): tombstones, no new epoch
    gone = [ids[i] for i in range(3 * PER, 3 * PER + 4)]
    exact.forget(gone[0])
    for i in range(3 * PER, 3 * PER + 4):
        assert exact.prune(keywords=f"v{i}", dry_run=False, hard=True).removed == 1
    reader = _store(db, data, ann_build="off")  # never builds: what it uses must be valid as it is
    _all_equal(reader, exact)
    assert reader._loads == {"snapshot": 1, "rows": 0}  # mapped, then the tombstones pulled
    assert reader._index is not None and reader._index.ann is not None and not reader._index.ann.mutable
    assert not {h.id for h in reader.recall("q3", BIG, 40)} & set(gone)
    assert ann_path(db).stat().st_mtime_ns == stamp
    reader.close()
    exact.close()


def test_a_hard_prune_keeps_this_process_matrix_and_graph(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    import atomic_agents.memory._matrix_cache as cache

    monkeypatch.setattr(cache, "MIN_ROWS", 1)  # (a sidecar is written from 5,000 rows)
    db = tmp_path / "m.db"
    store = _store(db, data)
    ids = _fill(store, 80)
    store.build_ann()
    ix = store._index
    gone = [ids[i] for i in range(3 * PER, 3 * PER + 4)]
    store.forget(gone[0])  # soft first, then erased; the others erased while live
    for i in range(3 * PER, 3 * PER + 4):
        assert store.prune(keywords=f"v{i}", dry_run=False, hard=True).removed == 1
    assert store._index is ix and ix is not None and ix.ann is not None  # no reload, no rebuild
    exact = _store(db, data, ann_threshold=0)
    _all_equal(store, exact)
    assert not {h.id for h in store.recall("q3", BIG, 10)} & set(gone)
    store.close()  # saves the sidecar of the new epoch
    again = _store(db, data, ann_build="off")
    _all_equal(again, exact)
    assert again._index is not None and again._index.ann is not None  # mapped, not rebuilt
    again.close()
    exact.close()


def test_close_cancels_a_running_build_and_publishes_nothing(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    store = _store(db, data)
    _fill(store, 80)
    cancelled: list[bool] = []

    def slow(keys: np.ndarray, vectors: np.ndarray, tags: Any = None, *, progress: Any = None, cancel: Any = None) -> Any:
        started.set()
        assert cancel is not None and cancel.wait(60)  # what usearch's progress callback sees
        cancelled.append(True)
        raise _ann.BuildCancelled

    started = threading.Event()
    monkeypatch.setattr(_ann.AnnIndex, "build", slow)
    store.recall("q0", BIG)
    assert started.wait(30)
    store.close()
    assert cancelled == [True] and store._builder is not None and not store._builder.is_alive()
    assert not ann_path(db).exists() and not meta_path(db).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_cancelled_usearch_build_raises_build_cancelled() -> None:
    _, pts = _clusters(200, 20, seed=3)
    cancel = threading.Event()
    calls = []

    def progress(done: int, total: int) -> None:
        calls.append(done)
        if done > 0:
            cancel.set()

    with pytest.raises(_ann.BuildCancelled):
        _ann.AnnIndex.build(np.arange(len(pts)), pts, progress=progress, cancel=cancel)
    assert calls and calls[-1] < len(pts)  # it stopped part-way


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    from memory.test_ann import TableEmbedder, _clusters
    from atomic_agents.memory import SQLiteMemoryStore, _matrix_cache
    centres, pts = _clusters(80, 10, seed=2)
    where = sys.argv[1]
    real_publish = _matrix_cache.publish

    def publish(db, arrays, graph, **kw):
        def graph_then_die(tmp):
            ok = graph(tmp)
            if where == "publish":  # every temp file but the header written: die before any rename
                os.kill(os.getpid(), signal.SIGKILL)
            return ok
        return real_publish(db, arrays, graph_then_die, **kw)

    import atomic_agents.memory._sqlite_vectors as sv
    sv.publish = publish
    s = SQLiteMemoryStore({db!r}, embedder=TableEmbedder(pts, centres), ann_threshold=50, ann_build="off")
    if where == "build":
        from atomic_agents.memory import _ann
        real = _ann.AnnIndex.build
        def build(keys, vectors, tags=None, progress=None, cancel=None):
            def step(done, total):
                print("progress", done, flush=True)
            return real(keys, vectors, tags, progress=step, cancel=cancel)
        _ann.AnnIndex.build = build
    print("start", flush=True)
    s.build_ann()
    print("finished", flush=True)
    """
)


@pytest.mark.parametrize("where", ["publish", "build"])
def test_a_killed_build_leaves_a_valid_state(tmp_path: Path, data: tuple[np.ndarray, np.ndarray], where: str) -> None:
    db = tmp_path / "m.db"
    exact = _store(db, data, ann_threshold=0)
    ids = _fill(exact, 80)
    # an older valid pair exists, then rows change: the killed build was to replace it
    old = _store(db, data, ann_build="off")
    old.build_ann()
    old.close()
    before = {p.name: p.stat().st_ino for p in (ann_path(db), meta_path(db), snapshot_path(db))}
    assert exact.prune(keywords="v7", dry_run=False, hard=True).removed == 1
    exact.reindex()  # a new epoch: the saved pair is stale now
    code = KILLED.format(tests=str(Path(__file__).parents[1]), db=str(db))
    proc = subprocess.Popen([sys.executable, "-c", code, where], stdout=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout is not None
    if where == "build":  # killed from outside while usearch is inserting
        for line in proc.stdout:
            if line.startswith("progress"):
                break
        proc.kill()
    proc.wait(60)
    assert proc.returncode == -signal.SIGKILL
    left = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    if where == "publish":
        assert left  # its debris is there, under names no reader opens
    # the files readers open are the old, stale pair, untouched
    assert {p.name: p.stat().st_ino for p in (ann_path(db), meta_path(db), snapshot_path(db))} == before
    reader = _store(db, data, ann_build="off")
    _all_equal(reader, exact)  # exact answers: the stale graph is refused, the debris ignored
    assert reader._index is not None and reader._index.ann is None
    assert ids[7] not in {h.id for h in reader.recall("q0", BIG, 10)}
    out = reader.build_ann()  # the next build sweeps the dead writer's debris and publishes
    assert out["status"] == "built"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    reader.close()
    fresh = _store(db, data, ann_build="off")
    _all_equal(fresh, exact)
    assert fresh._index is not None and fresh._index.ann is not None and not fresh._index.ann.mutable
    fresh.close()
    exact.close()


def test_sweep_keeps_a_live_writers_temp_files(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    mine = tmp_path / f".{db.name}-ann.usearch.{os.getpid()}-0.tmp"
    dead = tmp_path / f".{db.name}-vectors.npy.999999999-3.tmp"
    other = tmp_path / ".unrelated.999999999-3.tmp"
    for p in (mine, dead, other):
        p.write_bytes(b"x")
    assert sweep_debris(db) == 1
    assert mine.exists() and other.exists() and not dead.exists()


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**ENV, "ATOMIC_AGENTS_DAEMON": "off", "ATOMIC_AGENTS_ANN_THRESHOLD": "50", "ATOMIC_AGENTS_EMBEDDER": "hashing"}
    return subprocess.run([sys.executable, "-m", "atomic_agents.cli", "memory", *args, "--db", str(db)],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip


def test_the_cli_never_starts_a_build_and_ann_build_makes_one(tmp_path: Path) -> None:
    from atomic_agents.memory import HashingEmbedder

    db = tmp_path / "m.db"
    with SQLiteMemoryStore(db, embedder=HashingEmbedder(), ann_threshold=0) as seed:
        seed.remember_many([(f"note {i} about deploy {i % 17} and cache {i % 5}", None) for i in range(300)], BIG)
    got = _cli(db, "recall", "--agent-id", "a", "--user-id", "u", "deploy 3 cache 1")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["results"]
    assert not ann_path(db).exists() and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    built = _cli(db, "ann", "build")
    assert built.returncode == 0, built.stderr
    out = json.loads(built.stdout)
    assert out["status"] == "ok" and out["ann"] == "built" and out["rows"] == 300
    assert ann_path(db).exists()
    again = _cli(db, "ann", "build")
    assert json.loads(again.stdout)["ann"] == "current"
    with SQLiteMemoryStore(db, embedder=HashingEmbedder(), ann_threshold=50, ann_build="off") as s:
        hits = s.recall("deploy 3 cache 1", BIG)
        assert s._index is not None and s._index.ann is not None
    # the same answer; compared by score, since "deploy" and "cache" are in every row, the semantic side
    # embeds only "3 1" (_scoring.semantic_query) and rows tie: either side may list a tied row first
    assert [round(h["score"], 6) for h in json.loads(got.stdout)["results"]] == [round(h.score, 6) for h in hits]


def test_ann_build_is_a_typed_error_for_a_bad_mode(tmp_path: Path) -> None:
    from atomic_agents.exceptions import ValidationError
    from atomic_agents.memory import HashingEmbedder

    with pytest.raises(ValidationError, match="ann_build"):
        SQLiteMemoryStore(tmp_path / "m.db", embedder=HashingEmbedder(), ann_build="sometimes")


def test_one_build_per_database_the_other_store_maps_what_it_published(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    import atomic_agents.memory._sqlite_vectors as sv

    db = tmp_path / "m.db"
    exact = _store(db, data, ann_threshold=0)
    _fill(exact, 80)
    held = HeldBuild()
    monkeypatch.setattr(_ann.AnnIndex, "build", held)
    monkeypatch.setattr(sv, "_RETRY_S", 0.0)
    first = _store(db, data)
    first.recall("q0", BIG)
    assert held.started.wait(30)  # first holds the build lock
    second = _store(db, data)
    _all_equal(second, exact)  # its job finds the lock taken and gives up for now; answers stay exact
    assert second._builder is not None
    second._builder.join(30)
    assert second._index is not None and second._index.ann is None
    held.release.set()
    assert first._builder is not None
    first._builder.join(60)
    assert first.ann_state == "graph"
    second.recall("q1", BIG)  # retried: the lock is free and a graph for this state is published
    assert second._builder is not None
    second._builder.join(30)
    assert second.ann_state == "graph" and second._index is not None and second._index.ann is not None
    assert not second._index.ann.mutable  # mapped from the file, not built again
    _all_equal(second, exact)
    for s in (first, second, exact):
        s.close()


def test_rows_written_past_a_mapped_graph_are_folded_in_by_a_background_job(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    import atomic_agents.memory._sqlite_vectors as sv
    import atomic_agents.memory._vectors as vectors

    db = tmp_path / "m.db"
    exact = _store(db, data, ann_threshold=0)
    ids = _fill(exact, 80)
    first = _store(db, data)
    first.build_ann()
    first.close()
    monkeypatch.setattr(vectors, "FOLD_AT", 10)
    monkeypatch.setattr(sv, "FOLD_AT", 10)
    reader = _store(db, data)
    _all_equal(reader, exact)
    assert reader._index is not None and reader._index.ann is not None and not reader._index.ann.mutable
    # another process writes 30 rows and moves one: past FOLD_AT for the reader's mapped graph
    fresh = exact.remember_many([(f"q{c}", None) for c in range(1, 31)], BIG)
    exact.edit(ids[2 * PER], content="q5")
    _all_equal(reader, exact)  # the new rows are scanned exactly while the fold runs
    assert reader._builder is not None
    reader._builder.join(60)
    ix = reader._index
    assert ix is not None and ix.ann is not None and ix.ann.mutable and ix.uncovered == 0
    _all_equal(reader, exact)
    assert reader.recall("q7", BIG, 1)[0].id == fresh[6]
    reader.close()
    exact.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_child_forked_during_a_build_does_not_keep_the_build_lock(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child inherits the build lock's descriptor (flock: one lock per open file): it must let it go.

    Else every later build of the database, this process's and any other's, finds the lock
    taken for as long as the child lives (a fork-based worker pool: for good).
    """
    from atomic_agents.memory._sqlite_vectors import _build_lock

    db = tmp_path / "m.db"
    store = _store(db, data)
    _fill(store, 80)
    held = HeldBuild()
    monkeypatch.setattr(_ann.AnnIndex, "build", held)
    store.recall("q0", BIG)
    assert held.started.wait(30)  # the job holds the build lock now
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: waits until the parent's build is done, then takes the lock itself
        code = 1
        try:
            signal.alarm(30)
            os.close(go_w)
            os.read(go_r, 1)
            with _build_lock(db, blocking=False) as got:
                code = 0 if got else 3
            if code == 0 and len(store.recall("q1", BIG, 3)) != 3:
                code = 4
        finally:
            os._exit(code)
    os.close(go_r)
    try:
        held.release.set()
        assert store._builder is not None
        store._builder.join(60)
        assert store.ann_state == "graph"
        with _build_lock(db, blocking=False) as got:
            assert got, "the forked child still holds the build lock"
    finally:
        os.close(go_w)
        _, status = os.waitpid(pid, 0)
        store.close()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_a_graph_file_that_cannot_be_written_still_serves_this_process(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    """usearch reports a failed save (disk full, quota) as RuntimeError, not OSError.

    The graph built must still be attached (as for an unwritable folder); before, the job
    failed, nothing was attached, and the whole build ran again every retry period.
    """

    Index = _ann._usearch()  # (imports onnxruntime first, as the store does: see _ann._usearch)

    def full(self: Any, path: Any = None, **kw: Any) -> None:  # a *fake* of usearch's disk-full error
        raise RuntimeError("Failed to serialize into stream")

    db = tmp_path / "m.db"
    store = _store(db, data)
    exact = _store(db, data, ann_threshold=0)
    _fill(store, 80)
    monkeypatch.setattr(Index, "save", full)
    store.recall("q0", BIG)
    assert store._builder is not None
    store._builder.join(60)
    assert store.ann_state == "graph" and store._build_error is None
    assert not ann_path(db).exists() and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    _all_equal(store, exact)
    store.close()
    exact.close()


@pytest.mark.parametrize("job", ["foreground", "background"])
def test_a_fold_remembers_the_rows_killed_while_the_graph_was_mapped(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch, job: str
) -> None:
    """Rows forgotten while the graph is a read-only map still sit in it; a fold copies them along.

    Attaching the folded copy must not forget that they are there: else the graph saved
    next holds more keys than the snapshot's live rows, and every later process rejects
    it (a full rebuild) instead of mapping it.
    """
    import atomic_agents.memory._sqlite_vectors as sv
    import atomic_agents.memory._vectors as vectors

    db = tmp_path / "m.db"
    exact = _store(db, data, ann_threshold=0)
    ids = _fill(exact, 80)
    first = _store(db, data)
    first.build_ann()
    first.close()
    monkeypatch.setattr(vectors, "FOLD_AT", 10)
    monkeypatch.setattr(sv, "FOLD_AT", 10)
    reader = _store(db, data, ann_build="off" if job == "foreground" else "background")
    _all_equal(reader, exact)
    assert reader._index is not None and reader._index.ann is not None and not reader._index.ann.mutable
    reader.forget(ids[3])
    reader.forget(ids[2 * PER + 1])
    reader.remember_many([(f"q{c}", None) for c in range(1, 31)], BIG)
    if job == "foreground":
        assert reader.build_ann()["status"] == "folded"
    else:
        _all_equal(reader, exact)  # starts the fold job
        assert reader._builder is not None
        reader._builder.join(60)
        assert reader.build_ann()["status"] == "current"
        from atomic_agents.memory import _matrix_cache

        monkeypatch.setattr(_matrix_cache, "MIN_ROWS", 0)  # (this small store's pair is refreshed at close
        reader._pulled = 10**6  # as a big store's is after many pulled rows)
    reader.close()
    again = _store(db, data, ann_build="off")
    _all_equal(again, exact)
    ix = again._index
    assert ix is not None and ix.ann is not None and not ix.ann.mutable, "the published graph was rejected"
    assert ix.uncovered == 0
    again.close()
    exact.close()


def test_a_build_thread_that_cannot_start_leaves_searches_exact(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``can't start new thread`` (a pids limit, no memory for a stack) is a slower search, never a failed one."""
    import types

    import atomic_agents.memory._sqlite_vectors as sv

    class NoThread(threading.Thread):  # a *fake*: the thread limit reached
        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(sv, "threading", types.SimpleNamespace(**{**vars(threading), "Thread": NoThread}))
    db = tmp_path / "m.db"
    exact = _store(db, data, ann_threshold=0)
    _fill(exact, 80)
    store = _store(db, data)
    _all_equal(store, exact)
    assert store.ann_state == "exact" and store._build_error is not None and "thread" in store._build_error
    extra = store.health().extra  # what `memory health` and eden_health show
    assert extra["ann"] == "exact" and "thread" in extra["ann_build_error"]
    assert exact.health().extra["ann"] == "off" and exact.health().extra["ann_build_error"] is None
    store.close()
    exact.close()


RAISING_PROGRESS = textwrap.dedent(
    """
    import sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    from memory.test_ann import _clusters
    from atomic_agents.memory import _ann
    _, pts = _clusters(200, 20, seed=3)
    def progress(done, total):
        if done > 0:
            raise {exc}
    try:
        _ann.AnnIndex.build(np.arange(len(pts)), pts, progress=progress)
    except {exc}:
        print("raised", flush=True)
    """
)


@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "BrokenPipeError"])
def test_an_exception_in_the_progress_callback_is_raised_not_an_abort(tmp_path: Path, exc: str) -> None:
    """Ctrl-C during ``memory ann build`` arrives in the progress bar's callback, called from usearch's C++.

    Left to cross into it, the exception is ``std::terminate``: the process aborts (SIGABRT,
    a core dump, no cleanup). It must come out of ``AnnIndex.build`` as itself.
    """
    code = RAISING_PROGRESS.format(tests=str(Path(__file__).parents[1]), exc=exc)
    got = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and got.stdout.strip() == "raised", (got.returncode, got.stderr[-500:])


def test_health_names_the_graph_only_when_the_snapshot_in_place_names_it(tmp_path: Path) -> None:
    from atomic_agents.memory import HashingEmbedder
    from atomic_agents.memory._matrix_cache import meta_path

    db = tmp_path / "m.db"
    with SQLiteMemoryStore(db, embedder=HashingEmbedder(), ann_threshold=0) as seed:
        seed.remember_many([(f"note {i} about deploy {i % 17} and cache {i % 5}", None) for i in range(300)], BIG)
    assert _cli(db, "ann", "build").returncode == 0
    with SQLiteMemoryStore(db, embedder=HashingEmbedder(), ann_threshold=50, ann_build="off") as s:
        before = s.health().extra["ann"]
        s.recall("deploy 3", BIG)
        assert before == s.health().extra["ann"] == "graph"  # the same before and after a search
    meta_path(db).unlink()  # the snapshot no longer names the graph file (a crash, a stale sidecar)
    with SQLiteMemoryStore(db, embedder=HashingEmbedder(), ann_threshold=50, ann_build="off") as s:
        before = s.health().extra["ann"]
        s.recall("deploy 3", BIG)
        assert before == s.health().extra["ann"] == "exact"  # not "graph": a search would not map it
