"""PostgreSQL's BM25 corpus statistics (schema 3): exactly FTS5's, so keyword scores equal SQLite's.

The counters (``memory_rows.n``/``tokens``, ``memory_terms``) must equal a recount of the
rows and SQLite's own FTS5 numbers for the same writes, after every kind of write, under
concurrent writers, and after an old database is migrated and backfilled.
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from atomic_agents.memory import (
    HashingEmbedder,
    InMemoryMemoryStore,
    Scope,
    SQLiteMemoryStore,
)
from atomic_agents.exceptions import NotFoundError
from atomic_agents.memory._base import memory_from_row
from atomic_agents.memory._postgres_schema import PG_SCHEMA_VERSION
from atomic_agents.memory._postgres_sql import _COLS
from atomic_agents.memory._postgres_stats import stem_key
from atomic_agents.memory import _scoring as scoring
from atomic_agents.memory._scoring import keyword_evidence, tokens

from ._helpers import open_in_two_processes, pg_downgrade

SCOPE = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")
OTHER = Scope("reviewer", "bob", org_id="acme", workspace_id="acme/web")
WORDS = (
    "deploy deploys deployed deploying billing cache caches rollback latency queue invoice invoices schema token"
    " alert alerts run running runs café naïve résumé the a of staging production outage"
    " buy buys bought child children go goes went gone pay paid"  # forms Porter stems apart (_words.word_forms)
    " deploy_billing cache_rollback"  # identifiers the tokenizer splits: FTS5 phrases
).split()
QUERIES = (
    "deploy billing", "cache rollback latency", "invoice", "token alert schema queue", "run running runs",
    "deploying the staging cache", "cafe resume", "outage production outage", "what did the deploy do",
    "what was the cache rollback and when was the deploy billing",  # two questions: the score reads the best-held
    "What did the Billing cache do?",  # a name the question asks about: a hit lacking it scores lower
    "When did the children buy the cache?", "paid deploy went", "bought buy invoice",  # a word in any of its forms
    "deploy_billing", "cache_rollback latency", "why did cache_rollback fail",  # a phrase: its words in a row
)


def _pg(dsn: str, **kw: Any) -> Any:
    from atomic_agents.memory._postgres import PostgresMemoryStore

    return PostgresMemoryStore(dsn, embedder=kw.pop("embedder", HashingEmbedder()), **kw)


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        body = " ".join(rng.choice(WORDS, int(rng.integers(1, 14))).tolist())
        if i % 17 == 0:  # a stem longer than a btree key can hold, keyed by its hash
            body += " " + "x" * 300 + str(i % 3)
        if i % 11 == 0:
            body += ". Punctuation, and CAPITALS!"
        out.append(f"{body} item{i}")
    return out


def _pg_signals(pg: Any, query: str) -> tuple[dict[str, float], dict[str, float]]:
    """PostgreSQL's evidence and coverage of every row (forgotten, expired too), by memory id."""
    mems = {r[0]: memory_from_row(r) for r in pg._read(f"SELECT {_COLS} FROM memories m")}
    ev, cov = pg._keyword_signals(query, mems)
    return {mems[k].id: v for k, v in ev.items()}, {mems[k].id: v for k, v in cov.items()}


def _lite_signals(lite: SQLiteMemoryStore, query: str) -> tuple[dict[str, float], dict[str, float]]:
    """SQLite's (FTS5's own bm25 and the index's counts) of every row matching a query word."""
    ids = dict(lite._read("SELECT seq, id FROM memories"))
    m = lite._matches(query)
    ev = {ids[k]: keyword_evidence(-b, m.mass) for k, b in m.bm25.items()}
    return ev, {ids[k]: v for k, v in m.coverage(m.bm25).items()}


class Pair:
    """The same writes on SQLite and PostgreSQL (and the fake, if asked); ids mapped to SQLite's."""

    def __init__(self, dsn: str, tmp: Path, *, fake: bool = False) -> None:
        self.pg = _pg(dsn)
        self.lite = SQLiteMemoryStore(tmp / "m.db", embedder=HashingEmbedder())
        self.fake = InMemoryMemoryStore(embedder=HashingEmbedder()) if fake else None
        self.to_lite: dict[str, str] = {}  # PostgreSQL's (and the fake's) id -> SQLite's
        self.from_lite: dict[int, dict[str, str]] = {}  # per store: SQLite's id -> its own

    @property
    def stores(self) -> list[Any]:
        return [self.pg, self.lite] + ([self.fake] if self.fake is not None else [])

    def remember_many(self, texts: list[str], scope: Scope = SCOPE, **kw: Any) -> list[str]:
        got = [s.remember_many([(t, None) for t in texts], scope, **kw) for s in self.stores]
        for s, ids in zip(self.stores, got, strict=True):
            self.to_lite.update(zip(ids, got[1], strict=True))
            self.from_lite.setdefault(id(s), {}).update(zip(got[1], ids, strict=True))
        return got[0]

    def both(self, pg_id: str) -> list[tuple[Any, str]]:
        lid = self.to_lite[pg_id]
        return [(s, self.from_lite[id(s)][lid]) for s in self.stores]

    def check(self, *, searches: bool = True) -> None:
        """Counters equal a recount and FTS5's; every signal and score of every query equals SQLite's.

        ``searches``: also the result lists (test_postgres_keyword.py compares them past
        hundreds of matching rows).
        """
        check_counters(self.pg, self.lite)
        for q in QUERIES:
            assert self.pg._idf(q) == pytest.approx(self.lite._idf(q), rel=1e-12, abs=1e-15), q
            (pe, pc), (le, lc) = _pg_signals(self.pg, q), _lite_signals(self.lite, q)
            assert {self.to_lite[k]: v for k, v in pe.items()} == pytest.approx(le, rel=1e-9, abs=1e-12), q
            assert {self.to_lite[k]: v for k, v in pc.items()} == pytest.approx(lc, rel=1e-9, abs=1e-12), q
            if self.fake is not None:  # the fake's plain-Python BM25 is FTS5's too
                fe, fc = self.fake._keyword_signals(q, list(self.fake._mems.values()))
                assert {self.to_lite[k]: v for k, v in fe.items()} == pytest.approx(le, rel=1e-9, abs=1e-12), q
                assert {self.to_lite[k]: v for k, v in fc.items()} == pytest.approx(lc, rel=1e-9, abs=1e-12), q
            for sc, other in ((sc, o) for sc in ((SCOPE, OTHER) if searches else ()) for o in self.stores if o is not self.lite):
                a, b = other.search(q, sc, 10), self.lite.search(q, sc, 10)
                assert [(self.to_lite[h.memory.id], h.score) for h in a] == [(h.memory.id, pytest.approx(h.score, abs=1e-9)) for h in b], q
                # pools deep enough for the whole scope (limit 60: 240 per ranker): at a pool's cut, two
                # cosines equal to 7 digits (pgvector's float32 sums against numpy's) can admit different
                # rows, and a keyword-strong row that only one side admits changes the list
                a, b = other.search_hybrid(q, sc, limit=60)[:10], self.lite.search_hybrid(q, sc, limit=60)[:10]
                # cosines come from pgvector on one side, numpy on the other (float32 sums: ~1e-7 apart),
                # so hits whose scores tie to 1e-6 may swap places; every other hit is in the same place
                assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-6), q
                at = {h.memory.id: h.score for h in b}
                for x, y in zip(a, b, strict=True):
                    if self.to_lite[x.memory.id] != y.memory.id:
                        assert abs(x.score - y.score) < 1e-6, q
                        assert abs(at.get(self.to_lite[x.memory.id], b[-1].score) - x.score) < 1e-6, q

    def close(self) -> None:
        for s in self.stores:
            s.close()


def _recount(pg: Any) -> tuple[int, int, dict[str, int]]:
    """N, total length and per-stem rows recounted from the rows' content (Python tokens)."""
    assert not pg._read("SELECT 1 FROM memory_docs d WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.seq = d.seq)")
    contents = [r[0] for r in pg._read("SELECT content FROM memories")]
    toks = tokens(contents)
    df: Counter[str] = Counter()
    for t in toks:
        df.update({stem_key(s) for s in t})
    return len(contents), sum(len(t) for t in toks), dict(df)


def _counters(pg: Any) -> tuple[int, int, dict[str, int]]:
    n, total, docs = pg._read("SELECT coalesce(sum(n), 0), coalesce(sum(tokens), 0), coalesce(sum(docs), 0) FROM memory_rows")[0]
    assert docs == n
    df = {s: int(c) for s, c in pg._read("SELECT stem, sum(n) FROM memory_terms GROUP BY stem HAVING sum(n) <> 0")}
    return int(n), int(total), df


def _fts5(lite: SQLiteMemoryStore) -> tuple[int, int, dict[str, int]]:
    """FTS5's own N, total tokens and per-term row counts of a SQLite store."""
    with sqlite3.connect(lite.path) as c:
        c.execute("CREATE VIRTUAL TABLE temp.vr USING fts5vocab(main, memories_fts, row)")
        c.execute("CREATE VIRTUAL TABLE temp.vi USING fts5vocab(main, memories_fts, instance)")
        n = c.execute("SELECT count(*) FROM memories_fts").fetchone()[0]
        total = c.execute("SELECT count(*) FROM temp.vi").fetchone()[0]
        df = {stem_key(t): d for t, d in c.execute("SELECT term, doc FROM temp.vr")}
    return int(n), int(total), df


def _uncounted(pg: Any) -> int:
    return int(pg._read("SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_docs d WHERE d.seq = m.seq)")[0][0])


def check_counters(pg: Any, lite: SQLiteMemoryStore | None = None) -> None:
    assert _uncounted(pg) == 0
    kept = _counters(pg)
    assert kept == _recount(pg)
    if lite is not None:
        assert kept == _fts5(lite)


def test_keyword_signals_and_scores_equal_sqlite_through_every_kind_of_write(pg_dsn: str, tmp_path: Path) -> None:
    pair = Pair(pg_dsn, tmp_path, fake=True)
    ids = pair.remember_many(_texts(150, 1))
    pair.remember_many(_texts(40, 2), OTHER)
    pair.check()
    for store, mid in (x for i in (3, 9, 27, 81) for x in pair.both(ids[i])):  # forgotten rows still count
        store.forget(mid)
    pair.check()
    edits = {5: "a rollback of billing after the outage", 6: "deploy deploy deploy staging",
             # same tokens and length as before: the stale-docs trigger drops the old counts, edit adds the new
             7: pair.pg.get(ids[7]).content.upper()}  # fmt: skip
    for i, text in edits.items():
        for store, mid in pair.both(ids[i]):
            store.edit(mid, content=text)
    for store, mid in pair.both(ids[8]):
        store.edit(mid, metadata={"kind": "note"})  # no content change: nothing recounted
    pair.check()
    short = pair.remember_many(["an alert that expires soon", "a queue token that expires"], ttl_ms=1)
    time.sleep(0.05)
    pair.check()  # expired rows are in FTS5 until erased
    for store in pair.stores:
        assert store.forget_expired(SCOPE.as_filter()) == len(short)
    pair.check()
    for store in pair.stores:  # erased rows leave every counter
        assert store.prune(keywords="item40 item41 item42", dry_run=False, hard=True).removed == 3
        assert store.prune(OTHER.as_filter(), dry_run=False, hard=True).removed == 40
        store.prune(keywords="invoices", dry_run=False)  # soft: still indexed
    pair.check()
    before = _counters(pair.pg)
    pair.pg.vacuum()  # folds the shards: the same sums in fewer rows
    assert _counters(pair.pg) == before
    assert pair.pg._read("SELECT count(*) FROM memory_terms")[0][0] == len(before[2])
    pair.remember_many(_texts(20, 3))
    pair.check()
    pair.close()


def test_recall_scores_read_what_each_hit_holds_the_same_on_every_backend(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With fitted constants (the default model's, lent to the fake embedder here) a recalled memory scores the
    hybrid map of its cosine and of what it holds of the query: SQLite exactly so, PostgreSQL and the fake alike."""
    monkeypatch.setitem(scoring._FITTED, HashingEmbedder().model_id, scoring.DEFAULT)
    pair = Pair(pg_dsn, tmp_path, fake=True)
    pair.remember_many(_texts(150, 1))
    pair.remember_many(_texts(40, 2), OTHER)
    held_some = lacked_some = 0
    for q in QUERIES:
        lite = pair.lite.recall(q, SCOPE, limit=10)
        seq_id = dict(pair.lite._read("SELECT seq, id FROM memories"))
        cos = {seq_id[k]: c for k, c in pair.lite._semantic(q, SCOPE, {}, 10)[3]}
        held = scoring.held_signals(q, pair.lite._idf(q), [h.memory.content for h in lite])
        for h, (u, n) in zip(lite, held, strict=True):
            assert h.score == scoring.semantic_score(cos[h.id], scoring.DEFAULT, u, n), q
            held_some += u > 0
            lacked_some += n
        # every row of the scope (equal cosines at a cut may keep other rows): each scores alike everywhere
        mine = {h.memory.id: h.score for h in pair.lite.recall(q, SCOPE, limit=500)}
        assert len(mine) == 150
        for other in (pair.pg, pair.fake):
            got = {pair.to_lite[h.memory.id]: h.score for h in other.recall(q, SCOPE, limit=500)}
            assert got == pytest.approx(mine, abs=1e-6), q
    assert held_some and lacked_some  # the words were read: hits holding query words, hits lacking a name
    pair.close()


def test_the_average_length_is_the_corpus_not_the_candidate_pool(pg_dsn: str) -> None:
    """A memory's evidence does not depend on which other memories are candidates."""
    pg = _pg(pg_dsn)
    pg.remember_many([("deploy the cache", None), ("cache " + "filler " * 40, None), ("unrelated words only", None)], SCOPE)
    mems = {r[0]: memory_from_row(r) for r in pg._read(f"SELECT {_COLS} FROM memories m")}
    alone = {k: v for k, v in mems.items() if v.content == "deploy the cache"}
    one = pg._bm25("deploy cache", alone)[0]  # raw bm25: evidence is capped at 1
    every = pg._bm25("deploy cache", mems)[0]
    assert len(every) == 2 and one == {k: every[k] for k in one}
    pg.close()


def _writer(dsn: str, n: int, out: Any) -> None:
    store = _pg(dsn, pool_size=3)
    rng = np.random.default_rng(100 + n)
    errors: list[str] = []

    def work(t: int) -> None:
        try:
            for i in range(20):
                texts = _texts(int(rng.integers(1, 4)), 1000 * n + 10 * t + i)
                got = store.remember_many([(x, None) for x in texts], SCOPE)
                try:  # another writer's prune matching "item<i>" may have erased them already
                    if i % 3 == 0:
                        store.edit(got[0], content=f"edited {n} {t} {i} deploy latency")
                    if i % 5 == 0:
                        store.forget(got[-1])
                except NotFoundError:
                    pass
                if i % 7 == 0:
                    store.prune(keywords=f"item{i}", dry_run=False, hard=True)
                if i % 6 == 0:
                    store.prune(keywords=f"item{i + 1} deploy", dry_run=False)
        except Exception as exc:  # any other failure fails the test, never a thread dying quietly
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    out.put((n, errors))


@pytest.fixture
def own_database(pg_dsn: str) -> Any:
    """A database of its own (with the vector extension): its counters in ``pg_stat_database`` count
    this test's backends only, never a backend of an earlier test flushing its statistics late."""
    import uuid

    import psycopg

    name = "aa_own_" + uuid.uuid4().hex[:12]
    head, rest = pg_dsn.split("?", 1)
    dsn = head.rsplit("/", 1)[0] + "/" + name + "?" + rest
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    yield dsn
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_counters_stay_exact_under_concurrent_writers(own_database: str) -> None:
    """Three processes of three threads insert, edit, forget and erase at once: every counter equals a recount."""
    def deadlocks() -> int:
        import psycopg

        with psycopg.connect(own_database, autocommit=True) as conn:
            return int(conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").fetchone()[0])

    before = deadlocks()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(own_database, n, out)) for n in range(3)]
    for p in procs:
        p.start()
    done = sorted(out.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert done == [(0, []), (1, []), (2, [])]
    # the writers' backends have exited (their statistics are flushed): none was a deadlock victim
    # (the store retries those, so only the server's counter shows them)
    assert deadlocks() == before
    pg = _pg(own_database)
    assert pg._read("SELECT count(DISTINCT shard) FROM memory_terms")[0][0] > 1  # the writers did share shards out
    check_counters(pg)
    pg.close()


@pytest.mark.parametrize("hard", [True, False])
def test_a_prune_locks_its_rows_in_one_order_whatever_its_plan(pg_dsn: str, hard: bool) -> None:
    """A bulk write takes its rows in seq order, so it never holds a later row while it waits for an
    earlier one: a plan walking the table goes by the rows' places on disk, and an edit moves a row
    there past the rows written after it. Two writers locking in opposite orders deadlock."""
    import psycopg

    store = _pg(pg_dsn)
    first, second = store.remember_many([("prunable first", None), ("prunable second", None)], SCOPE)
    store.edit(first, content="prunable first, edited")  # its new version lies past the second row
    seq = dict(store._read("SELECT id, seq FROM memories"))
    with psycopg.connect(pg_dsn) as holder:
        holder.execute("SELECT 1 FROM memories WHERE seq = %s FOR UPDATE", [seq[first]])
        report: list[Any] = []
        pruner = threading.Thread(target=lambda: report.append(store.prune(keywords="prunable", dry_run=False, hard=hard)))
        pruner.start()
        deadline = time.monotonic() + 30
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        while not holder.execute(waiting).fetchone()[0]:
            assert time.monotonic() < deadline, "the prune never waited for the first row"
            time.sleep(0.02)
        # the prune waits for the first row holding no other: the second is free
        holder.execute("SELECT 1 FROM memories WHERE seq = %s FOR UPDATE NOWAIT", [seq[second]])
        holder.commit()
    pruner.join(timeout=30)
    assert report and report[0].removed == 2
    assert store.list_memories(SCOPE) == []
    store.close()


def test_an_old_database_is_backfilled_exactly_even_by_two_processes_at_once(pg_dsn: str, tmp_path: Path) -> None:
    pair = Pair(pg_dsn, tmp_path)
    ids = pair.remember_many(_texts(2600, 4))  # more than two backfill batches
    for store, mid in pair.both(ids[10]):
        store.forget(mid)
    pair.pg._run(lambda cur: pg_downgrade(cur, 2), write=True)  # the database as schema 2 left it
    pair.pg.close()
    open_in_two_processes(pg_dsn)
    pair.pg = _pg(pg_dsn)
    assert pair.pg.health().schema_version == PG_SCHEMA_VERSION
    pair.check()  # 2,600 rows, most matching: the lists are SQLite's too (schema 5)
    # counts lost some other way (a hand-written DELETE): the next open counts those rows again
    pair.pg._run(lambda cur: cur.execute("DELETE FROM memory_docs WHERE seq % 3 = 0"), write=True)
    pair.pg.close()
    pair.pg = _pg(pg_dsn)
    pair.check(searches=False)
    pair.close()


def test_rows_an_older_package_writes_are_counted_before_a_search(pg_dsn: str, tmp_path: Path) -> None:
    pair = Pair(pg_dsn, tmp_path)
    ids = pair.remember_many(_texts(30, 5))

    edited = "billing invoice outage"
    vec = np.asarray(HashingEmbedder().embed_batch([edited])[0], dtype=np.float32)

    def old_writer(cur: Any) -> None:  # what schema-2 code does: no keyword counts
        cur.execute(
            "INSERT INTO memories (id, content, agent_id, user_id, org_id, workspace_id, created_at, updated_at,"
            " content_hash, embedder, embedding, search_text) SELECT id || '-old', content, agent_id, user_id, org_id,"
            " workspace_id, created_at, updated_at, content_hash, embedder, embedding, search_text FROM memories WHERE id = %s",
            [ids[0]],
        )
        cur.execute("UPDATE memories SET content = %s, search_text = %s, embedding = %s WHERE id = %s",
                    [edited, edited, vec, ids[1]])  # fmt: skip

    pair.pg._run(old_writer, write=True)
    assert _uncounted(pair.pg) == 2
    pair.to_lite[ids[0] + "-old"] = pair.lite.remember(pair.pg.get(ids[0]).content, None, SCOPE)
    pair.lite.edit(pair.to_lite[ids[1]], content=edited)
    pair.pg.search("billing", SCOPE)  # counts them first
    pair.check()
    pair.close()
