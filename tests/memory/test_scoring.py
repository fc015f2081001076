"""Scores users see are in [0, 1]; keyword hits never fall under the relevance floor."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from atomic_agents.memory import KEYWORD_FLOOR, RELEVANCE_FLOOR
from atomic_agents.memory._scoring import fts_query, fuse, keyword_scores, keyword_terms, semantic_score

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(st.lists(st.floats(min_value=-1e6, max_value=0.0, allow_nan=False), min_size=1, max_size=50))
def test_bm25_values_of_any_sign_and_scale_map_into_half_to_one(values: list[float]) -> None:
    scores = keyword_scores(values)
    assert all(KEYWORD_FLOOR <= s <= 1.0 for s in scores)
    assert max(scores) == 1.0
    # better (more negative) bm25 never scores lower
    order = sorted(range(len(values)), key=lambda i: values[i])
    assert all(scores[a] >= scores[b] for a, b in zip(order, order[1:], strict=False))


@given(unit, unit)
def test_fusion_is_bounded_and_never_below_either_signal(sem: float, kw: float) -> None:
    f = fuse(sem, kw)
    assert max(sem, kw) <= f <= 1.0


@given(unit)
def test_a_keyword_hit_stays_above_the_floor_whatever_the_semantic_score(sem: float) -> None:
    assert fuse(sem, KEYWORD_FLOOR) >= RELEVANCE_FLOOR


@given(st.floats(min_value=-1.0, max_value=1.0, allow_nan=False))
def test_semantic_scores_are_clipped_cosines(cos: float) -> None:
    assert 0.0 <= semantic_score(cos) <= 1.0


def test_keyword_queries_are_any_word_and_quote_operators() -> None:
    assert keyword_terms("The deploy of the billing API") == ["deploy", "billing", "api"]
    assert keyword_terms("the of") == ["the", "of"]
    assert fts_query('deploy AND "x" -y*') == '"deploy" OR "x" OR "y"'
    assert fts_query("!!!") is None
