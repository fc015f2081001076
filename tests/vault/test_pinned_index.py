"""The pinned index gives exactly what a full scan gives, through vault writes and hand edits alike."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from pathlib import Path

import pytest

from atomic_agents.bridge import context
from atomic_agents.vault import Agent, NoteDraft, Vault, _pinned

TODAY = dt.date(2026, 5, 6)


def note_text(i: int, *, pinned: bool, superseded: bool = False) -> str:
    return (
        f"---\nschema_version: 1\nname: Topic {i}\ndescription: Where topic {i} lives\ntype: reference\n"
        "captured: 2026-05-06\nlast_seen: 2026-05-06\nsources: [observation]\nconfidence: low\n"
        f"pinned: {'true ' if pinned else 'false'}\n"
        + (f"superseded_by: reference_topic_{i + 1:04d}.md\n" if superseded else "")
        + f"---\nTopic {i} body.\n"
    )


def both(agent: Agent, unit_type: str = "memory") -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    fast = [(n.filename, n.body) for n in agent.pinned_notes(unit_type)]  # type: ignore[arg-type]
    slow = [(n.filename, n.body) for n in agent.list_notes(pinned=True, unit_type=unit_type)]  # type: ignore[arg-type]
    return fast, slow


def age(path: Path) -> None:
    """Make a file look old (its stamp outside the racy window), as files are between two runs."""
    old = path.stat().st_mtime_ns - 10_000_000_000
    os.utime(path, ns=(old, old))


@pytest.fixture(autouse=True, params=["watched", "stat-every-file"])
def watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every case twice: with the folder watch (a later call stats only what changed) and without it."""
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on" if request.param == "watched" else "off")
    return str(request.param)


@pytest.fixture
def agent(agents_root: Path) -> Agent:
    ag, _ = Vault(agents_root).init_agent("finance")
    rng = random.Random(7)
    for i in range(300):
        p = ag.memory_dir / f"reference_topic_{i:04d}.md"
        p.write_text(note_text(i, pinned=rng.random() < 0.1, superseded=rng.random() < 0.05), encoding="utf-8")
        age(p)
    return ag


@pytest.mark.parametrize("racy_window", [_pinned.RACY_NS, 0], ids=["racy-digests", "stamps-alone"])
def test_equal_to_the_full_scan_through_hand_edits(agent: Agent, agents_root: Path, racy_window: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the files here are all fresh (racy); with no racy window the stamps alone must tell every change
    monkeypatch.setattr(_pinned, "RACY_NS", racy_window)
    fast, slow = both(agent)
    assert fast == slow and len(fast) > 5
    assert (agents_root / "_cache" / "vault" / "finance.memory.pinned.json").is_file()
    mem = agent.memory_dir
    # an in-place edit that keeps size and mtime (only the ctime tells): unpinned -> pinned
    target = next(p for p in sorted(mem.glob("reference_*.md")) if "pinned: false" in p.read_text())
    st = target.stat()
    with open(target, "r+", encoding="utf-8") as fh:  # in place, same inode
        text = fh.read()
        fh.seek(0)
        fh.write(text.replace("pinned: false", "pinned: true "))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_size == st.st_size and target.stat().st_ino == st.st_ino
    fast, slow = both(agent)
    assert fast == slow and target.name in [f for f, _ in fast]
    # pinned -> superseded, by a rename-over write (a new inode), as most editors save
    pinned = sorted(f for f, _ in fast)[0]
    i = int(pinned.split("_")[-1][:4])
    tmp = mem / ".tmp"
    tmp.write_text(note_text(i, pinned=True, superseded=True), encoding="utf-8")
    os.replace(tmp, mem / pinned)
    # a new pinned note by hand, a pinned one deleted, one that no longer parses, one out of the root
    (mem / "reference_topic_9000.md").write_text(note_text(9000, pinned=True), encoding="utf-8")
    gone = sorted(f for f, _ in fast)[1]
    (mem / gone).unlink()
    broken = sorted(f for f, _ in fast)[2]
    (mem / broken).write_text("---\nname: [unclosed\npinned: true\n---\nx\n", encoding="utf-8")
    outside = agents_root.parent / "outside.md"
    outside.write_text(note_text(9001, pinned=True), encoding="utf-8")
    (mem / "reference_topic_9001.md").symlink_to(outside)
    fast, slow = both(agent)
    assert fast == slow
    names = [f for f, _ in fast]
    assert "reference_topic_9000.md" in names
    assert not {pinned, gone, broken, "reference_topic_9001.md"} & set(names)
    # a body edit of a pinned note: the text comes from the file, never from the index
    p = mem / "reference_topic_9000.md"
    p.write_text(p.read_text().replace("Topic 9000 body.", "Rewritten body."), encoding="utf-8")
    fast, slow = both(agent)
    assert fast == slow and ("reference_topic_9000.md", "Rewritten body.\n") in fast


def test_vault_writes_and_wiki_pages(agent: Agent) -> None:
    agent.new_note(NoteDraft(type="feedback", topic="debt_order", name="Debt order", description="When debts meet",
                             sources=["conversation_2026-05-06"], confidence="high", body="Avalanche.\n",
                             captured=TODAY, pinned=True), today=TODAY)
    fast, slow = both(agent)
    assert fast == slow and "feedback_debt_order.md" in [f for f, _ in fast]
    agent.update("feedback_debt_order.md", {"pinned": False}, today=TODAY)
    fast, slow = both(agent)
    assert fast == slow and "feedback_debt_order.md" not in [f for f, _ in fast]
    assert both(agent, "wiki")[0] == both(agent, "wiki")[1]


def test_a_damaged_foreign_or_missing_index_is_rebuilt(agent: Agent, agents_root: Path) -> None:
    expected = both(agent)[1]
    index = agents_root / "_cache" / "vault" / "finance.memory.pinned.json"
    version = _pinned._package_version()
    for damage in ("not json", "[]", json.dumps({"format": 99}),
                   json.dumps({"format": 2, "package": "x", "stamps": {}, "pinned": [], "racy": {}}),
                   json.dumps({"format": 2, "package": version, "stamps": {"reference_topic_0000.md": [1, 2]},
                               "pinned": [], "racy": {}}),
                   json.dumps({"format": 2, "package": version, "stamps": {}, "pinned": "x", "racy": {}})):
        index.write_text(damage)
        assert both(agent)[0] == expected
    index.unlink()
    assert both(agent)[0] == expected


def test_a_stale_flag_with_a_matching_stamp_is_caught_only_by_the_racy_digest(agent: Agent, agents_root: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A change inside one timestamp tick keeps the stamp: the digest of the parsed bytes catches it."""
    both(agent)
    target = next(p for p in sorted(agent.memory_dir.glob("reference_*.md")) if "pinned: false" in p.read_text())
    target.write_text(target.read_text(), encoding="utf-8")  # fresh: racy now
    both(agent)  # indexed while racy: its entry holds the digest
    st = target.stat()
    target.write_text(target.read_text().replace("pinned: false", "pinned: true "), encoding="utf-8")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    real_stat = os.stat

    def same_tick(path: object, *args: object, **kwargs: object) -> os.stat_result:
        got = real_stat(path, *args, **kwargs)  # type: ignore[arg-type]
        if str(path).endswith(target.name):  # as if the ctime had not moved either (one coarse tick)
            fields = list(got)
            return os.stat_result((*fields[:7], int(st.st_atime), int(st.st_mtime), int(st.st_ctime)),
                                  {"st_atime_ns": st.st_atime_ns, "st_mtime_ns": st.st_mtime_ns,
                                   "st_ctime_ns": st.st_ctime_ns})
        return got

    monkeypatch.setattr(_pinned.os, "stat", same_tick)
    fast = [n.filename for n in agent.pinned_notes()]
    assert target.name in fast


def test_context_uses_it_and_stays_identical(agent: Agent) -> None:
    (agent.path / "model.md").write_text("# MODEL\n\n## Token budget\n- Max system prompt: 100000 tokens\n")
    first = context(agent, today=TODAY).to_json()
    index = agent.agents_root / "_cache" / "vault" / "finance.memory.pinned.json"
    assert index.is_file()
    assert context(agent, today=TODAY).to_json() == first
    index.unlink()
    assert context(agent, today=TODAY).to_json() == first
    pinned = {p.source for p in context(agent, today=TODAY).parts if p.kind == "pinned"}
    assert pinned == {f"memory/{n.filename}" for n in agent.list_notes(pinned=True)}
