"""Scale rows (issue 8 section 3): the ANN tier, cold start, BLAS threads, RSS per tier.

    .venv/bin/python bench/bench_memory.py --section scale --sizes 10000,100000
    .venv/bin/python bench/bench_memory.py --section scale --sizes 1000000 --workdir /tmp/scale   # keeps the DBs
    .venv/bin/python bench/bench_memory.py --section scale --sizes 100000 --old-build   # + the previous graph settings
    .venv/bin/python bench/bench_memory.py --section scale --sizes 1000000 --sweep 48::16,48,48::48   # graph settings: EF_ADD[:HEAD[:CONNECTIVITY]]
    .venv/bin/python bench/bench_memory.py --section scale --sizes 1000000 --cold-only --workdir /tmp/scale  # new-process rows only

The corpus is **synthetic**: normalised vectors built from real model embeddings of
2,000 ATP-style texts (each row = one text's vector + 0.35 x another's + noise), so
it has the low intrinsic dimension of real embeddings; rows go in through the store's
own write path (``remember_many``) with a *fake* embedder (``PrecomputedEmbedder``)
that returns those vectors for the corpus texts. Every **query** goes through the
real model. Per size, interleaved where two things are compared:

* recall p50/p95 including the query embedding (ANN tier; exact tier) vs the query
  embedding alone; target p95 <= 1.3x at 100k and 1M;
* recall@10 of the ANN tier against exact search on the same file; target >= 0.98;
* the graph build: the first recall of a store whose graph is missing (answered by an
  exact scan; the build is never on the query path), the build itself (``build_ann``, as
  ``memory ann build`` runs it: every core, this release's settings) and its recall@10
  against exact through the store's own re-scoring, and the vector index's search time; with
  ``--old-build`` also the previous release's graph (connectivity 16, searched at width 800) on
  the same vectors, interleaved;
* first recall of a new process (a subprocess: open the store, first recall, model
  load included) from the ``.npy`` snapshot + mapped graph, vs the model load alone;
  target <= 1 s at 1M;
* the same right after *another* process hard-deleted that query's top 3 rows (a
  subprocess that exits without closing, as if killed after its commit: it refreshes no
  sidecar): now (the snapshot and graph stay valid, the tombstones are pulled) vs before
  (a hard delete bumped the epoch, so the new process loaded every vector from the rows;
  forced here by refusing the snapshot in that subprocess); interleaved, and each answer
  checked to hold none of the erased rows;
* a new process on a store whose files were evicted from the page cache (as after a reboot):
  its recalls after the first, p50/p95 against the embedding alone, and its first recall, with
  the mapped files read ahead after the first search (``_prefetch``) vs without; interleaved;
* opening the snapshot: ``.npy`` memory map vs the old ``.npz`` format (same arrays);
* one exact search with BLAS on one thread vs the default thread count;
* RSS per 100k vectors, private (anonymous) and file-backed (page cache shared with
  other processes and reclaimable; the kernel maps 64 KB around each touched page),
  each in a fresh process over one with nothing loaded: the exact matrix loaded from
  rows, the mapped snapshot, the mapped graph after 200 queries, the graph read into memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_memory import make_texts, pct, queries  # noqa: E402

from atomic_agents.memory import Scope, SQLiteMemoryStore, embedder_from_name  # noqa: E402

SCOPE = Scope("bench", "user", org_id="acme", workspace_id="acme/bench")


class PrecomputedEmbedder:
    """A *fake* embedder for the bench corpus: ``"syn <i> ..."`` -> ``table[i]``; anything else -> the real model."""

    def __init__(self, inner: object, table: np.ndarray) -> None:
        self.inner, self.table = inner, table
        self.model_id = inner.model_id  # type: ignore[attr-defined]
        self.dimension = inner.dimension  # type: ignore[attr-defined]
        self.relevance_floor = inner.relevance_floor  # type: ignore[attr-defined]

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if texts and all(t.startswith("syn ") for t in texts):
            return self.table[[int(t.split(" ", 2)[1]) for t in texts]]
        return self.inner.embed_batch(list(texts))  # type: ignore[attr-defined]


def synthetic(n: int, seeds: np.ndarray, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, seeds.shape[1]), np.float32)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        a, b = rng.integers(0, len(seeds), m), rng.integers(0, len(seeds), m)
        v = seeds[a] + 0.35 * seeds[b] + 0.03 * rng.standard_normal((m, seeds.shape[1])).astype(np.float32)
        out[s : s + m] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def build(db: Path, n: int, model: object, seeds: np.ndarray) -> float:
    """Fill ``db`` with ``n`` synthetic rows (skipped if it already holds them); seconds taken."""
    if db.exists():
        with SQLiteMemoryStore(db, embedder=model, ann_threshold=0) as s:  # type: ignore[arg-type]
            if s.health().live == n:
                return 0.0
        for p in db.parent.glob(db.name + "*"):
            p.unlink()
    table = synthetic(n, seeds)
    emb = PrecomputedEmbedder(model, table)
    t0 = time.perf_counter()
    with SQLiteMemoryStore(db, embedder=emb, durable=False, ann_threshold=0) as s:  # type: ignore[arg-type]
        for i in range(0, n, 10_000):
            s.remember_many([(f"syn {j} record", None) for j in range(i, min(n, i + 10_000))], SCOPE)
    return time.perf_counter() - t0


CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from atomic_agents.memory import Scope, SQLiteMemoryStore, embedder_from_name
mode, db, q = sys.argv[1], sys.argv[2], sys.argv[3]
t1 = time.perf_counter()
if mode == "model":
    m = embedder_from_name("minilm"); m.embed_batch([q])
else:
    s = SQLiteMemoryStore(db, embedder=embedder_from_name("minilm"))
    s.recall(q, Scope("bench", "user", org_id="acme", workspace_id="acme/bench"), 5)
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "work_ms": (time.perf_counter() - t1) * 1e3}))
"""

#: A new process on a store whose files are not in the page cache (evicted with
#: ``posix_fadvise(DONTNEED)`` after an fsync): first recall, then ``reps`` recalls interleaved with the
#: query embedding alone; ``off`` is the same without the read-ahead of the mapped files (``_prefetch``).
COLD_CHILD = r"""
import json, os, sys, time
mode, db, reps, qs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
for suffix in ("", "-wal", "-vectors.npy", "-vectors.meta.npz", "-ann.usearch"):
    try:
        fd = os.open(db + suffix, os.O_RDONLY)
    except FileNotFoundError:
        continue
    os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
t0 = time.perf_counter()
from atomic_agents.memory import Scope, SQLiteMemoryStore, embedder_from_name, _prefetch
if mode == "off":
    _prefetch.prefetch = lambda paths: None
scope = Scope("bench", "user", org_id="acme", workspace_id="acme/bench")
m = embedder_from_name("minilm")
s = SQLiteMemoryStore(db, embedder=m, ann_build="off")
s.recall(qs[0], scope, 10)
first = (time.perf_counter() - t0) * 1e3
rec, emb = [], []
for i in range(reps):
    t = time.perf_counter(); m.embed_batch([qs[1 + (2 * i) % (len(qs) - 1)] + " e"]); emb.append((time.perf_counter() - t) * 1e3)
    t = time.perf_counter(); s.recall(qs[1 + (2 * i + 1) % (len(qs) - 1)], scope, 10); rec.append((time.perf_counter() - t) * 1e3)
print(json.dumps({"first": first, "recall": rec, "embed": emb}))
"""

RSS_CHILD = r"""
import json, sys, numpy as np
import onnxruntime, usearch.index
from pathlib import Path
from atomic_agents.memory._ann import AnnIndex
from atomic_agents.memory._matrix_cache import ann_path, load_snapshot
mode, db, model, epoch = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
def rss():
    got = {}
    for line in open("/proc/self/status"):
        if line.startswith(("RssAnon:", "RssFile:")):
            got[line.split(":")[0]] = int(line.split()[1]) / 1024
    return got
rng = np.random.default_rng(1)
qs = rng.standard_normal((200, 384)).astype(np.float32); qs /= np.linalg.norm(qs, axis=1, keepdims=True)
r0 = rss()
if mode == "rows":  # the exact matrix as a store loads it from SQLite (no snapshot): private memory
    import atomic_agents.memory._sqlite as backend
    import atomic_agents.memory._sqlite_vectors as sync  # where the full load looks for the snapshot
    from atomic_agents.memory import HashingEmbedder
    sync.load_snapshot = lambda *a, **k: None
    sync.save_snapshot = backend.save_snapshot = lambda *a, **k: None
    class Same(HashingEmbedder):
        def __init__(self):
            super().__init__(384); self.model_id = model
    s = backend.SQLiteMemoryStore(db, embedder=Same(), ann_threshold=0)
    s._sync()
    ix = s._index
    for q in qs[:20]:
        ix.search(q, ("bench", "user", "acme", "acme/bench"), 10, now=0.0)
elif mode != "base":
    ix, _ = load_snapshot(db, model=model, epoch=epoch, with_ann=mode != "exact")
    if mode == "ann-memory":  # the graph read into memory (what a process that built or folded it holds)
        raw = usearch.index.Index.restore(str(ann_path(db)), view=False)
        ix.attach_ann(AnnIndex(ix.dimension, raw))
    assert (ix.ann is None) == (mode == "exact")
    for q in qs[: 20 if mode == "exact" else 200]:
        ix.search(q, ("bench", "user", "acme", "acme/bench"), 10, now=0.0)
print(json.dumps({"rss": rss(), "before": r0}))
"""


TOMB_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from atomic_agents.memory import Scope, SQLiteMemoryStore, embedder_from_name
import atomic_agents.memory._sqlite_vectors as sync
mode, db, q = sys.argv[1], sys.argv[2], sys.argv[3]
t1 = time.perf_counter()
if mode == "rows":  # before: the hard delete had bumped the epoch, the snapshot was stale: a full load from rows
    sync.load_snapshot = lambda *a, **k: None
    sync.save_snapshot = lambda *a, **k: False  # (nor the snapshot write after it)
s = SQLiteMemoryStore(db, embedder=embedder_from_name("minilm"), ann_build="off")
hits = s.recall(q, Scope("bench", "user", org_id="acme", workspace_id="acme/bench"), 5)
work = time.perf_counter() - t1
print(json.dumps({"work_ms": work * 1e3, "loads": s._loads, "ids": [h.id for h in hits], "tier": s.ann_state}))
"""

DELETE_CHILD = r"""
import os, sys
from atomic_agents.memory import HashingEmbedder, SQLiteMemoryStore
class Same(HashingEmbedder):  # (a hard prune embeds nothing; the store only needs the model's name)
    def __init__(self):
        super().__init__(int(sys.argv[3])); self.model_id = sys.argv[2]
s = SQLiteMemoryStore(sys.argv[1], embedder=Same(), ann_build="off")
print(s.prune(keywords=sys.argv[4], dry_run=False, hard=True).removed, flush=True)
os._exit(0)  # as if killed right after the commit: no close, so no sidecar refresh
"""


class _Restore:
    """A *fake* embedder that gives the erased bench rows their own vectors back (so the next run reuses the file)."""

    def __init__(self, inner: object, vecs: dict[str, np.ndarray]) -> None:
        self.vecs, self.model_id, self.dimension = vecs, inner.model_id, inner.dimension  # type: ignore[attr-defined]

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.vecs[t] for t in texts])


def after_hard_delete(db: Path, model: object, qs: Sequence[str], reps: int) -> list[tuple[str, str, str, str]]:
    """A new process's first recall after another process's hard delete: now vs the epoch-bump path."""
    import sqlite3

    probe = SQLiteMemoryStore(db, embedder=model, ann_build="off")  # type: ignore[arg-type]
    erased: dict[str, np.ndarray] = {}
    new, old, new_loads, old_loads, tiers, leaked = [], [], [], [], set(), 0
    loads0 = os.getloadavg()[0]
    try:
        for i in range(reps):
            q = qs[i] + " after a hard delete"
            top = [h.id for h in probe.recall(q, SCOPE, 3)]
            con = sqlite3.connect(db)
            marks = ",".join("?" * len(top))
            got = con.execute(f"SELECT id, content, embedding FROM memories WHERE id IN ({marks})", top).fetchall()
            con.close()
            erased.update((c, np.frombuffer(v, np.float32).copy()) for _, c, v in got)
            words = " ".join(c.split()[1] for _, c, _ in got)  # "syn <j> record": the row's own token
            out = subprocess.run(
                [sys.executable, "-c", DELETE_CHILD, str(db), model.model_id, str(model.dimension), words],  # type: ignore[attr-defined]
                capture_output=True, text=True, check=True,
                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")])},
            )  # fmt: skip
            assert int(out.stdout.strip()) == len(top), out
            for mode, times, loads in (("snapshot", new, new_loads), ("rows", old, old_loads)):  # interleaved
                res, _ = child(TOMB_CHILD, mode, str(db), q)
                times.append(res["work_ms"])
                loads.append(res["loads"])
                leaked += len(set(res["ids"]) & set(top))
                if mode == "snapshot":
                    tiers.add(res["tier"])
    finally:
        probe.close()
        if erased:  # put the erased rows back (same vectors, new ids): the next run reuses the file
            with SQLiteMemoryStore(db, embedder=_Restore(model, erased), ann_threshold=0) as s:  # type: ignore[arg-type]
                s.remember_many([(c, None) for c in erased], SCOPE)
    assert leaked == 0, f"{leaked} erased rows came back"

    def via(loads: list[dict[str, int]]) -> str:
        return f"{sum(x['snapshot'] for x in loads)}/{sum(x['rows'] for x in loads)}"

    return [
        (f"first recall of a new process after another process's hard delete (ms; load {loads0:.1f})", f"{pct(new, 50):.0f}",
         f"{pct(old, 50):.0f} before (the delete bumped the epoch: every vector loaded from the rows)", "<= 1000 at 1M"),
        (f"  same: full loads from snapshot / from rows over {reps} runs; tier; erased rows returned",
         f"{via(new_loads)}; {'/'.join(sorted(tiers))}; {leaked}", f"{via(old_loads)}", ""),
    ]  # fmt: skip


def child(code: str, *args: str) -> tuple[dict, float]:  # type: ignore[type-arg]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1]), (time.perf_counter() - t0) * 1e3


def build_rows(
    ann: SQLiteMemoryStore, exact: SQLiteMemoryStore, model: object, qs: Sequence[str], old_build: bool = False
) -> list[tuple[str, str, str, str]]:
    """The graph build now (``build_ann``) with its recall@10 and search time; with ``old_build`` also
    the previous release's settings on the same vectors (~4 min more at 1M on 2 cores), interleaved."""
    from atomic_agents.memory import _ann

    if ann.ann_threshold is None or len(exact._sync()) < ann.ann_threshold:
        return []
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    out = ann.build_ann()
    new_s = time.perf_counter() - t0
    assert out["status"] == "built", out
    ix = exact._sync()
    old, old_s, load_old = None, 0.0, 0.0
    if old_build:
        old, old_s, load_old = _old_graph(ix)
    qv = model.embed_batch(list(qs[:200]))  # type: ignore[attr-defined]
    key, now = SCOPE.key(), time.time()
    truth = [{k for k, _ in ix.search(v, key, 10, now=now)} for v in qv]

    def recall_at_10(graph: object) -> float:
        ix.attach_ann(graph)  # type: ignore[arg-type]
        try:
            got = [{k for k, _ in ix.search(v, key, 10, now=now)} for v in qv]
        finally:
            ix.ann = None
        return sum(len(a & b) for a, b in zip(got, truth, strict=True)) / max(1, sum(map(len, truth)))

    assert ann._index is not None and ann._index.ann is not None
    new_graph = ann._index.ann

    def search_ms(graph: object, v: np.ndarray) -> float:
        ix.attach_ann(graph)  # type: ignore[arg-type]
        try:
            t0 = time.perf_counter()
            ix.search(v, key, 10, now=now)
            return (time.perf_counter() - t0) * 1e3
        finally:
            ix.ann = None

    took, took_old = [], []
    for i, v in enumerate(qv):  # interleaved, in alternating order (the second of two searches ran faster)
        if old is not None and i % 2 == 0:
            took_old.append(search_ms(old, v))
        took.append(search_ms(new_graph, v))
        if old is not None and i % 2 == 1:
            took_old.append(search_ms(old, v))
    base_build, base_recall, base_ms = "- (--old-build)", "-", "-"
    if old is not None:  # (the settings read off the graph, as searched)
        previous = f"previous settings (connectivity {old._raw.connectivity}, search width {old._raw.expansion_search})"  # type: ignore[attr-defined]
        base_build = f"{old_s:.1f} {previous}; load {load_old:.1f}"
        base_recall = f"{recall_at_10(old):.3f} {previous}"
        base_ms = f"{pct(took_old, 50):.2f} / {pct(took_old, 95):.2f} {previous}"
    rows = [
        (f"graph build (s; build_ann = `memory ann build`, {os.cpu_count()} threads, connectivity {_ann._CONNECTIVITY},"
         f" expansion_add {_ann._EXPANSION_ADD}, first {_ann._SERIAL_HEAD:,} rows on one thread; load {load:.1f})",
         f"{new_s:.1f}", base_build, ""),
        (f"graph recall@10 vs exact (store re-scoring), this build (search width {_ann._EXPANSION_SEARCH})",
         f"{recall_at_10(new_graph):.3f}", base_recall, ">= 0.98"),
        ("graph search p50 / p95 (ms; the vector index's search: graph, re-scoring, filters), this build",
         f"{pct(took, 50):.2f} / {pct(took, 95):.2f}", base_ms, ""),
    ]  # fmt: skip
    return rows


@contextmanager
def graph_settings(**values: int) -> Iterator[None]:
    """``_ann``'s build/search settings (``EXPANSION_ADD=128``, ...) set for the block, then restored."""
    from atomic_agents.memory import _ann

    saved = {k: getattr(_ann, f"_{k}") for k in values}
    for k, v in values.items():
        setattr(_ann, f"_{k}", v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(_ann, f"_{k}", v)


def _old_graph(ix: object) -> tuple[object, float, float]:
    """The previous release's graph over the same live rows: ``(graph, build seconds, load average)``."""
    from atomic_agents.memory import _ann

    live = ix._row_arrays()  # type: ignore[attr-defined]
    # the previous release's graph, searched as this release searches a file of it (the wider beam)
    with graph_settings(CONNECTIVITY=16, EXPANSION_SEARCH=_ann._EXPANSION_SEARCH_SPARSE):
        load_old = os.getloadavg()[0]
        t0 = time.perf_counter()
        old = _ann.AnnIndex.build(live["keys"], live["vecs"], live["scope"])
        return old, time.perf_counter() - t0, load_old


def page_cache_cold(db: Path, qs: Sequence[str], reps: int, rounds: int) -> list[tuple[str, str, str, str]]:
    """A new process on a store evicted from the page cache: with the read-ahead of its mapped files, and without."""
    if not hasattr(os, "posix_fadvise"):
        return []
    got: dict[str, list[dict]] = {"on": [], "off": []}  # type: ignore[type-arg]
    for _ in range(rounds):
        for mode in ("on", "off"):
            got[mode].append(child(COLD_CHILD, mode, str(db), str(reps), *qs[: 2 * reps + 1])[0])  # (no query twice)

    def merged(mode: str, key: str) -> list[float]:
        return [x for run in got[mode] for x in run[key]]

    def cell(mode: str) -> str:
        r, e = merged(mode, "recall"), merged(mode, "embed")
        return f"{pct(r, 50):.1f} / {pct(r, 95):.1f} ms, {pct(r, 95) / pct(e, 95):.2f}x (embedding {pct(e, 50):.1f} / {pct(e, 95):.1f})"

    first = {m: pct([run["first"] for run in got[m]], 50) for m in got}
    return [
        (f"page cache cold: {reps} recalls of a new process after its first, p50 / p95, p95 over the embedding alone",
         cell("on"), cell("off") + " without reading the mapped files ahead", "<= 1.3x"),
        ("page cache cold: first recall of that process (ms, model load included)", f"{first['on']:.0f}",
         f"{first['off']:.0f} without", ""),
    ]  # fmt: skip


def cold_only(db: Path, n: int, model: object, qs: Sequence[str]) -> list[tuple[str, str, str, str]]:
    """``--cold-only``: the new-process rows alone, from the snapshot as it is (no graph build, no recall loops)."""
    from atomic_agents.memory._matrix_cache import ann_path, snapshot_path

    if not snapshot_path(db).exists():  # a full load from the rows publishes it (no graph job: ann_build off)
        with SQLiteMemoryStore(db, embedder=model, ann_build="off") as s:  # type: ignore[arg-type]
            s.recall(qs[0], SCOPE)
    tier = "snapshot + graph mapped" if ann_path(db).exists() else "snapshot mapped, no graph: exact scan"
    rows = [("cold-start rows only (--cold-only)", tier, "-", "")]
    fr, fm = [], []
    for i in range(3):
        got, _ = child(CHILD, "store", str(db), qs[i] + " fresh")
        fr.append(got["work_ms"])
        got, _ = child(CHILD, "model", str(db), qs[i] + " fresh")
        fm.append(got["work_ms"])
    rows.append(("first recall of a new process (ms, open + model + search)", f"{pct(fr, 50):.0f}",
                 f"{pct(fm, 50):.0f} model load + 1 embedding alone", "<= 1000 at 1M"))  # fmt: skip
    rows += page_cache_cold(db, qs, min(200, (len(qs) - 1) // 2), 2)
    return rows + after_hard_delete(db, model, qs, 3 if n >= 1_000_000 else 5)


def measure(
    n: int, workdir: Path, model: object, seeds: np.ndarray, reps: int, only_cold: bool = False, old_build: bool = False
) -> list[tuple[str, str, str, str]]:
    import atomic_agents.memory._vectors as vectors
    from atomic_agents.memory._matrix_cache import ann_path, load_snapshot, meta_path, snapshot_path

    db = workdir / f"scale-{n}.db"
    built = build(db, n, model, seeds)
    rows: list[tuple[str, str, str, str]] = []
    rows.append(("corpus (synthetic vectors via remember_many)", f"{n:,} rows", f"built in {built:.0f} s" if built else "reused", ""))
    if only_cold:
        return rows + cold_only(db, n, model, queries(reps * 3, seed=n % 997))
    qs = queries(reps * 3, seed=n % 997)
    ann_path(db).unlink(missing_ok=True)  # the graph is missing: measure what a store does then
    exact = SQLiteMemoryStore(db, embedder=model, ann_threshold=0)  # type: ignore[arg-type]
    exact.recall(qs[0], SCOPE)  # (writes the vector snapshot if there is none: the row load is not timed below)
    ann = SQLiteMemoryStore(db, embedder=model, ann_build="off")  # type: ignore[arg-type]
    t0 = time.perf_counter()
    ann.recall(qs[0], SCOPE)  # past the threshold, no graph: an exact scan; never a build
    first_ms = (time.perf_counter() - t0) * 1e3
    graph_rows = build_rows(ann, exact, model, qs[2 * reps :], old_build)
    tier = "ANN" if ann._index is not None and ann._index.ann is not None else "exact (below threshold)"
    rows.append((
        "first recall with the graph missing (ms; exact scan, the graph is not built on the query path)",
        f"{first_ms:.0f}", "-", "",
    ))  # fmt: skip
    rows += graph_rows

    emb, t_ann, t_exact = [], [], []
    for i, q in enumerate(qs[:reps]):  # interleaved
        for fn, out in (
            (lambda q=q: model.embed_batch([q + " e"]), emb),  # type: ignore[attr-defined]
            (lambda q=q: ann.recall(q + " a", SCOPE, 10), t_ann),
            (lambda q=q: exact.recall(q + " x", SCOPE, 10), t_exact),
        ):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
    e50, e95 = pct(emb, 50), pct(emb, 95)
    for name, xs in (("ANN tier", t_ann), ("exact tier", t_exact)):
        rows.append((
            f"recall p50 / p95 incl. query embedding (ms), {name}",
            f"{pct(xs, 50):.1f} / {pct(xs, 95):.1f}",
            f"{e50:.1f} / {e95:.1f} embedding alone",
            f"p95 ratio {pct(xs, 95) / e95:.2f}x (<= 1.3x at 100k, 1M)",
        ))  # fmt: skip

    hits = total = 0
    for q in qs[reps : 2 * reps]:
        a = {h.id for h in ann.recall(q, SCOPE, 10)}
        e = {h.id for h in exact.recall(q, SCOPE, 10)}
        hits, total = hits + len(a & e), total + len(e)
    rows.append(("recall@10, ANN tier vs exact", f"{hits / max(1, total):.3f}", "1.000 exact", ">= 0.98"))

    # single-query BLAS threads, index only (exact matrix)
    ix = exact._index
    assert ix is not None
    qv = model.embed_batch(qs[2 * reps : 2 * reps + 50])  # type: ignore[attr-defined]
    key = SCOPE.key()
    one, many = [], []
    real = vectors.one_blas_thread
    for v in qv:
        for out, ctx in ((one, real), (many, nullcontext)):
            vectors.one_blas_thread = ctx  # type: ignore[assignment]
            t0 = time.perf_counter()
            ix.search(v, key, 10, now=time.time())
            out.append((time.perf_counter() - t0) * 1e3)
    vectors.one_blas_thread = real
    rows.append((
        "exact search p50 / p95 (ms), one BLAS thread", f"{pct(one, 50):.2f} / {pct(one, 95):.2f}",
        f"{pct(many, 50):.2f} / {pct(many, 95):.2f} default threads", "",
    ))  # fmt: skip
    ann.close()
    exact.close()

    # snapshot open: .npy memory map vs the old .npz
    import sqlite3

    con = sqlite3.connect(db)
    meta = dict(con.execute("SELECT key, value FROM store_meta").fetchall())
    con.close()
    model_id, epoch = meta["embedder"], meta.get("epoch", "0")
    have = load_snapshot(db, model=model_id, epoch=epoch, with_ann=False)
    if have is not None:
        arrays = have[0].to_arrays()
        npz = workdir / f"scale-{n}.old.npz"
        np.savez(npz, header=np.array("{}"), keys=arrays["keys"], vecs=arrays["vecs"], scope=arrays["scope"],
                 expires=arrays["expires"], scopes=np.array(arrays["scopes"].tolist(), dtype=str))  # fmt: skip
        del arrays, have
        t_npy, t_npz = [], []
        for _ in range(5):
            t0 = time.perf_counter()
            load_snapshot(db, model=model_id, epoch=epoch, with_ann=False)
            t_npy.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            with np.load(npz) as data:
                arr = {k: data[k] for k in ("keys", "vecs", "scope", "expires", "scopes")}
            vectors.VectorIndex.from_arrays(arr["vecs"].shape[1], arr)
            t_npz.append((time.perf_counter() - t0) * 1e3)
            del arr
        npz.unlink()
        rows.append(("snapshot open p50 (ms), .npy memory map", f"{pct(t_npy, 50):.1f}", f"{pct(t_npz, 50):.1f} old .npz load", ""))
        size_mb = (snapshot_path(db).stat().st_size + meta_path(db).stat().st_size) / 1e6
        rows.append(("snapshot size (MB)", f"{size_mb:.0f}", "-", ""))

    # a new process: first recall (model load included) vs the model load alone
    fr, fm, fw = [], [], []
    for i in range(5):
        got, wall = child(CHILD, "store", str(db), qs[i] + " fresh")
        fr.append(got["work_ms"])
        fw.append(wall)
        got, _ = child(CHILD, "model", str(db), qs[i] + " fresh")
        fm.append(got["work_ms"])
    rows.append((
        "first recall of a new process (ms, open + model + search)", f"{pct(fr, 50):.0f}",
        f"{pct(fm, 50):.0f} model load + 1 embedding alone", "<= 1000 at 1M",
    ))  # fmt: skip
    rows.append(("  same, whole process wall incl. imports (ms)", f"{pct(fw, 50):.0f}", "-", ""))
    if tier == "ANN":
        rows += page_cache_cold(db, qs, reps, 2)
    rows += after_hard_delete(db, model, qs, 3 if n >= 1_000_000 else 5)

    if tier == "ANN":  # each tier in a fresh process, over the same process with nothing loaded
        rss = {m: child(RSS_CHILD, m, str(db), model_id, epoch)[0]["rss"] for m in ("base", "rows", "exact", "ann", "ann-memory")}
        per = 100_000 / n
        raw = 384 * 4 * 1e5 / 2**20

        def cell(m: str) -> str:
            anon, file = (rss[m][k] - rss["base"][k] for k in ("RssAnon", "RssFile"))
            return f"{anon * per:.0f} private + {file * per:.0f} file-backed"

        rows.append(("RSS per 100k vectors (MiB), exact tier loaded from SQLite rows", cell("rows"), f"{raw:.0f} raw float32", ""))
        rows.append(("RSS per 100k vectors (MiB), exact tier (snapshot mapped, 20 full scans)", cell("exact"), f"{raw:.0f} raw float32", ""))
        rows.append(("RSS per 100k vectors (MiB), ANN tier (snapshot + graph mapped, 200 queries)", cell("ann"), "-", ""))
        rows.append(("RSS per 100k vectors (MiB), ANN tier, graph read into memory", cell("ann-memory"), "-", ""))
        rows.append(("graph file size per 100k vectors (MB)", f"{ann_path(db).stat().st_size / 1e6 * per:.0f}", "-", ""))
    return rows


def sweep(n: int, model: object, seeds: np.ndarray, settings: str) -> None:
    """Graph alone (no store): build time, recall@10 and search time per setting and search width.

    ``settings``: ``EF_ADD[:SERIAL_HEAD[:CONNECTIVITY]],...``; recall as the store computes it (40
    candidates from the graph re-scored exactly against the float32 vectors), over 200 real-model
    queries; search time is the graph's alone (p50, one thread).
    """
    from atomic_agents.memory import _ann

    vecs = synthetic(n, seeds)
    qv = np.asarray(model.embed_batch(queries(200, seed=n % 997)), np.float32)  # type: ignore[attr-defined]
    truth = np.argsort(-(vecs @ qv.T), axis=0)[:10].T
    keys = np.arange(n, dtype=np.int64)
    widths = (400, 500, 600, 800)
    print(f"\n## graph sweep: {n:,} vectors (synthetic, as above)\n")
    print("| expansion_add | serial head | connectivity | build (s) | load | recall@10 (search p50, ms) at width "
          + " / ".join(map(str, widths)) + " |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for item in settings.split(","):
        ef, head, m = (item.split(":") + ["", ""])[:3]
        with graph_settings(
            EXPANSION_ADD=int(ef), SERIAL_HEAD=int(head or _ann._SERIAL_HEAD), CONNECTIVITY=int(m or _ann._CONNECTIVITY)
        ):
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            graph = _ann.AnnIndex.build(keys, vecs)
            took = time.perf_counter() - t0
            cells = []
            for width in widths:
                graph._raw.expansion_search = width
                hits, ms = 0, []
                for q, t in zip(qv, truth, strict=True):
                    t0 = time.perf_counter()
                    cand = graph.search(q, 40)
                    ms.append((time.perf_counter() - t0) * 1e3)
                    top = cand[np.argsort(-(vecs[cand] @ q))[:10]]
                    hits += len(set(top.tolist()) & set(t.tolist()))
                cells.append(f"{hits / truth.size:.3f} ({pct(ms, 50):.2f})")
            print(f"| {ef} | {_ann._SERIAL_HEAD:,} | {_ann._CONNECTIVITY} | {took:.0f} | {load:.1f} | {' / '.join(cells)} |", flush=True)
            del graph


def run(argv: Sequence[str]) -> None:
    ap = argparse.ArgumentParser(prog="bench_memory.py --section scale")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--workdir", default=None, help="keep the databases here (reused by the next run)")
    ap.add_argument("--sweep", default=None, metavar="EF[:HEAD[:M]],...",
                    help="instead: the graph alone, build time, recall and search time per setting (e.g. 48::16,48,64)")
    ap.add_argument("--cold-only", action="store_true",
                    help="only the new-process rows (first recall; after another process's hard delete), from the snapshot as it is")
    ap.add_argument("--old-build", action="store_true",
                    help="also build the previous release's graph on the same vectors (~20 min more at 1M) and compare")
    args = ap.parse_args(list(argv))
    model = embedder_from_name("minilm")
    seeds = model.embed_batch([t for t, _ in make_texts(2000, seed=3)])  # type: ignore[attr-defined]
    seeds = np.asarray(seeds, np.float32)
    if args.sweep:
        for n in [int(x) for x in args.sizes.split(",")]:
            sweep(n, model, seeds, args.sweep)
        return
    tmp = None if args.workdir else tempfile.TemporaryDirectory()
    workdir = Path(args.workdir or tmp.name)  # type: ignore[union-attr]
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        for n in [int(s) for s in args.sizes.split(",")]:
            t0, load0 = time.perf_counter(), os.getloadavg()[0]
            rows = measure(n, workdir, model, seeds, args.reps, args.cold_only, args.old_build)
            print(f"\n## scale: {n:,} memories ({time.perf_counter() - t0:.0f} s; load {load0:.1f} -> {os.getloadavg()[0]:.1f} "
                  f"on {os.cpu_count()} cores; corpus vectors synthetic, queries through the real model)\n")  # fmt: skip
            print("| metric | atomic-agents | baseline (same run) | target |")
            print("|---|---|---|---|")
            for r in rows:
                print("| " + " | ".join(r) + " |", flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    run(sys.argv[1:])
