"""The ANN tier: candidates from the graph, answers exact.

The threshold is lowered per store (``ann_threshold=``) so small data uses the graph;
the exact answer comes from a second store on the same file with the tier off.
Vectors come from :class:`TableEmbedder`, a *fake* that maps ``"v<i>"`` to a fixed row.
"""

from __future__ import annotations

import json
import os
from collections import Counter
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from atomic_agents.memory import HashingEmbedder, Scope, ScopeFilter, SQLiteMemoryStore
from atomic_agents.memory._ann import AnnIndex
from atomic_agents.memory._matrix_cache import ann_path, meta_path, snapshot_path
from atomic_agents.memory._vectors import VectorIndex

DIM = 32
SCOPE = ("a", "u", "o", "w")


def _clusters(n_clusters: int, per: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``per`` tight points around each of ``n_clusters`` far-apart centres: top-``per`` is unambiguous."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_clusters, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    pts = np.repeat(centres, per, axis=0) + 0.12 * rng.standard_normal((n_clusters * per, DIM)).astype(np.float32)
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    return centres, pts.astype(np.float32)


class TableEmbedder(HashingEmbedder):
    """A fake embedder: ``"v<i>"`` embeds to ``table[i]``, ``"q<i>"`` to ``queries[i]``; anything else hashes."""

    def __init__(self, table: np.ndarray, queries: np.ndarray) -> None:
        super().__init__(DIM)
        self.model_id = "table-fake"
        self.table, self.queries = table, queries

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        for t in texts:
            if t[:1] in "vq" and t[1:].isdigit():
                out.append((self.table if t[0] == "v" else self.queries)[int(t[1:])])
            else:
                out.append(super().embed_batch([t])[0])
        return np.stack(out).astype(np.float32) if out else np.empty((0, DIM), np.float32)


# -- the index on its own ---------------------------------------------------------------


def test_ann_top_k_equals_exact_and_scores_are_exact_cosines() -> None:
    centres, pts = _clusters(150, 10)
    keys = np.arange(1, len(pts) + 1, dtype=np.int64) * 3
    exact, ann = VectorIndex(DIM), VectorIndex(DIM)
    for ix in (exact, ann):
        ix.upsert_many(keys, pts, [SCOPE] * len(pts), [None] * len(pts))
    ann.build_ann()
    assert ann.ann is not None and len(ann.ann) == len(pts)
    for q in centres:
        want, got = exact.search(q, SCOPE, 10, now=0.0), ann.search(q, SCOPE, 10, now=0.0)
        assert {k for k, _ in got} == {k for k, _ in want}
        row = {int(k): i for i, k in enumerate(keys)}
        for k, s in got:  # the score is the stored vector's cosine, not the graph's estimate
            assert s == pytest.approx(float(pts[row[k]] @ q), abs=1e-6)  # (BLAS kernels differ by an ulp)
        assert dict(got) == pytest.approx(dict(want), abs=1e-6)  # exact search's numbers, to float32 rounding


def test_a_graph_is_searched_with_the_width_its_connectivity_needs(tmp_path: Path) -> None:
    """This release builds denser graphs searched with a narrower beam; a sparser graph saved by an
    earlier release keeps the wider beam it needs, mapped or copied into memory, until rebuilt."""
    from atomic_agents.memory import _ann

    _, pts = _clusters(50, 10)
    keys = np.arange(len(pts), dtype=np.int64)
    built = AnnIndex.build(keys, pts)
    assert built._raw.connectivity == _ann._CONNECTIVITY
    assert built._raw.expansion_search == _ann._EXPANSION_SEARCH < _ann._EXPANSION_SEARCH_SPARSE
    built.save(tmp_path / "new.usearch")
    old = _ann._usearch()(ndim=DIM, metric="cos", dtype="i8", connectivity=16, expansion_add=48)
    old.add(keys.astype(np.uint64), pts)
    old.save(str(tmp_path / "old.usearch"))
    for name, width in (("new", _ann._EXPANSION_SEARCH), ("old", _ann._EXPANSION_SEARCH_SPARSE)):
        opened = AnnIndex.open(tmp_path / f"{name}.usearch", DIM, len(pts))
        assert opened is not None and opened._raw.expansion_search == width, name
        opened.make_mutable()
        assert opened._raw.expansion_search == width and opened.copy()._raw.expansion_search == width, name
        assert set(opened.search(pts[7], 5).tolist()) >= {7}


def test_ann_candidates_are_filtered_by_scope_expiry_and_key_set() -> None:
    _, pts = _clusters(100, 10, seed=1)
    n = len(pts)
    other = ("b", "u", "o", "w")
    scopes = [other if i % 50 else SCOPE for i in range(n)]  # SCOPE: 2% of the rows
    expires = [5.0 if i % 7 == 0 else None for i in range(n)]
    keys = np.arange(n, dtype=np.int64)
    exact, ann = VectorIndex(DIM), VectorIndex(DIM)
    for ix in (exact, ann):
        ix.upsert_many(keys, pts, scopes, expires)
    ann.build_ann()
    only = [int(k) for k in keys if k % 3 == 0]
    for q in pts[::97]:
        for kw in ({}, {"only": only}):
            want = exact.search(q, SCOPE, 5, now=10.0, **kw)  # type: ignore[arg-type]
            got = ann.search(q, SCOPE, 5, now=10.0, **kw)  # type: ignore[arg-type]
            assert [k for k, _ in got] == [k for k, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
            assert all(scopes[k] == SCOPE and expires[k] is None for k, _ in got)


def test_rows_written_past_a_mapped_graph_are_scanned_then_folded_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import atomic_agents.memory._vectors as vectors
    from atomic_agents.memory._ann import AnnIndex

    centres, pts = _clusters(60, 10, seed=4)
    keys = np.arange(len(pts), dtype=np.int64)
    built = VectorIndex(DIM)
    built.upsert_many(keys[:400], pts[:400], [SCOPE] * 400, [None] * 400)
    built.build_ann()
    assert built.save_ann(tmp_path / "g.usearch")
    mapped = AnnIndex.open(tmp_path / "g.usearch", DIM, 400)
    assert mapped is not None and not mapped.mutable
    ann, exact = VectorIndex(DIM), VectorIndex(DIM)
    ann.upsert_many(keys[:400], pts[:400], [SCOPE] * 400, [None] * 400)
    ann.attach_ann(mapped)
    exact.upsert_many(keys[:400], pts[:400], [SCOPE] * 400, [None] * 400)
    for ix in (ann, exact):  # new rows, a re-written row moved to another cluster, a removal
        ix.upsert_many(keys[400:], pts[400:], [SCOPE] * 200, [None] * 200)
        ix.upsert(5, pts[455], SCOPE, None)
        ix.remove(12)

    def check() -> None:
        for q in centres:
            want, got = exact.search(q, SCOPE, 10, now=0.0), ann.search(q, SCOPE, 10, now=0.0)
            assert {k for k, _ in got} == {k for k, _ in want}
            assert dict(got) == pytest.approx(dict(want), abs=1e-6)
    check()  # graph mapped read-only: the 201 new rows are scanned exactly
    assert not mapped.mutable
    monkeypatch.setattr(vectors, "FOLD_AT", 10)
    check()  # past FOLD_AT: copied into memory and the rows inserted
    assert ann.ann is not None and ann.ann.mutable
    # (key 5 now holds key 455's vector: the two are copies, held out of the graph)
    assert len(ann.ann) == 400 + 200 - 2 and sorted(ann.ann.copies.keys().tolist()) == [5, 455]
    check()


# -- the store -------------------------------------------------------------------------


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    return _clusters(80, PER, seed=2)


def _stores(db: Path, data: tuple[np.ndarray, np.ndarray]) -> tuple[SQLiteMemoryStore, SQLiteMemoryStore]:
    centres, pts = data
    ann = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, centres), ann_threshold=50)
    exact = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, centres), ann_threshold=0)
    return ann, exact


PER = 10  # points per cluster; clusters with c % 10 == 0 live in the small scope


def _scope_of(cluster: int) -> Scope:
    return Scope("b", "u") if cluster % 10 == 0 else Scope("a", "u")


def _fill(store: SQLiteMemoryStore, n_clusters: int) -> dict[int, str]:
    """Point ``i`` (text ``v<i>``, cluster ``i // PER``) -> memory id."""
    out: dict[int, str] = {}
    for sc in (Scope("a", "u"), Scope("b", "u")):
        idx = [i for i in range(n_clusters * PER) if _scope_of(i // PER) == sc]
        ids = store.remember_many([(f"v{i}", {"parity": i % 2, "tag": f"t{i % 5}"}) for i in idx], sc)
        out.update(zip(idx, ids, strict=True))
    return out


def _same(a: list, b: list) -> None:  # type: ignore[type-arg]
    assert [h.id for h in a] == [h.id for h in b]
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-6)


def _same_up_to_ties(got: list, exact: SQLiteMemoryStore, q: str, sc: Scope) -> None:  # type: ignore[type-arg]
    """As :func:`_same`, but among copies (equal scores) any of them may fill the last places."""
    want = exact.recall(q, sc, len(got))
    wide = {h.id: h.score for h in exact.recall(q, sc, len(got) + 100)}
    assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-6)
    assert len({h.id for h in got}) == len(got) and all(wide.get(h.id) == pytest.approx(h.score, abs=1e-6) for h in got)


def test_store_uses_the_graph_and_answers_like_exact_search(tmp_path: Path, data: tuple[np.ndarray, np.ndarray]) -> None:
    ann, exact = _stores(tmp_path / "m.db", data)
    _fill(ann, 80)
    assert ann.build_ann()["status"] in ("built", "current")  # (current: the background job got there first)
    for c in range(0, 80, 3):  # each answer lies inside one cluster: the top-k is unambiguous
        q, sc = f"q{c}", _scope_of(c)
        _same(ann.recall(q, sc, 10), exact.recall(q, sc, 10))
        for flt, lim in (({"parity": 1}, 5), ({"tag": "t3"}, 2), ({"tag": "t3", "parity": 1}, 1)):
            got = ann.search_semantic(q, sc, flt, lim)
            _same(got, exact.search_semantic(q, sc, flt, lim))
            assert len(got) == lim and all(all(h.metadata[k] == v for k, v in flt.items()) for h in got)
        _same(ann.search_hybrid(q, sc, None, 5), exact.search_hybrid(q, sc, None, 5))
    assert ann._index is not None and ann._index.ann is not None  # the tier really was on
    assert exact._index is not None and exact._index.ann is None
    assert ann_path(ann.path).exists() and snapshot_path(ann.path).exists()
    ann.close()
    exact.close()


def test_writes_edits_forgets_and_expiry_reach_the_graph(tmp_path: Path, data: tuple[np.ndarray, np.ndarray]) -> None:
    centres, pts = data
    ann, exact = _stores(tmp_path / "m.db", data)
    ids = _fill(ann, 80)
    big = Scope("a", "u")
    ann.recall("q0", big)
    ann.build_ann()
    assert ann._index is not None and ann._index.ann is not None
    # a new memory sitting exactly on query 1's centre comes first
    fresh = ann.remember("q1", None, big)
    assert ann.recall("q1", big, 1)[0].id == fresh
    # edit it onto query 2's centre: it leaves query 1 and leads query 2
    ann.edit(fresh, content="q2")
    assert fresh not in [h.id for h in ann.recall("q1", big, 10)]
    assert ann.recall("q2", big, 1)[0].id == fresh
    # forget it: query 2's answers are cluster 2's own points again
    ann.forget(fresh)
    top = ann.recall("q2", big, 10)
    assert fresh not in [h.id for h in top] and {h.id for h in top} <= {ids[i] for i in range(2 * PER, 3 * PER)} and len(top) == PER
    # a memory that expires drops out without any write
    short = ann.remember("q3", None, big, ttl_ms=300)
    assert ann.recall("q3", big, 1)[0].id == short
    time.sleep(0.5)
    assert short not in [h.id for h in ann.recall("q3", big, 10)]
    for c in range(1, 80, 4):
        _same(ann.recall(f"q{c}", _scope_of(c), 10), exact.recall(f"q{c}", _scope_of(c), 10))
    ann.close()
    exact.close()


def _reopen(db: Path, data: tuple[np.ndarray, np.ndarray]) -> SQLiteMemoryStore:
    centres, pts = data
    return SQLiteMemoryStore(db, embedder=TableEmbedder(pts, centres), ann_threshold=50)


def _rewrite_meta(db: Path, **change: Any) -> None:
    """Write the snapshot's ``meta.npz`` again with some arrays changed (its ``.npy`` stamp still matches)."""
    arrays = dict(np.load(meta_path(db), allow_pickle=False))
    header = json.loads(str(arrays["header"]))
    header.update(change.pop("header", {}))
    arrays.update(change, header=np.array(json.dumps(header)))
    with open(meta_path(db), "wb") as fh:
        np.savez(fh, **arrays)


META_DAMAGE = ["meta-truncated", "meta-empty", "meta-bit-flipped", "meta-short-expires", "meta-wrong-dimension"]


@pytest.mark.parametrize("damage", ["deleted", "garbage", "garbage-same-stamp", "truncated", "meta-deleted", "stale", *META_DAMAGE])
def test_a_missing_damaged_or_stale_sidecar_is_rebuilt(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], damage: str
) -> None:
    db = tmp_path / "m.db"
    first, exact = _stores(db, data)
    _fill(first, 80)
    big = Scope("a", "u")
    first.recall("q0", big)
    first.build_ann()
    first.close()
    path = ann_path(db)
    assert path.exists()
    st = path.stat()
    if damage == "deleted":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(os.urandom(st.st_size))
    elif damage == "garbage-same-stamp":  # same inode, size and mtime: only the file's own checks can tell
        with open(path, "r+b") as fh:
            fh.seek(64)
            fh.write(os.urandom(st.st_size - 64))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif damage == "truncated":
        with open(path, "r+b") as fh:
            fh.truncate(st.st_size // 2)
    elif damage == "meta-deleted":
        meta_path(db).unlink()
    elif damage == "meta-truncated":  # a zip cut short: BadZipFile, not an OSError
        meta_path(db).write_bytes(meta_path(db).read_bytes()[:1000])
    elif damage == "meta-empty":  # EOFError
        meta_path(db).write_bytes(b"")
    elif damage == "meta-bit-flipped":  # a bad CRC
        raw = bytearray(meta_path(db).read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        meta_path(db).write_bytes(bytes(raw))
    elif damage == "meta-short-expires":  # arrays that disagree in length (an IndexError on every recall, before)
        _rewrite_meta(db, expires=np.zeros(10))
    elif damage == "meta-wrong-dimension":  # another model's width: no snapshot of this store
        _rewrite_meta(db, header={"dimension": DIM * 2})
    elif damage == "stale":  # another writer moved on after the snapshot and the graph were saved
        writer = _reopen(db, data)
        gone = writer.recall("q4", big, 3)
        for h in gone:
            writer.forget(h.id)
        writer.remember("q5", None, big)
        writer.close()
    second = _reopen(db, data)
    for c in range(0, 80, 3):  # while the graph is rebuilt in the background: exact scans, same answers
        _same(second.recall(f"q{c}", _scope_of(c), 10), exact.recall(f"q{c}", _scope_of(c), 10))
    if second._builder is not None:
        second._builder.join()
    for c in range(0, 80, 3):
        _same(second.recall(f"q{c}", _scope_of(c), 10), exact.recall(f"q{c}", _scope_of(c), 10))
    assert second._index is not None and second._index.ann is not None
    second.close()
    if damage != "stale":  # rebuilt and saved again: a third process maps it as it is
        third = _reopen(db, data)
        third.recall("q0", big)
        assert third._index is not None and third._index.ann is not None and not third._index.ann.mutable
        third.close()
    exact.close()


def test_the_old_npz_snapshot_is_ignored_and_removed(tmp_path: Path, data: tuple[np.ndarray, np.ndarray]) -> None:
    db = tmp_path / "m.db"
    legacy = db.with_name(db.name + "-vectors.npz")
    ann, exact = _stores(db, data)
    _fill(ann, 80)
    legacy.write_bytes(b"PK\x03\x04 not really a zip")
    _same(ann.recall("q0", Scope("a", "u"), 10), exact.recall("q0", Scope("a", "u"), 10))
    ann.build_ann()  # the graph job publishes the snapshot, and removes the old one
    assert not legacy.exists()
    ann.close()
    exact.close()


def test_a_reader_process_follows_a_writer_process(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    scope = Scope("a", "u")
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(400)]

    def text(i: int) -> str:
        return " ".join(rng.choice(words, 6).tolist()) + f" n{i}"

    texts = [text(i) for i in range(300)]
    seed = SQLiteMemoryStore(db, embedder=HashingEmbedder(), ann_threshold=50)
    seed.remember_many([(t, None) for t in texts], scope)
    seed.close()
    reader = SQLiteMemoryStore(db, embedder=HashingEmbedder(), ann_threshold=50)
    assert reader.recall(texts[7], scope, 1)[0].content == texts[7]
    reader.build_ann()
    assert reader._index is not None and reader._index.ann is not None
    writer = textwrap.dedent(
        f"""
        import sys
        from atomic_agents.memory import HashingEmbedder, Scope, ScopeFilter, SQLiteMemoryStore
        s = SQLiteMemoryStore({str(db)!r}, embedder=HashingEmbedder(), ann_threshold=50)
        sc = Scope("a", "u")
        for line in sys.stdin:
            op, _, arg = line.rstrip("\\n").partition(" ")
            if op == "add":
                print(s.remember(arg, None, sc), flush=True)
            elif op == "forget":
                s.forget(arg); print("ok", flush=True)
            elif op == "edit":
                mid, _, content = arg.partition(" ")
                s.edit(mid, content=content); print("ok", flush=True)
        s.close()
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", writer], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdin is not None and proc.stdout is not None

    def ask(line: str) -> str:
        proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return proc.stdout.readline().strip()  # type: ignore[union-attr]

    try:
        new_text = "zeta omega unique words here"
        mid = ask(f"add {new_text}")
        assert reader.recall(new_text, scope, 1)[0].id == mid
        ask(f"edit {mid} entirely different phrase now")
        assert reader.recall("entirely different phrase now", scope, 1)[0].id == mid
        assert mid not in [h.id for h in reader.recall(new_text, scope, 3) if h.content == new_text]
        target = reader.recall(texts[11], scope, 1)[0]
        assert target.content == texts[11]
        ask(f"forget {target.id}")
        assert target.id not in [h.id for h in reader.recall(texts[11], scope, 10)]
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0
    reader.close()


def test_the_model_still_loads_after_the_graph_was_opened(tmp_path: Path) -> None:
    """usearch's wheel exports a static libstdc++; onnxruntime loaded after it used to crash the process."""
    code = textwrap.dedent(
        f"""
        from atomic_agents.memory import HashingEmbedder, Scope, ScopeFilter, SQLiteMemoryStore, embedder_from_name
        s = SQLiteMemoryStore({str(tmp_path / "m.db")!r}, embedder=HashingEmbedder(), ann_threshold=10)
        s.remember_many([(f"note {{i}} about deploys", None) for i in range(30)], Scope("a", "u"))
        s.recall("deploys", Scope("a", "u"))
        s.build_ann()
        assert s._index is not None and s._index.ann is not None
        print(embedder_from_name("minilm").embed_batch(["hello"]).shape)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "(1, 384)"


def test_a_process_with_the_tier_off_does_not_replace_the_graph_snapshot(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    import atomic_agents.memory._matrix_cache as cache

    db = tmp_path / "m.db"
    ann, exact = _stores(db, data)
    _fill(ann, 80)
    ann.recall("q0", Scope("a", "u"))
    ann.build_ann()
    ann.close()
    stamp = meta_path(db).stat().st_mtime_ns
    monkeypatch.setattr(cache, "MIN_ROWS", 1)
    exact.recall("q0", Scope("a", "u"))  # loads without the graph; a save now would drop it
    exact.remember("q7", None, Scope("a", "u"))
    exact._pulled = 10**6  # as if it had pulled many rows: close() wants to refresh the snapshot
    exact.close()
    assert meta_path(db).stat().st_mtime_ns == stamp
    again = _reopen(db, data)
    again.recall("q0", Scope("a", "u"))
    assert again._index is not None and again._index.ann is not None and not again._index.ann.mutable
    again.close()


def _points(seed: int, n: int, near: slice) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random unit vectors, and a query 0.05 away from each of ``pts[near]``."""
    rng = np.random.default_rng(seed)
    pts = rng.standard_normal((n, DIM)).astype(np.float32)
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    queries = pts[near] + 0.05 * rng.standard_normal((len(pts[near]), DIM)).astype(np.float32)
    return pts, queries / np.linalg.norm(queries, axis=1, keepdims=True)


def test_many_copies_of_one_content_do_not_cut_the_graphs_answers_short(tmp_path: Path) -> None:
    """Thousands of equal vectors (one content stored 3,000 times) crowd the graph.

    HNSW then returns fewer candidates than asked (which is not "no more rows": the small
    scope's answers were short, often empty), and a search that walks into the copies comes
    back with them (the big scope's answers were the copies at cosine 0.02): such a search
    answers exactly. (Now the copies are held out of the graph: see the copy-group tests below.)
    """
    pts, queries = _points(7, 4200, slice(3000, 3050))
    db = tmp_path / "m.db"
    big, small = Scope("a", "big"), Scope("a", "small")
    ann = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, queries), ann_threshold=1000, ann_build="off")
    ann.remember_many([(f"v{i}", None) for i in range(3000)] + [("v4100", None)] * 3000, big)  # boilerplate, repeated
    ann.remember_many([(f"v{i}", None) for i in range(3000, 3100)], small)
    assert ann.build_ann()["status"] == "built"
    exact = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, queries), ann_threshold=0, ann_build="off")
    for i in range(50):
        got = ann.recall(f"q{i}", small, 10)
        assert len(got) == 10 and all(h.memory.user_id == "small" for h in got)
        assert got[0].content == f"v{3000 + i}"  # (its query's own point, 0.05 away)
        _same(ann.recall(f"q{i}", big, 10), exact.recall(f"q{i}", big, 10))
    assert ann._index is not None and ann._index.ann is not None
    ann.close()
    # the published graph passes the next process's self-check (a sampled copy's ten nearest are
    # other copies, not itself): it is mapped, not thrown away for exact search
    again = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, queries), ann_threshold=1000, ann_build="off")
    _same(again.recall("q0", small, 10), exact.recall("q0", small, 10))
    assert again._index is not None and again._index.ann is not None
    again.close()
    exact.close()


class _CommitsMidSearch(SQLiteMemoryStore):
    """A store whose row read comes after ``between`` ran (another process's commits, deterministically)."""

    between: Any = None

    def _fetch_as_ranked(self, *args: Any, **kwargs: Any) -> Any:
        if self.between is not None:
            run, self.between = self.between, None
            run()
        return super()._fetch_as_ranked(*args, **kwargs)


@pytest.mark.parametrize("call", ["recall", "search_hybrid", "search_hybrid_rerank"])
def test_a_commit_between_the_vector_search_and_the_row_read_never_answers_out_of_scope(tmp_path: Path, call: str) -> None:
    """SQLite gives the rowid of a hard-pruned newest row to the next insert, of any scope.

    A search that ranked the old row and then read the new one by rowid answered with another
    user's memory, at the old row's cosine. Rows are read with their scope, filters and stored
    vector checked, and the search runs again from a fresh sync when one was moved.
    """
    rng = np.random.default_rng(3)
    pts = rng.standard_normal((60, DIM)).astype(np.float32)
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    db = tmp_path / "m.db"
    alice, bob = Scope("bot", "alice"), Scope("bot", "bob")
    other = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, pts), ann_threshold=0)
    other.remember_many([(f"v{i}", {"k": "x"}) for i in range(1, 50)], alice)
    newest = other.remember("v55", {"k": "x"}, alice)  # the newest row: its rowid is the next insert's

    def commits() -> None:
        assert other.prune(ScopeFilter(user_id="alice"), keywords="v55", dry_run=False, hard=True).removed == 1
        other.remember("bob's private note", {"k": "x"}, bob)

    reader = _CommitsMidSearch(db, embedder=TableEmbedder(pts, pts), ann_threshold=0)
    reader.recall("q0", alice)  # loaded: the index holds the newest row
    reader.between = commits
    if call == "recall":
        got = reader.recall("q55", alice, 3, {"k": "x"})
    else:
        got = reader.search_hybrid("q55", alice, {"k": "x"}, 3, rerank=call.endswith("rerank"))
    assert got and all(h.memory.user_id == "alice" for h in got)
    assert newest not in [h.id for h in got] and "bob's private note" not in [h.content for h in got]
    fresh = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, pts), ann_threshold=0)
    want = fresh.recall("q55", alice, 3, {"k": "x"}) if call == "recall" else fresh.search_hybrid("q55", alice, {"k": "x"}, 3)
    if call != "search_hybrid_rerank":  # (the rerank stage reads token states the table fake does not have)
        _same(got, want)  # the answer of a search that began after the commits
    for s in (other, reader, fresh):
        s.close()


# -- copies of one vector: held out of the graph -----------------------------------------------


def _dup_data(copies: list[int], singles: int, seed: int) -> tuple[np.ndarray, list[int]]:
    """``singles`` random unit vectors, then ``copies[j]`` rows equal to the j-th of ``len(copies)`` more."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((singles + len(copies), DIM)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    rows = list(range(singles)) + [singles + j for j, n in enumerate(copies) for _ in range(n)]
    return base, rows


def _agrees(got: list[tuple[int, float]], exact: VectorIndex, q: np.ndarray, sc: Any, limit: int, **kw: Any) -> None:
    """``got`` is an exact top ``limit``: the exact scores, best first, each key holding its score.
    (Copies tie: which of them fill the last places is the float rounding's choice, which exact
    search over the whole matrix and a re-score of gathered rows may make differently.)"""
    want = exact.search(q, sc, limit, now=0.0, **kw)
    wide = dict(exact.search(q, sc, len(exact), now=0.0, **kw))
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
    assert len({k for k, _ in got}) == len(got)
    for k, score in got:
        assert k in wide and wide[k] == pytest.approx(score, abs=1e-6)


DUPLICATION = {"one content 3,000 times": [3000], "1,000 contents 3 times": [3] * 1000, "10 contents 300 times": [300] * 10}


@pytest.mark.parametrize("case", list(DUPLICATION))
@pytest.mark.parametrize("when", ["built", "written-after"])
def test_copies_of_one_vector_are_held_out_of_the_graph_and_answers_equal_exact(case: str, when: str) -> None:
    """Equal vectors (one content stored many times) go into copy groups, not the graph: the graph
    holds each vector once, and every answer (both scopes, any limit, a key filter) equals exact search.
    Before, 3,000 copies of one content left 17 of 100 small-scope top-10 lists wrong."""
    base, rows = _dup_data(DUPLICATION[case], 3100, seed=len(DUPLICATION[case]))
    rng = np.random.default_rng(1)
    small, big = ("a", "small", "o", "w"), ("a", "big", "o", "w")
    scopes = [small if rng.random() < 0.05 else big for _ in rows]
    keys = np.arange(1, len(rows) + 1, dtype=np.int64)
    vecs = base[rows]
    ann, exact = VectorIndex(DIM), VectorIndex(DIM)
    for ix in (ann, exact):
        if when == "built":
            ix.upsert_many(keys, vecs, scopes, [None] * len(keys))
        else:
            ix.upsert_many(keys[:2000], vecs[:2000], scopes[:2000], [None] * 2000)
    ann.build_ann()
    if when == "written-after":  # a batch, then one row at a time (a copy's first row is in the graph then)
        half = 2000 + (len(keys) - 2000) // 2
        for ix in (ann, exact):
            ix.upsert_many(keys[2000:half], vecs[2000:half], scopes[2000:half], [None] * (half - 2000))
            for i in range(half, len(keys)):
                ix.upsert(int(keys[i]), vecs[i], scopes[i], None)
    assert ann.ann is not None and ann.uncovered == 0
    # copies are grouped per scope: every (vector, scope) held by one row is in the graph, each
    # other row in a group (the second copy of a content written after the build takes the first
    # out of the graph)
    held = Counter(zip(rows, scopes, strict=True))
    alone = sum(1 for n in held.values() if n == 1)
    assert len(ann.ann) == alone and len(ann.ann.copies) == len(keys) - alone
    near = np.concatenate([base[3000:3050], base[3100:3150]])  # near single rows, near copied contents
    queries = np.concatenate([near + 0.05 * rng.standard_normal(near.shape).astype(np.float32),
                              rng.standard_normal((20, DIM)).astype(np.float32)])  # fmt: skip
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    only = keys[::3]
    scans: list[int] = []
    real_exact = ann._exact
    for q in queries:
        ann._exact = lambda *a, **kw: scans.append(1) or real_exact(*a, **kw)  # type: ignore[method-assign]
        for sc in (small, big):
            for limit in (1, 10, 40):
                _agrees(ann.search(q, sc, limit, now=0.0), exact, q, sc, limit)
        ann._exact = real_exact  # type: ignore[method-assign]
        _agrees(ann.search(q, big, 10, now=0.0, only=only), exact, q, big, 10, only=only)  # (a key set this small: exact)
    # and the graph answered them all: with the copies inside it, most searches near them had to be
    # exact scans (80 of 100 small-scope top-10 searches beside 3,000 copies; all of them beside 10 x 300)
    assert scans == []


def test_copies_removed_rewritten_and_made_stay_exact() -> None:
    """Forgetting copies, re-writing one to another vector, writing a graph row's copy, emptying a group:
    the graph and its groups follow, and the answers stay exact."""
    base, rows = _dup_data([50, 50], 2000, seed=3)
    keys = np.arange(1, len(rows) + 1, dtype=np.int64)
    ann, exact = VectorIndex(DIM), VectorIndex(DIM)
    for ix in (ann, exact):
        ix.upsert_many(keys, base[rows], [SCOPE] * len(keys), [None] * len(keys))
    ann.build_ann()
    assert ann.ann is not None and len(ann.ann.copies) == 100

    def check() -> None:
        for q in base[1990:2002]:
            for limit in (5, 60):
                _agrees(ann.search(q, SCOPE, limit, now=0.0), exact, q, SCOPE, limit)

    first = keys[2000:2050].tolist()  # the first group's rows
    for ix in (ann, exact):
        for k in first[:49]:  # all but one of them forgotten
            ix.remove(k)
        # the last re-written onto the vector of key 8, a row of the built graph: it goes into the
        # graph beside it (rows the build saw once are not looked up by vector); a third row with
        # that vector finds the second, written since, and the two form a group
        ix.upsert(first[49], base[7], SCOPE, None)
        ix.upsert(9_001, base[7], SCOPE, None)
        ix.upsert(9_000, base[2001], SCOPE, None)  # a new copy of the second group's vector
    check()
    assert ann.ann is not None and 8 not in ann.ann.copies
    assert {first[49], 9_001, 9_000} <= set(ann.ann.copies.keys().tolist())
    assert len(ann.ann) + len(ann.ann.copies) == len(ann) == len(exact)
    for gone in (9_001, first[49]):  # a group down to one row, then none
        for ix in (ann, exact):
            ix.remove(gone)
        check()
    assert ann.ann is not None and len(ann.ann) + len(ann.ann.copies) == len(ann)


def test_copy_groups_are_published_with_the_graph_and_mapped_by_the_next_process(tmp_path: Path) -> None:
    pts, queries = _points(7, 4200, slice(4100, 4150))
    db = tmp_path / "m.db"
    sc = Scope("a", "big")
    first = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, queries), ann_threshold=1000, ann_build="off")
    first.remember_many([(f"v{i}", None) for i in range(3000)] + [(f"v{4100 + i % 50}", None) for i in range(1000)], sc)
    assert first.build_ann()["status"] == "built"
    first.close()
    exact = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, queries), ann_threshold=0, ann_build="off")
    again = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, queries), ann_threshold=1000, ann_build="off")
    for i in range(50):
        _same_up_to_ties(again.recall(f"q{i}", sc, 10), exact, f"q{i}", sc)
    ix = again._index
    assert ix is not None and ix.ann is not None and not ix.ann.mutable  # mapped, with its groups
    assert len(ix.ann) == 3050 - 50 and len(ix.ann.copies) == 1000
    # a package that keeps copies in the graph checks the graph against every row: it finds the
    # file the wrong size and builds its own, never a graph that lacks the copies
    header = json.loads(str(np.load(meta_path(db), allow_pickle=False)["header"]))
    assert AnnIndex.open(ann_path(db), DIM, int(header["ann"][3])) is None
    again.close()
    exact.close()


@pytest.mark.parametrize("damage", ["copy-ptr-overruns", "copy-keys-repeat", "copy-vecs-wrong-width", "copy-groups-missing",
                                    "copy-key-of-a-graph-row", "copy-vecs-of-another-content", "copy-tags-missing"])
def test_damaged_copy_groups_mean_no_graph_never_a_wrong_answer(tmp_path: Path, damage: str) -> None:
    pts, _ = _points(8, 2100, slice(0))
    db = tmp_path / "m.db"
    sc = Scope("a", "big")
    first = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, pts[2000:]), ann_threshold=1000, ann_build="off")
    first.remember_many([(f"v{i}", None) for i in range(2000)] + [(f"v{2000 + i % 20}", None) for i in range(400)], sc)
    first.build_ann()
    first.close()
    arrays = dict(np.load(meta_path(db), allow_pickle=False))
    if damage == "copy-ptr-overruns":
        _rewrite_meta(db, copy_ptr=arrays["copy_ptr"] + 1)
    elif damage == "copy-keys-repeat":
        _rewrite_meta(db, copy_keys=np.full_like(arrays["copy_keys"], arrays["copy_keys"][0]))
    elif damage == "copy-vecs-wrong-width":
        _rewrite_meta(db, copy_vecs=np.zeros((len(arrays["copy_vecs"]), DIM + 1), np.float32))
    elif damage == "copy-key-of-a-graph-row":  # right counts, but a member the graph holds (and a row it lacks)
        held = set(arrays["copy_keys"].tolist())
        swapped = arrays["copy_keys"].copy()
        swapped[0] = next(k for k in arrays["keys"].tolist() if k not in held)
        _rewrite_meta(db, copy_keys=swapped)
    elif damage == "copy-vecs-of-another-content":
        _rewrite_meta(db, copy_vecs=np.ascontiguousarray(arrays["copy_vecs"][::-1]))
    elif damage == "copy-tags-missing":
        del arrays["copy_tags"]
        with open(meta_path(db), "wb") as fh:
            np.savez(fh, **arrays)
    else:  # the groups gone, the header still naming the graph: its vectors and the rows disagree in number
        del arrays["copy_vecs"], arrays["copy_ptr"], arrays["copy_keys"]
        with open(meta_path(db), "wb") as fh:
            np.savez(fh, **arrays)
    exact = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, pts[2000:]), ann_threshold=0, ann_build="off")
    again = SQLiteMemoryStore(db, embedder=TableEmbedder(pts, pts[2000:]), ann_threshold=1000, ann_build="off")
    for i in range(20):
        _same_up_to_ties(again.recall(f"q{i}", sc, 25), exact, f"q{i}", sc)
    assert again._index is not None and again._index.ann is None  # exact until a build (the tier is off here)
    again.close()
    exact.close()


def test_rows_sharing_a_hash_but_not_their_bytes_are_never_grouped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies are found by hash and confirmed byte for byte, in every path (the build, a batch, a row
    written after a graph row): with every vector hashing alike, nothing different is grouped.
    (Before, a batch's rows and a recent graph key were grouped by hash alone, and a linear hash
    collided on real vectors of the hashing embedder: a recall then left out the best row.)"""
    from atomic_agents.memory import _ann_copies

    monkeypatch.setattr(_ann_copies, "row_hashes", lambda v: np.zeros(len(v), np.uint64))
    base, rows = _dup_data([5, 5], 400, seed=9)
    keys = np.arange(1, len(rows) + 1, dtype=np.int64)
    ann, exact = VectorIndex(DIM), VectorIndex(DIM)
    for ix in (ann, exact):
        ix.upsert_many(keys[:300], base[rows][:300], [SCOPE] * 300, [None] * 300)
    ann.build_ann()
    for ix in (ann, exact):
        ix.upsert_many(keys[300:350], base[rows][300:350], [SCOPE] * 50, [None] * 50)  # a batch
        for i in range(350, len(keys)):  # then row by row
            ix.upsert(int(keys[i]), base[rows][i], SCOPE, None)
    assert ann.ann is not None
    for g in range(len(ann.ann.copies._members)):  # every group holds equal rows only
        members = ann.ann.copies._members[g]
        assert all(np.array_equal(exact._vector_of(k), ann.ann.copies._vecs[g]) for k in members)
    for q in base[:400:7]:
        for limit in (1, 10):
            _agrees(ann.search(q, SCOPE, limit, now=0.0), exact, q, SCOPE, limit)


def test_copies_outside_the_graph_do_not_stop_its_search_short() -> None:
    """A small scope of 10 rows at cosine 0.6 and 3,000 copies at 0.3; 500 rows of another scope
    near the query. The copies fill any limit, but say nothing of the graph's rows: the graph is
    searched until its own candidates do (before: the answers were the copies, 0.3 x 10)."""
    rng = np.random.default_rng(0)

    def unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)

    q = unit(rng.standard_normal(DIM))

    def at(cos: float, n: int) -> np.ndarray:  # n unit vectors at cosine ``cos`` to q
        r = rng.standard_normal((n, DIM))
        r = unit(r - np.outer(r @ q, q))
        return unit(cos * q + np.sqrt(1 - cos**2) * r)

    small, big = ("a", "small", "o", "w"), ("a", "big", "o", "w")
    vecs = np.concatenate([at(0.9, 500), unit(rng.standard_normal((2500, DIM))), at(0.6, 10), np.repeat(at(0.3, 1), 3000, axis=0)])
    scopes = [big] * 3000 + [small] * 3010
    keys = np.arange(1, len(vecs) + 1, dtype=np.int64)
    ann, exact = VectorIndex(DIM), VectorIndex(DIM)
    for ix in (ann, exact):
        ix.upsert_many(keys, vecs, scopes, [None] * len(keys))
    ann.build_ann()
    for limit in (3, 10, 25):
        _agrees(ann.search(q, small, limit, now=0.0), exact, q, small, limit)
    assert [round(s, 3) for _, s in ann.search(q, small, 10, now=0.0)] == [0.6] * 10


def test_a_row_rewritten_then_removed_while_a_job_runs_leaves_the_graph(tmp_path: Path) -> None:
    """A tail row the graph holds, re-written then removed during a job that is then aborted: the
    graph still held its key. It is taken out before a snapshot, so the graph plus its groups hold
    exactly the live rows and the next process maps it (before: it found the graph a row too big
    and rebuilt it)."""
    from atomic_agents.memory._matrix_cache import load_snapshot, save_snapshot

    rng = np.random.default_rng(0)
    v = rng.standard_normal((300, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    ix = VectorIndex(DIM)
    ix.upsert_many(np.arange(1, 201), v[:200], [SCOPE] * 200, [None] * 200)
    ix.build_ann()
    ix.upsert(500, v[250], SCOPE, None)  # into the graph, a tail row
    ix.begin_job()
    ix.upsert(500, v[251], SCOPE, None)  # re-written while the job runs: the graph keeps 500's old vector
    ix.remove(500)
    ix.abort_job()
    ix.settle_ann()
    assert ix.ann is not None and len(ix.ann) + len(ix.ann.copies) == len(ix) == 200
    db = tmp_path / "m.db"
    db.write_bytes(b"")
    assert save_snapshot(db, ix, model="m", epoch="1", rev=1)
    loaded = load_snapshot(db, model="m", epoch="1")
    assert loaded is not None and loaded[0].ann is not None


def test_a_key_given_twice_in_one_batch_is_held_once() -> None:
    base, _ = _dup_data([], 100, seed=4)
    keys = np.arange(1, 101, dtype=np.int64)
    ann, exact = VectorIndex(DIM), VectorIndex(DIM)
    for ix in (ann, exact):
        ix.upsert_many(keys, base[:100], [SCOPE] * 100, [None] * 100)
    ann.build_ann()
    assert ann.ann is not None
    ann.ann.add(np.array([500, 500]), np.stack([base[5], base[5]]), np.array([1, 1]))
    assert 500 not in ann.ann.copies and len(ann.ann) == 101  # (one row for the key: no group of itself)
