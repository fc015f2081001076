"""How raw signals become the scores users see: always in [0, 1], higher is better.

- Semantic: cosine of unit vectors, clipped at 0 (a negative cosine is "unrelated").
- Keyword: SQLite's ``bm25()`` is *negative* (more negative = better) and unbounded.
  We flip it to a positive relevance ``r`` and map each hit to
  ``0.5 + 0.5 * r / r_best``: every keyword hit scores at least 0.5, so a good
  keyword hit never lands under ATP's 0.45 floor because of bm25's sign or scale,
  and the best hit of a query scores 1.0.
- Hybrid: ``max(sem, kw) + 0.2 * min(sem, kw) * (1 - max(sem, kw))``: the better of
  the two signals, nudged up when both agree; never below either, never above 1.

>>> keyword_scores([-3.0, -1.5])
[1.0, 0.75]
>>> fuse(0.0, 0.5)
0.5
>>> round(fuse(0.8, 0.9), 3)
0.916
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["KEYWORD_FLOOR", "fts_query", "fuse", "keyword_scores", "keyword_terms", "semantic_score"]

#: The lowest score a keyword hit can get.
KEYWORD_FLOOR = 0.5
_MAX_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)
# Dropped from a keyword query only when other words remain: "the" matches everything.
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have how i if in into is it its of on or "
    "that the their then there these this to was were what when where which who why will with".split()
)


def keyword_terms(query: str) -> list[str]:
    """Lower-cased unique words of a query, stopwords dropped unless nothing else is left."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    content = [w for w in words if w not in _STOPWORDS]
    return (content or words)[:_MAX_TERMS]


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH string that matches any of the query's words (``None`` if it has none).

    Each word is double-quoted, so FTS5 operators in user text (``AND``, ``-``,
    ``*``, ``NEAR``) are taken literally.
    """
    terms = keyword_terms(query)
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def keyword_scores(bm25_values: Sequence[float]) -> list[float]:
    """Map SQLite bm25 values (negative, lower is better) to scores in [0.5, 1]."""
    rel = [max(-v, 0.0) for v in bm25_values]
    best = max(rel, default=0.0)
    if best <= 0.0:
        return [1.0 for _ in rel]
    return [KEYWORD_FLOOR + (1.0 - KEYWORD_FLOOR) * (r / best) for r in rel]


def semantic_score(cosine: float) -> float:
    return min(max(float(cosine), 0.0), 1.0)


def fuse(semantic: float, keyword: float) -> float:
    hi, lo = max(semantic, keyword), min(semantic, keyword)
    return min(1.0, hi + 0.2 * lo * (1.0 - hi))
