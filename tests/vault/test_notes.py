"""Items 1, 5, 6: CRUD, supersession and lifecycle, old schema versions."""

from __future__ import annotations

import datetime as dt

import pytest

from atomic_agents.exceptions import ConflictError, NotFoundError, SchemaVersionError
from atomic_agents.vault import Agent, WikiDraft, lint_agent

from .conftest import TODAY, draft


def test_create_read_update_list(agent: Agent) -> None:
    n = agent.new_note(draft())
    got = agent.get_note(n.filename)
    assert got.meta["name"] == "Note debt_priority_order" and got.body == "Body of debt_priority_order.\n"
    agent.update_note(n.filename, {"description": "New hook"}, body="New body\n")
    got = agent.get_note(n.filename)
    assert got.description == "New hook" and got.body == "New body\n"
    assert [x.filename for x in agent.list_notes()] == [n.filename]


def test_defaults_of_optional_fields(agent: Agent) -> None:
    n = agent.new_note(draft())
    assert n.meta["pinned"] is False and n.meta["expires_at"] is None and n.meta["tags"] == []
    assert n.meta["schema_version"] == 1


def test_create_refuses_existing_file(agent: Agent) -> None:
    agent.new_note(draft())
    with pytest.raises(ConflictError):
        agent.new_note(draft())


def test_missing_note_is_not_found(agent: Agent) -> None:
    with pytest.raises(NotFoundError):
        agent.get_note("feedback_nope.md")


def test_time_bounded_filename(agent: Agent) -> None:
    n = agent.new_note(draft("income_target", type="decision", period="2026-Q3"))
    assert n.filename == "decision_2026-q3_income_target.md"


def test_supersede_links_both_and_archives(agent: Agent) -> None:
    old = agent.new_note(draft("income_target", type="decision"))
    new = agent.new_note(draft("income_target_revised", type="decision"))
    o, n = agent.supersede(old.filename, new.filename, today=TODAY)
    assert o.meta["superseded_by"] == new.filename and n.meta["supersedes"] == old.filename
    assert o.path.exists() and n.path.exists()  # non-destructive
    assert [x.filename for x in agent.list_notes()] == [new.filename]
    assert {x.filename for x in agent.list_notes(include_superseded=True)} == {old.filename, new.filename}
    index = (agent.memory_dir / "INDEX.md").read_text()
    archive = index.split("## Archive (superseded)")[1]
    assert f"`{old.name}` — superseded by {new.filename}, 2026-05-06" in archive
    assert f"`{old.name}`" not in index.split("## Archive (superseded)")[0]


def test_supersede_conflicts(agent: Agent) -> None:
    a, b, c = (agent.new_note(draft(t, type="decision")) for t in ("a_one", "b_two", "c_three"))
    agent.supersede(a.filename, b.filename)
    with pytest.raises(ConflictError):
        agent.supersede(a.filename, c.filename)


def test_new_note_can_supersede_in_one_operation(agent: Agent) -> None:
    old = agent.new_note(draft("rule_one"))
    new = agent.new_note(draft("rule_two", supersedes=old.filename))
    assert agent.get_note(old.filename).superseded_by == new.filename


def test_lifecycle_pinned_expired_stale(agent: Agent) -> None:
    agent.new_note(draft("pinned_rule", pinned=True))
    agent.new_note(draft("q3_target", type="decision", expires_at="2026-09-30"))
    agent.new_note(draft("old_fact", type="user", captured="2025-01-01", last_seen="2025-01-01"))
    report = lint_agent(agent, today=dt.date(2026, 10, 15))
    rules = {(i.rule, i.path.rsplit("/", 1)[-1]) for i in report.issues}
    assert ("expired", "decision_q3_target.md") in rules
    assert ("stale", "user_old_fact.md") in rules
    assert report.pinned == ["feedback_pinned_rule.md"]
    assert agent.list_notes(pinned=True)[0].filename == "feedback_pinned_rule.md"
    # touching a note re-confirms it: no longer stale
    agent.touch("user_old_fact.md", today=dt.date(2026, 10, 15))
    report = lint_agent(agent, today=dt.date(2026, 10, 15))
    assert not any(i.rule == "stale" and i.path.endswith("user_old_fact.md") for i in report.issues)


def test_wiki_pages(agent: Agent) -> None:
    page = agent.new_wiki_page(WikiDraft(topic="tax_strategy", year=2026, name="Tax strategy 2026",
                                         description="What changed in 2026", sources=["raw/irs_2026.pdf"],
                                         confidence="high", related=["feedback_debt_priority_order.md"]))
    assert page.filename == "tax_strategy_2026.md"
    assert page.meta["type"] == "wiki_page" and page.meta["provenance"] == "distilled"
    assert "`Tax strategy 2026` — What changed in 2026" in (agent.wiki_dir / "INDEX.md").read_text()
    assert agent.validate() == []


LEGACY = """---
name: Old note
description: Written before schema_version existed
type: reference
captured: 2025-01-01
last_seen: 2025-01-01
sources: [observation]
confidence: low
---
old body
"""


def test_reads_old_schema_and_write_upgrades_that_file(agent: Agent) -> None:
    path = agent.memory_dir / "reference_old_note.md"
    path.write_text(LEGACY)
    agent.rebuild_index()
    note = agent.get_note("reference_old_note.md")
    assert note.schema_version == 0 and note.name == "Old note"
    agent.update_note("reference_old_note.md", {"confidence": "medium"})
    upgraded = agent.get_note("reference_old_note.md")
    assert upgraded.meta["schema_version"] == 1 and upgraded.body == "old body\n"
    assert agent.validate() == []


def test_newer_schema_is_refused_on_write(agent: Agent) -> None:
    agent.new_note(draft())
    path = agent.memory_dir / "feedback_debt_priority_order.md"
    path.write_text(path.read_text().replace("schema_version: 1", "schema_version: 7"))
    before = path.read_text()
    with pytest.raises(SchemaVersionError):
        agent.update_note(path.name, {"confidence": "low"})
    assert path.read_text() == before


def test_write_to_old_file_runs_migration_scripts_when_present(agent: Agent) -> None:
    """The migration framework's scripts plug into the single-file upgrade."""
    scripts = agent.agents_root / "_migrations"
    scripts.mkdir()
    (scripts / "v0_to_v1.py").write_text(
        "FROM_VERSION = 0\nTO_VERSION = 1\n"
        "def applies_to(unit):\n    return 'schema_version' not in unit.read_frontmatter()\n"
        "def migrate(unit):\n    meta = unit.read_frontmatter()\n    meta['schema_version'] = 1\n"
        "    meta['migrated_by'] = 'v0_to_v1'\n    unit.write_frontmatter(meta)\n    return {'changes': ['stamped']}\n"
    )
    (agent.memory_dir / "reference_old_note.md").write_text(LEGACY)
    agent.rebuild_index()
    agent.update_note("reference_old_note.md", {"confidence": "medium"})
    meta = agent.get_note("reference_old_note.md").meta
    assert meta["schema_version"] == 1 and meta["migrated_by"] == "v0_to_v1"
