"""Rules specific to the filesystem backend: files, archives, locks, the README, parse errors."""

from __future__ import annotations

import os
import re
import tarfile
from pathlib import Path

import pytest

from atomic_agents.exceptions import MigrationError, MigrationSnapshotNotFound
from atomic_agents.migration import FilesystemMigrationBackend, MigrationSnapshotRef

from ._vault import V0_TO_V1, V1_TO_V2_SPEC, make_vault, tree, write_note, write_script, write_wiki

QUIET = {"announce": lambda *a: None}


def _legacy_vault(root: Path) -> FilesystemMigrationBackend:
    make_vault(root, version=None)
    write_script(root, "v0_to_v1.py", V0_TO_V1)
    return FilesystemMigrationBackend(root)


# -- MUST 2 -------------------------------------------------------------------------------
def test_must2_index_files_and_sidecar_folders_are_not_units(vault: Path) -> None:
    for folder in ("_migrations", "_dashboard", "_cache", "_memory", ".obsidian"):
        write_note(vault / folder, "x", "hidden")  # <folder>/x/memory/feedback_hidden.md
    (vault / "caldwell" / "memory" / ".feedback_draft.md").write_text("---\nname: x\n---\n")
    ids = [u.unit_id for u in FilesystemMigrationBackend(vault).enumerate_units()]
    assert len(ids) == 12
    assert not any("INDEX" in i or "hidden" in i or "draft" in i for i in ids)


def test_must2_symlinks_are_resolved_and_counted_once(vault: Path, tmp_path: Path) -> None:
    target = vault / "caldwell" / "memory" / "feedback_topic_0.md"
    (vault / "caldwell" / "memory" / "feedback_alias.md").symlink_to(target)
    os.symlink(vault / "caldwell", vault / "caldwell_mirror")  # a whole agent folder twice
    outside = write_note(tmp_path / "elsewhere", "z", "outside")
    (vault / "nova" / "memory" / "feedback_outside.md").symlink_to(outside)
    ids = [u.unit_id for u in FilesystemMigrationBackend(vault).enumerate_units()]
    assert len(ids) == len(set(ids)) == 12
    assert str(target.resolve()) in ids
    assert not any("elsewhere" in i for i in ids)  # a snapshot could not cover it


# -- MUST 3 -------------------------------------------------------------------------------
def test_must3_diff_shows_only_the_keys_the_script_changed(agents_root: Path) -> None:
    backend = _legacy_vault(agents_root)
    path = agents_root / "caldwell" / "memory" / "feedback_topic_1.md"
    before = path.read_text()
    assert backend.run_migration(1, dry_run=False, **QUIET).ok
    after = path.read_text()
    # Every original line (comment, quotes, flow list, body) survives; one line is added.
    assert after.splitlines() == before.splitlines()[:10] + ["schema_version: 1"] + before.splitlines()[10:]
    assert "  - conversation_2026-05-06  # where it came from" in after


def test_must3_writes_go_through_temp_fsync_rename(agents_root: Path, monkeypatch) -> None:
    backend = _legacy_vault(agents_root)
    import atomic_agents._io as io

    seen: list[tuple[str, bool, bool]] = []
    real = os.replace

    def spy(tmp, path, *, src_dir_fd=None, dst_dir_fd=None) -> None:
        # At rename time the temp holds the new bytes and the unit still holds the old ones.
        # Writers rename relative to their folder's descriptor (issue 7: never through a symlink).
        folder = Path(os.readlink(f"/proc/self/fd/{dst_dir_fd}")) if dst_dir_fd is not None else Path(path).parent
        src = Path(os.readlink(f"/proc/self/fd/{src_dir_fd}")) / tmp if src_dir_fd is not None else Path(tmp)
        if folder.name in ("memory", "wiki"):
            new, old = src.read_bytes(), (folder / path).read_bytes()
            seen.append((Path(path).name, b"schema_version: 1" in new, b"schema_version" not in old))
        real(tmp, path, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(io.os, "replace", spy)
    assert backend.run_migration(1, dry_run=False, **QUIET).ok
    assert len(seen) == 12 and all(new and old for _, new, old in seen)
    assert not list(agents_root.rglob(".*.tmp"))


def test_must3_handle_outside_a_run_writes_synchronously(vault: Path) -> None:
    unit = FilesystemMigrationBackend(vault).enumerate_units(dry_run=False)[0]
    meta = unit.read_frontmatter()
    meta["pinned"] = True
    unit.write_frontmatter(meta)
    assert "pinned: true" in Path(unit.unit_id).read_text()


# -- MUST 4 -------------------------------------------------------------------------------
def test_must4_snapshot_name_and_stdout_lines(agents_root: Path, capsys) -> None:
    backend = _legacy_vault(agents_root)
    result = backend.run_migration(1, dry_run=False)
    name = result.snapshot_ref.snapshot_id
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{6}_pre_v1_migration\.tar\.gz", name)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Snapshot created: {agents_root / '_migrations' / 'snapshots' / name}"
    assert out[1].startswith(f"If this migration is interrupted, run: python -m atomic_agents.migrate --rollback {name}")


def test_must4_snapshot_leaves_out_caches_logs_memory_db_and_dot_folders(vault: Path) -> None:
    (vault / "_memory").mkdir()
    (vault / "_memory" / "memory.db").write_bytes(b"SQLite format 3\0")
    (vault / "_cache").mkdir()
    (vault / "_cache" / "x.bin").write_bytes(b"cache")
    (vault / ".git").mkdir()
    (vault / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (vault / "_dashboard").mkdir()
    (vault / "_dashboard" / "index.html").write_text("<html>")
    backend = FilesystemMigrationBackend(vault)
    ref = backend.snapshot(2)
    with tarfile.open(backend.snapshot_path(ref)) as tar:
        names = tar.getnames()
    assert "caldwell/memory/feedback_topic_0.md" in names and "caldwell/persona/IDENTITY.md" in names
    assert "caldwell/memory/INDEX.md" in names  # content, though not a unit
    assert not any(n.startswith(("_memory", "_cache", ".git", "_dashboard", "_migrations")) for n in names)
    assert not any("/log/" in n or n.endswith(".jsonl") for n in names)


def test_must4_restore_keeps_files_outside_snapshot(agents_root: Path) -> None:
    backend = _legacy_vault(agents_root)
    (agents_root / ".git").mkdir()
    (agents_root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    result = backend.run_migration(1, dry_run=False, **QUIET)
    # After the snapshot: logs grow, git moves on, an agent writes a new journal file.
    log = agents_root / "caldwell" / "log" / "2026-05" / "2026-05-06.jsonl"
    log.write_text(log.read_text() + '{"ts": "later"}\n')
    (agents_root / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    (agents_root / "nova" / "journal" / "2026-05" / "2026-05-07.md").write_text("# new day\n")
    backend.restore_and_audit(result.snapshot_ref)
    assert log.read_text().endswith('{"ts": "later"}\n')
    assert (agents_root / ".git" / "HEAD").read_text() == "ref: refs/heads/other\n"
    assert (agents_root / "nova" / "journal" / "2026-05" / "2026-05-07.md").exists()
    assert backend.read_schema_version() == 0


def test_must4_restore_is_byte_identical_for_captured_files(agents_root: Path) -> None:
    backend = _legacy_vault(agents_root)
    before = tree(agents_root)
    result = backend.run_migration(1, dry_run=False, **QUIET)
    (agents_root / "caldwell" / "memory" / "feedback_topic_2.md").unlink()  # a deleted unit comes back too
    backend.restore(result.snapshot_ref)
    assert tree(agents_root) == before


def test_must4_corrupt_archive_leaves_the_live_vault_untouched(agents_root: Path) -> None:
    backend = _legacy_vault(agents_root)
    result = backend.run_migration(1, dry_run=False, **QUIET)
    migrated = tree(agents_root)
    archive = backend.snapshot_path(result.snapshot_ref)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])  # truncated mid-stream
    with pytest.raises(MigrationError, match="unreadable"):
        backend.restore_and_audit(result.snapshot_ref)
    assert tree(agents_root) == migrated
    flipped = bytearray(data)
    flipped[-6] ^= 0xFF  # CRC trailer
    archive.write_bytes(bytes(flipped))
    with pytest.raises(MigrationError):
        backend.restore(result.snapshot_ref)
    assert tree(agents_root) == migrated
    assert not list((agents_root / "_migrations").glob(".restore-*"))  # staging cleaned up


def test_must4_snapshots_and_audit_survive_restore(agents_root: Path) -> None:
    backend = _legacy_vault(agents_root)
    result = backend.run_migration(1, dry_run=False, **QUIET)
    backend.restore_and_audit(result.snapshot_ref)
    assert backend.snapshot_path(result.snapshot_ref).is_file()
    assert len(backend.audit_path.read_text().splitlines()) == 2
    assert (agents_root / "_migrations" / "v0_to_v1.py").is_file()


def test_must4_restore_removes_debris_of_killed_atomic_writes(agents_root: Path) -> None:
    backend = _legacy_vault(agents_root)
    before = tree(agents_root)
    ref = backend.snapshot(1)
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    debris = agents_root / "caldwell" / "memory" / f".feedback_topic_0.md.{dead.pid}.123456789.tmp"
    debris.write_text("half")
    live_writer = agents_root / "caldwell" / "memory" / f".feedback_topic_1.md.{os.getppid()}.1.tmp"
    live_writer.write_text("a live writer's rename is still coming")
    unrelated = agents_root / "caldwell" / "memory" / ".my_editor_swap.tmp"
    unrelated.write_text("keep")
    backend.restore(ref)
    assert not debris.exists() and unrelated.exists() and live_writer.exists()
    unrelated.unlink()
    live_writer.unlink()
    assert tree(agents_root) == before


def test_must4_unknown_snapshot_is_reported(vault: Path) -> None:
    backend = FilesystemMigrationBackend(vault)
    with pytest.raises(MigrationSnapshotNotFound):
        backend.restore_and_audit("2020-01-01T000000_pre_v9_migration.tar.gz")
    with pytest.raises(MigrationError, match="belongs to backend"):
        backend.restore(MigrationSnapshotRef("postgres", "x"))


# -- parse errors, lock, README, scripts ------------------------------------------------------
def _break(path: Path) -> None:
    path.write_text(path.read_text().replace('description: "When', "description: When: it"))


def test_unparseable_unit_is_reported_by_file_and_line_everywhere(agents_root: Path) -> None:
    backend = _legacy_vault(agents_root)
    bad = agents_root / "nova" / "memory" / "feedback_topic_3.md"
    _break(bad)
    status = backend.status()
    [u] = status.unparseable
    assert u.unit_id == str(bad.resolve()) and u.line == 3
    dry = backend.run_migration(1, dry_run=True)
    assert not dry.ok and "nothing was written" in dry.error
    assert any(f"{bad.resolve()}:3" in e["error"] for e in dry.validation_errors)
    before = tree(agents_root)
    with pytest.raises(MigrationError, match=re.escape(f"{bad.resolve()}:3")):
        backend.run_migration(1, dry_run=False, **QUIET)
    assert tree(agents_root) == before
    assert backend.list_snapshots() == []  # refused before its snapshot


def test_unparseable_unit_is_never_counted_as_current(vault: Path) -> None:
    _break(vault / "nova" / "memory" / "feedback_topic_3.md")
    result = FilesystemMigrationBackend(vault).run_migration(1, dry_run=True)
    assert not result.ok and result.validation_errors


def test_run_holds_every_agent_write_lock(agents_root: Path) -> None:
    from atomic_agents._io import FileLock
    from atomic_agents.exceptions import LockBusyError

    backend = _legacy_vault(agents_root)
    blocked: list[str] = []

    def during_run(ref, text) -> None:
        for agent in ("caldwell", "nova"):
            try:
                FileLock(agents_root / agent / ".agent.lock", root=agents_root, timeout=0).acquire()
            except LockBusyError:
                blocked.append(agent)

    assert backend.run_migration(1, dry_run=False, announce=during_run).ok
    assert blocked == ["caldwell", "nova"]
    with FileLock(agents_root / "nova" / ".agent.lock", root=agents_root, timeout=0):  # released afterwards
        pass


def test_busy_agent_refuses_the_run_and_releases_everything(agents_root: Path, monkeypatch) -> None:
    from atomic_agents._io import FileLock

    monkeypatch.setattr("atomic_agents.migration._filesystem.AGENT_LOCK_WAIT", 0.05)
    backend = _legacy_vault(agents_root)
    before = tree(agents_root)
    with FileLock(agents_root / "nova" / ".agent.lock", root=agents_root, timeout=0):
        with pytest.raises(MigrationError, match="agent 'nova' is being written to"):
            backend.run_migration(1, dry_run=False, **QUIET)
    assert tree(agents_root) == before
    assert backend.run_migration(1, dry_run=False, **QUIET).ok  # every lock was released


def test_second_runner_is_refused_at_once(agents_root: Path) -> None:
    backend = _legacy_vault(agents_root)
    with backend._lock():
        with pytest.raises(MigrationError, match="Another migration is already running"):
            FilesystemMigrationBackend(agents_root).run_migration(1, dry_run=False)
        with pytest.raises(MigrationError, match="Another migration is already running"):
            FilesystemMigrationBackend(agents_root).restore_and_audit("whatever.tar.gz")


def test_readme_gains_a_history_line_after_a_real_migration(agents_root: Path) -> None:
    backend = _legacy_vault(agents_root)
    backend.run_migration(1, dry_run=True)
    assert not (agents_root / "_migrations" / "README.md").exists()
    result = backend.run_migration(1, dry_run=False, **QUIET)
    text = (agents_root / "_migrations" / "README.md").read_text()
    [line] = [ln for ln in text.splitlines() if ln.startswith("- ")]
    assert "v0 -> v1" in line and "12 unit change(s)" in line and result.snapshot_ref.snapshot_id in line


@pytest.mark.parametrize(
    ("files", "target", "match"),
    [
        ({}, 1, r"missing migration script .*v0_to_v1\.py"),
        ({"v0_to_v1.py": V0_TO_V1}, 2, r"missing migration script .*v1_to_v2\.py"),
        ({"v0_to_v1.py": "def oops(:\n"}, 1, r"v0_to_v1\.py is broken: SyntaxError"),
        ({"v0_to_v1.py": V0_TO_V1.replace("TO_VERSION = 1", "TO_VERSION = 3")}, 1, r"FROM_VERSION/TO_VERSION"),
        ({"v0_to_v1.py": "FROM_VERSION = 0\nTO_VERSION = 1\ndef applies_to(path): return True\n"
                         "def migrate(path, dry_run): return {}\n"}, 1, r"path-shaped"),
        ({"v0_to_v1.py": "FROM_VERSION = 0\nTO_VERSION = 1\ndef applies_to(u): return True\n"}, 1, r"no migrate"),
    ],
    ids=["absent", "gap", "syntax", "versions", "old-contract", "no-migrate"],
)
def test_chain_must_be_contiguous_and_scripts_sound(agents_root: Path, files: dict, target: int, match: str) -> None:
    make_vault(agents_root, version=None)
    for name, src in files.items():
        write_script(agents_root, name, src)
    before = tree(agents_root)
    with pytest.raises(MigrationError, match=match):
        FilesystemMigrationBackend(agents_root).run_migration(target, dry_run=False)
    assert tree(agents_root) == before


def test_target_below_current_is_refused_forward_only(vault: Path) -> None:
    with pytest.raises(MigrationError, match="forward only"):
        FilesystemMigrationBackend(vault).run_migration(0, dry_run=True)


def test_multi_step_chain_runs_in_order(agents_root: Path, monkeypatch) -> None:
    from ._vault import V1_TO_V2_GENTLE

    # The package only adopts v2 when CURRENT_SCHEMA_VERSION is bumped: do that here.
    monkeypatch.setattr("atomic_agents._format._validate.CURRENT_SCHEMA_VERSION", 2)
    make_vault(agents_root, version=None, agents=("caldwell",))
    write_wiki(agents_root, "caldwell", "already_v1", version=1)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    write_script(agents_root, "v1_to_v2.py", V1_TO_V2_GENTLE)
    backend = FilesystemMigrationBackend(agents_root)
    dry = backend.run_migration(2, dry_run=True)
    assert dry.ok and [s.name for s in dry.plan.scripts] == ["v0_to_v1.py", "v1_to_v2.py"]
    assert (len(dry.units_touched), dry.units_skipped) == (6 + 7, 1)  # v1_to_v2 sees v0_to_v1's dry-run output
    result = backend.run_migration(2, dry_run=False, **QUIET)
    assert result.ok and backend.read_schema_version() == 2


def test_dry_run_script_raising_reports_and_writes_nothing(agents_root: Path) -> None:
    from .test_conformance import RAISES_MIDWAY

    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", RAISES_MIDWAY)
    before = tree(agents_root)
    result = FilesystemMigrationBackend(agents_root).run_migration(1, dry_run=True)
    assert not result.ok and "boom" in result.error and "nothing was written" in result.error
    assert tree(agents_root) == before
    assert FilesystemMigrationBackend(agents_root).list_snapshots() == []


def test_status_cli_names_unparseable_file_and_line(vault: Path, capsys) -> None:
    from atomic_agents.migrate import main

    bad = vault / "nova" / "wiki" / "concept_1.md"
    bad.write_text(bad.read_text().replace("description: How", "description: How: it"))
    with pytest.raises(SystemExit) as exc:
        main(["--status", "--agents-root", str(vault)])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert f"does not parse: {bad.resolve()}:4:" in out  # line 4: the description


def test_must4_restore_refuses_an_archive_writing_through_its_own_symlink(vault: Path, tmp_path: Path) -> None:
    import io

    backend = FilesystemMigrationBackend(vault)
    outside = tmp_path / "outside"
    outside.mkdir()
    archive = backend.snapshots_dir / "2026-01-01T000000_pre_v2_migration.tar.gz"
    archive.parent.mkdir(parents=True)
    with tarfile.open(archive, "w:gz") as tar:
        link = tarfile.TarInfo("caldwell/evil")
        # a target inside the vault (one outside is refused on its own: tests/security)
        link.type, link.linkname = tarfile.SYMTYPE, "memory"
        tar.addfile(link)
        data = b"pwned"
        member = tarfile.TarInfo("caldwell/evil/x.md")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    before = tree(vault)
    with pytest.raises(MigrationError, match="under a symlink"):
        backend.restore_and_audit(archive.name)
    assert list(outside.iterdir()) == [] and tree(vault) == before
