"""How raw signals become the scores users see: one calibrated scale in [0, 1] for every ranker.

A score estimates "this memory is what the query is after". The same formulas
serve SQLite, PostgreSQL and the fake; each backend only supplies the raw
signals. ``0.45`` (ATP's floor) is where a hit becomes "relevant" whichever
ranker found it: a weak keyword match scores low, a strong paraphrase scores high.

Signals:

- **cosine** ``c``: of unit vectors (the embedder's), in [-1, 1].
- **keyword evidence** ``e`` in [0, 1]: the memory's BM25 (FTS5's own, k1=1.2,
  b=0.75, over porter-stemmed ``unicode61`` tokens) divided by the query's IDF
  mass ``sum(idf(t))`` over its content words (stopwords, including question words,
  dropped), capped at 1. A memory holding every query word once at average length
  has ``e ~ 1``; one holding only a common word has ``e`` near 0. It is absolute:
  unlike "best hit = 1", the best hit of a query that nothing really matches
  still scores low. ``idf(t) = ln((N - n_t + 0.5) / (n_t + 0.5))`` (FTS5's,
  floored at 1e-6) with ``N`` rows indexed and ``n_t`` rows holding ``t``.
- **keyword coverage** ``v`` in [0, 1]: the share of that IDF mass the memory holds,
  ``sum(idf(t) for t in the memory) / sum(idf(t))`` over the query's distinct content
  stems, however often each occurs. BM25 saturates per word, so a memory repeating one
  rare query word can out-score one holding every word; coverage tells them apart.
- **word forms**: a query word is matched in each of its forms the stemmer keeps apart
  (``buy``/``bought``, :func:`match_terms`), each form one more word of FTS5's ``OR`` (BM25
  weighs it by its own row count); coverage and the mass count the word once, held in any
  form, at its commonest form's IDF (:func:`key_groups`). Stems below are these key stems.

Scores (``sigma`` is the logistic function; constants in :data:`DEFAULT`, fitted on
the labelled set's dev split by ``bench/_mem_quality.py --fit``):

- semantic: the hybrid score map below, of the hit's cosine and of what its text holds of the
  query (``u``, ``n`` and the step ``u > 0``; :func:`held_signals`), not capped: one scale
  whatever ranker found the hit. ``sigma(s_a * c + s_b)``, the cosine alone, was the map
  before; the hybrid map keeps 88% of right top-1s where it kept 68%, and admits 8% of
  unanswerable queries where it admitted 22% (the labelled set's test split).
- keyword: ``sigma(k_a * e + k_v * u**2 + k_n * n + k_b)``, with ``u`` and ``n`` as the
  hybrid score reads them (below; :func:`held_signals` from the hits' own tokens). The order
  stays FTS5's (bm25), and a hit's score does not depend on the other hits. Fitted like the
  hybrid score map (right top-1 against an unanswerable query's, the intercept placed for
  ATP's targets), the evidence's weight came out negative (``e`` and ``u`` correlate), so
  it is left at 0: a memory repeating one rare query word out-ranks one holding every word
  in BM25, but scores far lower.
- hybrid: ``k = e / max e`` over the query's candidate pool (its keyword evidence
  relative to the query's best keyword match). Both rankers contribute a pool
  (:data:`HYBRID_POOL` each, or ``4 * limit``) and every candidate gets all signals.
  Candidates are *ranked* by ``h_c * c + h_e * e + h_k * k + h_v * v**2 + h_n * n`` (a pairwise
  logistic ranker's direction; the square rewards holding *all* of the query's words far
  more than holding some; ``n`` below), a reply taking ``hy_ctx`` of its question's lead (below), and *scored* by
  ``sigma(s_c * c + [e > 0] * (s_m + s_cm * max(c, 0) * (1 - u**2)) + s_v * u**2 + s_n * n + s_b)``
  (the default model's map; ``s_e * e + s_k * k`` join it for GENERIC), capped at the score
  of the hit ranked above (scores never rise down the list; the top-1's is its own).
  ``u`` is ``v``, or for a query that asks two things or more (:func:`query_parts`: "What was
  the budget and what was the final bill?") the larger of ``v`` and the share of its
  best-held question's IDF mass (:func:`part_coverage`): a memory answering one question of
  two is relevant, and scored as if it missed half the query it was not.
  ``n`` is 1 when the memory lacks a name the query asks about (:func:`query_names`: the
  capitalised content words past the first of an English question in sentence case; no
  other query has names, so ``n`` stays 0, the neutral value). In the ranking ``n`` stands for
  what coverage cannot say in a chat kept one store per conversation: each speaker's name is
  in half the rows, so its IDF is about 0, and a turn of the other person, or about someone
  else, held as much of the query as one about the person asked about. The two directions differ
  because the questions differ: within one query, keyword coverage and evidence order
  candidates; across queries, what tells a right top-1 from the top-1 of a query the store
  cannot answer is that hit's cosine, how much of the query it holds, and whether it holds
  the names asked about.

  The reply to a question: the candidate written right after one that ends on a question
  (:func:`asks`), in the same scope's timeline, joins the pool, and when the question matches
  better it takes ``hy_ctx`` of the difference in ranking key and in score (:func:`fuse_pool`).
  In a chat the answer is often the reply, sharing no word with what was asked.

  Why the step ``[e > 0]``: on a right top-1 and an unanswerable query's top-1 alike, ``e``
  and ``v`` correlate at 0.99, and a fit over both gave ``e`` a negative weight, so the score
  fell as a memory held more of the query. What the data says is narrower: at one cosine, a
  memory sharing *some* of the query's words (often only a name) is less often right than one
  sharing none, because those words, not the meaning, lift its cosine. So the cosine of a
  partial match counts less, in proportion to the share of the query's IDF mass it lacks.
  Past the step the score never falls as the memory holds more (``e``, ``k``, ``v``), and a
  memory holding every word scores above one holding none at the same cosine.

The ranking (``h_*``, ``hy_ctx`` and ``hy_n``) is fitted on the dev questions of both labelled sets
(``bench/data/recall_eval`` and the long conversations of ``bench/data/longconv``), the score
maps on the first's alone. Constants are fitted for the default model (:data:`DEFAULT`, keyed by its
``model_id``); other embedders (the test fake) get :data:`GENERIC`, whose semantic
map is the identity on clipped cosine, so their recall scores are the cosines
they always were, and whose hybrid score is one logistic of the ranking key.
The hybrid score map is fitted on the dev top-1 hits (right against an unanswerable
query's), its intercept placed where the larger shortfall from ATP's two targets
(>= 90% of right top-1s kept, <= 10% of unanswerable queries admitted) is smallest.
Features were chosen by 5-fold cross-validation on dev (``bench/_mem_quality.py`` prints
the table). Left out: query-level features (how far the top cosine stands out of the
pool, the margin to the second, a z-score, ranks, agreement of the rankers); the answer
type (``when`` and a date or time, ``how much`` and a number, ``who`` and a name): no
better in cross-validation; lacking a rare query word of any case: its weight came out
positive (lacking more, scoring higher); the memory's length: it carries on this set,
whose short memories are mostly filler turns, but its weight would keep every short
memory ("the user is vegetarian") under the floor.

>>> round(keyword_evidence(bm25=2.0, idf_mass=4.0), 2)
0.5
>>> keyword_evidence(bm25=9.0, idf_mass=4.0)
1.0
>>> 0.0 <= hybrid_score(0.6, 0.3, 1.0, DEFAULT) <= 1.0
True
"""

from __future__ import annotations

import math
import re
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, replace

from ._words import (  # re-exported: the backends import the words from here
    _STOPWORDS,
    _WORD,
    _tok_lock,
    _tokenizer,
    fts_query,
    key_groups,
    key_idfs,
    key_stems,
    keyword_terms,
    match_terms,
    name_words,
    query_names,
    query_stems,
    quoted,
    stems,
    tokens,
    word_forms,
)

__all__ = [
    "ASKS_TAIL",
    "DEFAULT",
    "GENERIC",
    "HYBRID_POOL",
    "QUESTION_MARKS",
    "QUESTION_STARTS",
    "SCOPE_DF_MAX_HITS",
    "SCOPE_DF_MAX_ROWS",
    "Calibration",
    "asks",
    "bm25",
    "calibration_for",
    "fts_query",
    "fuse_pool",
    "held_signals",
    "hybrid_rank",
    "hybrid_score",
    "idf",
    "keyword_coverage",
    "keyword_evidence",
    "key_groups",
    "key_idfs",
    "keyword_score",
    "key_stems",
    "keyword_terms",
    "match_terms",
    "name_words",
    "part_coverage",
    "query_names",
    "query_parts",
    "query_stems",
    "quoted",
    "semantic_query",
    "semantic_score",
    "stems",
    "tokens",
    "ubiquitous_at",
    "word_forms",
]

#: FTS5's bm25 constants (SQLite's defaults; the fake and PostgreSQL use the same).
K1, B = 1.2, 0.75
#: Candidates each ranker contributes to a hybrid search (at least; ``4 * limit`` if more).
HYBRID_POOL = 50

#: A query word whose IDF is below this is in more than ~43% of the store's memories (FTS5's
#: ``idf``: ``ln((N - n + 0.5) / (n + 0.5)) < 0.3``): BM25 gives it almost no weight, and the
#: semantic side leaves it out of the text it embeds (:func:`semantic_query`).
UBIQUITOUS_IDF = 0.3
#: Below this many rows the store's document frequencies say too little to leave a word out.
UBIQUITOUS_MIN_ROWS = 50


#: A scope of up to this many memories (not forgotten) also gets its own document frequencies in
#: :func:`semantic_query` (counted at query time; a bigger scope uses the store's alone).
SCOPE_DF_MAX_ROWS = 20_000
#: A word held by more rows than this store-wide is not counted per scope (the count reads its
#: whole doclist, about 1 us a row); the store's frequency decides for it.
SCOPE_DF_MAX_HITS = 20_000


def ubiquitous_at(n_rows: int) -> float:
    """The row count a word must pass for its IDF over ``n_rows`` to fall below :data:`UBIQUITOUS_IDF`.

    >>> round(ubiquitous_at(1000)), idf(1000, 425) >= UBIQUITOUS_IDF > idf(1000, 426)
    (425, True)
    """
    e = math.exp(UBIQUITOUS_IDF)
    return (n_rows + 0.5 - 0.5 * e) / (1.0 + e)


def semantic_query(
    query: str, idfs: Mapping[str, float], n_rows: int, scoped: tuple[Mapping[str, float], int] | None = None
) -> str:
    """The text a query is embedded as: ``query`` without the content words nearly every memory holds.

    A word in nearly half of the store (the user's or the agent's own name in its memories, the
    speaker's name in every turn of a conversation) says nothing about *which* memory is meant,
    and BM25 already ignores it; but a sentence embedding leans on names, so every memory that
    holds it looks close ("Caroline: Cool!" against "When did Caroline go hiking?"). Such words
    (``idfs[stem] < UBIQUITOUS_IDF``, ``idfs`` as the keyword side computes them) are dropped,
    with a possessive ``'s``. The query is unchanged when the store has fewer than
    :data:`UBIQUITOUS_MIN_ROWS` rows, when no word qualifies, or when no other content word
    would be left. ``scoped`` is ``(idfs, n_rows)`` over the searched scope's memories alone (not forgotten)
    (a word is dropped when either says so): with several conversations in one store a speaker's
    name is in a tenth of the store but in half of the scope.

    >>> semantic_query("When did Caroline go hiking?", {"carolin": 1e-6, "hike": 4.1}, 400)
    'When did go hiking?'
    >>> semantic_query("Where is Caroline's bike?", {"carolin": 1e-6, "bike": 3.0}, 400)
    'Where is bike?'
    >>> semantic_query("Caroline?", {"carolin": 1e-6}, 400)
    'Caroline?'
    >>> semantic_query("When did Caroline go hiking?", {"carolin": 1e-6, "hike": 4.1}, 20)
    'When did Caroline go hiking?'
    >>> semantic_query("When did Caroline go hiking?", {"carolin": 2.3, "hike": 4.1}, 4000, ({"carolin": 1e-6}, 400))
    'When did go hiking?'
    """
    by_word = key_stems(keyword_terms(query))
    common: set[str] = set()
    for table, n in ((idfs, n_rows), scoped or ({}, 0)):
        if n >= UBIQUITOUS_MIN_ROWS and table:
            common |= {w for w, st in by_word.items() if table.get(st, UBIQUITOUS_IDF) < UBIQUITOUS_IDF}
    if not common or all(w in common for w in by_word):
        return query
    drop = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in sorted(common, key=len, reverse=True)) + r")(?:['\u2019]s)?\b", re.IGNORECASE)
    return " ".join(drop.sub("", query).split()).replace(" ?", "?").replace(" ,", ",").replace(" .", ".")


# -- BM25 on an absolute scale ---------------------------------------------------------------


def idf(n_rows: int, n_hits: int) -> float:
    """FTS5's inverse document frequency (floored at 1e-6, as SQLite does)."""
    value = math.log((n_rows - n_hits + 0.5) / (n_hits + 0.5)) if n_rows > 0 else 0.0
    return value if value > 0.0 else 1e-6


def bm25(tf: Mapping[str, int], length: int, avg_length: float, idfs: Mapping[str, float]) -> float:
    """FTS5's bm25 (as a positive number) of one document: ``tf`` term counts, ``length`` tokens."""
    norm = K1 * (1.0 - B + B * (length / avg_length if avg_length > 0 else 1.0))
    return sum(w * (tf[t] * (K1 + 1.0)) / (tf[t] + norm) for t, w in idfs.items() if tf.get(t))


def keyword_evidence(bm25: float, idf_mass: float) -> float:
    """BM25 relative to the query's IDF mass, in [0, 1] (see the module docstring)."""
    if idf_mass <= 0.0 or bm25 <= 0.0:
        return 0.0
    return min(bm25 / idf_mass, 1.0)


def keyword_coverage(matched_idf: float, idf_mass: float) -> float:
    """The share of the query's IDF mass a memory holds (distinct stems), in [0, 1]."""
    if idf_mass <= 0.0 or matched_idf <= 0.0:
        return 0.0
    return min(matched_idf / idf_mass, 1.0)


#: Words that start a second question after "and" (``... and when was it fixed?``).
QUESTION_STARTS = frozenset("what when where who whom whose why how which is are was were did does do".split())


def query_parts(query: str, by_word: Mapping[str, str] | None = None) -> list[frozenset[str]]:
    """The content stems of each question a query asks, when it asks two or more; ``[]`` otherwise.

    A query splits before ``and`` followed by a question word ("What was the planned budget and
    what was the final bill?"); each part keeps the query's own content stems
    (:func:`keyword_terms`, :func:`stems`) that its words hold, and a part holding none is dropped.

    >>> query_parts("What broke and how was it fixed?")
    [frozenset({'broke'}), frozenset({'fix'})]
    >>> query_parts("Who are Bob and Maya?"), query_parts("What broke, and why?")
    ([], [])

    ``by_word``: the query's :func:`stems` of its :func:`keyword_terms`, if the caller has them.
    """
    words = [w.lower() for w in _WORD.findall(query)]
    if not any(w == "and" and nxt in QUESTION_STARTS for w, nxt in zip(words, words[1:], strict=False)):
        return []  # asks one thing (most queries): no tokenizer pass
    by_word = stems(keyword_terms(query)) if by_word is None else by_word
    spans: list[list[str]] = [[]]
    for i, w in enumerate(words):
        if w == "and" and spans[-1] and i + 1 < len(words) and words[i + 1] in QUESTION_STARTS:
            spans.append([])
        else:
            spans[-1].append(w)
    parts = [p for p in (frozenset(by_word[w] for w in span if w in by_word) for span in spans) if p]
    return parts if len(parts) > 1 else []


def part_coverage(held: Container[str], idfs: Mapping[str, float], parts: Sequence[frozenset[str]]) -> float:
    """The best share of one question's IDF mass a memory holds (:func:`query_parts`; 0 with no parts).

    ``held``: the query's stems the memory holds; ``idfs``: ``stem -> idf`` of the query's stems.
    """
    best = 0.0
    for part in parts:
        mass = sum(idfs.get(t, 0.0) for t in part)
        best = max(best, keyword_coverage(sum(idfs.get(t, 0.0) for t in part if t in held), mass))
    return best


# -- calibration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """Logistic maps from signals to scores (see the module docstring for the formulas)."""

    sem_a: float
    sem_b: float
    kw_a: float
    kw_b: float
    hy_c: float
    hy_e: float
    hy_k: float
    #: the hybrid *score* map over the same signals (its own direction: what separates a right
    #: top-1 from an unanswerable query's is not what orders candidates within one query)
    sc_c: float
    sc_e: float
    sc_k: float
    sc_b: float
    #: weights of squared keyword coverage in the ranking key and in the score map
    hy_v: float = 0.0
    sc_v: float = 0.0
    #: score-map weights of "matches a query word" (``e > 0``) and of "lacks a name the
    #: question asks about" (:func:`query_names`)
    sc_m: float = 0.0
    sc_n: float = 0.0
    #: added to the score map's cosine weight for a hit that matches a query word, in proportion
    #: to the share of the query's IDF mass it lacks (``1 - v**2``)
    sc_cm: float = 0.0
    #: the share of a better-matching predecessor's ranking key and score a hybrid candidate
    #: takes (:func:`fuse_pool`'s ``follows``: the memory written just before it in its scope)
    hy_ctx: float = 0.0
    #: ranking-key weight of "lacks a name the question asks about" (:func:`query_names`): in a
    #: chat kept one store per conversation, a speaker's name is in half the rows, so its IDF,
    #: and with it the coverage, says nothing of whether a turn is about the person asked about
    hy_n: float = 0.0
    #: the keyword score map's weights of the squared coverage the score reads and of "lacks a
    #: name the question asks about" (:func:`keyword_score`; ``kw_a`` is the evidence's weight)
    kw_v: float = 0.0
    kw_n: float = 0.0
    #: identity semantic map (clipped cosine) instead of the logistic one
    raw_semantic: bool = False
    #: added to cosines before the hybrid map: puts another embedder's relevance floor
    #: where the default model's cosine for score 0.45 is
    cos_shift: float = 0.0


def _sigma(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


#: Fitted for the default model (all-MiniLM-L6-v2, int8) on the dev split of
#: bench/data/recall_eval (``python bench/bench_memory.py --section quality --fit``). ``hy_n`` was
#: chosen on dev over the other constants as they stand (``--fit``'s "shipped ranking kept" step).
DEFAULT = Calibration(
    sem_a=7.720, sem_b=-4.445, kw_a=0.0, kw_v=7.468, kw_n=-2.069, kw_b=-2.714, hy_c=9.061, hy_e=-6.412, hy_k=0.214, hy_v=20.161, hy_ctx=0.9, hy_n=-1.25,
    sc_c=12.604, sc_cm=-6.499, sc_e=0.0, sc_k=0.0, sc_m=-1.618, sc_v=3.332, sc_n=-1.523, sc_b=-4.414,
)  # fmt: skip
#: For other embedders: semantic scores stay clipped cosines; keyword scores and the hybrid
#: ranking use DEFAULT's constants. The hybrid score keeps one logistic of the ranking key
#: (DEFAULT's map before the score got its own direction): the score direction leans on the
#: default model's cosine levels (a hit with no keyword match passes 0.45 from cosine 0.39),
#: which a shifted foreign cosine does not share.
GENERIC = Calibration(**{
    **DEFAULT.__dict__, "raw_semantic": True, "sc_c": 2.120, "sc_e": -1.500, "sc_k": 0.050, "sc_v": 4.717, "sc_m": 0.0, "sc_cm": 0.0,
    "sc_n": -1.489, "sc_b": -0.680,
})  # fmt: skip
_FITTED = {"all-MiniLM-L6-v2-onnx-int8": DEFAULT}


def calibration_for(embedder: object) -> Calibration:
    """The constants for an embedder (by ``model_id``; :data:`GENERIC` when none were fitted).

    For GENERIC, the hybrid map shifts cosines by (the default model's cosine at score
    0.45) minus the embedder's own ``relevance_floor``.
    """
    model_id = getattr(embedder, "model_id", embedder)
    fitted = _FITTED.get(str(model_id))
    if fitted is not None:
        return fitted
    floor = getattr(embedder, "relevance_floor", None)
    if not isinstance(floor, (int, float)):
        return GENERIC
    at_floor = (math.log(0.45 / 0.55) - DEFAULT.sem_b) / DEFAULT.sem_a
    return replace(GENERIC, cos_shift=at_floor - float(floor))


def semantic_score(cosine: float, cal: Calibration = GENERIC, coverage: float = 0.0, lacks_name: bool = False) -> float:
    """The calibrated score of a semantic hit: the hybrid score map (:func:`hybrid_score`) of its
    cosine and of what its text holds of the query (:func:`held_signals`), so one scale serves
    whatever ranker found the hit. ``coverage > 0`` is the map's step, "matches a query word"
    (the fitted maps read the evidence only through it: ``sc_e = sc_k = 0``).

    A clipped cosine for :data:`GENERIC` (``raw_semantic``). ``sigma(sem_a c + sem_b)``, the
    map of the cosine alone, is what the semantic score was before it read the hit's words;
    it still says which cosine the default model reaches 0.45 at (:func:`calibration_for`).
    """
    c = min(max(float(cosine), -1.0), 1.0)
    if cal.raw_semantic:
        return max(c, 0.0)
    return hybrid_score(c, 1.0 if coverage > 0.0 else 0.0, 0.0, cal, coverage, lacks_name)


def keyword_score(evidence: float, coverage: float, lacks_name: bool = False, cal: Calibration = DEFAULT) -> float:
    """The calibrated score of a keyword hit: ``sigma(k_a e + k_v u**2 + k_n n + k_b)``, 0 with no match.

    ``coverage`` (``u``): the share of the query's IDF mass the memory holds, or of its best-held
    question's (:func:`held_signals`); ``lacks_name`` (``n``): it lacks a name the question asks
    about. A memory repeating one rare word of the query ranks high in BM25 but holds little of
    what was asked, so it scores low; one holding every word scores high however short.
    """
    if evidence <= 0.0:
        return 0.0
    u = min(max(coverage, 0.0), 1.0)
    return _sigma(cal.kw_a * min(evidence, 1.0) + cal.kw_v * u * u + (cal.kw_n if lacks_name else 0.0) + cal.kw_b)


def held_signals(query: str, idfs: Mapping[str, float], texts: Sequence[str]) -> list[tuple[float, bool]]:
    """``(coverage the score reads, lacks a name)`` of each text, matched as the index matches it.

    What SQLite's per-word FTS5 pass gives the hybrid for its candidates (``Matches``), for a few
    rows already found: each distinct word of the query (:func:`key_stems` of :func:`match_terms`) is
    held where FTS5 matches one of its words or forms, quoted (a ``user_id`` as the phrase ``user id``),
    in the text, and weighs its IDF (``idfs``, the backend's, keyed by key stem). The coverage is
    :func:`keyword_coverage`, or for a query asking two things the larger of that and
    :func:`part_coverage`; a text lacks a name when one of :func:`query_names` is not held.
    The texts go through the tokenizer's own FTS5 table (one insert, one ``MATCH`` per stem).

    >>> held_signals("Where is Maya's bike?", {"maya": 2.0, "bike": 2.0}, ["Maya sold the bike", "the bike shop"])
    [(1.0, False), (0.5, True)]
    """
    terms = match_terms(query)
    by_word = key_stems(terms)
    named = {by_word[w] for w in name_words(query) if w in by_word}
    forms: dict[str, list[str]] = {}  # key -> the words and forms standing for it
    for w in terms:
        if w in by_word:
            forms.setdefault(by_word[w], []).append(w)
    held: list[set[str]] = [set() for _ in texts]
    if texts and forms:
        with _tok_lock:
            c = _tokenizer()
            c.execute("BEGIN")
            try:
                c.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", [(i + 1, t) for i, t in enumerate(texts)])
                for key, words in forms.items():
                    for (row,) in c.execute("SELECT rowid FROM t WHERE t MATCH ?", [" OR ".join(map(quoted, words))]):
                        held[row - 1].add(key)
            finally:
                c.execute("ROLLBACK")
    parts = query_parts(query, by_word)
    mass = sum(idfs.values())
    out = []
    for have in held:
        cov = keyword_coverage(sum(idfs.get(st, 0.0) for st in have), mass)
        if parts:
            cov = max(cov, part_coverage(have, idfs, parts))
        out.append((cov, any(st not in have for st in named)))
    return out


def _signals(
    cosine: float, evidence: float, relative: float, coverage: float, cal: Calibration
) -> tuple[float, float, float, float]:
    c = min(max(float(cosine) + cal.cos_shift, -1.0), 1.0)
    v = min(max(coverage, 0.0), 1.0)
    return c, min(max(evidence, 0.0), 1.0), min(max(relative, 0.0), 1.0), v * v


def hybrid_rank(
    cosine: float, evidence: float, relative: float, cal: Calibration = DEFAULT, coverage: float = 0.0,
    lacks_name: bool = False,
) -> float:
    """The ranking key of a hybrid candidate (higher first): ``h_c c + h_e e + h_k k + h_v v**2 + h_n n``."""
    c, e, k, v2 = _signals(cosine, evidence, relative, coverage, cal)
    return cal.hy_c * c + cal.hy_e * e + cal.hy_k * k + cal.hy_v * v2 + (cal.hy_n if lacks_name else 0.0)


def hybrid_score(
    cosine: float, evidence: float, relative: float, cal: Calibration = DEFAULT, coverage: float = 0.0,
    lacks_name: bool = False,
) -> float:
    """The calibrated score of a hybrid hit, before the cap of :func:`fuse_pool`.

    ``relative``: this evidence over the best evidence of the query's candidate pool (in [0, 1]);
    ``coverage``: the share of the query's IDF mass the memory holds (:func:`keyword_coverage`);
    ``lacks_name``: the memory lacks one of :func:`query_names` (false when the query has none).
    """
    c, e, k, v2 = _signals(cosine, evidence, relative, coverage, cal)
    z = cal.sc_c * c + cal.sc_e * e + cal.sc_k * k + cal.sc_v * v2 + cal.sc_b
    partial = cal.sc_m + cal.sc_cm * max(c, 0.0) * (1.0 - v2) if e > 0.0 else 0.0
    return _sigma(z + partial + (cal.sc_n if lacks_name else 0.0))


#: The question marks of :func:`asks`: as typed in Latin, Cyrillic and Greek text, full-width
#: (CJK) and Arabic.
QUESTION_MARKS = "?\uff1f\u061f"
#: How far from the end :func:`asks` looks (past trailing spaces, quotes, brackets, emoji).
ASKS_TAIL = 32


def asks(text: str) -> bool:
    """Whether a memory ends by asking something: its last sentence mark is a question mark.

    Trailing spaces, quotes, brackets, emoji and ``!`` are looked past ("Really?!"), so a chat
    turn that ends on a question counts and a note with a question in its title does not.
    Its successor in the scope is then its reply (:func:`fuse_pool`).

    >>> asks("Bo: Who played at the wedding? 🙂"), asks("It was Jan Kowal!"), asks("FAQ: why? See below.")
    (True, False, False)
    """
    for ch in reversed(text[-ASKS_TAIL:]):
        if ch in QUESTION_MARKS:
            return True
        if ch.isalnum() or ch in ".,;:\u2026\u3002":
            return False
    return False


def fuse_pool(
    cosines: Mapping[int, float],
    evidence: Mapping[int, float],
    cal: Calibration,
    coverage: Mapping[int, float] | None = None,
    lacking: Container[int] = (),
    follows: Mapping[int, int] | None = None,
    score_coverage: Mapping[int, float] | None = None,
) -> list[tuple[float, int]]:
    """``(score, key)`` for every candidate with some signal (cosine > 0 or evidence > 0), best first.

    Order is by :func:`hybrid_rank` (ties to the higher key: the newer row). Each score is
    :func:`hybrid_score` capped at the score of the hit ranked above it, so scores never
    rise down the list and the top-1's score is its own calibrated estimate. ``coverage``
    (``key -> share of the query's IDF mass``) is 0 for a key it leaves out; ``lacking`` holds
    the keys that lack a name the query asks about (:func:`query_names`). ``score_coverage``
    (default ``coverage``) is the coverage the *score* reads: for a query asking two things, the
    larger of a key's coverage and its :func:`part_coverage` (a memory answering one question of
    two is relevant; the ranking still prefers one holding both).

    ``follows`` (``key -> its predecessor``: a candidate written right after a candidate that ends
    on a question, :func:`asks`, in the same scope) is the context of a conversation: the answer is
    often the reply to the turn that matches the query, and shares none of its words ("Who played
    at the wedding?" ... "It was Jan Kowal!"). A reply whose question matches better takes
    ``hy_ctx`` of the difference, in ranking key and in score: ``r' = r + hy_ctx * max(0, r_q - r)``,
    from the question's own values (no chains); a reply with no signal of its own joins the list.
    """
    signal = {k for k, c in cosines.items() if c > 0.0} | {k for k, e in evidence.items() if e > 0.0}
    follows = {k: p for k, p in follows.items() if p in signal} if follows and cal.hy_ctx else {}
    keys = signal | follows.keys()  # a reply sharing nothing with the query is still the reply
    if not keys:
        return []
    best = max(evidence.values(), default=0.0)
    cov = coverage or {}
    scov = cov if score_coverage is None else score_coverage
    own: dict[int, tuple[float, float]] = {}
    for k in keys:
        c, e, v = cosines.get(k, 0.0), evidence.get(k, 0.0), cov.get(k, 0.0)
        rel = e / best if best > 0.0 else 0.0
        lacks = k in lacking
        own[k] = (hybrid_rank(c, e, rel, cal, v, lacks), hybrid_score(c, e, rel, cal, max(v, scov.get(k, 0.0)), lacks))
    ranked = []
    for k, (r, s) in own.items():
        prev = own.get(follows[k]) if k in follows else None
        if prev is not None:
            r, s = r + cal.hy_ctx * max(0.0, prev[0] - r), s + cal.hy_ctx * max(0.0, prev[1] - s)
        ranked.append((r, k, s))
    ranked.sort(reverse=True)
    out, cap = [], 1.0
    for _, k, score in ranked:
        cap = min(cap, score)
        out.append((cap, k))
    return out
