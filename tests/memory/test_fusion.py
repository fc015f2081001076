"""Hybrid fusion and rank-first keyword search through the real store."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atomic_agents.memory import (
    RELEVANCE_FLOOR,
    HashingEmbedder,
    MiniLMEmbedder,
    Scope,
    SQLiteMemoryStore,
)
from atomic_agents.memory._scoring import fts_query, held_signals, keyword_coverage, keyword_score, part_coverage, query_parts, tokens
from atomic_agents.memory._sqlite_sql import _COLS, _LIVE, _SCOPE

SCOPE = Scope("fusion", "test")


@pytest.fixture(scope="module")
def minilm_store(tmp_path_factory: pytest.TempPathFactory) -> SQLiteMemoryStore:
    store = SQLiteMemoryStore(tmp_path_factory.mktemp("fusion") / "m.db", embedder=MiniLMEmbedder(), durable=False)
    store.remember_many([
        ("Bob is allergic to peanuts, so the team lunch order must avoid them.", None),
        ("The team lunch is on Friday at the Italian place near the office.", None),
        ("Our API rate limit is 100 requests per minute per token.", None),
        ("The nightly backup job for the Postgres cluster now runs at 02:00 UTC.", None),
        ("Maya adopted a grey cat called Pebble from the shelter last Saturday.", None),
    ], SCOPE)  # fmt: skip
    return store


def test_a_paraphrase_keyword_search_misses_is_found_by_hybrid(minilm_store: SQLiteMemoryStore) -> None:
    query = "which snack makes him sick?"
    assert minilm_store.search(query, SCOPE) == []  # no shared word at all
    hits = minilm_store.search_hybrid(query, SCOPE, limit=3)
    assert "peanuts" in hits[0].memory.content
    assert hits[0].score >= RELEVANCE_FLOOR > hits[1].score  # relevant, and the rest not


def test_a_keyword_only_weak_match_scores_below_the_floor(minilm_store: SQLiteMemoryStore) -> None:
    # "team" is in two memories; the question is about something none of them holds.
    query = "how many people joined the team offsite in Lisbon?"
    for hits in (minilm_store.search(query, SCOPE), minilm_store.search_hybrid(query, SCOPE)):
        assert hits and all(h.score < RELEVANCE_FLOOR for h in hits)


def test_a_strong_match_scores_above_the_floor_whichever_ranker(minilm_store: SQLiteMemoryStore) -> None:
    query = "when does the Postgres backup job run?"
    for hits in (minilm_store.search(query, SCOPE), minilm_store.recall(query, SCOPE), minilm_store.search_hybrid(query, SCOPE)):
        assert "backup" in hits[0].memory.content and hits[0].score >= RELEVANCE_FLOOR
        assert all(0.0 <= h.score <= 1.0 for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_memory_answering_one_question_of_two_is_relevant(tmp_path: Any) -> None:
    store = SQLiteMemoryStore(tmp_path / "parts.db", embedder=MiniLMEmbedder(), durable=False)
    store.remember_many([
        ("Ben: the final bill for the wedding came to 19,400 euros, mostly the extra wine.", None),
        ("Ana: we booked the old mill in Monschau for the wedding, the garden is lovely.", None),
        ("The nightly backup job for the Postgres cluster now runs at 02:00 UTC.", None),
        ("Maya adopted a grey cat called Pebble from the shelter last Saturday.", None),
    ], SCOPE)  # fmt: skip
    asked = "What was the planned wedding budget and what was the final bill?"
    hits = store.search_hybrid(asked, SCOPE, limit=2)
    assert "final bill" in hits[0].memory.content and hits[0].score >= RELEVANCE_FLOOR
    # the same words asked as one question: the memory holds only part of it and scores lower
    one = store.search_hybrid("What was the planned wedding budget, the final bill?", SCOPE, limit=1)[0]
    assert one.memory.id == hits[0].memory.id and one.score < hits[0].score
    store.close()


def _full_join(store: SQLiteMemoryStore, query: str, scope: Scope, limit: int) -> list[str]:
    """The keyword query before rank-first: join every match, scope-check, then rank."""
    rows = store._read(
        f"SELECT {_COLS}, bm25(memories_fts) FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid"
        f" WHERE memories_fts MATCH ? AND {_SCOPE} AND {_LIVE} ORDER BY bm25(memories_fts), m.seq LIMIT ?",
        [fts_query(query, forms=True), *scope.key(), time.time(), limit],
    )
    return [r[1] for r in rows]


@pytest.fixture(scope="module")
def scoped_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[SQLiteMemoryStore, list[Scope]]:
    rnd = random.Random(3)
    store = SQLiteMemoryStore(tmp_path_factory.mktemp("rankfirst") / "m.db", embedder=HashingEmbedder(16), durable=False)
    scopes = [Scope("a", "big"), Scope("a", "small"), Scope("b", "tiny")]
    words = [f"w{i}" for i in range(40)]
    for sc, n in zip(scopes, (900, 60, 3), strict=True):
        ids = store.remember_many([(" ".join(rnd.choices(words, k=rnd.randint(1, 12))), None) for _ in range(n)], sc)
        for mid in ids[: n // 10]:  # some forgotten rows stay in the FTS index
            store.forget(mid)
    return store, scopes


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 45), min_size=1, max_size=4), st.integers(0, 2), st.integers(1, 60))
def test_rank_first_keyword_search_equals_the_full_join(
    scoped_store: tuple[SQLiteMemoryStore, list[Scope]], words: list[int], which: int, limit: int
) -> None:
    store, scopes = scoped_store
    query = " ".join(f"w{i}" for i in words)
    got = [h.id for h in store.search(query, scopes[which], limit)]
    assert got == _full_join(store, query, scopes[which], limit)


def test_rank_first_falls_back_to_the_exact_join_when_the_scope_holds_few_matches(
    scoped_store: tuple[SQLiteMemoryStore, list[Scope]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import atomic_agents.memory._sqlite_keyword as sqlite_mod

    store, scopes = scoped_store
    monkeypatch.setattr(sqlite_mod, "_RANK_FIRST_ROUNDS", 1)  # one small over-fetch, then the join
    calls: list[str] = []
    real_read = store._read

    def spy(sql: str, params: Any = ()) -> Any:
        calls.append(sql)
        return real_read(sql, params)

    monkeypatch.setattr(store, "_read", spy)
    rnd = random.Random(5)
    for _ in range(20):
        query = " ".join(f"w{rnd.randint(0, 45)}" for _ in range(3))
        for sc in scopes:
            limit = rnd.randint(1, 30)
            assert [h.id for h in store.search(query, sc, limit)] == _full_join(store, query, sc, limit)
    assert any("JOIN memories m ON" in c for c in calls)  # the fallback ran


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 45), min_size=1, max_size=5), st.integers(0, 4))
def test_one_pass_matches_give_the_or_querys_bm25_and_the_held_share_of_idf(
    scoped_store: tuple[SQLiteMemoryStore, list[Scope]], words: list[int], split: int
) -> None:
    """``_matches`` (one MATCH per word) adds up to FTS5's bm25 of the OR query; coverage is the held IDF share;
    the score's coverage of a query asking two things is the larger of that and the best-held question's."""
    store, _ = scoped_store
    query = " ".join(f"w{i}" for i in words[:split]) + (" and what " if split else "") + " ".join(f"w{i}" for i in words[split:])
    found = store._matches(query)
    bm, coverage, mass = found.bm25, found.coverage([*found.bm25, -1]), found.mass
    whole = dict(store._read("SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?", [fts_query(query, forms=True)]))
    assert bm.keys() == whole.keys() == coverage.keys()
    assert bm == whole  # the same floats: per-word bm25s added in word order, as FTS5 adds them
    idfs = store._idf(query)
    assert mass == pytest.approx(sum(idfs.values()))
    texts = dict(store._read("SELECT seq, content FROM memories"))
    parts = query_parts(query)
    assert bool(parts) == (0 < split < len(words) and bool(set(words[:split])) and bool(set(words[split:])))
    score_cov = found.score_coverage(found.bm25)
    for k in list(coverage)[:50]:
        held = set(tokens([texts[k]])[0])
        assert coverage[k] == pytest.approx(keyword_coverage(sum(w for t, w in idfs.items() if t in held), mass))
        assert score_cov[k] == pytest.approx(max(coverage[k], part_coverage(held, idfs, parts)))


NAMED = ["Maya", "maya", "Bob's", "bob", "user_id", "user", "id", "e-mail", "mail", "deploy", "deployed", "v2", "Ünal", "unal",
         "buy", "bought", "went", "go", "children", "child", "paid"]  # and forms Porter stems apart


@pytest.fixture(scope="module")
def named_store(tmp_path_factory: pytest.TempPathFactory) -> SQLiteMemoryStore:
    rnd = random.Random(11)
    store = SQLiteMemoryStore(tmp_path_factory.mktemp("named") / "m.db", embedder=HashingEmbedder(16), durable=False)
    store.remember_many([(" ".join(rnd.choices(NAMED, k=rnd.randint(1, 9))), None) for _ in range(300)], SCOPE)
    return store


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(NAMED), min_size=1, max_size=5), st.integers(0, 4), st.sampled_from(["What did", "Where is", "deploy"]))
def test_a_keyword_hits_held_signals_are_the_one_pass_matches(
    named_store: SQLiteMemoryStore, words: list[str], split: int, opening: str
) -> None:
    """What ``search`` reads of each hit from its own tokens (coverage, a two-part query's best-held question,
    a name the question asks about, a ``snake_case`` word as a phrase) equals the hybrid's per-word FTS5 pass."""
    query = f"{opening} " + " ".join(words[:split]) + (" and who " if split else " ") + " ".join(words[split:]) + "?"
    found = named_store._matches(query)
    texts = dict(named_store._read("SELECT seq, content FROM memories"))
    keys = sorted(found.bm25)[:80]
    held = held_signals(query, named_store._idf(query), [texts[k] for k in keys])
    score_cov, lacking = found.score_coverage(keys), found.lacking(keys)
    assert [u for u, _ in held] == pytest.approx([score_cov[k] for k in keys], abs=1e-12)
    assert [n for _, n in held] == [k in lacking for k in keys]


def test_search_scores_a_memory_by_what_it_holds_of_the_query(tmp_path: Any) -> None:
    """A memory repeating one rare word out-ranks, in BM25, one holding every word, and scores below it and the floor."""
    store = SQLiteMemoryStore(tmp_path / "held.db", embedder=HashingEmbedder(16), durable=False)
    long = ("The runbook for the failover of the Zanzibar office lives in the ops folder, next to the notes from the"
            " last drill, the list of who to call first, the diagram of the two sites and the checklist we print.")
    store.remember_many([("Zanzibar! Zanzibar, Zanzibar.", None), (long, None),
                         *((f"filler note {i} about the weekly sync", None) for i in range(40))], SCOPE)  # fmt: skip
    hits = store.search("Where is the Zanzibar failover runbook?", SCOPE)
    assert [h.memory.content[:8] for h in hits] == ["Zanzibar", "The runb"]  # FTS5's order: bm25
    assert hits[0].score < RELEVANCE_FLOOR <= hits[1].score
    assert keyword_score(1.0, 1.0) > keyword_score(1.0, 0.5) > keyword_score(1.0, 0.5, lacks_name=True)
    assert keyword_score(0.0, 1.0) == 0.0
    store.close()


@pytest.fixture(scope="module")
def tagged_store(tmp_path_factory: pytest.TempPathFactory) -> SQLiteMemoryStore:
    rnd = random.Random(5)
    store = SQLiteMemoryStore(tmp_path_factory.mktemp("filtered") / "m.db", embedder=HashingEmbedder(32), durable=False)
    words = [f"w{i}" for i in range(60)]
    items = []
    for i in range(1500):
        meta: dict[str, Any] = {"source": "vault", "status": "live" if i % 7 else "superseded"}
        if i % 25 == 0:
            meta["rare"] = True
        items.append((" ".join(rnd.choices(words, k=rnd.randint(2, 10))), meta))
    store.remember_many(items, SCOPE)
    store.remember_many([("w1 w2 w3 other scope", {"source": "vault", "status": "live"})], Scope("other", "scope"))
    return store


FILTERS = [{"source": "vault"}, {"source": "vault", "status": "live"}, {"status": "superseded"}, {"rare": True},
           {"source": "nowhere"}]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 59), min_size=1, max_size=4), st.sampled_from(FILTERS), st.integers(1, 80))
def test_filtered_semantic_search_is_exact_whichever_path_answers(
    tagged_store: SQLiteMemoryStore, words: list[int], filters: dict[str, Any], limit: int
) -> None:
    """The over-fetched unfiltered top (broad filters) gives what listing every admitted row gives."""
    query = " ".join(f"w{i}" for i in words)
    got = [(h.id, h.score) for h in tagged_store.search_semantic(query, SCOPE, filters, limit)]
    real = tagged_store._filtered_top
    tagged_store._filtered_top = lambda *a, **k: None  # type: ignore[method-assign]
    try:
        exact = [(h.id, h.score) for h in tagged_store.search_semantic(query, SCOPE, filters, limit)]
    finally:
        tagged_store._filtered_top = real  # type: ignore[method-assign]
    assert [s for _, s in got] == pytest.approx([s for _, s in exact], abs=1e-6)
    if got:  # rows tied with the last one may be cut either way; every row above the cut is the same
        last = got[-1][1]
        assert {i for i, s in got if s > last + 1e-6} == {i for i, s in exact if s > last + 1e-6}
    assert all(tagged_store.get(i).metadata.items() >= filters.items() for i, _ in got)
