"""PostgreSQL's keyword search answers exactly as SQLite's: the same rows, in the same order, with the same scores.

Candidates come from SQLite's own tokens (``memory_docs``: each row's stems and their counts,
schema 5) and are ranked by FTS5's BM25 in SQL, so neither the number of matching rows
(past the old ``ts_rank`` pre-selection depth of 200) nor the tokenizer's edge cases
(snake_case, hyphens, e-mails, URLs, numbers with dots, diacritics, inflections) can make
the two backends disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from atomic_agents.memory import Scope
from atomic_agents.memory._postgres_schema import PG_SCHEMA_VERSION

from ._helpers import open_in_two_processes, pg_downgrade
from .test_postgres_stats import OTHER, SCOPE, Pair, _pg, check_counters

#: a small vocabulary, so most rows hold most words: hundreds of rows match every query
BIG_WORDS = "deploy deploys deploying cache caches rollback latency queue invoice outage staging the of a".split()
BIG_QUERIES = ("deploy cache", "rollback", "latency queue invoice", "deploying the staging outage", "caches caches")

EDGE_TEXTS = [
    "the parse_config function fails on snake_case keys",
    "parse config is what parse_config does; config parse is not",
    "snake case is not snake_case, but case snake appears here",
    "user_id and user_id again: user_id",
    "an e-mail to bob@example.com about the e mail server",
    "email bob at example dot com",
    "see https://docs.example.com/guide/install?step=2 for the install guide",
    "the docs at example.com guide you",
    "version 3.14.1 replaced 3.14 and v2.0",
    "pi is 3.14159, roughly 3 point 14",
    "the café serves naïve coffee; a résumé was left",
    "cafe resume naive: written without accents",
    "CAFÉ in capitals",
    "running late, she runs; he ran yesterday",
    "run the runner, runs the running jobs",
    "well-known self-hosted state-of-the-art tools",
    "well known hosts, state of art",
    "x" * 300 + " a very long token and snake_case",
    "Ünïcödé wörds ñ and ß straße strasse",
    "numbers 12345 and 12,345 and 1_000_000",
    # a phrase (``parse_config`` is FTS5's phrase "pars config") ranks by its own count, not its first stem's
    "parse_config with a few more words after it",
    "parse parse parse parse parse_config and user user user_id in one line",
]
EDGE_QUERIES = (
    "parse_config", "snake_case", "snake case", "snake snake_case", "user_id", "e-mail", "bob@example.com",
    "https://docs.example.com/guide", "3.14", "v2.0 3.14.1", "café", "naive resume", "CAFE", "running", "runs",
    "ran", "run running runs", "well-known state-of-the-art", "straße", "unicode words", "1_000_000", "12,345",
    "what does parse_config do", "x" * 300,
)


def _big_texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(BIG_WORDS, int(rng.integers(1, 30))).tolist()) + f" row{i}" for i in range(n)]


def same_search(pair: Pair, query: str, scope: Scope, limit: int, filters: Any = None) -> None:
    """PostgreSQL's ``search`` is SQLite's: ids, order and scores (to 1e-9)."""
    a = pair.pg.search(query, scope, limit, filters)
    b = pair.lite.search(query, scope, limit, filters)
    assert [pair.to_lite[h.memory.id] for h in a] == [h.memory.id for h in b], (query, limit, filters)
    assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-9, abs=1e-9), (query, limit)


def same_hybrid(pair: Pair, query: str, scope: Scope, limit: int) -> None:
    """``search_hybrid``: the same scores (pgvector's float32 cosines: 1e-6); rows apart only where scores tie."""
    a, b = pair.pg.search_hybrid(query, scope, limit=limit), pair.lite.search_hybrid(query, scope, limit=limit)
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-6), query
    at = {h.memory.id: h.score for h in b}
    for x, y in zip(a, b, strict=True):
        if pair.to_lite[x.memory.id] != y.memory.id:
            assert abs(at.get(pair.to_lite[x.memory.id], b[-1].score) - x.score) < 1e-6, query


@pytest.fixture
def big(pg_dsn: str, tmp_path: Path) -> Any:
    pair = Pair(pg_dsn, tmp_path)
    texts = _big_texts(1500, 7)
    metas = [{"kind": "a" if i % 3 else "b", "n": i % 4} for i in range(len(texts))]
    got = [s.remember_many(list(zip(texts, metas, strict=True)), SCOPE) for s in pair.stores]
    pair.to_lite.update(zip(got[0], got[1], strict=True))
    pair.remember_many(_big_texts(300, 8), OTHER)
    yield pair
    pair.close()


@pytest.mark.parametrize("query", BIG_QUERIES)
def test_many_hundreds_of_matches_rank_as_sqlite(big: Pair, query: str) -> None:
    """Hundreds of rows match: the top is BM25's over all of them, not over a ts_rank pre-selection."""
    hits = big.lite.search(query, SCOPE, 1000)
    assert len(hits) > 400  # far past the old pre-selection depth (200)
    for limit in (1, 10, 60, 250):
        same_search(big, query, SCOPE, limit)
    same_search(big, query, OTHER, 10)
    same_search(big, query, SCOPE, 10, {"kind": "b"})  # JSONB filter in SQL
    same_search(big, query, SCOPE, 10, {"n": 2})  # a number: the exact check in Python
    same_hybrid(big, query, SCOPE, 10)


@pytest.mark.parametrize("rounds", [0, 1, 3])
def test_a_small_scope_among_many_matches_gets_every_hit(big: Pair, monkeypatch: pytest.MonkeyPatch, rounds: int) -> None:
    """Ranking first and checking the scope after must not lose hits: growing rounds, then the exact join (rounds=0)."""
    import atomic_agents.memory._postgres_keyword as kw

    monkeypatch.setattr(kw, "_RANK_FIRST_ROUNDS", rounds)
    small = Scope("tiny", "carol", org_id="acme", workspace_id="acme/web")
    big.remember_many(["deploy cache rollback", "cache", "latency deploy queue", "nothing to match"], small)
    for q in BIG_QUERIES:
        same_search(big, q, small, 10)
        same_search(big, q, SCOPE, 10, {"kind": "b", "n": 3})  # few rows pass: the fetch grows
        same_search(big, q, OTHER, 40)
    assert len(big.pg.search("deploy cache", small, 10)) == 3


@pytest.fixture
def edge(pg_dsn: str, tmp_path: Path) -> Any:
    pair = Pair(pg_dsn, tmp_path)
    pair.remember_many(EDGE_TEXTS)
    pair.remember_many(EDGE_TEXTS[::-1])  # equal contents: ties go to the older row
    pair.remember_many(_big_texts(60, 9))
    yield pair
    pair.close()


@pytest.mark.parametrize("query", EDGE_QUERIES)
def test_tokenizer_edge_cases_match_and_score_as_sqlite(edge: Pair, query: str) -> None:
    same_search(edge, query, SCOPE, 50)
    same_search(edge, query, SCOPE, 3)
    same_hybrid(edge, query, SCOPE, 10)


def test_edge_cases_survive_edits_forgets_and_erasure(edge: Pair) -> None:
    ids = [h.memory.id for h in edge.pg.search("parse_config snake_case user_id", SCOPE, 10)]
    for store, mid in edge.both(ids[0]):
        store.edit(mid, content="nothing about configuration here")
    for store, mid in edge.both(ids[1]):
        store.forget(mid)
    for store in edge.stores:
        store.prune(keywords="3.14", dry_run=False, hard=True)
    check_counters(edge.pg, edge.lite)
    for q in EDGE_QUERIES:
        same_search(edge, q, SCOPE, 20)


def test_a_schema_4_database_is_migrated_and_answers_as_before(pg_dsn: str, tmp_path: Path) -> None:
    """A database the schema-4 code wrote (no term counts) is migrated in place, backfilled by two processes at once."""
    pair = Pair(pg_dsn, tmp_path)
    ids = pair.remember_many(_big_texts(2600, 11))  # more than two backfill batches
    pair.remember_many(EDGE_TEXTS)
    for store, mid in pair.both(ids[10]):
        store.forget(mid)
    pair.pg._run(lambda cur: pg_downgrade(cur, 4), write=True)  # the database as schema 4 left it
    assert pair.pg._read("SELECT count(*) FROM memory_docs")[0][0] == 2600 + len(EDGE_TEXTS)
    pair.pg.close()
    open_in_two_processes(pg_dsn)
    pair.pg = _pg(pg_dsn)
    assert pair.pg.health().schema_version == PG_SCHEMA_VERSION == 5
    assert pair.pg._read("SELECT count(*) FROM memory_docs WHERE tfs IS NULL")[0][0] == 0
    assert pair.pg._read("SELECT count(*) FROM memories")[0][0] == 2600 + len(EDGE_TEXTS)  # nothing lost
    check_counters(pair.pg, pair.lite)
    for q in (*BIG_QUERIES, "parse_config", "café", "3.14"):
        same_search(pair, q, SCOPE, 10)
        same_search(pair, q, SCOPE, 100)
    pair.close()


def test_rows_a_schema_4_process_writes_are_counted_before_a_search(pg_dsn: str, tmp_path: Path) -> None:
    """A process of the older package, opened before the migration, keeps writing rows without term counts."""
    pair = Pair(pg_dsn, tmp_path)
    pair.remember_many(_big_texts(40, 12))
    got = pair.pg.remember_many([("rollback rollback latency row-old", None)], SCOPE)
    pair.to_lite[got[0]] = pair.lite.remember("rollback rollback latency row-old", None, SCOPE)
    pair.pg._run(lambda cur: cur.execute("UPDATE memory_docs SET tfs = NULL WHERE seq = (SELECT max(seq) FROM memory_docs)"),
                 write=True)  # fmt: skip
    same_search(pair, "rollback latency", SCOPE, 10)
    assert pair.pg._read("SELECT count(*) FROM memory_docs WHERE tfs IS NULL")[0][0] == 0
    pair.close()

