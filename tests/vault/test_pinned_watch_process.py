"""The folder watch inside one process: missing pieces, fork, limits, long life, and paths that name the same folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from atomic_agents.bridge import _context, context
from atomic_agents.vault import Agent, Vault, _pinned, _watch

from .test_pinned_index import note_text
from .test_pinned_watch import flip_in_place, make_agent, names, truth

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


@pytest.fixture
def agent(agents_root: Path, monkeypatch: pytest.MonkeyPatch) -> Agent:
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on")
    monkeypatch.setattr(_pinned, "RACY_NS", 0)
    return make_agent(agents_root, 12)


def watched(agent: Agent) -> None:
    for _ in range(3):  # the second call sets the watch up; the third is answered from it
        assert names(agent) == truth(agent)


def test_a_python_without_ctypes_falls_back_to_the_full_scan(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some builds have no ctypes (no libffi), and a setuid'd process may not be able to import it: no watch, no traceback."""
    monkeypatch.setattr(_watch, "_watcher", None)
    monkeypatch.setattr(_watch, "_failed", False)
    monkeypatch.setattr(_watch, "_asked", set())
    monkeypatch.setitem(sys.modules, "ctypes", None)  # `import ctypes` raises ImportError
    watched(agent)
    flip_in_place(agent.memory_dir / "reference_topic_0001.md")
    assert names(agent) == truth(agent)
    assert _watch._state() is None


def _fork_and_call(fn: object) -> int:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import signal

            signal.alarm(10)  # a deadlocked child dies of SIGALRM instead of hanging the run
            fn()  # type: ignore[operator]
            code = 0
        except BaseException:  # noqa: BLE001 - the child reports whatever ended it, then exits
            import traceback

            traceback.print_exc()  # shown with the test's captured output
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.parametrize("lock", ["pinned", "sub-index"])
def test_a_child_forked_while_another_thread_looks_does_not_deadlock(agent: Agent, lock: str) -> None:
    """The locks that keep one look at a time are held by a thread that does not exist in the child."""
    (agent.path / "model.md").write_text("# MODEL\n\n## Token budget\n- Max system prompt: 100000 tokens\n")
    watched(agent)
    held = _pinned._looking if lock == "pinned" else _context._sub_lock
    inside, leave = threading.Event(), threading.Event()

    def looking() -> None:
        with held:
            inside.set()
            leave.wait(30)

    t = threading.Thread(target=looking)
    t.start()
    inside.wait(5)
    try:
        status = _fork_and_call(lambda: (agent.pinned_notes(), context(agent)))
    finally:
        leave.set()
        t.join()
    assert status == 0


def test_names_for_an_asker_that_stopped_asking_do_not_pile_up(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-lived process: an asker (one cache) that no longer asks must not keep every name written since."""
    monkeypatch.setattr(_watch, "MAX_PENDING", 50)
    watched(agent)
    folder = str(agent.memory_dir)
    assert _watch.changed(folder, "gone quiet") is None  # registered, then never asks again
    for i in range(120):  # unique names, as atomic_write's temp files are
        (agent.memory_dir / f".tmp_{i}").write_text("x")
    assert names(agent) == truth(agent)  # the active asker keeps up
    watcher = _watch._state()
    assert watcher is not None
    assert all(len(p) <= 50 for f in watcher.folders.values() for p in f.pending.values())
    assert _watch.changed(folder, "gone quiet") is None  # its names were dropped: it looks at everything
    assert _watch.changed(folder, "gone quiet") == set()


def test_a_real_queue_overflow_makes_the_next_call_look_at_everything(agent: Agent) -> None:
    """More events than max_queued_events (16384 by default) between two looks: IN_Q_OVERFLOW, a full look."""
    watched(agent)
    folder = str(agent.memory_dir)
    assert _watch.changed(folder, "probe") is None
    try:
        limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    except (OSError, ValueError):
        limit = 16384
    if limit > 100_000:
        pytest.skip(f"max_queued_events={limit}: too many events to raise here")
    a, b = agent.memory_dir / "reference_topic_0001.md", agent.memory_dir / "reference_topic_0002.md"
    for _ in range(limit // 2 + 10):  # alternating: the kernel merges only an event equal to the last one queued
        os.utime(a)
        os.utime(b)
    assert _watch.changed(folder, "probe") is None  # events were lost: not "these names"
    flip_in_place(agent.memory_dir / "reference_topic_0003.md")
    assert names(agent) == truth(agent)
    assert _watch.changed(folder, "probe") == {"reference_topic_0003.md"}  # watched again from that look on
    assert _watch.changed(folder, "probe") == set()


def test_out_of_descriptors_falls_back_silently(agents_root: Path) -> None:
    """inotify_init1 failing with EMFILE: the full scan, no traceback, the right notes."""
    make_agent(agents_root, 12)
    code = r"""
import os, resource, sys
from atomic_agents.vault import Vault, _watch
a = Vault(sys.argv[1]).agent("finance")
want = [n.filename for n in a.list_notes(pinned=True)]
a.pinned_notes()  # the process's first ask: no watch yet
folder = str(a.memory_dir)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
got = _watch.changed(folder, "pinned:memory")  # the second ask would set the watch up: no descriptor left
for fd in fds:
    os.close(fd)
print(got, _watch._state(), [n.filename for n in a.pinned_notes()] == want, [n.filename for n in a.pinned_notes()] == want)
"""
    env = {**os.environ, "ATOMIC_AGENTS_WATCH": "on", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code, str(agents_root)], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "None", "True", "True"]


def test_one_folder_through_several_paths_and_vaults(agent: Agent, agents_root: Path) -> None:
    """A symlinked agents root, a trailing slash, two Vault objects: each sees every change, whoever drained it."""
    link = agents_root.parent / "root-link"
    link.symlink_to(agents_root)
    others = [Vault(link).agent("finance"), Vault(str(agents_root) + "/").agent("finance"),
              Vault(agents_root).agent("finance")]
    everyone = [agent, *others]
    for _ in range(3):
        for ag in everyone:
            assert names(ag) == truth(ag)
    for i in (1, 2, 4, 5):
        flip_in_place(agent.memory_dir / f"reference_topic_{i:04d}.md")
        for ag in everyone:
            assert names(ag) == truth(ag)


def test_descriptors_do_not_leak_over_many_agents(agents_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on")
    vault = Vault(agents_root)
    agents = []
    for k in range(30):
        ag, _ = vault.init_agent(f"agent{k}")
        (ag.memory_dir / "reference_a.md").write_text(note_text(k, pinned=True), encoding="utf-8")
        (ag.path / "model.md").write_text("# MODEL\n\n## Token budget\n- Max system prompt: 100000 tokens\n")
        agents.append(ag)
    for ag in agents:
        ag.pinned_notes(), ag.pinned_notes("wiki")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        for ag in agents:
            ag.pinned_notes(), ag.pinned_notes("wiki"), context(ag)
    assert len(os.listdir("/proc/self/fd")) == before


def test_the_watch_switched_off_and_on_between_calls(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    watched(agent)
    for step in range(5):
        monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "off" if step % 2 else "on")
        flip_in_place(agent.memory_dir / f"reference_topic_{step:04d}.md")
        assert names(agent) == truth(agent)
        (agent.memory_dir / f"reference_topic_{step + 6:04d}.md").rename(agent.memory_dir / "reference_topic_0011.md")
        assert names(agent) == truth(agent)  # a rename onto an existing name (IN_MOVED_TO over it)


def test_a_note_nobody_may_read_is_an_error_naming_it_not_a_traceback(agent: Agent, tmp_path: Path) -> None:
    """``chmod 000`` on a note: list_notes skips it (list_units names it), pinned_notes equals list_notes, watched or not."""
    watched(agent)  # every module the child needs is imported here (the child may not read the interpreter's files)
    agent.list_units(pinned=True)
    context_free = Path(tempfile.mkdtemp(prefix="aa-unreadable-"))
    os.chmod(context_free, 0o777)  # the child runs as nobody

    def child() -> None:
        if os.geteuid() == 0:  # root reads a mode-000 file: be someone else
            os.setgid(65534)
            os.setuid(65534)
        ag, _ = Vault(context_free / "agents").init_agent("finance")
        for i in range(4):
            (ag.memory_dir / f"reference_topic_{i:04d}.md").write_text(note_text(i, pinned=True), encoding="utf-8")
        for _ in range(3):
            assert names(ag) == truth(ag)
        locked = ag.memory_dir / "reference_topic_0002.md"
        locked.chmod(0)
        for _ in range(2):
            assert names(ag) == truth(ag) == ["reference_topic_0000.md", "reference_topic_0001.md",
                                              "reference_topic_0003.md"]
        _, errors = ag.list_units()
        assert [(os.path.basename(e.path or ""), e.rule) for e in errors] == [("reference_topic_0002.md", "readable")]
        locked.chmod(0o644)
        assert len(names(ag)) == 4 and names(ag) == truth(ag)

    try:
        assert _fork_and_call(child) == 0
    finally:
        subprocess.run(["rm", "-rf", str(context_free)], check=False)


def same_context(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    """The context from the watch equals the context of a process that looks at every file (watch off)."""
    watched_json = context(agent).to_json()
    monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "off")
    try:
        assert watched_json == context(agent).to_json()
    finally:
        monkeypatch.setenv("ATOMIC_AGENTS_WATCH", "on")
    assert names(agent) == truth(agent)


@pytest.mark.parametrize("change", ["dir", "fifo", "dangling", "agent_renamed_back", "agent_renamed_new",
                                    "folder_link_inside", "folder_link_outside", "recreated", "bad_utf8",
                                    "sub_index_via_link"])
def test_replaced_entries_and_folders_equal_a_full_look(agent: Agent, agents_root: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    (agent.path / "model.md").write_text("# MODEL\n\n## Token budget\n- Max system prompt: 100000 tokens\n")
    other = agents_root / "other-memory"
    other.mkdir()
    (other / "reference_other.md").write_text(note_text(70, pinned=True), encoding="utf-8")
    (other / "INDEX_reference_2.md").write_text("# INDEX: reference (2)\n\n- [[reference_other]]\n", encoding="utf-8")
    outside = tmp_path / "outside-memory"
    outside.mkdir()
    (outside / "reference_out.md").write_text(note_text(71, pinned=True), encoding="utf-8")
    for _ in range(3):
        same_context(agent, monkeypatch)
    mem, note = agent.memory_dir, agent.memory_dir / "reference_topic_0000.md"  # a pinned one
    if change in ("dir", "fifo", "dangling"):
        note.unlink()
        if change == "dir":
            note.mkdir()
        elif change == "fifo":
            os.mkfifo(note)
        else:
            note.symlink_to(agent.path / "nowhere.md")
    elif change.startswith("agent_renamed"):
        agent.path.rename(agents_root / "renamed")
        assert names(agent) == truth(agent) == []
        if change == "agent_renamed_back":
            (agents_root / "renamed").rename(agent.path)
            flip_in_place(mem / "reference_topic_0001.md")
        else:
            Vault(agents_root).init_agent("finance")
            (agent.path / "model.md").write_text("# MODEL\n\n## Token budget\n- Max system prompt: 100000 tokens\n")
            (mem / "reference_new.md").write_text(note_text(72, pinned=True), encoding="utf-8")
    elif change in ("folder_link_inside", "folder_link_outside", "sub_index_via_link"):
        mem.rename(agents_root / "old-memory")
        mem.symlink_to(outside if change == "folder_link_outside" else other)
        if change == "sub_index_via_link":
            (other / "INDEX_reference_3.md").write_text("# INDEX: reference (3)\n", encoding="utf-8")
    elif change == "recreated":
        subprocess.run(["rm", "-rf", str(mem)], check=True)
        mem.mkdir()  # often the very inode number just freed
        (mem / "reference_topic_0000.md").write_text(note_text(0, pinned=False), encoding="utf-8")
    elif change == "bad_utf8":
        bad = os.path.join(os.fsencode(mem), b"reference_\xff\xfe.md")
        with open(bad, "wb") as fh:
            fh.write(note_text(73, pinned=True).encode())
        assert "reference_\udcff\udcfe.md" in truth(agent)
    if change == "folder_link_outside":
        assert names(agent) == truth(agent) == []
    if change == "bad_utf8":  # the context shows the name's bytes escaped: text that any tokenizer and JSON take
        assert "memory/reference_\\xff\\xfe.md" in [p.source for p in context(agent).parts]
    for _ in range(2):
        same_context(agent, monkeypatch)


def test_a_device_number_reused_by_a_network_mount_is_not_trusted(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unmount a local file system, mount NFS on the same place: it often gets the freed (anonymous) device number.

    The mount table is faked (a test cannot mount): first the folder's device is tmpfs, after the unmount nfs.
    """
    mounts = {"type": "tmpfs"}
    monkeypatch.setattr(_watch, "_fs_type", lambda dev: mounts["type"])  # fake mount table
    watched(agent)
    folder = str(agent.memory_dir)
    assert _watch.changed(folder, "probe") is None
    assert _watch.changed(folder, "probe") == set()  # trusted while local
    watcher = _watch._state()
    assert watcher is not None
    watcher.dispatch(watcher.folders[folder].wd, _watch.IN_UNMOUNT, "")  # what the kernel says at the unmount
    mounts["type"] = "nfs"  # the new mount, same st_dev
    assert _watch.changed(folder, "probe") is None
    assert _watch.changed(folder, "probe") is None  # never trusted again: writes from other machines raise nothing here


def test_a_file_where_the_notes_folder_should_be_is_a_typed_error(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    from atomic_agents.exceptions import ValidationError

    (agent.path / "model.md").write_text("# MODEL\n\n## Token budget\n- Max system prompt: 100000 tokens\n")
    for _ in range(3):
        same_context(agent, monkeypatch)  # watched
    subprocess.run(["rm", "-rf", str(agent.memory_dir)], check=True)
    agent.memory_dir.write_text("not a folder\n")
    for call in (lambda: agent.list_notes(pinned=True), agent.pinned_notes, lambda: context(agent)):
        with pytest.raises(ValidationError, match="memory/ is not a folder"):
            call()


_LIMITED = r"""
import os, sys
from atomic_agents.vault import Vault, _watch
vault = Vault(sys.argv[1])
agents = [vault.agent("finance"), vault.agent("legal")]
out = []
for step in range(4):
    for ag in agents:
        if step == 3:
            p = ag.memory_dir / "reference_topic_0001.md"
            p.write_text(p.read_text().replace("pinned: false", "pinned: true "))
        want = [n.filename for n in ag.list_notes(pinned=True)]
        out.append([n.filename for n in ag.pinned_notes()] == want)
w = _watch._state()
print(all(out), "none" if w is None else len({f.wd for f in w.folders.values()}))
"""


@pytest.mark.parametrize(("limit", "value", "watches"), [("max_inotify_watches", 1, "1"),
                                                         ("max_inotify_instances", 0, "none")])
def test_the_user_s_inotify_limits_reached_fall_back_silently(agents_root: Path, limit: str, value: int,
                                                              watches: str) -> None:
    """ENOSPC from inotify_add_watch (watch limit) and EMFILE from inotify_init1 (instance limit), for real:
    in a user namespace of its own the limits are set without touching anyone else's."""
    make_agent(agents_root, 12)
    ag, _ = Vault(agents_root).init_agent("legal")
    for i in range(12):
        (ag.memory_dir / f"reference_topic_{i:04d}.md").write_text(note_text(i, pinned=i % 5 == 0), encoding="utf-8")
    probe = subprocess.run(["unshare", "-Ur", "sh", "-c", f"echo {value} > /proc/sys/user/{limit}"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no user namespace here to set {limit} in: {probe.stderr.strip()}")
    env = {**os.environ, "ATOMIC_AGENTS_WATCH": "on", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(["unshare", "-Ur", "sh", "-c", f'echo {value} > /proc/sys/user/{limit} && exec "$@"', "sh",
                          sys.executable, "-c", _LIMITED, str(agents_root)], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", watches]  # one folder watched, the other looked at in full every time


def test_the_wiki_folder_is_watched_on_its_own(agent: Agent) -> None:
    for i in range(4):
        (agent.wiki_dir / f"page_{i}.md").write_text(note_text(i, pinned=i % 2 == 0), encoding="utf-8")

    def wiki() -> tuple[list[str], list[str]]:
        return names(agent, "wiki"), truth(agent, "wiki")

    for _ in range(3):
        fast, slow = wiki()
        assert fast == slow
    flip_in_place(agent.wiki_dir / "page_1.md")
    flip_in_place(agent.memory_dir / "reference_topic_0001.md")  # the other folder's events are its own
    fast, slow = wiki()
    assert fast == slow and "page_1.md" in fast
    assert names(agent) == truth(agent)
