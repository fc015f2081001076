"""Scores are one calibrated scale in [0, 1]; every map is monotone in its signal."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from atomic_agents.memory import RELEVANCE_FLOOR, HashingEmbedder
from atomic_agents.memory._scoring import (
    asks,
    DEFAULT,
    GENERIC,
    bm25,
    calibration_for,
    fts_query,
    fuse_pool,
    hybrid_rank,
    hybrid_score,
    idf,
    held_signals,
    keyword_coverage,
    keyword_evidence,
    keyword_score,
    keyword_terms,
    name_words,
    part_coverage,
    query_names,
    query_parts,
    semantic_score,
    stems,
    tokens,
)

#: the default constants with a conversation context share (hy_ctx) whatever DEFAULT's is
CTX = replace(DEFAULT, hy_ctx=0.5)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
cosine = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)


@given(st.floats(min_value=0.0, max_value=1e6, allow_nan=False), st.floats(min_value=0.0, max_value=1e6, allow_nan=False))
def test_keyword_evidence_is_in_unit_interval(b: float, mass: float) -> None:
    assert 0.0 <= keyword_evidence(b, mass) <= 1.0


@given(cosine, cosine)
def test_semantic_score_is_bounded_and_monotone(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    for cal in (DEFAULT, GENERIC):
        assert 0.0 <= semantic_score(lo, cal) <= semantic_score(hi, cal) <= 1.0


@given(unit, unit, unit, unit, st.booleans())
def test_keyword_score_is_bounded_and_monotone(a: float, b: float, u1: float, u2: float, lacks: bool) -> None:
    """It never falls as the memory holds more of the query (evidence or coverage), a missing name
    never raises it, and a memory matching no word scores 0."""
    (lo, hi), (ulo, uhi) = sorted((a, b)), sorted((u1, u2))
    for cal in (DEFAULT, GENERIC):
        assert 0.0 <= keyword_score(lo, ulo, lacks, cal) <= keyword_score(hi, uhi, lacks, cal) <= 1.0
        assert keyword_score(hi, uhi, True, cal) <= keyword_score(hi, uhi, False, cal)
        assert keyword_score(0.0, uhi, lacks, cal) == 0.0


@given(cosine, cosine, unit, unit, unit, unit, unit)
def test_hybrid_score_is_bounded_and_rises_with_meaning_and_with_coverage(
    c1: float, c2: float, v1: float, v2: float, e: float, k: float, v: float
) -> None:
    (clo, chi), (vlo, vhi) = sorted((c1, c2)), sorted((v1, v2))
    for cal in (DEFAULT, GENERIC):
        assert 0.0 <= hybrid_score(clo, e, k, cal, v) <= hybrid_score(chi, e, k, cal, v) <= 1.0
        assert hybrid_score(c1, e, k, cal, vlo) <= hybrid_score(c1, e, k, cal, vhi)
        assert hybrid_rank(clo, e, k, cal, v) <= hybrid_rank(chi, e, k, cal, v)
        assert hybrid_rank(c1, e, k, cal, vlo) <= hybrid_rank(c1, e, k, cal, vhi)
        # lacking a name the question asks about never ranks a candidate higher
        assert hybrid_rank(c1, e, k, cal, v, lacks_name=True) < hybrid_rank(c1, e, k, cal, v)


@given(cosine)
def test_a_memory_holding_every_query_word_outranks_and_outscores_one_holding_none(c: float) -> None:
    # same meaning; one holds all of the query's words (the query's best match), the other none
    for cal in (DEFAULT, GENERIC):
        assert hybrid_rank(c, 1.0, 1.0, cal, 1.0) > hybrid_rank(c, 0.0, 0.0, cal, 0.0)
        assert hybrid_score(c, 1.0, 1.0, cal, 1.0) >= hybrid_score(c, 0.0, 0.0, cal, 0.0)


def test_keyword_coverage_is_the_held_share_of_the_idf_mass() -> None:
    assert keyword_coverage(3.0, 4.0) == 0.75
    assert keyword_coverage(0.0, 4.0) == keyword_coverage(2.0, 0.0) == 0.0
    assert keyword_coverage(5.0, 4.0) == 1.0


@given(st.dictionaries(st.integers(0, 50), cosine, max_size=20), st.dictionaries(st.integers(0, 50), unit, max_size=20))
def test_fused_pool_is_sorted_bounded_and_keeps_only_candidates_with_a_signal(cos: dict[int, float], ev: dict[int, float]) -> None:
    fused = fuse_pool(cos, ev, DEFAULT)
    assert [s for s, _ in fused] == sorted((s for s, _ in fused), reverse=True)
    assert all(0.0 <= s <= 1.0 for s, _ in fused)
    assert {k for _, k in fused} == {k for k, c in cos.items() if c > 0} | {k for k, e in ev.items() if e > 0}


@given(
    st.dictionaries(st.integers(0, 50), cosine, max_size=20),
    st.dictionaries(st.integers(0, 50), unit, max_size=20),
    st.dictionaries(st.integers(0, 50), unit, max_size=20),
    st.sets(st.integers(0, 50), max_size=10),
)
def test_fused_pool_ranks_by_the_ranking_key_and_scores_top1_by_its_own_calibrated_score(
    cos: dict[int, float], ev: dict[int, float], cov: dict[int, float], lacking: set[int]
) -> None:
    for cal in (DEFAULT, GENERIC):
        fused = fuse_pool(cos, ev, cal, cov, lacking)
        if not fused:
            continue
        best = max(ev.values(), default=0.0)

        def rel(k: int, best: float = best) -> float:
            return ev.get(k, 0.0) / best if best > 0 else 0.0

        keys = [k for _, k in fused]
        def key(k: int) -> tuple[float, int]:
            return hybrid_rank(cos.get(k, 0.0), ev.get(k, 0.0), rel(k), cal, cov.get(k, 0.0), k in lacking), k

        def score(k: int) -> float:
            return hybrid_score(cos.get(k, 0.0), ev.get(k, 0.0), rel(k), cal, cov.get(k, 0.0), k in lacking)

        keys = [k for _, k in fused]
        assert keys == sorted(keys, key=key, reverse=True)
        assert fused[0][0] == score(keys[0])
        # every score is the hit's own, capped by the one above it
        for (s_hi, _), (s_lo, k) in itertools.pairwise(fused):
            assert s_lo == min(s_hi, score(k))


def test_hybrid_floor_a_weak_keyword_only_match_is_out_a_clear_paraphrase_is_in() -> None:
    # the query's best keyword match (relative 1), holding little of its IDF mass, barely related in meaning
    assert hybrid_score(0.15, 0.2, 1.0, DEFAULT, 0.2) < RELEVANCE_FLOOR
    assert hybrid_score(0.15, 0.2, 1.0, GENERIC, 0.2) < RELEVANCE_FLOOR
    # no shared word, a close meaning: relevant; unrelated meaning: not
    assert hybrid_score(0.6, 0.0, 0.0, DEFAULT) >= RELEVANCE_FLOOR > hybrid_score(0.25, 0.0, 0.0, DEFAULT)
    # every query word present and related in meaning
    assert hybrid_score(0.5, 1.0, 1.0, DEFAULT, 1.0) >= RELEVANCE_FLOOR


def test_a_weak_keyword_match_scores_below_the_floor_and_a_full_one_above() -> None:
    # One common word of a four-word question matched: little of the query's IDF mass.
    mass = 0.3 + 3 * 4.0
    ev = keyword_evidence(bm25({"team": 1}, 12, 12.0, {"team": 0.3}), mass)
    assert keyword_score(ev, keyword_coverage(0.3, mass)) < RELEVANCE_FLOOR
    # One rare word of two, repeated: the most evidence BM25 gives it, half of what was asked.
    idfs = {"zanzibar": 4.0, "runbook": 4.0}
    ev = keyword_evidence(bm25({"zanzibar": 5}, 6, 10.0, idfs), sum(idfs.values()))
    assert keyword_score(ev, keyword_coverage(4.0, 8.0)) < RELEVANCE_FLOOR
    # Every query word once, at average length: evidence ~1.
    ev = keyword_evidence(bm25({"zanzibar": 1, "runbook": 1}, 10, 10.0, idfs), sum(idfs.values()))
    assert abs(ev - 1.0) < 1e-9 and keyword_score(ev, 1.0) >= RELEVANCE_FLOOR
    # ... but lacking the name the question asks about ("the *Lyon* office's runbook"), it is not relevant
    assert keyword_score(ev, 0.75, lacks_name=True) < RELEVANCE_FLOOR <= keyword_score(ev, 0.75)


@pytest.mark.parametrize(
    ("query", "text", "want"),
    [
        ("Where is the user_id column?", "the user id column", (1.0, False)),  # a phrase of two tokens, in order
        ("Where is the user_id column?", "the id of the user column", (0.5, False)),  # its tokens, not in order
        ("What did Maya deploy?", "Bob deployed it", (0.5, True)),  # stems; the name lacking
        ("What broke and how was it fixed?", "the fix shipped", (1.0, False)),  # the best-held question
        ("deploy", "", (0.0, False)),
    ],
)
def test_held_signals(query: str, text: str, want: tuple[float, bool]) -> None:
    idfs = {st: 1.0 for st in stems(keyword_terms(query)).values()}
    assert held_signals(query, idfs, [text]) == [want]


def test_idf_follows_fts5() -> None:
    assert idf(100, 1) > idf(100, 10) > idf(100, 40)
    assert idf(100, 90) == 1e-6  # FTS5 floors negative IDF


def test_unknown_embedders_keep_clipped_cosines() -> None:
    assert calibration_for("hashing-fake-256") is GENERIC and semantic_score(0.37, GENERIC) == 0.37
    assert calibration_for("all-MiniLM-L6-v2-onnx-int8") is DEFAULT
    # its floor (0.3) sits where the default model's cosine alone scores 0.45 (sem_a, sem_b: 0.55)
    fake = calibration_for(HashingEmbedder())
    assert fake.raw_semantic and abs(1 / (1 + math.exp(-(DEFAULT.sem_a * (0.3 + fake.cos_shift) + DEFAULT.sem_b))) - 0.45) < 1e-9
    assert semantic_score(0.37, fake, 1.0, True) == 0.37  # its recall scores read no words


@given(cosine, cosine, unit, unit, st.booleans())
def test_a_semantic_hit_is_scored_by_the_hybrid_map_of_what_it_holds(c1: float, c2: float, u1: float, u2: float, lacks: bool) -> None:
    """One scale: a recalled memory scores what the hybrid map gives its cosine and its words (before the
    hybrid's cap), so it rises with meaning and with coverage, and a missing name never raises it."""
    (clo, chi), (ulo, uhi) = sorted((c1, c2)), sorted((u1, u2))
    assert semantic_score(c1, DEFAULT, u1, lacks) == hybrid_score(c1, float(u1 > 0), 0.0, DEFAULT, u1, lacks)
    assert 0.0 <= semantic_score(clo, DEFAULT, u1, lacks) <= semantic_score(chi, DEFAULT, u1, lacks) <= 1.0
    assert semantic_score(c1, DEFAULT, 1.0, lacks) >= semantic_score(c1, DEFAULT, 0.0, lacks)
    if ulo > 0:  # past the step (matches a word), holding more never lowers it
        assert semantic_score(c1, DEFAULT, ulo, lacks) <= semantic_score(c1, DEFAULT, uhi, lacks) + 1e-12
    assert semantic_score(c1, DEFAULT, u1, True) <= semantic_score(c1, DEFAULT, u1, False)


def test_keyword_queries_drop_question_words_and_quote_operators() -> None:
    assert keyword_terms("The deploy of the billing API") == ["deploy", "billing", "api"]
    assert keyword_terms("What did she do when you told my brother?") == ["told", "brother"]
    assert keyword_terms("the of") == ["the", "of"]
    assert fts_query('deploy AND "x" -gate*') == '"deploy" OR "x" OR "gate"'
    assert fts_query("!!!") is None


def test_tokens_are_the_fts5_porter_tokens() -> None:
    assert tokens(["Running databases, café!"]) == [["run", "databas", "cafe"]]
    assert stems(["adopted", "!!"]) == {"adopted": "adopt"}


# -- the name signal and the monotone score map ------------------------------------------------


def test_name_words_are_an_english_questions_capitalised_content_words_past_the_first() -> None:
    assert name_words("What is the Wi-Fi password in the Grenoble studio?") == {"wi", "fi", "grenoble"}
    assert name_words("Where did Sofia study veterinary medicine?") == {"sofia"}
    assert name_words("On which weekday does Maya's boss go over her designs?") == {"maya"}
    assert query_names("Which Redis version runs in production?") == {"redi"}  # as the index stems it
    # "I" and other stopwords are never names; nor is the first word
    assert name_words("When did I meet Ben?") == {"ben"}
    assert name_words("Grenoble is where?") == frozenset()


@pytest.mark.parametrize(
    "query",
    [
        "Grenoble studio wifi password",  # keywords, not a question
        "Wo ist das Wifi Passwort im Grenoble Büro?",  # not English: German capitalises every noun
        "Quel est le mot de passe du Wi-Fi à Grenoble ?",
        "WHAT IS THE WIFI PASSWORD IN GRENOBLE?",  # capitals say nothing
        "What Is The Wifi Password In The Grenoble Studio?",  # title case says nothing
        "what is the wifi password in grenoble?",
        "",
    ],
)
def test_queries_that_are_not_english_sentence_case_questions_get_the_neutral_value(query: str) -> None:
    assert name_words(query) == frozenset() == query_names(query)


@given(cosine, unit, unit, unit)
def test_a_memory_lacking_a_name_the_question_asks_about_scores_lower_than_the_same_memory_holding_it(
    c: float, e: float, k: float, v: float
) -> None:
    for cal in (DEFAULT, GENERIC):
        assert hybrid_score(c, e, k, cal, v, lacks_name=True) <= hybrid_score(c, e, k, cal, v)
    assert hybrid_score(0.6, 0.5, 1.0, DEFAULT, 0.6, lacks_name=True) < hybrid_score(0.6, 0.5, 1.0, DEFAULT, 0.6) - 0.2


@given(cosine, st.floats(min_value=1e-6, max_value=1.0), st.floats(min_value=1e-6, max_value=1.0), unit, unit, unit, unit, st.booleans())
def test_the_default_score_never_falls_as_a_memory_holds_more_of_the_query(
    c: float, e1: float, e2: float, k1: float, k2: float, v1: float, v2: float, lacks: bool
) -> None:
    # past the step at e = 0, more evidence, relative evidence or coverage never lowers the score
    (elo, ehi), (klo, khi), (vlo, vhi) = sorted((e1, e2)), sorted((k1, k2)), sorted((v1, v2))
    assert hybrid_score(c, elo, klo, DEFAULT, vlo, lacks) <= hybrid_score(c, ehi, khi, DEFAULT, vhi, lacks)


def test_at_one_cosine_a_sliver_of_shared_words_scores_below_none_and_all_of_them_above() -> None:
    # The step (fitted on dev, the same sign on test): a memory that shares a few of the query's
    # words owes part of its cosine to them; one that shares none earned it by meaning.
    for c in (0.3, 0.45, 0.6):
        none = hybrid_score(c, 0.0, 0.0, DEFAULT, 0.0)
        assert hybrid_score(c, 0.2, 1.0, DEFAULT, 0.2) < none < hybrid_score(c, 1.0, 1.0, DEFAULT, 1.0)


@given(
    st.dictionaries(st.integers(0, 30), cosine, max_size=15),
    st.dictionaries(st.integers(0, 30), unit, max_size=15),
    st.sets(st.integers(0, 30)),
)
def test_lacking_a_name_lowers_that_candidate_and_its_score_and_nothing_else(
    cos: dict[int, float], ev: dict[int, float], lacking: set[int]
) -> None:
    plain, named = fuse_pool(cos, ev, DEFAULT), fuse_pool(cos, ev, DEFAULT, None, lacking)
    order, named_order = [k for _, k in plain], [k for _, k in named]
    assert sorted(order) == sorted(named_order)
    # the ones lacking a name keep their order among themselves, and so do the others, which
    # are never pushed down
    for group in (lacking, set(order) - lacking):
        assert [k for k in order if k in group] == [k for k in named_order if k in group]
    for k in set(order) - lacking:
        assert named_order.index(k) <= order.index(k)
    # without the ranking weight the name moves scores only: down, and only from the first hit lacking it
    scores_only = fuse_pool(cos, ev, replace(DEFAULT, hy_n=0.0), None, lacking)
    assert [k for _, k in scores_only] == order
    assert all(s_n <= s_p for (s_p, _), (s_n, _) in zip(plain, scores_only, strict=True))
    seen_lacking = False
    for (s_p, k), (s_n, _) in zip(plain, scores_only, strict=True):
        seen_lacking = seen_lacking or k in lacking
        if not seen_lacking:  # no lacking hit at or above this one: its score is untouched
            assert s_n == s_p


@given(
    st.dictionaries(st.integers(0, 40), cosine, max_size=20),
    st.dictionaries(st.integers(0, 40), unit, max_size=20),
    st.dictionaries(st.integers(0, 40), unit, max_size=20),
)
def test_a_candidate_takes_a_share_of_a_better_matching_predecessor_and_nothing_else(
    cos: dict[int, float], ev: dict[int, float], cov: dict[int, float]
) -> None:
    # each key k follows k - 1 (a conversation written in order); hy_ctx = 0 is the plain fusion
    follows = {k: k - 1 for k in range(1, 41)}
    off = replace(DEFAULT, hy_ctx=0.0)
    plain = {k: s for s, k in fuse_pool(cos, ev, off, cov)}
    own = {k for k, c in cos.items() if c > 0} | {k for k, e in ev.items() if e > 0}
    best = max(ev.values(), default=0.0)

    def signals(k: int) -> tuple[float, float]:
        c, e, v = cos.get(k, 0.0), ev.get(k, 0.0), cov.get(k, 0.0)
        rel = e / best if best > 0 else 0.0
        return hybrid_rank(c, e, rel, CTX, v), hybrid_score(c, e, rel, CTX, v)

    def lifted(k: int) -> tuple[float, float]:
        r, s = signals(k)
        if k - 1 not in own:
            return r, s
        pr, ps = signals(k - 1)
        return r + CTX.hy_ctx * max(0.0, pr - r), s + CTX.hy_ctx * max(0.0, ps - s)

    fused = fuse_pool(cos, ev, CTX, cov, (), follows)
    keys = [k for _, k in fused]
    # a candidate with no signal of its own joins only as the successor of one that has some
    assert set(keys) == own | {k for k in range(1, 41) if k - 1 in own}
    assert keys == sorted(keys, key=lambda k: (lifted(k)[0], k), reverse=True)
    for (s_hi, _), (s_lo, k) in itertools.pairwise(fused):
        assert s_lo == min(s_hi, lifted(k)[1])
    if not any(k - 1 in own for k in range(1, 41)):
        assert {k: s for s, k in fused} == plain


def test_context_lifts_the_reply_after_a_matching_turn_only() -> None:
    # 0: a filler, 1: the turn the query matches, 2: the reply (no signal of its own), 3: a weaker match
    cos, ev, cov = {0: 0.2, 1: 0.8, 3: 0.5}, {1: 0.9, 3: 0.4}, {1: 1.0, 3: 0.5}
    assert DEFAULT.hy_ctx > 0.0  # the default model's constants use it
    off = [k for _, k in fuse_pool(cos, ev, replace(DEFAULT, hy_ctx=0.0), cov, (), {2: 1})]
    on = [k for _, k in fuse_pool(cos, ev, DEFAULT, cov, (), {2: 1})]
    assert off == [1, 3, 0] and on == [1, 2, 3, 0]
    # a predecessor that matches worse changes nothing
    assert [k for _, k in fuse_pool(cos, ev, DEFAULT, cov, (), {1: 0})] == [1, 3, 0]


@pytest.mark.parametrize(
    ("text", "asked"),
    [
        ("Ann: Who played at the wedding?", True),
        ("Ann: Who played at the wedding?  \n", True),
        ('Ann: "Who played?"', True),
        ("Ann: Really?!", True),
        ("Ann: Wie war die Hochzeit? 🙂🎉", True),
        ("アンさん：結婚式はどうでしたか？", True),
        ("هل كان الحفل جميلا؟", True),
        ("Ann: Who played? It was great.", False),
        ("FAQ: how do I reset my password? Use the portal.", False),
        ("Bo: It was Jan Kowal!", False),
        ("", False),
        ("?" + " " * 40, False),  # past the tail it looks at
    ],
)
def test_a_memory_asks_when_its_last_sentence_mark_is_a_question_mark(text: str, asked: bool) -> None:
    assert asks(text) is asked


@pytest.mark.parametrize(
    "query, parts",
    [
        ("What was the planned budget and what was the final bill?", [{"plan", "budget"}, {"final", "bill"}]),
        ("What did Sam order and what did he pay and when did it arrive?", [{"sam", "order"}, {"pai"}, {"arriv"}]),
        ("Why did the deploy_job fail and who fixed it?", [{"deploi", "fail"}, {"fix"}]),  # a snake_case word's first stem
        ("Who are Bob and Maya?", []),  # "and" between two names: one question
        ("What broke, and why?", []),  # the second question names nothing of its own
        ("And what is the cache?", []),  # nothing before the "and"
        ("cache and deploy", []),
    ],
)
def test_a_query_splits_into_its_questions_before_and_plus_a_question_word(query: str, parts: list[set[str]]) -> None:
    assert [set(p) for p in query_parts(query)] == parts
    # each part holds only the whole query's own content stems (the ones its IDF mass is made of)
    whole = set(stems(keyword_terms(query)).values())
    assert all(p <= whole for p in query_parts(query))


@given(
    st.dictionaries(st.sampled_from("abcdefgh"), st.floats(min_value=1e-6, max_value=10.0), min_size=2),
    st.data(),
)
def test_part_coverage_is_at_least_the_whole_querys_when_the_parts_split_its_stems(idfs: dict[str, float], data: st.DataObject) -> None:
    stems_ = sorted(idfs)
    cut = data.draw(st.integers(1, len(stems_) - 1))
    parts = [frozenset(stems_[:cut]), frozenset(stems_[cut:])]
    held = set(data.draw(st.lists(st.sampled_from(stems_), unique=True)))
    whole = keyword_coverage(sum(w for t, w in idfs.items() if t in held), sum(idfs.values()))
    got = part_coverage(held, idfs, parts)
    assert whole <= got + 1e-12 and 0.0 <= got <= 1.0
    # a memory holding one whole question covers it fully; holding nothing covers nothing
    assert part_coverage(parts[1], idfs, parts) == 1.0 and part_coverage(set(), idfs, parts) == 0.0
    assert part_coverage(held, idfs, []) == 0.0


@given(
    st.dictionaries(st.integers(0, 30), cosine, max_size=15),
    st.dictionaries(st.integers(0, 30), unit, max_size=15),
    st.dictionaries(st.integers(0, 30), unit, max_size=15),
    st.dictionaries(st.integers(0, 30), unit, max_size=15),
)
def test_the_score_coverage_moves_scores_up_and_never_the_order(
    cos: dict[int, float], ev: dict[int, float], cov: dict[int, float], extra: dict[int, float]
) -> None:
    """A two-part question's best-held question lifts the score (never lowers it) and leaves the ranking alone."""
    scov = {k: max(cov.get(k, 0.0), v) for k, v in {**cov, **extra}.items()}
    for cal in (DEFAULT, GENERIC):
        plain, lifted = fuse_pool(cos, ev, cal, cov), fuse_pool(cos, ev, cal, cov, score_coverage=scov)
        assert [k for _, k in plain] == [k for _, k in lifted]
        assert all(a <= b + 1e-12 for (a, _), (b, _) in zip(plain, lifted, strict=True))
    assert fuse_pool(cos, ev, DEFAULT, cov, score_coverage=cov) == fuse_pool(cos, ev, DEFAULT, cov)


def test_a_memory_answering_one_question_of_two_scores_as_holding_that_question() -> None:
    # holds half the query's IDF mass, all of one question's: scored on the question it answers
    half = fuse_pool({1: 0.45}, {1: 0.5}, DEFAULT, {1: 0.5})[0][0]
    whole = fuse_pool({1: 0.45}, {1: 0.5}, DEFAULT, {1: 0.5}, score_coverage={1: 1.0})[0][0]
    assert whole == hybrid_score(0.45, 0.5, 1.0, DEFAULT, 1.0) > half == hybrid_score(0.45, 0.5, 1.0, DEFAULT, 0.5)
