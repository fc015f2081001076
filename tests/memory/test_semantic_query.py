"""``_scoring.semantic_query``: the text a query is embedded as."""

from __future__ import annotations

from pathlib import Path

import pytest

from atomic_agents.memory import HashingEmbedder, Scope, SQLiteMemoryStore
from atomic_agents.memory._scoring import UBIQUITOUS_IDF, UBIQUITOUS_MIN_ROWS, semantic_query, stems

COMMON = {"carolin": 1e-6, "melani": 0.2}
RARE = {"hike": 4.1, "bike": 3.0, "ridg": 5.0}


def test_drops_only_words_below_the_idf_line() -> None:
    idfs = {**COMMON, **RARE, "week": UBIQUITOUS_IDF}  # exactly on the line: kept
    got = semantic_query("Did Caroline and Melanie hike near the ridge last week?", idfs, 500)
    assert got == "Did and hike near the ridge last week?"


def test_possessives_and_case_go_with_the_word() -> None:
    assert semantic_query("Where is CAROLINE's bike?", {**COMMON, **RARE}, 500) == "Where is bike?"
    assert semantic_query("Where is Caroline\u2019s bike?", {**COMMON, **RARE}, 500) == "Where is bike?"


def test_unchanged_when_nothing_else_would_be_left_or_the_store_is_small() -> None:
    assert semantic_query("Caroline and Melanie?", COMMON, 500) == "Caroline and Melanie?"
    q = "When did Caroline hike?"
    assert semantic_query(q, {**COMMON, **RARE}, UBIQUITOUS_MIN_ROWS - 1) == q
    assert semantic_query(q, {**COMMON, **RARE}, UBIQUITOUS_MIN_ROWS) == "When did hike?"
    assert semantic_query(q, {}, 500) == q
    assert semantic_query(q, RARE, 500) == q  # no common word


def test_a_word_that_only_contains_a_common_word_stays() -> None:
    # only whole words (and their 's) go: "Melbourne" is not "Mel"
    idfs = {stems(["mel"])["mel"]: 1e-6, stems(["melbourne"])["melbourne"]: 4.0, **RARE}
    assert semantic_query("Did Mel hike in Melbourne?", idfs, 500) == "Did hike in Melbourne?"


def _shared(tmp_path: Path) -> tuple[SQLiteMemoryStore, Scope, str]:
    store = SQLiteMemoryStore(tmp_path / "m.db", embedder=HashingEmbedder())
    for n in range(4):
        store.remember_many([(f"Speaker{n}: a line about topic {i}", None) for i in range(250)], Scope(f"chat-{n}", "u"))
    scope = Scope("chat", "u")
    hike = store.remember("Caroline: I went hiking in the hills last week and got lost near the ridge", None, scope)
    for i in range(60):
        store.remember(f"Caroline: {['Cool', 'Wow', 'Nice', 'Haha'][i % 4]}!", None, scope)
        store.remember(f"Melanie: tell me more about turn {i}", None, scope)
    return store, scope, hike


def test_the_scope_counts_leave_out_its_speakers_name_within_their_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from atomic_agents.memory import _sqlite_keyword

    store, scope, hike = _shared(tmp_path)
    q = "When did Caroline go hiking?"
    rows = store._sync().scope_rows(scope.key())
    assert rows == 121
    assert store._semantic_text(q) == q  # the store's counts alone: the name is in 6% of it
    assert store._semantic_text(q, scope, rows) == "When did go hiking?"
    assert store.recall(q, scope, limit=1)[0].id == hike
    # a scope past SCOPE_DF_MAX_ROWS, or a word held by more than SCOPE_DF_MAX_HITS rows store-wide, is not counted
    monkeypatch.setattr(_sqlite_keyword, "SCOPE_DF_MAX_ROWS", 100)
    assert store._semantic_text(q, scope, rows) == q and store.recall(q, scope, limit=1)[0].id != hike
    monkeypatch.setattr(_sqlite_keyword, "SCOPE_DF_MAX_ROWS", 20_000)
    monkeypatch.setattr(_sqlite_keyword, "SCOPE_DF_MAX_HITS", 50)
    store.remember("Melanie: one more turn", None, scope)  # a write: the counts are taken again
    assert store._semantic_text(q, scope, rows + 1) == q
    # the scope that is the whole store has the store's counts: nothing is counted twice
    solo = SQLiteMemoryStore(tmp_path / "solo.db", embedder=HashingEmbedder())
    solo.remember_many([(f"Caroline: turn {i}", None) for i in range(80)], scope)
    assert solo._scope_idfs(q, scope, solo._idf(q), 80, 80) is None
    store.close()
    solo.close()


def test_word_counts_are_kept_between_queries_and_follow_every_write(tmp_path: Path) -> None:
    """Each stem's row count is read once until a write: ours, or another connection's."""
    from atomic_agents.memory._scoring import idf

    db = tmp_path / "m.db"
    store, other = SQLiteMemoryStore(db, embedder=HashingEmbedder()), SQLiteMemoryStore(db, embedder=HashingEmbedder())
    scope = Scope(agent_id="a", user_id="u")
    store.remember_many([(f"note {i} about the deploy", {}) for i in range(4)] + [("a ridge hike", {})], scope)
    first = store._idf("deploy ridge")
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    again = store._idf("ridge deploy")  # another query, the same words: no vocabulary lookup
    assert again == first and not any("memories_fts_vocab" in s for s in statements)
    other.remember("the ridge trail after the deploy", {}, scope)  # another connection's write
    after = store._idf("deploy ridge")
    assert any("memories_fts_vocab" in s for s in statements)
    (deploy,) = stems(["deploy"]).values()
    (ridge,) = stems(["ridge"]).values()
    assert after[deploy] == pytest.approx(idf(6, 5)) and after[ridge] == pytest.approx(idf(6, 2))
    store.remember("ridge walk", {}, scope)  # our own write
    assert store._idf("ridge")[ridge] == pytest.approx(idf(7, 3))
    store.close()
    other.close()
