"""The hand-written recall evaluation set in bench/data/recall_eval/ loads, is valid and meets its targets."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from ._helpers import bench_module

data = bench_module("_recall_eval_data")
CORPUS, QUERIES = data.load()
BY_ID = {m["id"]: m for m in CORPUS}


def test_counts_meet_the_targets() -> None:
    kinds = Counter(q["kind"] for q in QUERIES)
    sources = Counter(m["source"] for m in CORPUS)
    assert sum(1 for q in QUERIES if q["relevant"]) >= 520
    assert kinds["irrelevant"] >= 120
    assert kinds["paraphrase"] >= 150
    assert {"keyword", "mixed", "temporal", "multi"} <= kinds.keys()
    assert 1500 <= len(CORPUS) <= 2500
    for source, share in (("conversation", 0.40), ("atp", 0.30), ("vault", 0.30)):
        assert abs(sources[source] / len(CORPUS) - share) <= 0.10, (source, sources)


def test_splits_are_balanced_within_each_kind() -> None:
    for kind in data.KINDS:
        splits = Counter(q["split"] for q in QUERIES if q["kind"] == kind)
        assert abs(splits["dev"] - splits["test"]) <= 1, (kind, splits)
    dev_corpus, dev = data.load("dev")
    _, test = data.load("test")
    assert dev_corpus == CORPUS
    assert {q["id"] for q in dev} | {q["id"] for q in test} == {q["id"] for q in QUERIES}
    assert not {q["id"] for q in dev} & {q["id"] for q in test}


def test_ids_are_unique_and_every_relevant_id_exists() -> None:
    assert len(BY_ID) == len(CORPUS)
    assert len({q["id"] for q in QUERIES}) == len(QUERIES)
    for q in QUERIES:
        assert all(r in BY_ID for r in q["relevant"]), q
        assert (q["kind"] == "irrelevant") == (not q["relevant"]), q
        if q["kind"] == "multi":
            assert len(q["relevant"]) >= 2, q


def test_no_duplicate_texts() -> None:
    assert len({m["content"].lower() for m in CORPUS}) == len(CORPUS)
    assert len({q["query"].lower() for q in QUERIES}) == len(QUERIES)


def test_paraphrase_queries_share_no_content_word_with_their_targets() -> None:
    bad = []
    for q in QUERIES:
        if q["kind"] != "paraphrase":
            continue
        words = data.content_stems(q["query"])
        for rid in q["relevant"]:
            shared = words & data.content_stems(BY_ID[rid]["content"])
            if shared:
                bad.append((q["id"], rid, sorted(shared)))
    assert not bad


def test_keyword_and_mixed_queries_share_words_with_a_target() -> None:
    for q in QUERIES:
        if q["kind"] in ("keyword", "mixed"):
            words = data.content_stems(q["query"])
            best = max(len(words & data.content_stems(BY_ID[r]["content"])) for r in q["relevant"])
            assert best >= 1, q
            if q["kind"] == "mixed":
                assert best < len(words), q  # part of a mixed query is rephrased


def test_temporal_queries_ask_when_about_dated_conversation_turns() -> None:
    for q in QUERIES:
        if q["kind"] == "temporal":
            assert q["query"].lower().startswith("when "), q
            for r in q["relevant"]:
                assert BY_ID[r]["source"] == "conversation" and BY_ID[r]["metadata"]["date"], q


def test_many_queries_have_keyword_distractors() -> None:
    """At least 150 queries share content words with a non-relevant memory as strongly as with a target."""
    stems = {m["id"]: data.content_stems(m["content"]) for m in CORPUS}
    trapped = 0
    for q in QUERIES:
        if not q["relevant"]:
            continue
        words = data.content_stems(q["query"])
        best = max(len(words & stems[r]) for r in q["relevant"])
        if any(len(words & s) >= max(1, best) for mid, s in stems.items() if mid not in q["relevant"]):
            trapped += 1
    assert trapped >= 150


def test_stemmer_and_stopwords_behave_as_documented() -> None:
    assert data.porter_stem("adopted") == data.porter_stem("adoption") == "adopt"
    assert data.content_stems("When did YOU run the Running club?") == {"run", "club"}
    assert {"did", "do", "you", "he", "she", "they", "my"} <= data.STOPWORDS


def _write(tmp: Path, corpus: list[object], queries: list[object]) -> Path:
    (tmp / "corpus.jsonl").write_text("".join(json.dumps(x) + "\n" for x in corpus), encoding="utf-8")
    (tmp / "queries.jsonl").write_text("".join(json.dumps(x) + "\n" for x in queries), encoding="utf-8")
    return tmp


GOOD_MEMORY = {"id": "c0001", "content": "x", "source": "vault", "metadata": {}}
GOOD_QUERY = {"id": "q0001", "query": "y", "relevant": ["c0001"], "kind": "keyword", "split": "dev"}


@pytest.mark.parametrize(
    ("corpus", "queries", "message"),
    [
        ([GOOD_MEMORY, GOOD_MEMORY], [GOOD_QUERY], "corpus.jsonl:2: duplicate memory id"),
        ([GOOD_MEMORY], [{**GOOD_QUERY, "relevant": ["c0009"]}], "queries.jsonl:1: relevant id(s) ['c0009']"),
        ([GOOD_MEMORY], [{**GOOD_QUERY, "kind": "fuzzy"}], "queries.jsonl:1: kind must be one of"),
        ([GOOD_MEMORY], [{**GOOD_QUERY, "split": "train"}], "queries.jsonl:1: split must be one of"),
        ([GOOD_MEMORY], [GOOD_QUERY, GOOD_QUERY], "queries.jsonl:2: duplicate query id"),
        ([GOOD_MEMORY], [{**GOOD_QUERY, "kind": "irrelevant"}], "queries.jsonl:1: an 'irrelevant' query"),
        ([{**GOOD_MEMORY, "source": "email"}], [GOOD_QUERY], "corpus.jsonl:1: source must be one of"),
    ],
)
def test_loader_names_the_bad_line(tmp_path: Path, corpus: list[object], queries: list[object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        data.load(data_dir=_write(tmp_path, corpus, queries))


def test_loader_names_a_line_that_is_not_json(tmp_path: Path) -> None:
    _write(tmp_path, [GOOD_MEMORY], [GOOD_QUERY])
    with open(tmp_path / "queries.jsonl", "a", encoding="utf-8") as f:
        f.write("{not json\n")
    with pytest.raises(ValueError, match=r"queries\.jsonl:2: not valid JSON"):
        data.load(data_dir=tmp_path)
