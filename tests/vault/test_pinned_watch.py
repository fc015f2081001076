"""The folder watch: pinned notes from it equal a full scan through every kind of change, and it gives up when unsure."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atomic_agents.bridge import context
from atomic_agents.vault import Agent, Vault, _pinned, _watch

from .test_pinned_index import age, note_text

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's (elsewhere: the stat path, tested in test_pinned_index)")


def names(agent: Agent, unit_type: str = "memory") -> list[str]:
    return [n.filename for n in agent.pinned_notes(unit_type)]  # type: ignore[arg-type]


def truth(agent: Agent, unit_type: str = "memory") -> list[str]:
    return [n.filename for n in agent.list_notes(pinned=True, unit_type=unit_type)]  # type: ignore[arg-type]


def make_agent(root: Path, n: int = 40) -> Agent:
    ag, _ = Vault(root).init_agent("finance")
    for i in range(n):
        p = ag.memory_dir / f"reference_topic_{i:04d}.md"
        p.write_text(note_text(i, pinned=i % 7 == 0), encoding="utf-8")
        age(p)
    return ag


@pytest.fixture
def agent(agents_root: Path, monkeypatch: pytest.MonkeyPatch) -> Agent:
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on")
    monkeypatch.setattr(_pinned, "RACY_NS", 0)  # files written just now: no racy digests to check (tested elsewhere)
    return make_agent(agents_root)


def stats_per_call(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many notes one ``pinned_notes`` call stats (by name, relative to the folder)."""
    seen: list[object] = []
    real = os.stat

    def counting(path: object, *a: object, **k: object) -> os.stat_result:
        if k.get("dir_fd") is not None:
            seen.append(path)
        return real(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(_pinned.os, "stat", counting)
    try:
        agent.pinned_notes()
    finally:
        monkeypatch.setattr(_pinned.os, "stat", real)
    return len({p for p in seen if str(p).startswith("reference_")})


def test_a_watched_folder_is_not_stat_ed_file_by_file(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    assert names(agent) == truth(agent)  # the first two calls look at everything (the second sets the watch up)
    assert names(agent) == truth(agent)
    assert stats_per_call(agent, monkeypatch) == 0  # nothing changed: nothing stat'ed
    target = agent.memory_dir / "reference_topic_0001.md"
    with open(target, "r+", encoding="utf-8") as fh:  # an in-place edit: same inode, no rename
        text = fh.read()
        fh.seek(0)
        fh.write(text.replace("pinned: false", "pinned: true "))
    assert stats_per_call(agent, monkeypatch) == 1
    assert "reference_topic_0001.md" in names(agent) and names(agent) == truth(agent)


CASES = itertools.count()
OPS = st.sampled_from(["create", "pin", "unpin", "in_place", "in_place_same_mtime", "delete", "rename",
                       "symlink", "edit_link_target", "hardlink_edit", "supersede", "dot_file", "subdir"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(OPS, st.integers(0, 33)), min_size=1, max_size=12))
def test_equal_to_the_full_scan_through_any_sequence_of_changes(agents_root: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 ops: list[tuple[str, int]]) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on")
    monkeypatch.setattr(_pinned, "RACY_NS", 0)  # else every fresh file is digest-checked at every call, watch or not
    root = agents_root / f"case{next(CASES)}"
    agent = make_agent(root, 30)
    mem = agent.memory_dir
    elsewhere = agent.path / "journal"  # inside the root, outside the watched folder
    elsewhere.mkdir(exist_ok=True)
    for i in range(0, 30, 4):  # hard links made before the watch starts (see _watch: made later, they are not seen)
        os.link(mem / f"reference_topic_{i:04d}.md", elsewhere / f"hard_{i}.md")
    assert names(agent) == truth(agent)
    assert names(agent) == truth(agent)  # watched from here on
    for op, i in ops:
        p = mem / f"reference_topic_{i:04d}.md"
        if op == "create":
            (mem / f"reference_new_{i:04d}.md").write_text(note_text(i, pinned=i % 2 == 0), encoding="utf-8")
        elif op in ("pin", "unpin") and p.exists() and not p.is_symlink():
            tmp = mem / f".tmp_{i}"
            tmp.write_text(note_text(i, pinned=op == "pin"), encoding="utf-8")
            os.replace(tmp, p)  # an atomic write: a new inode
        elif op in ("in_place", "in_place_same_mtime") and p.is_file():
            before = p.stat()
            text = p.read_text(encoding="utf-8")
            flipped = text.replace("pinned: true ", "pinned: XXXX").replace("pinned: false", "pinned: true ").replace(
                "pinned: XXXX", "pinned: false")
            with open(p, "r+", encoding="utf-8") as fh:
                fh.write(flipped)
            if op == "in_place_same_mtime":
                os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))  # as a careful editor would
        elif op == "delete" and p.exists():
            p.unlink()
        elif op == "rename" and p.exists():
            p.rename(mem / f"reference_moved_{i:04d}.md")
        elif op == "symlink":
            target = elsewhere / f"linked_{i}.md"
            target.write_text(note_text(i, pinned=True), encoding="utf-8")
            link = mem / f"reference_link_{i:04d}.md"
            if not link.exists() and not link.is_symlink():
                link.symlink_to(target)
        elif op == "edit_link_target":
            for target in sorted(elsewhere.glob("linked_*.md")):  # written through the link's target: no event here
                flip_in_place(target)
        elif op == "hardlink_edit" and (elsewhere / f"hard_{i}.md").is_file():
            flip_in_place(elsewhere / f"hard_{i}.md")  # the same file as a note, written by another name
        elif op == "supersede" and p.is_file() and not p.is_symlink():
            p.write_text(note_text(i, pinned=True, superseded=True), encoding="utf-8")
        elif op == "dot_file":
            (mem / f".hidden_{i}.md").write_text(note_text(i, pinned=True), encoding="utf-8")
        elif op == "subdir":
            (mem / f"reference_dir_{i:04d}.md").mkdir(exist_ok=True)
        assert names(agent) == truth(agent), op


def flip_in_place(path: Path) -> None:
    with open(path, "r+", encoding="utf-8") as fh:
        text = fh.read()
        fh.seek(0)
        fh.write(text.replace("pinned: false", "pinned: true ") if "pinned: false" in text
                 else text.replace("pinned: true ", "pinned: false"))


def test_a_note_written_through_another_name_is_seen(agent: Agent) -> None:
    """A symlink's target and a hard link elsewhere in the root: written there, no event reaches the folder."""
    elsewhere = agent.path / "journal"
    elsewhere.mkdir(exist_ok=True)
    target = elsewhere / "linked.md"
    target.write_text(note_text(500, pinned=False), encoding="utf-8")
    (agent.memory_dir / "reference_link.md").symlink_to(target)
    os.link(agent.memory_dir / "reference_topic_0003.md", elsewhere / "hard.md")
    assert names(agent) == truth(agent)
    assert names(agent) == truth(agent)  # watched from here on
    flip_in_place(target)
    assert "reference_link.md" in names(agent)
    flip_in_place(elsewhere / "hard.md")
    assert "reference_topic_0003.md" in names(agent)
    assert names(agent) == truth(agent)


def test_a_replaced_folder_is_looked_at_afresh(agent: Agent, agents_root: Path) -> None:
    assert names(agent) == truth(agent)
    assert names(agent) == truth(agent)
    mem = agent.memory_dir
    mem.rename(agents_root / "old-memory")
    mem.mkdir()
    (mem / "reference_topic_9999.md").write_text(note_text(9999, pinned=True), encoding="utf-8")
    assert names(agent) == truth(agent) == ["reference_topic_9999.md"]


def test_an_overflowed_queue_means_nothing_is_known(agent: Agent) -> None:
    assert names(agent) == truth(agent)
    assert names(agent) == truth(agent)  # watched from here on
    folder = str(agent.memory_dir)
    assert _watch.changed(folder, "probe") is None  # a new asker looks once
    assert _watch.changed(folder, "probe") == set()
    watcher = _watch._state()
    assert watcher is not None
    watcher.dispatch(-1, _watch.IN_Q_OVERFLOW, "")  # what the kernel says when it dropped events
    assert _watch.changed(folder, "probe") is None
    assert _watch.changed(folder, "probe") == set()


def test_a_file_system_that_may_miss_events_is_never_trusted(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_watch, "LOCAL_FS", frozenset())  # as on NFS, SMB, FUSE, 9p, virtiofs
    monkeypatch.setattr(_watch, "_watcher", None)
    monkeypatch.setattr(_watch, "_asked", set())
    folder = str(agent.memory_dir)
    assert _watch.changed(folder, "probe") is None
    assert _watch.changed(folder, "probe") is None
    assert names(agent) == truth(agent)
    assert stats_per_call(agent, monkeypatch) == 40  # every file, every time


def test_a_one_shot_process_sets_no_watch(agents_root: Path) -> None:
    """A CLI call asks once per folder: no inotify descriptor, no ctypes (cold start)."""
    make_agent(agents_root)
    code = ("import sys; from atomic_agents.vault import Vault; a = Vault(sys.argv[1]).agent('finance'); "
            "a.pinned_notes(); a.pinned_notes('wiki'); from atomic_agents.vault import _watch; "
            "print(_watch._state() is None, 'ctypes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(agents_root)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_watch_off_stats_every_file(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "off")
    names(agent)
    assert stats_per_call(agent, monkeypatch) == 40


def test_a_forked_child_does_not_take_the_parent_s_events(agent: Agent) -> None:
    assert names(agent) == truth(agent)
    assert names(agent) == truth(agent)
    target = agent.memory_dir / "reference_topic_0002.md"
    with open(target, "r+", encoding="utf-8") as fh:
        text = fh.read()
        fh.seek(0)
        fh.write(text.replace("pinned: false", "pinned: true "))
    pid = os.fork()
    if pid == 0:  # the child asks too: with the parent's descriptor it would drain the parent's queue
        try:
            agent.pinned_notes()
            agent.pinned_notes()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert "reference_topic_0002.md" in names(agent)
    assert names(agent) == truth(agent)


def test_a_new_sub_index_shows_in_the_next_context(agent: Agent) -> None:
    (agent.path / "model.md").write_text("# MODEL\n\n## Token budget\n- Max system prompt: 100000 tokens\n")
    first = context(agent)
    assert context(agent).to_json() == first.to_json()  # watched from here on
    (agent.memory_dir / "INDEX_reference_2.md").write_text("# INDEX: reference (2)\n\n- [[reference_topic_0001]]\n")
    later = context(agent)
    assert "memory/INDEX_reference_2.md" in [p.source for p in later.parts]
    (agent.memory_dir / "INDEX_reference_2.md").unlink()
    assert context(agent).to_json() == first.to_json()


def test_threads_each_see_their_own_writes(agent: Agent) -> None:
    """Each thread flips its own note in place, then looks: the look must show that write, whoever drained its event."""
    import threading

    assert names(agent) == truth(agent)
    assert names(agent) == truth(agent)  # watched from here on
    errors: list[str] = []

    def worker(i: int) -> None:
        path = agent.memory_dir / f"reference_topic_{i:04d}.md"
        for _ in range(25):
            flip_in_place(path)
            pinned = "pinned: true " in path.read_text(encoding="utf-8")
            if (path.name in names(agent)) != pinned:
                errors.append(f"{path.name}: pinned={pinned} not seen")

    threads = [threading.Thread(target=worker, args=(i,)) for i in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert names(agent) == truth(agent)


def test_a_process_watches_at_most_max_folders(agents_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon visiting many agents: the least recently asked folder's watch goes (the user's watches are shared)."""
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on")
    monkeypatch.setattr(_watch, "MAX_FOLDERS", 3)
    monkeypatch.setattr(_pinned, "MAX_FOLDERS", 3)
    agents = [make_agent(agents_root / f"root{i}", 5) for i in range(5)]
    for _ in range(3):
        for ag in agents:
            assert names(ag) == truth(ag)
    watcher = _watch._state()
    assert watcher is not None
    mine = [f for f in watcher.folders if f.startswith(str(agents_root))]
    assert len(watcher.folders) <= 3 and mine  # the most recent ones
    assert len([k for k in _pinned._live if k[0].startswith(str(agents_root))]) <= 3
    for ag in agents:  # evicted or not: still the full scan's answer
        flip_in_place(ag.memory_dir / "reference_topic_0001.md")
        assert names(ag) == truth(ag)


@pytest.mark.parametrize("value", ["off", "OFF", "0", "false", "no"])
def test_the_usual_spellings_of_off(agent: Agent, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", value)
    assert not _watch.enabled()
    names(agent)
    assert stats_per_call(agent, monkeypatch) == 40
