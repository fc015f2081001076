"""The folder watch and symlinked notes: what a link leads to changes with no event in the folder.

A watched folder is told of changes to its own entries only. A symlinked note's target
can appear, vanish, become a folder or a FIFO, or be re-pointed out of the root while the
link itself stays untouched; the pinned index must still equal the full scan at every
call, never read a file outside the root, never hang and never raise.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atomic_agents.vault import Agent, _pinned

from .test_pinned_index import note_text
from .test_pinned_watch import flip_in_place, make_agent, names, truth

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


@pytest.fixture
def agent(agents_root: Path, monkeypatch: pytest.MonkeyPatch) -> Agent:
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on")
    monkeypatch.setattr(_pinned, "RACY_NS", 0)
    return make_agent(agents_root, 12)


@pytest.fixture
def elsewhere(agent: Agent) -> Path:
    path = agent.path / "journal"  # inside the root, outside the watched folder
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def no_hang() -> Iterator[None]:
    """A call that blocks (opening a FIFO with no writer) fails the test instead of hanging the run."""
    def alarm(*_: object) -> None:
        raise TimeoutError("pinned_notes blocked")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def watched(agent: Agent) -> None:
    for _ in range(3):  # the second call sets the watch up; the third is answered from it
        assert names(agent) == truth(agent)


def test_a_dangling_link_whose_target_appears_later_is_seen(agent: Agent, elsewhere: Path) -> None:
    (agent.memory_dir / "reference_link.md").symlink_to(elsewhere / "later.md")
    watched(agent)
    (elsewhere / "later.md").write_text(note_text(90, pinned=True), encoding="utf-8")  # no event in memory/
    assert "reference_link.md" in truth(agent)
    assert names(agent) == truth(agent)


def test_a_link_to_a_folder_that_becomes_a_note_is_seen(agent: Agent, elsewhere: Path) -> None:
    (elsewhere / "dir.md").mkdir()
    (agent.memory_dir / "reference_link.md").symlink_to(elsewhere / "dir.md")
    watched(agent)
    (elsewhere / "dir.md").rmdir()
    (elsewhere / "dir.md").write_text(note_text(91, pinned=True), encoding="utf-8")
    assert "reference_link.md" in truth(agent)
    assert names(agent) == truth(agent)


@pytest.mark.parametrize("kind", ["folder", "fifo", "dangling"])
def test_a_link_whose_target_stops_being_a_file_is_dropped(agent: Agent, elsewhere: Path, kind: str,
                                                          no_hang: None) -> None:
    target = elsewhere / "target.md"
    target.write_text(note_text(92, pinned=True), encoding="utf-8")
    (agent.memory_dir / "reference_link.md").symlink_to(target)
    watched(agent)
    assert "reference_link.md" in names(agent)
    target.unlink()
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)  # opening it for reading would block until a writer comes
    assert names(agent) == truth(agent)
    assert "reference_link.md" not in names(agent)


def test_a_link_led_out_of_the_root_later_is_never_read(agent: Agent, elsewhere: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(note_text(93, pinned=True), encoding="utf-8")
    hop = elsewhere / "hop.md"
    hop.write_text(note_text(93, pinned=False), encoding="utf-8")
    (agent.memory_dir / "reference_link.md").symlink_to(hop)
    watched(agent)
    hop.unlink()
    hop.symlink_to(outside / "secret.md")  # the note's link untouched, its target now leads out of the root
    assert names(agent) == truth(agent)
    index = json.loads((agent.agents_root / "_cache" / "vault" / "finance.memory.pinned.json").read_text())
    assert "reference_link.md" not in index["stamps"]  # never stat'ed nor parsed through the link
    assert "reference_link.md" not in index["pinned"]


def test_a_symlink_loop_is_not_a_unit_and_raises_nothing(agent: Agent, elsewhere: Path) -> None:
    (elsewhere / "x.md").symlink_to(elsewhere / "y.md")
    (elsewhere / "y.md").symlink_to(elsewhere / "x.md")
    (agent.memory_dir / "reference_loop.md").symlink_to(elsewhere / "x.md")
    watched(agent)  # list_notes and pinned_notes: ELOOP is "not a file", as for a dangling link
    assert "reference_loop.md" not in [n.filename for n in agent.list_notes()]
    (elsewhere / "y.md").unlink()
    (elsewhere / "y.md").write_text(note_text(94, pinned=True), encoding="utf-8")  # the loop undone elsewhere
    assert "reference_loop.md" in truth(agent)
    assert names(agent) == truth(agent)


def test_a_fifo_met_while_looking_is_no_unit_and_no_hang(agent: Agent, no_hang: None) -> None:
    """Replaced by a FIFO between the listing and the read (a race the listing cannot close): skipped, no wait."""
    os.mkfifo(agent.memory_dir / "reference_fifo.md")
    index = _pinned._Index({}, set(), {})
    dfd = os.open(agent.memory_dir, os.O_RDONLY)
    try:
        _pinned._look(str(agent.memory_dir), "reference_fifo.md", dfd, 0, index)
    finally:
        os.close(dfd)
    assert index.stamps == {} and index.pinned == set()


LINK_OPS = st.sampled_from(["link_dangling", "make_target", "target_dir", "target_fifo", "target_gone",
                            "target_pin", "target_unpin", "target_out", "target_in", "link_to_link",
                            "loop", "unloop", "unlink"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(LINK_OPS, st.integers(0, 3)), min_size=1, max_size=14))
def test_links_equal_the_full_scan_through_any_change_of_their_targets(
        agents_root: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        ops: list[tuple[str, int]]) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on")
    monkeypatch.setattr(_pinned, "RACY_NS", 0)
    root = agents_root / f"links{len(os.listdir(agents_root))}"
    agent = make_agent(root, 6)
    where = agent.path / "journal"
    where.mkdir(exist_ok=True)
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.md").write_text(note_text(99, pinned=True), encoding="utf-8")

    def clear(p: Path) -> None:
        if p.is_symlink() or p.is_file() or p.is_fifo():
            p.unlink()
        elif p.is_dir():
            p.rmdir()

    watched(agent)
    old = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("blocked")))
    signal.alarm(60)
    try:
        for op, i in ops:
            link, target = agent.memory_dir / f"reference_l{i}.md", where / f"t{i}.md"
            if op == "link_dangling" and not link.is_symlink():
                link.symlink_to(target)
            elif op == "link_to_link" and not link.is_symlink():
                link.symlink_to(where / f"t{(i + 1) % 4}.md")
            elif op == "unlink" and link.is_symlink():
                link.unlink()
            elif op in ("make_target", "target_pin", "target_unpin"):
                clear(target)
                target.write_text(note_text(i, pinned=op != "target_unpin"), encoding="utf-8")
            elif op == "target_dir":
                clear(target)
                target.mkdir()
            elif op == "target_fifo":
                clear(target)
                os.mkfifo(target)
            elif op == "target_gone":
                clear(target)
            elif op == "target_out":
                clear(target)
                target.symlink_to(outside / "secret.md")
            elif op == "target_in":
                clear(target)
                target.symlink_to(where / f"t{(i + 1) % 4}.md")
            elif op == "loop":
                clear(target)
                target.symlink_to(target)
            elif op == "unloop" and target.is_symlink():
                clear(target)
                target.write_text(note_text(i, pinned=True), encoding="utf-8")
            assert names(agent) == truth(agent), op
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_folder_whose_path_now_leads_out_of_the_root_is_not_read(agent: Agent, agents_root: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory folder is a link to a folder inside the root; that folder's parent is moved out and the link
    re-pointed to it: the same folder (same inode, its watch intact, no event in it), now outside the root."""
    monkeypatch.setattr(_pinned, "RACY_NS", 10**18)  # every note racy: each is digest-checked at every call
    shared = agents_root / "shared"
    shared.mkdir()
    agent.memory_dir.rename(shared / "mem")
    agent.memory_dir.symlink_to(shared / "mem")
    watched(agent)
    assert names(agent)
    shared.rename(tmp_path / "moved-out")  # same file system: the folder keeps its inode
    agent.memory_dir.unlink()
    agent.memory_dir.symlink_to(tmp_path / "moved-out" / "mem")
    read: list[str] = []
    real = _pinned._read_regular

    def spy(dfd: int, name: str) -> object:
        read.append(name)
        return real(dfd, name)

    monkeypatch.setattr(_pinned, "_read_regular", spy)
    assert names(agent) == truth(agent) == []
    assert read == []  # no note of the folder outside the root was opened


@pytest.mark.parametrize("through", ["new name", "old name"])
def test_a_hard_link_made_in_the_folder_after_a_look_is_followed_by_both_names(agent: Agent, through: str) -> None:
    """``ln a.md b.md`` in the watched folder: the event names b.md only, yet a.md is the same file from now on."""
    watched(agent)
    old, new = agent.memory_dir / "reference_topic_0001.md", agent.memory_dir / "reference_twin.md"
    os.link(old, new)
    assert names(agent) == truth(agent)
    for _ in range(2):
        flip_in_place(new if through == "new name" else old)  # an in-place write: an event for that name only
        assert names(agent) == truth(agent)
    new.unlink()
    flip_in_place(old)
    assert names(agent) == truth(agent)


MIXED_OPS = st.sampled_from(["write", "pin_in_place", "rename_over", "rename_out", "rename_back", "hard_link",
                             "write_twin", "to_dir", "to_fifo", "to_dangling", "to_link", "sub_index",
                             "drop_sub_index", "other_vault_looks"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(MIXED_OPS, st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=12))
def test_contexts_and_pinned_notes_equal_a_full_look_through_mixed_changes(
        agents_root: Path, monkeypatch: pytest.MonkeyPatch, ops: list[tuple[str, int, int]]) -> None:
    """Several askers on one folder (pinned notes, sub-index names, a second Vault through a symlinked root)."""
    from atomic_agents.bridge import context
    from atomic_agents.vault import Vault

    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on")
    monkeypatch.setattr(_pinned, "RACY_NS", 0)
    root = agents_root / f"mixed{len(os.listdir(agents_root))}"
    agent = make_agent(root, 6)
    (agent.path / "model.md").write_text("# MODEL\n\n## Token budget\n- Max system prompt: 100000 tokens\n")
    link_root = agents_root / f"{root.name}-link"
    link_root.symlink_to(root)
    other = Vault(link_root).agent("finance")
    mem, parked = agent.memory_dir, agent.path / "journal"
    parked.mkdir(exist_ok=True)

    def same() -> None:
        got = context(agent).to_json()
        monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "off")
        try:
            assert got == context(agent).to_json()
            want = truth(agent)
        finally:
            monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on")
        assert names(agent) == want

    for _ in range(3):
        same()
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("blocked")))
    signal.alarm(60)
    try:
        for op, i, j in ops:
            p, q = mem / f"reference_topic_{i:04d}.md", mem / f"reference_topic_{j:04d}.md"
            regular = p.is_file() and not p.is_symlink()
            if op == "write":
                p.unlink(missing_ok=True) if p.is_symlink() or p.is_fifo() else None
                if p.is_dir():
                    p.rmdir()
                p.write_text(note_text(i, pinned=(i + j) % 2 == 0), encoding="utf-8")
            elif op == "pin_in_place" and regular:
                flip_in_place(p)
            elif op == "rename_over" and p.exists() and i != j and p.is_dir() == q.is_dir():
                p.rename(q)
            elif op == "rename_out" and p.exists():
                p.rename(parked / p.name)
            elif op == "rename_back" and (parked / p.name).exists() and not p.exists() and not p.is_symlink():
                (parked / p.name).rename(p)
            elif op == "hard_link" and regular and not (mem / f"reference_twin_{j}.md").exists():
                os.link(p, mem / f"reference_twin_{j}.md")
            elif op == "write_twin" and (mem / f"reference_twin_{j}.md").is_file():
                flip_in_place(mem / f"reference_twin_{j}.md")
            elif op in ("to_dir", "to_fifo", "to_dangling", "to_link") and (regular or p.is_symlink()):
                p.unlink()
                if op == "to_dir":
                    p.mkdir()
                elif op == "to_fifo":
                    os.mkfifo(p)
                elif op == "to_dangling":
                    p.symlink_to(parked / "nowhere.md")
                elif q != p and q.exists():
                    p.symlink_to(q)
            elif op == "sub_index":
                (mem / f"INDEX_reference_{i + 2}.md").write_text(f"# INDEX: reference ({i + 2})\n", encoding="utf-8")
            elif op == "drop_sub_index":
                (mem / f"INDEX_reference_{i + 2}.md").unlink(missing_ok=True)
            elif op == "other_vault_looks":
                assert names(other) == truth(other)
            same()
    finally:
        signal.alarm(0)


@pytest.mark.parametrize("watch", ["on", "off"])
def test_a_listed_note_that_turned_into_a_symlink_loop_since_the_listing_is_dropped(
        agent: Agent, monkeypatch: pytest.MonkeyPatch, watch: str) -> None:
    """The race between the listing and the stat: the listing is made stale on purpose (it still names the loop)."""
    from atomic_agents.vault import _agent

    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", watch)
    want = truth(agent)
    (agent.memory_dir / "reference_loop.md").symlink_to("reference_loop.md")
    real = _agent.Agent._unit_names

    def stale(self: Agent, *a: object, **k: object) -> list[str]:
        return sorted([*real(self, *a, **k), "reference_loop.md"])  # type: ignore[arg-type]

    monkeypatch.setattr(_agent.Agent, "_unit_names", stale)
    assert names(agent) == want
