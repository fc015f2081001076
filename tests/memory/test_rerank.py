"""The opt-in re-rank stage: ``search_hybrid(..., rerank=True)`` (memory/_rerank.py) on every backend."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from atomic_agents.cli import main
from atomic_agents.exceptions import ValidationError
from atomic_agents.memory import RELEVANCE_FLOOR, MemoryStore, MiniLMEmbedder, Scope, SQLiteMemoryStore
from atomic_agents.memory import _rerank
from atomic_agents.memory._embed import BaseEmbedder, HashingEmbedder

SCOPE = Scope("rerank", "test")


# -- every backend ----------------------------------------------------------------------------------


def _notes(store: MemoryStore, scope: Scope) -> dict[str, str]:
    texts = [
        "Bob is allergic to peanuts, keep them out of the team lunch",
        "Bob went skiing in the Alps with Maya last winter",
        "the billing deploy failed after the database migration",
        "Maya adopted a grey cat called Pebble",
        "lunch on Friday is at the Italian place near the office",
        *(f"unrelated filler note {i} about printers and toner" for i in range(8)),
    ]
    return {store.remember(t, {"goal_id": "g1" if i % 2 else "g2"}, scope): t for i, t in enumerate(texts)}


def test_rerank_keeps_the_candidates_and_the_top_hit_and_scores_never_rise(store: MemoryStore, scope: Scope) -> None:
    _notes(store, scope)
    for query in ("what should Bob not eat at lunch?", "billing deploy", "Maya cat"):
        plain = store.search_hybrid(query, scope, limit=50)
        ranked = store.search_hybrid(query, scope, limit=50, rerank=True)
        assert ranked and {h.id for h in ranked} <= {h.id for h in plain}, query
        assert ranked[0].id == plain[0].id, query  # the hybrid top-1 stays first
        scores = [h.score for h in ranked]
        assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True), query
        assert len(store.search_hybrid(query, scope, limit=2, rerank=True)) == min(2, len(plain))


def test_rerank_honours_scope_and_filters(store: MemoryStore, scope: Scope) -> None:
    _notes(store, scope)
    other = Scope("someone", "else", org_id="acme", workspace_id="acme/web")
    assert store.search_hybrid("Bob lunch peanuts", other, rerank=True) == []
    got = store.search_hybrid("Bob lunch peanuts", scope, {"goal_id": "g1"}, 10, rerank=True)
    assert got and all(h.metadata["goal_id"] == "g1" for h in got)


def test_an_embedder_without_token_vectors_cannot_rerank_and_says_so(make_store: Any, scope: Scope) -> None:
    class PooledOnly(BaseEmbedder):
        model_id, dimension = "pooled-only-fake", 16

        def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
            return HashingEmbedder(16).embed_batch(texts)

    store = make_store(PooledOnly())
    store.remember("billing deploy failed", None, scope)
    assert store.search_hybrid("billing deploy", scope)  # plain hybrid works
    with pytest.raises(ValidationError) as err:
        store.search_hybrid("billing deploy", scope, rerank=True)
    assert err.value.field == "rerank" and "pooled-only-fake" in str(err.value)


# -- the stage itself ---------------------------------------------------------------------------------


def test_maxsim_is_the_mean_and_min_best_match_of_the_query_tokens() -> None:
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    m = np.array([[1.0, 0.0], [0.6, 0.8]])
    assert _rerank.maxsim(q, m) == pytest.approx((0.9, 0.8))
    assert _rerank.maxsim(q, np.empty((0, 2))) == (0.0, 0.0)


def test_a_query_splits_into_questions_before_and_plus_a_question_word() -> None:
    assert _rerank.query_parts("what broke and how was it fixed ?".split()) == [[1], [6]]
    assert _rerank.query_parts("who is karim , and why is he leaving ?".split()) == [[2], [8]]
    assert _rerank.query_parts("bob and maya went skiing".split()) == [[0, 2, 3, 4]]  # "and" + no question word
    assert _rerank.query_parts("which test went badly , and why ?".split()) == [[1, 2, 3]]  # "why" alone: no content
    assert _rerank.query_parts("what is it ?".split()) == [[0, 1, 2, 3]]  # no content token: every token


def test_a_two_part_question_is_matched_by_the_part_the_memory_answers() -> None:
    emb = HashingEmbedder()
    memory = ["the billing deploy broke after the migration"]
    one = _rerank.signals(emb, "billing deploy broke", memory)
    both = _rerank.signals(emb, "billing deploy broke and who replaced the printer toner", memory)
    assert one == both == [(pytest.approx(1.0), pytest.approx(1.0))]  # the unanswered second question is not held against it
    whole = _rerank.maxsim(_rerank._query_side(*emb.token_vectors(["billing deploy broke who replaced printer toner"])[0]),
                           emb.token_vectors(memory)[0][1])  # fmt: skip
    assert whole[1] < 0.5  # read as one question, the memory misses half of it


def test_rerank_reorders_below_the_top_hit_by_token_matches() -> None:
    emb = HashingEmbedder()
    texts = {1: "nothing shared here", 2: "printer toner again", 3: "the peanut allergy of bob", 4: "bob"}
    fused = [(0.4, 1), (0.3, 2), (0.2, 4), (0.1, 3)]
    cos = {1: 0.3, 2: 0.3, 3: 0.3, 4: 0.3}
    out = _rerank.rerank("bob peanut allergy", fused, cos, {}, texts, emb, depth=4)
    assert [k for _, k in out] == [1, 3, 4, 2]  # top-1 kept; then by how many query words find a match
    assert [s for s, _ in out] == sorted((s for s, _ in out), reverse=True)
    tail = _rerank.rerank("bob peanut allergy", fused, cos, {}, texts, emb, depth=2)
    assert [k for _, k in tail][2:] == [4, 3]  # past the depth: the hybrid order, under the last cap
    assert _rerank.rerank("anything", [], {}, {}, {}, emb) == []


def test_plain_search_hybrid_does_not_load_the_rerank_module(tmp_path: Path) -> None:
    code = (
        "import sys; from atomic_agents.memory import SQLiteMemoryStore, HashingEmbedder, Scope\n"
        f"s = SQLiteMemoryStore({str(tmp_path / 'm.db')!r}, embedder=HashingEmbedder())\n"
        "sc = Scope('a', 'u'); s.remember('billing deploy failed', None, sc); s.search_hybrid('billing', sc)\n"
        "print('atomic_agents.memory._rerank' in sys.modules)\n"
        "s.search_hybrid('billing', sc, rerank=True); print('atomic_agents.memory._rerank' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


# -- the real model -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_store(tmp_path_factory: pytest.TempPathFactory) -> SQLiteMemoryStore:
    store = SQLiteMemoryStore(tmp_path_factory.mktemp("rerank") / "m.db", embedder=MiniLMEmbedder(), durable=False)
    store.remember_many([
        ("Bob is allergic to peanuts; keep them out of his lunch.", None),
        ("Bob went skiing in the Alps last winter and broke his wrist.", None),
        ("Maya enjoys hiking with Bob on weekends.", None),
        ("The nightly backup job for the Postgres cluster now runs at 02:00 UTC.", None),
        ("Maya adopted a grey cat called Pebble from the shelter last Saturday.", None),
    ], SCOPE)  # fmt: skip
    return store


def test_rerank_lifts_an_answer_over_the_floor_that_plain_hybrid_scores_low(minilm_store: SQLiteMemoryStore) -> None:
    query = "what food should we keep away from Bob?"  # no shared content word but "Bob"
    plain = minilm_store.search_hybrid(query, SCOPE, limit=3)
    ranked = minilm_store.search_hybrid(query, SCOPE, limit=3, rerank=True)
    assert "peanuts" in ranked[0].content and ranked[0].score >= RELEVANCE_FLOOR
    assert plain[0].id == ranked[0].id and plain[0].score < RELEVANCE_FLOOR  # what the stage adds


def test_rerank_keeps_a_same_person_question_the_store_cannot_answer_below_the_floor(minilm_store: SQLiteMemoryStore) -> None:
    for query in ("What is Bob's favourite film?", "Which university did Maya study at?"):
        ranked = minilm_store.search_hybrid(query, SCOPE, limit=3, rerank=True)
        assert ranked and ranked[0].score < RELEVANCE_FLOOR, (query, ranked[0].content, ranked[0].score)


_MINILM = MiniLMEmbedder()
_FILLER = [
    "The printer on the third floor needs new toner every two weeks.",
    "Lunch on Friday is at the Italian place near the station.",
    "The quarterly report is due at the end of March.",
    "Parking permits are renewed in January at the front desk.",
]


def test_a_memory_missing_the_querys_rarest_word_scores_lower_than_the_same_memory_with_it(make_store: Any) -> None:
    store = make_store(_MINILM)
    with_it, without = Scope("wifi", "with"), Scope("wifi", "without")
    store.remember("Guest Wi-Fi in the Grenoble studio: the password is printed on the card at reception.", None, with_it)
    store.remember("Guest Wi-Fi in the Lyon office: the password is printed on the card at reception.", None, without)
    for sc in (with_it, without):
        for text in _FILLER:
            store.remember(text, None, sc)
    query = "What is the Wi-Fi password in the Grenoble studio?"
    got = {sc: store.search_hybrid(query, sc, limit=1, rerank=True)[0] for sc in (with_it, without)}
    assert "Grenoble" in got[with_it].content and "Lyon" in got[without].content
    assert got[with_it].score >= RELEVANCE_FLOOR > got[without].score, {sc.user_id: h.score for sc, h in got.items()}


def test_a_paraphrase_asked_together_with_another_question_still_scores_above_the_floor(make_store: Any, scope: Scope) -> None:
    store = make_store(_MINILM)
    store.remember("Bob is allergic to peanuts; keep them out of his lunch.", None, scope)
    for text in _FILLER:
        store.remember(text, None, scope)
    for query in ("what food should we keep away from Bob?", "what food should we keep away from Bob, and when is his birthday?"):
        (hit,) = store.search_hybrid(query, scope, limit=1, rerank=True)
        assert "peanuts" in hit.content and hit.score >= RELEVANCE_FLOOR, (query, hit.score)


def test_the_minilm_token_vectors_are_unit_rows_without_special_tokens() -> None:
    ((tokens, vecs),) = MiniLMEmbedder().token_vectors(["Bob is allergic to peanuts"])
    assert tokens[0] == "bob" and "[CLS]" not in tokens and "[SEP]" not in tokens
    assert vecs.shape == (len(tokens), 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_the_query_token_states_come_from_the_query_embedding_pass_without_a_second_model_run() -> None:
    emb = MiniLMEmbedder()
    query = "what food should we keep away from Bob?"
    emb.embed_batch([query])  # the search's semantic pass
    runs: list[int] = []
    session = emb._session
    real_run = session.run

    class Counting:
        def run(self, *args: Any, **kwargs: Any) -> Any:
            runs.append(1)
            return real_run(*args, **kwargs)

    emb._session = Counting()
    try:
        ((tokens, vecs),) = emb.token_vectors([query])
        assert runs == []  # served from the embedding pass
        ((other, _),) = emb.token_vectors(["Bob is allergic to peanuts"])
        assert runs == [1] and other[0] == "bob"  # another text is read by the model
    finally:
        emb._session = session
    ((fresh_tokens, fresh_vecs),) = MiniLMEmbedder().token_vectors([query])  # a fresh process-like embedder
    assert tokens == fresh_tokens and np.array_equal(vecs, fresh_vecs)


# -- the CLI --------------------------------------------------------------------------------------------


def test_cli_search_hybrid_takes_rerank(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")
    monkeypatch.setenv("ATOMIC_AGENTS_DB", str(tmp_path / "memory.db"))
    who = ["--agent-id", "builder", "--user-id", "alice"]
    for text in ("Bob is allergic to peanuts", "the cat sleeps on the sofa"):
        with pytest.raises(SystemExit):
            main(["memory", "remember", *who, text])
    capsys.readouterr()
    results = []
    for extra in ([], ["--rerank"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["memory", "search-hybrid", *who, "bob peanuts", *extra])
        assert not exit_info.value.code
        results.append(json.loads(capsys.readouterr().out)["results"])
    assert results[0][0]["id"] == results[1][0]["id"] and "peanuts" in results[1][0]["content"]
    assert results[1][0]["score"] != results[0][0]["score"]  # the stage's own score map


@pytest.mark.parametrize("bad", ["false", "yes", 1, 0, None, [True]])
def test_a_rerank_that_is_not_a_bool_is_a_typed_error(store: MemoryStore, scope: Scope, bad: object) -> None:
    """``rerank="false"`` (a string from JSON or a form) is truthy: it must not silently re-rank, nor 0 silently not."""
    _notes(store, scope)
    with pytest.raises(ValidationError) as err:
        store.search_hybrid("Bob lunch", scope, rerank=bad)  # type: ignore[arg-type]
    assert err.value.field == "rerank"
