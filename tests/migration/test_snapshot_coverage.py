"""Every unit a run can touch is inside the run's snapshot, whatever the vault's folders are called.

The property: for any generated vault (agent folders named like sidecars,
log folders, caches, dot-folders, and symlinks from unit folders to anywhere
in the vault), the enumerated units are a subset of the snapshot's members.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atomic_agents.migration import FilesystemMigrationBackend
from atomic_agents.migration._layout import covers_unit, is_excluded

from ._vault import V0_TO_V1, make_vault, tree, write_note, write_script, write_wiki

QUIET = {"announce": lambda *a: None}

# Names chosen to collide with every exclusion the snapshot knows, plus ordinary ones.
_AGENT = st.sampled_from(["log", "logs", "memory", "wiki", "cache", "_cache", "__pycache__", "_memory", "_x",
                          ".hidden", "caldwell", "nova", "raw", "journal", "migrations", "a.jsonl", "b.lock"])
_FOLDER = st.sampled_from(["memory", "wiki", "log", "logs", "raw", "_cache", "__pycache__", ".obsidian"])
_NAME = st.sampled_from(["feedback_x.md", "user_y.md", "INDEX.md", "INDEX_decisions.md", ".draft.md", "log.md",
                         "logs.md", "z.jsonl.md", "notes.txt", "run.jsonl", "w.lock"])
_FILE = st.tuples(_AGENT, _FOLDER, _NAME)


def _snapshot_members(backend: FilesystemMigrationBackend) -> set[str]:
    ref = backend.snapshot(1)
    with tarfile.open(backend.snapshot_path(ref)) as tar:
        return {m.name for m in tar.getmembers() if m.isfile()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(_FILE, min_size=1, max_size=12, unique=True),
    file_links=st.lists(st.tuples(_FILE, st.integers(min_value=0)), max_size=4),
    dir_links=st.lists(st.tuples(_AGENT, _FOLDER, st.integers(min_value=0)), max_size=3),
)
def test_enumerated_units_are_a_subset_of_the_snapshot(files, file_links, dir_links) -> None:
    base = Path(tempfile.mkdtemp(prefix="aa-cover-"))
    root = base / "agents"
    try:
        made: list[Path] = []
        for agent, folder, name in files:
            p = root / agent / folder / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("---\nname: x\n---\nbody\n", encoding="utf-8")
            made.append(p)
        for (agent, folder, name), i in file_links:  # a unit-shaped name pointing at any file in the vault
            link = root / agent / folder / name
            if link.exists() or link.is_symlink():
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(made[i % len(made)], link.parent))
        dirs = sorted({p.parent for p in made})
        for agent, folder, i in dir_links:  # a whole unit folder (or agent) that is a link to another folder
            link = root / agent / folder
            if link.exists() or link.is_symlink():
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(dirs[i % len(dirs)], link.parent), target_is_directory=True)

        backend = FilesystemMigrationBackend(root)
        real_root = os.path.realpath(root)
        units = [os.path.relpath(u.unit_id, real_root) for u in backend.enumerate_units()]
        members = _snapshot_members(backend)
        missing = [u for u in units if u not in members]
        assert not missing, f"units left out of the snapshot: {missing}"
        # Not vacuous: a plain unit file in an agent named like a log/cache folder is a unit.
        for agent, folder, name in files:
            plain = not (root / agent).is_symlink() and not (root / agent / folder).is_symlink()
            if plain and folder in ("memory", "wiki") and agent in ("log", "logs", "memory", "wiki", "cache") \
                    and name in ("feedback_x.md", "user_y.md", "log.md", "logs.md", "z.jsonl.md"):
                assert f"{agent}/{folder}/{name}" in units
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_agents_named_log_or_logs_are_migrated_and_rolled_back_with_the_rest(agents_root: Path) -> None:
    make_vault(agents_root, version=None, agents=("log", "logs", "caldwell"))
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    write_note(agents_root, "caldwell", "broken", version=None).write_text("---\nname: broken\n---\n")  # fails validation
    before = tree(agents_root)
    result = FilesystemMigrationBackend(agents_root).run_migration(1, dry_run=False, **QUIET)
    assert result.rolled_back and not result.ok
    assert len(result.units_touched) == 19  # 6 units per agent + the broken one
    assert tree(agents_root) == before  # the log/logs agents too: no half-migrated vault


def test_an_agents_own_log_folder_stays_out_of_the_snapshot(vault: Path) -> None:
    (vault / "caldwell" / "log" / "notes.md").write_text("run notes\n")
    (vault / "caldwell" / "raw" / "log").mkdir(parents=True)
    (vault / "caldwell" / "raw" / "log" / "kept.md").write_text("kept\n")  # 'log' deeper down is content
    members = _snapshot_members(FilesystemMigrationBackend(vault))
    assert not any(m.startswith("caldwell/log/") for m in members)
    assert "caldwell/raw/log/kept.md" in members
    assert "caldwell/memory/feedback_topic_0.md" in members


def test_a_unit_folder_linked_into_an_excluded_place_is_not_a_unit(vault: Path) -> None:
    cache = vault / "caldwell" / "log" / "shadow"
    cache.mkdir(parents=True)
    write_wiki(vault, "tmpagent", "x")
    (vault / "nova" / "wiki").rename(vault / "nova" / "wiki_old")
    os.symlink(cache, vault / "nova" / "wiki")
    (cache / "page.md").write_text("---\nname: p\n---\n")
    ids = [u.unit_id for u in FilesystemMigrationBackend(vault).enumerate_units()]
    assert not any("shadow" in i for i in ids)


def test_the_rule_itself() -> None:
    assert is_excluded(("log",), is_dir=True) is False  # an agent called log
    assert is_excluded(("caldwell", "log"), is_dir=True) is True
    assert is_excluded(("caldwell", "log", "2026-05", "x.jsonl"), is_dir=False) is True
    assert is_excluded(("caldwell", "raw", "log"), is_dir=True) is False
    assert is_excluded(("_memory", "store.db"), is_dir=False) is True
    assert is_excluded(("a", "memory", ".x.md"), is_dir=False) is True
    assert covers_unit(("logs", "memory", "x.md")) is True
    assert covers_unit(("a", "_cache", "x.md")) is False
    assert covers_unit(("a", "..", "x.md")) is False
