"""Issue 7, section 3: the INDEX keeps what the operator wrote.

Rebuild keeps hand edits (memory and wiki), titles round-trip through an INDEX
line, lint reads promoted entries and persona targets, a crash between renames
is rolled forward, and the parse cache sees in-place edits.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atomic_agents.exceptions import ValidationError
from atomic_agents.vault import Agent, Vault, WikiDraft, lint_agent, parse_entry
from atomic_agents.vault._index import format_entry, norm_title, title_problem

from .conftest import TODAY, draft, tree_digest

LATER = dt.date(2026, 9, 1)


def _index(agent: Agent, kind: str = "memory") -> Path:
    return agent.folder(kind) / "INDEX.md"  # type: ignore[arg-type]


def _issues(agent: Agent, **kw: object) -> list[tuple[str, str, str, str]]:
    return [(i.rule, (i.path or "").rsplit("/", 1)[-1], i.severity, i.message) for i in lint_agent(agent, **kw).issues]


# ------------------------------------------------------------------ rebuild
HAND_INDEX = """# Finance Coach — Memory Index

Loaded every run. Curated by hand.

## Reference
<!-- operator: reference first, it is what I use most -->
- `Note gamma` — gamma, shortened by hand

## Critical Feedback
Read these before advising.
- `Note alpha` — alpha!

---

## My Own Section
- `Note delta` — delta lives here on purpose
A hand-written line under my section.
- `vault lint`, run it weekly (prose, not an entry)

## Recently Promoted to Persona
- `Note beta` — promoted 2026-04-01 from feedback_beta.md
- `Voice rule` — promoted 2026-03-02 from feedback_voice.md

## Archive (superseded)
"""


def _hand_vault(agent: Agent) -> None:
    agent.new_note(draft("alpha", description="When alpha"))
    agent.new_note(draft("beta", description="When beta"))
    agent.new_note(draft("gamma", type="reference", description="When gamma"))
    agent.new_note(draft("delta", description="When delta"))
    agent.update_note("feedback_beta.md", {"superseded_by": "persona/USER.md#communication"})
    _index(agent).write_text(HAND_INDEX)


def test_rebuild_of_a_hand_curated_index_changes_nothing(agent: Agent) -> None:
    _hand_vault(agent)
    result = agent.rebuild_index(today=LATER)
    assert _index(agent).read_text() == HAND_INDEX
    assert result["files_written"] == [] and result["entries"] == 4 and result["units"] == 4
    assert agent.validate() == []
    assert [i for i in _issues(agent) if i[2] == "error"] == []


def test_rebuild_fixes_only_what_is_wrong(agent: Agent) -> None:
    _hand_vault(agent)
    agent.new_note(draft("epsilon", description="When epsilon"))  # appended by the writer
    text = _index(agent).read_text()
    text = text.replace("- `Note epsilon` — When epsilon\n", "")  # missing: rebuild adds it back
    text = text.replace("- `Note alpha` — alpha!\n", "- `Note alpha` — alpha!\n- `Ghost` — names no file\n- `Note alpha` — a duplicate\n")
    _index(agent).write_text(text)
    result = agent.rebuild_index(today=LATER)
    expected = HAND_INDEX.replace("- `Note alpha` — alpha!\n", "- `Note alpha` — alpha!\n- `Note epsilon` — When epsilon\n")
    assert _index(agent).read_text() == expected
    assert result["added"] == ["feedback_epsilon.md"]
    assert sorted(result["dropped"]) == ["- `Ghost` — names no file", "- `Note alpha` — a duplicate"]
    assert agent.validate() == []


def test_rebuild_moves_only_entries_that_must_move(agent: Agent) -> None:
    _hand_vault(agent)
    agent.new_note(draft("alpha_revised", description="When alpha, revised"))
    agent.supersede("feedback_alpha.md", "feedback_alpha_revised.md", today=TODAY)
    # put alpha back in its type section by hand: it is superseded, so it must go to the Archive
    text = _index(agent).read_text().replace("## Archive (superseded)\n- `Note alpha` — superseded by feedback_alpha_revised.md, 2026-05-06\n",
                                             "## Archive (superseded)\n")
    text = text.replace("- `Note alpha_revised`", "- `Note alpha` — alpha!\n- `Note alpha_revised`")
    _index(agent).write_text(text)
    agent.rebuild_index(today=LATER)
    after = _index(agent).read_text()
    archive = after.split("## Archive (superseded)\n")[1]
    assert "- `Note alpha` — superseded by feedback_alpha_revised.md, 2026-09-01" in archive
    assert after.count("`Note alpha`") == 1
    assert "- `Note delta` — delta lives here on purpose" in after.split("## My Own Section\n")[1]
    assert agent.validate() == []


def test_rebuild_leaves_stale_entries_in_hand_written_sections_to_the_operator(agent: Agent) -> None:
    _hand_vault(agent)
    text = HAND_INDEX.replace("- `Note delta` — delta lives here on purpose\n",
                              "- `Note delta` — delta lives here on purpose\n- `Old idea` — its note was deleted\n")
    _index(agent).write_text(text)
    result = agent.rebuild_index(today=LATER)
    assert _index(agent).read_text() == text and result["kept_orphans"] == ["- `Old idea` — its note was deleted"]
    assert ("index-orphan", "INDEX.md") in {(r, f) for r, f, *_ in _issues(agent)}  # lint still says so


def test_rebuild_keeps_the_line_of_a_note_that_does_not_parse(agent: Agent) -> None:
    for t in "abcdefghi":
        agent.new_note(draft(f"rule_{t}"))
    bad = agent.memory_dir / "feedback_rule_e.md"
    bad.write_text(bad.read_text().replace("confidence: high", "confidence: [high"))  # YAML error
    before = _index(agent).read_text()
    result = agent.rebuild_index(today=LATER)
    assert _index(agent).read_text() == before
    assert result["entries"] == 9 and result["units"] == 9
    assert result["kept_unreadable"] == ["feedback_rule_e.md"]
    assert len(result["unreadable"]) == 1 and "feedback_rule_e.md" in result["unreadable"][0]
    rules = {(r, f) for r, f, _, _ in _issues(agent)}
    assert ("yaml", "feedback_rule_e.md:8") in rules or any(r == "yaml" for r, _ in rules)
    assert not any(r == "index-orphan" for r, _ in rules)


def test_rebuild_keeps_lines_it_cannot_tell_from_an_unreadable_notes(agent: Agent) -> None:
    agent.new_note(draft("alpha"))
    (agent.memory_dir / "feedback_broken.md").write_bytes(b"---\n: [\n---\n")  # no name to guess
    text = _index(agent).read_text().replace("## Locked Decisions\n", "## Locked Decisions\n- `Hand title` — of the broken note?\n")
    _index(agent).write_text(text)
    result = agent.rebuild_index(today=LATER)
    assert "- `Hand title` — of the broken note?" in _index(agent).read_text()
    assert result["kept_unmatched"] == ["- `Hand title` — of the broken note?"]
    (agent.memory_dir / "feedback_broken.md").unlink()
    result = agent.rebuild_index(today=LATER)
    assert "Hand title" not in _index(agent).read_text() and result["dropped"] == ["- `Hand title` — of the broken note?"]


REFERENCE_WIKI = """# WIKI INDEX: finance

Always-loaded routing layer. Pages are distillations of source documents in raw/.

---

## Pending distillation

<!-- Source documents in raw/ not yet distilled. -->

- [CPA meeting](../raw/2026-04-22_cpa_meeting.md) — to distill into tax_strategy_2026

## Background and context

<!-- Format: [page title](filename.md) with a one-line description. -->
- [Debt methods](debt_methods.md) — avalanche vs snowball, my words

## Reference material

- [Tax strategy 2026](tax_strategy_2026.md): hand hook with a colon

---

## How wiki pages cite sources

Every wiki page has a `sources:` field.
"""


def _page(topic: str, name: str) -> WikiDraft:
    return WikiDraft(topic=topic, name=name, description=f"{name}, from the file", sources=["raw/x.md"], confidence="high")


def test_wiki_rebuild_keeps_hand_sections_and_hooks(agent: Agent) -> None:
    agent.new_wiki_page(_page("debt_methods", "Debt methods"))
    agent.new_wiki_page(_page("tax_strategy_2026", "Tax strategy 2026"))
    _index(agent, "wiki").write_text(REFERENCE_WIKI)
    result = agent.rebuild_index("wiki", today=LATER)
    assert result["files_written"] == [] and _index(agent, "wiki").read_text() == REFERENCE_WIKI
    assert agent.validate() == []  # the raw/ link is the operator's pointer, not an orphan
    # a writer's update keeps the hand-placed entry and its hook where the operator put it
    agent.update("debt_methods.md", {"tags": ["debt"]}, unit_type="wiki")
    agent.new_wiki_page(_page("credit_scores", "Credit scores"))
    after = _index(agent, "wiki").read_text()
    assert "- [Debt methods](debt_methods.md) — avalanche vs snowball, my words" in after.split("## Background and context")[1]
    assert "- `Credit scores` — Credit scores, from the file" in after
    agent.rebuild_index("wiki", today=LATER)
    assert _index(agent, "wiki").read_text() == after
    assert agent.validate() == []


# ----------------------------------------------------------------- promoted
def test_promoted_entry_is_kept_by_writes_rebuild_and_lint(agent: Agent) -> None:
    _hand_vault(agent)
    (agent.persona_dir / "USER.md").write_text("# USER\n\n## Communication\nShort answers.\n")
    agent.touch("feedback_beta.md", today=LATER)
    agent.update_note("feedback_beta.md", {"description": "changed"}, today=LATER)
    agent.rebuild_index(today=LATER)
    text = _index(agent).read_text()
    assert "- `Note beta` — promoted 2026-04-01 from feedback_beta.md" in text.split("## Recently Promoted to Persona\n")[1]
    assert text.count("Note beta") == 1 and "2026-09-01" not in text
    found = _issues(agent)
    assert not any(f == "feedback_beta.md" and r in ("index-missing", "supersede-link") for r, f, _, _ in found)
    assert ("promoted", "feedback_beta.md", "hint") in {(r, f, s) for r, f, s, _ in found}
    assert agent.validate() == []


def test_reference_promoted_form_counts_as_the_entry(agent: Agent) -> None:
    agent.new_note(draft("voice", description="When voice"))
    agent.update_note("feedback_voice.md", {"superseded_by": "persona/SOUL.md#voice"})
    text = _index(agent).read_text()
    text = "\n".join(l for l in text.splitlines() if "Note voice" not in l) + "\n"
    text = text.replace("## Recently Promoted to Persona\n",
                        "## Recently Promoted to Persona\n- [Voice](feedback_voice.md), promoted to persona/SOUL.md#voice on 2026-04-02\n")
    _index(agent).write_text(text)
    assert parse_entry("- [Voice](feedback_voice.md), promoted to x on 2026-04-02").filename == "feedback_voice.md"  # type: ignore[union-attr]
    assert agent.validate() == []
    agent.rebuild_index(today=LATER)
    assert _index(agent).read_text() == text


def test_a_note_superseded_by_a_persona_section_is_listed_as_promoted(agent: Agent) -> None:
    agent.new_note(draft("brevity"))
    agent.update_note("feedback_brevity.md", {"superseded_by": "persona/USER.md#communication"}, today=TODAY)
    text = _index(agent).read_text()
    assert "- `Note brevity` — promoted 2026-05-06 from feedback_brevity.md" in text.split("## Recently Promoted to Persona\n")[1]


def test_persona_target_is_not_a_note(agent: Agent) -> None:
    agent.new_note(draft("brevity"))
    agent.update_note("feedback_brevity.md", {"superseded_by": "persona/USER.md#communication"})
    (agent.persona_dir / "USER.md").unlink()
    [issue] = [i for i in lint_agent(agent).issues if i.field == "superseded_by"]
    assert issue.rule == "supersede-link" and "not a note" in issue.message and "does not exist" not in issue.message
    (agent.persona_dir / "USER.md").write_text("# USER\n")
    [issue] = [i for i in lint_agent(agent).issues if i.field == "superseded_by"]
    assert issue.severity == "hint" and "not a note" in issue.message


def test_undated_hint_suggests_the_spec_form(agent: Agent) -> None:
    agent.new_note(draft("q3_income_target", type="decision", expires_at="2026-09-30"))
    agent.new_note(draft("launch", type="project", expires_at="2027-06-30"))
    agent.new_note(draft("q4_review", type="decision", period="2026"))
    msgs = {f: m for r, f, _, m in _issues(agent, today=TODAY) if r in ("undated-time-bounded", "dated-form")}
    assert msgs["decision_q3_income_target.md"].endswith("consider decision_2026-q3_income_target.md")
    assert msgs["project_launch.md"].endswith("consider project_2027_launch.md")
    assert msgs["decision_2026_q4_review.md"].endswith("consider decision_2026-q4_review.md")


# -------------------------------------------------------------------- titles
_TITLE_CHARS = st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))


@settings(max_examples=400, deadline=None)
@given(title=st.text(_TITLE_CHARS, min_size=1, max_size=40).filter(lambda t: t.strip()),
       hook=st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
       link=st.booleans())
def test_every_allowed_title_round_trips_through_an_index_line(title: str, hook: str, link: bool) -> None:
    assert title_problem(title) is None
    line = format_entry(title, hook, "feedback_x.md" if link else None)
    assert "\n" not in line and "\r" not in line
    e = parse_entry(line)
    assert e is not None and e.title == norm_title(title) and e.hook == " ".join(hook.split())
    assert e.filename == ("feedback_x.md" if link else None)


@pytest.mark.parametrize("name", ["a `tick` name", "``", "ends with `", "[x](y.md) — and more", "two  spaces\u00a0nbsp", "a ] b [ c \\"])
def test_odd_titles_are_written_once_and_validate(agent: Agent, name: str) -> None:
    n = agent.new_note(draft("odd", name=name))
    for k in range(3):
        agent.update_note(n.filename, {"description": f"version {k}"})
        agent.touch(n.filename)
    entries = agent.index().entries()
    assert len(entries) == 1 and norm_title(entries[0][1].title) == norm_title(name)
    assert agent.validate() == []
    agent.rebuild_index()
    assert len(agent.index().entries()) == 1 and agent.validate() == []


@pytest.mark.parametrize("bad", ["line\nbreak", "carriage\rreturn", "tab\tin", "sep\u2028arator", "nul\x00", "bell\x07", "next\x85line", "   "])
def test_titles_an_index_line_cannot_hold_are_refused_naming_the_field(agent: Agent, bad: str) -> None:
    agent.new_note(draft("fine"))
    before = tree_digest(agent.agents_root)
    with pytest.raises(ValidationError) as exc:
        agent.new_note(draft("odd", name=bad))
    assert exc.value.field == "name"
    with pytest.raises(ValidationError) as exc:
        agent.update_note("feedback_fine.md", {"name": bad})
    assert exc.value.field == "name"
    with pytest.raises(ValidationError):
        agent.new_wiki_page(_page("odd_page", bad))
    assert tree_digest(agent.agents_root) == before


def test_a_hand_written_bad_title_is_reported_by_validate(agent: Agent) -> None:
    n = agent.new_note(draft("fine"))
    n.path.write_text(n.path.read_text().replace("name: Note fine", 'name: "two\\nlines"'))
    found = agent.validate()
    assert ("name", "index-title") in {(i.field, i.rule) for i in found}
    assert all("feedback_fine.md" in (i.path or "") or i.rule == "index-orphan" for i in found)


# -------------------------------------------------------------- crash windows
class _Killed(BaseException):
    """Stands for SIGKILL in-process: nothing after it runs (the intent record stays)."""


def _die_after(monkeypatch: pytest.MonkeyPatch, renames: int) -> list[str]:
    """Make the next ``atomic_write_many`` of the write path land ``renames`` files, then die."""
    import atomic_agents.vault._agent as mod
    from atomic_agents._io import atomic_write

    done: list[str] = []

    def dying(items, *, root):  # type: ignore[no-untyped-def]
        for path, data in items[:renames]:
            atomic_write(path, data, root=root)
            done.append(path.name)
        monkeypatch.undo()
        raise _Killed

    monkeypatch.setattr(mod, "atomic_write_many", dying)
    return done


def test_kill_between_note_and_index_of_an_update_is_rolled_forward(vault: Vault, agent: Agent, monkeypatch) -> None:
    agent.new_note(draft("alpha", description="old hook"))
    assert _die_after(monkeypatch, 1) == []
    with pytest.raises(_Killed):
        agent.update_note("feedback_alpha.md", {"description": "new hook"})
    fresh = vault.agent("finance")
    assert "- `Note alpha` — old hook" in _index(fresh).read_text()
    assert ("interrupted-write", ".index-pending.json", "error") in {(r, f, s) for r, f, s, _ in _issues(fresh)}
    assert fresh.validate() == []
    assert "- `Note alpha` — new hook" in _index(fresh).read_text()
    assert not any(r == "interrupted-write" for r, *_ in _issues(fresh))


def test_kill_before_any_rename_changes_nothing(vault: Vault, agent: Agent, monkeypatch) -> None:
    agent.new_note(draft("alpha", description="old hook"))
    _index(agent).write_text(_index(agent).read_text().replace("old hook", "hand hook"))
    _die_after(monkeypatch, 0)
    with pytest.raises(_Killed):
        agent.update_note("feedback_alpha.md", {"description": "new hook"})
    fresh = vault.agent("finance")
    assert fresh.validate() == []
    assert fresh.get_note("feedback_alpha.md").description == "old hook"
    assert "- `Note alpha` — hand hook" in _index(fresh).read_text()  # nothing landed: nothing rolled forward


@pytest.mark.parametrize("renames", [1, 2])
def test_kill_inside_a_supersede_completes_both_links(vault: Vault, agent: Agent, monkeypatch, renames: int) -> None:
    agent.new_note(draft("target", type="decision"))
    agent.new_note(draft("target_revised", type="decision"))
    _die_after(monkeypatch, renames)
    with pytest.raises(_Killed):
        agent.supersede("decision_target.md", "decision_target_revised.md", today=TODAY)
    fresh = vault.agent("finance")
    if renames == 1:  # the old note says superseded, the new one does not know yet: lint sees it
        assert ("supersede-one-sided", "decision_target.md") in {(r, f) for r, f, *_ in _issues(fresh)}
    assert fresh.validate() == []
    old, new = fresh.get_note("decision_target.md"), fresh.get_note("decision_target_revised.md")
    assert old.superseded_by == new.filename and new.supersedes == old.filename
    assert "- `Note target` — superseded by decision_target_revised.md" in _index(fresh).read_text().split("## Archive")[1]
    assert not any(r in ("supersede-one-sided", "interrupted-write") for r, *_ in _issues(fresh))


def test_kill_inside_a_create_that_supersedes(vault: Vault, agent: Agent, monkeypatch) -> None:
    agent.new_note(draft("target", type="decision"))
    _die_after(monkeypatch, 1)
    with pytest.raises(_Killed):
        agent.new_note(draft("target_v2", type="decision", supersedes="decision_target.md"))
    fresh = vault.agent("finance")
    assert fresh.validate() == []
    assert fresh.get_note("decision_target.md").superseded_by == "decision_target_v2.md"
    assert {e.title for _, e in fresh.index().entries()} == {"Note target", "Note target_v2"}


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    import atomic_agents.vault._agent as mod
    from atomic_agents._io import atomic_write
    from atomic_agents.vault import Vault
    def dying(items, *, root):
        atomic_write(items[0][0], items[0][1], root=root)
        os.kill(os.getpid(), signal.SIGKILL)
    mod.atomic_write_many = dying
    agent = Vault(sys.argv[1]).agent("finance")
    if sys.argv[2] == "supersede":
        agent.supersede("decision_target.md", "decision_target_revised.md")
    else:
        agent.update_note("decision_target.md", {"description": "new hook"})
    """
)


@pytest.mark.parametrize("op", ["update", "supersede"])
def test_sigkill_between_renames(vault: Vault, agent: Agent, op: str) -> None:
    agent.new_note(draft("target", type="decision", description="old hook"))
    agent.new_note(draft("target_revised", type="decision"))
    proc = subprocess.run([sys.executable, "-c", KILLER, str(agent.agents_root), op], env={**os.environ})
    assert proc.returncode == -signal.SIGKILL
    fresh = vault.agent("finance")
    assert fresh.validate() == []
    text = _index(fresh).read_text()
    if op == "update":
        assert "- `Note target` — new hook" in text
    else:
        assert fresh.get_note("decision_target_revised.md").supersedes == "decision_target.md"
        assert "superseded by decision_target_revised.md" in text.split("## Archive")[1]


# ---------------------------------------------------------------- parse cache
def _same_size_edit(path: Path, old: str, new: str) -> None:
    """Edit in place keeping inode, size and mtime (what ``touch -r`` after an edit leaves)."""
    assert len(old) == len(new)
    st = path.stat()
    with open(path, "r+", encoding="utf-8") as fh:
        text = fh.read()
        fh.seek(0)
        fh.write(text.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)


def test_cache_sees_an_edit_that_keeps_size_and_mtime(agent: Agent) -> None:
    n = agent.new_note(draft("alpha"))
    assert lint_agent(agent).errors == []  # fills the cache
    _same_size_edit(n.path, "confidence: high", "confidence: hihg")
    assert [i.rule for i in lint_agent(agent).errors] == ["confidence"]
    assert [i.rule for i in agent.validate()] == ["confidence"]


def test_cache_sees_cp_p(agent: Agent, tmp_path: Path) -> None:
    n = agent.new_note(draft("alpha"))
    assert lint_agent(agent).errors == []
    other = tmp_path / "copy.md"
    other.write_text(n.path.read_text().replace("confidence: high", "confidence: hihg"))
    os.utime(other, ns=(n.path.stat().st_atime_ns, n.path.stat().st_mtime_ns))
    shutil.copy2(other, n.path)  # cp -p: same size, mtime copied over
    assert [i.rule for i in lint_agent(agent).errors] == ["confidence"]


def test_cache_checks_racy_entries_by_content(agent: Agent, monkeypatch) -> None:
    """On a file system whose timestamps do not tick between two edits, a digest still tells."""
    import atomic_agents.vault._agent as mod
    import atomic_agents.vault._cache as cache_mod

    monkeypatch.setattr(mod, "stamp_of", lambda st: (st.st_ino, st.st_size, 1, 1))  # a clock that never ticks
    monkeypatch.setattr(cache_mod, "_racy", lambda stamp: True)  # ... so every entry stays racy
    n = agent.new_note(draft("alpha"))
    assert lint_agent(agent).errors == []
    with open(n.path, "r+", encoding="utf-8") as fh:
        text = fh.read()
        fh.seek(0)
        fh.write(text.replace("confidence: high", "confidence: hihg"))
    assert [i.rule for i in lint_agent(agent).errors] == ["confidence"]


def test_writer_keeps_an_in_place_index_edit_that_keeps_size_and_mtime(agent: Agent) -> None:
    agent.new_note(draft("alpha", description="When alpha"))
    _same_size_edit(_index(agent), "When alpha", "Hand alpha")
    agent.new_note(draft("beta"))  # the same Agent object: its cached INDEX must not win
    assert "- `Note alpha` — Hand alpha" in _index(agent).read_text()
