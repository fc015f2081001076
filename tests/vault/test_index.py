"""Item 4: INDEX.md format, entry-only updates, hand edits, rebuild, split, link form."""

from __future__ import annotations

from atomic_agents.vault import Agent, parse_entry

from .conftest import draft

SECTIONS = ["Critical Feedback", "Locked Decisions", "User Profile", "Active Projects", "Reference",
            "Recently Promoted to Persona", "Archive (superseded)"]


def test_format_sections_by_type(agent: Agent) -> None:
    for t in ("feedback", "decision", "user", "project", "reference"):
        agent.new_note(draft(f"{t}_topic", type=t, description=f"hook for {t}"))
    text = (agent.memory_dir / "INDEX.md").read_text()
    assert text.startswith("# Finance Coach — Memory Index\n")
    headings = [l[3:] for l in text.splitlines() if l.startswith("## ")]
    assert headings == SECTIONS
    for heading, t in zip(SECTIONS, ("feedback", "decision", "user", "project", "reference")):
        body = text.split(f"## {heading}\n")[1].split("\n## ")[0]
        assert body.strip() == f"- `Note {t}_topic` — hook for {t}"


def test_update_changes_only_that_entry_and_keeps_hand_edits(agent: Agent) -> None:
    a = agent.new_note(draft("alpha_rule"))
    agent.new_note(draft("beta_rule"))
    index = agent.memory_dir / "INDEX.md"
    edited = index.read_text().replace("When beta rule matters", "beta (short)")
    edited = edited.replace("## Reference\n", "## Reference\n<!-- operator: keep this tidy -->\n")
    edited = edited.replace("# Finance Coach — Memory Index\n", "# Finance Coach — Memory Index\n\nLoaded every run.\n")
    index.write_text(edited)
    agent.update_note(a.filename, {"description": "Alpha hook, rewritten"})
    after = index.read_text()
    assert after == edited.replace("When alpha rule matters", "Alpha hook, rewritten")


def test_hand_shortened_hook_survives_unrelated_update(agent: Agent) -> None:
    n = agent.new_note(draft("alpha_rule"))
    index = agent.memory_dir / "INDEX.md"
    index.write_text(index.read_text().replace("When alpha rule matters", "alpha!"))
    agent.touch(n.filename)
    agent.update_note(n.filename, {"tags": ["x"]})
    assert "- `Note alpha_rule` — alpha!" in index.read_text()


def test_rebuild_keeps_hand_edited_hooks_and_restores_missing(agent: Agent) -> None:
    agent.new_note(draft("alpha_rule"))
    agent.new_note(draft("beta_rule"))
    index = agent.memory_dir / "INDEX.md"
    text = index.read_text().replace("When alpha rule matters", "alpha!")
    text = "\n".join(l for l in text.splitlines() if "beta" not in l) + "\n- `Ghost entry` — no file\n"
    index.write_text(text)
    agent.rebuild_index()
    rebuilt = index.read_text()
    assert "- `Note alpha_rule` — alpha!" in rebuilt
    assert "- `Note beta_rule` — When beta rule matters" in rebuilt
    assert "Ghost entry" not in rebuilt
    assert agent.validate() == []


def test_reads_reference_link_form(agent: Agent) -> None:
    e = parse_entry("- [Debt order](feedback_debt_priority_order.md) — avalanche first")
    assert e is not None and (e.title, e.filename, e.hook) == ("Debt order", "feedback_debt_priority_order.md", "avalanche first")
    n = agent.new_note(draft())
    index = agent.memory_dir / "INDEX.md"
    index.write_text(index.read_text().replace(f"- `{n.name}` — ", f"- [{n.name}]({n.filename}) — "))
    assert agent.validate() == []
    agent.update_note(n.filename, {"description": "changed hook"})
    assert f"- [{n.name}]({n.filename}) — changed hook" in index.read_text()  # link form kept


def test_splits_into_sub_indexes_past_limit(agent: Agent) -> None:
    agent.create_notes([draft(f"rule_{i:03d}") for i in range(120)] + [draft(f"ref_{i:03d}", type="reference") for i in range(60)])
    main = (agent.memory_dir / "INDEX.md").read_text()
    assert len(main.splitlines()) <= 150
    assert "- [INDEX_feedback.md](INDEX_feedback.md) — sub-index of Critical Feedback" in main
    sub = (agent.memory_dir / "INDEX_feedback.md").read_text()
    assert sub.count("\n- `Note rule_") == 120
    assert len(agent.index().entries()) == 180
    # writes after the split land in the sub-index; validation sees every entry
    agent.new_note(draft("rule_new"))
    assert "`Note rule_new`" in (agent.memory_dir / "INDEX_feedback.md").read_text()
    assert agent.validate() == []


def test_batch_writes_index_once(agent: Agent, monkeypatch) -> None:
    import atomic_agents.vault._agent as mod

    writes: list[str] = []
    real = mod.atomic_write_many

    def spy(items, **kw):  # records every file written
        writes.extend(str(p) for p, _ in items)
        return real(items, **kw)

    monkeypatch.setattr(mod, "atomic_write_many", spy)
    agent.create_notes([draft(f"rule_{i:02d}") for i in range(50)])
    assert sum(p.endswith("INDEX.md") for p in writes) == 1
    assert sum("rule_" in p for p in writes) == 50


def test_same_title_twice_keeps_entries_apart(agent: Agent) -> None:
    a = agent.new_note(draft("target_one", type="decision", name="Income target", description="first"))
    b = agent.new_note(draft("target_two", type="decision", name="Income target", description="second"))
    text = (agent.memory_dir / "INDEX.md").read_text()
    assert "- `Income target` — first" in text
    assert f"- [Income target]({b.filename}) — second" in text
    agent.update_note(b.filename, {"description": "second, changed"})
    agent.update_note(a.filename, {"description": "first, changed"})
    text = (agent.memory_dir / "INDEX.md").read_text()
    assert "- `Income target` — first, changed" in text
    assert f"- [Income target]({b.filename}) — second, changed" in text
    assert agent.validate() == []
    agent.rebuild_index()
    assert len(agent.index().entries()) == 2 and agent.validate() == []


def test_big_section_splits_into_parts_and_a_write_touches_one(agent: Agent, monkeypatch) -> None:
    import atomic_agents.vault._agent as mod

    agent.create_notes([draft(f"rule_{i:03d}") for i in range(400)])
    main = (agent.memory_dir / "INDEX.md").read_text()
    parts = sorted(p.name for p in agent.memory_dir.glob("INDEX_feedback*.md"))
    assert parts == ["INDEX_feedback.md", "INDEX_feedback_2.md", "INDEX_feedback_3.md"]
    for p in parts:
        assert f"- [{p}]({p}) — sub-index of Critical Feedback" in main
        assert len((agent.memory_dir / p).read_text().splitlines()) <= 150
    assert len(agent.index().entries()) == 400
    written: list[str] = []
    real = mod.atomic_write_many

    def spy(items, **kw):
        written.extend(p.name for p, _ in items)
        return real(items, **kw)

    monkeypatch.setattr(mod, "atomic_write_many", spy)
    agent.update_note("feedback_rule_005.md", {"description": "changed"})
    assert written == ["feedback_rule_005.md", "INDEX_feedback.md"]
    written.clear()
    agent.new_note(draft("rule_new"))
    assert written == ["feedback_rule_new.md", "INDEX_feedback_3.md"]
    assert agent.validate() == []


def test_a_cached_index_never_overwrites_another_writers_change(vault, agent: Agent) -> None:
    """Two Agent objects (as two processes) take turns; each sees the other's entries."""
    other = vault.agent("finance")
    agent.create_notes([draft(f"rule_{i:03d}") for i in range(200)])  # split into parts
    agent.new_note(draft("mine_one"))
    other.new_note(draft("theirs_one"))
    agent.new_note(draft("mine_two"))
    part = agent.memory_dir / "INDEX_feedback_2.md"
    part.write_text(part.read_text().replace("When rule 190 matters", "hand-edited hook"))
    other.new_note(draft("theirs_two"))
    titles = {e.title for _, e in agent.index().entries()}
    assert {"Note mine_one", "Note theirs_one", "Note mine_two", "Note theirs_two"} <= titles
    assert "hand-edited hook" in part.read_text()
    assert agent.validate() == []
