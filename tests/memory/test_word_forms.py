"""Keyword search matches a word in the forms Porter stemming keeps apart (``buy``/``bought``).

The forms table (``memory/data/inflections.txt``) is read by every backend; SQLite, the fake and
PostgreSQL give the same scores for queries with such words (``test_postgres_stats.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from atomic_agents.memory import HashingEmbedder, InMemoryMemoryStore, Scope, SQLiteMemoryStore
from atomic_agents.memory import _scoring as scoring
from atomic_agents.memory import _words
from atomic_agents.memory._scoring import fts_query, key_groups, key_stems, match_terms, tokens, word_forms

SCOPE = Scope("builder", "alice")


def test_every_stem_in_the_forms_file_is_the_tokenizers() -> None:
    """The file carries each form's stem (no tokenizer pass at load): they must be what the index stores."""
    items = [it.split("/") for ln in _words._FORMS_PATH.read_text(encoding="utf-8").splitlines()
             if ln and not ln.startswith("#") for it in ln.split()]  # fmt: skip
    assert len(items) > 4000
    assert [st for _, st in items] == [ts[0] if ts else "" for ts in tokens([w for w, _ in items])]


def test_each_line_is_one_word_and_no_stem_is_in_two() -> None:
    seen: dict[str, int] = {}
    for n, ln in enumerate(_words._FORMS_PATH.read_text(encoding="utf-8").splitlines()):
        if ln and not ln.startswith("#"):
            stems_ = [it.split("/")[1] for it in ln.split()]
            assert len(stems_) > 1 and len(set(stems_)) == len(stems_), ln
            for st in stems_:
                assert seen.setdefault(st, n) == n, (st, ln)


@pytest.mark.parametrize(
    ("word", "forms"),
    [
        ("buy", ["bought"]), ("bought", ["buy"]), ("buying", ["bought"]), ("went", ["go", "goes", "gone"]),
        ("children", ["child"]), ("paid", ["pay"]), ("cried", ["cry"]), ("cheapest", ["cheap", "cheaper"]),
        ("walked", []), ("zanzibar", []),
        ("better", []), ("more", []),  # suppletive degree words join nothing
    ],
)  # fmt: skip
def test_word_forms(word: str, forms: list[str]) -> None:
    assert sorted(word_forms(word)) == sorted(forms)


def test_a_form_whose_stem_is_another_words_is_not_joined() -> None:
    assert "life" not in word_forms("lives") and "lives" not in word_forms("life")  # lives stems to live


@pytest.mark.parametrize(
    ("word", "other"),
    [("wound", "wind"), ("dice", "die"), ("diva", "dive"), ("crew", "crow"), ("lie", "lay"), ("real", "rial"),
     ("chile", "chili"), ("chiles", "chili")],
)  # fmt: skip
def test_two_everyday_words_the_lexicon_lists_as_one_are_not_joined(word: str, other: str) -> None:
    assert other not in word_forms(word) and word not in word_forms(other)


def test_homographs_whose_forms_are_everyday_forms_stay_joined() -> None:
    assert "see" in word_forms("saw") and "find" in word_forms("found") and "dove" in word_forms("dive")
    assert {"lied", "lying"} <= set(word_forms("lie")) and "laid" in word_forms("lay")


def test_match_terms_adds_forms_but_not_to_a_name() -> None:
    assert match_terms("When did Maya buy the bike?") == ["maya", "buy", "bike", "bought"]
    assert match_terms("Where did Rose go?") == ["rose", "go", "goes", "gone", "went"]  # Rose, a name: no "rise"
    assert "rise" in match_terms("where did the rose grow") or word_forms("rose") == []


def test_a_word_and_its_forms_share_one_key() -> None:
    keys = key_stems(["buy", "bought", "buying", "went", "go", "children", "child", "bike"])
    assert keys["buy"] == keys["bought"] == keys["buying"]
    assert keys["went"] == keys["go"] and keys["children"] == keys["child"]
    groups = key_groups("bought buy went")
    assert len(groups) == 2  # one key for buy/bought, one for go/went
    assert sorted(groups[keys["buy"]]) == sorted(set(scoring.stems(["buy", "bought"]).values()))


def test_prune_keywords_stay_literal() -> None:
    """Only searches match forms: a destructive ``prune(keywords=...)`` removes what the user typed."""
    assert fts_query("buy") == '"buy"'
    assert fts_query("buy", forms=True) == '"buy" OR "bought"'


@pytest.fixture(params=["sqlite", "fake"])
def store(request: Any, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        s: Any = SQLiteMemoryStore(tmp_path / "m.db", embedder=HashingEmbedder(16), durable=False)
    else:
        s = InMemoryMemoryStore(embedder=HashingEmbedder(16))
    s.remember_many([
        ("Maya: I bought a second-hand cargo bike last week.", None),
        ("Leo: the children went to the lake with their grandmother.", None),
        ("Sam paid the roofer on Friday.", None),
        *((f"weekly sync note {i} about the roadmap", None) for i in range(30)),
    ], SCOPE)  # fmt: skip
    return s


@pytest.mark.parametrize(
    ("query", "as_held", "want"),
    [
        ("What did Maya buy?", "What did Maya bought?", "Maya: I bought"),
        ("When did the child go to the lake?", "When did the children went to the lake?", "Leo: the children"),
        ("Who pays the roofer?", "Who paid the roofer?", "Sam paid"),
    ],
)
def test_a_memory_holding_another_form_scores_as_if_asked_in_it(store: Any, query: str, as_held: str, want: str) -> None:
    """Before, "buy" matched nothing in "I bought a ... bike" (and weighed as a word no memory holds): the
    memory was scored as holding part of the question. Now it holds every word, in ``search`` and in hybrid."""
    for search in (store.search, store.search_hybrid):  # (hybrid's cosine differs with the words)
        hits, held = search(query, SCOPE, limit=3), search(as_held, SCOPE, limit=3)
        assert hits and hits[0].memory.content.startswith(want) and hits[0].id == held[0].id
    hits, held = store.search(query, SCOPE, limit=3), store.search(as_held, SCOPE, limit=3)
    assert hits[0].score == pytest.approx(held[0].score, abs=1e-9) and hits[0].score >= 0.45
    if isinstance(store, SQLiteMemoryStore):  # the one-pass matches: the memory holds the whole IDF mass
        seq = store._read("SELECT seq FROM memories WHERE id = ?", [hits[0].id])[0][0]
        assert store._matches(query).coverage([seq])[seq] == pytest.approx(1.0)
