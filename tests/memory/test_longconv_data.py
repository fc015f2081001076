"""The hand-written long conversations in bench/data/longconv/ load, are valid and are long."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ._helpers import bench_module

data = bench_module("_longconv_data")
CONVS = data.load()


def test_each_conversation_is_long_and_between_two_people() -> None:
    assert len(CONVS) >= 3
    for conv in CONVS:
        turns = conv["turns"]
        assert len(turns) >= 300, conv["conversation"]
        assert len({t["session"] for t in turns}) >= 10
        assert {t["speaker"] for t in turns} == set(conv["speakers"])
        dates = [t["date"] for t in turns]
        assert dates == sorted(dates), conv["conversation"]


def test_questions_point_at_turns_and_cover_every_kind() -> None:
    for conv in CONVS:
        ids = {t["id"] for t in conv["turns"]}
        kinds = Counter(q["kind"] for q in conv["questions"])
        assert kinds.keys() == data.KINDS, conv["conversation"]
        assert sum(kinds.values()) >= 100
        for q in conv["questions"]:
            assert set(q["evidence"]) <= ids
            assert (q["kind"] == "irr") == (not q["evidence"])


def test_splits_alternate_within_each_kind() -> None:
    dev, test = data.load("dev"), data.load("test")
    for d, t, conv in zip(dev, test, CONVS, strict=True):
        assert len(d["questions"]) + len(t["questions"]) == len(conv["questions"])
        for kind in data.KINDS:
            nd = sum(q["kind"] == kind for q in d["questions"])
            nt = sum(q["kind"] == kind for q in t["questions"])
            assert nd - nt in (0, 1), (conv["conversation"], kind)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("# speakers: A, B\n## session 1 | 2026-01-01\nA: hi\n", "needs '# conversation:'"),
        ("# conversation: x\n# speakers: Ann, Bo\n## session 2 | 2026-01-01\nAnn: hi\n", "session 2 out of order"),
        ("# conversation: x\n# speakers: Ann, Bo\n## session 1 | 2026-01-01\nCy: hi\n", "speaker 'Cy'"),
        ("# conversation: x\n# speakers: Ann, Bo\n## session 1 | 2026-01-01\n{a} Ann: hi\n{a} Bo: yo\n", "label 'a' used twice"),
        ("# conversation: x\n# speakers: Ann, Bo\n## session 1 | 2026-01-01\nAnn: hi\n## questions\nQ single zz | Q? | a\n",
         "unknown evidence label 'zz'"),
        ("# conversation: x\n# speakers: Ann, Bo\n## session 1 | 2026-01-01\n{a} Ann: hi\n## questions\nQ multi a | Q? | a\n",
         "a 'multi' question with 1 evidence labels"),
        ("# conversation: x\n# speakers: Ann, Bo\n## session 1 | 2026-01-01\n{a} Ann: hi\n## questions\nQ irr a | Q? | -\n",
         "a 'irr' question with 1 evidence labels"),
    ],
)
def test_a_bad_line_names_the_file_and_line(tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "bad.txt").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="bad.txt") as info:
        data.load(data_dir=tmp_path)
    assert error in str(info.value)
