"""Item 1: files from other tools read back; unknown keys kept; body byte-for-byte; dates round-trip."""

from __future__ import annotations

import datetime as dt

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from atomic_agents.exceptions import FrontmatterParseError
from atomic_agents.vault import Agent, parse, render

from .conftest import draft

import pytest

PYTHON_FRONTMATTER_STYLE = """---
confidence: high
captured: 2026-05-06
description: When paying debts
last_seen: 2026-05-06
name: Debt order
schema_version: 1
sources:
- conversation_2026-05-06
type: feedback
---

Avalanche first.
"""

OBSIDIAN_STYLE = """---
schema_version: 1
name: "Risk tolerance"
description: 'Moderately risk-averse'
type: user
captured: 2026-05-06
last_seen: 2026-05-06
sources: [conversation_2026-05-06]
confidence: medium
aliases:
  - risk
cssclasses: []
tags:
  - finance/risk
---
# Risk tolerance

See [[feedback_debt_priority_order]].
"""


def test_python_frontmatter_file_reads_and_validates(agent: Agent) -> None:
    (agent.memory_dir / "feedback_debt_order.md").write_text(PYTHON_FRONTMATTER_STYLE)
    note = agent.get_note("feedback_debt_order.md")
    assert note.meta["captured"] == dt.date(2026, 5, 6)
    assert note.body == "\nAvalanche first.\n"
    agent.rebuild_index()
    assert agent.validate() == []


def test_obsidian_file_keeps_unknown_keys_and_body_on_update(agent: Agent) -> None:
    path = agent.memory_dir / "user_risk_tolerance.md"
    path.write_text(OBSIDIAN_STYLE)
    agent.rebuild_index()
    agent.update_note("user_risk_tolerance.md", {"confidence": "high"})
    text = path.read_text()
    assert "aliases:\n  - risk\n" in text and "cssclasses: []" in text
    assert 'name: "Risk tolerance"' in text  # untouched keys keep their quoting
    assert text.endswith("---\n# Risk tolerance\n\nSee [[feedback_debt_priority_order]].\n")
    assert text.count("confidence: high") == 1


def test_only_changed_key_lines_change(agent: Agent) -> None:
    note = agent.new_note(draft())
    before = note.path.read_text().splitlines()
    agent.update_note(note.filename, {"last_seen": dt.date(2026, 6, 1)})
    after = note.path.read_text().splitlines()
    diff = [(a, b) for a, b in zip(before, after) if a != b]
    assert diff == [("last_seen: 2026-05-06", "last_seen: 2026-06-01")]


def test_body_kept_byte_for_byte_with_crlf_and_trailing_spaces(agent: Agent) -> None:
    body = "line one  \r\n\r\n\ttabbed\r\nno newline at end"
    text = PYTHON_FRONTMATTER_STYLE.replace("\n", "\r\n").split("\r\n---\r\n", 1)[0] + "\r\n---\r\n" + body
    path = agent.memory_dir / "feedback_debt_order.md"
    path.write_bytes(text.encode())
    agent.rebuild_index()
    agent.update_note("feedback_debt_order.md", {"confidence": "low"})
    raw = path.read_bytes().decode()
    assert raw.endswith("---\r\n" + body)
    assert "confidence: low\r\n" in raw


def test_impossible_date_is_reported_not_crashing() -> None:
    doc = parse("---\ncaptured: 2026-02-30\n---\n")
    assert doc.meta["captured"] == "2026-02-30"


def test_parse_error_names_file_and_line() -> None:
    with pytest.raises(FrontmatterParseError) as err:
        parse("---\nschema_version: 1\nname: Foo: bar\n---\nbody", path="memory/x.md")
    assert err.value.line == 3
    assert "memory/x.md:3" in str(err.value)


_scalar = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30),
    st.integers(-10**6, 10**6),
    st.booleans(),
    st.none(),
    st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 12, 31)),
)
_value = st.one_of(_scalar, st.lists(_scalar, max_size=4))
_keys = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(
    meta=st.dictionaries(_keys, _value, max_size=8),
    changes=st.dictionaries(_keys, _value, max_size=3),
    body=st.text(max_size=200),
)
def test_property_roundtrip_and_minimal_rewrite(meta: dict, changes: dict, body: str) -> None:
    """Anything written reads back equal, and re-rendering with new values keeps the rest."""
    text = render(parse(""), meta, body)
    doc = parse(text)
    assert doc.meta == meta
    assert doc.body == body
    new_meta = {**doc.meta, **changes}
    text2 = render(doc, new_meta)
    doc2 = parse(text2)
    assert doc2.meta == new_meta
    assert doc2.body == body
    assert list(doc2.meta) == list(new_meta)  # key order kept, new keys appended
    # a key whose value did not change keeps its exact original lines
    unchanged = [k for k in meta if k not in changes or changes[k] == meta[k] and type(changes[k]) is type(meta[k])]
    for key in unchanged:
        single = render(parse(""), {key: meta[key]}, "").split("---\n")[1]
        assert single in text2


def test_the_line_ending_is_the_openers_not_the_bodys() -> None:
    # Found by the property test: an LF file whose body is a CRLF line was re-rendered in CRLF.
    doc = parse(render(parse(""), {"a": None}, "\r\n"))
    assert doc.newline == "\n" and render(doc, {"a": None, "b": 1}).startswith("---\na: null\nb: 1\n---\n")
    assert parse("---\r\na: 1\r\n---\r\nbody\n").newline == "\r\n"
