"""Item 3: atomic writes survive SIGKILL; concurrent writers lose no INDEX entry."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from atomic_agents._io import append_line, atomic_write
from atomic_agents.vault import Agent, Vault, parse, query_logs

WRITER = textwrap.dedent(
    """
    import sys, datetime as dt
    from atomic_agents.vault import Vault, NoteDraft
    root, prefix, count, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    agent = Vault(root).agent("finance")
    print("ready", flush=True)
    if mode == "create":
        for i in range(count):
            agent.new_note(NoteDraft(type="reference", topic=f"{prefix}_{i:04d}", name=f"{prefix} {i}",
                                     description=f"note {i} of {prefix}", sources=["observation"], confidence="low"))
    else:  # rewrite: endless versions of a few notes, plus new notes
        v = 0
        while True:
            v += 1
            for t in range(3):
                body = f"version {v}\\n" + ("x" * 4000) + f"\\nend {v}\\n"
                agent.update_note(f"feedback_topic_{t}.md", {"description": f"version {v}"}, body=body)
            agent.new_note(NoteDraft(type="user", topic=f"fact_{v:05d}", name=f"fact {v}",
                                     description=f"fact number {v}", sources=["observation"], confidence="low"))
    """
)


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRITER, *args], stdout=subprocess.PIPE, text=True)


def _seed(agent: Agent) -> None:
    from .conftest import draft

    for t in range(3):
        agent.new_note(draft(f"topic_{t}", description="version 0", body="version 0\n" + "x" * 4000 + "\nend 0\n"))


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "f.md"
    atomic_write(target, "old", root=tmp_path)
    atomic_write(target, "new", root=tmp_path)
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["f.md"]  # no temp file left behind


def test_sigkill_at_random_points_leaves_old_or_new_never_partial(agent: Agent) -> None:
    _seed(agent)
    rng = random.Random(1234)
    trials = 24
    for trial in range(trials):
        proc = _spawn(str(agent.agents_root), "k", "0", "rewrite")
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for t in range(3):
            doc = parse((agent.memory_dir / f"feedback_topic_{t}.md").read_text())
            version = doc.meta["description"].split()[1]
            # the frontmatter and the body were written together: same version, body complete
            assert doc.body == f"version {version}\n" + "x" * 4000 + f"\nend {version}\n", f"trial {trial}"
        for p in agent.memory_dir.glob("user_fact_*.md"):
            assert parse(p.read_text()).meta["type"] == "user"
        assert agent.validate() == [], f"trial {trial}"
    # no temp file of a killed writer is left after validate
    assert not list(agent.memory_dir.glob(".*.tmp"))
    # every note that exists is in the INDEX after the roll-forward
    titles = {e.title for _, e in agent.index().entries()}
    assert {n.name for n in agent.list_notes()} <= titles


def test_four_processes_hundred_notes_each(agent: Agent) -> None:
    procs = [_spawn(str(agent.agents_root), f"p{n}", "100", "create") for n in range(4)]
    for p in procs:
        assert p.wait(timeout=300) == 0
    notes = agent.list_notes()
    assert len(notes) == 400
    entries = agent.index().entries()
    assert len(entries) == 400
    assert {e.title for _, e in entries} == {n.name for n in notes}
    assert agent.validate() == []


APPENDER = textwrap.dedent(
    """
    import sys
    from atomic_agents.vault import Vault, append_log
    agent = Vault(sys.argv[1]).agent("finance")
    for i in range(int(sys.argv[3])):
        append_log(agent, {"ts": "2026-05-06T10:00:00+00:00", "trigger": "cron", "model": "m",
                           "input_tokens": i, "output_tokens": 1, "status": "ok",
                           "summary": sys.argv[2] + "-" + str(i) + "-" + "y" * 3000})
    """
)


def test_concurrent_log_appenders_never_interleave(agent: Agent) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(agent.agents_root), f"w{n}", "150"]) for n in range(4)]
    for p in procs:
        assert p.wait(timeout=300) == 0
    result = query_logs(agent)
    assert result.invalid == []
    assert len(result.entries) == 600
    assert result.totals()["input_tokens"] == 4 * sum(range(150))


def test_append_line_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl"
    append_line(f, json.dumps({"a": 1}), root=tmp_path)
    append_line(f, json.dumps({"a": 2}) + "\n", root=tmp_path)
    assert f.read_text() == '{"a": 1}\n{"a": 2}\n'


def test_atomic_write_many_is_all_durable_before_any_rename(tmp_path: Path, monkeypatch) -> None:
    """A failing fsync leaves every target as it was and no temp file behind."""
    import atomic_agents._io as io

    from atomic_agents._io import atomic_write_many

    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("old a")
    calls = {"n": 0}
    real_fsync = os.fsync

    def flaky(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(5, "EIO")
        real_fsync(fd)

    monkeypatch.setattr(io.os, "fsync", flaky)
    import pytest

    with pytest.raises(OSError):
        atomic_write_many([(a, "new a"), (b, "new b")], root=tmp_path)
    assert a.read_text() == "old a" and not b.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md"]
    monkeypatch.setattr(io.os, "fsync", real_fsync)
    atomic_write_many([(a, "new a"), (b, "new b")], root=tmp_path)
    assert (a.read_text(), b.read_text()) == ("new a", "new b")
