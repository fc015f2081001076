"""Benchmark the memory store against raw baselines in the same run.

    .venv/bin/python bench/bench_memory.py              # 10,000 memories (~1 min)
    .venv/bin/python bench/bench_memory.py --full       # 10,000 and 100,000, every text through the model (slow)
    .venv/bin/python bench/bench_memory.py --sizes 100000 --reuse-vectors   # 100k store timings in minutes
    .venv/bin/python bench/bench_memory.py --sizes 2000 --embedder hashing   # quick smoke run
    .venv/bin/python bench/bench_memory.py --section scale --sizes 10000,100000,1000000   # ANN tier, cold start (_mem_scale.py)
    .venv/bin/python bench/bench_memory.py --section cli    # CLI process times vs `import typer` (bench/_mem_cli.py)
    .venv/bin/python bench/bench_memory.py --section copies   # copies of one content in the ANN tier (bench/_mem_copies.py)

For each size: raw embedder throughput vs batched ingest; single ``remember`` p50
(durable fsync and not); ``recall`` p50/p95 with the query embedding included vs
raw numpy cosine over the same matrix; keyword ``search`` vs a raw FTS5 query;
filtered listing (one goal's records) vs an unindexed ``json_extract`` scan.
Texts are synthetic ATP-style records, ~20 words each, seeded.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from atomic_agents.memory import Scope, SQLiteMemoryStore, embedder_from_name

STAGES = ["goal_receipt", "routing_and_assignment", "context_gathering", "action", "verification", "recording_and_archival"]
ROLES = ["dispatcher", "researcher", "builder", "runtime", "verifier", "archivist"]
VERBS = ["deployed", "rolled back", "migrated", "profiled", "refactored", "verified", "reviewed", "patched", "benchmarked", "documented"]
THINGS = ["billing service", "search index", "checkout API", "user table", "webhook sender", "PDF renderer", "auth gateway",
          "nightly ETL", "Kafka consumer", "mobile release", "CSV export", "rate limiter", "cache layer", "image resizer"]  # fmt: skip
OUTCOMES = ["after the migration timed out", "with zero downtime", "because latency doubled", "and tests went green",
            "but two flaky tests remain", "behind a feature flag", "for the enterprise plan", "after the incident review",
            "to cut memory use by half", "once finance approved the budget"]  # fmt: skip
EXTRA = ["Rollback: revert the release tag.", "Next: hand off to the verifier.", "Risk: load not tested above 2k rps.",
         "Owner on call this week.", "See the runbook for details.", "Customer impact was limited to EU accounts."]  # fmt: skip


class ReusingEmbedder:
    """Wraps the real model; texts with the same verb/thing/outcome reuse one vector.

    Only for ``--reuse-vectors``: lets the 100k run measure the *store* (SQLite, FTS,
    matrix) in minutes instead of embedding 100k texts (~1 h on a busy 2-core box).
    Queries still go through the real model (their key is never cached).
    """

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.model_id = inner.model_id  # type: ignore[attr-defined]
        self.dimension = inner.dimension  # type: ignore[attr-defined]
        self.relevance_floor = inner.relevance_floor  # type: ignore[attr-defined]
        self.cache: dict[str, np.ndarray] = {}

    @staticmethod
    def key(text: str) -> str | None:
        if not text.startswith("Goal: "):
            return None
        body = text.split(". ", 1)[1] if ". " in text else text
        return body.split(". ")[0]

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        todo = [t for t, k in zip(texts, keys) if k is None or k not in self.cache]
        fresh = dict(zip(todo, self.inner.embed_batch(todo))) if todo else {}  # type: ignore[attr-defined]
        for t, k in zip(texts, keys):
            if k is not None and k not in self.cache and t in fresh:
                self.cache[k] = fresh[t]
        return np.stack([fresh[t] if t in fresh else self.cache[k] for t, k in zip(texts, keys)])  # type: ignore[index]


def make_texts(n: int, seed: int = 7) -> list[tuple[str, dict]]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        goal = f"g-{i // 10:05d}"
        stage = rnd.choice(STAGES)
        text = (
            f"Goal: {goal} | Record ID: r-{i} | Stage: {stage} | Owner: {rnd.choice(ROLES)}. "
            f"{rnd.choice(VERBS).capitalize()} the {rnd.choice(THINGS)} {rnd.choice(OUTCOMES)}. {rnd.choice(EXTRA)} #{i}"
        )
        out.append((text, {"goal_id": goal, "stage": stage, "record_type": "action_record"}))
    return out


def queries(n: int, seed: int = 11) -> list[str]:
    rnd = random.Random(seed)
    return [f"why was the {rnd.choice(THINGS)} {rnd.choice(VERBS)} {rnd.choice(OUTCOMES)}?" for _ in range(n)]


def timed(fn: Callable[[], object], reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(xs, p))


def run(size: int, embedder_name: str, reps: int, workdir: Path, reuse: bool = False) -> list[tuple[str, str, str, str]]:
    model = embedder_from_name(embedder_name)
    emb = ReusingEmbedder(model) if reuse else model
    items = make_texts(size)
    scope = Scope("bench", "user", org_id="acme", workspace_id="acme/bench")
    rows: list[tuple[str, str, str, str]] = []

    sample = [t for t, _ in items[: min(1000, size)]]
    model.embed_batch(sample[:8])  # load the model outside the timing
    t0 = time.perf_counter()
    for i in range(0, len(sample), 64):
        model.embed_batch(sample[i : i + 64])
    raw_tps = len(sample) / (time.perf_counter() - t0)

    db = workdir / f"bench-{size}.db"
    store = SQLiteMemoryStore(db, embedder=emb)
    t0 = time.perf_counter()
    for i in range(0, size, 1000):
        store.remember_many(items[i : i + 1000], scope)
    ingest_tps = size / (time.perf_counter() - t0)
    if reuse:
        rows.append(("batched ingest (texts/s), vectors reused*", f"{ingest_tps:,.0f}", f"{raw_tps:,.0f} raw embed", "store overhead only"))
    else:
        rows.append(("batched ingest (texts/s)", f"{ingest_tps:,.0f}", f"{raw_tps:,.0f} raw embed", f"raw/ingest {raw_tps / ingest_tps:.2f}x (<= 1.2x)"))

    fresh = iter(make_texts(reps * 2, seed=99))
    store.close()
    store = SQLiteMemoryStore(db, embedder=model)  # single remembers always run the real model
    single = timed(lambda: store.remember(*next(fresh), scope), reps)
    fast = SQLiteMemoryStore(db, embedder=model, durable=False)
    single_fast = timed(lambda: fast.remember(*next(fresh), scope), reps)
    fast.close()
    rows.append(("remember p50 (ms), fsync per commit", f"{pct(single, 50):.1f}", "-", "<= 10"))
    rows.append(("remember p50 (ms), durable=False", f"{pct(single_fast, 50):.1f}", "-", ""))

    qs = queries(reps)
    t0 = time.perf_counter()
    store.recall(qs[0], scope)  # loads the vector matrix from the file
    load_ms = (time.perf_counter() - t0) * 1000
    other = SQLiteMemoryStore(db, embedder=model)  # like the next CLI call: starts from the sidecar snapshot
    t0 = time.perf_counter()
    other.recall(qs[1], scope)
    fresh_ms = (time.perf_counter() - t0) * 1000
    other.close()
    it = iter(qs * 2)
    rec = timed(lambda: store.recall(next(it), scope, 5), reps)
    mat = np.frombuffer(
        b"".join(r[0] for r in sqlite3.connect(db).execute("SELECT embedding FROM memories WHERE deleted_at = 0")),
        dtype=np.float32,
    ).reshape(-1, emb.dimension)
    it2 = iter(qs * 2)

    def raw_recall() -> None:
        q = emb.embed_batch([next(it2)])[0]
        s = mat @ q
        top = np.argpartition(-s, 5)[:5]
        top[np.argsort(-s[top])]

    raw = timed(raw_recall, reps)
    qv = emb.embed_batch([qs[0]])[0]
    matvec = timed(lambda: np.argpartition(-(mat @ qv), 5)[:5], reps)
    rows.append(("first recall after open (ms, loads matrix)", f"{load_ms:.0f}", "-", ""))
    rows.append(("first recall, next process (ms, sidecar snapshot)", f"{fresh_ms:.0f}", "-", ""))
    rows.append(("recall p50 (ms, query embedding incl.)", f"{pct(rec, 50):.1f}", f"{pct(raw, 50):.1f} numpy", ""))
    rows.append(("recall p95 (ms, query embedding incl.)", f"{pct(rec, 95):.1f}", f"{pct(raw, 95):.1f} numpy", "<= 20 at 100k"))
    rows.append(("  of which matrix-vector top-k p50 (ms)", "-", f"{pct(matvec, 50):.1f}", ""))

    words = [q.replace("?", "").split()[2:6] for q in qs]
    it3 = iter(words * 2)
    kw = timed(lambda: store.search(" ".join(next(it3)), scope, 10), reps)
    raw_conn = sqlite3.connect(db)
    it4 = iter(words * 2)
    raw_fts = timed(
        lambda: raw_conn.execute(
            "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT 10",
            [" OR ".join(f'"{w}"' for w in next(it4))],
        ).fetchall(),
        reps,
    )
    rows.append(("keyword search p50 (ms)", f"{pct(kw, 50):.1f}", f"{pct(raw_fts, 50):.1f} raw FTS5", ""))
    rows.append(("keyword search p95 (ms)", f"{pct(kw, 95):.1f}", f"{pct(raw_fts, 95):.1f} raw FTS5", ""))

    goals = [f"g-{random.Random(i).randrange(size // 10):05d}" for i in range(reps)]
    it5 = iter(goals * 2)
    listing = timed(lambda: store.list_memories(scope, {"goal_id": next(it5)}), reps)
    it6 = iter(goals[: max(5, reps // 10)] * 2)
    scan = timed(
        lambda: raw_conn.execute(
            "SELECT id, content, metadata FROM memories WHERE json_extract(metadata, '$.goal_id') = ? AND deleted_at = 0",
            [next(it6)],
        ).fetchall(),
        max(5, reps // 10),
    )
    n_goal = len(store.list_memories(scope, {"goal_id": goals[0]}))
    rows.append((f"filtered listing p50 (ms, {n_goal} records/goal)", f"{pct(listing, 50):.1f}", f"{pct(scan, 50):.1f} json_extract scan", ""))
    rows.append(("file size (MB)", f"{store.health().size_bytes / 1e6:.0f}", "-", ""))
    store.close()
    return rows


def main() -> None:
    import sys

    if "--section" in sys.argv:  # e.g. --section quality [its own options]
        i = sys.argv.index("--section")
        section, rest = (sys.argv[i + 1] if i + 1 < len(sys.argv) else ""), sys.argv[1:i] + sys.argv[i + 2 :]
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        if section == "quality":
            from _mem_quality import run as run_quality

            run_quality(rest)
            return
        if section == "scale":
            from _mem_scale import run as run_scale

            run_scale(rest)
            return
        if section == "cli":  # the CLI rows (issue 8 section 4): bench/_mem_cli.py
            from _mem_cli import run as run_cli

            run_cli(rest)
            return
        if section == "copies":  # copies of one content and the ANN tier: bench/_mem_copies.py
            from _mem_copies import run as run_copies

            run_copies(rest)
            return
        if section not in ("store", "daemon"):  # those two are this script's own (argparse below)
            raise SystemExit(f"unknown --section {section!r} (known: store, daemon, quality, scale, cli, copies)")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="also run 100,000 memories")
    ap.add_argument("--sizes", default=None, help="comma-separated sizes (overrides --full)")
    ap.add_argument("--embedder", default="minilm", help="minilm (default) or hashing")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--reuse-vectors", action="store_true", help="at sizes > 10,000, texts sharing verb/thing/outcome reuse one vector (store timing only)")
    ap.add_argument("--section", choices=["store", "daemon"], default="store",
                    help="daemon: the warm path (bench/_mem_daemon.py, with its own options: --size, --reps)")
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a == "--section=daemon" or (a == "--section" and argv[i + 1:i + 2] == ["daemon"]):
            from _mem_daemon import run as run_daemon

            return run_daemon(argv[:i] + argv[i + (1 if "=" in a else 2):])
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([10_000, 100_000] if args.full else [10_000])
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            t0, load0 = time.perf_counter(), os.getloadavg()[0]
            rows = run(size, args.embedder, args.reps, Path(tmp), reuse=args.reuse_vectors and size > 10_000)
            took, load1 = time.perf_counter() - t0, os.getloadavg()[0]
            print(f"\n## {size:,} memories, embedder {args.embedder} ({took:.0f} s; load average {load0:.1f} -> {load1:.1f} on {os.cpu_count()} cores)\n")
            print("| metric | atomic-agents | baseline (same run) | target |")
            print("|---|---|---|---|")
            for r in rows:
                print("| " + " | ".join(r) + " |", flush=True)


if __name__ == "__main__":
    main()
