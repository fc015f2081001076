"""Load the hand-written recall evaluation set in ``bench/data/recall_eval/``.

    from _recall_eval_data import load
    corpus, queries = load("dev")        # all memories, the dev queries
    corpus, queries = load()             # all memories, every query

``corpus`` is a list of ``{"id", "content", "source", "metadata"}`` dicts and
``queries`` a list of ``{"id", "query", "relevant", "kind", "split"}`` dicts, in
file order. The corpus is the same whatever the split: a split only selects
queries. Every line is validated (unique ids, known kinds / sources / splits,
every relevant id in the corpus, "irrelevant" queries with no relevant ids);
the first bad line raises ``ValueError`` naming the file and line.

The module also holds the word tools used to check that a "paraphrase" query
shares no content word with its targets: ``content_stems(text)`` lower-cases,
splits on non-alphanumerics, drops the stopwords in ``STOPWORDS`` and Porter-
stems the rest with SQLite's own FTS5 ``porter`` tokenizer (standard library,
no extra package).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = [
    "DATA_DIR",
    "KINDS",
    "SOURCES",
    "SPLITS",
    "STOPWORDS",
    "content_stems",
    "content_words",
    "load",
    "porter_stem",
]

DATA_DIR = Path(__file__).resolve().parent / "data" / "recall_eval"
KINDS = frozenset({"paraphrase", "keyword", "mixed", "temporal", "multi", "irrelevant"})
SOURCES = frozenset({"conversation", "atp", "vault"})
SPLITS = frozenset({"dev", "test"})

#: English stopwords (the NLTK list, which keeps question words such as did,
#: do, you, he, she, they, my as stopwords). A "paraphrase" query may share
#: these with its target, and nothing else.
STOPWORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what
    which who whom this that these those am is are was were be been being have has had
    having do does did doing a an the and but if or because as until while of at by for
    with about against between into through during before after above below to from up
    down in out on off over under again further then once here there when where why how
    all any both each few more most other some such no nor not only own same so than too
    very s t can will just don should now d ll m o re ve y ain aren couldn didn doesn
    hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
    """.split()
)

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` (split on anything not a letter or digit), stopwords dropped."""
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOPWORDS]


@lru_cache(maxsize=1)
def _stemmer() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE w USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(w, 'instance')")
    return conn


@lru_cache(maxsize=65536)
def porter_stem(word: str) -> str:
    """The Porter stem of one lower-case word, as SQLite's FTS5 ``porter`` tokenizer gives it."""
    conn = _stemmer()
    conn.execute("DELETE FROM w")
    conn.execute("INSERT INTO w(rowid, x) VALUES (1, ?)", (word,))
    rows = conn.execute("SELECT term FROM v ORDER BY offset").fetchall()
    return str(rows[0][0]) if rows else word


def content_stems(text: str) -> set[str]:
    """Porter stems of the content words of ``text`` (see ``content_words``)."""
    return {porter_stem(w) for w in content_words(text)}


def _lines(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not valid JSON: {exc.msg}") from exc
        if not isinstance(obj, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object")
        yield number, obj


def _check_keys(
    where: str, obj: dict[str, Any], required: frozenset[str], optional: frozenset[str] = frozenset()
) -> None:
    missing = required - obj.keys()
    if missing:
        raise ValueError(f"{where}: missing field(s) {sorted(missing)}")
    extra = obj.keys() - required - optional
    if extra:
        raise ValueError(f"{where}: unknown field(s) {sorted(extra)}")


def _load_corpus(path: Path) -> list[dict[str, Any]]:
    corpus: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, obj in _lines(path):
        where = f"{path}:{number}"
        _check_keys(where, obj, frozenset({"id", "content", "source"}), frozenset({"metadata"}))
        mid, content, source = obj["id"], obj["content"], obj["source"]
        if not isinstance(mid, str) or not re.fullmatch(r"c\d{4,}", mid):
            raise ValueError(f"{where}: id must look like 'c0001', got {mid!r}")
        if mid in seen:
            raise ValueError(f"{where}: duplicate memory id {mid!r}")
        if not isinstance(content, str) or not content.strip():
            raise ValueError(f"{where}: content must be a non-empty string ({mid})")
        if source not in SOURCES:
            raise ValueError(f"{where}: source must be one of {sorted(SOURCES)}, got {source!r} ({mid})")
        metadata = obj.get("metadata", {})
        if not isinstance(metadata, dict) or any(
            not isinstance(v, (str, int, float, bool)) for v in metadata.values()
        ):
            raise ValueError(f"{where}: metadata must be a flat object of scalars ({mid})")
        seen.add(mid)
        corpus.append({"id": mid, "content": content, "source": source, "metadata": dict(metadata)})
    return corpus


def _load_queries(path: Path, memory_ids: set[str]) -> list[dict[str, Any]]:
    queries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, obj in _lines(path):
        where = f"{path}:{number}"
        _check_keys(where, obj, frozenset({"id", "query", "relevant", "kind", "split"}))
        qid, text, relevant, kind, split = (obj[k] for k in ("id", "query", "relevant", "kind", "split"))
        if not isinstance(qid, str) or not re.fullmatch(r"q\d{4,}", qid):
            raise ValueError(f"{where}: id must look like 'q0001', got {qid!r}")
        if qid in seen:
            raise ValueError(f"{where}: duplicate query id {qid!r}")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{where}: query must be a non-empty string ({qid})")
        if kind not in KINDS:
            raise ValueError(f"{where}: kind must be one of {sorted(KINDS)}, got {kind!r} ({qid})")
        if split not in SPLITS:
            raise ValueError(f"{where}: split must be one of {sorted(SPLITS)}, got {split!r} ({qid})")
        if not isinstance(relevant, list) or not all(isinstance(r, str) for r in relevant):
            raise ValueError(f"{where}: relevant must be a list of memory ids ({qid})")
        if len(set(relevant)) != len(relevant):
            raise ValueError(f"{where}: relevant lists a memory twice ({qid})")
        unknown = [r for r in relevant if r not in memory_ids]
        if unknown:
            raise ValueError(f"{where}: relevant id(s) {unknown} not in the corpus ({qid})")
        if kind == "irrelevant" and relevant:
            raise ValueError(f"{where}: an 'irrelevant' query must have relevant: [] ({qid})")
        if kind != "irrelevant" and not relevant:
            raise ValueError(f"{where}: a {kind!r} query needs at least one relevant id ({qid})")
        if kind == "multi" and len(relevant) < 2:
            raise ValueError(f"{where}: a 'multi' query needs at least two relevant ids ({qid})")
        seen.add(qid)
        queries.append({"id": qid, "query": text, "relevant": list(relevant), "kind": kind, "split": split})
    return queries


def load(split: str | None = None, data_dir: Path | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return ``(corpus, queries)``; ``split`` ("dev" / "test" / None for both) selects queries."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)} or None, got {split!r}")
    base = DATA_DIR if data_dir is None else data_dir
    corpus = _load_corpus(base / "corpus.jsonl")
    queries = _load_queries(base / "queries.jsonl", {m["id"] for m in corpus})
    if split is not None:
        queries = [q for q in queries if q["split"] == split]
    return corpus, queries
