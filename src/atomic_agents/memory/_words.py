"""The words a keyword search reads: stopwords, stems exactly as SQLite's FTS5 index stores them,
the names a question asks about, and the word forms Porter stemming keeps apart.

Every backend (SQLite, PostgreSQL, the fake) matches and counts the query's words through these
functions, so they agree on what a memory holds. :mod:`._scoring` re-exports them.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

__all__ = [
    "fts_query",
    "key_groups",
    "key_idfs",
    "key_stems",
    "keyword_terms",
    "match_terms",
    "name_words",
    "query_names",
    "query_stems",
    "quoted",
    "stems",
    "tokens",
    "word_forms",
]

_MAX_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)
# Dropped from a keyword query only when other words remain. A list fit for questions:
# function words, auxiliaries and pronouns ("what did she do", "when does my ...") carry no
# topic, and matching them ranks chatty memories over the one the question is about.
_STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before being
    below between both but by can could couldn did didn do does doesn doing don down during each few
    for from further had hadn has hasn have haven having he her here hers herself him himself his how
    i if in into is isn it its itself just ll me mightn more most mustn my myself needn no nor not now
    o of off on once only or other our ours ourselves out over own re s same shan she should shouldn
    so some such t than that the their theirs them themselves then there these they this those through
    to too under until up ve very was wasn we were weren what when where which while who whom why will
    with won would wouldn y you your yours yourself yourselves also ever get got
    tell know remember recall describe say said like kind sort
    """.split()
)


def keyword_terms(query: str) -> list[str]:
    """Lower-cased unique words of a query, stopwords dropped unless nothing else is left."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    content = [w for w in words if w not in _STOPWORDS]
    return (content or words)[:_MAX_TERMS]


#: An English question: a question word or an auxiliary first (after an optional preposition).
_QUESTION = re.compile(
    r"\W*(?:(?:on|at|in|until|till|since|for|from|to|by|with|about|during|after|before)\s+)?"
    r"(?:what|when|where|who|whom|whose|which|why|how|is|are|was|were|am|do|does|did|can|could|should|shall"
    r"|has|have|had|will|would|may|might|must)\b",
    re.IGNORECASE,
)


def name_words(query: str) -> frozenset[str]:
    """The names an English question asks about: its capitalised content words past the first, lower-cased.

    Empty (the neutral value) for a query that is not an English question (another language,
    a list of keywords) and for one written in capitals or title case, where a capital says
    nothing. Only words :func:`keyword_terms` keeps count (``I`` and other stopwords do not).
    """
    if not _QUESTION.match(query):
        return frozenset()
    later = [w for w in _WORD.findall(query)[1:] if w[:1].isalpha()]
    caps = {w.lower() for w in later if w[:1].isupper()}
    if not caps or 2 * sum(1 for w in later if w[:1].isupper()) > len(later):
        return frozenset()
    return frozenset(t for t in keyword_terms(query) if t in caps)


def query_names(query: str) -> frozenset[str]:
    """The key stems (:func:`key_stems`) of :func:`name_words`."""
    words = name_words(query)
    return frozenset(key_stems(sorted(words)).values()) if words else frozenset()


def fts_query(query: str, forms: bool = False) -> str | None:
    """An FTS5 MATCH string that matches any of the query's words (``None`` if it has none).

    Each word is double-quoted, so FTS5 operators in user text (``AND``, ``-``,
    ``*``, ``NEAR``) are taken literally. ``forms``: each word's other forms too
    (:func:`match_terms`; searches do, ``prune`` does not).
    """
    terms = match_terms(query) if forms else keyword_terms(query)
    if not terms:
        return None
    return " OR ".join(quoted(t) for t in terms)


def quoted(word: str) -> str:
    """``word`` as an FTS5 string (its operators taken literally)."""
    return '"' + word.replace('"', '""') + '"'


# -- word forms Porter stemming does not join ----------------------------------------------------

_FORMS_PATH = Path(__file__).with_name("data") / "inflections.txt"
_forms_lock = threading.Lock()
_FORMS_TEXT: str | None = None
_Entry = tuple[str, tuple[tuple[str, str], ...]]
#: ``stem -> (its word's key stem, (stem, word) of each of that word's stems)``, or ``None``: a stem
#: with no other forms. Filled per stem as searches ask (a keyword search in a new process reads
#: the lines of its query's words, not all 1,734); cleared past :data:`_STEMS_MAX` stems.
_FORMS: dict[str, _Entry | None] = {}


def _entry(stem: str) -> _Entry | None:
    """The forms table's line holding ``stem`` (the file stores each form as ``form/stem``)."""
    if stem in _FORMS:
        return _FORMS[stem]
    global _FORMS_TEXT
    if _FORMS_TEXT is None:
        with _forms_lock:
            if _FORMS_TEXT is None:
                _FORMS_TEXT = "\n" + _FORMS_PATH.read_text(encoding="utf-8")
    text, entry = _FORMS_TEXT, None
    at = text.find("/" + stem)
    while at >= 0:
        after = at + 1 + len(stem)
        start = text.rfind("\n", 0, at) + 1
        if (after == len(text) or text[after] in " \n") and text[start] != "#":
            end = text.find("\n", after)
            members: dict[str, str] = {}
            for item in text[start : end if end >= 0 else len(text)].split():
                w, _, st = item.partition("/")
                members.setdefault(st, w)
            if len(members) > 1:
                entry = (next(iter(members)), tuple(members.items()))
                _FORMS.update(dict.fromkeys(members, entry))
            break
        at = text.find("/" + stem, at + 1)
    if len(_FORMS) > _STEMS_MAX:
        _FORMS.clear()
    _FORMS[stem] = entry
    return entry


def word_forms(word: str) -> list[str]:
    """A word's other forms that the index stems apart, one word per stem (``[]``: none).

    SQLite's ``porter`` tokenizer joins ``walks walked walking``, but not ``buy``/``bought``,
    ``go``/``went``, ``child``/``children``, ``pay``/``paid`` or ``cry``/``cried``: "When did Maya
    buy the bike?" shares no stem with "Maya bought a bike". The forms are the English
    inflections of ``memory/data/inflections.txt`` (``bench/_inflections_build.py``).

    >>> word_forms("buy"), word_forms("buying"), word_forms("went"), word_forms("zanzibar")
    (['bought'], ['bought'], ['go', 'goes', 'gone'], [])
    """
    st = stems([word]).get(word)
    entry = _entry(st) if st else None
    return [w for s, w in entry[1] if s != st] if entry else []


def key_stems(words: Iterable[str]) -> dict[str, str]:
    """``word -> stem`` as :func:`stems`, a form's stem replaced by its word's first (``bought`` -> ``buy``).

    Coverage, the IDF mass and the names count a word once whichever of its forms the query or
    the memory uses: these are the keys they are counted by.
    """
    return {w: entry[0] if (entry := _entry(st)) else st for w, st in stems(words).items()}


def match_terms(query: str) -> list[str]:
    """The words a keyword search matches: :func:`keyword_terms`, then each one's other forms.

    A name the query asks about (:func:`name_words`) keeps its own form (``Rose`` is not ``rise``).
    Each form is matched as a word of its own, so a memory's BM25 is FTS5's for the ``OR`` of all
    of them; coverage counts a word once (:func:`key_stems`).

    >>> match_terms("When did Maya buy the new bike?")
    ['maya', 'buy', 'new', 'bike', 'bought', 'newer', 'newest']
    """
    terms = keyword_terms(query)
    names = name_words(query)
    out = dict.fromkeys(terms)
    for w in terms:
        if w not in names:
            out.update(dict.fromkeys(word_forms(w)))
    return list(out)


def key_groups(query: str, stem_of: Callable[[list[str]], Mapping[str, str]] | None = None) -> dict[str, list[str]]:
    """``key stem -> the stems matched for it`` (:func:`match_terms`, :func:`key_stems`), in query order.

    A word's IDF is the smallest of its matched forms' (the form most memories use), so a
    question in the present tense weighs a word the memories hold in the past as they hold it. Every backend derives its weights from this.
    ``stem_of`` (default :func:`stems`) gives each matched word what it is held by (the fake's
    phrase keys for a ``snake_case`` word).

    >>> key_groups("When did Maya buy it?")
    {'maya': ['maya'], 'bui': ['bui', 'bought']}
    """
    terms = match_terms(query)
    by, keys = (stem_of or stems)(terms), key_stems(terms)
    out: dict[str, list[str]] = {}
    for t in terms:
        if t in by:
            group = out.setdefault(keys[t], [])
            if by[t] not in group:
                group.append(by[t])
    return out


def key_idfs(groups: Mapping[str, Sequence[str]], idf_of: Mapping[str, float]) -> dict[str, float]:
    """``key -> idf``: the smallest IDF among each key's stems (``idf_of``: stem -> idf)."""
    return {k: min(idf_of[st] for st in ss) for k, ss in groups.items()}


# -- tokens exactly as SQLite's FTS5 index sees them ----------------------------------------

_TOKENIZER = "porter unicode61 remove_diacritics 2"
_tok_lock = threading.Lock()
_tok_conn: sqlite3.Connection | None = None


def _tokenizer() -> sqlite3.Connection:
    global _tok_conn
    if _tok_conn is None:
        c = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        c.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{_TOKENIZER}')")
        c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        _tok_conn = c
    return _tok_conn


def tokens(texts: Sequence[str]) -> list[list[str]]:
    """Each text's tokens (stemmed, folded) in order, by the very tokenizer the SQLite index uses.

    The fake and PostgreSQL's re-scoring use this too, so BM25 counts the same words everywhere.
    """
    out: list[list[str]] = [[] for _ in texts]
    if not texts:
        return out
    with _tok_lock:
        c = _tokenizer()
        c.execute("BEGIN")
        try:
            c.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", [(i + 1, t) for i, t in enumerate(texts)])
            for term, doc, _ in c.execute("SELECT term, doc, \"offset\" FROM v ORDER BY doc, \"offset\""):
                out[doc - 1].append(term)
        finally:
            c.execute("ROLLBACK")
    return out


#: ``word -> its first token`` (``""``: none) of words :func:`stems` has seen; cleared past
#: :data:`_STEMS_MAX` words. Each tokenizer call reads an ``fts5vocab`` table (~0.2 ms), and
#: every search stems its query's words several times.
_STEMS: dict[str, str] = {}
_STEMS_MAX = 50_000


def stems(words: Iterable[str]) -> dict[str, str]:
    """``word -> stem`` as the index stores it (words that tokenize to nothing are left out)."""
    ws = list(words)
    todo = [w for w in dict.fromkeys(ws) if w not in _STEMS]
    if todo:
        if len(_STEMS) + len(todo) > _STEMS_MAX:
            _STEMS.clear()
        _STEMS.update((w, t[0] if t else "") for w, t in zip(todo, tokens(todo), strict=True))
    return {w: st for w in ws if (st := _STEMS.get(w))}


def query_stems(query: str) -> list[str]:
    """The stem of each query word that has one, in word order, repeats kept.

    FTS5's bm25 of the query's ``OR`` sums over its words, so two words with one stem
    (``run running``) count it twice; weigh a stem by how often it occurs here.
    """
    terms = keyword_terms(query)
    by_word = stems(terms)
    return [by_word[w] for w in terms if w in by_word]
