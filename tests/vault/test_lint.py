"""Item 10: lint finds what is wrong or getting old."""

from __future__ import annotations

import datetime as dt

from atomic_agents.vault import Agent, lint_agent

from .conftest import draft


def rules(agent: Agent, **kw) -> set[tuple[str, str]]:
    return {(i.rule, (i.path or "").rsplit("/", 1)[-1]) for i in lint_agent(agent, **kw).issues}


def test_clean_vault_has_no_errors(agent: Agent) -> None:
    agent.new_note(draft())
    assert lint_agent(agent).errors == []


def test_invalid_note_reported_with_field_and_rule(agent: Agent) -> None:
    agent.new_note(draft())
    p = agent.memory_dir / "feedback_debt_priority_order.md"
    p.write_text(p.read_text().replace("confidence: high", "confidence: maybe"))
    [err] = lint_agent(agent).errors
    assert (err.field, err.rule) == ("confidence", "confidence") and err.path == "finance/memory/feedback_debt_priority_order.md"


def test_unparseable_frontmatter_reported_with_line(agent: Agent) -> None:
    (agent.memory_dir / "user_bad.md").write_text("---\nschema_version: 1\nname: Foo: bar\n---\n")
    errs = lint_agent(agent).errors
    assert any(e.rule == "yaml" and e.path.endswith("user_bad.md:3") for e in errs)


def test_broken_supersede_link(agent: Agent) -> None:
    agent.new_note(draft(supersedes=None))
    agent.update_note("feedback_debt_priority_order.md", {"superseded_by": "feedback_gone.md"})
    assert ("supersede-link", "feedback_debt_priority_order.md") in rules(agent)


def test_index_orphans_and_unindexed_notes(agent: Agent) -> None:
    agent.new_note(draft("alpha_rule"))
    (agent.memory_dir / "user_hand_written.md").write_text(
        (agent.memory_dir / "feedback_alpha_rule.md").read_text().replace("type: feedback", "type: user")
        .replace("Note alpha_rule", "Hand written")
    )
    index = agent.memory_dir / "INDEX.md"
    index.write_text(index.read_text() + "- `Ghost` — gone\n")
    found = rules(agent)
    assert ("index-missing", "user_hand_written.md") in found
    assert ("index-orphan", "INDEX.md") in found


def test_stale_expired_long_pinned_and_hints(agent: Agent) -> None:
    agent.new_note(draft("old_rule", last_seen="2026-01-01"))
    agent.new_note(draft("target", type="decision", expires_at="2026-03-31"))
    agent.new_note(draft("wordy", name="W" * 100, description="D" * 200))
    agent.create_notes([draft(f"pin_{i:02d}", pinned=True) for i in range(11)])
    found = rules(agent, today=dt.date(2026, 5, 6))
    assert ("stale", "feedback_old_rule.md") in found
    assert ("expired", "decision_target.md") in found
    assert ("undated-time-bounded", "decision_target.md") in found
    assert ("name-length", "feedback_wordy.md") in found and ("description-length", "feedback_wordy.md") in found
    assert ("pinned-budget", "memory") in found
    report = lint_agent(agent, today=dt.date(2026, 5, 6))
    assert len(report.pinned) == 11 and report.errors == []
    assert rules(agent, today=dt.date(2026, 5, 6), stale_days=200) - found == set()
    assert ("stale", "feedback_old_rule.md") not in rules(agent, today=dt.date(2026, 5, 6), stale_days=200)


def test_parse_cache_never_serves_a_changed_file(agent: Agent) -> None:
    """validate and lint reuse parses of unchanged files only: an edit is always seen."""
    n = agent.new_note(draft("cached_rule"))
    assert lint_agent(agent).errors == []
    cache_file = agent.agents_root / "_cache" / "vault" / "finance.json"
    assert cache_file.exists()
    n.path.write_text(n.path.read_text().replace("confidence: high", "confidence: shaky"))
    [err] = lint_agent(agent).errors
    assert err.rule == "confidence"
    assert [e.rule for e in agent.validate()] == ["confidence"]
    cache_file.write_text("{not json")  # a damaged cache is ignored, never trusted
    assert [e.rule for e in agent.validate()] == ["confidence"]


def test_parse_cache_keeps_entries_of_folders_not_scanned(agent: Agent) -> None:
    import json

    from atomic_agents.vault import WikiDraft

    agent.new_note(draft("one_rule"))
    agent.new_wiki_page(WikiDraft(topic="methods", name="Methods", description="d", sources=["raw/x.md"], confidence="high"))
    lint_agent(agent)
    agent.rebuild_index("memory")  # scans memory/ only
    units = json.loads((agent.agents_root / "_cache" / "vault" / "finance.json").read_text())["units"]
    assert set(units) == {"memory/feedback_one_rule.md", "wiki/methods.md"}
