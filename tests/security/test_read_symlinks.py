"""Issue 7 §1 (reads): a note symlinked to a file outside the root is an error naming it, never content.

validate and lint report it by path; list and show never show it; an INDEX
rebuild never copies it in. The CLI exits 1 with the path named, no traceback.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from atomic_agents.cli import main
from atomic_agents.exceptions import UnsafePathError
from atomic_agents.vault import Agent, NoteDraft, Vault

from .conftest import Outside

TODAY = dt.date(2026, 5, 6)
LEAK = "LEAKED-TITLE-FROM-OUTSIDE"


def _draft(topic: str, name: str) -> NoteDraft:
    return NoteDraft(type="feedback", topic=topic, name=name, description="A hook", sources=["observation"],
                     confidence="high", body=f"{name}\n", captured=TODAY)


@pytest.fixture
def planted(agents_root: Path, outside: Outside) -> tuple[Agent, Path]:
    """finance/memory/feedback_leak_rule.md -> a valid note outside the root (plus one honest note)."""
    agent, _ = Vault(agents_root).init_agent("finance")
    agent.new_note(_draft("honest_rule", "Honest rule"), today=TODAY)
    other = Vault(outside.dir).init_agent("elsewhere")[0]
    secret = other.new_note(_draft("leak_rule", LEAK), today=TODAY).path
    link = agent.memory_dir / "feedback_leak_rule.md"
    link.symlink_to(secret)
    outside.age()
    return agent, link


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_validate_and_lint_name_it(planted: tuple[Agent, Path]) -> None:
    agent, link = planted
    issues = Vault(agent.agents_root).validate("finance")
    hits = [i for i in issues if i.rule == "outside-root"]
    assert [i.path for i in hits] == ["finance/memory/feedback_leak_rule.md"]
    assert all(LEAK not in str(i) for i in issues)
    report = Vault(agent.agents_root).lint("finance")[0]
    assert any(i.rule == "outside-root" and i.path == "finance/memory/feedback_leak_rule.md" for i in report.errors)
    assert report.notes == 1 and all(LEAK not in str(i) for i in report.issues)


def test_list_show_and_index_never_see_it(planted: tuple[Agent, Path]) -> None:
    agent, link = planted
    assert [n.filename for n in agent.list_notes()] == ["feedback_honest_rule.md"]
    with pytest.raises(UnsafePathError) as exc:
        agent.get_note("feedback_leak_rule.md")
    assert exc.value.path == str(link) and LEAK not in str(exc.value)
    result = agent.rebuild_index(today=TODAY)
    assert result["entries"] == 1 and any("feedback_leak_rule.md" in u for u in result["unreadable"])
    index = "".join(p.read_text() for p in agent.memory_dir.glob("INDEX*.md"))
    assert LEAK not in index and "leak_rule" not in index


def test_a_crash_record_naming_it_never_copies_it_into_the_index(planted: tuple[Agent, Path]) -> None:
    agent, link = planted
    (agent.memory_dir / ".index-pending.json").write_text('[{"file": "feedback_leak_rule.md", "old_title": null}]')
    agent.new_note(_draft("later_rule", "Later rule"), today=TODAY)  # rolls the crash record forward first
    assert LEAK not in (agent.memory_dir / "INDEX.md").read_text()


def test_a_memory_folder_symlinked_out_is_all_errors(agents_root: Path, outside: Outside) -> None:
    agent, _ = Vault(agents_root).init_agent("finance")
    agent.new_note(_draft("leak_rule", LEAK), today=TODAY)
    shutil.move(str(agent.memory_dir), outside.dir / "memory")
    agent.memory_dir.symlink_to(outside.dir / "memory", target_is_directory=True)
    report = Vault(agents_root).lint("finance")[0]
    assert report.notes == 0
    assert any(i.rule == "outside-root" and i.path == "finance/memory/feedback_leak_rule.md" for i in report.errors)
    assert all(LEAK not in str(i) for i in report.issues)
    assert agent.list_notes() == []


def test_an_alias_inside_the_root_is_still_a_note(agents_root: Path) -> None:
    agent, _ = Vault(agents_root).init_agent("finance")
    real = agent.new_note(_draft("honest_rule", "Honest rule"), today=TODAY).path
    (agent.memory_dir / "feedback_alias_rule.md").symlink_to(real)
    assert [n.filename for n in agent.list_notes()] == ["feedback_alias_rule.md", "feedback_honest_rule.md"]
    assert agent.get_note("feedback_alias_rule.md").name == "Honest rule"


def test_cli_exits_1_naming_it(planted: tuple[Agent, Path], capsys: pytest.CaptureFixture[str]) -> None:
    agent, link = planted
    root = str(agent.agents_root)
    code, out, err = _run(capsys, "vault", "show", "finance", "feedback_leak_rule.md", "--agents-root", root)
    assert code == 1 and "feedback_leak_rule.md" in err and "Traceback" not in out + err and LEAK not in out + err
    code, out, err = _run(capsys, "vault", "list", "finance", "--agents-root", root)
    assert code == 0 and "honest_rule" in out and LEAK not in out + err
    assert [line for line in out.splitlines() if "leak_rule" in line and "outside the agents root" not in line] == []
    code, out, err = _run(capsys, "vault", "validate", "finance", "--agents-root", root)
    assert code == 1 and "feedback_leak_rule.md" in out + err and LEAK not in out + err
    code, out, err = _run(capsys, "vault", "lint", "finance", "--agents-root", root)
    assert code == 1 and "feedback_leak_rule.md" in out + err and LEAK not in out + err


def test_journal_log_and_persona_files_outside_the_root_are_not_read(agents_root: Path, outside: Outside) -> None:
    from atomic_agents.vault import journal_items, query_logs

    agent, _ = Vault(agents_root).init_agent("finance")
    (outside.dir / "day.md").write_text(f"# day\n\n## What happened\n- {LEAK}\n")
    (outside.dir / "day.jsonl").write_text('{"ts": "2026-05-06T09:00:00+00:00", "trigger": "cron", "model": "m", '
                                           f'"input_tokens": 1, "output_tokens": 1, "status": "ok", "summary": "{LEAK}"}}\n')
    (outside.dir / "IDENTITY.md").write_text(f"# IDENTITY — {LEAK}\n")
    (agent.journal_dir / "2026-05").mkdir()
    (agent.journal_dir / "2026-05" / "2026-05-06.md").symlink_to(outside.dir / "day.md")
    (agent.log_dir / "2026-05").mkdir()
    (agent.log_dir / "2026-05" / "2026-05-06.jsonl").symlink_to(outside.dir / "day.jsonl")
    (agent.persona_dir / "IDENTITY.md").unlink()
    (agent.persona_dir / "IDENTITY.md").symlink_to(outside.dir / "IDENTITY.md")
    with pytest.raises(UnsafePathError) as exc:
        journal_items(agent, TODAY)
    assert LEAK not in str(exc.value)
    result = query_logs(agent)
    assert result.entries == [] and "outside the agents root" in result.invalid[0]
    assert agent.title == "finance"
    agent.new_note(_draft("honest_rule", "Honest rule"), today=TODAY)
    assert LEAK not in (agent.memory_dir / "INDEX.md").read_text()
