"""Item 2: the spec's six checks block bad writes, name file/field/rule, and change nothing."""

from __future__ import annotations

import datetime as dt

import pytest

from atomic_agents.exceptions import UnsafeNameError, ValidationError
from atomic_agents.vault import Agent, Vault, validate_note_meta

from .conftest import draft, tree_digest

GOOD = dict(
    schema_version=1, name="n", description="d", type="feedback", captured=dt.date(2026, 5, 6),
    last_seen=dt.date(2026, 5, 6), sources=["observation"], confidence="high",
)


@pytest.mark.parametrize("field", ["schema_version", "name", "description", "type", "captured", "last_seen", "sources", "confidence"])
def test_check1_required_fields(field: str) -> None:
    meta = {k: v for k, v in GOOD.items() if k != field}
    issues = validate_note_meta(meta, filename="feedback_x.md")
    assert any(i.field == field and i.rule == "required" for i in issues), issues


def test_check2_type_in_taxonomy() -> None:
    [issue] = [i for i in validate_note_meta({**GOOD, "type": "idea"}) if i.severity == "error"]
    assert (issue.field, issue.rule) == ("type", "taxonomy")


def test_check3_confidence_set() -> None:
    [issue] = validate_note_meta({**GOOD, "confidence": "certain"})
    assert (issue.field, issue.rule) == ("confidence", "confidence")


@pytest.mark.parametrize("value", ["2026-02-30", "2026-13-01", "06/05/2026", "2026-5-6", 20260506,
                                   dt.datetime(2026, 5, 6, 10, 0)])
def test_check4_real_calendar_dates(value: object) -> None:
    issues = validate_note_meta({**GOOD, "captured": value})
    assert [(i.field, i.rule) for i in issues] == [("captured", "date")]


def test_check4_expires_at_is_a_date_too() -> None:
    issues = validate_note_meta({**GOOD, "expires_at": "soon"})
    assert [(i.field, i.rule) for i in issues] == [("expires_at", "date")]


@pytest.mark.parametrize(
    "filename,ok",
    [
        ("feedback_debt_order.md", True),
        ("feedback_2026_debt_order.md", True),
        ("feedback_2026-q3_debt_order.md", True),
        ("feedback-debt.md", False),
        ("Feedback_debt.md", False),
        ("feedback_debt.txt", False),
        ("decision_debt.md", False),  # filename type must equal frontmatter type
        ("idea_debt.md", False),
    ],
)
def test_check5_filename_pattern(filename: str, ok: bool) -> None:
    errors = [i for i in validate_note_meta(GOOD, filename=filename) if i.severity == "error"]
    assert (errors == []) is ok, errors


def test_check6_index_updated_in_same_operation(agent: Agent) -> None:
    note = agent.new_note(draft())
    assert f"`{note.name}`" in (agent.memory_dir / "INDEX.md").read_text()


def test_long_name_and_description_are_warnings_not_errors(agent: Agent) -> None:
    note = agent.new_note(draft(name="N" * 120, description="D" * 300))
    issues = validate_note_meta(note.meta, filename=note.filename)
    assert {i.rule for i in issues} == {"name-length", "description-length"}
    assert all(i.severity == "warning" for i in issues)


@pytest.mark.parametrize(
    "kw,field,rule",
    [
        ({"type": "idea"}, "type", "taxonomy"),
        ({"confidence": "sure"}, "confidence", "confidence"),
        ({"captured": "2026-02-30"}, "captured", "date"),
        ({"name": ""}, "name", "required"),
        ({"sources": "observation"}, "sources", "field-type"),
    ],
)
def test_refused_write_names_file_field_rule_and_changes_nothing(agent: Agent, kw: dict, field: str, rule: str) -> None:
    agent.new_note(draft("existing_note"))
    before = tree_digest(agent.agents_root)
    with pytest.raises(ValidationError) as err:
        agent.new_note(draft("new_note", **kw))
    assert (err.value.field, err.value.rule) == (field, rule)
    assert err.value.path and err.value.path.endswith("_new_note.md")
    assert tree_digest(agent.agents_root) == before


def test_refused_batch_writes_nothing(agent: Agent) -> None:
    before = tree_digest(agent.agents_root)
    with pytest.raises(ValidationError):
        agent.create_notes([draft(f"ok_{i}") for i in range(5)] + [draft("bad", confidence="x")])
    assert tree_digest(agent.agents_root) == before


def test_refused_update_changes_nothing(agent: Agent) -> None:
    note = agent.new_note(draft())
    before = tree_digest(agent.agents_root)
    with pytest.raises(ValidationError) as err:
        agent.update_note(note.filename, {"type": "decision"})
    assert err.value.rule == "filename-type"
    assert tree_digest(agent.agents_root) == before


@pytest.mark.parametrize("bad", ["../escape", "a/b", "/etc/passwd", "..", "Upper", "with space", "x__y", ""])
def test_unsafe_topics_and_agent_names_refused(vault: Vault, agent: Agent, bad: str) -> None:
    before = tree_digest(vault.root)
    with pytest.raises(UnsafeNameError):
        agent.new_note(draft(bad))
    with pytest.raises(UnsafeNameError):
        vault.init_agent(bad)
    with pytest.raises(UnsafeNameError):
        agent.get_note(bad + "/../../x.md" if bad else "../x.md")
    assert tree_digest(vault.root) == before
    assert not (vault.root.parent / "escape.md").exists()
