"""Issue 7 §1: no ordinary write ever follows a symlink out of the agents root.

The matrix: every write path (note create/update/touch, INDEX rebuild, wiki page,
journal, run log, ``vault init``, ``validate``'s recovery) x every place a
symlink can be planted (the final file, the agent folder, ``memory/``,
``wiki/``, ``journal/``, ``log/``, ``persona/``, the intent marker, the lock
file, the INDEX). Each case asserts that nothing outside the root was created
or changed (bytes and mtimes of a watched folder), and either a typed
:class:`UnsafePathError` naming the planted path, or, where the op does not
touch that place, plain success (the gate must not refuse what is safe).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from atomic_agents._io import FileLock, append_line, atomic_write, atomic_write_many, write_in_place
from atomic_agents.exceptions import UnsafePathError
from atomic_agents.vault import Agent, NoteDraft, Vault, WikiDraft
from atomic_agents.vault._journal import append_journal
from atomic_agents.vault._log import append_log

from .conftest import Outside

TODAY = dt.date(2026, 5, 6)
EXISTING = "feedback_existing_rule.md"


def _draft(topic: str) -> NoteDraft:
    return NoteDraft(type="feedback", topic=topic, name=f"Rule {topic}", description=f"When {topic} matters",
                     sources=["conversation_2026-05-06"], confidence="high", body="Body.\n", captured=TODAY)


def _setup(root: Path) -> Agent:
    agent, _ = Vault(root).init_agent("finance", title="Finance")
    agent.new_note(_draft("existing_rule"), today=TODAY)
    append_journal(agent, day=TODAY, happened=["started"])
    append_log(agent, _run())
    return agent


def _run() -> dict[str, object]:
    return {"ts": "2026-05-06T09:00:00+00:00", "trigger": "cron", "model": "m", "input_tokens": 1,
            "output_tokens": 1, "status": "ok", "summary": "daily"}


# ---------------------------------------------------------------- the places a symlink is planted
def _move_out(path: Path, outside: Outside) -> Path:
    """Move a real folder/file out of the root and leave a symlink to it in its place."""
    dest = outside.dir / path.name
    shutil.move(str(path), dest)
    path.symlink_to(dest, target_is_directory=dest.is_dir())
    return path


def _dangling(path: Path, outside: Outside) -> Path:
    """A symlink to a file that does not exist yet, outside the root (a write would create it)."""
    if path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(outside.dir / f"created_{path.name}")
    return path


def _to_canary(path: Path, outside: Outside) -> Path:
    """A symlink to an existing outside file (a write would truncate or replace its bytes)."""
    if path.exists():
        path.unlink()
    path.symlink_to(outside.canary)
    return path


# op name -> (the op, its final target relative to the agent folder, how that final file is planted)
OPS: dict[str, tuple[Callable[[Agent], object], str | None, Callable[[Path, Outside], Path]]] = {
    "create": (lambda a: a.new_note(_draft("new_rule"), today=TODAY), "memory/feedback_new_rule.md", _dangling),
    "update": (lambda a: a.update_note(EXISTING, {"description": "changed"}, today=TODAY), f"memory/{EXISTING}", _move_out),
    "touch": (lambda a: a.touch(EXISTING, today=TODAY), f"memory/{EXISTING}", _move_out),
    "rebuild": (lambda a: a.rebuild_index(today=TODAY), "memory/INDEX.md", _to_canary),
    "wiki": (lambda a: a.new_wiki_page(WikiDraft(topic="new_page", name="Page", description="How it works",
                                                 sources=["raw/x.md"], confidence="low"), today=TODAY),
             "wiki/new_page.md", _dangling),
    "journal": (lambda a: append_journal(a, day=TODAY, happened=["more"]), "journal/2026-05/2026-05-06.md", _move_out),
    "log": (lambda a: append_log(a, _run()), "log/2026-05/2026-05-06.jsonl", _move_out),
    "init": (lambda a: Vault(a.agents_root).init_agent("finance"), "persona/IDENTITY.md", _dangling),
    "validate": (lambda a: _raise_issues(Vault(a.agents_root).validate("finance")), None, _dangling),
}

# place -> how it is planted (relative to the agent folder)
PLACES: dict[str, Callable[[Agent, Outside], Path]] = {
    "agent_folder": lambda a, o: _move_out(a.path, o),
    "memory": lambda a, o: _move_out(a.memory_dir, o),
    "wiki": lambda a, o: _move_out(a.wiki_dir, o),
    "journal": lambda a, o: _move_out(a.journal_dir, o),
    "log": lambda a, o: _move_out(a.log_dir, o),
    "persona": lambda a, o: _move_out(a.persona_dir, o),
    "intent_marker": lambda a, o: _to_canary(a.memory_dir / ".index-pending.json", o),
    "lock_file": lambda a, o: _dangling(a.path / ".agent.lock", o),
    "index": lambda a, o: _to_canary(a.memory_dir / "INDEX.md", o),
}

# Which (op, place) pairs must be refused; every other pair must succeed.
REFUSED: dict[str, set[str]] = {
    "create": {"agent_folder", "memory", "intent_marker", "lock_file", "index", "final"},
    "update": {"agent_folder", "memory", "intent_marker", "lock_file", "index", "final"},
    "touch": {"agent_folder", "memory", "intent_marker", "lock_file", "index", "final"},
    "rebuild": {"agent_folder", "memory", "intent_marker", "lock_file", "index", "final"},
    "wiki": {"agent_folder", "wiki", "lock_file", "final"},
    "journal": {"agent_folder", "journal", "lock_file", "final"},
    "log": {"agent_folder", "log", "final"},
    "init": {"agent_folder", "memory", "wiki", "journal", "log", "persona", "final"},
    # validate takes no lock unless a crashed writer left something to repair (a read-only
    # vault validates), so a planted lock file is never touched; notes seen through a planted
    # folder are reported as outside the root.
    "validate": {"agent_folder", "memory", "intent_marker"},  # the planted wiki/ holds no page to report
}


class _Issues(Exception):
    pass


def _raise_issues(issues: list) -> None:  # validate reports (never raises): turn findings into a signal
    bad = [i for i in issues if i.rule in ("outside-root", "symlink")]
    if bad:
        raise _Issues(bad)


CASES = [(op, place) for op in OPS for place in [*PLACES, "final"] if not (place == "final" and OPS[op][1] is None)]


@pytest.mark.parametrize("op,place", CASES, ids=[f"{o}-x-{p}" for o, p in CASES])
def test_no_write_follows_a_symlink_out_of_the_root(op: str, place: str, agents_root: Path, outside: Outside) -> None:
    agent = _setup(agents_root)
    run, final, plant_final = OPS[op]
    if place == "final":
        assert final is not None
        planted = plant_final(agent.path / final, outside)
    else:
        planted = PLACES[place](agent, outside)
    outside.age()
    before = outside.state()
    if place in REFUSED[op]:
        with pytest.raises((UnsafePathError, _Issues)) as exc:
            run(agent)
        if isinstance(exc.value, UnsafePathError):
            named = exc.value.path
            assert exc.value.rule in ("outside-root", "symlink")
        else:
            named = exc.value.args[0][0].path
        assert named is not None
        full = named if os.path.isabs(named) else str(agents_root / named)
        assert full.startswith(str(planted)), (named, planted)
        assert str(planted) in str(exc.value) or isinstance(exc.value, _Issues)
    else:
        run(agent)
    assert outside.state() == before, "something outside the root was created or changed"


# ------------------------------------------------------------------- the primitives, one by one
PRIMITIVES: dict[str, Callable[[Path, Path], object]] = {
    "atomic_write": lambda root, p: atomic_write(p, "x", root=root),
    "atomic_write_many": lambda root, p: atomic_write_many([(p, "x")], root=root),
    "append_line": lambda root, p: append_line(p, "x", root=root),
    "write_in_place": lambda root, p: write_in_place(p, b"x", root=root),
    "lock": lambda root, p: FileLock(p, root=root, timeout=0).acquire(),
}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
@pytest.mark.parametrize("how", ["final_to_existing", "final_dangling", "folder_out", "nested_folder_out"])
def test_every_writer_of_io_refuses(name: str, how: str, agents_root: Path, outside: Outside) -> None:
    (agents_root / "a").mkdir()
    if how == "final_to_existing":
        target = agents_root / "a" / "f"
        target.symlink_to(outside.canary)
    elif how == "final_dangling":
        target = agents_root / "a" / "f"
        target.symlink_to(outside.dir / "new")
    elif how == "folder_out":
        (agents_root / "a" / "d").symlink_to(outside.dir, target_is_directory=True)
        target = agents_root / "a" / "d" / "f"
    else:  # a symlink to an outside folder further up, reached through an inside folder
        (agents_root / "a" / "d").symlink_to(outside.dir, target_is_directory=True)
        target = agents_root / "a" / "d" / "sub" / "f"
        (outside.dir / "sub").mkdir()
    outside.age()
    before = outside.state()
    with pytest.raises(UnsafePathError) as exc:
        PRIMITIVES[name](agents_root, target)
    assert exc.value.path == str(target)
    assert outside.state() == before


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_a_symlinked_folder_that_stays_inside_is_followed(name: str, agents_root: Path) -> None:
    """The gate refuses what leads out, not symlinks as such: an alias inside the root works."""
    (agents_root / "real").mkdir()
    (agents_root / "alias").symlink_to(agents_root / "real", target_is_directory=True)
    PRIMITIVES[name](agents_root, agents_root / "alias" / "f")
    assert (agents_root / "real" / "f").is_file() and not (agents_root / "real" / "f").is_symlink()


def test_a_symlink_swapped_in_after_the_check_is_not_followed(agents_root: Path, outside: Outside,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Folders are opened component by component with O_NOFOLLOW: a race loses, it does not leak.

    The write goes through an alias inside the root (so the gate resolves and
    checks the path); right after the check, a folder on the resolved path is
    swapped for a symlink leading out.
    """
    import atomic_agents._io as io

    folder = agents_root / "real" / "memory"
    folder.mkdir(parents=True)
    (agents_root / "alias").symlink_to(agents_root / "real", target_is_directory=True)
    real_realpath = os.path.realpath

    def racing_realpath(path, *args, **kw):  # the check sees the real folder; then it is swapped
        out = real_realpath(path, *args, **kw)
        if out == real_realpath(folder) and not folder.is_symlink():
            shutil.rmtree(folder)
            folder.symlink_to(outside.dir, target_is_directory=True)
        return out

    monkeypatch.setattr(io.os.path, "realpath", racing_realpath)
    outside.age()
    before = outside.state()
    with pytest.raises(UnsafePathError, match="turned into a symlink"):
        atomic_write(agents_root / "alias" / "memory" / "note.md", "x", root=agents_root)
    assert outside.state() == before
    assert folder.is_symlink()  # the swap did happen


def test_cache_folder_symlinked_out_is_not_written(agents_root: Path, outside: Outside) -> None:
    """``lint``/``validate`` keep a parse cache in ``_cache/``: a symlinked one is simply not used."""
    agent = _setup(agents_root)
    (outside.dir / "cache").mkdir()
    (agents_root / "_cache").symlink_to(outside.dir / "cache", target_is_directory=True)
    outside.age()
    before = outside.state()
    Vault(agents_root).lint("finance")
    assert Vault(agents_root).validate("finance") == []
    assert agent.list_notes()  # reading still works
    assert outside.state() == before


# ------------------------------------------------------------------------------ the CLI
CLI: dict[str, tuple[list[str], str]] = {
    # command -> (argv after the agent, the place planted)
    "new": (["vault", "new", "finance", "--type", "feedback", "--topic", "cli_rule", "--name", "Cli rule",
             "--description", "When it matters", "--source", "observation"], "memory"),
    "update": (["vault", "update", "finance", EXISTING, "--set", "description=changed"], "intent_marker"),
    "rebuild": (["vault", "index", "rebuild", "finance"], "lock_file"),
    "journal": (["vault", "journal", "add", "finance", "--happened", "x", "--date", "2026-05-06"], "journal"),
    "log": (["vault", "log", "add", "finance", "--entry",
             '{"ts": "2026-05-06T10:00:00+00:00", "trigger": "cron", "model": "m", "input_tokens": 1, '
             '"output_tokens": 1, "status": "ok", "summary": "s"}'], "log"),
    "init": (["vault", "init", "finance"], "persona"),
    "validate": (["vault", "validate", "finance"], "agent_folder"),
}


@pytest.mark.parametrize("command", sorted(CLI))
def test_cli_exits_1_naming_the_symlink(command: str, agents_root: Path, outside: Outside,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from atomic_agents.cli import main

    agent = _setup(agents_root)
    argv, place = CLI[command]
    planted = PLACES[place](agent, outside)
    outside.age()
    before = outside.state()
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--agents-root", str(agents_root)])
    out, err = capsys.readouterr()
    assert exc.value.code == 1
    rel = os.path.relpath(planted, agents_root)
    assert (str(planted) in out + err or f"{rel}/" in out + err) and "Traceback" not in out + err
    assert outside.state() == before


@pytest.mark.parametrize("place", ["memory_folder", "db_file", "wal_file"])
def test_the_default_store_never_writes_outside_the_root(place: str, agents_root: Path, outside: Outside) -> None:
    from atomic_agents.memory import HashingEmbedder, open_store

    mem = agents_root / "_memory"
    if place == "memory_folder":
        planted = _move_out(mem, outside) if mem.exists() else _link_out(mem, outside)
    else:
        mem.mkdir(exist_ok=True)
        name = "memory.db" if place == "db_file" else "memory.db-wal"
        planted = mem / name
        planted.symlink_to(outside.dir / f"planted-{name}")
    outside.age()
    before = outside.state()
    with pytest.raises(UnsafePathError) as exc:
        open_store(agents_root=agents_root, embedder=HashingEmbedder())
    assert exc.value.path is not None and exc.value.path.startswith(str(planted))
    assert outside.state() == before


def _link_out(path: Path, outside: Outside) -> Path:
    path.symlink_to(outside.dir, target_is_directory=True)
    return path
