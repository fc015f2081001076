"""Retrieval quality of the default model through the real store (SQLite + MiniLM int8).

The bar (issue 3): on >= 100 labelled query->memory pairs with varied wording,
recall@1 >= 0.9, and ATP's 0.45 floor keeps >= 95% of true matches while
admitting < 5% of unrelated ones. ``NATURAL`` queries are asked the way agents
ask; ``PAIRS`` queries are harder synonym rewrites, held to a lower regression
floor and reported in the README as the model's known limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from atomic_agents.memory import RELEVANCE_FLOOR, MiniLMEmbedder, Scope, SQLiteMemoryStore

from .retrieval_set import NATURAL, PAIRS, UNRELATED


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> tuple[SQLiteMemoryStore, Scope, list[str]]:
    store = SQLiteMemoryStore(tmp_path_factory.mktemp("rq") / "memory.db", embedder=MiniLMEmbedder(), durable=False)
    scope = Scope("atp", "eval")
    ids = store.remember_many([(m, {"i": i}) for i, (m, _) in enumerate(PAIRS)], scope)
    return store, scope, ids


def _measure(store: SQLiteMemoryStore, scope: Scope, ids: list[str], queries: list[str]) -> tuple[float, float]:
    top1 = kept = 0
    for want, query in zip(ids, queries, strict=True):
        hits = store.recall(query, scope, limit=len(ids))
        top1 += hits[0].id == want
        kept += next(h.score for h in hits if h.id == want) >= RELEVANCE_FLOOR
    return top1 / len(ids), kept / len(ids)


def test_the_labelled_set_is_big_enough() -> None:
    assert len(PAIRS) == len(NATURAL) >= 100 and len(UNRELATED) >= 20
    assert len({m for m, _ in PAIRS}) == len(PAIRS)


def test_recall_at_1_and_relevance_floor_on_natural_queries(loaded: tuple[SQLiteMemoryStore, Scope, list[str]]) -> None:
    store, scope, ids = loaded
    recall_at_1, kept = _measure(store, scope, ids, NATURAL)
    print(f"natural: recall@1={recall_at_1:.3f} kept_at_floor={kept:.3f}")
    assert recall_at_1 >= 0.9
    assert kept >= 0.95


def test_floor_admits_few_unrelated_queries(loaded: tuple[SQLiteMemoryStore, Scope, list[str]]) -> None:
    store, scope, ids = loaded
    admitted = sum(store.recall(q, scope, limit=1)[0].score >= RELEVANCE_FLOOR for q in UNRELATED)
    # and across wrong (query, memory) pairs of the labelled set
    wrong = wrong_admitted = 0
    for want, query in zip(ids, NATURAL, strict=True):
        for h in store.recall(query, scope, limit=len(ids)):
            if h.id != want:
                wrong += 1
                wrong_admitted += h.score >= RELEVANCE_FLOOR
    print(f"unrelated admitted={admitted}/{len(UNRELATED)} wrong pairs admitted={wrong_admitted}/{wrong}")
    assert admitted / len(UNRELATED) < 0.05
    assert wrong_admitted / wrong < 0.05


def test_hard_synonym_rewrites_stay_above_the_measured_baseline(loaded: tuple[SQLiteMemoryStore, Scope, list[str]]) -> None:
    # Measured 0.78 / 0.59 when written with raw cosines; since issue 8 the score is calibrated (the hybrid map
    # of the cosine and the hit's words, fitted on the labelled dev split) and 0.27 of these hard rewrites keep it
    # (0.25 with the cosine alone). Regression guard only.
    store, scope, ids = loaded
    recall_at_1, kept = _measure(store, scope, ids, [q for _, q in PAIRS])
    print(f"hard: recall@1={recall_at_1:.3f} kept_at_floor={kept:.3f}")
    assert recall_at_1 >= 0.72
    assert kept >= 0.2


def test_default_model_loads_from_installed_packages_offline() -> None:
    model = MiniLMEmbedder.locate()
    assert "site-packages" in str(model) or "dist-packages" in str(model)
    assert model.name == "model.onnx"
    assert not str(model).startswith(str(Path(__file__).parents[2] / "src"))
