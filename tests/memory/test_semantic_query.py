"""``_scoring.semantic_query``: the text a query is embedded as."""

from __future__ import annotations

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
